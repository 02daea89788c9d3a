"""Reply shapes real models produce (tests/data/replies/), read the way the loop reads them.

Each corpus file holds one recorded reply (content, finish_reason, refusal, reasoning_content)
with the expected extraction and the status the run gives it. Every file is checked twice: the
extraction alone (`extract_kernel`), and end to end: `cuda-llm optimize` against the scripted
OpenAI-compatible endpoint (real HTTP, the real openai SDK), real NVRTC and recorded outcomes,
recorded with `--record` and replayed with `--replay`. In the recorded outcomes a draft or
sketch (marked `-draft`) is judged wrong, so a run that took one fails its entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile.headers import STUB_DIR
from cuda_llm_lsp.fsr.client import extract_kernel
from tests.support.scripted_llm import ScriptedLlmServer

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "replies"
ORIGINALS = CORPUS / "originals"
OUTCOMES = {
    "baseline": {"ms": 1.0, "spread_pct": 0.5},
    "candidates": [
        {"contains": "-draft", "status": "wrong_output",
         "message": "a draft or sketch was taken instead of the final kernel"},
        {"contains": "variant: ", "status": "ok", "ms": 0.5},
    ],
}  # fmt: skip


# CCCL's umbrella header refuses NVRTC by an `#error`; the toolchain may carry a stand-in for it
# (compile/stub_headers/cub/cub.cuh) that includes the device headers NVRTC accepts. An entry's
# `with_umbrella_stand_in` holds what it expects then.
UMBRELLA_STAND_IN = (STUB_DIR / "cub" / "cub.cuh").is_file()


@dataclass(frozen=True)
class Shape:
    name: str
    original: str
    kernel: str
    reply: dict[str, Any]
    expect: dict[str, Any]

    @property
    def text(self) -> str:
        return str(self.reply.get("newline", "\n")).join(self.reply["content"])

    @property
    def reasoning(self) -> str | None:
        lines = self.reply.get("reasoning_content")
        return "\n".join(lines) if lines else None

    def step(self, match: str) -> dict[str, Any]:
        """The scripted endpoint's answer for this reply."""
        step: dict[str, Any] = {"text": self.text, "match": match}
        for key in ("finish_reason", "refusal", "content_null"):
            if key in self.reply:
                step[key] = self.reply[key]
        if self.reasoning is not None:
            step["reasoning_content"] = self.reasoning
        return step


def load() -> list[Shape]:
    shapes = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        expect = data["expect"]
        if UMBRELLA_STAND_IN and "with_umbrella_stand_in" in expect:
            expect = expect["with_umbrella_stand_in"]
        shapes.append(Shape(path.stem, data["original"], data["kernel"], data["reply"], expect))
    return shapes


SHAPES = load()


def test_the_corpus_covers_the_shapes_the_issue_lists() -> None:
    names = {s.name.split("-", 1)[1] for s in SHAPES}
    assert len(SHAPES) >= 20
    for needed in (
        "crlf-tabs",
        "drafts-then-truncated",
        "think-unclosed-sketch",
        "helpers-then-kernel",
        "refusal",
        "content-filter",
        "think-drafts",
        "reasoning-content",
        "fence-cpp",
        "fence-cplusplus",
        "fence-unlabeled",
        "fence-tilde",
        "template-launch-bounds",
        "bf16-float4-ldg",
        "cooperative-groups",
        "renamed-kernel",
        "launch-block-above-helpers",
        "two-launch-blocks",
        "fence-after-brace",
        "launch-block-launch-fixed",
    ):
        assert needed in names


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_extraction(shape: Shape) -> None:
    code, error = extract_kernel(
        shape.text,
        shape.kernel,
        shape.reply.get("finish_reason", "stop"),
        refusal=shape.reply.get("refusal"),
        reasoning=shape.reasoning,
    )
    expect = shape.expect
    if expect["status"] == "llm_error":
        assert code is None, code
        assert error is not None
        for words in expect["message"]:
            assert words in error
        return
    assert error is None, error
    assert code is not None
    if "code" in expect:
        assert code == "\n".join(expect["code"]) + "\n"
    for words in expect.get("contains", []):
        assert words in code
    for words in expect.get("excludes", []):
        assert words not in code


def _cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(workdir / "data"),
        CUDA_LLM_EVALUATOR=f"recorded:{workdir / 'outcomes.json'}",
    )
    return subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


MAX_CANDIDATES = 32  # a round's most candidates, in the CLI as in the server (config.SCHEMA)
_BY_KERNEL: dict[tuple[str, str], list[Shape]] = defaultdict(list)
for _shape in SHAPES:
    _BY_KERNEL[(_shape.original, _shape.kernel)].append(_shape)
