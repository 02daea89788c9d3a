"""Accept of a launch-changing suggestion ([launch]): the kernel, the spec's grid/block and the
file's launch site arrive as ONE edit (one undo step), and the file still builds.

Real server, real NVRTC, real FSR loop against a scripted endpoint whose kernel carries a
`@cuda-llm launch` block; only the GPU is replaced by recorded outcomes.
"""

from __future__ import annotations

import sys
from typing import Any

from lsprotocol import types

from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from tests.lsp.conftest import DATA, SCRATCH, SERVERS, EditorClient, lsp_fixture
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

FILE = """\
#include <cstdio>
#include <cuda_runtime.h>

/* @cuda-llm
sizes.n = [1, 1000, 1048576]
grid = "cdiv(n, 256)"
block = 256
args.n = "n"
args.a = "2.5"
args.x = "float32[n]"
args.y = "inout float32[n]"
*/
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}

int main() {
    int n = 1 << 20;
    float *x = nullptr, *y = nullptr;
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.5f, x, y);
    cudaDeviceSynchronize();
    return 0;
}
"""
FAST = """\
/* @cuda-llm launch
grid = "cdiv(n, 1024)"
block = 1024
*/
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
    // variant: fast
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = fmaf(a, x[i], y[i]);
    }
}"""

# A reply whose `#ifndef` default the file's own `#define VEC 2` decides: renaming VEC would
# change the kernel that was measured, so the winner is refused, naming VEC and its lines.
CLASH_FILE = FILE.replace("<cuda_runtime.h>\n", "<cuda_runtime.h>\n#define VEC 2\n").replace(
    "    return 0;\n", '    printf("vectors of %d\\n", VEC);\n    return 0;\n'
)
CLASH = "#ifndef VEC\n#define VEC 4  // floats per thread\n#endif\n\n" + FAST.replace(
    "// variant: fast", "// variant: fast (VEC-wide, clash)"
)
LLM = ScriptedLlmServer(
    [
        {"match": "#define VEC 2", "text": kernel_reply(CLASH), "repeat": -1},
        {"text": kernel_reply(FAST), "repeat": -1},
    ]
).start()
RECORDED = [sys.executable, str(SERVERS / "recorded_server.py"), str(DATA / "recording.json")]
OPTIONS = {
    "cudaLlm": {
        "debounceMs": 0,
        "baseUrl": LLM.base_url,
        "model": "scripted-model",
        "rounds": 1,
        "candidates": 1,
        "apiKey": "sk-test-not-a-real-key",
    }
}

client = lsp_fixture(server_command=RECORDED, init_options=OPTIONS)
# `free`: a launch change even where a site cannot be rewritten (named to change by hand)
free_client = lsp_fixture(
    server_command=RECORDED, init_options={"cudaLlm": {**OPTIONS["cudaLlm"], "launch": "free"}}
)
MACRO_FILE = FILE.replace(
    "saxpy<<<(n + 255) / 256, 256>>>(n, 2.5f, x, y);", "LAUNCH(saxpy, n, 2.5f, x, y);"
).replace(
    "#include <cuda_runtime.h>\n",
    "#include <cuda_runtime.h>\n#define LAUNCH(k, n, ...) "
    "k<<<((n) + 255) / 256, 256>>>(n, __VA_ARGS__)\n",
)


async def _command(client: EditorClient, name: str, uri: str) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=[{"uri": uri, "kernel": "saxpy"}])
    )


async def _optimized(client: EditorClient, name: str, text: str) -> str:
    path = SCRATCH / name
    path.write_text(text, encoding="utf-8")
    uri = client.open(path)
    await client.diagnostics_for(uri, 1)
    token = (await _command(client, "cudaLlm.optimize", uri))["token"]
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
        ),
        timeout=120,
    )
    return uri


async def test_with_free_a_site_that_cannot_be_rewritten_is_named_in_the_accept_title(
    free_client: EditorClient,
) -> None:
    client = free_client
    uri = await _optimized(client, "launch_macro.cu", MACRO_FILE)
    line = next(i for i, t in enumerate(MACRO_FILE.split("\n")) if "void saxpy" in t)
    where = types.Position(line=line + 1, character=4)
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=where, end=where),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    titles = [a.title for a in actions or []]
    assert any("change 1 launch site(s) by hand" in t for t in titles), titles
    assert await _command(client, "cudaLlm.accept", uri) is True
    (request,) = client.applied_edits
    edits = (
        list(request.edit.document_changes[0].edits)
        if client.kind == "visual-studio-code"
        else list(request.edit.changes[uri])
    )
    client.change(uri, edits)
    text = client.text(uri)
    assert "LAUNCH(saxpy, n, 2.5f, x, y);" in text and 'grid = "cdiv(n, 1024)"' in text


async def test_accept_of_a_launch_change_is_one_edit_with_spec_and_launch_site(
    client: EditorClient,
) -> None:
    path = SCRATCH / "launch_accept.cu"
    path.write_text(FILE, encoding="utf-8")
    uri = client.open(path)
    await client.diagnostics_for(uri, 1)
    answer = await _command(client, "cudaLlm.optimize", uri)
    token = answer["token"]
    await client.wait_for(
        lambda: any(
            isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
        ),
        timeout=120,
    )
    assert await _command(client, "cudaLlm.accept", uri) is True
    (request,) = client.applied_edits
    if client.kind == "visual-studio-code":
        (change,) = request.edit.document_changes
        edits = list(change.edits)
    else:
        edits = list(request.edit.changes[uri])
    assert len(edits) == 1  # kernel, spec and launch site: one edit, one undo step
    client.change(uri, edits)
    text = client.text(uri)
    assert "variant: fast" in text and "@cuda-llm launch" not in text
    assert "saxpy<<<(n + 1023) / 1024, 1024>>>(n, 2.5f, x, y);" in text
    (kernel,) = [k for k in find_kernels(text) if k.name == "saxpy"]
    spec, errors = parse_spec(kernel, text)
    assert spec is not None, errors
    assert (spec.grid, spec.block) == (("cdiv(n, 1024)",), ("1024",))
    lines = FILE.split("\n")
    spans = edits[0].range  # from the spec's grid line to the launch site, kernel between
    assert lines[spans.start.line].startswith("grid") and "saxpy<<<" in lines[spans.end.line]


async def test_a_winner_whose_define_clashes_with_the_file_is_refused_with_its_reason(
    client: EditorClient,
) -> None:
    uri = await _optimized(client, "launch_clash.cu", CLASH_FILE)
    refusal = await client.wait_for(
        lambda: next((m.message for m in client.messages if "cannot be applied" in m.message), None)
    )
    assert "`VEC` clashes with `VEC` in the file (line 3 in #define VEC, line 26 in main())" in (
        refusal
    ), refusal
    assert "asks whether `VEC` is defined" in refusal
    assert await _command(client, "cudaLlm.accept", uri) is False  # nothing to accept
    assert not client.applied_edits and client.text(uri) == CLASH_FILE
