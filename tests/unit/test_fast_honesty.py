"""Without nvcc the fast tier is honest about what it cannot know (issue 38, item 2): an error in
code its device unit rewrote, naming what the rewriting removed, or inside a library header is
a warning that says so; a file whose first error is such, among many, says "fast check
unavailable"; an error in code the unit left alone is still an error at its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.compile.analysis import analyze_syntax
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.honesty import UNAVAILABLE_CODE, rewrites
from cuda_llm_lsp.config import Settings


@pytest.fixture(autouse=True)
def _no_nvcc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fast tier alone, as on a machine without the nvcc extra."""
    monkeypatch.setenv("CUDA_LLM_NVCC", str(tmp_path / "no-nvcc-here"))
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def check(tmp_path: Path, text: str) -> tuple:
    source = tmp_path / "main.cu"
    source.write_text(text)
    return analyze_syntax(text, source, Settings(arch="sm_90")).diagnostics


# `using Base::f` kept after the base's host member was blanked: the false error
USING_BLANKED = (
    "#include <vector>\n"
    "struct Base {\n"
    "  void host_only(std::vector<int>& v) { v.push_back(1); }\n"
    "  __device__ int twice(int x) const { return 2 * x; }\n"
    "};\n"
    "struct Derived : Base {\n"
    "  using Base::host_only;\n"
    "  __device__ int go(int x) const { return twice(x); }\n"
    "};\n"
    "__global__ void k(int* o) { Derived d; o[0] = d.go(o[0]); }\n"
)


def test_an_error_naming_what_the_rewriting_removed_is_a_warning_saying_so(
    tmp_path: Path,
) -> None:
    (d,) = check(tmp_path, USING_BLANKED)
    assert (d.severity, d.line) == ("warning", 7), d
    assert 'has no member "host_only"' in d.message
    assert 'the fast check removed host code that names "host_only"' in d.message
    assert "pip install 'cuda-llm-lsp[nvcc]'" in d.message


def test_a_real_error_in_untouched_code_stays_an_error_beside_an_unsure_one(
    tmp_path: Path,
) -> None:
    text = USING_BLANKED.replace("o[0] = d.go(o[0]);", "o[0] = d.go(o[0]) + facter;")
    found = check(tmp_path, text)
    (error,) = [d for d in found if d.severity == "error"]
    assert (error.line, error.message) == (10, 'identifier "facter" is undefined')
    assert any(d.severity == "warning" and d.line == 7 for d in found)


def test_an_error_on_a_line_the_unit_rewrote_is_a_warning(tmp_path: Path) -> None:
    text = (
        "void h(int* p) { p[0] = 1; } __device__ int g() { return not_declared; }\n"
        "__global__ void k(int* o) { o[0] = g(); }\n"
    )
    (d,) = check(tmp_path, text)
    assert (d.severity, d.line) == ("warning", 1)
    assert "the fast check rewrote this line for NVRTC" in d.message


def test_errors_in_a_library_header_are_warnings_and_many_make_the_check_unavailable(
    tmp_path: Path,
) -> None:
    text = "#define __half int\n#include <cuda_fp16.h>\n__global__ void k(float* x) {}\n"
    found = check(tmp_path, text)
    assert not any(d.severity == "error" for d in found), found
    (note,) = [d for d in found if d.code == UNAVAILABLE_CODE]
    assert (note.severity, note.line) == ("warning", 1)
    assert note.message.startswith("fast check unavailable: ")
    assert "in a library header (<cuda_fp16.h" in note.message
    assert "install the nvcc extra (pip install 'cuda-llm-lsp[nvcc]')" in note.message
    listed = [d for d in found if d.code != UNAVAILABLE_CODE]
    assert sum(d.severity == "information" and "library header" in d.message for d in listed) > 5


def test_rewrites_knows_the_lines_and_names_the_unit_changed(tmp_path: Path) -> None:
    unit = build_device_unit(USING_BLANKED, tmp_path / "main.cu", ())
    changes = rewrites(USING_BLANKED, unit)
    assert 3 in changes.lines and 10 not in changes.lines and 7 not in changes.lines
    assert "host_only" in changes.removed and "push_back" in changes.removed
    assert "twice" not in changes.removed


