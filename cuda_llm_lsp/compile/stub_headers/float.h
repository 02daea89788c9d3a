/* cuda-llm-lsp stand-in for <float.h>: libcu++ (CCCL) where present, else the IEEE values. */
#pragma once
#if __has_include(<cuda/std/cfloat>)
#include <cuda/std/cfloat>
#else
#define FLT_MAX 3.402823466e+38F
#define FLT_MIN 1.175494351e-38F
#define FLT_EPSILON 1.192092896e-07F
#define FLT_MANT_DIG 24
#define FLT_DIG 6
#define DBL_MAX 1.7976931348623158e+308
#define DBL_MIN 2.2250738585072014e-308
#define DBL_EPSILON 2.2204460492503131e-016
#define DBL_MANT_DIG 53
#define DBL_DIG 15
#endif
