"""Typing latency on a real file with heavy headers (issue 38, item 5): didChange -> versioned
diagnostics, and didOpen -> first diagnostics.

Drives the real server (`python -m cuda_llm_lsp`) over stdio with pygls's client on
`benchmarks/heavy_headers/train_kernels.cu` (written for this benchmark, in the style of a GPT-2
training file: ~720 lines, 24 kernels, `cuda_bf16.h`, `cuda_fp16.h`, `cooperative_groups.h` with
`cooperative_groups/reduce.h`, 128-bit packed bf16 loads, host launchers). Every edit changes a
constant inside one kernel (`gelu_forward_kernel`), as a user types in one kernel; every third
edit types an error there (an undeclared name), and the timed diagnostics must carry it on its
line: a publish that misses it (a stale result passed off as current) fails the run. The
diagnostics timed are the first publish carrying the edit's version, clean or not as the text
says. Prints a table; exit 1 if a budget is missed or an error is missed.

    python benchmarks/lsp_heavy_headers.py [--edits 15] [--debounce-ms MS] [--pause-ms 300]
                                           [--persistent-pch] [--json]

Budgets (issue 38): median didChange -> versioned diagnostics <= 250 ms, didOpen -> first
diagnostics <= 1 s, on the 2-core CI machine (the server's default debounce included). Also
timed, not budgeted: didOpen -> first diagnostics of a second file with the same headers, opened
after the edits (the server's compile processes hold their PCH by then).
`--pause-ms` is the time between an edit's diagnostics and the next edit (a typist's pause).

`--persistent-pch`: `cudaLlm.persistentPch` on, and a second server session after the first,
sharing a fresh cache folder (`CUDA_LLM_CACHE_DIR`): the first session's open is as without it
(no PCH kept yet; the first check writes one), the second session's open of the file (edited
in one constant since, so that the cached compile results do not answer) reads the kept PCH.
The open budget is then the second session's.
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
FILE = ROOT / "benchmarks" / "heavy_headers" / "train_kernels.cu"
EDITED = "        float cube = 0.044715f * xi * xi * xi;\n"  # inside gelu_forward_kernel
CHANGE_BUDGET_MS = 250
OPEN_BUDGET_MS = 1000


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("lsp-heavy-headers", "1")
        # (uri, version) -> [(arrival, 1-based lines of its errors)]
        self.published: dict[tuple[str, int], list[tuple[float, list[int]]]] = {}


def make_client() -> Client:
    client = Client()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(ls: Client, params: types.PublishDiagnosticsParams) -> None:
        errors = [
            d.range.start.line + 1
            for d in params.diagnostics
            if d.severity == types.DiagnosticSeverity.Error
        ]
        key = (params.uri, params.version or 0)
        ls.published.setdefault(key, []).append((time.perf_counter(), errors))

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def on_configuration(ls: Client, params: types.ConfigurationParams) -> list[Any]:
        return [None for _ in params.items]

    return client


def text_for(base: str, edit: int) -> tuple[str, int | None]:
    """The file after edit number `edit`, and the 1-based line of the error it types (or None)."""
    assert EDITED in base
    if edit % 3 == 0:
        line = f"        float cube = 0.044715f * xi * xi * xi * undeclared_{edit};\n"
        at = base[: base.index(EDITED)].count("\n") + 1
        return base.replace(EDITED, line, 1), at
    line = f"        float cube = 0.0447{edit:02d}f * xi * xi * xi;\n"
    return base.replace(EDITED, line, 1), None


async def wait_publish(
    client: Client, uri: str, version: int, timeout: float
) -> tuple[float, list[int]]:
    deadline = time.perf_counter() + timeout
    while not client.published.get((uri, version)):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no diagnostics for version {version}")
        await asyncio.sleep(0.001)
    return client.published[(uri, version)][0]


async def start_server(options: dict[str, Any], cache: str | None) -> Client:
    """The server over stdio, initialized with `options`; `cache`: its CUDA_LLM_CACHE_DIR."""
    client = make_client()
    env = dict(
        os.environ,
        XDG_CACHE_HOME=tempfile.mkdtemp(prefix="lsp-heavy-cache-"),
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    env.pop("CUDA_LLM_CACHE_DIR", None)
    if cache is not None:
        env["CUDA_LLM_CACHE_DIR"] = cache
    await client.start_io(sys.executable, "-m", "cuda_llm_lsp", env=env)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            initialization_options={"cudaLlm": options},
        )
    )
    client.initialized(types.InitializedParams())
    return client


async def open_file(client: Client, path: Path, text: str) -> float:
    """didOpen -> the first diagnostics of version 1, in ms; the file must be clean."""
    opened = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=path.as_uri(), language_id="cuda-cpp", version=1, text=text
            )
        )
    )
    arrived, errors = await wait_publish(client, path.as_uri(), 1, timeout=180)
    if errors:
        raise SystemExit(f"the benchmark file has compile errors on lines {errors}")
    return (arrived - opened) * 1000


async def stop_server(client: Client) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def measure(
    edits: int, debounce_ms: int | None, pause_s: float, persistent: bool = False
) -> dict[str, Any]:
    options: dict[str, Any] = {} if debounce_ms is None else {"debounceMs": debounce_ms}
    if persistent:
        options["persistentPch"] = True
    cache = tempfile.mkdtemp(prefix="lsp-heavy-pch-") if persistent else None
    client = await start_server(options, cache)
    base = FILE.read_text(encoding="utf-8")
    path = Path(tempfile.mkdtemp(prefix="lsp-heavy-")) / FILE.name
    path.write_text(base, encoding="utf-8")
    uri = path.as_uri()
    open_ms = await open_file(client, path, base)
    await asyncio.sleep(pause_s)

    change_ms: list[float] = []
    missed: list[str] = []
    version = 1
    for edit in range(1, edits + 3):  # two warm-up edits, not counted
        version += 1
        text, error_line = text_for(base, edit)
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        arrived, errors = await wait_publish(client, uri, version, timeout=120)
        if error_line is not None and error_line not in errors:
            missed.append(f"version {version}: error on line {error_line} not shown ({errors})")
        if error_line is None and errors:
            missed.append(f"version {version}: errors on lines {errors} in a clean text")
        if edit > 2:
            change_ms.append((arrived - sent) * 1000)
        await asyncio.sleep(pause_s)
    # a second file of the project with the same headers, opened now: its first diagnostics
    other = path.with_name("other_kernels.cu")
    other_text = base.replace("gelu_forward_kernel", "gelu_forward_kernel2")
    other.write_text(other_text, encoding="utf-8")
    opened = time.perf_counter()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=other.as_uri(), language_id="cuda-cpp", version=1, text=other_text
            )
        )
    )
    arrived, errors = await wait_publish(client, other.as_uri(), 1, timeout=180)
    second_open_ms = (arrived - opened) * 1000
    if errors:
        missed.append(f"the second file: errors on lines {errors} in a clean text")
    await stop_server(client)
    next_session_open_ms = None
    if persistent:  # a new session, the same cache: the file edited since in one constant
        client = await start_server(options, cache)  # opened at once, as the first session
        next_session_open_ms = await open_file(client, path, text_for(base, 1)[0])
        await stop_server(client)
    return {
        "file": str(FILE.relative_to(ROOT)),
        "lines": base.count("\n"),
        "edits": len(change_ms),
        "open_to_diagnostics_ms": open_ms,
        "second_file_open_to_diagnostics_ms": second_open_ms,
        "next_session_open_to_diagnostics_ms": next_session_open_ms,
        "kept_pch_mb": _kept_mb(cache),
        "change_to_diagnostics_ms": _summary(change_ms),
        "all_ms": [round(v) for v in change_ms],
        "wrong": missed,
    }


def _kept_mb(cache: str | None) -> float | None:
    """The size of the PCHs kept in `cache` (`--persistent-pch`), in MB."""
    if cache is None:
        return None
    return sum(p.stat().st_size for p in Path(cache).glob("pch/*.pch")) / 1e6


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "p90": sorted(values)[int(0.9 * (len(values) - 1))],
        "max": max(values),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--edits", type=int, default=15, help="timed edits (default 15)")
    parser.add_argument("--debounce-ms", type=int, default=None, help="server debounce")
    parser.add_argument("--pause-ms", type=int, default=300, help="between edits (default 300)")
    parser.add_argument(
        "--persistent-pch",
        action="store_true",
        help="cudaLlm.persistentPch on; time a second session's open too",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    row = asyncio.run(
        measure(args.edits, args.debounce_ms, args.pause_ms / 1000, args.persistent_pch)
    )
    d = row["change_to_diagnostics_ms"]
    budgeted_open = row["next_session_open_to_diagnostics_ms"] or row["open_to_diagnostics_ms"]
    ok = d["median"] <= CHANGE_BUDGET_MS and budgeted_open <= OPEN_BUDGET_MS
    ok = ok and not row["wrong"]
    if args.json:
        print(json.dumps({**row, "cpus": os.cpu_count(), "load_before": load, "ok": ok}, indent=2))
        return 0 if ok else 1
    print(
        f"cuda-llm-lsp on {row['file']} ({row['lines']} lines) · {os.cpu_count()} CPUs · load "
        f"{load:.1f} before · {row['edits']} edits inside one kernel"
    )
    print(
        f"didChange -> diagnostics: median {d['median']:.0f} ms, p90 {d['p90']:.0f}, "
        f"max {d['max']:.0f} (budget {CHANGE_BUDGET_MS})"
    )
    budget = "" if args.persistent_pch else f" (budget {OPEN_BUDGET_MS})"
    print(f"didOpen -> first diagnostics: {row['open_to_diagnostics_ms']:.0f} ms{budget}")
    print(
        f"didOpen of a second file with the same headers -> first diagnostics: "
        f"{row['second_file_open_to_diagnostics_ms']:.0f} ms"
    )
    if args.persistent_pch:
        print(
            "didOpen in a second session (persistentPch, its PCH kept: "
            f"{row['kept_pch_mb']:.0f} MB) -> first diagnostics: "
            f"{row['next_session_open_to_diagnostics_ms']:.0f} ms (budget {OPEN_BUDGET_MS})"
        )
    for wrong in row["wrong"]:
        print("WRONG:", wrong)
    print("budgets: " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
