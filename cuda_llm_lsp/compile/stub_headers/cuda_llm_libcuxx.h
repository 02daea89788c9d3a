/* cuda-llm-lsp: CUDA_LLM_LIBCUXX is 1 where the toolkit's libcu++ accepts this compile's C++
 * dialect, else 0. CCCL 3 (CUDA 13's) stops every header with #error below C++17
 * (<cuda/std/__internal/cpp_dialect.h>), while nvcc gives a C++11 file the host's <stdint.h>,
 * <climits> and <cfloat>: there the stand-ins use their own definitions instead. */
#ifndef CUDA_LLM_LIBCUXX
#if __cplusplus >= 201703L
#define CUDA_LLM_LIBCUXX 1
#elif __has_include(<cuda/std/__cccl/version.h>)
#include <cuda/std/__cccl/version.h>
#if CCCL_MAJOR_VERSION >= 3
#define CUDA_LLM_LIBCUXX 0
#else
#define CUDA_LLM_LIBCUXX 1
#endif
#else
#define CUDA_LLM_LIBCUXX 1
#endif
#endif
