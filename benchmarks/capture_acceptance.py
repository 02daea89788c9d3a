"""Issue 39's acceptance, measured: other people's real programs, captured, specced and benched.

For every program (Thrust's and CUTLASS's own examples, from the pinned archives of
`tests/data/realworld/sources.toml`: nothing here was written on this project) it

1. builds the program with nvcc as its own build would (`-arch=sm_90`, their include dirs), all
   programs in parallel, each under a timeout;
2. for each `__global__` kernel defined in the program's own source (found by our parser):
   `cuda-llm capture --kernel <its mangled prefix> --slowest -- PROGRAM ARGS` into
   `.cuda-llm/captures/<kernel>/` beside the source, then `cuda-llm spec FILE --from-capture DIR
   --kernel K --write`, then `cuda-llm bench FILE --kernel K` on the spec as written (the
   original first reproducing the captured outputs on the captured inputs);
3. for a program whose kernels all live in a library (Thrust/CUB templates: no source in the
   program): one `cuda-llm capture --slowest` (any kernel), counted apart: those kernels are
   not the program's own and not in the rate's denominator (the issue: "their kernels");
4. optionally (`--optimize N`) one round of `cuda-llm optimize` on N kernels that benched, with a
   scripted local OpenAI-compatible server replying with the original kernel: the loop runs
   on the captured data (baseline and candidate both judged on it).

The rate is passed / own kernels the program launched (a kernel defined but never launched by
the program's default run is reported, and not counted). Per-kernel outcomes and the rate go
to OUT/capture_acceptance.json and OUT/capture_acceptance.md.

    python benchmarks/capture_acceptance.py --fetch .corpus          # here: the archives only
    python benchmarks/capture_acceptance.py --corpus .corpus --out OUT [--optimize 2]  # GPU
    python benchmarks/capture_acceptance.py --corpus .corpus --out OUT --only thrust-saxpy

Without a GPU every capture ends as a per-kernel outcome (the capture's own message); the
script never crashes on a program's failure. The whole run has a deadline (`--budget`):
kernels not started by then are "skipped".
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for where in (str(HERE), str(ROOT)):
    if where not in sys.path:
        sys.path.insert(0, where)
import realworld_fetch  # noqa: E402  (a sibling script, not a package)

from cuda_llm_lsp.source.kernels import Kernel, find_kernels  # noqa: E402
from cuda_llm_lsp.source.text import offset_of  # noqa: E402

SOURCES = ("thrust", "cub", "cutlass")  # the archives carried (sources.toml pins them)
THRUST_EX = "thrust/usr/share/doc/libthrust-dev/examples"
CUTLASS = "cutlass/cutlass_library/source"
CUTLASS_EX = f"{CUTLASS}/examples"
THRUST_INC = ("thrust/usr/include", "cub/usr/include", THRUST_EX)
CUTLASS_INC = (f"{CUTLASS}/include", f"{CUTLASS}/tools/util/include", f"{CUTLASS_EX}/common")


@dataclass(frozen=True)
class Program:
    name: str
    source: str  # relative to the corpus
    includes: tuple[str, ...]
    args: tuple[str, ...] = ()
    arch: str = "sm_90"
    flags: tuple[str, ...] = ()


def _thrust(name: str, sub: str = "") -> Program:
    where = f"{THRUST_EX}/{sub}" if sub else THRUST_EX
    return Program(f"thrust-{name}", f"{where}/{name}.cu", THRUST_INC)


def _cutlass(name: str, path: str, args: tuple[str, ...] = (), arch: str = "sm_90") -> Program:
    return Program(
        f"cutlass-{name}",
        f"{CUTLASS_EX}/{path}",
        CUTLASS_INC,
        args,
        arch,
        ("--expt-relaxed-constexpr",),
    )


_THRUST_NAMES = (
    "basic_vector",
    "saxpy",
    "sum",
    "sort",
    "histogram",
    "norm",
    "monte_carlo",
    "bounding_box",
    "word_count",
    "summary_statistics",
    "transform_iterator",
    "stream_compaction",
    "set_operations",
    "weld_vertices",
    "run_length_encoding",
    "dot_products_with_zip",
)
_MNK = ("1024", "1024", "512")
PROGRAMS: tuple[Program, ...] = (
    # Thrust 1.17.2's examples: small complete programs; their kernels are Thrust's and CUB's
    *(_thrust(n) for n in _THRUST_NAMES),
    _thrust("async_reduce", "cuda"),  # its own __global__ (a template over iterators)
    # CUTLASS 4.2's examples and CuTe tutorials with kernels of their own
    _cutlass("basic_gemm", "00_basic_gemm/basic_gemm.cu"),
    _cutlass("basic_syrk", "31_basic_syrk/basic_syrk.cu"),
    _cutlass("basic_trmm", "32_basic_trmm/basic_trmm.cu"),
    _cutlass("tensorop_canonical", "19_tensorop_canonical/tensorop_canonical.cu"),
    _cutlass("simt_canonical", "20_simt_canonical/simt_canonical.cu"),
    _cutlass("tile_iterator", "04_tile_iterator/tile_iterator.cu"),
    _cutlass("dump_reg_shmem", "02_dump_reg_shmem/dump_reg_shmem.cu"),
    _cutlass("cute_sgemm_1", "cute/tutorial/sgemm_1.cu", _MNK),
    _cutlass("cute_sgemm_2", "cute/tutorial/sgemm_2.cu", _MNK),
    _cutlass("cute_sgemm_sm70", "cute/tutorial/sgemm_sm70.cu", _MNK),
    _cutlass("cute_sgemm_sm80", "cute/tutorial/sgemm_sm80.cu", _MNK),
    _cutlass("cute_tiled_copy", "cute/tutorial/tiled_copy.cu"),
    _cutlass("cute_tiled_copy_if", "cute/tutorial/tiled_copy_if.cu"),
    _cutlass("cute_wgmma_sm90", "cute/tutorial/hopper/wgmma_sm90.cu", _MNK, "sm_90a"),
    _cutlass("cute_wgmma_tma_sm90", "cute/tutorial/hopper/wgmma_tma_sm90.cu", _MNK, "sm_90a"),
)

PASS = "pass"
MAX_BYTES = str(1 << 30)  # before + after of one launch
TERMINAL_OK = {PASS}


@dataclass
class Outcome:
    """One kernel of one program (or a program's library capture)."""

    program: str
    kernel: str  # the source's name ("" for a library capture)
    own: bool  # defined in the program's own source
    status: str  # pass / build_failed / capture_failed / not_launched / program_failed /
    #             spec_failed /
    #             reproduce_failed / bench_failed / library / skipped / optimize_*
    message: str = ""
    captured: str = ""  # the capture's line (kernel, grid, block, duration)
    spec: str = ""  # the spec block written
    bench: dict = field(default_factory=dict)  # bench --format json, trimmed
    draft: dict = field(default_factory=dict)  # the static draft against the capture
    seconds: dict = field(default_factory=dict)
    optimize: dict = field(default_factory=dict)


def _tail(text: str, n: int = 1500) -> str:
    text = text.strip()
    return text if len(text) <= n else "…" + text[-n:]


def _run(
    argv: list[str], timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int | None, str, float]:
    """(exit code or None on timeout, stdout+stderr, seconds): never raises for the program.
    Its own process group, killed whole on timeout: nvcc's cicc and ptxas, a program's children
    would otherwise run on and slow every other program."""
    start = time.perf_counter()
    try:
        child = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return 127, str(exc), time.perf_counter() - start
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        return None, f"{out}{err}\ntimed out after {timeout:g} s", time.perf_counter() - start
    return child.returncode, out + err, time.perf_counter() - start


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cuda_llm_lsp.cli", *args]


# ---------------------------------------------------------------------------------- corpus


def fetch_archives(into: Path) -> None:
    """Here (with network): the pinned archives only, sha256 checked, into `into`."""
    sources, _ = realworld_fetch.load_sources()
    into.mkdir(parents=True, exist_ok=True)
    for source in sources:
        if source.name not in SOURCES:
            continue
        archive = into / source.archive
        if not (archive.is_file() and realworld_fetch._sha256(archive) == source.sha256):
            realworld_fetch._download(source, into)
        got = realworld_fetch._sha256(archive)
        if got != source.sha256:
            archive.unlink()
            raise realworld_fetch.FetchError(f"{source.archive}: sha256 {got}, not pinned")
        print(f"{source.archive}: {archive.stat().st_size} bytes, sha256 ok")


def extract(archives: Path, corpus: Path) -> None:
    """The carried archives (sha256 checked again) extracted under `corpus/<source name>/`."""
    sources, _ = realworld_fetch.load_sources()
    for source in sources:
        if source.name not in SOURCES:
            continue
        archive = archives / source.archive
        if not archive.is_file():
            raise realworld_fetch.FetchError(f"{archive} is missing (run --fetch first)")
        if realworld_fetch._sha256(archive) != source.sha256:
            raise realworld_fetch.FetchError(f"{archive}: not the pinned sha256")
        tree = corpus / source.name
        shutil.rmtree(tree, ignore_errors=True)
        realworld_fetch._extract(archive, tree)


# ---------------------------------------------------------------------------------- build


def stage(program: Program, corpus: Path, work: Path) -> Path:
    """The program's source copied into its own directory with a compile_flags.txt (the flags
    `bench` reads, as its build's), so that its captures and spec live beside it."""
    home = work / program.name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    src = corpus / program.source
    dest = home / src.name
    shutil.copyfile(src, dest)
    includes = [str((corpus / i).resolve()) for i in program.includes] + [str(src.parent.resolve())]
    flags = ["-std=c++17", *(f"-I{i}" for i in includes), *program.flags]
    (home / "compile_flags.txt").write_text("\n".join(flags) + "\n")
    return dest


def build(program: Program, source: Path, nvcc: str, timeout: float) -> tuple[bool, str, float]:
    flags = (source.parent / "compile_flags.txt").read_text().split()
    binary = source.parent / program.name
    argv = [nvcc, "-O2", f"-arch={program.arch}", *flags, str(source), "-o", str(binary)]
    rc, out, seconds = _run(argv, timeout)
    if rc == 0 and binary.is_file():
        return True, "", seconds
    return False, _tail(f"exit {rc}: {' '.join(argv)}\n{out}"), seconds


# ---------------------------------------------------------------------------------- kernels


def own_kernels(source: Path) -> list[Kernel]:
    """The `__global__` kernels defined in the program's own source (one per name)."""
    seen: dict[str, Kernel] = {}
    for k in find_kernels(source.read_text(encoding="utf-8", errors="replace")):
        seen.setdefault(k.name, k)
    return list(seen.values())


def mangled_prefix(kernel: Kernel) -> str:
    """What `--kernel` matches for exactly this kernel: `_Z6kernel` (`_Z6kernelI` would be a
    template's), `_ZN2ns6kernel` inside namespaces; never a library kernel of the same short
    name (`cutlass::reference::device::kernel::Gemm` holds `6kernel`, not `_Z6kernel`)."""
    scopes = [s for s in kernel.qualified_name.split("::") if s][:-1]
    if scopes:
        return "_ZN" + "".join(f"{len(s)}{s}" for s in scopes) + f"{len(kernel.name)}{kernel.name}"
    return f"_Z{len(kernel.name)}{kernel.name}"


@dataclass(frozen=True)
class Limits:
    capture_s: float = 90.0
    spec_s: float = 60.0
    bench_s: float = 150.0
    deadline: float = 0.0  # time.monotonic() after which nothing new starts


def _capture_dir(source: Path, kernel: str) -> Path:
    return source.parent / ".cuda-llm" / "captures" / (kernel or "any")


def run_kernel(program: Program, source: Path, kernel: Kernel, limits: Limits) -> Outcome:
    """capture -> spec --write -> bench for one own kernel of one program."""
    outcome = Outcome(program.name, kernel.name, True, "skipped")
    if time.monotonic() > limits.deadline:
        outcome.message = "not started: the run's deadline passed"
        return outcome
    binary = source.parent / program.name
    out = _capture_dir(source, kernel.name)
    capture_argv = _cli(
        "capture", "--kernel", mangled_prefix(kernel), "--slowest", "--max-bytes", MAX_BYTES,
        "--timeout", str(int(limits.capture_s)), "--out", str(out), "--", str(binary),
        *program.args,
    )  # fmt: skip
    rc, text, seconds = _run(capture_argv, limits.capture_s * 2 + 30, cwd=source.parent)
    outcome.seconds["capture"] = round(seconds, 2)
    if rc != 0:
        outcome.status = "capture_failed"
        if "never launched" in text:
            outcome.status = "not_launched"
        elif "crashed" in text and "never started" in text:
            # the program failed on its own before any CUDA call (on this GPU): it never
            # launched the kernel, for any tool to capture
            outcome.status = "program_failed"
        outcome.message = _tail(text)
        return outcome
    outcome.captured = _captured_line(text)
    outcome.draft = draft_check(source.read_text(encoding="utf-8"), kernel.name, out)
    rc, text, seconds = _run(
        _cli("spec", str(source), "--from-capture", str(out), "--kernel", kernel.name, "--write"),
        limits.spec_s,
    )
    outcome.seconds["spec"] = round(seconds, 2)
    if rc != 0:
        outcome.status, outcome.message = "spec_failed", _tail(text)
        return outcome
    outcome.spec = _spec_block(source, kernel.name)
    rc, text, seconds = _run(
        _cli("bench", str(source), "--kernel", kernel.name, "--format", "json", "--seed", "1"),
        limits.bench_s,
    )
    outcome.seconds["bench"] = round(seconds, 2)
    outcome.bench = _bench_doc(text)
    if rc == 0:
        outcome.status = PASS
        outcome.message = _bench_line(outcome.bench)
    elif "does not reproduce the captured outputs" in text:
        outcome.status, outcome.message = "reproduce_failed", _tail(text)
    else:
        outcome.status = "bench_failed"
        outcome.message = _tail(f"exit {rc}: {text}")
    return outcome


def draft_check(text: str, name: str, capture_dir: Path) -> dict:
    """The static draft (no capture: from the file's launch site) against the captured launch:
    the draft's grid, block, smem and integer scalars evaluated with the captured integer
    parameters as its sizes must be the captured ones, each buffer's extent must fit what the
    allocation holds, and a buffer the launch changed must not be `in`. Only for kernels the file
    launches itself."""
    from dataclasses import replace

    from cuda_llm_lsp.source.c_types import c_type_dtype, normalize_c_type
    from cuda_llm_lsp.source.capture_manifest import read_capture
    from cuda_llm_lsp.source.draft import draft_spec
    from cuda_llm_lsp.source.launch_sites import find_launch_sites
    from cuda_llm_lsp.source.spec import parse_spec
    from cuda_llm_lsp.source.spec.from_capture import ITEMSIZE, scalar_value

    kernel = next(k for k in find_kernels(text) if k.name == name)
    sites = [s for s in find_launch_sites(text, name) if s.config is not None]
    if not sites:
        return {"launch_site": False}
    # template arguments the launch deduces from host values (CuTe's shapes, Thrust's
    # iterators) are not in the file's text: a value of such a type is as opaque as a struct
    deduced = kernel.is_template and not any("<" in s.callee for s in sites)
    opaque = [
        p.name or str(p.index)
        for p in kernel.params
        if not p.is_pointer
        and (deduced or p.base_type not in kernel.template_params)
        and c_type_dtype(normalize_c_type(p.base_type)) is None
    ]
    if opaque:  # a struct, an enum, a deduced type's value: only a capture can give its bytes
        return {"launch_site": True, "expressible": False, "why": f"by-value {', '.join(opaque)}"}
    problems: list[str] = []
    try:
        capture = read_capture(capture_dir)
        start = offset_of(text, kernel.span.start)
        start = text.rfind("\n", 0, start) + 1
        drafted = text[:start] + draft_spec(kernel, text) + text[start:]
        again = next(k for k in find_kernels(drafted) if k.name == name)
        spec, errors = parse_spec(again, drafted)
        if spec is None:
            return {"launch_site": True, "right": False,
                    "problems": [f"does not parse: {e.message}" for e in errors][:3]}  # fmt: skip
        ints = {}
        for param, captured in zip(again.params, capture.params, strict=False):
            dtype = c_type_dtype(normalize_c_type(param.base_type))
            if not param.is_pointer and dtype and dtype.startswith(("int", "uint")):
                ints[param.name] = scalar_value(captured, dtype)
        sizes = {n: [int(ints.get(n, v[-1]))] for n, v in spec.sizes.items()}
        case = replace(spec, sizes=sizes).cases()[-1]
        if case.grid != capture.grid:
            problems.append(f"grid {case.grid}, the program launched {capture.grid}")
        if case.block != capture.block:
            problems.append(f"block {case.block}, the program launched {capture.block}")
        if case.smem != capture.smem:
            problems.append(f"smem {case.smem}, the program launched {capture.smem}")
        for arg in spec.args:
            # an integer scalar (a size is the captured value itself): what the program passed
            passed = case.scalars.get(arg.name)
            if arg.name in ints and passed is not None and passed != ints[arg.name]:
                shown = arg.value if arg.value == str(passed) else f"{arg.value} = {passed}"
                problems.append(f"args.{arg.name} = {shown}, the program passed {ints[arg.name]}")
            pointer = capture.params[arg.index].pointer if arg.is_pointer else None
            if pointer is None:
                continue
            need = int(case.counts.get(arg.name, 0)) * ITEMSIZE.get(arg.dtype or "", 1)
            if need > pointer.captured:
                problems.append(
                    f"{arg.name}: {need} bytes, the allocation holds {pointer.captured}"
                )
            if pointer.changed and arg.role == "in":
                problems.append(f"{arg.name}: 'in', yet the launch changed it")
    except Exception as exc:  # the check reports; it never stops the run
        problems.append(f"check failed: {type(exc).__name__}: {exc}")
    return {"launch_site": True, "right": not problems, "problems": problems}


def run_library(program: Program, source: Path, limits: Limits) -> Outcome:
    """A program with no kernel of its own: its slowest (library) launch captured, to show
    capture works on it; the spec's answer recorded (the file holds no such kernel)."""
    outcome = Outcome(program.name, "", False, "skipped")
    if time.monotonic() > limits.deadline:
        outcome.message = "not started: the run's deadline passed"
        return outcome
    out = _capture_dir(source, "")
    argv = _cli(
        "capture", "--slowest", "--max-bytes", MAX_BYTES, "--timeout", str(int(limits.capture_s)),
        "--out", str(out), "--", str(source.parent / program.name), *program.args,
    )  # fmt: skip
    rc, text, seconds = _run(argv, limits.capture_s * 2 + 30, cwd=source.parent)
    outcome.seconds["capture"] = round(seconds, 2)
    if rc != 0:
        outcome.status, outcome.message = "capture_failed", _tail(text)
        return outcome
    outcome.captured = _captured_line(text)
    rc, text, _ = _run(_cli("spec", str(source), "--from-capture", str(out)), limits.spec_s)
    outcome.status = "library"
    outcome.message = f"{_seen_line(out)}; spec: {_tail(text, 300)}"
    return outcome


def _captured_line(text: str) -> str:
    """The capture CLI's own line (after the program's output)."""
    lines = [line for line in text.splitlines() if line.startswith("captured ")]
    return lines[-1] if lines else _tail(text, 300)


def _seen_line(out: Path) -> str:
    """How many kernels (distinct, launches) the program launched, from the capture's seen.json."""
    try:
        kernels = json.loads((out / "seen.json").read_text()).get("kernels", {})
    except (OSError, ValueError, AttributeError):
        return "seen.json unreadable"
    return f"{len(kernels)} distinct kernels launched, {sum(kernels.values())} launches"


def _spec_block(source: Path, kernel: str) -> str:
    text = source.read_text(encoding="utf-8", errors="replace")
    at = text.find("/* @cuda-llm")
    while at >= 0:
        end = text.find("*/", at)
        block = text[at : end + 2]
        if 'capture = "' in block and f'/captures/{kernel}"' in block:
            return block
        at = text.find("/* @cuda-llm", end)
    return ""


def _bench_doc(text: str) -> dict:
    """The JSON object the CLI printed (stdout first; stderr's lines after it are ignored)."""
    start = text.find("{")
    try:
        doc = json.JSONDecoder().raw_decode(text[start:])[0] if start >= 0 else {}
    except ValueError:
        return {"output": _tail(text, 800)}
    return doc if isinstance(doc, dict) else {}


def _bench_line(doc: dict) -> str:
    kernels = doc.get("kernels") or []
    if not kernels:
        return ""
    k = kernels[0]
    cases = [f"{c.get('sizes')}: {c.get('status')}" for c in k.get("cases") or []]
    return f"{k.get('status')}, median {k.get('median_ms')} ms; cases: {'; '.join(cases)}"[:300]


# ---------------------------------------------------------------------------------- optimize


def run_optimize(outcome: Outcome, source: Path, timeout: float) -> dict:
    """One round, one candidate: the scripted model replies with the original kernel, so the
    loop's baseline and its candidate are both judged on the captured data."""
    from tests.support.scripted_llm import ScriptedLlmServer, kernel_reply

    text = source.read_text(encoding="utf-8", errors="replace")
    kernels = [k for k in find_kernels(text) if k.name == outcome.kernel]
    if not kernels:
        return {"status": "error", "message": "kernel not found again"}
    k = kernels[0]
    start, brace = offset_of(text, k.span.start), offset_of(text, k.body_span.start) + 1
    marked = "\n    // candidate: the original, unchanged"
    body = text[start:brace] + marked + text[brace : offset_of(text, k.span.end)]
    with ScriptedLlmServer([{"text": kernel_reply(body), "repeat": -1}]) as server:
        env_key = {"OPENAI_API_KEY": "scripted"}
        argv = _cli(
            "optimize", str(source), "--kernel", k.name, "--rounds", "1", "--candidates", "1",
            "--repairs", "0", "--format", "json", "--model", "scripted", "--seed", "1",
            "--base-url", server.base_url,
        )  # fmt: skip
        rc, out, seconds = _run(argv, timeout, env={**os.environ, **env_key})
        requests = len(server.requests)
    doc = _bench_doc(out)
    statuses = [c.get("status") for c in doc.get("candidates", [])] if doc else []
    messages = [str(c.get("message") or "")[:300] for c in doc.get("candidates", [])] if doc else []
    return {
        "exit": rc,
        "seconds": round(seconds, 1),
        "requests": requests,
        "candidates": statuses,
        "candidate_messages": messages,
        "baseline_ms": doc.get("baseline_ms"),
        "best_ms": doc.get("best_ms"),
        "builder": doc.get("builder"),
        "message": "" if statuses else _tail(out, 800),
    }


# ---------------------------------------------------------------------------------- report


def summarize(outcomes: list[Outcome], build_failed: list[str], wall: float) -> dict:
    own = [o for o in outcomes if o.own]
    unlaunched = ("not_launched", "program_failed", "skipped", "build_failed")
    launched = [o for o in own if o.status not in unlaunched]
    passed = [o for o in launched if o.status == PASS]
    optimized = [o for o in own if o.optimize]
    return {
        "programs": len({o.program for o in outcomes}),
        "programs_built": len({o.program for o in outcomes}) - len(build_failed),
        "build_failed": build_failed,
        "own_kernels": len(own),
        "own_kernels_launched": len(launched),
        "own_kernels_passed": len(passed),
        "rate": round(len(passed) / len(launched), 3) if launched else None,
        "not_launched": [f"{o.program}:{o.kernel}" for o in own if o.status == "not_launched"],
        "program_failed": [f"{o.program}:{o.kernel}" for o in own if o.status == "program_failed"],
        "skipped": [f"{o.program}:{o.kernel}" for o in outcomes if o.status == "skipped"],
        "drafts_with_launch_site": sum(
            1 for o in own if o.draft.get("launch_site") and o.draft.get("expressible", True)
        ),
        "drafts_needing_a_capture": [
            f"{o.program}:{o.kernel}" for o in own if o.draft.get("expressible") is False
        ],
        "drafts_right": sum(1 for o in own if o.draft.get("right")),
        "library_programs_captured": sum(1 for o in outcomes if o.status == "library"),
        "library_programs": sum(1 for o in outcomes if not o.own),
        "optimize": {f"{o.program}:{o.kernel}": o.optimize for o in optimized},
        "wall_s": round(wall, 1),
    }


def markdown(summary: dict, outcomes: list[Outcome]) -> str:
    rate = summary["rate"]
    lines = [
        "# Capture acceptance (issue 39): other people's programs",
        "",
        f"- programs: {summary['programs']} ({summary['programs_built']} built)",
        f"- own kernels: {summary['own_kernels']}, launched by the program's run: "
        f"{summary['own_kernels_launched']}, capture -> spec -> bench as is passed: "
        f"**{summary['own_kernels_passed']}** "
        f"(rate {'n/a' if rate is None else f'{rate:.0%}'}; target >= 90 %)",
        f"- not launched: {', '.join(summary['not_launched']) or 'none'}; the program failed "
        "on its own before any CUDA call: "
        f"{', '.join(summary.get('program_failed', [])) or 'none'}",
        f"- static drafts (no capture) of kernels the file launches itself, right as printed "
        f"(grid, block, smem, extents, roles at the captured sizes): "
        f"**{summary.get('drafts_right', 0)} of {summary.get('drafts_with_launch_site', 0)}**; "
        "structs, enums or template-typed values only a capture can give: "
        f"{len(summary.get('drafts_needing_a_capture', []))}",
        f"- library-only programs (Thrust/CUB kernels, not the program's own): "
        f"{summary['library_programs']}, captured: {summary['library_programs_captured']}",
        f"- wall: {summary['wall_s']} s",
        "",
        "| program | kernel | status | seconds | message |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        shown = f"{o.captured} — {o.message}" if o.status == PASS else o.message
        message = (o.captured + " — " + o.message if o.status == "library" else shown).replace(
            "\n", " "
        )
        message = message.replace("|", "\\|")
        message = message if len(message) <= 400 else "…" + message[-400:]  # the why is last
        secs = ", ".join(f"{k} {v}" for k, v in o.seconds.items())
        lines.append(f"| {o.program} | {o.kernel or '(any)'} | {o.status} | {secs} | {message} |")
    if summary["optimize"]:
        lines += [
            "",
            "## optimize on the captured data (1 round, scripted model: the original)",
            "",
        ]
        for name, result in summary["optimize"].items():
            lines.append(
                f"- {name}: exit {result.get('exit')}, candidates {result.get('candidates')}, "
                f"{result.get('requests')} requests, {result.get('seconds')} s"
                + (f" — {result['message'][:300]}" if result.get("message") else "")
            )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetch", type=Path, help="download the pinned archives into DIR, exit")
    parser.add_argument("--corpus", type=Path, help="DIR holding the archives (from --fetch)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/capture-acceptance"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu-logs")))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel builds")
    parser.add_argument("--gpu-jobs", type=int, default=6, help="programs captured at once")
    parser.add_argument("--build-timeout", type=float, default=280.0)
    parser.add_argument(
        "--budget", type=float, default=360.0, help="seconds after which no kernel starts"
    )
    parser.add_argument("--optimize", type=int, default=1, help="kernels to optimize (0: none)")
    parser.add_argument("--only", action="append", default=[], help="program name (repeatable)")
    parser.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    args = parser.parse_args(argv)
    if args.fetch:
        fetch_archives(args.fetch)
        return 0
    if not args.corpus:
        parser.error("--corpus DIR (the archives) is needed")
    started = time.monotonic()
    limits = Limits(deadline=started + args.budget)
    work = args.work.resolve()
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    archives = args.corpus / "archives" if (args.corpus / "archives").is_dir() else args.corpus
    extract(archives, corpus)
    programs = [p for p in PROGRAMS if not args.only or p.name in args.only]
    sources = {p.name: stage(p, corpus, work / "programs") for p in programs}
    # own kernels first: they make the rate; a program's kernels are captured as soon as it
    # is built, while the others still build
    programs.sort(key=lambda p: not own_kernels(sources[p.name]))
    print(f"== building {len(programs)} programs, {args.jobs} at once", flush=True)
    built: dict[str, tuple[bool, str, float]] = {}
    outcomes: list[Outcome] = []

    def one_program(p: Program) -> list[Outcome]:
        source = sources[p.name]
        kernels = own_kernels(source)
        ok, why, _ = built[p.name]
        if not ok:
            names = [k.name for k in kernels] or [""]
            return [Outcome(p.name, n, bool(n), "build_failed", why) for n in names]
        if not kernels:
            return [run_library(p, source, limits)]
        return [run_kernel(p, source, k, limits) for k in kernels]  # one file: in turn

    optimizing: list[tuple[Outcome, futures.Future[dict]]] = []
    with (
        futures.ThreadPoolExecutor(args.jobs) as builds,
        futures.ThreadPoolExecutor(max(1, args.gpu_jobs)) as gpu,
    ):
        jobs = {
            builds.submit(build, p, sources[p.name], args.nvcc, args.build_timeout): p
            for p in programs
        }
        runs: list[futures.Future[list[Outcome]]] = []
        for job in futures.as_completed(jobs):
            p = jobs[job]
            built[p.name] = job.result()
            ok, _, secs = built[p.name]
            print(f"  {p.name}: {'built' if ok else 'BUILD FAILED'} ({secs:.0f} s)", flush=True)
            runs.append(gpu.submit(one_program, p))
        print(f"== builds done at {time.monotonic() - started:.0f} s", flush=True)
        for run in futures.as_completed(runs):
            for o in run.result():
                print(f"  {o.program}:{o.kernel or '(any)'}: {o.status}", flush=True)
                outcomes.append(o)
                if o.status == PASS and len(optimizing) < args.optimize:
                    print(f"== optimize {o.program}:{o.kernel} (1 round)", flush=True)
                    left = max(30.0, limits.deadline + 120 - time.monotonic())
                    optimizing.append(
                        (o, gpu.submit(run_optimize, o, sources[o.program], min(left, 200)))
                    )
            failed = [name for name, (ok, _, _) in built.items() if not ok]
            write_report(args.out, list(outcomes), failed, time.monotonic() - started)
        for o, job in optimizing:
            o.optimize = job.result()
            print(f"  optimize {o.program}:{o.kernel}: {o.optimize}", flush=True)
    order = {p.name: i for i, p in enumerate(PROGRAMS)}
    outcomes.sort(key=lambda o: (order.get(o.program, 0), o.kernel))
    build_failed = [p.name for p in programs if not built[p.name][0]]

    print(write_report(args.out, outcomes, build_failed, time.monotonic() - started))
    return 0


def write_report(out: Path, outcomes: list[Outcome], build_failed: list[str], wall: float) -> str:
    """OUT/capture_acceptance.json and .md (also after each program: a run cut short by its
    time limit still leaves what it measured)."""
    summary = summarize(outcomes, build_failed, wall)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"summary": summary, "outcomes": [asdict(o) for o in outcomes]}
    (out / "capture_acceptance.json").write_text(json.dumps(doc, indent=2) + "\n")
    report = markdown(summary, outcomes)
    (out / "capture_acceptance.md").write_text(report)
    return report


if __name__ == "__main__":
    sys.exit(main())
