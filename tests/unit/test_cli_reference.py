"""docs/cli.md against the parsers: every flag of every subcommand (and of `cuda-llm-lsp`) is in
its section of the reference and nothing else is, and the exit codes are the ones the
subcommands use, 130 included. Regenerate: `python -m cuda_llm_lsp.cli.reference --write
docs/cli.md`."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from cuda_llm_lsp.cli import SUBCOMMANDS, reference

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def _section(title: str) -> str:
    """The text block of `### title` in the generated reference."""
    found = re.search(rf"^### `{re.escape(title)}`\n\n```text\n(.*?)\n```", DOC, re.M | re.S)
    assert found, f"docs/cli.md has no reference section for {title!r}"
    return found[1]


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {flag for action in parser._actions for flag in action.option_strings}


def _documented(block: str) -> set[str]:
    # the usage lines and the options' first column name every flag; help text may quote others
    names: set[str] = set()
    for line in block.splitlines():
        stripped = line.strip()
        if line.startswith("usage:") or (line.startswith(" ") and "[" in stripped[:1]):
            names |= set(FLAG.findall(line))
        elif re.match(r"^  -", line):
            column = re.split(r"\s{2,}", line.strip())[0]
            names |= set(FLAG.findall(column))
    return names


@pytest.mark.parametrize("name", list(SUBCOMMANDS))
def test_every_flag_of_the_subcommand_is_in_the_reference_and_no_other(name: str) -> None:
    parser = dict(reference.subcommand_parsers())[name]
    block = _section(f"cuda-llm {name}")
    missing = _flags(parser) - _documented(block)
    extra = _documented(block) - _flags(parser)
    assert not missing and not extra, (
        f"docs/cli.md and `cuda-llm {name} --help` disagree: missing {sorted(missing)}, "
        f"stale {sorted(extra)}; run `python -m cuda_llm_lsp.cli.reference --write docs/cli.md`"
    )


def test_the_server_flags_are_in_the_reference() -> None:
    block = _section("cuda-llm-lsp")
    assert _flags(reference.server_parser()) == _documented(block)


def test_the_reference_is_what_the_generator_writes_today() -> None:
    """Also the help texts: only where argparse formats as the generating Python did."""
    generated = reference.render()
    start = DOC.index(reference.BEGIN)
    end = DOC.index(reference.END) + len(reference.END) + 1
    if "options:" not in generated:  # argparse < 3.10 words the help differently
        pytest.skip("this Python's argparse formats help differently")
    assert DOC[start:end] == generated, (
        "docs/cli.md is stale: run `python -m cuda_llm_lsp.cli.reference --write docs/cli.md`"
    )


def test_exit_codes_match_the_subcommands_and_include_130() -> None:
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", DOC, re.M))
    assert {int(code) for code in table} == set(reference.EXIT_CODES)
    assert 130 in reference.EXIT_CODES
    used: set[int] = set()
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"cuda_llm_lsp.cli.{name}")
        used |= {
            value
            for key, value in vars(module).items()
            if key.startswith("EXIT_") and isinstance(value, int)
        }
    assert used <= set(reference.EXIT_CODES), used - set(reference.EXIT_CODES)


def test_the_reference_says_bench_prints_a_draft_spec() -> None:
    assert "prints\n  a **draft spec**" in DOC or "a **draft spec**" in DOC