# XGBoost's base.h: a host `friend operator<<` on std::ostream kept in a class with device
# members, <ostream> (a host header) dropped: NVRTC's `std` lacks it, nvcc's libstdc++ has it
FRIEND_OSTREAM = (
    "#include <ostream>\n"
    "template <typename T> struct G {\n"
    "  T g;\n"
    "  __host__ __device__ T get() const { return g; }\n"
    "  friend std::ostream& operator<<(std::ostream& os, const G& x) { os << x.g; return os; }\n"
    "};\n"
    "__global__ void k(float* o) { G<float> a{1}; o[0] = a.get(); }\n"
)


def test_a_std_name_the_fast_check_lacks_is_a_warning_not_an_error(tmp_path: Path) -> None:
    found = check(tmp_path, FRIEND_OSTREAM)
    assert found and all(d.severity == "warning" for d in found), found
    assert all(d.line == 5 and '"std::ostream" is not in the part' in d.message for d in found)


def test_a_std_name_missing_in_a_project_header_is_a_warning_too(tmp_path: Path) -> None:
    """In a header of the project (the unit rewrites it): the same doubt, then a planted error
    in the file's own kernel is still an error at its line."""
    (tmp_path / "inc.h").write_text(FRIEND_OSTREAM.rsplit("__global__", 1)[0])
    text = (
        '#include "inc.h"\n__global__ void k(float* o) { G<float> a{1}; o[0] = a.get() + nope; }\n'
    )
    found = check(tmp_path, text)
    errors = [d for d in found if d.severity == "error"]
    assert [(d.line, d.message) for d in errors] == [(2, 'identifier "nope" is undefined')]
    assert any(d.severity == "warning" and "std::ostream" in d.message for d in found), found


def test_a_name_the_torch_stand_in_lacks_is_a_warning(tmp_path: Path) -> None:
    """`at::opmath_type<T>` (<ATen/OpMathType.h>, read as the PyTorch stand-in, which does not
    declare it): "namespace "at" has no member" is a warning, as for a missing `std` name;
    what follows from it on the line ("expected a ;" at its `<`) stays an error, as there.
    A name missing from the file's own namespace stays an error."""
    text = (
        "#include <ATen/OpMathType.h>\n#include <c10/util/Half.h>\n"
        "namespace mine { __device__ float twice(float x) { return 2 * x; } }\n"
        "template <typename T> __global__ void k(T* x) {\n"
        "  using acc_t = at::opmath_type<T>;\n"
        "  x[0] = static_cast<T>(static_cast<acc_t>(x[0]) * 2);\n"
        "}\n"
        "template __global__ void k<c10::Half>(c10::Half*);\n"
    )
    found = check(tmp_path, text)
    named = [d for d in found if "opmath_type" in d.message]
    assert [(d.severity, d.line) for d in named] == [("warning", 5)], found
    assert "not in the part of namespace at that cuda-llm's stand-in for" in named[0].message
    assert "<ATen/OpMathType.h>" in named[0].message
    planted = text.replace("* 2);", "* 2) + mine::thrice(1.0f);")
    errors = [(d.line, d.message) for d in check(tmp_path, planted) if d.severity == "error"]
    assert (6, 'namespace "mine" has no member "thrice"') in errors, errors


