/* cuda-llm-lsp stand-in for <string.h>: the names live in cuda_llm_prelude.h, pre-included. */
#include "cuda_llm_prelude.h"
