"""The editor's "Capture test spec for K from program…" and "Verify K in program" (issue 39)
over real stdio. There is no GPU here, so the program's run is `tests/support/fake_capture`
(the server's `capture_runner`), which writes the capture directory the library would; the
spec, the edit, the trust rules and verify's comparison are the real ones.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from tests.lsp.conftest import DATA, ROOT, SCRATCH, SERVERS, EditorClient, lsp_fixture
from tests.support.fake_capture import LOG_ENV, MODE_ENV, SCALE
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

SERVER = [sys.executable, str(ROOT / "tests" / "lsp" / "servers" / "capture_server.py")]
CAPTURE = "Capture test spec for scale from program…"
VERIFY = "Verify scale in program (after your rebuild)"
PROGRAM = ["./build/app", "--steps", "1"]
UNTRUSTED_LOG = SCRATCH / "capture-untrusted.jsonl"
TRUSTED_LOG = SCRATCH / "capture-trusted.jsonl"

plain = lsp_fixture(clients=["visual-studio-code", "neovim"])
captured = lsp_fixture(
    server_command=SERVER,
    # untrusted, yet given at start: initializationOptions are the user's settings
    init_options={
        "cudaLlm": {"debounceMs": 50, "captureCommand": PROGRAM},
        "workspaceTrusted": False,
    },
)
crashed = lsp_fixture(
    server_command=SERVER,
    init_options={"cudaLlm": {"debounceMs": 50, "captureCommand": PROGRAM}},
    env={MODE_ENV: "crash"},
    clients=["visual-studio-code"],
)
untrusted = lsp_fixture(
    server_command=SERVER,
    init_options={"cudaLlm": {"debounceMs": 50}, "workspaceTrusted": False},
    configuration={"cudaLlm": {"captureCommand": ["./evil.sh"]}},
    env={LOG_ENV: str(UNTRUSTED_LOG)},
    clients=["visual-studio-code", "neovim"],
)
trusted = lsp_fixture(  # the same workspace value, trusted: taken (the test above can fail)
    server_command=SERVER,
    init_options={"cudaLlm": {"debounceMs": 50}, "workspaceTrusted": True},
    configuration={"cudaLlm": {"captureCommand": ["./evil.sh"]}},
    env={LOG_ENV: str(TRUSTED_LOG)},
    clients=["visual-studio-code"],
)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


async def _actions(client: EditorClient, uri: str, line: int) -> list[Any]:
    where = types.Range(start=types.Position(line, 0), end=types.Position(line, 0))
    found = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=where,
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    return list(found or [])


async def _run(client: EditorClient, command: str, uri: str) -> Any:
    """Execute `command` on `scale`; when it starts a job, wait for the job's end."""
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[{"uri": uri, "kernel": "scale"}])
    )
    if isinstance(answer, dict) and "token" in answer:
        token = answer["token"]
        await client.wait_for(
            lambda: any(
                isinstance(v, types.WorkDoneProgressEnd)
                for v in client.progress_reports.get(token, [])
            ),
            timeout=60,
        )
    return answer


def _open(client: EditorClient, tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "scale.cu"
    path.write_text(SCALE, encoding="utf-8")
    return client.open(path), path


def _said(client: EditorClient, text: str) -> list[types.ShowMessageParams]:
    return [m for m in client.messages if text in m.message]


async def _push_if_no_pull(client: EditorClient) -> None:
    """Neovim's capability set has no workspace/configuration: the settings come pushed."""
    if not client.supports_configuration_pull:
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=client.get_configuration())
        )


async def test_the_action_is_offered_and_without_a_command_says_how_to_set_it(
    plain: EditorClient, tmp_path: Path
) -> None:
    uri, _ = _open(plain, tmp_path)
    await plain.diagnostics_for(uri, 1)
    actions = await _actions(plain, uri, _line_of(SCALE, "out[i] = a * in[i]"))
    capture = next(a for a in actions if a.title == CAPTURE)
    assert capture.command.command == "cudaLlm.captureSpec"
    assert list(capture.command.arguments) == [{"uri": uri, "kernel": "scale"}]
    assert VERIFY not in [a.title for a in actions]  # no spec, no command
    answer = await _run(plain, "cudaLlm.captureSpec", uri)
    assert answer is None  # no job started
    said = await plain.wait_for(lambda: _said(plain, "cudaLlm.captureCommand"))
    assert "user settings" in said[0].message and "captureCommand = {" in said[0].message
    assert plain.applied_edits == []


