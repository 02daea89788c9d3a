"""Turn the hand-written candidates in this folder into the FSR replay format.

Layout: `<kernel>/rNN-cNN.cu` holds round NN's candidate NN for `<kernel>` (a kernel of
`benchmarks/suite/`); this script writes `<kernel>/<kernel>-rNN-cNN-handwritten.json` next to
it, the record format of `cuda_llm_lsp.fsr.replay` (`cuda-llm optimize --replay DIR`,
`cuda-llm suite --replay DIR`). Every record is labelled as hand-written: these are NOT model
outputs. Run from the repository root:
`python benchmarks/recordings/hand-written/build_recording.py`.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from cuda_llm_lsp.fsr.replay import FORMAT_VERSION, _stem

HERE = Path(__file__).resolve().parent
LABEL = "HAND-WRITTEN candidate (not model output)"


def describe(code: str) -> str:
    """The candidate's leading comment, as one paragraph."""
    lines = []
    for line in code.splitlines():
        if not line.startswith("//"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def build(root: Path = HERE) -> list[Path]:
    written = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        kernel = folder.name
        for old in folder.glob("*-handwritten.json"):
            old.unlink()
        for source in sorted(folder.glob("r[0-9][0-9]-c[0-9][0-9].cu")):
            m = re.match(r"r(\d+)-c(\d+)\.cu$", source.name)
            assert m, source
            round_, index = int(m.group(1)), int(m.group(2))
            code = source.read_text(encoding="utf-8")
            text = f"{describe(code)}\n\n```cuda\n{code.rstrip()}\n```\n"
            record = {
                "format": FORMAT_VERSION,
                "kernel": kernel,
                "round": round_,
                "index": index,
                "label": "hand-written",
                "source_file": f"{kernel}/{source.name}",
                "prompt_sha256": "handwritten",
                "messages": [
                    {
                        "role": "user",
                        "content": "(no prompt: this reply was written by a person "
                        "for the suite's reproducible replay, not produced by a model)",
                    },
                ],
                "reply": {
                    "text": text,
                    "error": None,
                    "fatal": False,
                    "finish_reason": "stop",
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "model": "hand-written (not model output)",
                },
            }
            out = folder / f"{_stem(kernel, round_, index)}-handwritten.json"
            out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            written.append(out)
    return written


if __name__ == "__main__":
    for path in build():
        print(path.relative_to(HERE))
    sys.exit(0)
