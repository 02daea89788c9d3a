"""What two stages of the device unit share: the kinds of macro in `IncludeState.macros`
(written by the walker, read by the includes, the masks and the door), the marks that start
the name of an include no one can read as written (`COMPUTED`, `UNRESOLVED`: written by
`blanking`, read by `includes`) and `WORD`.

Nothing here decides anything; it exists so that no stage imports another only for a word."""

from __future__ import annotations

import re

WORD = re.compile(r"[A-Za-z_]\w*")
COMPUTED = "\0"  # what starts the name of a computed include in the walker's list
# what starts the name of an include directive the preprocessor sees but the walker did not
# resolve (`%:include`, `#/**/include`, a splice, `#include_next`): already blanked
UNRESOLVED = "\1"
# a macro kind (`IncludeState.macros`): a class NVRTC never sees (`_note_hidden_class`), or a
# class or alias the unit blanked as host code (`_note_host_name`)
HIDDEN_FROM_NVRTC = "nvrtc-hidden"
# a macro kind: a host function template that some code reads in `decltype(...)` (CUTLASS 3's
# `get_problem_shape_MNKL_helper`): nvcc deduces its type whatever its space, so it stays
READ_IN_DECLTYPE = "decltype"
# a macro kind, then `:` and a library's namespace: that namespace, whose headers the unit drops
# (`DROPPED_LIBRARIES`), or a user item left out for naming it (`Walker._skip_dropped`)
DROPPED = "dropped:"
# a macro kind, then `:` and a namespace: a name user code declares in that dropped namespace
# (CuPy's `thrust::complex`), which `thrust::complex` then means, not the library
EXTENDS = "extends:"
ATTRIBUTE = "attribute"  # `#define API extern __attribute__((visibility("default")))`
ATTRIBUTE_CALL = "attribute()"  # `#define FORMAT(...) __attribute__((format(printf, ...)))`
ATTRIBUTE_WRAPPER = "attribute(decl)"  # `#define DEPRECATED(func, hint) func __attribute__(...)`
ATTRIBUTE_KINDS = (ATTRIBUTE, ATTRIBUTE_CALL, ATTRIBUTE_WRAPPER)
