/* cuda-llm-lsp stand-in for <stdlib.h>: the names live in cuda_llm_prelude.h, pre-included. */
#include "cuda_llm_prelude.h"
