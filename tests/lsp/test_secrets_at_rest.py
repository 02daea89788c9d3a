"""Nothing the server writes to disk holds the API key or a secret-looking variable's value,
whatever the file includes (issue 25, finding 2), over real stdio.

The key is planted in the server's environment (OPENAI_API_KEY, a *_TOKEN variable), in
`initializationOptions` and in a header the file includes; the file also includes
`/proc/self/environ`. Every file under the server's cache, data and log locations is read back.
"""

from __future__ import annotations

from pathlib import Path

from tests.lsp.hardening import DIAGNOSTICS_S, KERNEL, initialize, on_line
from tests.support.raw_lsp import RawServer, server_env

ENV_KEY = "sk-planted-env-0123456789abcdef"
TOKEN = "ghp_plantedDeployToken987654321"
INIT_KEY = "sk-planted-init-fedcba9876543210"
SECRETS = (ENV_KEY, TOKEN, INIT_KEY)


def _written(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_secrets_never_reach_the_disk(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    log = scratch / "server.log"
    env = server_env(
        scratch,
        OPENAI_API_KEY=ENV_KEY,
        MY_DEPLOY_TOKEN=TOKEN,
        CUDA_LLM_CACHE_DIR=str(scratch / "compile-cache"),
    )
    # each secret on a line NVRTC reports, so its log echoes the line
    (workspace / "leak.cuh").write_text(
        "".join(f"__device__ int leak{i} = {s};\n" for i, s in enumerate(SECRETS))
    )
    text = '#include "/proc/self/environ"\n#include "leak.cuh"\n' + KERNEL
    server = RawServer(env=env, args=("--log-file", str(log), "--log-level", "DEBUG"))
    try:
        initialize(server, {"cudaLlm": {"apiKey": INIT_KEY}}, workspace)
        uri = server.open(workspace / "k.cu", text)
        diagnostics = server.diagnostics(uri, 1, DIAGNOSTICS_S)
        server.request("shutdown")
        server.notify("exit")
        server.exit_status(timeout=30)
    finally:
        server.close()
    written = _written(scratch)
    assert any("compile-cache" in str(p) for p in written), "the compile cache was written"
    assert log in written, "the log was written"
    for path, data in written.items():
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret} in {path}"
    published = repr(diagnostics)  # nor does the editor see them
    assert not [s for s in SECRETS if s in published], published
    assert any("/proc is never read" in m for m in on_line(diagnostics, 0)), diagnostics
    assert on_line(diagnostics, 1), "the header's errors are reported on its #include line"
