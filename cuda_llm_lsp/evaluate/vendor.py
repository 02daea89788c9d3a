"""Vendor-library timings for the suite's kernels that have one: cuBLAS (matmul, matvec, dot)
and cuSPARSE (SpMV, SpMM), through CuPy or PyTorch, whichever is installed.

Runs in its own process (`python -m cuda_llm_lsp.evaluate.vendor`, jobs as JSON on stdin, results
as JSON on stdout) so a library crash or a second CUDA context can never take the suite down.
Inputs are the kernel's own timed case (same sizes, same `inputs` hook), timed with CUDA events
and an L2 flush (a read over twice the L2) before every launch, like the evaluator does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.tools import GPU_LIMITS, neutral_cwd, python_command, spawn_options
from cuda_llm_lsp.evaluate.inputs import host_inputs
from cuda_llm_lsp.source.kernels import find_kernels
from cuda_llm_lsp.source.spec import parse_spec

# kernel name -> operation of the library that does the same work
VENDOR_OPS: dict[str, str] = {
    "matmul_f32": "gemm",
    "matmul_bf16": "gemm",
    "matvec_f32": "gemv",
    "matvec_bf16": "gemv",
    "dot_f32": "dot",
    "dot_bf16": "dot",
    "spmv_csr_f32": "spmv",
    "spmv_ell_f32": "spmv",  # cuSPARSE has no plain ELL SpMV: the same matrix as CSR
    "spmm_csr_f32": "spmm",
}
WARMUP = 3
MAX_REPS = 200
BUDGET_S = 1.0


@dataclass(frozen=True)
class VendorJob:
    file: str
    kernel: str
    op: str


@dataclass(frozen=True)
class VendorResult:
    library: str
    ms: float | None
    note: str | None = None


def measure(
    jobs: list[VendorJob], *, l2_bytes: int = 0, timeout_s: float = 300.0
) -> tuple[dict[str, VendorResult], str | None]:
    """Results by kernel name, and a problem for the report (None when all went well)."""
    payload = json.dumps({"jobs": [asdict(j) for j in jobs], "l2_bytes": l2_bytes})
    try:
        proc = subprocess.run(
            python_command("cuda_llm_lsp.evaluate.vendor"),
            input=payload,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=child_env({"PYTHONUNBUFFERED": "1"}),
            cwd=neutral_cwd(),
            **spawn_options(GPU_LIMITS, stdin=None),
        )
    except subprocess.TimeoutExpired:
        return {}, f"timed out after {timeout_s:.0f} s"
    except OSError as exc:
        return {}, f"could not start: {exc}"
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = " ".join(proc.stderr.strip().splitlines()[-3:])
        return {}, f"no result (exit {proc.returncode}): {tail[:300]}"
    results = {
        name: VendorResult(r.get("library", "?"), r.get("ms"), r.get("note"))
        for name, r in data.get("results", {}).items()
    }
    return results, data.get("problem")


# --- the child process ---------------------------------------------------------------------


class Backend:
    """Arrays, operations and event timing on one library (torch preferred for dense)."""

    def __init__(self, name: str, l2_bytes: int) -> None:
        self.name = name
        flush_bytes = max(2 * l2_bytes, 256 << 20)
        if name == "torch":
            import torch

            torch.backends.cuda.matmul.allow_tf32 = False  # our kernels are full FP32
            self.lib = torch
            self.flush = torch.zeros(flush_bytes // 8, dtype=torch.int64, device="cuda")
        else:
            import cupy

            self.lib = cupy
            self.flush = cupy.zeros(flush_bytes // 8, dtype=cupy.int64)

    def array(self, host: Any, dtype: str) -> Any:
        import numpy as np

        if self.name == "torch":
            torch = self.lib
            if dtype == "bfloat16":
                return (
                    torch.from_numpy(np.ascontiguousarray(host).view(np.int16))
                    .cuda()
                    .view(torch.bfloat16)
                )
            return torch.from_numpy(np.ascontiguousarray(host)).cuda()
        if dtype == "bfloat16":
            raise RuntimeError("CuPy has no bfloat16")
        return self.lib.asarray(host)

    def time(self, fn: Any) -> float:
        import time

        lib = self.lib
        for _ in range(WARMUP):
            fn()
        samples: list[float] = []
        started = time.monotonic()
        if self.name == "torch":
            make = lambda: lib.cuda.Event(enable_timing=True)  # noqa: E731
            sync = lib.cuda.synchronize
        else:
            make = lib.cuda.Event
            sync = lib.cuda.runtime.deviceSynchronize
        while len(samples) < MAX_REPS and (
            len(samples) < 10 or time.monotonic() - started < BUDGET_S
        ):
            self.flush.sum()  # the flush: a read leaves L2 clean, as the evaluator's does
            start, end = make(), make()
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(
                start.elapsed_time(end)
                if self.name == "torch"
                else lib.cuda.get_elapsed_time(start, end)
            )
        sync()
        samples.sort()
        return samples[len(samples) // 2]


def _csr_from_ell(col_idx: Any, vals: Any, rows: int, width: int) -> tuple[Any, Any, Any]:
    import numpy as np

    cols = col_idx.reshape(width, rows).T
    v = vals.reshape(width, rows).T
    valid = cols >= 0
    row_ptr = np.zeros(rows + 1, dtype=np.int32)
    np.cumsum(valid.sum(axis=1), out=row_ptr[1:])
    return row_ptr, cols[valid].astype(np.int32), v[valid].astype(np.float32)


def _run_job(job: dict[str, Any], backends: dict[str, Backend]) -> dict[str, Any]:
    path = Path(job["file"])
    text = path.read_text(encoding="utf-8")
    kernel = next(k for k in find_kernels(text) if k.name == job["kernel"])
    spec, _ = parse_spec(kernel, text)
    if spec is None:
        return {"library": "-", "ms": None, "note": "no usable spec"}
    case = spec.cases()[-1]
    inputs = host_inputs(spec, case, seed=0, spec_dir=path.parent)
    s = case.sizes
    op = job["op"]
    dtypes = {a.name: a.dtype or "float32" for a in spec.args if a.is_pointer}
    sparse = op in ("spmv", "spmm")
    order = ("cupy", "torch") if sparse else ("torch", "cupy")
    kind = "cuSPARSE" if sparse else "cuBLAS"
    problems = []
    for name in order:
        be = backends.get(name)
        if be is None:
            continue
        try:
            ms = _time_op(be, op, inputs, dtypes, s, case)
            return {"library": f"{kind} ({name})", "ms": ms}
        except Exception as exc:
            problems.append(f"{name}: {type(exc).__name__}: {str(exc)[:150]}")
    note = "; ".join(problems) or "neither CuPy nor PyTorch is installed"
    return {"library": kind, "ms": None, "note": note}


def _time_op(
    be: Backend,
    op: str,
    inputs: dict[str, Any],
    dtypes: dict[str, str],
    s: dict[str, int],
    case: Any,
) -> float:
    if op == "gemm":
        a = be.array(inputs["A"], dtypes["A"]).reshape(s["M"], s["K"])
        b = be.array(inputs["B"], dtypes["B"]).reshape(s["K"], s["N"])
        return be.time(lambda: a @ b)
    if op == "gemv":
        a = be.array(inputs["A"], dtypes["A"]).reshape(s["rows"], s["cols"])
        x = be.array(inputs["x"], dtypes["x"])
        return be.time(lambda: a @ x)
    if op == "dot":
        a = be.array(inputs["a"], dtypes["a"])
        b = be.array(inputs["b"], dtypes["b"])
        return be.time(lambda: a.dot(b))
    if "row_ptr" in inputs:
        row_ptr, col_idx, vals = inputs["row_ptr"], inputs["col_idx"], inputs["vals"]
    else:
        row_ptr, col_idx, vals = _csr_from_ell(
            inputs["col_idx"], inputs["vals"], s["rows"], s["width"]
        )
    rows = s["rows"]
    ncols = s.get("cols") or s.get("k")
    if be.name == "cupy":
        import cupyx.scipy.sparse as sp

        cp = be.lib
        m = sp.csr_matrix(
            (cp.asarray(vals), cp.asarray(col_idx), cp.asarray(row_ptr)), shape=(rows, ncols)
        )
    else:
        torch = be.lib
        m = torch.sparse_csr_tensor(
            torch.from_numpy(row_ptr.astype("int64")).cuda(),
            torch.from_numpy(col_idx.astype("int64")).cuda(),
            torch.from_numpy(vals).cuda(),
            size=(rows, ncols),
        )
    if op == "spmv":
        x = be.array(inputs["x"], "float32")
        return be.time(lambda: m @ x)
    b = be.array(inputs["B"], "float32").reshape(s["k"], s["n"])
    return be.time(lambda: m @ b)


def main() -> int:
    request = json.loads(sys.stdin.read() or "{}")
    l2 = int(request.get("l2_bytes") or 0)
    backends: dict[str, Backend] = {}
    problems = []
    for name in ("torch", "cupy"):
        try:
            backends[name] = Backend(name, l2)
        except Exception as exc:
            problems.append(f"{name} unavailable ({type(exc).__name__}: {str(exc)[:100]})")
    results: dict[str, Any] = {}
    for job in request.get("jobs", []):
        try:
            results[job["kernel"]] = _run_job(job, backends)
        except Exception as exc:
            note = f"{type(exc).__name__}: {str(exc)[:200]}"
            results[job["kernel"]] = {"library": "-", "ms": None, "note": note}
    problem = "; ".join(problems) if not backends else None
    print(json.dumps({"results": results, "problem": problem}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
