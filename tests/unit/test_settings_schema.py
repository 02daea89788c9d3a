"""One settings schema (`config.SCHEMA`): the server's checker, the CLI's flags, the extension's
`package.json` and the documentation's table must all say the same (issue 26)."""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from cuda_llm_lsp.cli import optimize, suite
from cuda_llm_lsp.config import BY_FIELD, SCHEMA, Settings, settings_from_mapping

ROOT = Path(__file__).resolve().parents[2]
#: the extension's own settings (how to start the server, tracing), not the server's
EXTENSION_ONLY = ("server.", "trace.")
#: settings a client may send only in `initializationOptions` (never stored in VS Code)
INIT_ONLY = {"apiKey"}
#: the extension's default differs from the server's on purpose: on in a trusted workspace (the
#: extension sends false in Restricted Mode), off for other clients unless they opt in
EDITOR_DEFAULTS = {"persistentPch": True}


def package_settings() -> dict[str, dict[str, Any]]:
    data = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    configuration = data["contributes"]["configuration"]
    blocks = configuration if isinstance(configuration, list) else [configuration]
    found: dict[str, dict[str, Any]] = {}
    for block in blocks:
        for name, value in block["properties"].items():
            key = name.removeprefix("cudaLlm.")
            if not key.startswith(EXTENSION_ONLY):
                found[key] = value
    return found


def test_every_setting_is_a_settings_field_and_the_checker_reads_it() -> None:
    names = {f.name for f in fields(Settings)}
    assert {entry.field for entry in SCHEMA} == names
    for entry in SCHEMA:
        if entry.low is not None:
            _, problems = settings_from_mapping({entry.key: entry.high + 1})
            assert problems and f"cudaLlm.{entry.key}" in problems[0]
        if entry.choices:
            _, problems = settings_from_mapping({entry.key: "no-such-choice"})
            assert problems and ", ".join(entry.choices) in problems[0]


def test_package_json_declares_the_schemas_settings_with_its_ranges() -> None:
    declared = package_settings()
    assert set(declared) == {e.key for e in SCHEMA} - INIT_ONLY
    defaults = Settings()
    for key, value in declared.items():
        entry = next(e for e in SCHEMA if e.key == key)
        assert value.get("minimum") == entry.low and value.get("maximum") == entry.high, key
        if entry.choices:
            expected = [None, *entry.choices] if entry.optional else list(entry.choices)
            assert value["enum"] == expected, key
        default = EDITOR_DEFAULTS.get(key, getattr(defaults, entry.field))
        if value.get("default") not in ("", None, []):  # else: "the server's own default"
            assert value["default"] == default, key


def test_the_documented_table_lists_every_setting_and_marks_the_restricted() -> None:
    row = re.compile(r"^\| `cudaLlm\.([A-Za-z.]+)`( \*\*\(restricted\)\*\*)? \|", re.MULTILINE)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    tables = [row.findall(p.read_text(encoding="utf-8")) for p in pages]
    documented = max(tables, key=len)  # the page with the settings table
    assert {key for key, _ in documented} == {e.key for e in SCHEMA}
    assert {key for key, marked in documented if marked} == {e.key for e in SCHEMA if e.restricted}


def test_the_extension_ignores_exactly_the_restricted_settings_of_an_untrusted_workspace() -> None:
    data = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    named = data["capabilities"]["untrustedWorkspaces"]["restrictedConfigurations"]
    restricted = {n.removeprefix("cudaLlm.") for n in named}
    restricted = {key for key in restricted if not key.startswith(EXTENSION_ONLY)}
    assert restricted == {e.key for e in SCHEMA if e.restricted}


def parser_of(module: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    module.add_arguments(parser)
    return parser


@pytest.mark.parametrize("module", [optimize, suite], ids=["optimize", "suite"])
def test_cli_flags_take_the_servers_ranges(module: Any) -> None:
    """`--candidates 100` was accepted where the server caps candidates at 32."""
    parser = parser_of(module)
    first = "x.cu" if module is optimize else "dir"
    base = [first, "--kernel", "k"] if module is optimize else [first]
    flags = {a.option_strings[0]: a for a in parser._actions if a.option_strings}
    checked = 0
    for entry in SCHEMA:
        if entry.flag not in flags or entry.low is None or entry.high is None:
            continue
        dest = flags[entry.flag].dest
        whole = isinstance(getattr(Settings(), entry.field), int)
        high = int(entry.high) if whole else entry.high
        assert getattr(parser.parse_args([*base, entry.flag, str(high)]), dest) == high
        for bad in (high + 1, entry.low - 1):
            with pytest.raises((SystemExit, argparse.ArgumentError)):
                parser.parse_args([*base, entry.flag, str(bad)])
        checked += 1
    assert checked >= (6 if module is optimize else 2)
    assert BY_FIELD["candidates"].high == 32
