/* cuda-llm-lsp: pre-included in every NVRTC compile.
 * nvcc implicitly includes cuda_runtime.h, which brings the host <math.h>, <stdlib.h>, <cmath>
 * and <cstdlib> with it; NVRTC has none of them. This header gives device code the same names
 * so a file that nvcc accepts gets no false errors here. */
#ifndef CUDA_LLM_PRELUDE_H
#define CUDA_LLM_PRELUDE_H

namespace std {
using ::size_t;
using ::ptrdiff_t;
}

/* nvcc's host headers (glibc's <stdlib.h> -> <sys/types.h>, libstdc++) declare these for every
 * file, whatever it includes: <stdint.h>'s types (spelled as libcu++ spells them under NVRTC,
 * so <cuda/std/cstdint> may repeat them) and glibc's short unsigned names. */
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef signed long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;
#if defined(CUDA_LLM_HOST_LINUX)
/* <sys/types.h>'s signed sizes (glibc, LP64): StarPU's `typedef ssize_t starpu_ssize_t;` */
typedef long ssize_t;
typedef long off_t;
#endif

/* nvcc's device pass declares the device runtime API for every file (cuda_runtime.h ->
 * cuda_runtime_api.h -> cuda_device_runtime_api.h, whole-program or -rdc); NVRTC declares it
 * only with -rdc (cuda_runtime_api.h's guard: __CUDACC_RDC__ || !__CUDACC_RTC__). Without it a
 * kernel calling cudaGraphSetConditional (a builtin that needs no -rdc) gets "undefined". */
#if !defined(__CUDACC_RDC__) && defined(__has_include)
/* (NVRTC has the header built in, but what it includes, crt/host_defines.h, only where the
 * toolkit's include directory is searched: without it, no declarations rather than an error) */
#if __has_include(<cuda_device_runtime_api.h>) && __has_include(<crt/host_defines.h>)
#if !defined(__CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__)
#define __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#define CUDA_LLM_UNDEF_INTERNAL_HEADERS
#endif
#include <cuda_device_runtime_api.h>
#if defined(CUDA_LLM_UNDEF_INTERNAL_HEADERS)
#undef __CUDA_INCLUDE_COMPILER_INTERNAL_HEADERS__
#undef CUDA_LLM_UNDEF_INTERNAL_HEADERS
#endif
#endif
#endif

/* CCCL unrolls its type-list metafunctions 10 deep under nvcc and 16 deep under any other
 * compiler, NVRTC included (<cuda/std/__type_traits/type_list.h>). The preprocessor repetition
 * for 16 cost NVRTC's front end 1.2 s of every parse that reaches a libcu++ header
 * (<cooperative_groups.h>, <cuda/atomic>, CUB; 0.1 s for 10). nvcc's value: the metafunctions
 * mean the same, their instantiation depths are the arbiter's, and a cold parse of
 * <cooperative_groups.h> takes 0.5 s instead of 1.8 s. A -D of the project's wins. */
#ifndef _CCCL_META_UNROLL_LIMIT
#define _CCCL_META_UNROLL_LIMIT 10
#endif

/* the extra parameter that `compile/static_overloads.py` gives a non-static member function
 * template whose static twin has the same parameters (ThunderKittens' gl): nvcc's GNU-mode
 * front end takes such a pair, NVRTC's strict one does not */
struct cuda_llm_nonstatic_tag {};

/* nvcc's device pass sees the host compiler's platform macros; NVRTC defines none. */
/* GCC's `__extension__` (ggml's GGML_EXTENSION on an anonymous union): nvcc's GNU-mode front
 * end takes it, NVRTC's does not. It only silences pedantic warnings: nothing is lost. */
#define __extension__

#if defined(CUDA_LLM_HOST_LINUX) && !defined(__linux__)
#define __linux__ 1
#define __linux 1
#define __gnu_linux__ 1
#define __unix__ 1
#define __unix 1
#endif

#ifndef INFINITY
#define INFINITY (__builtin_bit_cast(float, 0x7f800000u))
#endif
#ifndef NAN
#define NAN (__builtin_bit_cast(float, 0x7fc00000u))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_bit_cast(float, 0x7f800000u))
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_bit_cast(double, 0x7ff0000000000000ull))
#endif
#ifndef MAXFLOAT
#define MAXFLOAT 3.40282347e+38F
#endif

/* Spelled exactly as glibc's <math.h>, so a file that repeats them gets no redefinition warning. */
# define M_E		2.7182818284590452354	/* e */
# define M_LOG2E	1.4426950408889634074	/* log_2 e */
# define M_LOG10E	0.43429448190325182765	/* log_10 e */
# define M_LN2		0.69314718055994530942	/* log_e 2 */
# define M_LN10		2.30258509299404568402	/* log_e 10 */
# define M_PI		3.14159265358979323846	/* pi */
# define M_PI_2		1.57079632679489661923	/* pi/2 */
# define M_PI_4		0.78539816339744830962	/* pi/4 */
# define M_1_PI		0.31830988618379067154	/* 1/pi */
# define M_2_PI		0.63661977236758134308	/* 2/pi */
# define M_2_SQRTPI	1.12837916709551257390	/* 2/sqrt(pi) */
# define M_SQRT2	1.41421356237309504880	/* sqrt(2) */
# define M_SQRT1_2	0.70710678118654752440	/* 1/sqrt(2) */

/* std:: spellings of the math functions NVRTC declares in the global namespace. */
namespace std {
using ::abs; using ::acos; using ::acosh; using ::asin; using ::asinh; using ::atan;
using ::atan2; using ::atanh; using ::cbrt; using ::ceil; using ::copysign; using ::cos;
using ::cosh; using ::erf; using ::erfc; using ::exp; using ::exp2; using ::expm1; using ::fabs;
using ::fdim; using ::floor; using ::fma; using ::fmax; using ::fmin; using ::fmod;
using ::frexp; using ::hypot; using ::ilogb; using ::isfinite; using ::isinf; using ::isnan;
using ::ldexp; using ::lgamma; using ::llrint; using ::llround; using ::log; using ::log10;
using ::log1p; using ::log2; using ::logb; using ::lrint; using ::lround; using ::modf;
using ::nearbyint; using ::nextafter; using ::pow; using ::remainder; using ::remquo;
using ::rint; using ::round; using ::scalbln; using ::scalbn; using ::signbit; using ::sin;
using ::sinh; using ::sqrt; using ::tan; using ::tanh; using ::tgamma; using ::trunc;
using ::sqrtf; using ::expf; using ::logf; using ::fabsf; using ::fmaxf; using ::fminf;
using ::powf; using ::sinf; using ::cosf; using ::tanhf; using ::floorf; using ::ceilf;
using ::roundf; using ::truncf; using ::fmaf; using ::exp2f; using ::log2f; using ::erff;
using ::printf; using ::malloc; using ::free; using ::memcpy; using ::memset;
}

#endif
