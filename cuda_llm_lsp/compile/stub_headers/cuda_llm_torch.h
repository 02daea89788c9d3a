/* cuda-llm-lsp stand-in for PyTorch's headers (<torch/extension.h>, <ATen/...>, <c10/...>) in
 * the fast check. Those are host C++ (thousands of headers NVRTC cannot read); what a PyTorch
 * extension's kernels use of them is declared here, the way c10 defines it for device code:
 * c10::Half and c10::BFloat16 (stored as the CUDA half types, converted through float), the
 * packed tensor accessors with their pointer traits, and the C10_* macros. Host code (the
 * AT_DISPATCH_* lambdas, TORCH_CHECK, at::cuda streams) is blanked before NVRTC sees it; the
 * nvcc check compiles the real headers. */
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <type_traits> /* c10's headers bring it: extensions' kernels use std::conditional_t */

#ifndef C10_HOST_DEVICE
#define C10_HOST_DEVICE __host__ __device__
#define C10_DEVICE __device__
#define C10_HOST __host__
#define C10_ALWAYS_INLINE __forceinline__
#define C10_LAUNCH_BOUNDS_0 __launch_bounds__(256, 4)
#define C10_LAUNCH_BOUNDS_1(max_threads_per_block) __launch_bounds__((max_threads_per_block))
#define C10_LAUNCH_BOUNDS_2(max_threads_per_block, min_blocks_per_sm) \
  __launch_bounds__((max_threads_per_block), (min_blocks_per_sm))
#define C10_RESTRICT __restrict__
#define C10_WARP_SIZE 32
#define C10_CUDA_KERNEL_LAUNCH_CHECK()
#endif

/* <ATen/cuda/CUDAContext.h> brings cuBLAS, cuBLASLt, cuSPARSE and cuSOLVER's headers: an
 * extension's own headers name their handle types in host prototypes (exllamav2's q_mlp.cuh).
 * The same opaque typedefs as those headers give, so the real ones may follow. */
typedef struct cublasContext* cublasHandle_t;
typedef struct cublasLtContext* cublasLtHandle_t;
typedef struct cusparseContext* cusparseHandle_t;
typedef struct cusolverDnContext* cusolverDnHandle_t;

namespace c10 {
struct alignas(2) Half {
  unsigned short x;
  Half() = default;
  __host__ __device__ Half(float value) : x(__half_as_ushort(__float2half(value))) {}
  __host__ __device__ Half(__half value) : x(__half_as_ushort(value)) {}
  __host__ __device__ operator float() const { return __half2float(__ushort_as_half(x)); }
  __host__ __device__ operator __half() const { return __ushort_as_half(x); }
};
struct alignas(2) BFloat16 {
  unsigned short x;
  BFloat16() = default;
  __host__ __device__ BFloat16(float value)
      : x(__bfloat16_as_ushort(__float2bfloat16(value))) {}
  __host__ __device__ BFloat16(__nv_bfloat16 value) : x(__bfloat16_as_ushort(value)) {}
  __host__ __device__ operator float() const {
    return __bfloat162float(__ushort_as_bfloat16(x));
  }
  /* explicit, as in c10 (torch/headeronly/util/BFloat16.h): implicit, it made every
   * BFloat16 + BFloat16 ambiguous between float's + and cuda_bf16.h's */
  __host__ __device__ explicit operator __nv_bfloat16() const { return __ushort_as_bfloat16(x); }
};

/* c10's arithmetic on Half and BFloat16 (torch/headeronly/util/Half.h, BFloat16.h): through
 * float, the result of the type's own kind with itself and the integers, float or double with
 * those. Without them `Half + Half` chose between float's built-in + and cuda_fp16.h's (where
 * a build undefines __CUDA_NO_HALF_OPERATORS__), an ambiguity nvcc never sees. */
#define CUDA_LLM_C10_ARITHMETIC(T)                                                           \
  __host__ __device__ inline T operator-(const T& a) { return -static_cast<float>(a); }      \
  CUDA_LLM_C10_OP(T, +) CUDA_LLM_C10_OP(T, -) CUDA_LLM_C10_OP(T, *) CUDA_LLM_C10_OP(T, /)
#define CUDA_LLM_C10_OP(T, op)                                                               \
  __host__ __device__ inline T operator op(const T& a, const T& b) {                         \
    return static_cast<float>(a) op static_cast<float>(b);                                   \
  }                                                                                          \
  __host__ __device__ inline T& operator op##=(T& a, const T& b) { return a = a op b; }      \
  __host__ __device__ inline float operator op(T a, float b) { return static_cast<float>(a) op b; } \
  __host__ __device__ inline float operator op(float a, T b) { return a op static_cast<float>(b); } \
  __host__ __device__ inline float& operator op##=(float& a, const T& b) {                   \
    return a op##= static_cast<float>(b);                                                    \
  }                                                                                          \
  __host__ __device__ inline double operator op(T a, double b) {                             \
    return static_cast<double>(a) op b;                                                      \
  }                                                                                          \
  __host__ __device__ inline double operator op(double a, T b) {                             \
    return a op static_cast<double>(b);                                                      \
  }                                                                                          \
  __host__ __device__ inline T operator op(T a, int b) { return a op static_cast<T>(b); }    \
  __host__ __device__ inline T operator op(int a, T b) { return static_cast<T>(a) op b; }    \
  __host__ __device__ inline T operator op(T a, int64_t b) { return a op static_cast<T>(b); } \
  __host__ __device__ inline T operator op(int64_t a, T b) { return static_cast<T>(a) op b; }
