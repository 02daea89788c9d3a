"""`python -m cuda_llm_lsp --stdio`: the flag many clients pass means the default stdio."""

from __future__ import annotations

import asyncio
import subprocess
import sys

from tests.lsp.conftest import DATA, ROOT, SERVER, EditorClient, lsp_fixture, server_env

client = lsp_fixture(server_command=[*SERVER, "--stdio"], clients=["neovim"])


async def test_the_server_answers_over_stdio_with_the_stdio_flag(client: EditorClient) -> None:
    assert client.init_result is not None
    assert client.init_result.server_info and client.init_result.server_info.name == "cuda-llm-lsp"
    uri = client.open(DATA / "broken.cu")
    found = await client.diagnostics_for(uri, 1)
    assert any(d.source == "nvrtc" for d in found), found


def test_stdio_and_tcp_together_are_refused_with_a_message() -> None:
    done = subprocess.run(
        [*SERVER, "--stdio", "--tcp", "127.0.0.1:2087"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=server_env(),
    )
    assert done.returncode == 2
    assert "not allowed with argument --stdio" in done.stderr
    assert "Traceback" not in done.stderr


noisy = lsp_fixture(
    server_command=[sys.executable, str(ROOT / "tests" / "lsp" / "servers" / "noisy_server.py")],
    clients=["neovim"],
)


async def test_writes_to_stdout_by_other_code_do_not_reach_the_client(noisy: EditorClient) -> None:
    uri = noisy.open(DATA / "broken.cu")
    await asyncio.sleep(2.2)  # the noise goes on for 2 s
    found = await noisy.diagnostics_for(uri, 1)
    assert any(d.source == "nvrtc" for d in found), found
    assert noisy.error is None
