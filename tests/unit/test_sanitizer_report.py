"""compute-sanitizer output -> the short report the FSR loop feeds back (no GPU needed)."""

from __future__ import annotations

from cuda_llm_lsp.evaluate.sanitizer import _has_errors, _trim

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at twice+0xe0 in input.cu:12
=========     by thread (0,0,0) in block (0,0,0)
=========     Access to 0x7feb78a445c4 is out of bounds
=========     and is 279,489 bytes after the nearest allocation at 0x7feb78a00200 of size 4 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame:  [0x55b15] in cydriver.cpython-312-x86_64-linux-gnu.so
=========         Host Frame: _launch in worker.py:259
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) on CUDA API call to cuStreamQuery.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: sync in worker.py:117
=========
========= ERROR SUMMARY: 2 errors
op: fault: kernel execution: CUDA error 719
"""

CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
RACE_CLEAN = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
RACE = "========= RACECHECK SUMMARY: 10 hazards displayed (10 errors, 0 warnings)\n"


def test_report_keeps_the_findings_and_drops_banner_and_host_frames() -> None:
    text = _trim(MEMCHECK)
    lines = text.splitlines()
    assert lines[0] == "Invalid __global__ read of size 4 bytes"
    assert "at twice+0xe0 in input.cu:12" in lines
    assert (
        "and is 279,489 bytes after the nearest allocation at 0x7feb78a00200 of size 4 bytes"
        in (lines)
    )
    assert not any("Host Frame" in line or "backtrace" in line for line in lines)
    assert "ERROR SUMMARY: 2 errors" in lines


def test_error_counts() -> None:
    assert _has_errors(MEMCHECK)
    assert not _has_errors(CLEAN)
    assert not _has_errors(RACE_CLEAN)
    assert _has_errors(RACE)