def test_an_error_in_a_project_header_the_unit_rewrote_is_a_warning(tmp_path: Path) -> None:
    """A `__host__ __device__` function calling a host function the unit blanked (nvcc only
    warns while no device code calls it): "undefined" in a header the fast check rewrote is a
    warning. The same kind of error in a header the unit kept as it is stays an error."""
    (tmp_path / "log.h").write_text(
        "#pragma once\n#include <cstdio>\n"
        'inline int host_log(int x) { std::printf("%d\\n", x); return x; }\n'
        "__host__ __device__ inline int checked(int x) { return x < 0 ? host_log(x) : x; }\n"
        "__device__ inline int twice(int x) { return 2 * x; }\n"
    )
    text = '#include "log.h"\n__global__ void k(int* o) { o[0] = twice(o[0]); }\n'
    found = check(tmp_path, text)
    assert not [d for d in found if d.severity == "error"], found
    assert any("log.h, which the fast check rewrote" in d.message for d in found), found
    (tmp_path / "pure.h").write_text(
        "#pragma once\n__device__ inline int dev(int x) { return x + undefined_thing; }\n"
    )
    found = check(tmp_path, '#include "pure.h"\n__global__ void k(int* o) { o[0] = dev(1); }\n')
    assert [d.severity for d in found if "undefined_thing" in d.message] == ["error"], found


def test_a_class_deriving_from_a_blanked_host_class_is_blanked_too(tmp_path: Path) -> None:
    """dlib's error.h: a host class (std::exception, std::string) blanked, a class deriving
    from it was kept ("not a class or struct name", a warning); now it goes with its base."""
    (tmp_path / "err.h").write_text(
        "#pragma once\n#include <exception>\n#include <string>\n"
        "class error : public std::exception { std::string info; public:\n"
        "  const char* what() const noexcept { return info.c_str(); } };\n"
        "class fatal_error : public error { };\n"
        "__device__ inline int twice(int x) { return 2 * x; }\n"
    )
    text = '#include "err.h"\n__global__ void k(int* o) { o[0] = twice(o[0]); }\n'
    assert check(tmp_path, text) == (), check(tmp_path, text)


def test_a_class_deriving_from_a_host_class_of_another_header_is_blanked(tmp_path: Path) -> None:
    """The host base blanked in one header, the class deriving from it in another that the
    unit kept as it was: "not a class or struct name" there was a false error."""
    (tmp_path / "base.h").write_text(
        "#pragma once\n#include <stdexcept>\n#include <string>\n"
        "struct failure : std::runtime_error {\n"
        "  explicit failure(const std::string& m) : std::runtime_error(m) {}\n};\n"
    )
    (tmp_path / "io_failure.h").write_text(
        '#pragma once\n#include "base.h"\n'
        'struct io_failure : failure { io_failure() : failure("io") {} int code = 0; };\n'
        "__device__ inline int twice(int x) { return 2 * x; }\n"
    )
    text = '#include "io_failure.h"\n__global__ void k(int* o) { o[0] = twice(o[0]); }\n'
    assert check(tmp_path, text) == (), check(tmp_path, text)


def test_an_error_in_a_toolkit_library_header_the_unit_rewrote_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host library's header (`cusparse.h`) is read from a toolkit's directory, not the
    project's, and blanked like a project header: an error in the blanked text is the
    rewriting's, not the user's (it was an error: only the project's directories were compared)."""
    from cuda_llm_lsp.compile import honesty
    from cuda_llm_lsp.compile.types import DeviceUnit, Diagnostic

    toolkit = tmp_path / "toolkit"  # the nvcc in use: its bin/ and its include/
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "include").mkdir()
    (toolkit / "bin" / "nvcc").write_text("#!/bin/sh\nexit 1\n")
    (toolkit / "bin" / "nvcc").chmod(0o755)
    (toolkit / "include" / "cusparse.h").write_text("typedef int handle_t;\nvoid host_only();\n")
    monkeypatch.setenv("CUDA_LLM_NVCC", str(toolkit / "bin" / "nvcc"))
    unit = DeviceUnit(
        text="__global__ void k() {}\n",
        name="main.cu",
        include_dirs=(str(tmp_path),),
        headers={"cusparse.h": "typedef int handle_t;\n                  \n"},
    )
    changes = rewrites(unit.text, unit)
    assert "cusparse.h" in changes.rewritten
    error = Diagnostic(1, 1, 1, 2, "error", 'in included file "cusparse.h" line 2: x')
    (d,) = honesty.be_honest([error], changes)
    assert d.severity == "warning" and "which the fast check rewrote" in d.message, d


