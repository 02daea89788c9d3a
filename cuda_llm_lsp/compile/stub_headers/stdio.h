/* cuda-llm-lsp stand-in for <stdio.h>: the names live in cuda_llm_prelude.h, pre-included. */
#include "cuda_llm_prelude.h"
