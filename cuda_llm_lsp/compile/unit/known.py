"""The names of known libraries and platforms the device unit judges by: tables only, no logic.

A "this library's macro is host-only" fix is a row here (with its test), not a change to the
walker. Read by the walker (most), the masks (`NAMESPACE_MACROS`) and the includes
(`DROPPED_LIBRARIES`)."""

from __future__ import annotations

from cuda_llm_lsp.compile import headers as std_headers
from cuda_llm_lsp.compile import std_names

# macros that open and close a library's namespace: what tree-sitter reads in their place
NAMESPACE_MACROS = {"THRUST_NAMESPACE_BEGIN": "namespace thrust {", "THRUST_NAMESPACE_END": "}"}
# Header prefix -> namespace of a host-only library NVRTC cannot compile (Thrust needs host
# std:: headers): user items naming that namespace are left out of the unit with a note, since
# NVRTC could only report that the namespace is unknown; the nvcc check on save covers them.
DROPPED_LIBRARIES = {"thrust/": "thrust"}
# Host calling-convention macros (empty on Linux): a function head holding one is host code.
CALLING_CONVENTIONS = frozenset(
    {"CUDART_CB", "CUDARTAPI", "CUDAAPI", "CUBLASAPI", "CUSPARSEAPI", "CUFFTAPI", "CURANDAPI",
     "NVTX_API", "WINAPI", "APIENTRY", "CALLBACK", "__stdcall", "__cdecl"}
)  # fmt: skip
# C types that only host headers declare (dropped from the unit): a struct member of one of
# them is host-only (a logger's `glob_t`, a timer's `struct timeval`); the struct stays.
HOST_TYPES = std_headers.names(
    """
    glob_t DIR dirent pthread_t pthread_mutex_t pthread_cond_t pthread_attr_t pthread_once_t
    pthread_rwlock_t pthread_barrier_t pthread_spinlock_t pthread_key_t pthread_mutexattr_t
    pthread_condattr_t pthread_rwlockattr_t pthread_barrierattr_t sem_t timeval timespec timezone tm
    jmp_buf sigjmp_buf sigset_t va_list fpos_t mbstate_t locale_t stat rusage tms pid_t
    """
)
# std:: names the prelude and stand-ins provide; any other std:: name marks host-only code.
STD_PROVIDED = std_headers.names(
    """
    int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t
    intmax_t uintmax_t size_t ptrdiff_t nullptr_t abs acos acosh asin asinh atan atan2 atanh
    cbrt ceil copysign cos cosh erf erfc exp exp2 expm1 fabs fdim floor fma fmax fmin fmod frexp
    hypot ilogb isfinite isinf isnan ldexp lgamma llrint llround log log10 log1p log2 logb lrint
    lround modf nearbyint nextafter pow remainder remquo rint round scalbln scalbn signbit sin
    sinh sqrt tan tanh tgamma trunc sqrtf expf logf fabsf fmaxf fminf powf sinf cosf tanhf floorf
    ceilf roundf truncf fmaf exp2f log2f erff printf malloc free memcpy memset
    integral_constant true_type false_type bool_constant is_same is_same_v enable_if enable_if_t
    conditional conditional_t remove_const remove_volatile remove_cv remove_cv_t remove_const_t
    remove_reference remove_reference_t remove_pointer remove_pointer_t remove_cvref
    remove_cvref_t decay decay_t is_pointer is_pointer_v is_const is_const_v is_integral
    is_integral_v is_floating_point is_floating_point_v is_arithmetic is_arithmetic_v is_signed
    is_signed_v is_unsigned is_unsigned_v initializer_list
    """
)  # initializer_list: NVRTC's own, built in (faiss's `Tensor(T*, std::initializer_list<I>)`)
# what a constexpr function or constant may use and stay device code (relaxed constexpr): those
# and the names the unit gives from libcu++ (`std_names`; mamba's `constexpr size_t
# custom_max(std::initializer_list<size_t> l) { return std::max(l); }`, faiss's `constexpr float
# kFloatMax = std::numeric_limits<float>::max();`).
# Not for aliases and members: a host `using pair = std::tuple<...>;` would cost a libcu++ header
STD_FOR_CONSTEXPR = STD_PROVIDED | frozenset([*std_names.NAMES, "numbers"])
#: Macros that define a host function around the body that follows them.
HOST_DEFINITION_MACROS = frozenset(
    {"PYBIND11_MODULE", "TORCH_LIBRARY", "TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT",
     "TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TEST_CASE", "BENCHMARK"}
)  # fmt: skip
