/* cuda-llm-lsp stand-in for <limits.h>: libcu++ (CCCL) provides it for NVRTC. */
#pragma once
#include <cuda/std/climits>