async def test_the_spec_from_the_capture_is_offered_as_an_edit_that_parses(
    captured: EditorClient, tmp_path: Path
) -> None:
    uri, path = _open(captured, tmp_path)
    await captured.diagnostics_for(uri, 1)
    actions = await _actions(captured, uri, _line_of(SCALE, "void scale"))
    assert CAPTURE in [a.title for a in actions]
    await _run(captured, "cudaLlm.captureSpec", uri)
    (applied,) = await captured.wait_for(lambda: captured.applied_edits)
    assert applied.label == "Capture test spec for scale"
    edit = applied.edit
    if captured.kind == "visual-studio-code":
        (change,) = edit.document_changes
        assert change.text_document.version == captured.doc_version(uri)
        edits = list(change.edits)
    else:
        edits = list(edit.changes[uri])
    version = captured.change(uri, edits)
    text = captured.text(uri)
    assert text.endswith(SCALE.split("#include <cuda_runtime.h>\n", 1)[1])  # the code unchanged
    block = text.split("__global__")[0]
    assert 'capture = ".cuda-llm/captures/scale"' in block, block
    assert (tmp_path / ".cuda-llm" / "captures" / "scale" / "manifest.json").is_file()
    (kernel,) = find_kernels(text)
    spec, problems = parse_spec(kernel, text)
    assert spec is not None and not problems, problems
    assert spec.capture == ".cuda-llm/captures/scale"
    found = await captured.diagnostics_for(uri, version)
    assert [d for d in found if d.source == "cuda-llm"] == [], found  # the server agrees
    assert _said(captured, "captured scale(float*, float const*, float, int)")

    # the spec names a capture and the command is set: Verify is offered, and runs
    titles = [a.title for a in await _actions(captured, uri, _line_of(text, "void scale"))]
    assert VERIFY in titles and "Benchmark scale" in titles, titles
    path.write_text(text, encoding="utf-8")  # saved (verify reads the file as built)
    await _run(captured, "cudaLlm.verify", uri)
    said = await captured.wait_for(lambda: _said(captured, "verify scale"))
    assert "the outputs match the capture's" in said[0].message, said[0].message
    assert "0.25 ms captured, 0.2 ms now (1.25x)" in said[0].message
    assert "program: 1.5 s captured, 1.2 s now" in said[0].message

    def verified() -> list[types.Diagnostic]:
        return [d for d in captured.diagnostics.get(uri, []) if d.source == "cuda-llm verify"]

    (diagnostic,) = await captured.wait_for(verified)
    assert diagnostic.severity == types.DiagnosticSeverity.Information
    assert diagnostic.range.start.line == _line_of(text, "void scale")
    assert "1.25x" in diagnostic.message


async def test_a_program_that_crashed_says_so_with_the_kernels_it_launched(
    crashed: EditorClient, tmp_path: Path
) -> None:
    uri, _ = _open(crashed, tmp_path)
    await crashed.diagnostics_for(uri, 1)
    await _run(crashed, "cudaLlm.captureSpec", uri)
    (said,) = await crashed.wait_for(lambda: _said(crashed, "capture of scale"))
    assert said.type == types.MessageType.Error
    assert "crashed" in said.message and "other_kernel ×3" in said.message, said.message
    assert crashed.applied_edits == []


async def test_an_untrusted_workspaces_capture_command_is_never_run(
    untrusted: EditorClient, tmp_path: Path
) -> None:
    UNTRUSTED_LOG.unlink(missing_ok=True)
    await _push_if_no_pull(untrusted)
    await untrusted.wait_for(lambda: _said(untrusted, "cudaLlm.captureCommand left out"))
    uri, _ = _open(untrusted, tmp_path)
    await untrusted.diagnostics_for(uri, 1)
    assert await _run(untrusted, "cudaLlm.captureSpec", uri) is None
    await untrusted.wait_for(lambda: _said(untrusted, "runs your program: set"))
    assert not UNTRUSTED_LOG.exists()
    assert untrusted.applied_edits == []


async def test_a_trusted_workspaces_capture_command_is_run(
    trusted: EditorClient, tmp_path: Path
) -> None:
    TRUSTED_LOG.unlink(missing_ok=True)
    await trusted.wait_for(lambda: trusted.messages or True)
    uri, _ = _open(trusted, tmp_path)
    await trusted.diagnostics_for(uri, 1)
    await _run(trusted, "cudaLlm.captureSpec", uri)
    await trusted.wait_for(lambda: trusted.applied_edits)
    (request,) = [json.loads(line) for line in TRUSTED_LOG.read_text().splitlines()]
    assert request["command"] == ["./evil.sh"]


# After an Accept on a kernel whose spec names a capture, with the program set: the editor says
# to rebuild and verify. Recorded GPU outcomes and a scripted model make the suggestion.
FAST = """\
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}"""
LLM = ScriptedLlmServer([{"text": kernel_reply(FAST), "repeat": -1}]).start()
recorded = lsp_fixture(
    server_command=[
        sys.executable,
        str(SERVERS / "recorded_server.py"),
        str(DATA / "recording.json"),
    ],
    init_options={
        "cudaLlm": {
            "debounceMs": 0,
            "baseUrl": LLM.base_url,
            "model": "scripted-model",
            "rounds": 1,
            "candidates": 2,
            "apiKey": "sk-test-not-a-real-key",
            "captureCommand": PROGRAM,
        }
    },
    clients=["visual-studio-code"],
)


async def test_accept_says_to_rebuild_and_verify_in_the_program(
    recorded: EditorClient, tmp_path: Path
) -> None:
    text = (DATA / "saxpy.cu").read_text(encoding="utf-8")
    text = text.replace('args.n = "n"\n', 'capture = ".cuda-llm/captures/saxpy"\nargs.n = "n"\n', 1)
    uri = recorded.open(tmp_path / "saxpy.cu", text)
    await recorded.diagnostics_for(uri, 1)
    answer = await recorded.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.optimize", arguments=[{"uri": uri, "kernel": "saxpy"}]
        )
    )
    token = answer["token"]
    await recorded.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd)
            for v in recorded.progress_reports.get(token, [])
        ),
        timeout=120,
    )
    line = _line_of(text, "void saxpy")
    assert "Verify saxpy in program (after your rebuild)" in [
        a.title for a in await _actions(recorded, uri, line)
    ]
    accepted = await recorded.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="cudaLlm.accept", arguments=[{"uri": uri, "kernel": "saxpy"}]
        )
    )
    assert accepted is True, [m.message for m in recorded.messages]
    said = await recorded.wait_for(lambda: _said(recorded, "'Verify saxpy in program'"))
    assert "rebuild" in said[0].message and "cudaLlm.verify" in said[0].message
