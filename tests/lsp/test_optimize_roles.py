"""Optimize from the editor with the `plan` strategy: the progress names each step's role
(planning, coding a plan, repairing a candidate) and a repaired candidate wins.

Real server, real NVRTC, real loop and openai SDK against a scripted endpoint on 127.0.0.1;
only the GPU is replaced by recorded outcomes (tests/lsp/data/recording.json).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from lsprotocol import types

from tests.lsp.conftest import DATA, SERVERS, EditorClient, lsp_fixture
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

FAST = """\
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}"""
WRONG = FAST.replace("variant: fast", "variant: wrong").replace("fmaf(a, x[i], y[i])", "0.0f")
REPAIRED = FAST.replace("variant: fast", "variant: fast, repaired")
PLANS = [{"technique": f"Plan {i}", "why": "scripted", "expected": "-"} for i in (1, 2)]

LLM = ScriptedLlmServer(
    [
        {"match": "Propose 2 distinct plans", "text": "```json\n" + json.dumps(PLANS) + "\n```"},
        {"match": "candidate 1 of 2.", "text": kernel_reply(WRONG)},
        {"match": "candidate 2 of 2.", "text": kernel_reply(FAST)},
        {"match": "candidate 1, repair 1 of 2.", "text": kernel_reply(WRONG)},
        {"match": "candidate 1, repair 2 of 2.", "text": kernel_reply(REPAIRED)},
    ]
).start()

RECORDED = [sys.executable, str(SERVERS / "recorded_server.py"), str(DATA / "recording.json")]
OPTIONS = {
    "cudaLlm": {
        "debounceMs": 0,
        "baseUrl": LLM.base_url,
        "model": "scripted-model",
        "rounds": 1,
        "candidates": 2,
        "strategy": "plan",
        "repairs": 2,
        "apiKey": "sk-test-not-a-real-key",
    }
}

client = lsp_fixture(server_command=RECORDED, init_options=OPTIONS, clients=["visual-studio-code"])


def _values(client: EditorClient, token: str) -> list[Any]:
    return list(client.progress_reports.get(token, []))


async def test_progress_names_the_role_of_each_step(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.optimize", arguments=[{"uri": uri, "kernel": "saxpy"}]
        )
    )
    token = answer["token"]
    await client.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in _values(client, token)),
        timeout=120,
    )
    values = _values(client, token)
    reports = [v.message or "" for v in values if isinstance(v, types.WorkDoneProgressReport)]
    steps = [m for m in reports if m.startswith(("round 1: planning", "coding", "repairing"))]
    assert steps[0] == "round 1: planning", reports
    assert sorted(steps[1:3]) == ["coding plan 1", "coding plan 2"], reports
    assert steps[3:] == ["repairing 1.1 (attempt 1)", "repairing 1.1 (attempt 2)"], reports
    assert any(m.startswith("candidate 1.1: ok") for m in reports), reports
    assert "2.00× faster" in (values[-1].message or "")
    assert LLM.remaining == 0
