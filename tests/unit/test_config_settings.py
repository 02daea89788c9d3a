"""Settings from editor data: an empty Neovim table (encoded `[]`) is no settings, not an error."""

from __future__ import annotations

from cuda_llm_lsp.config import Settings, settings_from_mapping


def test_an_empty_list_as_the_section_is_no_settings_and_no_warning() -> None:
    settings, problems = settings_from_mapping({"cudaLlm": []})
    assert problems == []
    assert settings == Settings()


def test_a_non_empty_list_is_still_reported() -> None:
    _, problems = settings_from_mapping({"cudaLlm": ["model"]})
    assert problems == ["cudaLlm settings must be an object"]


def test_demo_is_a_switch_and_a_non_boolean_keeps_the_previous_value() -> None:
    on, problems = settings_from_mapping({"cudaLlm": {"demo": True}})
    assert on.demo is True and problems == []
    off, problems = settings_from_mapping({"demo": False}, base=on)
    assert off.demo is False and problems == []
    kept, problems = settings_from_mapping({"demo": "yes"}, base=on)
    assert kept.demo is True
    assert problems == ["cudaLlm.demo: expected true or false, got 'yes'; using the default"]
