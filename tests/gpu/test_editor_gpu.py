"""The editor flow on a real GPU: benchmark, optimize (scripted LLM on 127.0.0.1), accept.

The language server runs as users run it (`python -m cuda_llm_lsp`, real `GpuEvaluator`, real
NVRTC, real FSR loop and openai SDK); only the model is scripted. The baseline does 256
dependent additions per element; the scripted candidate does one multiply, so it is faster on
any GPU and correct within the spec's tolerance. Driven with pygls's client (no pytest-lsp).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.lsp.client import LanguageClient

from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

SOURCE = """\
#include <cstdio>

/* @cuda-llm
sizes.n = [1, 1000, 16777216]
grid = "cdiv(n, 256)"
block = 256
args.n = "n"
args.x = "float32[n]"
args.y = "out float32[n]"
*/
extern "C" __global__ void slow_scale(int n, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i] * (1.0f / 128.0f);
        float acc = 0.0f;
        for (int k = 0; k < 256; ++k) {
            acc += v;
        }
        y[i] = acc;
    }
}

int main() {
    printf("host code is never compiled by NVRTC\\n");
    return 0;
}
"""

FAST = """\
extern "C" __global__ void slow_scale(int n, const float* x, float* y) {
    // one multiply instead of 256 dependent additions
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = x[i] * 2.0f;
    }
}"""

CAPABILITIES = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(
        apply_edit=True,
        workspace_edit=types.WorkspaceEditClientCapabilities(
            document_changes=True,
            change_annotation_support=types.ChangeAnnotationsSupportOptions(groups_on_label=True),
        ),
    ),
    window=types.WindowClientCapabilities(
        work_done_progress=True,
        show_document=types.ShowDocumentClientCapabilities(support=True),
    ),
)


class Editor(LanguageClient):
    def __init__(self) -> None:
        super().__init__("gpu-editor-test", "1")
        self.diagnostics: dict[str, list[types.Diagnostic]] = {}
        self.progress: dict[str, list[Any]] = {}
        self.edits: list[types.ApplyWorkspaceEditParams] = []
        self.messages: list[str] = []


def make_editor() -> Editor:
    editor = Editor()

    @editor.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def publish(ls: Editor, params: types.PublishDiagnosticsParams) -> None:
        ls.diagnostics[params.uri] = list(params.diagnostics)

    @editor.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def create(ls: Editor, params: types.WorkDoneProgressCreateParams) -> None:
        ls.progress.setdefault(str(params.token), [])

    @editor.feature(types.PROGRESS)
    def progress(ls: Editor, params: types.ProgressParams) -> None:
        ls.progress.setdefault(str(params.token), []).append(params.value)

    @editor.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(ls: Editor, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        ls.edits.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    @editor.feature(types.WINDOW_SHOW_MESSAGE)
    def message(ls: Editor, params: types.ShowMessageParams) -> None:
        ls.messages.append(params.message)

    @editor.feature(types.WINDOW_SHOW_DOCUMENT)
    def show(ls: Editor, params: types.ShowDocumentParams) -> types.ShowDocumentResult:
        return types.ShowDocumentResult(success=True)

    @editor.feature(types.WORKSPACE_CONFIGURATION)
    def configuration(ls: Editor, params: types.ConfigurationParams) -> list[Any]:
        return [None for _ in params.items]

    return editor


async def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def ended(editor: Editor, token: str) -> Any:
    values = editor.progress.get(token, [])
    return values and _kind(values[-1]) == "end" and values[-1]


def _kind(value: Any) -> str:
    return value.get("kind") if isinstance(value, dict) else getattr(value, "kind", "")


def _message(value: Any) -> str:
    return (value.get("message") if isinstance(value, dict) else value.message) or ""


async def run_flow(tmp_path: Path, llm: ScriptedLlmServer) -> None:
    path = tmp_path / "slow_scale.cu"
    path.write_text(SOURCE, encoding="utf-8")
    uri = path.as_uri()
    editor = make_editor()
    env = dict(
        os.environ,
        CUDA_LLM_DATA_DIR=str(tmp_path / "data"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    # The server logs to a file: pygls's client never reads the server's stderr pipe, so a
    # chatty server would block on a full pipe. The log is printed when the flow fails.
    log_dir = Path(os.environ.get("CUDA_LLM_TEST_LOG_DIR", tmp_path))  # kept after the run
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / "editor-server.log"
    await editor.start_io(
        sys.executable,
        "-m",
        "cuda_llm_lsp",
        "--log-file",
        str(log_file),
        "--log-level",
        "DEBUG",
        env=env,
    )
    try:
        await editor.initialize_async(
            types.InitializeParams(
                capabilities=CAPABILITIES,
                initialization_options={
                    "cudaLlm": {
                        "baseUrl": llm.base_url,
                        "model": "scripted-model",
                        "rounds": 1,
                        "candidates": 2,
                        "apiKey": "sk-test-not-a-real-key",
                    }
                },
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
        assert not [
            d for d in editor.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error
        ], editor.diagnostics[uri]
        args = [{"uri": uri, "kernel": "slow_scale"}]

        # Benchmark: an Information diagnostic with the summary line.
        answer = await editor.workspace_execute_command_async(
            types.ExecuteCommandParams(command="cudaLlm.benchmark", arguments=args)
        )
        await wait_for(lambda: ended(editor, answer["token"]), 150, "the benchmark to end")

        def info() -> list[types.Diagnostic]:
            return [
                d
                for d in editor.diagnostics.get(uri, [])
                if d.source == "cuda-llm" and d.severity == types.DiagnosticSeverity.Information
            ]

        summary = await wait_for(info, 30, "the benchmark diagnostic")
        assert summary[0].message.startswith("slow_scale: "), summary[0].message
        assert "3/3 cases pass" in summary[0].message and "copy peak" in summary[0].message

        # Optimize: progress, then a suggestion that beats the baseline.
        answer = await editor.workspace_execute_command_async(
            types.ExecuteCommandParams(command="cudaLlm.optimize", arguments=args)
        )
        token = answer["token"]
        end = await wait_for(lambda: ended(editor, token), 200, "the optimize run to end")
        values = editor.progress[token]
        assert _kind(values[0]) == "begin"
        assert "suggestion ready" in _message(end), (_message(end), editor.messages)
        action_line = SOURCE.split("\n").index("    if (i < n) {")
        where = types.Position(line=action_line, character=4)
        actions = await editor.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=where, end=where),
                context=types.CodeActionContext(diagnostics=[]),
            )
        )
        titles = [a.title for a in actions or []]
        accept = next(t for t in titles if t.startswith("Accept optimized slow_scale ("))
        speedup = float(accept.split("(")[1].split("×")[0])
        assert speedup > 1.5, accept

        # Accept: one versioned, annotated edit of exactly the kernel's range.
        done = await editor.workspace_execute_command_async(
            types.ExecuteCommandParams(command="cudaLlm.accept", arguments=args)
        )
        assert done is True, editor.messages
        (request,) = editor.edits
        (change,) = request.edit.document_changes
        assert change.text_document.version == 1
        (edit,) = change.edits
        lines = SOURCE.split("\n")
        start = lines.index(next(line for line in lines if line.startswith('extern "C"')))
        closing = next(i for i in range(start, len(lines)) if lines[i] == "}")
        assert (edit.range.start.line, edit.range.start.character) == (start, 0)
        assert (edit.range.end.line, edit.range.end.character) == (closing, 1)
        assert "x[i] * 2.0f" in edit.new_text
        assert request.edit.change_annotations[edit.annotation_id].needs_confirmation
    except BaseException:
        if log_file.exists():
            print("---- server log (last 150 lines) ----")
            print("\n".join(log_file.read_text(errors="replace").splitlines()[-150:]))
        print("---- progress ----", editor.progress, "\n---- messages ----", editor.messages)
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


def test_optimize_and_accept_on_the_gpu(tmp_path: Path) -> None:
    with ScriptedLlmServer([{"text": kernel_reply(FAST), "repeat": -1}]) as llm:
        asyncio.run(run_flow(tmp_path, llm))
