"""NVRTC options pass an allow-list wherever they come from (issue 25, finding 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile import nvrtc
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.flags import Trust, allowed_flags, check_flag, define_problem
from cuda_llm_lsp.compile.types import CompileOptions
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.lsp.settings import restrict

# options that read or write a file: none may ever reach NVRTC
FILE_OPTIONS = [
    "--create-pch=/tmp/x.pch", "--use-pch=/tmp/x.pch", "--pch-dir=/tmp", "--pch",
    "--time=/tmp/t.csv", "--fdevice-time-trace=/tmp/t.json", "-include", "-include=/etc/passwd",
    "--pre-include=/etc/passwd", "-dlto", "--dlink-time-opt", "--gen-opt-lto", "--optix-ir",
    "-Xptxas=-o/tmp/out", "--ptxas-options=--compile-only", "-Xptxas", "--pch-verbose=true",
    "--instantiate-templates-in-pch=true", "-o", "/tmp/out", "--output-file=/tmp/out",
    "-I/proc/self", "-I/dev", "--include-path=/sys/kernel", "-D", "-I", "-DX\n#include <y>",
]  # fmt: skip
SAFE_OPTIONS = [
    "-std=c++20", "--std=c++14", "-arch=sm_80", "--gpu-architecture=compute_90a",
    "--use_fast_math", "-use_fast_math", "-lineinfo", "-G", "-DTILE=32", "-DF(a,b)=a+b", "-UX",
    "--define-macro=N", "-I/usr/include", "--extra-device-vectorization", "-default-device",
    "-rdc=true", "--relocatable-device-code=false", "-maxrregcount=64", "--fmad=false",
    "--ftz=true", "--prec-div=false", "--prec-sqrt=true", "--expt-relaxed-constexpr",
    "--expt-extended-lambda", "-diag-suppress=177,550", "-Xptxas=-v", "--dopt=on", "-w",
]  # fmt: skip


@pytest.mark.parametrize("flag", FILE_OPTIONS)
def test_options_that_touch_files_are_refused(flag: str) -> None:
    assert check_flag(flag) is not None


@pytest.mark.parametrize("flag", SAFE_OPTIONS)
def test_optimisation_and_language_options_pass(flag: str) -> None:
    assert check_flag(flag) is None


def test_an_unknown_option_is_refused_with_the_reason() -> None:
    kept, refused = allowed_flags(["--use_fast_math", "--some-future-option=/x"])
    assert kept == ("--use_fast_math",)
    assert len(refused) == 1 and "--some-future-option" in refused[0]
    assert "never passed" in refused[0]


def test_build_flags_drops_refused_options_whatever_their_source(tmp_path: Path) -> None:
    unit = build_device_unit("__global__ void k() {}\n", tmp_path / "a.cu")
    options = CompileOptions(
        arch="sm_90",
        include_paths=("/proc/sys",),
        defines=("OK=1", "1bad", "X --create-pch=/tmp/p"),
        extra_flags=("--create-pch=/tmp/p.pch", "--time=/tmp/t", "--use_fast_math"),
    )
    flags = nvrtc.build_flags(unit, options)
    assert "--use_fast_math" in flags and "-DOK=1" in flags
    assert not any("/proc" in f or "1bad" in f for f in flags)
    # options alone: a checkout's own path (`-I`, `--pre-include=`) may hold any word
    options_only = [f for f in flags if not f.startswith(("-I", "--pre-include="))]
    assert not any("pch" in f or "time" in f for f in options_only)
    assert "-DX --create-pch=/tmp/p" not in flags


def test_defines_must_be_defines() -> None:
    assert define_problem("TILE=32") is None
    assert define_problem("MAX(a,b)=((a)>(b)?(a):(b))") is None
    assert define_problem("EMPTY=") is None
    for bad in ("1X", "-X", "X Y", "X\nY", "", "X\0"):
        assert define_problem(bad) is not None, bad


def test_untrusted_include_paths_stay_inside_the_workspace(tmp_path: Path) -> None:
    inside = tmp_path / "ws" / "include"
    inside.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    link = tmp_path / "ws" / "escape"
    link.symlink_to(outside)
    trust = Trust(trusted=False, roots=(str(tmp_path / "ws"),))
    assert trust.include_dir_problem(str(inside)) is None
    assert "not trusted" in (trust.include_dir_problem(str(outside)) or "")
    assert "not trusted" in (trust.include_dir_problem(str(link)) or "")  # symlinks resolved
    assert Trust(trusted=True).include_dir_problem(str(outside)) is None
    assert Trust(trusted=True).include_dir_problem("/proc/self") is not None


def test_restrict_leaves_refused_values_out_and_says_each() -> None:
    settings = Settings(
        include_paths=("/opt/outside",),
        defines=("A=1", "no good"),
        nvrtc_flags=("--use_fast_math", "--create-pch=/tmp/x", "-I/opt/other"),
    )
    kept, problems = restrict(settings, Trust(trusted=False, roots=("/ws",)))
    assert kept.include_paths == () and kept.defines == ("A=1",)
    assert kept.nvrtc_flags == ("--use_fast_math",)
    assert len(problems) == 4
    assert any("cudaLlm.includePaths" in p and "not trusted" in p for p in problems)
    assert any("--create-pch" in p for p in problems)
    trusted, problems = restrict(settings, Trust(trusted=True))
    assert trusted.include_paths == ("/opt/outside",)
    assert trusted.nvrtc_flags == ("--use_fast_math", "-I/opt/other")
    assert len(problems) == 2


def test_cli_check_refuses_bad_defines_and_special_include_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cuda_llm_lsp.cli import main

    source = tmp_path / "k.cu"
    source.write_text("__global__ void k() {}\n")
    assert main(["check", "-D", "1X", str(source)]) == 2
    assert main(["check", "-I", "/proc/self", str(source)]) == 2
    err = capsys.readouterr().err
    assert "-D '1X'" in err and "/proc is never read" in err


def test_the_nvcc_tier_gets_the_code_generation_flags_both_compilers_take() -> None:
    """A build's `-rdc=true` (device-side launches), `-maxrregcount=N`, fast math reach nvcc
    in its spelling beside the dialect flags; NVRTC-only and refused ones do not."""
    from cuda_llm_lsp.compile.flags import nvcc_spellings

    given = [
        "-dc", "--relocatable-device-code=true", "--maxrregcount=64", "-use_fast_math",
        "--expt-relaxed-constexpr", "-default-device", "-rdc=maybe", "--time=x.csv",
    ]  # fmt: skip
    assert nvcc_spellings(given) == (
        "-rdc=true", "-maxrregcount=64", "--use_fast_math", "--expt-relaxed-constexpr"
    )  # fmt: skip
