"""`cuda-llm check FILE...`: compile diagnostics and per-kernel resources (CLI contract,
docs/design.md).

Text: `FILE:LINE:COL: error|warning: MESSAGE` (1-based) and one resource line per kernel;
`--format json` prints exactly the contract's keys. Exit status 1 when any error was found
(a compile that crashed NVRTC is one, at 1:1) or a compile ran past `--compile-timeout` (a
warning, "diagnostics skipped": it says nothing about the code, but the file went unchecked),
2 when a FILE
was missing or refused (not a regular file: a FIFO, a device such as /dev/zero, a directory; or
over the size limit: reported at 1:1, the other files still checked), `--arch` names no
architecture NVRTC knows, or NVRTC itself cannot be loaded. A file without kernels (a header of
helpers) gets one line saying so, with its error and warning counts.
Compiles run in compile processes (`compile.isolated`), so no file can crash or hang the CLI.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from cuda_llm_lsp.cli import arch_argument
from cuda_llm_lsp.cli.common import error, read_source
from cuda_llm_lsp.compile.types import Diagnostic, NvrtcUnavailable, Resources
from cuda_llm_lsp.config import STDS, Settings
from cuda_llm_lsp.engine.analysis import (
    DEFAULT_TIMEOUT_S,
    TIMEOUT_CODE,
    CompiledKernel,
    FileAnalysis,
    KernelInfo,
    NvccUnavailable,
    analyse,
    close_analysis,
    define_problem,
    include_dir_problem,
    nvcc_missing,
    with_nvcc,
)
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.launch_facts import launch_disagreements
from cuda_llm_lsp.source.spec import parse_spec

_SHOWN = ("error", "warning")  # the contract's severities; compiler notes stay in the editor
NVCC_TIMEOUT_S = float(Settings().nvcc_timeout_s)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help=".cu / .cuh files to check")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--arch", default=None, type=arch_argument,
                        help="sm_XY (default: the local GPU's, else sm_90)")  # fmt: skip
    parser.add_argument(
        "-I", "--include-path", action="append", default=[], metavar="DIR",
        help="extra include directory (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "-D", "--define", action="append", default=[], metavar="NAME[=VALUE]",
        help="preprocessor definition (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--std", choices=STDS, default=None,
        help="C++ dialect of device code (default: the project's, else c++17)",
    )  # fmt: skip
    parser.add_argument(
        "-p", "--build-dir", default=None, metavar="BUILD_DIR",
        help="directory holding compile_commands.json (default: the file's directory or an "
        "ancestor, or its build/; then compile_flags.txt)",
    )  # fmt: skip
    parser.add_argument(
        "--nvcc", action=argparse.BooleanOptionalAction, default=None,
        help="compile each file whole with nvcc (host code too) and show nvcc's verdict: the "
        "default wherever nvcc and a host compiler are found; --nvcc fails (exit 2) without "
        "them, --no-nvcc runs the fast check alone",
    )  # fmt: skip
    parser.add_argument(
        "--nvcc-timeout", type=float, default=NVCC_TIMEOUT_S, metavar="S",
        help=f"seconds nvcc's whole-file compile may take; past it a warning says so and the "
        f"fast check's diagnostics are shown (default {NVCC_TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--compile-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
        help=f"seconds one compile may take before it is stopped (default {DEFAULT_TIMEOUT_S:g})",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    finally:
        close_analysis()  # no compile process outlives the command


def _run(args: argparse.Namespace) -> int:
    bad_options = [f"-D {d!r}: {p}" for d in args.define if (p := define_problem(d))] + [
        f"-I {d!r}: {p}" for d in args.include_path if (p := include_dir_problem(d))
    ]  # the same rules as the editor's settings (compile.flags); the user's own: trusted
    if bad_options:
        return error("check", "; ".join(bad_options), 2, args.format == "json")
    settings = Settings(
        arch=args.arch,
        include_paths=tuple(args.include_path),
        defines=tuple(args.define),
        std=args.std,
        compile_commands_dir=args.build_dir,
        compile_timeout_s=max(1, min(600, round(args.compile_timeout))),
        nvcc_timeout_s=max(1, min(3600, round(args.nvcc_timeout))),
    )
    use_nvcc = args.nvcc
    if use_nvcc is None:  # the default: nvcc is the arbiter wherever it can run
        missing = nvcc_missing()
        use_nvcc = missing is None
        if missing is not None:
            print(f"cuda-llm check: the fast check alone: {missing}", file=sys.stderr)
    diagnostics: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    failed = refused = False
    for name in args.files:
        text, problem = read_source(name)
        if problem is not None:
            refused = failed = True  # a missing or unreadable FILE is a usage problem too
            unread = Diagnostic(1, 1, 1, 1, "error", problem)
            diagnostics.append(_diagnostic_json(name, unread))
            if args.format == "text":
                print(f"{_one_line(name)}:1:1: error: {problem}")
            continue
        try:
            analysis = analyse(text, Path(name), settings)
        except NvrtcUnavailable as exc:
            print(f"cuda-llm check: {exc}", file=sys.stderr)
            return 2
        if use_nvcc:
            try:
                analysis, _ = with_nvcc(analysis, settings, settings.nvcc_timeout_s)
            except NvccUnavailable as exc:
                print(f"cuda-llm check: --nvcc: {exc}", file=sys.stderr)
                return 2
        # a compile stopped at --compile-timeout is a warning (it says nothing about the code)
        # but the file was not checked: the command does not pass it
        unfinished = any(d.code == TIMEOUT_CODE for d in analysis.diagnostics)
        failed = failed or bool(analysis.errors) or unfinished
        launch_warnings = _launch_warnings(text)
        file_diagnostics = [
            _diagnostic_json(name, d)
            for d in (*analysis.diagnostics, *launch_warnings)
            if d.severity in _SHOWN
        ]
        file_kernels = [
            _kernel_json(name, info, instance)
            for info in analysis.kernels
            for instance in _instances(info)
        ]
        file_kernels += [
            _kernel_json(h.header, h.info, instance)
            for h in analysis.header_kernels
            for instance in _instances(h.info)
        ]
        file_kernels += [_library_json(name, k) for k in analysis.library_kernels]
        diagnostics.extend(file_diagnostics)
        kernels.extend(file_kernels)
        if args.format == "text":
            _print_text(_one_line(name), analysis)
            for d in launch_warnings:
                print(f"{_one_line(name)}:{d.line}:{d.column}: {d.severity}: {d.message}")
    if args.format == "json":
        print(json.dumps({"diagnostics": diagnostics, "kernels": kernels}, indent=2))
    return 2 if refused else 1 if failed else 0


def _launch_warnings(text: str) -> list[Diagnostic]:
    """A spec whose launch is not the file's own (its launch site, `__launch_bounds__`):
    warnings at the spec's lines (issue 39). Here, not in the analysis the editor runs on each
    edit: they read the whole file's launch sites and allocations."""
    found: list[Diagnostic] = []
    try:
        for kernel in find_kernels(text):
            if kernel.spec is None:
                continue
            spec, _ = parse_spec(kernel, text)
            if spec is None:
                continue
            for w in launch_disagreements(kernel, spec, text):
                s, e = w.span.start, w.span.end
                found.append(
                    Diagnostic(s.line + 1, s.column + 1, e.line + 1, e.column + 1, w.severity,
                               w.message)
                )  # fmt: skip
    except Exception:  # a check of our own must never cost the user the compile's findings
        return []
    return found