CUDA_LLM_C10_ARITHMETIC(Half)
CUDA_LLM_C10_ARITHMETIC(BFloat16)
#undef CUDA_LLM_C10_OP
#undef CUDA_LLM_C10_ARITHMETIC
/* c10 compares BFloat16 lvalues itself (std::max and std::min use them) */
__host__ __device__ inline bool operator>(BFloat16& lhs, BFloat16& rhs) {
  return float(lhs) > float(rhs);
}
__host__ __device__ inline bool operator<(BFloat16& lhs, BFloat16& rhs) {
  return float(lhs) < float(rhs);
}

/* c10::complex<T> as kernels use it (mamba's selective scan): public real_ and imag_, the
 * constructors and arithmetic of std::complex (constexpr, usable from device code under the
 * --expt-relaxed-constexpr torch builds with), float <-> double conversions (widening implicit),
 * and the std::real / imag / abs / arg / norm / conj overloads c10/util/complex.h adds. */
template <typename T>
struct alignas(sizeof(T) * 2) complex {
  using value_type = T;
  T real_ = T(0);
  T imag_ = T(0);
  constexpr complex() = default;
  __host__ __device__ constexpr complex(const T& re, const T& im = T()) : real_(re), imag_(im) {}
  template <typename U = T, typename std::enable_if<std::is_same<U, float>::value, int>::type = 0>
  __host__ __device__ explicit constexpr complex(const complex<double>& other)
      : real_(other.real_), imag_(other.imag_) {}
  template <typename U = T, typename std::enable_if<std::is_same<U, double>::value, int>::type = 0>
  __host__ __device__ constexpr complex(const complex<float>& other)
      : real_(other.real_), imag_(other.imag_) {}
  __host__ __device__ constexpr T real() const { return real_; }
  __host__ __device__ constexpr T imag() const { return imag_; }
  __host__ __device__ constexpr void real(T value) { real_ = value; }
  __host__ __device__ constexpr void imag(T value) { imag_ = value; }
  __host__ __device__ explicit constexpr operator bool() const { return real_ || imag_; }
  constexpr complex& operator=(T re) { real_ = re; imag_ = T(); return *this; }
  constexpr complex& operator+=(T re) { real_ += re; return *this; }
  constexpr complex& operator-=(T re) { real_ -= re; return *this; }
  constexpr complex& operator*=(T re) { real_ *= re; imag_ *= re; return *this; }
  constexpr complex& operator/=(T re) { real_ /= re; imag_ /= re; return *this; }
  template <typename U>
  constexpr complex& operator=(const complex<U>& rhs) {
    real_ = rhs.real(); imag_ = rhs.imag(); return *this;
  }
  template <typename U>
  constexpr complex& operator+=(const complex<U>& rhs) {
    real_ += rhs.real(); imag_ += rhs.imag(); return *this;
  }
  template <typename U>
  constexpr complex& operator-=(const complex<U>& rhs) {
    real_ -= rhs.real(); imag_ -= rhs.imag(); return *this;
  }
  template <typename U>
  constexpr complex& operator*=(const complex<U>& rhs) {
    const T a = real_, b = imag_, c = rhs.real(), d = rhs.imag();
    real_ = a * c - b * d;
    imag_ = a * d + b * c;
    return *this;
  }
  template <typename U>
  constexpr complex& operator/=(const complex<U>& rhs) {
    const T a = real_, b = imag_, c = rhs.real(), d = rhs.imag(), scale = c * c + d * d;
    real_ = (a * c + b * d) / scale;
    imag_ = (b * c - a * d) / scale;
    return *this;
  }
};

