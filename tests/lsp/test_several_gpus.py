"""`cudaLlm.gpus` in the editor: the language server judges on the GPUs the setting names, says
which GPU judged each candidate, and a change of the setting holds for the next job.

The real server (`python -m cuda_llm_lsp`, its evaluator built as the CLI's is) on 2 fake GPUs:
the CUDA driver double (`CUDA_LLM_FAKE_DEVICES=2`) behind real worker processes, real NVRTC, the
real loop and openai SDK against a scripted endpoint on 127.0.0.1. The candidates are the
double's variants of the kernel (tests/support/fake_gpus.py).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from lsprotocol import types

from tests.lsp.conftest import SCRATCH, EditorClient, lsp_fixture
from tests.support.fake_gpus import SUITE_FILES, driver_env
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

SOURCE = SUITE_FILES["saxpy.cu"]
KERNEL = SOURCE[SOURCE.index('extern "C"') :]
VARIANTS = ("fast", "slow", "nothing", "illegal")

LLM = ScriptedLlmServer(
    [
        {
            "match": f"candidate {i} of",
            "repeat": -1,
            "text": kernel_reply(f"__device__ int cuda_llm_fake_variant_{v};\n{KERNEL}"),
        }
        for i, v in enumerate(VARIANTS, 1)
    ]
).start()

SETTINGS = {
    "debounceMs": 0,
    "baseUrl": LLM.base_url,
    "model": "scripted-model",
    "rounds": 1,
    "candidates": len(VARIANTS),
    "apiKey": "sk-test-not-a-real-key",
    "gpus": "all",
}

client = lsp_fixture(
    init_options={"cudaLlm": SETTINGS},
    configuration={"cudaLlm": {k: v for k, v in SETTINGS.items() if k != "apiKey"}},
    env=driver_env(2) | {"CUDA_LLM_EVALUATOR": "gpu"},
    clients=["visual-studio-code", "neovim@v0.7.0"],  # settings pulled; settings pushed
)


async def _run(client: EditorClient, command: str, uri: str) -> list[str]:
    """Run the job to its end; its progress messages, the end's last."""
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[{"uri": uri, "kernel": "saxpy"}])
    )
    token = answer["token"]

    def values() -> list[Any]:
        return list(client.progress_reports.get(token, []))

    await client.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in values()), timeout=150
    )
    return [v.message or "" for v in values() if not isinstance(v, types.WorkDoneProgressBegin)]


def _gpus(messages: list[str]) -> set[str]:
    return {m.group(1) for text in messages if (m := re.search(r" on (gpu\d)\b", text))}


async def test_the_gpus_setting_chooses_the_gpus_and_a_change_holds_for_the_next_job(
    client: EditorClient,
) -> None:
    path = SCRATCH / "several_gpus" / client.kind / "saxpy.cu"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(SOURCE)
    uri = client.open(path)
    await client.diagnostics_for(uri, 1)

    said = await _run(client, "cudaLlm.optimize", uri)
    judged = [m for m in said if m.startswith("candidate 1.")]
    assert len(judged) == len(VARIANTS), said
    assert any(m.startswith("candidate 1.1: ok") for m in judged), said  # the fast variant
    assert _gpus(judged) == {"gpu0", "gpu1"}, said  # both GPUs judged, and progress says which
    assert "4.00×" in said[-1], said  # the winner, timed against the baseline on its own GPU

    settings = {k: v for k, v in SETTINGS.items() if k != "apiKey"} | {"gpus": "1"}
    client.set_configuration({"cudaLlm": settings})
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"cudaLlm": settings})
    )
    # A pool of gpu0 and gpu1 leases gpu0, the first free one, to a lone benchmark: gpu1 alone
    # says the change held. (A pulled change lands when the client has answered the pull.)
    ends = []
    for _ in range(3):
        await asyncio.sleep(0.5)
        ends.append((await _run(client, "cudaLlm.benchmark", uri))[-1])
        if ends[-1].endswith(" · on gpu1"):
            break
    assert ends[-1].startswith("saxpy:") and ends[-1].endswith(" · on gpu1"), ends
    assert (await _run(client, "cudaLlm.benchmark", uri))[-1].endswith(" · on gpu1")