# faiss's BlockSelectImpl.cuh: a macro defining a host function, invoked in a namespace as
# `BLOCK_SELECT_IMPL(float, true, 1, 1);` (tree-sitter reads a declaration with an ERROR: the
# unit keeps it); its body calls a host
# function its header declares (blanked) and the C library's fprintf(stderr, ...)
SELECT_HEADER = (
    "#pragma once\n#include <cstdio>\n#include <cstdlib>\n"
    "int warpSizeCurrentDevice();\n"
    "template <typename T> __global__ void select(T* x) { x[0] = T(1); }\n"
    "#define SELECT_IMPL(T, DIR, Q)                              \\\n"
    "  void runSelect_##T##_##DIR##_##Q(T* x, int k) {           \\\n"
    "    constexpr int kThreads = 128;                           \\\n"
    "    if (k > 32 && warpSizeCurrentDevice() == 32) {          \\\n"
    '      fprintf(stderr, "k too large\\n");                     \\\n'
    "    }                                                       \\\n"
    "    select<T><<<1, kThreads>>>(x);                          \\\n"
    "  }\n"
)


def test_names_a_header_lost_or_the_c_library_lacks_are_warnings(tmp_path: Path) -> None:
    """Errors in host code the unit kept (a macro's expansion) naming a host function its
    header's rewriting removed, or the C library's fprintf and stderr (the unit's
    stand-ins give NVRTC only printf, malloc...): warnings saying so (were: errors on a line nvcc
    accepts). An error in the file's own untouched code is still an error."""
    (tmp_path / "select.cuh").write_text(SELECT_HEADER)
    text = '#include "select.cuh"\nnamespace ns {\nSELECT_IMPL(float, true, 1);\n}\n'
    diagnostics = check(tmp_path, text)
    assert not [d for d in diagnostics if d.severity == "error"], diagnostics
    warned = {d.message.split('"')[1] for d in diagnostics if d.severity == "warning"}
    assert {"warpSizeCurrentDevice", "fprintf", "stderr"} <= warned, diagnostics
    assert any("C library" in d.message for d in diagnostics)
    planted = text + "__global__ void k(float* x) { x[0] = undefined_name; }\n"
    errors = [d for d in check(tmp_path, planted) if d.severity == "error"]
    assert len(errors) == 1 and "undefined_name" in errors[0].message, errors


# ggml's cuBLAS traits: a class's `static inline const half alpha = 1.0;`, a host variable for
# nvcc, a device one with dynamic initialization for NVRTC's -default-device
HOST_TRAITS = (
    "#include <cuda_fp16.h>\n"
    "template <int N> struct traits;\n"
    "template <> struct traits<1> {\n"
    "    static inline const half alpha = 1.0;\n"
    "    static const void* get() { static const half v = alpha; return &v; }\n"
    "};\n"
    "__global__ void k(float* o) { o[0] = 1.0f; }\n"
)


def test_a_device_variable_error_on_an_unannotated_variable_is_a_warning(
    tmp_path: Path,
) -> None:
    """nvcc compiles it (a host variable); the fast check says why it cannot be sure. The same
    initialization of a variable declared `__device__` (over two lines) is still an error, in
    the file and in a project header kept as it is."""
    (d,) = [d for d in check(tmp_path, HOST_TRAITS) if d.line == 4]
    assert d.severity == "warning", d
    assert "dynamic initialization" in d.message and "-default-device" in d.message
    planted = HOST_TRAITS + "__device__\nhalf h = 1.0;\n"
    errors = [d for d in check(tmp_path, planted) if d.severity == "error"]
    assert [d.line for d in errors] == [9], errors
    (tmp_path / "traits.h").write_text(HOST_TRAITS.rsplit("__global__", 1)[0])
    (tmp_path / "dev.h").write_text("#include <cuda_fp16.h>\n__device__ half h = 1.0;\n")
    text = '#include "traits.h"\n#include "dev.h"\n__global__ void k(float* o) { o[0] = 1.0f; }\n'
    found = check(tmp_path, text)
    assert [d.line for d in found if d.severity == "error"] == [2], found
    assert any(d.line == 1 and "-default-device" in d.message for d in found), found
