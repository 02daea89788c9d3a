"""Recorded optimize sessions shipped with the package, for `cuda-llm optimize --demo` and the
editors' demo mode (`cudaLlm.demo`).

Nothing to see without a GPU and an API key otherwise. One directory per kernel:
`<kernel>/llm/` is an ordinary `--replay` recording (`fsr.replay`: one JSON file per candidate,
the model's reply with its code) and `<kernel>/outcomes.json` the evaluator's recorded outcomes
(`evaluate.recorded`); `<kernel>/<file>.cu` is the example it was recorded for (a copy of
the repository's `examples/` file: a user of the wheel has no checkout), which the editors'
"Try the Demo" opens. The figures are hand-written, illustrative, not measurements: the CLI
and the editors say so. On a GPU, `cuda-llm optimize examples/softmax.cu --kernel softmax_rows
--replay <this package>/demo/softmax_rows/llm` checks and times the same candidates for real.

Pure data and paths: this module imports nothing from the package.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEMO_DIR = Path(__file__).parent


@dataclass(frozen=True)
class Demo:
    kernel: str
    example: str  # the file it is recorded for, relative to the repository
    llm_dir: Path  # a `--replay` recording
    outcomes: Path  # recorded evaluator outcomes
    source: Path | None  # the example file shipped beside the recording


def demos() -> dict[str, Demo]:
    """The shipped demos by kernel name."""
    found: dict[str, Demo] = {}
    for directory in sorted(p for p in DEMO_DIR.iterdir() if (p / "outcomes.json").is_file()):
        found[directory.name] = Demo(
            kernel=directory.name,
            example=_EXAMPLES.get(directory.name, ""),
            llm_dir=directory / "llm",
            outcomes=directory / "outcomes.json",
            source=next(iter(sorted(directory.glob("*.cu"))), None),
        )
    return found


_EXAMPLES = {"softmax_rows": "examples/softmax.cu"}
