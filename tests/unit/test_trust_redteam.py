"""Red-team reproducers for issue 36's fixes: a cloned repository's names and text never make
nvcc or NVRTC read a special file or a file outside an untrusted workspace.

Real nvcc and NVRTC; the hostile names are planted in `tmp_path`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile import flags
from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.compile.nvcc_inputs import check_includes, prepare

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")


@pytest.fixture(autouse=True)
def _trusted_after() -> object:
    yield
    flags.set_workspace(flags.Trust())


# --- nvcc splits a list option's value at commas ------------------------------------------------


def test_a_comma_in_an_include_directory_never_reaches_nvcc(tmp_path: Path) -> None:
    """nvcc reads `-I /ws/a,/proc/self` as two directories: `/ws/a` and `/proc/self`."""
    own = tmp_path / "a," / "proc" / "self"
    own.mkdir(parents=True)
    project = tmp_path / "inc,"
    (project / "dev").mkdir(parents=True)
    inputs = prepare(tmp_path, own / "k.cu", [str(project / "dev")], [])
    # `-I DIR` for the project's, `-Xcompiler -iquote,DIR` for the file's own (nvcc splits the
    # latter at its one comma, ours)
    directories = [a.removeprefix("-iquote,") for a in inputs.include_args[1::2]]
    assert len(directories) == 2, inputs.include_args
    assert all("," not in d for d in directories), inputs.include_args


@needs_nvcc
def test_a_directory_named_to_split_into_proc_is_not_searched_by_nvcc(tmp_path: Path) -> None:
    """A repository's `a,/proc/self/k.cu` including `<comm>`: nvcc's host compiler would read
    /proc/self/comm (or `<zero>` under `x,/dev`: gigabytes)."""
    own = tmp_path / "a," / "proc" / "self"
    own.mkdir(parents=True)
    path = own / "k.cu"
    text = "#include <comm>\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    path.write_text(text)
    result = compile_file(text, path, timeout=300)
    # only the file's own (empty) directory was searched: `<comm>` is not found there
    assert not result.ok and len(result.errors) == 1, result.log
    assert "comm" in result.errors[0].message, result.log


# --- include directives however they are spelled ------------------------------------------------

SECRET = "SECRET_TOKEN_XYZZY"
SPELLINGS = {
    "digraph": '%:include "{path}"\n',
    "comment": '#/* */include "{path}"\n',
    "splice": '#inc\\\nlude "{path}"\n',
    "splice before a CRLF": '#inc\\\r\nlude "{path}"\r\n',
    "splice in the name": '#include "{head}\\\n{tail}"\n',
    "after a comment's end": '/* a\n*/ #include "{path}"\n',
    "include_next": '#include_next "{path}"\n',
    "trigraph": '??=include "{path}"\n',
}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A 0600 file outside the workspace whose tokens NVRTC would quote in its errors."""
    secret = tmp_path / "home" / "secret.h"
    secret.parent.mkdir()
    secret.write_text(f"float f = {SECRET};\n")
    secret.chmod(0o600)
    return secret


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_an_untrusted_workspace_never_reads_outside_through_any_include_spelling(
    tmp_path: Path, outside: Path, spelling: str
) -> None:
    from cuda_llm_lsp.compile.analysis import analyze_syntax
    from cuda_llm_lsp.lsp.settings import Settings

    workspace = tmp_path / "ws"
    workspace.mkdir()
    flags.set_workspace(flags.Trust(False, (str(workspace),)))
    text = str(outside)
    include = SPELLINGS[spelling].format(path=text, head=text[:5], tail=text[5:])
    source = include + "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    analysis = analyze_syntax(source, workspace / "k.cu", Settings())
    shown = [d.message for d in analysis.diagnostics]
    assert not any(SECRET in m or "in included file" in m for m in shown), shown
    assert any("left out" in m for m in shown), shown
    assert not [d for d in analysis.diagnostics if d.severity == "error"], shown


