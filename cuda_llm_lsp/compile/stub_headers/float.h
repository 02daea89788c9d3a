/* cuda-llm-lsp stand-in for <float.h>: libcu++ (CCCL) provides it for NVRTC. */
#pragma once
#include <cuda/std/cfloat>
