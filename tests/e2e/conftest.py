"""The real-editor end-to-end tests: the `vscode` marker, and a screenshot of the failing step."""

from __future__ import annotations

from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "vscode: drives a real VS Code (code-server + Chromium; .ci/vscode_e2e.sh installs them)",
    )


@pytest.fixture(autouse=True)
def _one_flow(request: pytest.FixtureRequest) -> None:
    """Each module's steps are one user's session: after a failed step the rest would only time
    out."""
    failed = getattr(request.module, "FAILED_STEP", None)
    if failed is not None:
        pytest.skip(f"an earlier step failed: {failed}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    module = getattr(item, "module", None)
    if report.when in ("setup", "call") and report.failed and module is not None:
        module.FAILED_STEP = item.name  # the later steps of the flow skip (_one_flow)
    if report.when == "call" and report.failed:
        shots = getattr(module, "SCREENSHOTS", None)
        if shots is not None:
            shots.failed = True
            path = shots.take(f"FAILED-{item.name}")
            report.sections.append(
                ("screenshots", f"kept in {shots.directory} (failing step: {path})")
            )
