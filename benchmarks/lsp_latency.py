"""Language-server latency: didChange -> publishDiagnostics, hover while a compile runs, and
diagnostics right after a burst of open/close pairs of other files.

Drives the real server (`python -m cuda_llm_lsp`) over stdio with pygls's client, on a realistic
two-kernel file of ~80 lines with host code. Every edit changes a constant inside a kernel, so
each one is a fresh NVRTC compile (no cache hit). Prints a table; exit 1 if a budget is missed.

    python benchmarks/lsp_latency.py [--edits 25] [--debounce-ms 50] [--pairs 150] [--json]

Budgets (issue 2): median didChange -> publishDiagnostics <= 250 ms on the 2-core CI machine;
hover answered within 100 ms while a compile runs. Issue 25: an edit sent right after `--pairs`
open/close pairs of other files (one every 2 ms, each open 20 ms, as search previews send them)
gets its diagnostics within 2,000 ms. Issue 26: hover within 100 ms while a job
whose GPU worker is stuck (`tests/lsp/servers/stuck_server.py`: its cancel takes 30 s) is being
cancelled; the unit test `tests/lsp/test_stuck_gpu.py` holds a loose bound only. And a request
on a small file answered within 3 s while a 5 MB file is analysed (one tree-sitter parse holds
the GIL about a second; `tests/lsp/test_bad_input.py` holds a loose bound only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

SOURCE = """\
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <math.h>
#include <cuda_runtime.h>

#define TILE 32
#define ROWS_PER_THREAD 8

/* @cuda-llm
sizes.rows = [1, 17, 1000, 4096]
sizes.cols = [1, 33, 999, 8192]
grid = ["cdiv(cols, 32)", "cdiv(rows, 32)"]
block = [32, 8]
args.in = "float32[rows * cols]"
args.out = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void transpose(const float* in, float* out, int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS_PER_THREAD) {
        if (x < cols && y + j < rows) {
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x] * SCALE_A;
        }
    }
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS_PER_THREAD) {
        if (x < rows && y + j < cols) {
            out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
        }
    }
}

/* @cuda-llm
sizes.rows = [1, 7, 512, 4096]
sizes.cols = [1, 100, 1000, 4096]
grid = "rows"
block = 256
args.x = "float32[rows * cols]"
args.y = "out float32[rows * cols]"
args.rows = "rows"
args.cols = "cols"
*/
extern "C" __global__ void softmax_rows(const float* x, float* y, int rows, int cols) {
    __shared__ float scratch[256];
    int row = blockIdx.x;
    const float* in = x + (size_t)row * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, in[c]);
    scratch[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            scratch[threadIdx.x] = fmaxf(scratch[threadIdx.x], scratch[threadIdx.x + s]);
        }
        __syncthreads();
    }
    m = scratch[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[c] - m) * SCALE_B;
    scratch[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) scratch[threadIdx.x] += scratch[threadIdx.x + s];
        __syncthreads();
    }
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        y[(size_t)row * cols + c] = expf(in[c] - m) / scratch[0];
    }
}

