"""The GPU evaluator: correctness against the original kernel, and honest timing.

`gpu.GpuEvaluator` runs the cases (the runner), `judge` says what each run shows (the rules of
docs/design.md, on top of `compare`'s per-buffer checks), and the worker process runs the launches
(the backend): `process` on the parent's side (spawn, watchdog, restart), `worker` inside it (the
CUDA context), `protocol` between them (typed messages, one framing). `launch` turns a spec's case
into a `protocol.Launch`, `inputs` makes its seeded values, `timing` holds the statistics and the
timed loop. `candidate` builds binaries, `sanitizer` runs compute-sanitizer, `recorded` answers
from a recording (tests, demos), `format` words results in one line, `types` is the shared data.
"""
