"""Optimize from the editor: actions, progress, cancel, result diagnostics, accept / reject / show.

Real server, real NVRTC, real FSR loop and openai SDK against a scripted endpoint on 127.0.0.1;
only the GPU is replaced by recorded outcomes (tests/lsp/data/recording.json).
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.fsr.history import RunHistory
from tests.lsp.conftest import DATA, SCRATCH, SERVERS, EditorClient, lsp_fixture
from tests.support.load import slack
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

LLM = ScriptedLlmServer(
    [
        {"match": "slow_copy", "text": kernel_reply(FAST), "delay_s": 20, "repeat": -1},
        {"match": "candidate 1 of", "text": kernel_reply(WRONG), "repeat": -1},
        {"match": "candidate 1, repair", "text": kernel_reply(WRONG), "repeat": -1},  # stays wrong
        {"text": kernel_reply(FAST), "repeat": -1},
    ]
).start()

# The real server with recorded GPU outcomes, against the scripted LLM above.
RECORDED = [sys.executable, str(SERVERS / "recorded_server.py"), str(DATA / "recording.json")]
OPTIONS = {
    "cudaLlm": {
        "debounceMs": 0,
        "baseUrl": LLM.base_url,
        "model": "scripted-model",
        "rounds": 1,
        "candidates": 2,
        "apiKey": "sk-test-not-a-real-key",
    }
}

client = lsp_fixture(server_command=RECORDED, init_options=OPTIONS)


def _args(uri: str, kernel: str) -> list[Any]:
    return [{"uri": uri, "kernel": kernel}]


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n")) if needle in line)


async def _actions(client: EditorClient, uri: str, line: int, character: int = 4) -> list[Any]:
    where = types.Position(line=line, character=character)
    found = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=where, end=where),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    return list(found or [])


async def _command(client: EditorClient, name: str, uri: str, kernel: str) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=_args(uri, kernel))
    )


def _values(client: EditorClient, token: str) -> list[Any]:
    return list(client.progress_reports.get(token, []))


async def _optimize(client: EditorClient, uri: str) -> str:
    answer = await _command(client, "cudaLlm.optimize", uri, "saxpy")
    token = answer["token"]
    await client.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in _values(client, token)),
        timeout=120,
    )
    return token


async def test_kernel_actions_are_offered_anywhere_inside_the_kernel(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    text = client.text(uri)
    body = _line_of(text, "y[i] = a * x[i] + y[i];")
    titles = {a.title: a for a in await _actions(client, uri, body)}
    assert "Optimize saxpy" in titles and "Benchmark saxpy" in titles
    assert titles["Optimize saxpy"].kind == types.CodeActionKind.RefactorRewrite
    assert titles["Optimize saxpy"].command.command == "cudaLlm.optimize"
    assert not any(t.startswith("Add test spec") for t in titles)  # saxpy has one
    assert await _actions(client, uri, _line_of(text, "int main()")) == []


async def test_kernel_actions_are_offered_between_a_spec_block_and_its_kernel(
    client: EditorClient,
) -> None:
    text = (DATA / "saxpy.cu").read_text(encoding="utf-8")
    text = text.replace("*/\nextern", "*/\n\n// the kernel\nextern", 1)
    uri = client.open(DATA / "saxpy.cu", text)
    for line in (_line_of(text, "args.n = "), _line_of(text, "// the kernel")):
        titles = [a.title for a in await _actions(client, uri, line, 0)]
        assert "Optimize saxpy" in titles, (line, titles)


async def test_add_test_spec_inserts_a_draft_that_parses(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    text = client.text(uri)
    actions = await _actions(client, uri, _line_of(text, "m[r * cols + c] *= 0.5f;"))
    add = next(a for a in actions if a.title == "Add test spec for scale_rows")
    if client.kind == "visual-studio-code":
        (change,) = add.edit.document_changes
        assert change.text_document.version == client.doc_version(uri)
        edits = change.edits
    else:
        edits = add.edit.changes[uri]
    version = client.change(uri, list(edits))
    new_text = client.text(uri)
    assert "/* @cuda-llm" in new_text.split("scale_rows")[0].split("void saxpy")[1]
    found = await client.diagnostics_for(uri, version)
    assert [d for d in found if d.source == "cuda-llm"] == [], found  # the draft parses


async def test_a_kernel_without_a_spec_is_offered_only_add_test_spec(client: EditorClient) -> None:
    """README: without a spec only "Add test spec" (and its capture from the program) is
    offered (actions and lenses), as nothing can be benchmarked or optimized before it has one."""
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    text = client.text(uri)
    titles = [a.title for a in await _actions(client, uri, _line_of(text, "m[r * cols + c]"))]
    assert titles == [
        "Add test spec for scale_rows",
        "Capture test spec for scale_rows from program…",
    ], titles
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    line = _line_of(text, "scale_rows(float* m")
    runs = [
        lens.command.title
        for lens in lenses or []
        if lens.range.start.line == line and lens.command and " · " not in lens.command.title
    ]
    assert runs == ["Add test spec"], runs


async def test_optimize_reports_progress_results_and_accept_applies_one_edit(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    original_text = client.text(uri)
    token = await _optimize(client, uri)

    values = _values(client, token)
    assert isinstance(values[0], types.WorkDoneProgressBegin) and values[0].cancellable
    assert isinstance(values[-1], types.WorkDoneProgressEnd)
    assert sum(isinstance(v, types.WorkDoneProgressBegin) for v in values) == 1
    assert sum(isinstance(v, types.WorkDoneProgressEnd) for v in values) == 1
    reports = [v.message for v in values if isinstance(v, types.WorkDoneProgressReport)]
    # [judge]: no launch site in the file, so the launch stays fixed: said at the run's start
    assert "; launch: fixed to the original" in (reports[0] or ""), reports
    assert "no launch site" in (reports[0] or ""), reports
    assert any("candidate 1.1: wrong output" in (m or "") for m in reports), reports
    assert any("candidate 1.2: ok" in (m or "") for m in reports), reports
    assert "2.00× faster" in values[-1].message

    # The result diagnostics sit on the kernel's name.
    name_line = _line_of(original_text, "void saxpy")
    info = await client.wait_for(
        lambda: [
            d
            for d in client.diagnostics.get(uri, [])
            if d.source == "cuda-llm" and d.severity == types.DiagnosticSeverity.Information
        ]
    )
    assert info[0].range.start.line == name_line
    assert "baseline 1.000 ms" in info[0].message and "2.00× faster" in info[0].message
    hints = [d for d in client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Hint]
    assert hints and "wrong output" in hints[0].message

    titles = [a.title for a in await _actions(client, uri, name_line + 1)]
    assert "Accept optimized saxpy (2.00× faster, 3/3 cases)" in titles
    assert "Reject suggestion for saxpy" in titles and "Show suggested saxpy" in titles

    version = client.doc_version(uri)
    assert await _command(client, "cudaLlm.accept", uri, "saxpy") is True
    (request,) = client.applied_edits
    edit = request.edit
    start = types.Position(
        line=_line_of(original_text, 'extern "C" __global__ void saxpy'), character=0
    )
    lines = original_text.split("\n")
    end_line = next(i for i in range(start.line, len(lines)) if lines[i] == "}")
    end = types.Position(line=end_line, character=1)
    if client.kind == "visual-studio-code":
        (change,) = edit.document_changes
        assert change.text_document.uri == uri and change.text_document.version == version
        (text_edit,) = change.edits
        assert isinstance(text_edit, types.AnnotatedTextEdit)
        annotation = edit.change_annotations[text_edit.annotation_id]
        assert annotation.needs_confirmation and "saxpy" in annotation.label
    else:
        assert edit.document_changes is None
        (text_edit,) = edit.changes[uri]
    assert text_edit.range == types.Range(start=start, end=end)
    assert text_edit.new_text == FAST

    # The editor applies it (one edit: one undo step); the result diagnostic goes away.
    version = client.change(uri, [text_edit])
    assert "variant: fast" in client.text(uri)
    assert client.text(uri).replace(FAST, "") == original_text.replace(
        types_range_slice(original_text, start, end), ""
    )
    found = await client.diagnostics_for(uri, version)
    assert not [d for d in found if d.source == "cuda-llm"], found
    titles = [a.title for a in await _actions(client, uri, name_line + 1)]
    assert not any(t.startswith("Accept") for t in titles)
    run = RunHistory(SCRATCH / "data" / "history.sqlite3").runs(limit=1)[0]
    assert run.kernel == "saxpy" and run.decision == "accept"


def types_range_slice(text: str, start: types.Position, end: types.Position) -> str:
    lines = text.split("\n")
    if start.line == end.line:
        return lines[start.line][start.character : end.character]
    middle = lines[start.line + 1 : end.line]
    return "\n".join(
        [lines[start.line][start.character :], *middle, lines[end.line][: end.character]]
    )


async def test_accept_after_the_kernel_changed_is_refused_and_kept(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await _optimize(client, uri)
    text = client.text(uri)
    client.change(uri, text.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + 2 * y[i];"))
    assert await _command(client, "cudaLlm.accept", uri, "saxpy") is False
    assert client.applied_edits == []
    message = next(m for m in client.messages if "changed since" in m.message)
    assert message.type == types.MessageType.Warning
    # The suggestion stays available to show.
    assert await _command(client, "cudaLlm.showSuggestion", uri, "saxpy") is True
    note = await client.wait_for(lambda: client.suggestion_notes)
    assert note[-1]["suggested"] == FAST and note[-1]["range"] is None


async def _accept_confirmed(client: EditorClient, uri: str) -> Any:
    """Accept as the VS Code extension sends it from its diff: the user confirmed it there."""
    args = [{"uri": uri, "kernel": "saxpy", "confirmed": True}]
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="cudaLlm.accept", arguments=args)
    )


async def test_accept_confirmed_in_the_clients_diff_needs_no_second_confirmation(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await _optimize(client, uri)
    version = client.doc_version(uri)
    assert await _accept_confirmed(client, uri) == {"applied": True}
    (request,) = client.applied_edits
    edit = request.edit
    if client.kind == "visual-studio-code":
        (change,) = edit.document_changes
        assert change.text_document.version == version  # the version check stays
        (text_edit,) = change.edits
        annotation = edit.change_annotations[text_edit.annotation_id]
        assert annotation.needs_confirmation is False and "saxpy" in annotation.label
    else:
        (text_edit,) = edit.changes[uri]
    assert text_edit.new_text == FAST
    client.change(uri, [text_edit])
    assert await _accept_confirmed(client, uri) == {
        "applied": False,
        "reason": "there is no suggestion for saxpy to accept",
    }


async def test_accept_confirmed_after_the_kernel_changed_answers_the_reason(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await _optimize(client, uri)
    text = client.text(uri)
    client.change(uri, text.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + 2 * y[i];"))
    answer = await _accept_confirmed(client, uri)
    assert answer["applied"] is False
    assert answer["reason"].startswith("saxpy changed since the optimization started")
    assert client.applied_edits == []
    assert not [m for m in client.messages if "changed since" in m.message], "the client says it"
    # Still pending: the plain Accept (Neovim's code action) is refused with its message.
    assert await _command(client, "cudaLlm.accept", uri, "saxpy") is False
    assert [m for m in client.messages if "Show suggested saxpy" in m.message]


async def test_reject_discards_the_suggestion_and_is_recorded(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await _optimize(client, uri)
    assert await _command(client, "cudaLlm.reject", uri, "saxpy") is True
    line = _line_of(client.text(uri), "void saxpy") + 1
    titles = [a.title for a in await _actions(client, uri, line)]
    assert not any(t.startswith(("Accept", "Reject", "Show")) for t in titles)
    assert "Optimize saxpy" in titles
    assert await _command(client, "cudaLlm.accept", uri, "saxpy") is False
    run = RunHistory(SCRATCH / "data" / "history.sqlite3").runs(limit=1)[0]
    assert run.decision == "reject"


async def test_show_suggestion_opens_a_read_only_preview_and_notifies(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    await _optimize(client, uri)
    assert await _command(client, "cudaLlm.showSuggestion", uri, "saxpy") is True
    note = (await client.wait_for(lambda: client.suggestion_notes))[-1]
    assert note["uri"] == uri and note["kernel"] == "saxpy" and note["suggested"] == FAST
    assert note["speedup"] == 2.0 and note["casesPassed"] == note["casesTotal"] == 3
    assert note["range"]["start"]["line"] == _line_of(client.text(uri), "void saxpy")
    assert "void saxpy" in note["original"]
    capabilities = client.capabilities
    window = capabilities.window if capabilities else None
    if window and window.show_document and window.show_document.support:
        shown = await client.wait_for(lambda: client.shown_documents)
        path = Path(types_uri_path(shown[-1].uri))
    else:  # no showDocument (Neovim 0.7): a message says where the preview is
        said = await client.wait_for(
            lambda: [
                m for m in client.messages if m.message.startswith("cuda-llm: suggested saxpy")
            ]
        )
        assert client.shown_documents == []
        path = Path(said[-1].message.split("): ", 1)[1].split(" (diff: ")[0])
    assert FAST in path.read_text(encoding="utf-8")
    assert not os.stat(path).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert "+    // variant: fast" in path.with_suffix(".diff").read_text(encoding="utf-8")


def types_uri_path(uri: str) -> str:
    from pygls.uris import to_fs_path

    return to_fs_path(uri) or ""


async def test_cancel_ends_the_job_promptly_and_other_requests_stay_fast(
    client: EditorClient,
) -> None:
    uri = client.open(DATA / "slow.cu")
    await client.diagnostics_for(uri, 1)
    answer = await _command(client, "cudaLlm.optimize", uri, "slow_copy")
    token = answer["token"]
    await client.wait_for(lambda: _values(client, token))
    await client.wait_for(
        lambda: (
            len(LLM.chat_requests()) > 0 and any("slow_copy" in str(r) for r in LLM.chat_requests())
        )
    )
    started = time.monotonic()
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [s.name for s in symbols] == ["slow_copy"]
    assert time.monotonic() - started < 0.5 * slack()  # answered while the job waits on the model
    started = time.monotonic()
    if client.kind == "visual-studio-code":  # the progress UI's cancel button
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    else:
        assert await _command(client, "cudaLlm.cancel", uri, "slow_copy") is True
    await client.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in _values(client, token)),
        timeout=5,
    )
    assert time.monotonic() - started < 2.0 * slack()
    end = _values(client, token)[-1]
    assert "cancel" in end.message
    # The kernel is free again: a new run may start.
    titles = [a.title for a in await _actions(client, uri, _line_of(client.text(uri), "dst[i]"))]
    assert "Optimize slow_copy" in titles


async def test_benchmark_reports_an_information_diagnostic(client: EditorClient) -> None:
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    answer = await _command(client, "cudaLlm.benchmark", uri, "saxpy")
    token = answer["token"]
    await client.wait_for(
        lambda: any(isinstance(v, types.WorkDoneProgressEnd) for v in _values(client, token))
    )
    info = await client.wait_for(
        lambda: [
            d
            for d in client.diagnostics.get(uri, [])
            if d.source == "cuda-llm" and d.severity == types.DiagnosticSeverity.Information
        ]
    )
    assert info[0].message.startswith("saxpy: 1.000 ms"), info[0].message
    assert "3/3 cases pass" in info[0].message
    assert info[0].range.start.line == _line_of(client.text(uri), "void saxpy")


async def test_bad_command_arguments_get_a_message_not_a_crash(client: EditorClient) -> None:
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="cudaLlm.optimize", arguments=[42])
    )
    await client.wait_for(
        lambda: any("commands take one argument" in m.message for m in client.messages)
    )
    uri = client.open(DATA / "saxpy.cu")
    assert await _command(client, "cudaLlm.optimize", uri, "no_such_kernel") is None
    await client.wait_for(
        lambda: any("no kernel named no_such_kernel" in m.message for m in client.messages)
    )


async def test_a_refused_progress_still_gets_the_work_done(client: EditorClient) -> None:
    client.refuse_progress = True
    uri = client.open(DATA / "saxpy.cu")
    await client.diagnostics_for(uri, 1)
    answer = await _command(client, "cudaLlm.benchmark", uri, "saxpy")
    info = await client.wait_for(
        lambda: [
            d
            for d in client.diagnostics.get(uri, [])
            if d.source == "cuda-llm" and d.severity == types.DiagnosticSeverity.Information
        ]
    )
    assert info[0].message.startswith("saxpy: 1.000 ms")
    assert _values(client, answer["token"]) == []  # no progress was sent on a refused token


async def test_cancel_without_arguments_cancels_every_job(client: EditorClient) -> None:
    uri = client.open(DATA / "slow.cu")
    await client.diagnostics_for(uri, 1)
    token = (await _command(client, "cudaLlm.optimize", uri, "slow_copy"))["token"]
    await client.wait_for(lambda: _values(client, token))
    assert await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="cudaLlm.cancel", arguments=[])
    )
    end = await client.wait_for(
        lambda: [v for v in _values(client, token) if isinstance(v, types.WorkDoneProgressEnd)],
        timeout=5,
    )
    assert "cancel" in end[0].message
