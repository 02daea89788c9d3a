/* cuda-llm-lsp stand-in for <stdio.h>: the names live in cuda_llm_prelude.h, pre-included.
 * FILE is declared (never defined, as glibc's is opaque to its users): host prototypes in
 * toolkit headers (cublasLt.h, cusparse.h) and host structs name FILE*. */
#include "cuda_llm_prelude.h"
#ifndef CUDA_LLM_FILE_DECLARED
#define CUDA_LLM_FILE_DECLARED
typedef struct _IO_FILE FILE;
namespace std {
using ::FILE;
}
#endif
