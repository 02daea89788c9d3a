"""`CUDA_LLM_EVALUATOR=recorded:FILE` for the language server itself (`python -m cuda_llm_lsp`):
recorded GPU outcomes instead of the GPU, for demos and editor tests without a checkout's
`tests/lsp/servers/recorded_server.py`, and every result says it is demo/test mode.
"""

from __future__ import annotations

import subprocess
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.engine import DEMO_LABEL
from tests.lsp.conftest import DATA, SERVER, EditorClient, lsp_fixture, server_env

client = lsp_fixture(
    env={"CUDA_LLM_EVALUATOR": f"recorded:{DATA / 'recording.json'}"},
    clients=["visual-studio-code"],
)


async def test_benchmark_with_recorded_outcomes_is_labelled_demo(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.benchmark", arguments=[{"uri": uri, "kernel": "saxpy"}]
        )
    )
    token = answer["token"]

    def values() -> list[Any]:
        return list(client.progress_reports.get(token, []))

    await client.wait_for(lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in values()))
    begin = next(v for v in values() if isinstance(v, types.WorkDoneProgressBegin))
    assert begin.title.endswith(f"[{DEMO_LABEL}]"), begin.title
    info = await client.wait_for(
        lambda: [
            d
            for d in client.diagnostics.get(uri, [])
            if d.source == "cuda-llm" and d.severity == types.DiagnosticSeverity.Information
        ]
    )
    assert info[0].message.startswith(f"[{DEMO_LABEL}] saxpy: 1.000 ms"), info[0].message


def test_a_bad_evaluator_value_stops_the_server_at_start_with_the_reason() -> None:
    for value, said in (
        ("recorded:/no/such/recording.json", "no recording at '/no/such/recording.json'"),
        ("tpu", "must be 'gpu' or 'recorded:PATH'"),
    ):
        done = subprocess.run(
            SERVER,
            env=server_env(CUDA_LLM_EVALUATOR=value),
            input=b"",
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 2, done
        assert said in done.stderr.decode(), done.stderr
