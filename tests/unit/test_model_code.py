"""No model-written host code ever runs (docs/design.md, "What an accepted winner may write",
issue 37): the `__host__ __device__` route closed, host items the kernel does not need dropped,
the proof made with the file's flags or asked for, previews private.

Planted replies go through the real CLI (`optimize --replay ... --write`, the recorded evaluator
in place of a GPU) and real nvcc / g++ / binutils where installed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.compile.host_object import (
    new_host_code,
    read_host_object,
    start_up_table,
    tools_available,
)
from cuda_llm_lsp.compile.nvcc import find_nvcc
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.fsr import apply
from cuda_llm_lsp.fsr.apply import write_check
from cuda_llm_lsp.lsp.results import Suggestion
from cuda_llm_lsp.lsp.suggestions import write_files
from cuda_llm_lsp.redact import register_secret
from cuda_llm_lsp.source.device_only import DeviceOnly, device_only
from tests.support.fsr_fakes import make_recording
from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply
from tests.unit.test_cli_optimize import SAXPY, cli

needs_nvcc = pytest.mark.skipif(
    find_nvcc() is None or not tools_available(), reason="no nvcc (the `nvcc` extra) or binutils"
)

KERNEL = """\
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  // variant: fast
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + twice(y[i]) * 0.5f;
}
"""
OUTCOMES = {
    "baseline": {"ms": 1.0, "spread_pct": 0.4},
    "candidates": [{"contains": "variant: fast", "status": "ok", "ms": 0.4}],
}

# The reported route: a `__host__ __device__` helper whose host-only branch puts an entry in a
# prioritised start-up section and calls `system`.
ATTACK = """\
#include <cstdlib>
__host__ __device__ inline float twice(float v) {
#ifndef __CUDA_ARCH__
  asm(".pushsection .init_array.00101\\n.quad 0\\n.popsection");
  std::system("touch PWNED");
#endif
  return v + v;
}
"""
# Variants of the class: (helper text, what the refusal says).
VARIANTS = {
    "the reported route": (ATTACK, "`#ifndef __CUDA_ARCH__`"),
    "#if !defined": (
        ATTACK.replace("#ifndef __CUDA_ARCH__", "#if !defined(__CUDA_ARCH__)"),
        "`#if !defined(__CUDA_ARCH__)`",
    ),
    "the #else of #ifdef": (
        "__host__ __device__ inline float twice(float v) {\n#ifdef __CUDA_ARCH__\n"
        '  return v + v;\n#else\n  std::system("touch PWNED");\n  return v + v;\n#endif\n}\n',
        "the `#else` of `#ifdef __CUDA_ARCH__`",
    ),
    "compared to 0": (
        ATTACK.replace("#ifndef __CUDA_ARCH__", "#if __CUDA_ARCH__ == 0"),
        "`#if __CUDA_ARCH__ == 0`",
    ),
    "a macro HD and a macro test": (
        "#define HD __host__ __device__\n#define ON_HOST !defined(__CUDA_ARCH__)\n"
        'HD inline float twice(float v) {\n#if ON_HOST\n  std::system("x");\n#endif\n'
        "  return v + v;\n}\n",
        "defines a macro that carries `__CUDA_ARCH__`",
    ),
    "NV_IF_TARGET": (
        "#include <nv/target>\n__host__ __device__ inline float twice(float v) {\n"
        '  NV_IF_TARGET(NV_IS_HOST, (std::system("x");))\n  return v + v;\n}\n',
        "names `NV_IS_HOST`",
    ),
    "a section directive in device asm": (
        "__device__ inline float twice(float v) {\n"
        '  asm volatile(".section .ctors\\n.quad 0\\n.previous");\n  return v + v;\n}\n',
        "the assembler directive `.section`",
    ),
    "__location__(host)": (
        "#define HOSTED __location__(host) __device__\n"
        "HOSTED inline float twice(float v) { return v + v; }\n",
        "uses `__location__`",
    ),
}


@pytest.mark.parametrize("shape", sorted(VARIANTS))
def test_every_host_route_is_refused_with_what_to_change(shape: str) -> None:
    helper, says = VARIANTS[shape]
    refused = device_only(helper + KERNEL, " of the candidate")
    assert isinstance(refused, str), refused
    assert says in refused, refused
    assert "host code is not allowed in a reply" in refused


def test_a_host_branch_the_rules_miss_is_still_never_compiled_for_the_host() -> None:
    """`#else` of `__CUDA_ARCH__ >= 1` is host-only in fact; the rule that closes it is that a
    reply's functions lose `__host__`: a `__device__` body is never built by the host compiler."""
    helper = (
        "__host__ __device__ inline float twice(float v) {\n#if __CUDA_ARCH__ >= 1\n"
        "  return v + v;\n#else\n  return v + v;\n#endif\n}\n"
    )
    prepared = device_only(helper + KERNEL)
    assert isinstance(prepared, DeviceOnly), prepared
    assert "__host__" not in prepared.text and prepared.unhosted == (1,)
    assert "__device__ inline float twice" in prepared.text