int main() {
    const int rows = 1024, cols = 1024;
    std::vector<float> host(rows * cols, 1.0f);
    float *a, *b;
    cudaMalloc(&a, host.size() * sizeof(float));
    cudaMalloc(&b, host.size() * sizeof(float));
    transpose<<<dim3(cols / TILE, rows / TILE), dim3(TILE, ROWS_PER_THREAD)>>>(a, b, rows, cols);
    softmax_rows<<<rows, 256>>>(a, b, rows, cols);
    printf("%d\\n", (int)cudaDeviceSynchronize());
    return 0;
}
"""


def text_for(edit: int) -> str:
    """The file with kernel constants that differ per edit: a fresh compile each time."""
    return SOURCE.replace("SCALE_A", f"{1 + edit * 1e-4:.6f}f").replace(
        "SCALE_B", f"{1 - edit * 1e-4:.6f}f"
    )


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("lsp-latency", "1")
        self.published: dict[tuple[str, int], tuple[float, int]] = {}
        self.messages: list[str] = []


def make_client() -> Client:
    client = Client()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(ls: Client, params: types.PublishDiagnosticsParams) -> None:
        errors = sum(1 for d in params.diagnostics if d.severity == types.DiagnosticSeverity.Error)
        ls.published[(params.uri, params.version or 0)] = (time.perf_counter(), errors)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_message(ls: Client, params: types.ShowMessageParams) -> None:
        ls.messages.append(params.message)

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def on_configuration(ls: Client, params: types.ConfigurationParams) -> list[Any]:
        return [None for _ in params.items]

    return client


async def wait_publish(client: Client, uri: str, version: int, timeout: float = 60) -> float:
    deadline = time.perf_counter() + timeout
    while (uri, version) not in client.published:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no diagnostics for version {version}")
        await asyncio.sleep(0.001)
    return client.published[(uri, version)][0]


def change(client: Client, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def burst_then_edit(client: Client, uri: str, version: int, pairs: int) -> float:
    """`pairs` other files opened and closed, then an edit of `uri`: ms to its diagnostics."""
    folder = Path(tempfile.mkdtemp(prefix="lsp-latency-burst-"))
    loop = asyncio.get_running_loop()
    started = loop.time()
    events: list[tuple[float, int, bool]] = []
    for i in range(pairs):
        events += [(i * 0.002, i, True), (i * 0.002 + 0.02, i, False)]
    for at, i, is_open in sorted(events):
        await asyncio.sleep(max(0.0, started + at - loop.time()))
        other = (folder / f"preview_{i}.cu").as_uri()
        if is_open:
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=other, language_id="cuda-cpp", version=1, text=text_for(10_000 + i)
                    )
                )
            )
        else:
            client.text_document_did_close(
                types.DidCloseTextDocumentParams(
                    text_document=types.TextDocumentIdentifier(uri=other)
                )
            )
    sent = time.perf_counter()
    change(client, uri, version, text_for(20_000))
    return (await wait_publish(client, uri, version) - sent) * 1000


async def measure(edits: int, debounce_ms: int, hovers: int, pairs: int = 150) -> dict[str, Any]:
    client = make_client()
    env = dict(
        os.environ,
        XDG_CACHE_HOME=tempfile.mkdtemp(prefix="lsp-latency-cache-"),
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    await client.start_io(sys.executable, "-m", "cuda_llm_lsp", env=env)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={"cudaLlm": {"debounceMs": debounce_ms}},
        )
    )
    client.initialized(types.InitializedParams())
    path = Path(tempfile.mkdtemp(prefix="lsp-latency-")) / "kernels.cu"
    path.write_text(text_for(0), encoding="utf-8")
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="cuda-cpp", version=1, text=text_for(0)
            )
        )
    )
    await wait_publish(client, uri, 1, timeout=120)  # the first compile loads NVRTC
    if client.published[(uri, 1)][1]:
        raise SystemExit("the benchmark file has compile errors: fix benchmarks/lsp_latency.py")

    version = 1
    latencies: list[float] = []
    for edit in range(1, edits + 3):  # two warm-up edits, not counted
        version += 1
        sent = time.perf_counter()
        change(client, uri, version, text_for(edit))
        arrived = await wait_publish(client, uri, version)
        if edit > 2:
            latencies.append((arrived - sent) * 1000)
        await asyncio.sleep(0.05)

    hover_ms: list[float] = []
    name_line = SOURCE.split("\n").index(
        next(line for line in SOURCE.split("\n") if "void transpose" in line)
    )
    name_col = SOURCE.split("\n")[name_line].index("transpose") + 3
    for edit in range(edits + 3, edits + 3 + hovers):
        version += 1
        change(client, uri, version, text_for(edit))
        await asyncio.sleep(debounce_ms / 1000 + 0.03)  # the compile is now running
        started = time.perf_counter()
        hover = await client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=name_line, character=name_col),
            )
        )
        hover_ms.append((time.perf_counter() - started) * 1000)
        if hover is None:
            raise SystemExit("hover returned nothing on the kernel name")
        compile_running = (uri, version) not in client.published
        await wait_publish(client, uri, version)
        if not compile_running:
            hover_ms[-1] = float("nan")  # the compile had ended: not a measurement under load

    version += 1
    burst_ms = await burst_then_edit(client, uri, version, pairs)

    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    valid_hovers = [h for h in hover_ms if h == h]
    return {
        "edits": len(latencies),
        "debounce_ms": debounce_ms,
        "change_to_diagnostics_ms": {
            "median": statistics.median(latencies),
            "p90": sorted(latencies)[int(0.9 * (len(latencies) - 1))],
            "min": min(latencies),
            "max": max(latencies),
        },
        "hover_during_compile_ms": {
            "samples": len(valid_hovers),
            "median": statistics.median(valid_hovers) if valid_hovers else None,
            "max": max(valid_hovers) if valid_hovers else None,
        },
        "after_open_close_burst_ms": {"pairs": pairs, "change_to_diagnostics": burst_ms},
        "cpus": os.cpu_count(),
        "lines": len(SOURCE.split("\n")),
    }


def measure_stuck(hovers: int) -> dict[str, Any]:
    """Hover latency right after cancelling a Benchmark whose GPU worker is stuck."""
    from tests.lsp.test_stuck_gpu import command, hover_s
    from tests.support.raw_lsp import RawServer, server_env

    scratch = Path(tempfile.mkdtemp(prefix="lsp-stuck-"))
    marker = scratch / "stuck"
    argv = [sys.executable, str(ROOT / "tests/lsp/servers/stuck_server.py"), str(marker)]
    server = RawServer(server_env(scratch), argv=argv)
    try:
        server.initialize('{"cudaLlm": {"debounceMs": 0}}')
        text = (ROOT / "tests/lsp/data/saxpy.cu").read_text(encoding="utf-8")
        uri = server.open(scratch / "saxpy.cu", text)
        server.diagnostics(uri, 1, timeout=120)
        lines = text.splitlines()
        line = next(i for i, x in enumerate(lines) if "void saxpy" in x)
        command(server, "cudaLlm.benchmark", uri, "saxpy")
        deadline = time.monotonic() + 120
        while not marker.exists():
            if time.monotonic() > deadline:
                raise SystemExit("the stuck benchmark never started")
            time.sleep(0.05)
        command(server, "cudaLlm.cancel", uri, "saxpy")
        ms = [1000 * hover_s(server, uri, line, lines[line].index("saxpy")) for _ in range(hovers)]
    finally:
        server.close()
    return {"samples": len(ms), "median": statistics.median(ms), "max": max(ms)}


def measure_big_file(requests: int = 5) -> dict[str, Any]:
    """documentSymbol on a small file while a 5 MB file is being analysed (seconds)."""
    from tests.support.raw_lsp import RawServer, server_env

    scratch = Path(tempfile.mkdtemp(prefix="lsp-big-"))
    unit = (ROOT / "tests/lsp/data/saxpy.cu").read_text(encoding="utf-8")
    unit = unit.replace("int main()", "int main_N()")
    copies = 5_000_000 // len(unit) + 1
    big = "".join(
        unit.replace("saxpy", f"saxpy{i}")
        .replace("scale_rows", f"scale_rows{i}")
        .replace("main_N", f"main_{i}")
        for i in range(copies)
    )
    server = RawServer(server_env(scratch))
    try:
        server.initialize('{"cudaLlm": {"debounceMs": 0}}')
        small = server.open(scratch / "small.cu", unit)
        server.diagnostics(small, 1, timeout=120)
        server.open(scratch / "big.cu", big)
        seconds = []
        for _ in range(requests):
            started = time.monotonic()
            params = {"textDocument": {"uri": small}}
            server.response(server.request("textDocument/documentSymbol", params), timeout=60)
            seconds.append(time.monotonic() - started)
    finally:
        server.close()
    return {"samples": len(seconds), "max_s": max(seconds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=25, help="timed edits (default 25)")
    parser.add_argument("--hovers", type=int, default=20, help="hovers during compiles")
    parser.add_argument(
        "--debounce-ms", type=int, default=None, help="server debounce (default: the setting's)"
    )
    parser.add_argument(
        "--pairs", type=int, default=150, help="open/close pairs before the last edit"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.edits < 20:
        parser.error("--edits must be at least 20")
    from cuda_llm_lsp.config import Settings

    debounce = Settings().debounce_ms if args.debounce_ms is None else args.debounce_ms
    result = asyncio.run(measure(args.edits, debounce, args.hovers, args.pairs))
    result["hover_while_cancelling_a_stuck_gpu_job_ms"] = stuck = measure_stuck(args.hovers)
    result["request_while_a_5mb_file_is_analysed"] = big = measure_big_file()
    change_ms = result["change_to_diagnostics_ms"]
    hover = result["hover_during_compile_ms"]
    ok_change = change_ms["median"] <= 250
    ok_hover = hover["max"] is not None and hover["max"] <= 100 and stuck["max"] <= 100
    ok_hover = ok_hover and big["max_s"] <= 3.0
    burst = result["after_open_close_burst_ms"]
    ok_burst = burst["change_to_diagnostics"] <= 2000
    ok = ok_change and ok_hover and ok_burst
    if args.json:
        print(json.dumps(result | {"ok": ok}, indent=2))
    else:
        print(
            f"cuda-llm-lsp latency · {result['lines']}-line two-kernel file · "
            f"{result['cpus']} CPUs · debounce {debounce} ms"
        )
        print(f"{'measure':<40}{'median':>10}{'p90/max':>10}{'budget':>10}  ok")
        print(
            f"{'didChange -> publishDiagnostics (ms)':<40}{change_ms['median']:>10.1f}"
            f"{change_ms['p90']:>10.1f}{'250':>10}  {'yes' if ok_change else 'NO'}"
        )
        nan = float("nan")
        verdict = "yes" if ok_hover else "NO"
        print(
            f"{'hover during a compile (ms)':<40}{hover['median'] or nan:>10.1f}"
            f"{hover['max'] or nan:>10.1f}{'100':>10}  {verdict}"
        )
        print(
            f"{'hover, cancelling a stuck GPU job (ms)':<40}{stuck['median']:>10.1f}"
            f"{stuck['max']:>10.1f}{'100':>10}  {verdict}"
        )
        print(
            f"{'request, a 5 MB file analysed (s)':<40}{'':>10}{big['max_s']:>10.2f}{'3':>10}  "
            f"{verdict}"
        )
        label = f"edit after {burst['pairs']} open/close pairs (ms)"
        print(
            f"{label:<40}{burst['change_to_diagnostics']:>10.1f}{'':>10}{'2000':>10}  "
            f"{'yes' if ok_burst else 'NO'}"
        )
        print(
            f"({result['edits']} edits, each a fresh compile; {hover['samples']} hovers sent "
            "while a compile was running)"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
