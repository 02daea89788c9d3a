/* cuda-llm-lsp stand-in for <stdbool.h> (GCC's own header, beside none NVRTC has): C++ has
 * bool, true and false already. */
#pragma once
#define __bool_true_false_are_defined 1