def test_a_whole_program_keeps_its_kernel_and_device_helpers() -> None:
    reply = (
        "#include <cstdio>\n#include <vector>\n"
        "__device__ inline float twice(float v) { return v + v; }\n"
        + KERNEL
        + "void launch_saxpy(float* y, int n) { saxpy<<<1, 256>>>(2.0f, y, y, n); }\n"
        "static std::vector<float> host_data(16);\n"
        "int main() { launch_saxpy(nullptr, 0); return 0; }\n"
    )
    prepared = device_only(reply)
    assert isinstance(prepared, DeviceOnly), prepared
    assert "variant: fast" in prepared.text and "__device__ inline float twice" in prepared.text
    for gone in ("launch_saxpy", "main", "host_data", "<vector>"):
        assert gone not in prepared.text
    note = prepared.note()
    assert "line 9 defines a host function `launch_saxpy`" in note
    assert "defines a host function `main`" in note and "host_data" in note


def test_hidden_text_stays_a_refusal_even_in_a_dropped_item() -> None:
    refused = device_only("int main() { return 0; } // \u202e\n" + KERNEL)
    assert isinstance(refused, str) and "<U+202E>" in refused


# ---------------------------------------------------------------------------------------------
# CLI `--write`


def _optimize(work: Path, reply: str, *extra: str, original: str = SAXPY) -> tuple[Any, str]:
    (work / "saxpy.cu").write_text(original)
    (work / "outcomes.json").write_text(json.dumps(OUTCOMES))
    make_recording(work / "rec", "saxpy", {(1, 1): reply})
    done = cli(
        work,
        str(work / "saxpy.cu"),
        "--kernel",
        "saxpy",
        "--replay",
        str(work / "rec"),
        "--rounds",
        "1",
        "--candidates",
        "1",
        "--write",
        *extra,
    )
    return done, (work / "saxpy.cu").read_text()


@pytest.mark.parametrize("shape", ["the reported route", "NV_IF_TARGET", "#if !defined"])
def test_optimize_write_never_writes_a_host_route(tmp_path: Path, shape: str) -> None:
    done, written = _optimize(tmp_path, VARIANTS[shape][0] + KERNEL)
    assert written == SAXPY, done.stderr
    assert "PWNED" not in written


