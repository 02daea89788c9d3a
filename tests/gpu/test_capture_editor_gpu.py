"""The editor's "Capture test spec for K from program…" on the GPU, over LSP (issue 39): a real
program built with nvcc from the very file the editor has open; the action captures its launch,
offers the spec as an edit, Benchmark runs that spec as is (the original reproducing the
captured outputs first), and "Verify K in program" reruns the program against the capture."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument

from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from tests.gpu.test_editor_gpu import CAPABILITIES, ROOT, ended, make_editor, wait_for

pytestmark = pytest.mark.gpu

SOURCE = r"""#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void scale(float* out, const float* in, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * in[i];
}

int main() {
    const int n = 10000;
    float *in, *out;
    if (cudaMalloc(&in, n * sizeof(float)) != cudaSuccess) return 3;
    if (cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) return 3;
    float* h = (float*)malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) h[i] = i * 0.25f;
    cudaMemcpy(in, h, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(out, 0, n * sizeof(float));
    for (int round = 0; round < 3; round++) scale<<<(n + 255) / 256, 256>>>(out, in, 2.0f, n);
    if (cudaDeviceSynchronize() != cudaSuccess) return 4;
    printf("done\n");
    return 0;
}
"""
CAPTURE = "Capture test spec for scale from program…"
VERIFY = "Verify scale in program (after your rebuild)"


def _build(root: Path) -> tuple[Path, Path]:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    source = root / "scale.cu"
    source.write_text(SOURCE, encoding="utf-8")
    binary = root / "build" / "scale"
    binary.parent.mkdir()
    done = subprocess.run(
        [nvcc, "-O2", "-arch=native", str(source), "-o", str(binary)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return source, binary


async def _titles(editor: Any, uri: str, line: int) -> list[str]:
    where = types.Range(start=types.Position(line, 0), end=types.Position(line, 0))
    found = await editor.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=where,
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    return [a.title for a in found or []]


async def _job(editor: Any, command: str, uri: str, timeout: float) -> Any:
    answer = await editor.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[{"uri": uri, "kernel": "scale"}])
    )
    assert isinstance(answer, dict) and "token" in answer, (answer, editor.messages)
    token = str(answer["token"])
    return await wait_for(lambda: ended(editor, token), timeout, f"the end of {command}")


async def run_flow(tmp_path: Path) -> None:
    path, _ = _build(tmp_path)
    uri = path.as_uri()
    editor = make_editor()
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    log_file = tmp_path / "capture-editor-server.log"
    await editor.start_io(
        sys.executable, "-m", "cuda_llm_lsp", "--log-file", str(log_file), env=env
    )
    try:
        await editor.initialize_async(
            types.InitializeParams(
                capabilities=CAPABILITIES,
                initialization_options={
                    "cudaLlm": {"captureCommand": ["./build/scale"]},  # relative to the folder
                    "workspaceTrusted": True,
                },
                workspace_folders=[types.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
            )
        )
        editor.initialized(types.InitializedParams())
        editor.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id="cuda-cpp", version=1, text=SOURCE
                )
            )
        )
        await wait_for(lambda: uri in editor.diagnostics, 120, "the first diagnostics")
        line = SOURCE.splitlines().index(next(t for t in SOURCE.splitlines() if "void scale" in t))
        assert CAPTURE in await _titles(editor, uri, line)

        await _job(editor, "cudaLlm.captureSpec", uri, 300)
        assert editor.edits, editor.messages
        (change,) = editor.edits[-1].edit.document_changes
        doc = TextDocument(uri, SOURCE, version=1)
        for edit in change.edits:
            doc.apply_change(
                types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)
            )
        text = doc.source
        (kernel,) = find_kernels(text)
        spec, problems = parse_spec(kernel, text)
        assert spec is not None and not problems, (problems, text)
        assert spec.capture == ".cuda-llm/captures/scale", text
        assert (tmp_path / ".cuda-llm" / "captures" / "scale" / "manifest.json").is_file()
        assert any("captured scale" in m for m in editor.messages), editor.messages
        editor.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        path.write_text(text, encoding="utf-8")  # saved, as verify reads the file

        # the spec benches as is: the original reproduces the captured outputs first
        end = await _job(editor, "cudaLlm.benchmark", uri, 600)
        message = (end.get("message") if isinstance(end, dict) else end.message) or ""
        passed = re.search(r"(\d+)/(\d+) cases pass", message)
        assert passed and passed[1] == passed[2], (message, editor.messages)

        new_line = text.splitlines().index(next(t for t in text.splitlines() if "void scale" in t))
        assert VERIFY in await _titles(editor, uri, new_line)
        await _job(editor, "cudaLlm.verify", uri, 300)  # the same build: the outputs agree
        said = [m for m in editor.messages if m.startswith("cuda-llm: verify scale")]
        assert said and "the outputs match the capture's" in said[-1], editor.messages
        assert "ms captured" in said[-1] and "s captured" in said[-1], said[-1]

        def verified() -> list[types.Diagnostic]:
            return [d for d in editor.diagnostics.get(uri, []) if d.source == "cuda-llm verify"]

        (diagnostic,) = await wait_for(verified, 30, "the verify diagnostic")
        assert diagnostic.severity == types.DiagnosticSeverity.Information
        assert diagnostic.range.start.line == new_line
    except BaseException:
        if log_file.exists():
            print("\n".join(log_file.read_text(errors="replace").splitlines()[-150:]))
        print("---- messages ----", editor.messages)
        raise
    finally:
        # bounded: a stuck server must fail the test, not hang the run
        with contextlib.suppress(Exception):
            await asyncio.wait_for(editor.shutdown_async(None), 10)
            editor.exit(None)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(editor.stop(), 10)
        if editor._server is not None and editor._server.returncode is None:
            editor._server.kill()


def test_capture_spec_bench_and_verify_in_the_editor(tmp_path: Path) -> None:
    asyncio.run(run_flow(tmp_path))