def _message(d: Diagnostic) -> str:
    if d.code and d.code[:1].isdigit():
        return f"{d.message} [#{d.code}]"
    return d.message


def _diagnostic_json(name: str, d: Diagnostic) -> dict[str, Any]:
    return {
        "file": name,
        "line": d.line,
        "column": d.column,
        "end_line": d.end_line,
        "end_column": d.end_column,
        "severity": d.severity,
        "message": _message(d),
    }


def _instances(info: KernelInfo) -> list[str | None]:
    """One entry per instantiation with figures (a template launched several ways), else one."""
    if info.kernel.is_template and len(info.instances) > 1:
        return list(info.instances)
    return [None]


def _kernel_json(name: str, info: KernelInfo, instance: str | None = None) -> dict[str, Any]:
    r = info.instances.get(instance) if instance else info.resources
    return {
        "file": name,
        "name": info.kernel.name,
        # the instantiation the resources are for (`scale<float>`); null for a non-template
        "instance": (instance or info.name_expression) if info.kernel.is_template else None,
        "line": info.kernel.name_span.start.line + 1,
        "registers": r.registers if r else None,
        "spill_stores": r.spill_stores if r else None,
        "spill_loads": r.spill_loads if r else None,
        "shared_bytes": r.shared_bytes if r else None,
        "stack_bytes": r.stack_bytes if r else None,
    }


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _one_line(name: str) -> str:
    """`name` for a `FILE:LINE:COLUMN:` line: a control character (a line break in a file
    name) shown as `<U+000A>`, so that each problem stays on its own line."""
    return _CONTROL.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", name)


