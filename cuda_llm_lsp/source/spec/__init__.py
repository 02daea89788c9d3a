"""Test specs: the `/* @cuda-llm */` TOML block above a kernel (format: docs/design.md, a contract).

Parsing never raises on user input: every problem becomes a `SpecError` at the offending line
inside the block, in file coordinates. Expressions are parsed by `source.expr` (never `eval`).
All cases are evaluated while parsing, so a spec returned without errors has valid cases.

Modules: `model` (the parsed spec), `parse` (`parse_spec`, the one entry), `cases` (expressions
evaluated per size index), `locate` (key paths to file spans). C types, pointer roles and
template arguments live one level up (`source.c_types`, `source.roles`, `source.templates`):
the evaluator and the draft spec use them too.

Decisions beyond the contract (kept here so the evaluator and the docs agree):
- Unprefixed non-const pointers are `out` only if the body never reads them (`p[i] = ...` and
  `*p = ...` are the only non-reading uses); compound assignment, atomics, passing the pointer on
  or aliasing it count as reads, so the role is `inout`.
- Integer-valued template arguments of `instance` are names usable in expressions
  (`block = "BLOCK"` with `instance = "k<float, 256>"`); size names take precedence.
- Unknown top-level keys and a spec dtype that disagrees with the signature are warnings
  (`SpecError.severity == "warning"`); the spec stays usable. Everything else is an error and
  makes the spec unusable (`parse_spec` returns None).
- `flops = "<expression>"` (optional): floating-point operations of one launch, over the size
  names (e.g. `"2 * M * N * K"`); evaluated per case into `Case.flops` (the suite's floor is
  max(bytes / copy bandwidth, flops / peak rate)). Must be non-negative.
- Default tolerances: the loosest over the compared outputs (float16/bfloat16: 1e-2/1e-2,
  float32/float64: 1e-4/1e-5, integers: exact); a default `atol` is relative to the buffer's
  mean magnitude (`TestSpec.atol_relative`), one the spec sets is absolute. Pointers always get
  an `init` (the default when none is written); `randint(lo, hi)` includes both ends, as the
  evaluator draws it.
"""

from cuda_llm_lsp.source.spec.cases import Case
from cuda_llm_lsp.source.spec.model import ArgSpec, InitSpec, SpecError, TestSpec
from cuda_llm_lsp.source.spec.parse import parse_spec

__all__ = ["ArgSpec", "Case", "InitSpec", "SpecError", "TestSpec", "parse_spec"]
