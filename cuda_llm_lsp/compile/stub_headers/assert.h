/* cuda-llm-lsp stand-in for <assert.h>: NVRTC declares assert() itself (crt/common_functions.h). */
#pragma once