def test_plain_includes_in_strings_and_comments_are_not_directives() -> None:
    from cuda_llm_lsp.compile.directives import include_directives

    text = (
        'const char* a = R"x(\n#include "a.h"\n)x";\n'
        '// %:include "b.h"\n'
        '/* #include "c.h" */\n'
        "#define M \\\n  #include\n"
        'const char* b = "#include";\n'
        '  #  include "d.h"\n'
    )
    (found,) = include_directives(text)
    assert found.first_row == 8 and found.keyword == "include"


def test_a_workspace_header_cannot_include_outside_through_a_digraph(
    tmp_path: Path, outside: Path
) -> None:
    from cuda_llm_lsp.compile.analysis import analyze_syntax
    from cuda_llm_lsp.lsp.settings import Settings

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "inner.cuh").write_text(f'%:include "{outside}"\n#define INNER 1\n')
    flags.set_workspace(flags.Trust(False, (str(workspace),)))
    source = '#include "inner.cuh"\n__global__ void k(float* x) { x[0] = INNER; }\n'
    analysis = analyze_syntax(source, workspace / "k.cu", Settings())
    shown = [d.message for d in analysis.diagnostics]
    assert not any(SECRET in m or "in included file" in m for m in shown), shown
    assert any("left out" in m and "inner.cuh" in m for m in shown), shown


# --- what nvcc's host compiler may read: its pre-scan sees every include -------------------------

NVCC_SPELLINGS = {
    "digraph": '%:include "/proc/self/comm"\n',
    "comment": '#/**/include "/proc/self/comm"\n',
    "splice": '#inc\\\nlude "/proc/self/comm"\n',
    "stringized": "#define S(x) #x\n#include S(/proc/self/comm)\n",
    "chained": '#define A B\n#define B "/proc/self/comm"\n#include A\n',
}


@needs_nvcc
@pytest.mark.parametrize("spelling", sorted(NVCC_SPELLINGS))
def test_nvcc_never_reads_proc_through_any_include_spelling(tmp_path: Path, spelling: str) -> None:
    """nvcc does not run: its pre-scan cannot vouch for what the host compiler would open
    (`/dev/zero`: gigabytes; a FIFO: blocked to the timeout)."""
    path = tmp_path / "k.cu"
    text = NVCC_SPELLINGS[spelling] + "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    path.write_text(text)
    result = compile_file(text, path, timeout=300)
    assert "cc1plus" not in result.log, result.log
    assert result.skipped and "nvcc not run" in result.skipped, result


@needs_nvcc
def test_nvcc_still_runs_with_a_resolvable_include_macro(tmp_path: Path) -> None:
    """CUTLASS's `#include CUDA_STD_HEADER(utility)` and a plain `#define H "h.cuh"`."""
    (tmp_path / "h.cuh").write_text("#define FROM_H 2.0f\n")
    path = tmp_path / "k.cu"
    text = (
        "#define CUDA_STD_HEADER(header) <cuda/std/header>\n"
        "#include CUDA_STD_HEADER(utility)\n"
        '#define H "h.cuh"\n#include H\n'
        "__global__ void k(float* x) { x[0] = FROM_H; }\n"
    )
    path.write_text(text)
    result = compile_file(text, path, timeout=300)
    assert result.skipped is None and result.ok, result


# --- headers NVRTC would open itself ------------------------------------------------------------


def _analyze_untrusted(workspace: Path, text: str, include_paths: tuple[str, ...] = ()) -> list:
    from cuda_llm_lsp.compile.analysis import analyze_syntax
    from cuda_llm_lsp.lsp.settings import Settings

    flags.set_workspace(flags.Trust(False, (str(workspace),)))
    settings = Settings(include_paths=include_paths)
    return [d.message for d in analyze_syntax(text, workspace / "k.cu", settings).diagnostics]


def test_a_workspace_header_shadowing_the_toolkits_is_never_opened_by_nvrtc(
    tmp_path: Path, outside: Path
) -> None:
    """`cuda/std/cstdint` beside the file: NVRTC searched the file's directory before the
    toolkit and followed the header's own `#include` of a file outside."""
    workspace = tmp_path / "ws"
    (workspace / "cuda" / "std").mkdir(parents=True)
    (workspace / "cuda" / "std" / "cstdint").write_text(f'#include "{outside}"\n')
    text = "#include <cuda/std/cstdint>\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    shown = _analyze_untrusted(workspace, text)
    assert not any(SECRET in m or "in included file" in m for m in shown), shown


