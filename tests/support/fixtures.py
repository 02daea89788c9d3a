"""Pytest fixtures shared by the FSR tests.

Import the `*_fixture` functions into a test module; tests ask for them by their `name`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.scripted_llm import ScriptedLlmServer


@pytest.fixture(name="scripted_llm")
def scripted_llm_fixture() -> Iterator[ScriptedLlmServer]:
    """A running scripted OpenAI-compatible server; add steps with `.add(...)`."""
    with ScriptedLlmServer() as server:
        yield server
