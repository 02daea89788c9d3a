/* cuda-llm-lsp stand-in for <float.h>: cuda_llm_float.h. */
#pragma once
#include <cuda_llm_float.h>