def test_a_workspace_ccclike_directory_is_never_read_raw_by_nvrtc(
    tmp_path: Path, outside: Path
) -> None:
    """A directory holding `cuda/std/` and `nv/target` passes for a newer CCCL, which NVRTC
    reads as it is: its headers' includes were never checked."""
    workspace = tmp_path / "ws"
    include = workspace / "inc"
    (include / "cuda" / "std").mkdir(parents=True)
    (include / "nv").mkdir()
    (include / "nv" / "target").write_text("\n")
    (include / "cuda" / "evil.h").write_text(f'#include "{outside}"\n')
    text = "#include <cuda/evil.h>\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    shown = _analyze_untrusted(workspace, text, (str(include),))
    assert not any(SECRET in m or "in included file" in m for m in shown), shown


def test_a_trusted_workspace_still_searches_its_own_directories(tmp_path: Path) -> None:
    from cuda_llm_lsp.compile import include_reads

    flags.set_workspace(flags.Trust(True, (str(tmp_path),)))
    assert include_reads.disk_search_dirs([str(tmp_path / "inc")]) == (str(tmp_path / "inc"),)
    flags.set_workspace(flags.Trust(False, (str(tmp_path),)))
    assert include_reads.disk_search_dirs([str(tmp_path / "inc"), "/usr/include"]) == (
        "/usr/include",
    )


# --- files the preprocessor opens without including them ---------------------------------------


def test_has_include_of_a_fifo_never_holds_nvrtc(tmp_path: Path) -> None:
    import os
    import time

    from cuda_llm_lsp.compile.analysis import analyze_syntax
    from cuda_llm_lsp.lsp.settings import Settings

    os.mkfifo(tmp_path / "pipe.h")
    text = (
        '#if __has_include("pipe.h")\n#error opened\n#endif\n'
        "#if __has_include(<cuda_fp16.h>)\n__global__ void k(float* x) { x[0] = ; }\n#endif\n"
    )
    started = time.monotonic()
    analysis = analyze_syntax(text, tmp_path / "k.cu", Settings())
    assert time.monotonic() - started < 8  # NVRTC's own limit is 10 s
    shown = [(d.line, d.message) for d in analysis.diagnostics]
    assert [line for line, _ in shown] == [5], shown  # the toolkit's header still answers


