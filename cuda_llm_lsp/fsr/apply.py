"""An accepted winner written into its file as one consistent change (docs/design.md [launch]).

The kernel is replaced (a dropped `extern "C"` put back); what the reply put before its kernel
(`__device__` helpers, `#define`s, `constexpr`s) goes above the spec block, so that the spec stays
directly above the kernel, a name the file already uses dropped (the file has the identical
definition), renamed or refused (`fsr.clashes`); what came after the kernel is never written.
What is written must be device code with nothing hidden (`source.device_only`: checked when the
candidate was cleaned, and again here). With a launch of its own, the spec's `grid` / `block` /
`smem` and every launch site of the kernel in the file (`source.launch_sites.rewrite_launches`)
are rewritten in the same text; a site that cannot be rewritten safely is left as it is and named
in `notes` with what to write by hand. `write_check` then compiles the whole edited file with
nvcc where it is available and compares its host object with the original's: no new host
symbol, no global constructor (`compile.host_object`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cuda_llm_lsp.compile.host_object import (
    Built,
    HostToolsUnavailable,
    build_host_object,
    new_host_code,
)
from cuda_llm_lsp.compile.nvcc import NvccUnavailable, find_nvcc
from cuda_llm_lsp.compile.nvcc_tier import nvcc_flags
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.fsr.clashes import HelperClash, merge_helpers
from cuda_llm_lsp.source.device_only import device_names, reply_refusal
from cuda_llm_lsp.source.kernels import Kernel, find_kernels
from cuda_llm_lsp.source.launch_sites import rewrite_launches
from cuda_llm_lsp.source.signature import restore_linkage
from cuda_llm_lsp.source.spec import TestSpec, parse_spec
from cuda_llm_lsp.source.spec.launch import LaunchConfig
from cuda_llm_lsp.source.text import offset_of
from cuda_llm_lsp.source.untrusted import code_only, hidden_characters


@dataclass(frozen=True)
class AppliedWinner:
    """The whole file after the change, and what the user must still change by hand."""

    text: str
    notes: tuple[str, ...] = ()  # launch sites left as they were, each with its new launch
    renamed: tuple[tuple[str, str], ...] = ()  # helper names the file uses: (reply's, written)


class NotApplicable(ValueError):
    """The winner cannot be written into this file as one consistent change (says why)."""


def winner_text(
    file_text: str, kernel_name: str, source: str, launch: LaunchConfig | None = None
) -> AppliedWinner:
    """`file_text` with the winner `source` (a cleaned candidate) in place of `kernel_name`, its
    helpers above the spec, its host code dropped, and its own `launch` (if any) in the spec and
    at every launch site. Raises `NotApplicable`."""
    found = [k for k in find_kernels(file_text) if k.name == kernel_name]
    if len(found) != 1:
        raise NotApplicable(f"kernel {kernel_name} not found once in the file")
    original = found[0]
    theirs = [k for k in find_kernels(source) if k.name == kernel_name]
    if len(theirs) != 1:
        raise NotApplicable(f"kernel {kernel_name} not found once in the winner's text")
    kernel_start = offset_of(source, theirs[0].span.start)
    kernel_end = offset_of(source, theirs[0].span.end)
    refused = reply_refusal(source[:kernel_end])  # again, on what is written (defence in depth)
    if refused is not None:
        raise NotApplicable(refused)
    start, end = offset_of(file_text, original.span.start), offset_of(file_text, original.span.end)
    block = original.spec
    above = offset_of(file_text, block.span.start) if block is not None else start
    try:  # a helper's name the file uses elsewhere: dropped if identical, else renamed
        merged = merge_helpers(
            file_text,
            (start, end),
            above,
            source[:kernel_start].strip(),  # a stripped launch block leaves a blank line
            restore_linkage(original, source[kernel_start:kernel_end]),
            kernel_name,
        )
    except HelperClash as exc:
        raise NotApplicable(str(exc)) from exc
    helpers, kernel_text = merged.helpers, merged.kernel
    edits: list[tuple[int, int, str]] = []  # (start, end, new text)
    notes: list[str] = []
    if helpers.strip():
        edits.append((above, above, helpers + "\n\n"))
    if launch is not None:
        spec = _spec(original, file_text)
        if launch.tunables is not None and launch.tunables is not spec.tunables:
            raise NotApplicable("a launch block declaring tunables is not written into the file")
        if block is None:
            raise NotApplicable(f"{kernel_name} has no spec block to carry the new launch")
        b_start, b_end = (
            offset_of(file_text, block.span.start),
            offset_of(file_text, block.span.end),
        )
        edits.append((b_start, b_end, _spec_with(file_text[b_start:b_end], spec, launch)))
        rewrite = rewrite_launches(file_text, spec, launch)
        for edit in rewrite.edits:
            edits.append(
                (
                    offset_of(file_text, edit.span.start),
                    offset_of(file_text, edit.span.end),
                    edit.new_text,
                )
            )
        notes.extend(r.message for r in rewrite.refusals)
    launches = "\n".join(text for at, _e, text in edits if at != above)  # spec, launch sites
    below = file_text[end:] + "\n" + launches
    ended = _scoped_macros(helpers + "\n" + kernel_text, below)
    edits.append((start, end, kernel_text + "".join(f"\n#undef {name}" for name in ended)))
    return AppliedWinner(_apply(file_text, edits), tuple(notes), merged.renamed)


_DEFINED = re.compile(r"(?m)^[ \t]*#[ \t]*define[ \t]+(\w+)")


def _scoped_macros(written: str, below: str) -> list[str]:
    """The macros the reply's `written` text defines that the file's text `below` the kernel
    (and the launch it is given) does not name: `#undef`ed after the kernel, so they end there.
    Left defined, a reply's `#define cudaGetLastError() cudaSuccess` reached the file's host code
    through a header's macro (`CHECK()` after the kernel): no name of the file's text to clash
    with, no new host symbol for the proof."""
    used = set(re.findall(r"\w+", code_only(below)))
    names = dict.fromkeys(_DEFINED.findall(code_only(written)))
    return [name for name in names if name not in used]


def _spec(kernel: Kernel, file_text: str) -> TestSpec:
    spec, errors = parse_spec(kernel, file_text)
    if spec is None:
        first = errors[0].message if errors else "no spec"
        raise NotApplicable(f"the kernel's spec does not parse: {first}")
    return spec


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    """The edits, which never overlap, applied from the end (an insertion before a replacement
    at the same offset)."""
    ordered = sorted(edits, key=lambda e: (e[0], e[1]), reverse=True)
    for (start, end, _), (next_start, _, _) in zip(ordered[1:], ordered, strict=False):
        if end > next_start and not (start == end == next_start):
            raise NotApplicable("the change's edits overlap (a launch site inside the kernel?)")
    for start, end, new in ordered:
        text = text[:start] + new + text[end:]
    return text


def _spec_with(block_text: str, spec: TestSpec, launch: LaunchConfig) -> str:
    """The spec comment with `grid` / `block` / `smem` set to the launch's (other lines kept)."""
    values = {
        "grid": _dims(launch.grid),
        "block": _dims(launch.block),
        "smem": _scalar(launch.smem),
    }
    old = {"grid": spec.grid, "block": spec.block, "smem": spec.smem}
    new = {"grid": launch.grid, "block": launch.block, "smem": launch.smem}
    for key, value in values.items():
        if old[key] == new[key]:
            continue
        line = re.compile(rf"^(?P<indent>[ \t]*){key}[ \t]*=(?P<rest>.*)$", re.MULTILINE)
        match = line.search(block_text)
        if match is None:
            if key != "smem":
                raise NotApplicable(f"the spec has no `{key} =` line to rewrite")
            anchor = line.pattern.replace("smem", "block")
            after = re.search(anchor, block_text, re.MULTILINE)
            if after is None:
                raise NotApplicable("the spec has no `block =` line to put `smem` after")
            at = after.end()
            block_text = (
                f"{block_text[:at]}\n{after.group('indent')}smem = {value}{block_text[at:]}"
            )
            continue
        rest = match.group("rest")
        if rest.count("[") != rest.count("]") or rest.count('"') % 2:
            raise NotApplicable(f"the spec's `{key}` spans several lines: rewrite it by hand")
        comment = re.search(r"\s#.*$", rest)
        tail = comment.group(0) if comment and rest.count('"') == 0 else ""
        new_line = f"{match.group('indent')}{key} = {value}{tail}"
        block_text = block_text[: match.start()] + new_line + block_text[match.end() :]
    return block_text


