"""The real-world corpus: `cuda-llm check` against nvcc's verdict on files people really edit.

A corpus is a directory with a `manifest.toml` listing its files (paths relative to that
directory) with the include directories, defines and C++ standard their own builds use:

    [[file]]
    path = "llm.c/dev/cuda/adamw.cu"
    project = "llm.c"
    include_dirs = ["llm.c/dev/cuda"]
    defines = []
    std = "c++17"
    flags = ["--expt-relaxed-constexpr"]  # optional: nvcc flags of its build's dialect
    nvcc = "clean"          # written by --record: nvcc's verdict ("clean" / "error")
    ptxas_kernels = 3       # written by --record: entry functions ptxas compiled
    ptxas_registers = {"_Z5adamwPf" = 32}

`--record` compiles every file with nvcc (`-c`, host code and all, `-Xptxas -v`) and writes
the verdict back into the manifest; the default run checks every file nvcc compiles cleanly
with the fast tier (`analysis.analyze`, the engine `cuda-llm check` runs, the compile cache
off) and reports false errors (any error on an nvcc-clean file), kernels with resources
against ptxas's kernel count, and seconds per file: `syntax_*` up to NVRTC's front end (what
the editor's diagnostics wait for), `median_s`/`worst_s` with code generation too (the
resources, which follow in the background). `--include DIR` adds a directory of this machine's
environment to every file's flags, for recording and checking alike (headers a user's toolkit or
venv holds: NCCL from PyTorch's wheels), never written into the manifest. `--timeout` is each
compile's limit (the
setting's default, 10 s, shows what a busy machine does: a compile past it must be a warning,
`timeouts`, never a false error); `--jobs` checks files in parallel.

    python benchmarks/realworld_corpus.py CORPUS_DIR [--record] [--nvcc] [--jobs N]
        [--json OUT] [--only TEXT] [--timeout S] [--include DIR ...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import tomllib

_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_USED = re.compile(r"Used (\d+) registers")


@dataclass
class Entry:
    path: str
    project: str
    include_dirs: list[str]
    defines: list[str]
    std: str = "c++17"
    nvcc: str = ""
    ptxas_kernels: int = 0
    ptxas_registers: dict[str, int] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)  # `--expt-relaxed-constexpr`, ...


@dataclass
class Outcome:
    path: str
    project: str
    seconds: float  # diagnostics and resources
    errors: list[str]
    kernels: int  # kernel lines `check` gives
    with_resources: int  # of those, with resources
    registers: dict[str, int]  # instance or name -> registers
    syntax_seconds: float = 0.0  # diagnostics alone (NVRTC's front end): what the editor waits
    timeouts: int = 0  # compiles stopped at the time limit (reported as warnings)
    nvcc_seconds: float = 0.0  # the nvcc tier's compile (`--nvcc`)


def load_manifest(corpus: Path) -> list[Entry]:
    data = tomllib.loads((corpus / "manifest.toml").read_text(encoding="utf-8"))
    return [Entry(**item) for item in data.get("file", [])]


def write_manifest(corpus: Path, entries: list[Entry]) -> None:
    """The manifest written back (a flat schema: no TOML writer needed)."""
    lines = [
        "# Real-world corpus: each file with the flags its build uses and nvcc's verdict",
        "# (benchmarks/realworld_corpus.py --record writes nvcc / ptxas_*).",
        "",
    ]
    for e in entries:
        registers = ", ".join(f"{_q(k)} = {v}" for k, v in sorted(e.ptxas_registers.items()))
        lines += [
            "[[file]]",
            f"path = {_q(e.path)}",
            f"project = {_q(e.project)}",
            f"include_dirs = [{', '.join(_q(d) for d in e.include_dirs)}]",
            f"defines = [{', '.join(_q(d) for d in e.defines)}]",
            f"std = {_q(e.std)}",
            *([f"flags = [{', '.join(_q(f) for f in e.flags)}]"] if e.flags else []),
            f"nvcc = {_q(e.nvcc)}",
            f"ptxas_kernels = {e.ptxas_kernels}",
            f"ptxas_registers = {{{registers}}}",
            "",
        ]
    (corpus / "manifest.toml").write_text("\n".join(lines), encoding="utf-8")


def _q(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string


def record_one(corpus: Path, entry: Entry, arch: str, extra: tuple[str, ...] = ()) -> Entry:
    """nvcc's verdict on one file: clean or error, and the kernels ptxas compiled."""
    from cuda_llm_lsp.compile.child_env import child_env
    from cuda_llm_lsp.compile.nvcc import find_nvcc, gencode

    nvcc = find_nvcc()
    if nvcc is None:
        raise SystemExit("nvcc not found (pip install 'cuda-toolkit[nvcc]')")
    source = corpus / entry.path
    with tempfile.TemporaryDirectory(prefix="corpus-nvcc-") as tmp:
        command = [str(nvcc), "-c", "-x", "cu", str(source), "-o", str(Path(tmp) / "o.o")]
        command += [gencode(arch), f"-std={entry.std}", "-Xptxas", "-v"]
        command += [f"-I{corpus / d}" for d in entry.include_dirs]
        command += [f"-I{d}" for d in extra]
        command += [f"-D{d}" for d in entry.defines]
        command += entry.flags
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=600, env=child_env(), cwd=tmp
            )
            log, ok = done.stdout + done.stderr, done.returncode == 0
        except subprocess.TimeoutExpired:
            log, ok = "", False
    registers: dict[str, int] = {}
    current = None
    for line in log.splitlines():
        if (m := _ENTRY.search(line)) is not None:
            current = m.group(1)
        elif current is not None and (m := _USED.search(line)) is not None:
            registers[current] = int(m.group(1))
            current = None
    entry.nvcc = "clean" if ok else "error"
    entry.ptxas_kernels = len(registers)
    entry.ptxas_registers = registers
    return entry


