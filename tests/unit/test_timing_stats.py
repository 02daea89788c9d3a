"""Timing statistics: median, spread, and the rule that decides when to stop sampling."""

from __future__ import annotations

import numpy as np
import pytest

from cuda_llm_lsp.evaluate import timing


def test_median_and_quantiles_match_numpy() -> None:
    rng = np.random.default_rng(0)
    for n in (1, 2, 5, 20, 101):
        x = rng.normal(1.0, 0.1, n).tolist()
        assert timing.median(x) == pytest.approx(float(np.median(x)))
        assert timing.quantile(x, 0.25) == pytest.approx(float(np.quantile(x, 0.25)))
        assert timing.quantile(x, 0.75) == pytest.approx(float(np.quantile(x, 0.75)))


def test_summarize_reports_median_iqr_spread_min_max_samples() -> None:
    t = timing.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert t.median_ms == 3.0
    assert t.spread_pct == pytest.approx(100 * (4.0 - 2.0) / 3.0)
    assert (t.min_ms, t.max_ms, t.samples) == (1.0, 5.0, 5)


def test_empty_samples_raise() -> None:
    with pytest.raises(ValueError):
        timing.median([])


def test_tight_samples_are_stable_after_the_minimum_count() -> None:
    rng = np.random.default_rng(1)
    tight = (0.3 * (1 + rng.normal(0, 0.001, 30))).tolist()
    assert timing.is_stable(tight)
    assert not timing.is_stable(tight[:10])  # fewer than MIN_SAMPLES


def test_noisy_samples_are_not_stable() -> None:
    rng = np.random.default_rng(2)
    noisy = (0.3 * (1 + rng.normal(0, 0.2, 40))).tolist()
    assert timing.median_ci_rel(noisy) > timing.TARGET_REL_CI
    assert not timing.is_stable(noisy)


def test_ci_shrinks_with_more_samples() -> None:
    rng = np.random.default_rng(3)
    x = (1 + rng.normal(0, 0.05, 4000)).tolist()
    assert timing.median_ci_rel(x[:4000]) < timing.median_ci_rel(x[:40])


def test_done_stops_on_stability_sample_cap_or_budget() -> None:
    plan = timing.Plan(budget_s=1.0, max_samples=100)
    stable = [1.0] * 35
    noisy = list(np.random.default_rng(4).uniform(0.5, 1.5, 35))
    assert timing.done([stable, stable], 0.0, plan)
    assert not timing.done([stable, noisy], 0.0, plan)  # every kernel must be stable
    assert timing.done([stable, noisy], 2.5, plan)  # budget: 1 s per kernel
    assert timing.done([[1.0] * 100, noisy * 3], 0.0, plan)  # sample cap
    assert not timing.done([[], []], 5.0, plan)