template <typename T> constexpr complex<T> operator+(const complex<T>& z) { return z; }
template <typename T> constexpr complex<T> operator-(const complex<T>& z) {
  return complex<T>(-z.real(), -z.imag());
}
#define CUDA_LLM_COMPLEX_OPERATOR(op)                                                   \
  template <typename T>                                                                 \
  constexpr complex<T> operator op(const complex<T>& lhs, const complex<T>& rhs) {      \
    complex<T> out = lhs;                                                               \
    return out op##= rhs;                                                               \
  }                                                                                     \
  template <typename T>                                                                 \
  constexpr complex<T> operator op(const complex<T>& lhs, const T& rhs) {               \
    complex<T> out = lhs;                                                               \
    return out op##= rhs;                                                               \
  }                                                                                     \
  template <typename T>                                                                 \
  constexpr complex<T> operator op(const T& lhs, const complex<T>& rhs) {               \
    complex<T> out(lhs);                                                                \
    return out op##= rhs;                                                               \
  }
CUDA_LLM_COMPLEX_OPERATOR(+)
CUDA_LLM_COMPLEX_OPERATOR(-)
CUDA_LLM_COMPLEX_OPERATOR(*)
CUDA_LLM_COMPLEX_OPERATOR(/)
#undef CUDA_LLM_COMPLEX_OPERATOR
template <typename T>
constexpr bool operator==(const complex<T>& lhs, const complex<T>& rhs) {
  return lhs.real() == rhs.real() && lhs.imag() == rhs.imag();
}
template <typename T> constexpr bool operator==(const complex<T>& lhs, const T& rhs) {
  return lhs.real() == rhs && lhs.imag() == T();
}
template <typename T> constexpr bool operator==(const T& lhs, const complex<T>& rhs) {
  return rhs == lhs;
}
template <typename T>
constexpr bool operator!=(const complex<T>& lhs, const complex<T>& rhs) { return !(lhs == rhs); }
template <typename T> constexpr bool operator!=(const complex<T>& lhs, const T& rhs) {
  return !(lhs == rhs);
}
template <typename T> constexpr bool operator!=(const T& lhs, const complex<T>& rhs) {
  return !(lhs == rhs);
}

template <typename T> struct DefaultPtrTraits { typedef T* PtrType; };
template <typename T> struct RestrictPtrTraits { typedef T* __restrict__ PtrType; };

