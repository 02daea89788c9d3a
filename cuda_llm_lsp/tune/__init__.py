"""The autotuner: a kernel's tunables (`tune.NAME`, `restrict`: source/spec/tunables.py) searched
for the fastest correct configuration (docs/design.md, "Tuning").

Modules: `space` (the configurations and how they are chosen: exhaustive, or a seeded random
sample refined by local search), `search` (`tune_kernel`: compiles in parallel, checks and times
every configuration through the `Evaluator` protocol against the default configuration, re-checks
the finalists), `edit` (the best values written back as the file's `#define` defaults).

Layer: between `fsr` (which tunes a correct candidate before ranking it) and `evaluate`.
"""
