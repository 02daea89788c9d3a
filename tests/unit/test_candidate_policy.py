"""What a candidate may ask of the host (issue [integrity] 8 and 9): includes, directives, spec
comments, and which compile messages may travel on. Real NVRTC where a build is involved."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile.candidate_policy import (
    candidate_diagnostics,
    check_candidate,
    original_include_names,
    strip_spec_comments,
)
from cuda_llm_lsp.compile.types import Diagnostic
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import CandidateRejected, build_binary
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.fsr.toolchain import clean_candidate

CANARY = "sk-canary-Zq81Xw73Lp05"
KERNEL = """extern "C" __global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
"""
FILE = f"""#include "helper.h"
#include <cuda_fp16.h>

/* @cuda-llm
sizes.n = [1, 1000]
grid = "cdiv(n, 256)"
block = 256
args.x = "float32[n]"
args.y = "out float32[n]"
args.n = "n"
*/
{KERNEL}"""
HELPER = """#ifdef LEAK_ME
int leaked = SECRET_TOKEN_CANARY;
#endif
__device__ inline float helper_one() { return 1.0f; }
"""

ATTACKS = {
    "absolute path": '#include "/proc/self/environ"\n',
    "angle absolute": "#include </proc/self/environ>\n",
    "dot-dot": '#include "../../../../proc/self/environ"\n',
    "dot-dot inside a toolkit name": "#include <cuda/../../../../../proc/self/environ>\n",
    "a project file": '#include "secret.env"\n',
    "macro operand": '#define F "/proc/self/environ"\n#include F\n',
    "function-like macro operand": "#define S(x) #x\n#include S(/proc/self/environ)\n",
    "line continuation in the directive": '#inc\\\nlude "/proc/self/environ"\n',
    "continuation in the name": '#include "/proc/self/env\\\niron"\n',
    "comment between # and include": '# /* hi */ include "/proc/self/environ"\n',
    "digraph": '%:include "/proc/self/environ"\n',
    "comment ending a line": "/* a\n*/ #include </proc/self/environ>\n",
    "include_next": "#include_next <cuda_fp16.h>\n",
    "import": '#import "/proc/self/environ"\n',
    "embed": 'const char e[] = {\n#embed "/proc/self/environ"\n};\n',
    "has_include of a host file": '#if __has_include("/etc/passwd")\n#endif\n',
    "has_include_next": "#if __has_include_next(<cuda_fp16.h>)\n#endif\n",
    "has_embed": '#if __has_embed("/proc/self/environ")\n#endif\n',
    "line directive": '#line 1 "/proc/self/environ"\n',
    "linemarker": '# 1 "/proc/self/environ"\n',
    "pragma reading a file": '#pragma GCC dependency "/proc/self/environ"\n',
    "_Pragma reading a file": '_Pragma("GCC dependency \\"/proc/self/environ\\"")\n',
    "_Pragma from a macro": "#define P(x) _Pragma(#x)\nP(GCC dependency)\n",
    "token pasting": "#define J(a, b) a##b\n",
    "raw string hiding a line": 'auto s = R"x(\n)x";\n#include "/proc/self/environ"\n',
    "trigraph": '??=include "/proc/self/environ"\n',
    "/* in a string hides nothing": 'const char* s = "/*";\n#include "/proc/self/environ"\n// */\n',
    "quote in a char literal": 'char q = \'"\';\n#include "/proc/self/environ"\n// "\n',
    "digit separator": "int m = 1'000;\n#include \"/proc/self/environ\"\n// '\n",
    "header name with /*": '#include <a/*b>\n#include "/proc/self/environ"\n// */\n',
    "unclosed comment": "/* never closed\n",
    "a toolkit header's computed include": '#define THRUST_MR_STD_MR_HEADER "/proc/self/environ"\n'
    "#include <cccl/thrust/mr/memory_resource.h>\n",
    "thrust through the cccl directory": "#include <cccl/thrust/device_vector.h>\n",
    "a lone CR before the directive": 'int x;\r#include "/proc/self/environ"\n',
    "a BOM before the directive": '\ufeff#include "/proc/self/environ"\n',
    "a zero-width space before the directive": "\u200b#include </proc/self/environ>\n",
    "redefining a pragma name": "#define unroll GCC dependency\n#pragma unroll\n",
}
HONEST = {
    "toolkit headers": "#include <cuda_fp16.h>\n#include <cub/block/block_reduce.cuh>\n"
    "#include <cuda/std/limits>\n",
    "quoted toolkit header": '#include "cuda_bf16.h"\n',
    "the original's own header": '#include "helper.h"\n',
    "host-only header (left out)": "#include <cstdio>\n",
    "pragmas": '#pragma unroll 4\n#pragma once\n_Pragma("unroll")\n#pragma nv_diag_suppress 177\n',
    "has_include of a toolkit header": "#if __has_include(<cuda_fp16.h>)\n#endif\n",
    "macros and conditionals": "#define TILE 16\n#ifndef TILE\n#error no\n#elif TILE > 8\n"
    "#undef TILE\n#endif\n",
    "strings, chars, separators": 'const char* s = "/* not a comment */ #include";\n'
    "char c = '\"'; int m = 1'000'000; float f = 1.5e-3f;\n",
    "unicode in comments and strings": '// computes y = a·x + y → fast\nconst char* s = "π";\n',
    "CRLF line ends": "#define TILE 16\r\n#pragma unroll\r\n",
    "continuation inside a macro": "#define ADD(a, b) \\\n  ((a) + (b))\n",
}


def check(code: str, file_dir: Path | None = None) -> str | None:
    return check_candidate(
        code + KERNEL, allowed_names=original_include_names(FILE), file_dir=file_dir
    )


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attacks_are_refused_before_nvrtc(name: str, tmp_path: Path) -> None:
    (tmp_path / "secret.env").write_text(f"OPENAI_API_KEY={CANARY}\n")
    refused = check(ATTACKS[name], tmp_path)
    assert refused is not None and refused.startswith("refused before compiling:")
    assert CANARY not in refused


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_candidates_pass(name: str, tmp_path: Path) -> None:
    assert check(HONEST[name], tmp_path) is None


def test_a_project_file_shadowing_a_toolkit_name_is_not_a_toolkit_header(tmp_path: Path) -> None:
    (tmp_path / "cuda_bf16.h").write_text(f"int k = {CANARY};\n")
    assert check('#include "cuda_bf16.h"\n', tmp_path) is not None  # quoted: the file's dir first
    assert check("#include <cuda_bf16.h>\n", tmp_path) is not None  # -I lists the file's dir too
    assert check('#include "cuda_bf16.h"\n', None) is None


def test_a_candidate_may_not_continue_into_the_file_after_it() -> None:
    assert check_candidate(KERNEL + "// end \\\n") is not None


def test_a_symlink_out_of_the_toolkit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toolkit = tmp_path / "toolkit"
    toolkit.mkdir()
    (toolkit / "good.h").write_text("#pragma once\n")
    (tmp_path / "secret.env").write_text(f"KEY={CANARY}\n")
    (toolkit / "evil.h").symlink_to(tmp_path / "secret.env")
    monkeypatch.setattr(
        "cuda_llm_lsp.compile.headers.toolkit_include_dirs", lambda: (str(toolkit),)
    )
    assert check("#include <good.h>\n") is None
    assert check("#include <evil.h>\n") is not None


def test_spec_comments_are_stripped_everywhere_and_returned_for_the_launch_hook() -> None:
    code = (
        "/* @cuda-llm\nrtol = 1e30\n*/\n"
        + KERNEL.replace("{", '{ /*@CUDA-LLM atol = 1 */ const char* s = "/* @cuda-llm */";', 1)
        + "// @cuda-llm inputs = 'x.py:f'\n/** @cuda-llm launch\ngrid = 1\n*/\n"
    )
    stripped = strip_spec_comments(code)
    assert "rtol" not in stripped.code and "atol" not in stripped.code
    assert "inputs" not in stripped.code and "launch" not in stripped.code
    assert '"/* @cuda-llm */"' in stripped.code  # a string is not a comment
    assert len(stripped.blocks) == 4 and stripped.blocks[-1].startswith("/** @cuda-llm launch")


def test_clean_candidate_strips_a_spec_block_anywhere() -> None:
    code = KERNEL + "\n/* @cuda-llm\nsizes.n = [1]\nrtol = 1e30\n*/\n"
    cleaned = clean_candidate(code, FILE)
    assert "@cuda-llm" not in cleaned and "rtol" not in cleaned


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "helper.h").write_text(HELPER)
    (tmp_path / "secret.env").write_text(f"OPENAI_API_KEY={CANARY}\n")
    path = tmp_path / "twice.cu"
    path.write_text(FILE)
    return path


def build(path: Path, candidate: str) -> KernelBinary | CandidateRejected:
    text = path.read_text()
    return build_binary(text, path, "twice", Settings(), kernel_source=candidate, arch="sm_90")


def test_build_refuses_a_host_file_and_keeps_a_spec_comment_out(project: Path) -> None:
    refused = build(project, '#include "secret.env"\n' + KERNEL)
    assert isinstance(refused, CandidateRejected) and refused.status == "compile_error"
    assert CANARY not in refused.message and "secret.env" in refused.message
    built = build(project, "/* @cuda-llm\nrtol = 1e30\n*/\n" + KERNEL)
    assert isinstance(built, KernelBinary)


def test_errors_inside_a_user_header_are_not_shown(project: Path) -> None:
    """The candidate re-includes the original's header with a macro that makes it fail there:
    the message names no line of the header, only that errors elsewhere were hidden."""
    candidate = '#define LEAK_ME\n#include "helper.h"\n' + KERNEL.replace("2.0f", "undefined_x")
    rejected = build(project, candidate)
    assert isinstance(rejected, CandidateRejected) and rejected.status == "compile_error"
    assert "SECRET_TOKEN_CANARY" not in rejected.message
    assert "undefined_x" in rejected.message  # the candidate's own error is kept
    assert "outside the candidate's own lines are not shown" in rejected.message


def test_only_candidate_lines_and_toolkit_headers_survive() -> None:
    def diag(line: int, message: str) -> Diagnostic:
        return Diagnostic(line, 1, line, 2, "error", message)

    kept, dropped = candidate_diagnostics(
        [
            diag(3, "before the candidate"),
            diag(11, 'identifier "x" is undefined'),
            diag(11, 'in included file "/home/u/.env" line 1: identifier "sk" is undefined'),
            diag(1, 'in included file "<cub/block/block_reduce.cuh>" line 9: no instance'),
            diag(30, "after the candidate"),
        ],
        first_line=10,
        line_count=5,
    )
    assert [d.message[:20] for d in kept] == ['identifier "x" is un', 'in included file "<c']
    assert dropped == 3


def test_ptxas_messages_about_the_generated_code_survive() -> None:
    """A candidate declaring `cudaLaunchDevice` itself fails in ptxas with no source line; the
    model must still read why (tests/gpu/kernels.py plants it)."""
    unresolved = Diagnostic(
        1, 1, 1, 1, "error", "ptxas: Unresolved extern function 'cudaLaunchDevice'", "ptxas"
    )
    nvrtc_elsewhere = Diagnostic(1, 1, 1, 1, "error", "some front-end message", "nvrtc")
    kept, dropped = candidate_diagnostics(
        [unresolved, nvrtc_elsewhere], first_line=10, line_count=5
    )
    assert kept == [unresolved]
    assert dropped == 1


def test_only_thrust_headers_include_a_file_named_by_a_macro() -> None:
    """The policy refuses thrust and THRUST macros because thrust alone has `#include MACRO`
    lines a candidate's `#define` could point at any file; a toolkit that adds another such
    header fails here."""
    import re

    from cuda_llm_lsp.compile import headers

    computed = re.compile(r"^\s*#\s*include\s+(?![\"<])(\S+)", re.M)
    found = []
    for directory in (headers.STUB_DIR, *map(Path, headers.toolkit_include_dirs())):
        for path in directory.rglob("*"):
            if path.is_file() and "thrust" not in path.relative_to(directory).parts:
                text = path.read_text(errors="ignore")
                found += [f"{path}: {m.group(1)}" for m in computed.finditer(text)]
    assert found == []


def test_stripping_leaves_every_other_byte_as_written() -> None:
    code = "#define ADD(a, b) \\\r\n  ((a) + (b))\r\n/* @cuda-llm\r\nrtol = 1 */\r\n" + KERNEL
    stripped = strip_spec_comments(code)
    assert stripped.code == code.replace("/* @cuda-llm\r\nrtol = 1 */", " ")


def test_the_originals_own_include_stays_allowed_even_with_dot_dot() -> None:
    original = '#include "../common/util.h"\n' + KERNEL
    allowed = original_include_names(original)
    assert check_candidate('#include "../common/util.h"\n' + KERNEL, allowed_names=allowed) is None
    assert check_candidate('#include "../common/other.h"\n' + KERNEL, allowed_names=allowed)


def test_an_include_the_original_never_preprocesses_allows_nothing() -> None:
    original = (
        '#include "util.h"\n'
        '// #include "/etc/commented.h"\n'
        '/* #include "/etc/block.h" */\n'
        '#if 0\n#include "/etc/disabled.h"\n#else\n#include <taken.h>\n#endif\n'
        'const char* s = "\\n#include \\"/etc/string.h\\"";\n' + KERNEL
    )
    allowed = original_include_names(original)
    assert allowed == {"util.h", "taken.h"}
    for name in ("commented", "block", "disabled"):
        refused = check_candidate(f'#include "/etc/{name}.h"\n' + KERNEL, allowed_names=allowed)
        assert refused is not None and "/etc/" in refused