template <typename T, unsigned long N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = long long>
class TensorAccessor {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  __host__ __device__ TensorAccessor(PtrType data, const index_t* sizes, const index_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  __host__ __device__ TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](index_t i) {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(data_ + strides_[0] * i, sizes_ + 1,
                                                        strides_ + 1);
  }
  __host__ __device__ const TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](
      index_t i) const {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(data_ + strides_[0] * i, sizes_ + 1,
                                                        strides_ + 1);
  }
  __host__ __device__ index_t size(index_t i) const { return sizes_[i]; }
  __host__ __device__ index_t stride(index_t i) const { return strides_[i]; }
  __host__ __device__ PtrType data() { return data_; }
  __host__ __device__ const PtrType data() const { return data_; }

 protected:
  PtrType data_;
  const index_t* sizes_;
  const index_t* strides_;
};
template <typename T, template <typename U> class PtrTraits, typename index_t>
class TensorAccessor<T, 1, PtrTraits, index_t> {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  __host__ __device__ TensorAccessor(PtrType data, const index_t* sizes, const index_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  __host__ __device__ T& operator[](index_t i) { return data_[strides_[0] * i]; }
  __host__ __device__ const T& operator[](index_t i) const { return data_[strides_[0] * i]; }
  __host__ __device__ index_t size(index_t i) const { return sizes_[i]; }
  __host__ __device__ index_t stride(index_t i) const { return strides_[i]; }
  __host__ __device__ PtrType data() { return data_; }

 protected:
  PtrType data_;
  const index_t* sizes_;
  const index_t* strides_;
};

template <typename T, unsigned long N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = long long>
class GenericPackedTensorAccessor {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  __host__ __device__ TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](index_t i) {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(data_ + strides_[0] * i, sizes_ + 1,
                                                        strides_ + 1);
  }
  __host__ __device__ const TensorAccessor<T, N - 1, PtrTraits, index_t> operator[](
      index_t i) const {
    return TensorAccessor<T, N - 1, PtrTraits, index_t>(data_ + strides_[0] * i, sizes_ + 1,
                                                        strides_ + 1);
  }
  __host__ __device__ index_t size(index_t i) const { return sizes_[i]; }
  __host__ __device__ index_t stride(index_t i) const { return strides_[i]; }
  __host__ __device__ PtrType data() { return data_; }
  __host__ __device__ const PtrType data() const { return data_; }

 protected:
  PtrType data_;
  index_t sizes_[N];
  index_t strides_[N];
};
template <typename T, template <typename U> class PtrTraits, typename index_t>
class GenericPackedTensorAccessor<T, 1, PtrTraits, index_t> {
 public:
  typedef typename PtrTraits<T>::PtrType PtrType;
  __host__ __device__ T& operator[](index_t i) { return data_[strides_[0] * i]; }
  __host__ __device__ const T& operator[](index_t i) const { return data_[strides_[0] * i]; }
  __host__ __device__ index_t size(index_t i) const { return sizes_[i]; }
  __host__ __device__ index_t stride(index_t i) const { return strides_[i]; }
  __host__ __device__ PtrType data() { return data_; }

 protected:
  PtrType data_;
  index_t sizes_[1];
  index_t strides_[1];
};
template <typename T, unsigned long N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor32 = GenericPackedTensorAccessor<T, N, PtrTraits, int>;
template <typename T, unsigned long N, template <typename U> class PtrTraits = DefaultPtrTraits>
using PackedTensorAccessor64 = GenericPackedTensorAccessor<T, N, PtrTraits, long long>;
template <typename T, unsigned long N, template <typename U> class PtrTraits = DefaultPtrTraits,
          typename index_t = long long>
using PackedTensorAccessor = GenericPackedTensorAccessor<T, N, PtrTraits, index_t>;
}  // namespace c10

namespace std {
template <typename T> constexpr T real(const c10::complex<T>& z) { return z.real(); }
template <typename T> constexpr T imag(const c10::complex<T>& z) { return z.imag(); }
template <typename T> constexpr T norm(const c10::complex<T>& z) {
  return z.real() * z.real() + z.imag() * z.imag();
}
template <typename T> constexpr c10::complex<T> conj(const c10::complex<T>& z) {
  return c10::complex<T>(z.real(), -z.imag());
}
template <typename T> __host__ __device__ T abs(const c10::complex<T>& z) {
  return ::hypot(z.real(), z.imag());
}
template <typename T> __host__ __device__ T arg(const c10::complex<T>& z) {
  return ::atan2(z.imag(), z.real());
}
}  // namespace std

