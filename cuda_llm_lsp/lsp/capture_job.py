"""`cudaLlm.captureSpec` and `cudaLlm.verify` (issue 39): the user's program as the reference.

"Capture test spec for K from program…" runs `cudaLlm.captureCommand` with capture on K's first
launch (`engine.capture.capture_spec`) into `.cuda-llm/captures/K/` beside the file, and offers
the spec made from it as a `workspace/applyEdit` (inserting the block above K, or replacing K's
spec), as "Add test spec" does: the editor shows it, the user keeps or undoes it. "Verify K in
program", after an Accept and the user's rebuild, runs the program again on the capture's launch
(`engine.verify.verify`): the kernel's outputs against the capture's and the before/after
figures, as a message and an Information diagnostic of source `cuda-llm verify` on K.

The program is the user's own, named only in user settings (`lsp.settings`: in an untrusted
workspace it is taken only from `initializationOptions`); it runs as an argv list, never through
a shell. Cancel ends the job at once; a program already started runs to its end in its thread.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from lsprotocol import types

from cuda_llm_lsp.engine.capture import (
    CaptureRequest,
    capture_directory,
    capture_spec,
)
from cuda_llm_lsp.engine.verify import verify
from cuda_llm_lsp.lsp import commands
from cuda_llm_lsp.lsp.jobs import Job, JobError, JobProgress
from cuda_llm_lsp.lsp.positions import point_at, split_lines, to_position
from cuda_llm_lsp.lsp.results import KernelReport
from cuda_llm_lsp.lsp.state import CudaLlmServer
from cuda_llm_lsp.source.untrusted import neutralize

VERIFY_SOURCE = "cuda-llm verify"
HOW_TO_SET = (
    "set cudaLlm.captureCommand in your user settings to your program and its arguments, e.g. "
    '["./build/app", "--steps", "1"] (VS Code: Settings > CUDA-LLM > Capture Command; Neovim: '
    "vim.g.cuda_llm_settings = { captureCommand = { './build/app' } }), then run this again"
)


def register(server: CudaLlmServer) -> None:
    commands.job_command(server, commands.CAPTURE_SPEC, start_capture)
    commands.job_command(server, commands.VERIFY, start_verify)


def _ready(server: CudaLlmServer, uri: str, what: str) -> Path | None:
    """The file of `uri` when a capture command is set, else None after saying what to do."""
    if not server.settings.capture_command:
        server.message(f"cuda-llm: {what} runs your program: {HOW_TO_SET}")
        return None
    path = server.path_of(uri)
    if path is None:
        server.message(
            f"cuda-llm: {what} needs a saved file (its capture goes beside it)",
            types.MessageType.Warning,
        )
    return path


def working_directory(server: CudaLlmServer, path: Path) -> Path:
    """`cudaLlm.captureCwd` (relative: to the first workspace folder), else the first workspace
    folder, else the file's directory."""
    roots = server.trust.roots
    base = Path(roots[0]) if roots else path.resolve().parent
    chosen = server.settings.capture_cwd
    return (base / Path(chosen).expanduser()) if chosen else base


def start_capture(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    path = _ready(server, uri, "Capture test spec")
    if path is None:
        return None
    work = partial(run_capture_job, server, path)
    return server.jobs.start(uri, kernel, "capture", f"Capturing {kernel} from your program", work)


async def run_capture_job(
    server: CudaLlmServer, path: Path, job: Job, progress: JobProgress
) -> str:
    settings = server.settings
    request = CaptureRequest(
        tuple(settings.capture_command),
        capture_directory(path, job.kernel),
        kernel=job.kernel,
        quiet=True,
        cwd=working_directory(server, path),
    )
    progress.report(f"running {settings.capture_command[0]}")
    text, _ = await server.job_kernel(job)
    outcome = await asyncio.to_thread(
        capture_spec, request, text, path, job.kernel, server.capture_runner
    )
    if job.cancelled:
        return "cancelled"
    if not outcome.ok or outcome.spec is None:
        server.message(
            f"cuda-llm: capture of {job.kernel}: {neutralize(outcome.message)}",
            types.MessageType.Error,
        )
        return "nothing captured"
    current, _ = await server.job_kernel(job)
    doc = server.document(job.uri)
    if current != text or doc is None:
        raise JobError(f"{job.kernel}'s file changed during the capture: capture again")
    edit = _edit(server, job.uri, doc.version, text, outcome.spec.text)
    answer = await server.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=edit, label=f"Capture test spec for {job.kernel}")
    )
    if not answer.applied:
        reason = answer.failure_reason or "declined"
        server.message(f"cuda-llm: the captured spec for {job.kernel} was not applied ({reason})")
        return "not applied"
    server.message(
        f"cuda-llm: {neutralize(outcome.message)}. Review the spec's '# review:' lines; "
        "after an Accept and your rebuild, 'Verify in program' compares with this capture"
    )
    return "spec captured"


def _edit(
    server: CudaLlmServer, uri: str, version: int | None, old: str, new: str
) -> types.WorkspaceEdit:
    """One edit turning `old` into `new`: the changed whole lines only."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    start = old.rfind("\n", 0, start) + 1  # back to a line start
    tail = 0
    while tail < min(len(old), len(new)) - start and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    end = len(old) - tail
    if end > start and old[end - 1] != "\n":  # forward to a line start
        found = old.find("\n", end)
        end = len(old) if found < 0 else found + 1
    new_end = len(new) - (len(old) - end)
    lines = split_lines(old)
    where = types.Range(
        start=to_position(lines, point_at(old, start), server.codec),
        end=to_position(lines, point_at(old, end), server.codec),
    )
    change = types.TextEdit(range=where, new_text=new[start:new_end])
    workspace = server.client_capabilities.workspace
    edit_caps = workspace.workspace_edit if workspace else None
    if edit_caps and edit_caps.document_changes:
        return types.WorkspaceEdit(
            document_changes=[
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=version
                    ),
                    edits=[change],
                )
            ]
        )
    return types.WorkspaceEdit(changes={uri: [change]})


def start_verify(server: CudaLlmServer, uri: str, kernel: str) -> Job | None:
    path = _ready(server, uri, "Verify in program")
    if path is None:
        return None
    work = partial(run_verify_job, server, path)
    return server.jobs.start(uri, kernel, "verify", f"Verifying {kernel} in your program", work)


async def run_verify_job(server: CudaLlmServer, path: Path, job: Job, progress: JobProgress) -> str:
    settings = server.settings
    _, kernel_text = await server.job_kernel(job)
    progress.report(f"running {settings.capture_command[0]} (rebuilt?)")
    outcome = await asyncio.to_thread(
        partial(
            verify,
            path,
            tuple(settings.capture_command),
            job.kernel,
            cwd=working_directory(server, path),
            runner=server.capture_runner,
            quiet=True,
        )
    )
    if job.cancelled:
        return "cancelled"
    figures = "; ".join(outcome.lines)
    said = f"{outcome.message}: {figures}" if figures else outcome.message
    server.message(
        f"cuda-llm: verify {job.kernel}: {neutralize(said)}",
        types.MessageType.Info if outcome.ok else types.MessageType.Warning,
    )
    if outcome.before_ms is not None or outcome.lines:
        info = f"verify: {said}"
        report = KernelReport(job.kernel, kernel_text, info, source=VERIFY_SOURCE)
        server.set_report(job.uri, report)
    return outcome.message