# one optimize run per group: a kernel's shapes, at most a round's worth in each
GROUPS: dict[tuple[str, str, int], list[Shape]] = {
    (original, kernel, start // MAX_CANDIDATES): shapes[start : start + MAX_CANDIDATES]
    for (original, kernel), shapes in _BY_KERNEL.items()
    for start in range(0, len(shapes), MAX_CANDIDATES)
}


@pytest.mark.parametrize(
    "group",
    sorted(GROUPS),
    ids=[f"{Path(o).stem}-{k}-{part}" for o, k, part in sorted(GROUPS)],
)
def test_optimize_reads_every_shape(group: tuple[str, str, int], tmp_path: Path) -> None:
    """One round with a candidate per reply of this kernel; each gets its expected status, the
    extracted source (from the run history) holds what it must, the recording keeps refusals
    and reasoning, and a replay of the recording gives the same result."""
    original, kernel, _part = group
    shapes = GROUPS[group]
    source = tmp_path / original
    source.write_text((ORIGINALS / original).read_text())
    (tmp_path / "outcomes.json").write_text(json.dumps(OUTCOMES))
    n = len(shapes)
    steps = [s.step(f"candidate {i} of {n}.") for i, s in enumerate(shapes, 1)]
    rounds = "2" if any("feedback" in s.expect for s in shapes) else "1"
    # CUB headers take seconds to compile: on a loaded CI machine, more than an editor's limit
    run = [
        str(source),
        "--kernel",
        kernel,
        "--rounds",
        rounds,
        "--candidates",
        str(n),
        "--format",
        "json",
        "--compile-timeout",
        "300",
    ]
    with ScriptedLlmServer(steps) as server:
        done = _cli(
            tmp_path,
            "optimize",
            *run,
            "--base-url",
            server.base_url,
            "--record",
            str(tmp_path / "rec"),
        )
        second_round = [
            r["body"]["messages"][-1]["content"]
            for r in server.chat_requests()
            if "This is round 2" in r["body"]["messages"][-1]["content"]
        ]
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    result = json.loads(done.stdout)
    first = {c["index"]: c for c in result["candidates"] if c["round"] == 1}
    history = _cli(tmp_path, "history", "--format", "json")
    [listed] = json.loads(history.stdout)["runs"]
    shown = _cli(tmp_path, "history", "--run", str(listed["id"]), "--format", "json")
    [record] = json.loads(shown.stdout)["runs"]
    sources = {c["index"]: c["source"] for c in record["candidate_list"] if c["round"] == 1}
    problems = []
    for i, shape in enumerate(shapes, 1):
        got, expect = first[i], shape.expect
        if got["status"] != expect["status"]:
            problems.append(f"{shape.name}: {got['status']} ({got['message'][:200]})")
            continue
        for words in expect.get("message", []):
            if words not in got["message"]:
                problems.append(f"{shape.name}: {words!r} not in {got['message'][:300]!r}")
        for words in expect.get("contains", []):
            if words not in sources[i]:
                problems.append(f"{shape.name}: the source lacks {words!r}")
        for words in expect.get("excludes", []):
            if words in sources[i]:
                problems.append(f"{shape.name}: the source has {words!r}")
        if "launch" in expect and got.get("launch") != expect["launch"]:
            problems.append(f"{shape.name}: launch {got.get('launch')} not {expect['launch']}")
        for words in expect.get("feedback", []):
            if not second_round or not all(words in prompt for prompt in second_round):
                problems.append(f"{shape.name}: round 2's prompts do not say {words!r}")
    assert problems == []
    recorded = [json.loads(p.read_text()) for p in (tmp_path / "rec").glob("*-r01-*.json")]
    by_index = {r["index"]: r["reply"] for r in recorded}
    for i, shape in enumerate(shapes, 1):
        if shape.reply.get("refusal"):
            assert by_index[i]["refusal"] == shape.reply["refusal"]
        if shape.reasoning:
            assert by_index[i]["reasoning_content"] == shape.reasoning
    replayed = _cli(tmp_path, "optimize", *run, "--replay", str(tmp_path / "rec"))
    assert replayed.returncode == 0, replayed.stderr
    again = json.loads(replayed.stdout)["candidates"]
    assert [(c["round"], c["index"], c["status"]) for c in again if c["round"] == 1] == [
        (c["round"], c["index"], c["status"]) for c in result["candidates"] if c["round"] == 1
    ]
