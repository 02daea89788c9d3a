"""A seed means the same inputs everywhere: the sanitizer's, the profiler's and the vendor
baselines' host arrays are the values the evaluator's worker generates on the device
(`counter`'s numpy twin of `cl_generate`), not numpy's own generator."""

from __future__ import annotations

import numpy as np

from cuda_llm_lsp.evaluate import sanitizer
from cuda_llm_lsp.evaluate.counter import Generated, values_of
from cuda_llm_lsp.evaluate.inputs import case_rng, case_sources, host_inputs, make_inputs
from cuda_llm_lsp.evaluate.protocol import RunRequest
from cuda_llm_lsp.evaluate.types import KernelBinary
from tests.unit.test_inputs import spec_and_case


def test_host_inputs_are_the_values_the_worker_generates() -> None:
    spec, case = spec_and_case()
    sources = case_sources(spec, case, seed=77)
    arrays = host_inputs(spec, case, seed=77)
    assert set(arrays) == {"x", "y"}
    for name, source in sources.items():
        assert isinstance(source, Generated)
        assert np.array_equal(arrays[name], values_of(source, "float32", 1000))
    assert 4.5 < float(arrays["y"].mean()) < 5.5  # the spec's normal(5, 0.1)
    old = make_inputs(spec, case, case_rng(77, case.index))
    assert not np.array_equal(arrays["x"], old["x"])  # not numpy's generator
    assert not np.array_equal(arrays["x"], host_inputs(spec, case, seed=78)["x"])


def test_the_sanitizer_runs_the_evaluators_inputs_for_its_seed() -> None:
    spec, case = spec_and_case()
    binary = KernelBinary("k", "k", b"FAKE:k", "sm_90")
    requests = sanitizer._requests(binary, spec, [case], 77, None)
    [run] = [r for r in requests if isinstance(r, RunRequest)]
    uploaded = {b.name: b.data for b in run.launch.buffers if b.data is not None}
    expected = host_inputs(spec, case, seed=77)
    assert uploaded == {name: a.tobytes() for name, a in expected.items()}
