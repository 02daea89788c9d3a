/* cuda-llm-lsp stand-in for <assert.h>: libcu++ (CCCL) provides it for NVRTC. */
#pragma once
#include <cuda/std/cassert>