/* <ATen/cuda/DeviceUtils.cuh>'s warp helpers, at global scope as there (apex's layer norm) */
__device__ __forceinline__ unsigned int ACTIVE_MASK() { return __activemask(); }
__device__ __forceinline__ void WARP_SYNC(unsigned mask = 0xffffffff) { __syncwarp(mask); }
__device__ __forceinline__ unsigned int WARP_BALLOT(int predicate, unsigned int mask = 0xffffffff) {
  return __ballot_sync(mask, predicate);
}
template <typename T>
__device__ __forceinline__ T WARP_SHFL_XOR(T value, int laneMask, int width = warpSize,
                                           unsigned int mask = 0xffffffff) {
  return __shfl_xor_sync(mask, value, laneMask, width);
}
template <typename T>
__device__ __forceinline__ T WARP_SHFL(T value, int srcLane, int width = warpSize,
                                       unsigned int mask = 0xffffffff) {
  return __shfl_sync(mask, value, srcLane, width);
}
template <typename T>
__device__ __forceinline__ T WARP_SHFL_UP(T value, unsigned int delta, int width = warpSize,
                                          unsigned int mask = 0xffffffff) {
  return __shfl_up_sync(mask, value, delta, width);
}
template <typename T>
__device__ __forceinline__ T WARP_SHFL_DOWN(T value, unsigned int delta, int width = warpSize,
                                            unsigned int mask = 0xffffffff) {
  return __shfl_down_sync(mask, value, delta, width);
}
template <>
__device__ __forceinline__ c10::Half WARP_SHFL_DOWN<c10::Half>(c10::Half value, unsigned int delta,
                                                               int width, unsigned int mask) {
  return c10::Half(__ushort_as_half(__shfl_down_sync(mask, value.x, delta, width)));
}
template <typename T>
__device__ __forceinline__ c10::complex<T> WARP_SHFL_DOWN(c10::complex<T> value, unsigned int delta,
                                                          int width = warpSize,
                                                          unsigned int mask = 0xffffffff) {
  return c10::complex<T>(__shfl_down_sync(mask, value.real_, delta, width),
                         __shfl_down_sync(mask, value.imag_, delta, width));
}
template <typename T> __device__ __forceinline__ T doLdg(const T* p) { return __ldg(p); }

namespace at {
using namespace ::c10;
}

/* <ATen/cuda/detail/TensorInfo.cuh>'s device side (torch-scatter's kernels take a TensorInfo by
 * value): the same members in the same order, so a kernel's parameter space is nvcc's; its
 * host-only members (the sizes/strides constructor, reduceDim, collapseDims) are host code */
#ifndef MAX_TENSORINFO_DIMS
#define MAX_TENSORINFO_DIMS 25
#endif
namespace at { namespace cuda { namespace detail {
template <typename T, typename IndexType> struct TensorInfo {
  __host__ __device__ TensorInfo() : data(nullptr), dims(0) {}  /* (NVRTC: no __host__ ones) */
  __host__ __device__ inline bool isContiguous() const { return dims == 1 && strides[0] == 1; }
  T* data;
  IndexType sizes[MAX_TENSORINFO_DIMS];
  IndexType strides[MAX_TENSORINFO_DIMS];
  int dims;
};
template <typename T, typename IndexType, int Dims> struct IndexToOffset {
  static __host__ __device__ IndexType get(IndexType linearId,
                                           const TensorInfo<T, IndexType>& info) {
    IndexType offset = 0;
    for (int i = Dims - 1; i > 0; --i) {
      offset += (linearId % info.sizes[i]) * info.strides[i];
      linearId /= info.sizes[i];
    }
    return offset + linearId * info.strides[0];
  }
};
template <typename T, typename IndexType> struct IndexToOffset<T, IndexType, -1> {
  static inline __host__ __device__ IndexType get(IndexType linearId,
                                                  const TensorInfo<T, IndexType>& info) {
    IndexType offset = 0;
    for (int i = info.dims - 1; i > 0; --i) {
      offset += (linearId % info.sizes[i]) * info.strides[i];
      linearId /= info.sizes[i];
    }
    return offset + linearId * info.strides[0];
  }
};
}}}  // namespace at::cuda::detail
namespace torch {
using namespace ::at;
}