def check_one(
    corpus: Path,
    entry: Entry,
    arch: str,
    timeout_s: int = 120,
    nvcc: bool = False,
    extra: tuple[str, ...] = (),
) -> Outcome:
    """The fast tier on one file, with the file's own flags (as `cuda-llm check` gives them);
    with `nvcc`, the nvcc tier merged over it (as `cuda-llm check --nvcc` gives it)."""
    from cuda_llm_lsp.compile.analysis import add_resources, analyze_syntax
    from cuda_llm_lsp.compile.isolated import TIMEOUT_CODE
    from cuda_llm_lsp.compile.nvcc_tier import with_nvcc
    from cuda_llm_lsp.config import Settings

    source = corpus / entry.path
    text = source.read_text(encoding="utf-8", errors="replace")
    options: dict[str, Any] = {
        "arch": arch,
        "include_paths": (*(str(corpus / d) for d in entry.include_dirs), *extra),
        "defines": tuple(entry.defines),
        "compile_timeout_s": timeout_s,
        "nvrtc_flags": tuple(entry.flags),  # nvcc-only ones reach the nvcc tier alone
    }
    if "std" in {f.name for f in fields(Settings)}:  # (absent before the --std change)
        options["std"] = entry.std
    settings = Settings(**options)
    start = time.monotonic()
    front = analyze_syntax(text, source, settings)  # what `analyze` runs, in its two stages
    syntax_seconds = time.monotonic() - start
    analysis = add_resources(front)
    seconds = time.monotonic() - start
    timeouts = sum(1 for d in analysis.diagnostics if d.code == TIMEOUT_CODE)
    nvcc_seconds = 0.0
    if nvcc:
        analysis, result = with_nvcc(analysis, settings, timeout=600)
        nvcc_seconds = result.seconds
    errors = [f"{d.line}:{d.column}: {d.message}" for d in analysis.errors]
    listed = 0
    registers: dict[str, int] = {}  # one per instance with figures (as ptxas lists them)
    infos = [*analysis.kernels, *(h.info for h in getattr(analysis, "header_kernels", ()))]
    for info in infos:
        instances = getattr(info, "instances", {})
        listed += max(1, len(instances))
        if instances:
            registers.update({e: r.registers for e, r in instances.items()})
        elif info.resources is not None:
            registers[info.name_expression or info.kernel.name] = info.resources.registers
    for library in getattr(analysis, "library_kernels", ()):
        listed += 1
        registers[library.symbol] = library.resources.registers
    return Outcome(
        entry.path, entry.project, seconds, errors, listed, len(registers), registers,
        syntax_seconds, timeouts, nvcc_seconds,
    )  # fmt: skip


