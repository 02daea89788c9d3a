"""Capture real Nsight Compute output for the planted kernels (run on a GPU machine).

Builds each kernel of planted.cu with the project's NVRTC path (-lineinfo), runs the spec's
timed case once in the evaluator's one-shot worker under ncu with the source-level sections,
and exports the report in the shapes the parser may read. Everything lands in OUT_DIR.
Usage: python tests/data/ncu/capture.py OUT_DIR
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cuda_llm_lsp.compile.arch import resolve_arch
from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.config import Settings
from cuda_llm_lsp.evaluate.candidate import build_binary, find_kernel
from cuda_llm_lsp.evaluate.inputs import host_inputs
from cuda_llm_lsp.evaluate.launch import case_launch
from cuda_llm_lsp.evaluate.process import oneshot_command, write_requests
from cuda_llm_lsp.evaluate.protocol import LoadRequest, RunRequest
from cuda_llm_lsp.evaluate.types import KernelBinary
from cuda_llm_lsp.source.spec import parse_spec

HERE = Path(__file__).resolve().parent
SECTIONS = ("SourceCounters", "Occupancy", "SpeedOfLight", "LaunchStats", "WarpStateStats",
            "MemoryWorkloadAnalysis_Tables")  # fmt: skip
KERNELS = ("transpose_naive", "transpose_header", "transpose_unpadded", "transpose_padded",
           "pick_local", "pick_fixed", "lane_branch", "warp_branch", "strided_gather")  # fmt: skip


def run(cmd: list[str], timeout: float = 240) -> dict[str, object]:
    started = time.monotonic()
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=child_env({"PYTHONUNBUFFERED": "1"}),
        )
        out, err, rc = done.stdout, done.stderr, done.returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        out, err, rc = "", str(exc), -1
    return {
        "cmd": cmd,
        "rc": rc,
        "stdout": out,
        "stderr": err,
        "seconds": round(time.monotonic() - started, 2),
    }


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    ncu = shutil.which("ncu") or "ncu"
    log: dict[str, object] = {"ncu": ncu, "version": run([ncu, "--version"])["stdout"]}
    log["help"] = run([ncu, "--help"])["stdout"]
    text = (HERE / "planted.cu").read_text()
    settings = Settings()
    arch = resolve_arch(settings)
    log["arch"] = arch
    unit = build_device_unit(text, HERE / "planted.cu")
    src = Path(tempfile.mkdtemp(prefix="nvrtc-src-"))
    (src / unit.name).write_text(unit.text)
    for name, body in unit.headers.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(body)
    log["unit_name"] = unit.name
    log["headers"] = list(unit.headers)
    log["include_lines"] = unit.include_lines
    started = time.monotonic()
    results: dict[str, object] = {}
    reports: list[tuple[str, Path]] = []
    for name in KERNELS:
        if time.monotonic() - started > 250:
            results[name] = "skipped: out of time"
            continue
        kernel = find_kernel(text, name)
        assert kernel is not None, name
        spec, errors = parse_spec(kernel, text)
        assert spec is not None, (name, errors)
        binary = build_binary(text, HERE / "planted.cu", name, settings, arch=arch)
        if not isinstance(binary, KernelBinary):
            results[name] = f"build failed: {binary}"
            continue
        case = spec.cases()[-1]
        inputs = host_inputs(spec, case, seed=1, spec_dir=HERE)
        launch = case_launch(spec, case, inputs, None)
        req = out / f"{name}.req"
        write_requests(
            req,
            [
                LoadRequest(binary.cubin, binary.entry),
                RunRequest(launch, timeout_s=60, guards=False),
            ],
        )
        rep = out / name
        cmd = [
            ncu,
            *[a for s in SECTIONS for a in ("--section", s)],
            "--import-source",
            "yes",
            "-f",
            "-o",
            str(rep),
            "--kernel-name-base",
            "mangled",
            "--kernel-name",
            f"regex:^{re.escape(binary.entry)}$",
            "--launch-count",
            "1",
            *oneshot_command(req, 0),
        ]
        result = run(cmd)
        result["entry"] = binary.entry
        results[name] = result
        req.unlink()
        if Path(f"{rep}.ncu-rep").exists():
            reports.append((name, Path(f"{rep}.ncu-rep")))
        print(name, result["rc"], result["seconds"], flush=True)
    log["profiles"] = results

    def exports(item: tuple[str, Path]) -> dict[str, object]:
        name, rep = item
        variants = {
            "raw.csv": ["--page", "raw", "--csv", "--print-units", "base"],
            "details.csv": [
                "--page",
                "details",
                "--csv",
                "--print-details",
                "all",
                "--print-units",
                "base",
            ],
            "details.txt": ["--page", "details", "--print-details", "all"],
            "sass.csv": ["--page", "source", "--csv", "--print-source", "sass"],
            "cuda.csv": ["--page", "source", "--csv", "--print-source", "cuda"],
            "cuda_folders.csv": [
                "--page",
                "source",
                "--csv",
                "--print-source",
                "cuda",
                "--source-folders",
                str(src),
            ],
            "cuda_sass.csv": ["--page", "source", "--csv", "--print-source", "cuda,sass"],
        }
        info: dict[str, object] = {}
        for suffix, args in variants.items():
            r = run([ncu, "--import", str(rep), *args], timeout=120)
            (out / f"{name}.{suffix}").write_text(str(r["stdout"]))
            info[suffix] = {
                "rc": r["rc"],
                "stderr": str(r["stderr"])[-2000:],
                "seconds": r["seconds"],
            }
        return info

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        names = [n for n, _ in reports]
        log["exports"] = dict(zip(names, pool.map(exports, reports), strict=True))
    log["total_seconds"] = round(time.monotonic() - started, 1)
    (out / "capture.json").write_text(json.dumps(log, indent=1, default=str))


if __name__ == "__main__":
    main()