@needs_nvcc
def test_a_written_helper_never_runs_on_the_host(tmp_path: Path) -> None:
    """The helper's `#else` (host-only in fact, not caught by the branch rule) calls `system`:
    `__host__` is removed, the winner written, and the program nvcc builds from the file never
    makes the call (no kernel runs here; the host code does)."""
    helper = (
        "#include <cstdlib>\n"
        "__host__ __device__ inline float twice(float v) {\n#if __CUDA_ARCH__ >= 1\n"
        '  return v + v;\n#else\n  std::system("touch PWNED");\n  return v + v;\n#endif\n}\n'
    )
    program = SAXPY.replace("  return 0;\n}", "  twice_check();\n  return 0;\n}")
    program = program.replace("int main() {", "void twice_check() {}\nint main() {")
    done, written = _optimize(tmp_path, helper + KERNEL, original=program)
    assert done.returncode == 0, done.stderr
    assert "__device__ inline float twice" in written and "__host__" not in written
    binary = tmp_path / "built"
    subprocess.run(
        [str(find_nvcc()), str(tmp_path / "saxpy.cu"), "-o", str(binary)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    subprocess.run([str(binary)], cwd=tmp_path, capture_output=True, timeout=60)
    assert not (tmp_path / "PWNED").exists()


def test_without_a_proof_a_change_beyond_the_body_is_not_written_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_LLM_NVCC", str(tmp_path / "no-nvcc-here"))
    helper = "__device__ inline float twice(float v) { return v + v; }\n"
    first = tmp_path / "plain"
    first.mkdir()
    done, written = _optimize(first, helper + KERNEL)
    assert done.returncode == 1 and written == SAXPY
    assert "no build proves that it adds no host code (no nvcc here)" in done.stderr
    assert "--write-unproven" in done.stderr
    second = tmp_path / "asked"
    second.mkdir()
    done, written = _optimize(second, helper + KERNEL, "--write-unproven")
    assert done.returncode == 0, done.stderr
    assert "__device__ inline float twice" in written
    assert "the nvcc build check was skipped" in done.stderr
    third = tmp_path / "body"  # the kernel's body alone: nothing beyond it to prove
    third.mkdir()
    done, written = _optimize(third, KERNEL.replace("twice(y[i]) * 0.5f", "y[i]"))
    assert done.returncode == 0, done.stderr
    assert "variant: fast" in written


def test_a_whole_program_is_judged_on_its_kernel_in_round_one(tmp_path: Path) -> None:
    """A reply holding `main`, a host launcher and the kernel: the candidate compiles and is
    evaluated in round 1, and round 2's prompt names what was dropped and why."""
    (tmp_path / "saxpy.cu").write_text(SAXPY)
    (tmp_path / "outcomes.json").write_text(json.dumps(OUTCOMES))
    program = (
        "#include <cstdio>\n"
        "__device__ inline float twice(float v) { return v + v; }\n"
        + KERNEL
        + "\nvoid launch_saxpy(float* y, int n) {\n"
        "  saxpy<<<(n + 255) / 256, 256>>>(2.0f, y, y, n);\n}\n"
        '\nint main() {\n  launch_saxpy(nullptr, 0);\n  std::puts("done");\n  return 0;\n}\n'
    )
    steps = [{"text": kernel_reply(program), "repeat": -1}]
    with ScriptedLlmServer(steps) as server:
        done = cli(
            tmp_path,
            str(tmp_path / "saxpy.cu"),
            "--kernel",
            "saxpy",
            "--rounds",
            "2",
            "--candidates",
            "1",
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--format",
            "json",
        )
        second = [
            r["body"]["messages"][-1]["content"]
            for r in server.chat_requests()
            if "This is round 2" in r["body"]["messages"][-1]["content"]
        ]
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    first = next(c for c in result["candidates"] if c["round"] == 1)
    assert first["status"] == "ok", first
    assert second, "no round-2 prompt"
    assert "dropped from the reply" in second[0]
    assert "defines a host function `launch_saxpy`" in second[0]
    assert "defines a host function `main`" in second[0]


# ---------------------------------------------------------------------------------------------
# The host-object proof


def _edited(helpers: str, kernel: str = KERNEL, text: str = SAXPY) -> str:
    spec, start = text.index("/* @cuda-llm"), text.index('extern "C"')
    end = text.index("}\n\nint main") + 2
    return text[:spec] + helpers + "\n" + text[spec:start] + kernel + text[end:]


@needs_nvcc
def test_the_proof_refuses_the_reported_route_when_the_source_check_is_bypassed() -> None:
    emitted = ATTACK.replace("inline ", "")  # an external function: built for the host too
    checked = write_check(_edited(emitted), SAXPY, None)
    assert checked.refused is not None, checked
    assert "`.init_array`" in checked.refused and "`system`" in checked.refused


@pytest.mark.skipif(not tools_available(), reason="no binutils")
@pytest.mark.parametrize("section", [".init_array.00101", ".ctors.65435", ".fini_array.00200"])
def test_prioritised_start_up_sections_count_as_their_table(tmp_path: Path, section: str) -> None:
    """A hand-built object (g++) with an entry in a prioritised section: the proof counts it."""
    plain, hooked = tmp_path / "plain.o", tmp_path / "hooked.o"
    source = "void early() {}\nint main() { return 0; }\n"
    hook = f'__attribute__((section("{section}"), used)) static void (*entry)() = early;\n'
    (tmp_path / "plain.cc").write_text(source)
    (tmp_path / "hooked.cc").write_text(source + hook)
    for name, obj in (("plain.cc", plain), ("hooked.cc", hooked)):
        subprocess.run(["g++", "-c", str(tmp_path / name), "-o", str(obj)], check=True, timeout=120)
    assert start_up_table(section) == section.rsplit(".", 1)[0]
    before, after = read_host_object(plain), read_host_object(hooked)
    table = start_up_table(section)
    assert after.start_up.get(table, 0) > before.start_up.get(table, 0)
    found = new_host_code(before, after, frozenset())
    assert any(f"`{table}`" in f for f in found), found


@pytest.mark.skipif(not tools_available(), reason="no binutils")
def test_a_new_undefined_host_symbol_is_host_code(tmp_path: Path) -> None:
    (tmp_path / "a.cc").write_text("int f() { return 1; }\n")
    (tmp_path / "b.cc").write_text('#include <cstdlib>\nint f() { return std::system("x"); }\n')
    for name in ("a", "b"):
        subprocess.run(
            ["g++", "-c", str(tmp_path / f"{name}.cc"), "-o", str(tmp_path / f"{name}.o")],
            check=True,
            timeout=120,
        )
    found = new_host_code(
        read_host_object(tmp_path / "a.o"), read_host_object(tmp_path / "b.o"), frozenset()
    )
    assert any("`system`" in f for f in found), found


NEEDS_BLOCK = SAXPY.replace(
    "#include <cstdio>\n",
    "#include <cstdio>\n#ifndef BLOCK\n#error BLOCK is set by the build\n#endif\n",
)


@needs_nvcc
def test_the_proof_is_made_with_the_settings_defines(tmp_path: Path) -> None:
    path = tmp_path / "saxpy.cu"
    path.write_text(NEEDS_BLOCK)
    sneaked = (
        "__device__ inline float twice(float v) { return v + v; }\n"
        "int host_helper(int v) { return v + 1; }\n"
    )
    settings = Settings(defines=["BLOCK=256"])
    checked = write_check(_edited(sneaked, text=NEEDS_BLOCK), NEEDS_BLOCK, path, settings)
    assert checked.refused is not None and "host_helper" in checked.refused, checked
    honest = "__device__ inline float twice(float v) { return v + v; }\n"
    checked = write_check(_edited(honest, text=NEEDS_BLOCK), NEEDS_BLOCK, path, settings)
    assert checked.refused is None and checked.note == "" and checked.unproven == "", checked
    unproven = write_check(_edited(honest, text=NEEDS_BLOCK), NEEDS_BLOCK, path, Settings())
    assert "the original file does not build with nvcc" in unproven.note
    assert unproven.unproven  # without its flags nothing is proven: asked first


@needs_nvcc
def test_the_proof_is_made_with_the_projects_compile_flags(tmp_path: Path) -> None:
    (tmp_path / "compile_flags.txt").write_text("-DBLOCK=256\n")
    path = tmp_path / "saxpy.cu"
    path.write_text(NEEDS_BLOCK)
    sneaked = (
        "__device__ inline float twice(float v) { return v + v; }\n"
        "int host_helper(int v) { return v + 1; }\n"
    )
    checked = write_check(_edited(sneaked, text=NEEDS_BLOCK), NEEDS_BLOCK, path, Settings())
    assert checked.refused is not None and "host_helper" in checked.refused, checked


def test_without_nvcc_only_a_body_change_goes_unasked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apply, "find_nvcc", lambda: None)
    helper = "__device__ inline float twice(float v) { return v + v; }\n"
    checked = write_check(_edited(helper), SAXPY, None)
    assert checked.refused is None and "no nvcc here" in checked.unproven
    body = _edited("", KERNEL.replace("twice(y[i]) * 0.5f", "y[i]"))
    checked = write_check(body.replace("\n\n/* @cuda-llm", "\n/* @cuda-llm"), SAXPY, None)
    assert checked.refused is None and checked.unproven == "", checked


# ---------------------------------------------------------------------------------------------
# Previews


def test_previews_are_redacted_and_private(tmp_path: Path) -> None:
    key = "sk-preview-secret-0123456789"
    register_secret(key)
    suggestion = Suggestion(
        uri="file:///w/saxpy.cu",
        kernel="saxpy",
        original="__global__ void saxpy() {}\n",
        suggested=f"__global__ void saxpy() {{ /* {key} */ }}\n",
        speedup=2.0,
        baseline_ms=1.0,
        best_ms=0.5,
        cases_passed=3,
        cases_total=3,
        message=f"2.00x faster ({key})",
    )
    directory = tmp_path / "suggestions"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    source, diff = write_files(suggestion, directory)
    again, _ = write_files(suggestion, directory)  # a read-only preview is replaced
    assert again == source
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    for path in (source, diff):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o400, oct(os.stat(path).st_mode)
        text = path.read_text()
        assert key not in text and "<redacted>" in text


@pytest.mark.parametrize(
    ("branch", "refused"),
    [
        ("#if __CUDA_ARCH__\n#else\n#endif\n", True),
        ("#if defined(__CUDA_ARCH__)\n#elif 1\n#endif\n", True),
        ("#if __CUDA_ARCH__ < 800\n#endif\n", True),
        ("#if 0 == __CUDA_ARCH__\n#endif\n", True),
        ("#if __CUDA_ARCH__ >= 800\n#else\n#endif\n", False),  # older devices take the #else
        ("#ifdef __CUDA_ARCH__\n#endif\n", False),
        ("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n#else\n#endif\n", False),
    ],
)
def test_only_host_only_branches_are_refused(branch: str, refused: bool) -> None:
    result = device_only(branch + "__device__ inline float twice(float v) { return v; }\n" + KERNEL)
    assert isinstance(result, str) is refused, result


def test_an_undefined_symbol_first_in_nm_is_read_as_undefined_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """nm lists an object's undefined symbols first where its version sorts so (the GPU
    machine's binutils): each is undefined, never a row of the defined symbol before it."""
    from cuda_llm_lsp.compile import host_object

    listing = (
        "                 U system\n"
        "0000000000000000 0000000000000010 T _Z3addii\n"
        "                 U __cxa_atexit\n"
        "0000000000000010 0000000000000008 D table\n"
    )
    outputs = {"nm": listing, "readelf": ""}
    monkeypatch.setattr(host_object, "_run", lambda command, stdin=None: outputs[command[0]])
    monkeypatch.setattr(host_object, "demangle", lambda names: list(names))
    read = host_object.read_host_object(tmp_path / "any.o")
    assert read.undefined == {"system", "__cxa_atexit"}
    assert sorted(read.symbols) == ["_Z3addii", "table"]
