"""Acceptance of issue [integrity] on the CPU: with `OPENAI_API_KEY` set to a canary, candidates
that try to include host files (the environment, a project `.env`, through `..`, macros, line
continuations, digraphs, `__has_include`) leak no recognisable part of it anywhere.

`cuda-llm optimize` runs as a user runs it: the real openai SDK against the scripted endpoint,
real NVRTC in the compile processes, recorded GPU outcomes, `--record`, the history database and
the compile cache in the test's directories. Every file the tool wrote, its output, and every
request body the endpoint received are searched for every 8-character piece of the key (NVRTC
quotes a file's text split into tokens, so matching the whole key is not enough).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply
from tests.unit.test_cli_optimize import FAST, ROOT, SAXPY

CANARY = "sk-proj-Q7xZ9vW2mK4pL8rTcAnArY5bN3"
WINDOW = 8
ATTACKS = [
    '#include "/proc/self/environ"',
    "#include </proc/self/environ>",
    '#include ".env"',
    '#include "../project/.env"',
    '#define ENV_FILE "/proc/self/environ"\n#include ENV_FILE',
    '#inc\\\nlude "/proc/self/environ"',
    '%:include ".env"',
    '#if __has_include(".env")\n#include ".env"\n#endif',
]


def _kernel(attack: str, variant: str) -> str:
    return f"{attack}\n" + FAST.replace("variant: fast", f"variant: {variant}")


def _pieces(secret: str) -> list[bytes]:
    return [secret[i : i + WINDOW].encode() for i in range(len(secret) - WINDOW + 1)]


def _leaks(data: bytes) -> list[bytes]:
    return [p for p in _pieces(CANARY) if p in data]


def test_no_part_of_the_key_reaches_a_file_or_a_request(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "saxpy.cu").write_text(SAXPY)
    (project / ".env").write_text(f"OPENAI_API_KEY={CANARY}\n")  # a project's usual secret file
    outcomes = {
        "baseline": {"ms": 1.0, "spread_pct": 0.4},
        "candidates": [{"contains": "variant: honest", "status": "ok", "ms": 0.5}],
    }
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))
    n = len(ATTACKS)
    steps = [
        {"text": kernel_reply(_kernel(attack, f"attack {i}")), "match": f"candidate {i} of {n}."}
        for i, attack in enumerate(ATTACKS, 1)
    ] + [  # round 2: the rejections above are in its prompt
        {"text": kernel_reply(_kernel("", "honest")), "match": f"candidate {i} of {n}."}
        for i in range(1, n + 1)
    ]
    written = tmp_path / "written"  # everything the tool writes goes under here
    env = dict(
        os.environ,
        OPENAI_API_KEY=CANARY,
        CUDA_LLM_DATA_DIR=str(written / "data"),
        CUDA_LLM_CACHE_DIR=str(written / "cache"),
        CUDA_LLM_EVALUATOR=f"recorded:{tmp_path / 'outcomes.json'}",
    )
    with ScriptedLlmServer(steps) as server:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "cuda_llm_lsp.cli",
                "optimize",
                str(project / "saxpy.cu"),
                "--kernel",
                "saxpy",
                "--rounds",
                "2",
                "--candidates",
                str(n),
                "--base-url",
                server.base_url,
                "--model",
                "scripted",
                "--record",
                str(written / "recorded"),
                "--format",
                "json",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        bodies = [json.dumps(r.get("body")) for r in server.requests]
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    statuses = [c["status"] for c in result["candidates"] if c["round"] == 1]
    assert statuses == ["compile_error"] * n, result["candidates"]
    # refused before anything compiled them: by the include policy, or (a line NVRTC would read
    # as an include but that is no device-side definition) by the device-only rule ([accept-safety])
    assert all(
        "refused before compiling" in c["message"]
        or c["message"].startswith("host code is not allowed in a reply")
        for c in result["candidates"][:n]
    ), [c["message"] for c in result["candidates"][:n]]
    # each refusal went to the debugger once (unscripted: the refusal stands), then round 2
    repairs = [b for b in bodies if "repair 1 of" in b]
    round_2 = [b for b in bodies if "This is round 2," in b]
    assert len(bodies) == 3 * n and len(repairs) == len(round_2) == n
    assert all(
        "refused before compiling" in b or "host code is not allowed in a reply" in b
        for b in repairs
    ), "the debugger saw the refusal"
    assert any("refused before compiling" in b for b in round_2), "round 2 saw the refusals"

    files = [p for p in written.rglob("*") if p.is_file()]
    assert any(p.suffix == ".json" for p in (written / "recorded").iterdir())
    assert any((written / "data").rglob("*")), "the history database was written"
    assert any((written / "cache").rglob("*")), "the compile cache was written"
    found = {str(p.relative_to(written)): _leaks(p.read_bytes()) for p in files}
    found["stdout"] = _leaks(done.stdout.encode())
    found["stderr"] = _leaks(done.stderr.encode())
    for i, body in enumerate(bodies):
        found[f"request {i + 1}"] = _leaks(body.encode())
    assert {k: v for k, v in found.items() if v} == {}
