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