def _scalar(expr: str) -> str:
    return expr if re.fullmatch(r"\d+", expr) else json.dumps(expr)


def _dims(dims: Sequence[str]) -> str:
    return _scalar(dims[0]) if len(dims) == 1 else "[" + ", ".join(map(_scalar, dims)) + "]"


SKIPPED = (
    "the nvcc build check was skipped ({why}): only the source check of what a reply may "
    "add applied"
)
UNPROVEN = (
    "no build proves that it adds no host code ({why}), and it adds more than the kernel's body "
    "(helpers, a launch)"
)


@dataclass(frozen=True)
class WriteCheck:
    """Whether an edited file may be written: why not, or a note on what was not checked.
    `unproven`: nothing was proven by a build and the change adds more than the kernel's body;
    the write asks first (`--write-unproven`, the editor's "Apply anyway"), saying `unproven`."""

    refused: str | None = None
    note: str = ""  # e.g. the nvcc build check was skipped, and why
    unproven: str = ""


def write_check(
    edited: str,
    original: str,
    path: Path | None,
    settings: Settings | None = None,
) -> WriteCheck:
    """The last check before a winner is written (`--write`, Accept): the change holds no hidden
    characters, and where nvcc is available the edited whole file builds, with the flags the nvcc
    tier uses (the project's and the settings': `compile.nvcc_tier.nvcc_flags`), and its host
    object has nothing new the original's has not but what device code explains
    (`compile.host_object.new_host_code`: no new host symbol or use of one, no start-up entry).
    The original is built with the reply's `#include`s first, so a toolkit header's own host
    code is not taken for the reply's."""
    added = _added(original, edited)
    hidden = hidden_characters(added, ascii_code=False)
    if hidden:
        return WriteCheck(
            "the change holds hidden characters: " + "; ".join(h.describe() for h in hidden[:5])
        )

    def skipped(why: str) -> WriteCheck:
        beyond = _outside_kernels(edited) != _outside_kernels(original)
        return WriteCheck(
            note=SKIPPED.format(why=why), unproven=UNPROVEN.format(why=why) if beyond else ""
        )

    if find_nvcc() is None:
        return skipped("no nvcc here")
    flags = nvcc_flags(settings or Settings(), path)

    def build(text: str) -> Built:
        return build_host_object(
            text,
            path,
            include_paths=flags.include_paths,
            arch=flags.arch,
            defines=flags.defines,
            std=flags.std,
            extra_flags=flags.extra_flags,
        )

    includes = [
        line
        for line in added.splitlines()
        if re.match(r"\s*#\s*include\b", line) and line not in original
    ]
    # the toolkit headers' own host code (CUB's `<iostream>`) is not the reply's
    baseline = "\n".join(includes) + "\n" + original if includes else original
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:  # two nvcc runs at once: Accept waits
            edited_build, baseline_build = pool.submit(build, edited), pool.submit(build, baseline)
            built, before = edited_build.result(), baseline_build.result()
        if before.host is None and baseline is not original:
            before = build(original)
    except NvccUnavailable:
        return skipped("no nvcc here")
    except HostToolsUnavailable as exc:
        return skipped(str(exc))
    if before.host is None:  # the original does not build: nvcc proves nothing about the edit
        return skipped(
            "the original file does not build with nvcc and its flags: "
            + before.result.message(3).replace("\n", "; ")
        )
    if built.host is None:
        return WriteCheck(f"the edited file does not build with nvcc:\n{built.result.message()}")
    found = new_host_code(before.host, built.host, *device_names(edited))
    found.extend(_made_host(built.result.log, before.result.log))
    if found:
        return WriteCheck(
            "the edited file's host object has host code the original's has not: "
            + "; ".join(found[:5])
        )
    return WriteCheck()


