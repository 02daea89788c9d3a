/* cuda-llm-lsp: std::numeric_limits as libstdc++ (x86-64 Linux) gives it to nvcc, for device
 * code that uses it (nvcc --expt-relaxed-constexpr). libcu++'s <cuda/std/limits> would do, but
 * costs NVRTC's front end about a second (its <type_traits>): this one costs nothing, and its
 * primary template is std's own, so a project may specialise it as with libstdc++.
 * Values are IEEE-754 binary32/binary64 and LP64 integers, written exactly (hex floats, bit
 * patterns): NVRTC predefines neither GCC's __FLT_MAX__-style macros nor __builtin_huge_valf. */
#pragma once

namespace std {

enum float_round_style {
  round_indeterminate = -1,
  round_toward_zero = 0,
  round_to_nearest = 1,
  round_toward_infinity = 2,
  round_toward_neg_infinity = 3
};

enum float_denorm_style { denorm_indeterminate = -1, denorm_absent = 0, denorm_present = 1 };

#define CUDA_LLM_LIMIT __host__ __device__ static constexpr

/* what a type without a specialisation gets: zeros, and is_specialized false */
template <class T>
struct numeric_limits {
  static constexpr bool is_specialized = false;
  CUDA_LLM_LIMIT T min() noexcept { return T(); }
  CUDA_LLM_LIMIT T max() noexcept { return T(); }
  CUDA_LLM_LIMIT T lowest() noexcept { return T(); }
  static constexpr int digits = 0;
  static constexpr int digits10 = 0;
  static constexpr int max_digits10 = 0;
  static constexpr bool is_signed = false;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr int radix = 0;
  CUDA_LLM_LIMIT T epsilon() noexcept { return T(); }
  CUDA_LLM_LIMIT T round_error() noexcept { return T(); }
  static constexpr int min_exponent = 0;
  static constexpr int min_exponent10 = 0;
  static constexpr int max_exponent = 0;
  static constexpr int max_exponent10 = 0;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_absent;
  static constexpr bool has_denorm_loss = false;
  CUDA_LLM_LIMIT T infinity() noexcept { return T(); }
  CUDA_LLM_LIMIT T quiet_NaN() noexcept { return T(); }
  CUDA_LLM_LIMIT T signaling_NaN() noexcept { return T(); }
  CUDA_LLM_LIMIT T denorm_min() noexcept { return T(); }
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = false;
  static constexpr bool is_modulo = false;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_toward_zero;
};

template <class T>
struct numeric_limits<const T> : numeric_limits<T> {};
template <class T>
struct numeric_limits<volatile T> : numeric_limits<T> {};
template <class T>
struct numeric_limits<const volatile T> : numeric_limits<T> {};

/* integers: two's complement, `digits` value bits (libstdc++'s __glibcxx_digits10 formula) */
template <class T, int Digits, bool Signed, T Min, T Max>
struct cuda_llm_integer_limits {
  static constexpr bool is_specialized = true;
  CUDA_LLM_LIMIT T min() noexcept { return Min; }
  CUDA_LLM_LIMIT T max() noexcept { return Max; }
  CUDA_LLM_LIMIT T lowest() noexcept { return Min; }
  static constexpr int digits = Digits;
  static constexpr int digits10 = Digits * 643L / 2136;
  static constexpr int max_digits10 = 0;
  static constexpr bool is_signed = Signed;
  static constexpr bool is_integer = true;
  static constexpr bool is_exact = true;
  static constexpr int radix = 2;
  CUDA_LLM_LIMIT T epsilon() noexcept { return 0; }
  CUDA_LLM_LIMIT T round_error() noexcept { return 0; }
  static constexpr int min_exponent = 0;
  static constexpr int min_exponent10 = 0;
  static constexpr int max_exponent = 0;
  static constexpr int max_exponent10 = 0;
  static constexpr bool has_infinity = false;
  static constexpr bool has_quiet_NaN = false;
  static constexpr bool has_signaling_NaN = false;
  static constexpr float_denorm_style has_denorm = denorm_absent;
  static constexpr bool has_denorm_loss = false;
  CUDA_LLM_LIMIT T infinity() noexcept { return T(); }
  CUDA_LLM_LIMIT T quiet_NaN() noexcept { return T(); }
  CUDA_LLM_LIMIT T signaling_NaN() noexcept { return T(); }
  CUDA_LLM_LIMIT T denorm_min() noexcept { return T(); }
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = !Signed;
  static constexpr bool traps = true;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_toward_zero;
};

/* the largest value of the signed type T whose unsigned counterpart is U */
#define CUDA_LLM_SIGNED_MAX(T, U) (static_cast<T>(static_cast<U>(~static_cast<U>(0)) >> 1))
#define CUDA_LLM_SIGNED_LIMITS(T, U)                                                    \
  template <>                                                                           \
  struct numeric_limits<T>                                                              \
      : cuda_llm_integer_limits<T, int(sizeof(T) * 8 - 1), true,                        \
                                (static_cast<T>(-CUDA_LLM_SIGNED_MAX(T, U) - 1)),       \
                                CUDA_LLM_SIGNED_MAX(T, U)> {};
#define CUDA_LLM_UNSIGNED_LIMITS(T)                                                     \
  template <>                                                                           \
  struct numeric_limits<T> : cuda_llm_integer_limits<T, int(sizeof(T) * 8), false,      \
                                                     static_cast<T>(0),                 \
                                                     (static_cast<T>(~static_cast<T>(0)))> {};

template <>
struct numeric_limits<bool> : cuda_llm_integer_limits<bool, 1, false, false, true> {
  static constexpr bool is_modulo = false;
};
template <>
struct numeric_limits<char>
    : cuda_llm_integer_limits<char, (char(-1) < char(0)) ? 7 : 8, (char(-1) < char(0)),
                              (char(-1) < char(0)) ? char(-128) : char(0),
                              (char(-1) < char(0)) ? char(127) : char(255)> {};
CUDA_LLM_SIGNED_LIMITS(signed char, unsigned char)
CUDA_LLM_UNSIGNED_LIMITS(unsigned char)
CUDA_LLM_SIGNED_LIMITS(wchar_t, unsigned int)
CUDA_LLM_UNSIGNED_LIMITS(char16_t)
CUDA_LLM_UNSIGNED_LIMITS(char32_t)
#if defined(__cpp_char8_t)
CUDA_LLM_UNSIGNED_LIMITS(char8_t)
#endif
CUDA_LLM_SIGNED_LIMITS(short, unsigned short)
CUDA_LLM_UNSIGNED_LIMITS(unsigned short)
CUDA_LLM_SIGNED_LIMITS(int, unsigned int)
CUDA_LLM_UNSIGNED_LIMITS(unsigned int)
CUDA_LLM_SIGNED_LIMITS(long, unsigned long)
CUDA_LLM_UNSIGNED_LIMITS(unsigned long)
CUDA_LLM_SIGNED_LIMITS(long long, unsigned long long)
CUDA_LLM_UNSIGNED_LIMITS(unsigned long long)
#if defined(__SIZEOF_INT128__)
CUDA_LLM_SIGNED_LIMITS(__int128, unsigned __int128)
CUDA_LLM_UNSIGNED_LIMITS(unsigned __int128)
#endif

/* binary floating point: round to nearest, subnormals, quiet and signalling NaNs */
template <class T, class Bits, int Digits, int Digits10, int MaxDigits10, int MinExp, int MinExp10,
          int MaxExp, int MaxExp10, Bits Min, Bits Max, Bits Epsilon, Bits Infinity, Bits QuietNaN,
          Bits SignalingNaN, Bits DenormMin>
struct cuda_llm_float_limits {
  static constexpr bool is_specialized = true;
  CUDA_LLM_LIMIT T min() noexcept { return __builtin_bit_cast(T, Min); }
  CUDA_LLM_LIMIT T max() noexcept { return __builtin_bit_cast(T, Max); }
  CUDA_LLM_LIMIT T lowest() noexcept { return -__builtin_bit_cast(T, Max); }
  static constexpr int digits = Digits;
  static constexpr int digits10 = Digits10;
  static constexpr int max_digits10 = MaxDigits10;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr int radix = 2;
  CUDA_LLM_LIMIT T epsilon() noexcept { return __builtin_bit_cast(T, Epsilon); }
  CUDA_LLM_LIMIT T round_error() noexcept { return T(0.5); }
  static constexpr int min_exponent = MinExp;
  static constexpr int min_exponent10 = MinExp10;
  static constexpr int max_exponent = MaxExp;
  static constexpr int max_exponent10 = MaxExp10;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  CUDA_LLM_LIMIT T infinity() noexcept { return __builtin_bit_cast(T, Infinity); }
  CUDA_LLM_LIMIT T quiet_NaN() noexcept { return __builtin_bit_cast(T, QuietNaN); }
  CUDA_LLM_LIMIT T signaling_NaN() noexcept { return __builtin_bit_cast(T, SignalingNaN); }
  CUDA_LLM_LIMIT T denorm_min() noexcept { return __builtin_bit_cast(T, DenormMin); }
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr float_round_style round_style = round_to_nearest;
};

template <>
struct numeric_limits<float>
    : cuda_llm_float_limits<float, unsigned int, 24, 6, 9, -125, -37, 128, 38, 0x00800000u,
                            0x7f7fffffu, 0x34000000u, 0x7f800000u, 0x7fc00000u, 0x7fa00000u,
                            0x00000001u> {};
template <>
struct numeric_limits<double>
    : cuda_llm_float_limits<double, unsigned long long, 53, 15, 17, -1021, -307, 1024, 308,
                            0x0010000000000000ull, 0x7fefffffffffffffull, 0x3cb0000000000000ull,
                            0x7ff0000000000000ull, 0x7ff8000000000000ull, 0x7ff4000000000000ull,
                            0x0000000000000001ull> {};

#undef CUDA_LLM_LIMIT
#undef CUDA_LLM_SIGNED_MAX
#undef CUDA_LLM_SIGNED_LIMITS
#undef CUDA_LLM_UNSIGNED_LIMITS

}  // namespace std
