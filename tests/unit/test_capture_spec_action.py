"""`engine.capture.capture_spec`, the editor's use case (issue 39): the program's run (a fake
here: no GPU), then the spec of the editor's text from what it captured; where the capture goes
and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_llm_lsp.engine.capture import (
    CaptureError,
    CaptureOutcome,
    CaptureRequest,
    capture_directory,
    capture_spec,
    spec_for_source,
)
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec
from tests.support.fake_capture import SCALE, fake_run_capture, write_scale_capture


def test_the_capture_goes_beside_the_file_under_a_safe_name(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    assert capture_directory(path, "scale") == tmp_path / ".cuda-llm" / "captures" / "scale"
    odd = capture_directory(path, "../x")
    assert odd.parent == tmp_path / ".cuda-llm" / "captures" and odd.name == "___x"


def test_the_spec_of_the_editors_text_names_the_capture_relative_to_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scale.cu"  # never written: the editor's unsaved text is what counts
    request = CaptureRequest(("./app",), capture_directory(path, "scale"), kernel="scale")
    outcome = capture_spec(request, SCALE, path, "scale", fake_run_capture)
    assert outcome.ok and outcome.spec is not None, outcome.message
    text = outcome.spec.text
    assert text.endswith(SCALE.split("#include <cuda_runtime.h>\n", 1)[1])
    (kernel,) = find_kernels(text)
    spec, problems = parse_spec(kernel, text)
    assert spec is not None and not problems and spec.capture == ".cuda-llm/captures/scale"
    ignore = tmp_path / ".cuda-llm" / ".gitignore"  # the data is not committed by accident
    assert ignore.read_text().endswith("*\n")
    again = capture_spec(request, text, path, "scale", fake_run_capture)  # its spec replaced
    assert again.spec is not None and again.spec.text.count("/* @cuda-llm") == 1


def test_nothing_captured_is_said_as_the_capture_said_it(tmp_path: Path) -> None:
    path = tmp_path / "scale.cu"
    said = "nothing captured: the program exited with status 1; kernels launched: none"

    def failed(request: CaptureRequest) -> CaptureOutcome:
        return CaptureOutcome(False, said, request.out, returncode=1)

    request = CaptureRequest(("./app",), capture_directory(path, "scale"), kernel="scale")
    outcome = capture_spec(request, SCALE, path, "scale", failed)
    assert not outcome.ok and outcome.spec is None and outcome.message == said


def test_a_capture_outside_the_files_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    write_scale_capture(outside)
    root = tmp_path / "src"
    root.mkdir()
    with pytest.raises(CaptureError, match="outside"):
        spec_for_source(SCALE, root, outside, "scale")


def test_a_kernel_the_file_does_not_have_says_so(tmp_path: Path) -> None:
    path = tmp_path / "scale.cu"
    request = CaptureRequest(("./app",), capture_directory(path, "gone"), kernel="gone")
    outcome = capture_spec(request, SCALE, path, "gone", fake_run_capture)
    assert not outcome.ok and "no kernel 'gone'" in outcome.message, outcome.message