#: nvcc's word that a `__device__` function redeclares a host one (`getchar`, `getenv` of the
#: file's host headers) and is built for the host too: its stub then takes the C library's name
#: for the whole program.
_REDECLARED_HOST = re.compile(r'function\("([^"]+)"\) redeclared with __device__')


def _made_host(log: str, original_log: str) -> list[str]:
    """The functions nvcc says the edit made `__host__ __device__` that the original had not."""
    before = set(_REDECLARED_HOST.findall(original_log))
    return [
        f"it redeclares the host function `{name}` as `__device__`, which nvcc builds for the "
        "host too (the program's calls to it would reach the edit's copy)"
        for name in dict.fromkeys(_REDECLARED_HOST.findall(log))
        if name not in before
    ]


def build_check(
    edited: str, original: str, path: Path | None, settings: Settings | None = None
) -> str | None:
    """Why the edited file may not be written (`write_check`), or None."""
    return write_check(edited, original, path, settings).refused


_COMMENT_OR_LITERAL = re.compile(
    r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL
)


def _outside_kernels(text: str) -> str:
    """`text` without its kernels' definitions and its comments: what a change beyond kernel
    bodies changes in code (a tuned spec's reordered list, a comment, adds none)."""
    spans = [
        (offset_of(text, k.span.start), offset_of(text, k.span.end)) for k in find_kernels(text)
    ]
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return _COMMENT_OR_LITERAL.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", text)


def _added(old: str, new: str) -> str:
    """The text `new` has in place of `old`'s, between their common prefix and suffix."""
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return new[prefix : len(new) - suffix]


@dataclass(frozen=True)
class Region:
    """One replacement turning the old file into the new: `old[start:end]` becomes `text`."""

    start: int
    end: int
    text: str


def changed_region(old: str, new: str, keep: tuple[int, int]) -> Region:
    """The smallest single replacement from `old` to `new` that contains `old[keep[0]:keep[1]]`
    (the kernel: an editor suggestion is anchored on it). One edit, so one undo step."""
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    start = min(prefix, keep[0])
    end = max(len(old) - suffix, keep[1])
    return Region(start, end, new[start : len(new) - (len(old) - end)])