def _init_worker() -> None:
    os.environ["CUDA_LLM_CACHE_DIR"] = tempfile.mkdtemp(prefix="corpus-cache-")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="directory holding manifest.toml")
    parser.add_argument("--record", action="store_true", help="record nvcc's verdicts")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only", default="", help="only paths containing this text")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per compile")
    parser.add_argument(
        "--errors-only", action="store_true", help="--record: only files nvcc failed"
    )
    parser.add_argument("--json", type=Path, help="write per-file outcomes here")
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="DIR",
        help="an include directory of this machine for every file (not written to the manifest)",
    )
    parser.add_argument(
        "--nvcc", action="store_true", help="merge the nvcc tier in (`cuda-llm check --nvcc`)"
    )
    args = parser.parse_args(argv)
    corpus = args.corpus.resolve()
    extra = tuple(str(Path(d).resolve()) for d in args.include)
    entries = load_manifest(corpus)
    chosen = [e for e in entries if args.only in e.path]
    if args.errors_only:
        chosen = [e for e in chosen if e.nvcc != "clean"]
    # spawn, not fork: a caller with threads (a test process, a server) would fork them half-held;
    # the spawned workers import this file by its module name, from its own directory
    if str(Path(__file__).resolve().parent) not in sys.path:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=max(1, args.jobs), initializer=_init_worker, mp_context=spawn
    ) as pool:
        if args.record:
            # written after each verdict, the files still waiting marked pending (""): a run
            # stopped at its time limit leaves the verdicts it has, none stale
            by_path = {e.path: e for e in entries}
            for e in chosen:
                by_path[e.path] = Entry(**{**asdict(e), "nvcc": "", "ptxas_kernels": 0,
                                           "ptxas_registers": {}})  # fmt: skip
            jobs = [pool.submit(record_one, corpus, e, args.arch, extra) for e in chosen]
            for job in jobs:
                done = job.result()
                by_path[done.path] = done
                print(f"{done.nvcc:5} {done.ptxas_kernels:3} {done.path}", flush=True)
                write_manifest(corpus, [by_path[e.path] for e in entries])
            return 0
        clean = [e for e in chosen if e.nvcc == "clean"]
        futures = [
            pool.submit(check_one, corpus, e, args.arch, args.timeout, args.nvcc, extra)
            for e in clean
        ]
        outcomes = [f.result() for f in futures]
    report = summarize(clean, outcomes)
    for outcome in outcomes:
        for error in outcome.errors[:3]:
            print(f"FALSE {outcome.path}:{error}")
    print(json.dumps(report["summary"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 1 if report["summary"]["false_errors"] else 0


_PROJECT_KEYS = (
    "files",
    "files_with_false_errors",
    "false_errors",
    "ptxas_kernels",
    "kernels_with_resources",
)


def summarize(entries: list[Entry], outcomes: list[Outcome]) -> dict[str, Any]:
    """Totals over the nvcc-clean files: false errors, kernels with resources, seconds."""
    seconds = [o.seconds for o in outcomes]
    syntax = [o.syntax_seconds for o in outcomes]
    by_path = {e.path: e for e in entries}
    equal = compared = 0
    for o in outcomes:
        nvcc_registers = sorted(by_path[o.path].ptxas_registers.values())
        ours = sorted(o.registers.values())
        if nvcc_registers and len(ours) == len(nvcc_registers):
            compared += 1
            equal += ours == nvcc_registers
    projects: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = projects.setdefault(o.project, dict.fromkeys(_PROJECT_KEYS, 0))
        row["files"] += 1
        row["files_with_false_errors"] += bool(o.errors)
        row["false_errors"] += len(o.errors)
        row["ptxas_kernels"] += by_path[o.path].ptxas_kernels
        row["kernels_with_resources"] += o.with_resources
    summary = {
        "files": len(outcomes),
        "files_with_false_errors": sum(1 for o in outcomes if o.errors),
        "false_errors": sum(len(o.errors) for o in outcomes),
        "ptxas_kernels": sum(by_path[o.path].ptxas_kernels for o in outcomes),
        "kernel_lines": sum(o.kernels for o in outcomes),
        "kernels_with_resources": sum(o.with_resources for o in outcomes),
        "files_registers_compared": compared,
        "files_registers_equal": equal,
        "median_s": round(statistics.median(seconds), 2) if seconds else 0.0,
        "worst_s": round(max(seconds), 2) if seconds else 0.0,
        "syntax_median_s": round(statistics.median(syntax), 2) if syntax else 0.0,
        "syntax_worst_s": round(max(syntax), 2) if syntax else 0.0,
        "timeouts": sum(o.timeouts for o in outcomes),
        "nvcc_median_s": round(statistics.median(o.nvcc_seconds for o in outcomes), 2)
        if outcomes
        else 0.0,
        "projects": dict(sorted(projects.items())),
    }
    return {"summary": summary, "files": [asdict(o) for o in outcomes]}


if __name__ == "__main__":
    sys.exit(main())