def test_has_include_never_tells_whether_a_file_outside_exists(
    tmp_path: Path, outside: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    text = (
        f'#if __has_include("{outside}")\n#error it exists\n#endif\n'
        "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    )
    shown = _analyze_untrusted(workspace, text)
    assert not any("exists" in m for m in shown), shown


@needs_nvcc
@pytest.mark.parametrize(
    "probe",
    [
        '#if __has_include("pipe.h")\n#endif\n',
        '#pragma GCC dependency "pipe.h"\n',
        '_Pragma("GCC dependency \\"pipe.h\\"")\n',
    ],
)
def test_nvcc_never_opens_a_fifo_it_only_probes(tmp_path: Path, probe: str) -> None:
    import os
    import time

    os.mkfifo(tmp_path / "pipe.h")
    path = tmp_path / "k.cu"
    text = probe + "__global__ void k(float* x) { x[0] = 1.0f; }\n"
    started = time.monotonic()
    result = compile_file(text, path, timeout=20)
    assert time.monotonic() - started < 10 and not result.timed_out, result
    assert result.skipped and "nvcc not run" in result.skipped, result


@needs_nvcc
@pytest.mark.parametrize("name", ["pipe", "status"])
def test_nvcc_scans_the_files_own_directory_for_bracketed_includes(
    tmp_path: Path, name: str
) -> None:
    """nvcc got the file's directory as -I (now -iquote; the pre-scan still checks `<...>`
    there): `<pipe>` (a FIFO) or `<status>` (a link to /proc/self/status) beside the file was
    opened by gcc, unchecked."""
    import os

    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "status").symlink_to("/proc/self/status")
    path = tmp_path / "k.cu"
    text = f"#include <{name}>\n__global__ void k(float* x) {{ x[0] = 1.0f; }}\n"
    result = compile_file(text, path, timeout=20)
    assert not result.timed_out, result
    assert result.skipped and name in result.skipped, result


def test_an_untrusted_file_with_no_folder_is_not_searched_by_nvrtc_either(
    tmp_path: Path, outside: Path
) -> None:
    """A downloaded file opened alone in an untrusted window: no workspace folder at all."""
    from cuda_llm_lsp.compile.analysis import analyze_syntax
    from cuda_llm_lsp.lsp.settings import Settings

    downloads = tmp_path / "downloads"
    (downloads / "cuda" / "std").mkdir(parents=True)
    (downloads / "cuda" / "std" / "cstdint").write_text(f'#include "{outside}"\n')
    flags.set_workspace(flags.Trust(False, ()))
    text = "#include <cuda/std/cstdint>\n__global__ void k(float* x) { x[0] = 1.0f; }\n"
    analysis = analyze_syntax(text, downloads / "k.cu", Settings())
    shown = [d.message for d in analysis.diagnostics]
    assert not any(SECRET in m or "in included file" in m for m in shown), shown


# --- reproducers that held: kept as regression tests --------------------------------------------


def test_project_flags_that_run_or_read_something_are_never_taken(tmp_path: Path) -> None:
    """compile_flags.txt / compile_commands.json naming a host compiler, a plugin, a pre-include,
    a response file or an output: only -I/-D/-std/-arch are understood, the rest ignored."""
    import json

    from cuda_llm_lsp.compile.project_config import find_flags

    (tmp_path / "inc").mkdir()
    hostile = [
        "-ccbin=./evil", "--compiler-bindir", "./evil", "-Xcompiler=-fplugin=./evil.so",
        "-include", "/etc/passwd", "--pre-include=/etc/passwd", "-imacros", "/etc/passwd",
        "@/etc/passwd", "-Xptxas=--output-file=/tmp/x", "--keep-dir", "/tmp", "-o", "/tmp/x",
    ]  # fmt: skip
    (tmp_path / "compile_flags.txt").write_text("\n".join([*hostile, "-DOK=1", "-Iinc"]) + "\n")
    (tmp_path / ".git").mkdir()
    found = find_flags(tmp_path / "k.cu")
    assert found is not None
    assert found.defines == ("OK=1",) and found.include_paths == (str(tmp_path / "inc"),)
    build = tmp_path / "build"
    build.mkdir()
    entry = {"directory": "/", "file": str(tmp_path / "k.cu"), "arguments": ["nvcc", *hostile]}
    (build / "compile_commands.json").write_text(json.dumps([entry]))
    found = find_flags(tmp_path / "k.cu", build)
    assert found is not None and found.defines == () and found.include_paths == ()


def test_embed_reads_nothing_outside_an_untrusted_workspace(tmp_path: Path, outside: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    text = (
        f'const char d[] = {{\n#embed "{outside}"\n}};\n'
        f'#if __has_embed("{outside}")\n#error it exists\n#endif\n'
        "__global__ void k(float* x) { x[0] = d[0]; }\n"
    )
    shown = _analyze_untrusted(workspace, text)
    assert not any(SECRET in m or "exists" in m for m in shown), shown


def test_a_plain_include_in_a_body_or_an_initializer_is_read_not_left_out(
    tmp_path: Path,
) -> None:
    """Leaving out every include the walker does not visit dropped a table included inside an
    initializer's braces and a fragment inside a body (false errors); a plain one is read through
    the same checks as any other include instead."""
    from cuda_llm_lsp.compile.device_unit import build_device_unit

    (tmp_path / "table.inc").write_text("1.0f, 2.0f, 3.0f\n")
    (tmp_path / "body.inc").write_text("x[0] = 1.0f;\n")
    text = (
        '__device__ const float table[] = {\n#include "table.inc"\n};\n'
        '__global__ void k(float* x) {\n#include "body.inc"\n  x[1] = table[2];\n}\n'
    )
    unit = build_device_unit(text, tmp_path / "k.cu")
    assert unit.problems == ()
    assert '#include "table.inc"' in unit.text and '#include "body.inc"' in unit.text


# --- probe macros: `#define FMT_HAS_INCLUDE(x) __has_include(x)` (fmt, CCCL) -----------------

FMT_BASE = """\
#pragma once
#ifdef __has_include
#  define FMT_HAS_INCLUDE(x) __has_include(x)
#else
#  define FMT_HAS_INCLUDE(x) 0
#endif
// GCC 4 does not support FMT_HAS_INCLUDE.
#if defined(FMT_HAS_INCLUDE) && FMT_HAS_INCLUDE(<version>) && FMT_HAS_INCLUDE("other.h")
#endif
"""


def _probe_macro_scan(tmp_path: Path, body: str) -> str | None:
    import os

    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "other.h").write_text("#pragma once\n")
    (tmp_path / "base.h").write_text(FMT_BASE)
    # the calls come before the definition is read (the main file is scanned first)
    text = body + '#include "base.h"\n__global__ void k(float* x) { x[0] = 1.0f; }\n'
    return check_includes(text, tmp_path / "k.cu", [])


def test_a_probe_macro_called_with_literal_names_lets_nvcc_run(tmp_path: Path) -> None:
    """LightGBM (fmt) and CuPy (its CCCL's `_CCCL_HAS_INCLUDE`): nvcc never ran for them."""
    assert _probe_macro_scan(tmp_path, "#if FMT_HAS_INCLUDE(<cuda_fp16.h>)\n#endif\n") is None


@pytest.mark.parametrize(
    "body",
    [
        '#if FMT_HAS_INCLUDE("pipe.h")\n#endif\n',  # a FIFO, before the definition is read
        '#define P(y) FMT_HAS_INCLUDE(y)\n#if P("pipe.h")\n#endif\n',  # through a macro
        '#define Q FMT_HAS_INCLUDE\n#if Q("pipe.h")\n#endif\n',  # the name passed on
        '#define R "\\"//" FMT_HAS_INCLUDE\n#if R("pipe.h")\n#endif\n',  # a fake comment
        '#if FMT_HAS_INCLUDE(\\\n"pipe.h")\n#endif\n',  # a call split over lines
        '#if FMT_HAS_\\\nINCLUDE("pipe.h")\n#endif\n',  # the name split over lines
        '#if FMT_HAS_INCLUDE(\n"pipe.h")\n#endif\n',  # a call over two lines, unspliced
    ],
)
def test_a_probe_macro_naming_a_file_otherwise_stops_nvcc(tmp_path: Path, body: str) -> None:
    problem = _probe_macro_scan(tmp_path, body)
    assert problem is not None and "FMT_HAS_INCLUDE" in problem, problem


# --- the scan's bound: PyTorch's headers are honest work ----------------------------------------


def _header_tree(root: Path, count: int) -> str:
    """`count` small headers, each including the next ten, as a library's umbrella header does."""
    inc = root / "inc"
    inc.mkdir()
    for i in range(count):
        nexts = "".join(f"#include <h{j}.h>\n" for j in range(i * 10 + 1, min(count, i * 10 + 11)))
        (inc / f"h{i}.h").write_text(f"#pragma once\n{nexts}inline int f{i}() {{ return {i}; }}\n")
    return str(inc)


def test_a_pytorch_sized_include_graph_lets_nvcc_run(tmp_path: Path) -> None:
    """`<torch/extension.h>` reaches 4,990 headers (PyTorch 2.13): under the old bound of 4,000,
    nvcc never ran for any PyTorch extension, so none got nvcc's verdict or ptxas's figures."""
    inc = _header_tree(tmp_path, 6000)
    assert check_includes("#include <h0.h>\n", tmp_path / "k.cu", [inc]) is None


def test_an_include_graph_past_the_bound_is_not_scanned_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cuda_llm_lsp.compile import nvcc_inputs

    monkeypatch.setattr(nvcc_inputs, "MAX_SCANNED_HEADERS", 100)
    inc = _header_tree(tmp_path, 300)
    problem = check_includes("#include <h0.h>\n", tmp_path / "k.cu", [inc])
    assert problem == "the file includes over 100 headers"
