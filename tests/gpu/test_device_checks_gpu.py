"""The worker's own kernels on a real GPU: inputs generated on the device equal the numpy twin's
(`counter.values_of`), and the device's check summaries equal `compare`'s numpy summaries of the
same buffers. The test bodies are the CPU double's (tests/unit/test_device_checks.py); only the
backend differs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_llm_lsp.evaluate.worker import DRIVER_ENV, CudaBackend
from tests.unit.test_device_checks import (  # noqa: F401  (collected here with this backend)
    test_comparing_with_a_run_the_worker_does_not_keep_is_an_error,
    test_generated_inputs_are_the_numpy_twins_values,
    test_guards_and_changed_inputs_match_numpy,
    test_output_summaries_match_numpy,
    test_relative_default_atol_summaries_match_numpy,
    test_scale_aware_floor_summaries_match_numpy,
)

pytestmark = pytest.mark.gpu


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[CudaBackend]:
    monkeypatch.delenv(DRIVER_ENV, raising=False)
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path))  # compiles the check kernels afresh
    yield CudaBackend(0)