def _print_text(name: str, analysis: FileAnalysis) -> None:
    for d in analysis.diagnostics:
        if d.severity in _SHOWN:
            print(f"{name}:{d.line}:{d.column}: {d.severity}: {_message(d)}")
    if analysis.nvcc_note:  # which compiler judged: nvcc's verdict, merged over the fast tier's
        print(f"{name}: {analysis.nvcc_note}")
    if (
        not analysis.kernels and not analysis.header_kernels
    ):  # a header of helpers: say it was checked, not nothing at all
        counts = [sum(1 for d in analysis.diagnostics if d.severity == s) for s in _SHOWN]
        print(f"{name}: no kernels; {_count(counts[0], 'error')}, {_count(counts[1], 'warning')}")
    for h in analysis.header_kernels:  # kernels of its headers that the file instantiates
        for instance in _instances(h.info):
            label = instance or h.info.name_expression or h.info.kernel.name
            r = h.info.instances.get(instance) if instance else h.info.resources
            where = f"{name}:{h.include_line}: kernel {label} (in {h.header}:"
            where += f"{h.info.kernel.name_span.start.line + 1})"
            print(f"{where}: {_figures(r) if r else h.info.symbol_note or 'resources unknown'}")
    for info, instance in ((i, n) for i in analysis.kernels for n in _instances(i)):
        line = info.kernel.name_span.start.line + 1
        label = instance or info.name_expression or info.kernel.name
        r = info.instances.get(instance) if instance else info.resources
        if r is None:
            if info.timed_out:  # its code generation passed the limit: the note says so
                note = info.symbol_note
            elif analysis.compile is None:  # not compiled: the warning above says why
                note = "resources unknown (not compiled)"
            elif not analysis.compile.ok:
                note = "resources unknown (the file did not compile)"
            else:
                note = info.symbol_note
            print(f"{name}:{line}: kernel {label}: {note}")
            continue
        print(f"{name}:{line}: kernel {label}: {_figures(r)}")
    for k in analysis.library_kernels:  # nvcc's: kernels of libraries the file instantiates
        print(f"{name}: library kernel {k.name}: {_figures(k.resources)}")


def _library_json(name: str, kernel: CompiledKernel) -> dict[str, Any]:
    r = kernel.resources
    return {
        "file": name,
        "name": kernel.name,
        "instance": None,
        "library": True,  # nvcc compiled it; no definition in the file or its headers
        "line": None,
        "registers": r.registers,
        "spill_stores": r.spill_stores,
        "spill_loads": r.spill_loads,
        "shared_bytes": r.shared_bytes,
        "stack_bytes": r.stack_bytes,
    }


def _figures(r: Resources) -> str:
    return (
        f"{r.registers} registers, {r.spill_stores} bytes spill stores, {r.spill_loads} bytes "
        f"spill loads, {r.shared_bytes} bytes shared, {r.stack_bytes} bytes stack"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
