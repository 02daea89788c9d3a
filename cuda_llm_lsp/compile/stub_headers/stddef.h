/* cuda-llm-lsp stand-in for <stddef.h>: NVRTC has size_t and ptrdiff_t built in. */
#pragma once
namespace std {
using ::size_t;
using ::ptrdiff_t;
using nullptr_t = decltype(nullptr);
}
