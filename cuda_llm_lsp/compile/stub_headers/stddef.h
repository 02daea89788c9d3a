/* cuda-llm-lsp stand-in for <stddef.h>: libcu++ (CCCL) provides it for NVRTC. */
#pragma once
#include <cuda/std/cstddef>
namespace std {
using ::size_t;
using ::ptrdiff_t;
using nullptr_t = decltype(nullptr);
}
