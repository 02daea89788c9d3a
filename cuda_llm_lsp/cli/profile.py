"""`cuda-llm profile FILE --kernel NAME [--format json]`: the kernel's timed case under Nsight
Compute, with findings per source line (uncoalesced access, bank conflicts, divergent branches,
local memory, stall hotspots) and a kernel summary (occupancy, throughput, roofline position).

Exit codes: 0 profiled; 1 the kernel does not build or the profiled run failed; 2 bad usage (no
such file or kernel, no or bad test spec); 3 no GPU, no ncu, no permission for the GPU's
performance counters, or a GPU ncu does not support. JSON (the contract): `{"kernel", "device",
"summary": {...}, "lines": [{"file", "line", "kinds", "stall_share", "message", "metrics"}]}`,
lines sorted by their share of the kernel's warp-stall samples.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from cuda_llm_lsp.cli.common import error, no_kernel, read_source
from cuda_llm_lsp.cli.progress import interrupt_cancels
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.engine import (
    CancelToken,
    Refusal,
    evaluator_problem,
    make_profiler,
    profile_in_file,
)
from cuda_llm_lsp.engine.outcomes import LineProfile
from cuda_llm_lsp.source.kernels import find_kernels

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", type=Path, help=".cu file")
    parser.add_argument("--kernel", required=True, help="kernel to profile")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--gpus",
        default=None,
        help="the GPU to profile on: the first of the list, e.g. '2' or '2,3' (as cudaLlm.gpus); "
        "default GPU 0",
    )
    parser.epilog = (
        "exit codes: 0 profiled, 1 build or run failed, 2 usage/spec problem, "
        "3 no GPU, no ncu, no counter permission or unsupported GPU"
    )


def run(args: argparse.Namespace) -> int:
    as_json = args.format == "json"
    path: Path = args.file
    text, problem = read_source(path)
    if problem is not None:
        return error("profile", f"{path}: {problem}", EXIT_USAGE, as_json)
    names = [k.name for k in find_kernels(text)]
    if args.kernel not in names:
        return error("profile", no_kernel(args.kernel, path, names), EXIT_USAGE, as_json)
    bad_recording = evaluator_problem()
    if bad_recording:
        return error("profile", bad_recording, EXIT_USAGE, as_json)
    try:
        profiler = make_profiler(args.gpus)
    except ValueError as exc:
        return error("profile", str(exc), EXIT_USAGE, as_json)
    token = CancelToken()
    with interrupt_cancels(token, "profile"):
        work = profile_in_file(text, path, args.kernel, Settings(), profiler, cancel=token)
        result = asyncio.run(work)
    if isinstance(result, Refusal) and result.kind == "no_profiler":
        return error("profile", f"cannot profile here: {result.message}", EXIT_UNAVAILABLE, as_json)
    if isinstance(result, Refusal):
        usage = result.kind in ("no_kernel", "no_spec", "spec_errors")
        return error("profile", _refused(result), EXIT_USAGE if usage else EXIT_FAIL, as_json)
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render(result))
    return EXIT_OK


def _refused(refusal: Refusal) -> str:
    """The engine's refusal in this command's words."""
    if refusal.kind == "no_spec":
        return (
            f"{refusal.kernel} has no test spec: add one (`cuda-llm bench` prints a draft) so "
            "that the profiler knows how to launch it"
        )
    if refusal.kind == "spec_errors":
        listed = "; ".join(
            f"line {p.span.start.line + 1}: {p.message}" for p in refusal.problems[:3]
        )
        return f"{refusal.message}: {listed}"
    return refusal.message


def render(result: LineProfile) -> str:
    """The text report: the summary, then one block per line (`FILE:LINE: kinds: message`)."""
    out = [f"{result.kernel} on {result.device}: {result.summary.line()}"]
    if not result.lines:
        out.append("no line stands out")
    for found in result.lines:
        out.append(
            f"{found.file}:{found.line}: {', '.join(found.kinds)} "
            f"({found.stall_share:.0%} of stall samples): {found.message}"
        )
        if found.text:
            out.append(f"    {found.text}")
    return "\n".join(out)
