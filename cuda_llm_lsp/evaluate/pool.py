"""`GpuEvaluator`: the parent side of the GPU worker, and the evaluation rules (DESIGN.md).

One worker process per GPU, started lazily and reused across candidates; killed and restarted
after a fault, a hang or a cancel (the candidate gets that status; the next call gets a fresh
context). All methods block; call them from a thread. `cancel()` may come from any thread.

Per case of `evaluate` (the original kernel is the oracle), in order of precedence:
  launch_error > timeout > fault          the run itself failed (the worker reports these)
  > out_of_bounds                          a guard byte around any buffer changed
  > input_modified                         an `in` buffer came back different
  > unwritten_output                       an output element still holds the poison
  > wrong_output                           outside rtol/atol of the oracle
  > nondeterministic                       a second run on the same inputs differs
then, on the timed (last) case only, after interleaved timing with the oracle, on the very
device buffers the candidate was timed on (same allocations, same pointers):
  > stale_after_timing                     the last timed launch's outputs are wrong or
                                           unwritten (outputs are re-poisoned before every
                                           timed launch; skipped when the spec has an inout
                                           buffer, whose values evolve across launches), or a
                                           run on NEW input values written into those buffers
                                           (outputs poisoned, inout reset) is wrong;
  (out_of_bounds / input_modified / fault / timeout there keep their own status.)
Evaluation stops at the first failing case. A correct candidate gets "ok" with its speedup
(whether it is "slower" is the FSR loop's call). If the ORACLE fails, `BaselineFailed` is raised:
no candidate is blamed for a broken reference.

Timing holes, and why each is closed (or what remains):
- Caching across launches. Keyed on values, on a launch counter or on its pointer arguments: the
  outputs are poisoned before every timed launch, so a launch that skips its work leaves poison,
  and the last one is checked; then new values go into the same allocations, so a cache keyed on
  the pointers replays a stale result there (a fresh allocation, as the recheck used to get,
  would have a new address, or by luck the old one). Remains: a kernel that computes on exactly
  the launches we check and skips the others; a change-detector on the inputs (a hash of a few
  values) that skips the work in between costs reading them, and is caught by the last launch's
  check only if it skips that launch. Re-poisoning costs one memset per launch, outside the events.
- Work on other streams, dynamic parallelism: candidates are compiled by NVRTC as a device-only
  unit without -rdc and without cudadevrt, so a device-side `<<<>>>`, `cudaLaunchDevice` (even
  declared by hand) or `cudaStreamCreateWithFlags` does not compile (compile_error; planted in
  tests/gpu/kernels.py). Candidates cannot run host code, so they cannot enqueue anything on
  another stream. (A user's own `nvrtc_flags` adding -rdc gives a cubin with unresolved externs,
  which fails to load: launch_error.)
- Work left running after the kernel returns: none can exist without child launches or streams
  (above); the end event is recorded on the same stream right after the launch, so it completes
  only after every block of the kernel has finished.
- Reading other launches' inputs: each kernel is timed on its own allocations (baseline and
  candidate never share buffers), inputs are fresh seeded values per evaluation, and the oracle
  runs in its own module, so there is nothing of the reference to read; a `__device__` copy of the
  candidate's own earlier inputs/outputs is the caching case above.
- L2 flush before every timed launch: `timing.time_interleaved` enqueues flush -> start event ->
  launch -> end event for every sample (warm-up included), with a memset over >= 2x the L2
  (min 64 MiB) whose value changes each time; the CPU test double fails any launch recorded
  between events without a flush since the previous launch.
- Baseline and candidate interleaved: A B A B ... in the same process, stream and batch, the same
  flush and re-poison before each, until both medians are stable or the budget is spent.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from cuda_llm_lsp.cachefiles import write_json_atomic
from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.compare import (
    GUARD_BYTES,
    OK,
    Finding,
    bf16_from_float,
    check_guards,
    check_unchanged,
    compare_output,
    poison_pattern,
    split_guarded,
    storage_dtype,
    unwritten_mask,
)
from cuda_llm_lsp.evaluate.inputs import case_rng, make_inputs
from cuda_llm_lsp.evaluate.types import (
    BaselineFailed,
    CaseOutcome,
    DeviceFacts,
    EvalResult,
    EvaluationCancelled,
    KernelBinary,
    NoGpuError,
    Status,
)
from cuda_llm_lsp.source.c_types import c_type_dtype
from cuda_llm_lsp.source.spec import ArgSpec, Case, TestSpec

START_TIMEOUT_S = 120.0


class _Process:
    """One worker process and its framed pipe, with a hard watchdog on every reply."""

    def __init__(self, device: int) -> None:
        self.device = device
        self.stderr_tail: deque[str] = deque(maxlen=40)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cuda_llm_lsp.evaluate.worker", "--device", str(device)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()
        # bytearray: appending a chunk is amortised O(1); `bytes +=` made a 128 MB reply
        # (a 16M-element case) cost minutes of copying.
        self._buffer = bytearray()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr_tail.append(line.decode(errors="replace").rstrip())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def send(self, message: dict[str, Any]) -> None:
        import pickle

        body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        assert self.proc.stdin is not None
        self.proc.stdin.write(struct.pack("<Q", len(body)) + body)
        self.proc.stdin.flush()

    def receive(self, timeout_s: float, cancelled: threading.Event) -> dict[str, Any] | None:
        """The next reply; None on EOF (the process died or was killed) or past the deadline."""
        import pickle

        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        need: int | None = None
        while True:
            if need is None and len(self._buffer) >= 8:
                (need,) = struct.unpack("<Q", self._buffer[:8])
            if need is not None and len(self._buffer) >= 8 + need:
                body = bytes(self._buffer[8 : 8 + need])
                del self._buffer[: 8 + need]
                return pickle.loads(body)  # our own worker's reply
            if cancelled.is_set():
                return None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(fd, 1 << 22)
                if not chunk:
                    return None
                self._buffer += chunk


@dataclass
class _Run:
    """One kernel launch's outcome on one case."""

    status: Status | None  # launch_error / timeout / fault, or None when it ran
    message: str
    outputs: dict[str, np.ndarray]  # storage dtype, data only
    finding: Finding  # guards / inputs-unchanged problems (OK if none)


class GpuEvaluator:
    """The `Evaluator` for the local GPU `device` (see module docstring for the rules)."""

    def __init__(
        self,
        device: int = 0,
        *,
        launch_timeout_s: float = 5.0,
        plan: timing.Plan | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.device = device
        self.launch_timeout_s = launch_timeout_s
        self.plan = plan or timing.Plan()
        self._cache_dir = cache_dir
        self._lock = threading.RLock()
        self._cancelled = threading.Event()
        self._proc: _Process | None = None
        self._keys: dict[tuple[bytes, str], str] = {}
        self._facts: DeviceFacts | None = None
        self._no_gpu: str | None = None
        self.restarts = 0

    # --- process management ------------------------------------------------------------------
    def _worker(self) -> _Process:
        if self._no_gpu:
            raise NoGpuError(self._no_gpu)
        if self._proc is not None and self._proc.alive():
            return self._proc
        if self._proc is not None:
            self.restarts += 1
        self._keys = {}
        try:
            proc = _Process(self.device)
        except OSError as exc:
            raise NoGpuError(f"cannot start the GPU worker: {exc}") from exc
        self._proc = proc
        hello = proc.receive(START_TIMEOUT_S, self._cancelled)
        if hello is None:
            proc.kill()
            self._proc = None
            if self._cancelled.is_set():
                raise EvaluationCancelled("cancelled")
            tail = "\n".join(proc.stderr_tail)
            raise NoGpuError(f"the GPU worker did not start: {tail or 'no output'}")
        if hello.get("status") == "no_gpu":
            proc.kill()
            self._proc = None
            self._no_gpu = str(hello.get("message", "no CUDA GPU"))
            raise NoGpuError(self._no_gpu)
        return proc

    def _request(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        proc = self._worker()
        with contextlib.suppress(OSError):  # the reply read below reports a dead process
            proc.send(req)
        reply = proc.receive(timeout_s, self._cancelled)
        if self._cancelled.is_set():
            proc.kill()
            raise EvaluationCancelled("cancelled")
        if reply is None:
            hung = proc.alive()
            proc.kill()
            if hung:
                return {"status": "timeout", "message": f"the GPU worker did not answer within "
                        f"{timeout_s:.0f} s (the kernel hangs)", "fatal": True}  # fmt: skip
            tail = "; ".join(list(proc.stderr_tail)[-5:])
            return {"status": "fault", "message": f"the GPU worker died ({tail or 'no output'})",
                    "fatal": True}  # fmt: skip
        if reply.get("fatal"):
            proc.kill()
        if reply.get("status") == "error":
            raise RuntimeError(f"GPU worker: {reply.get('message')}")
        return reply

    def _load(self, binary: KernelBinary) -> tuple[str | None, dict[str, Any]]:
        k = (binary.cubin, binary.entry)
        if k in self._keys and self._proc is not None and self._proc.alive():
            return self._keys[k], {"status": "ok"}
        reply = self._request(
            {"op": "load", "cubin": binary.cubin, "entry": binary.entry}, START_TIMEOUT_S
        )
        if reply["status"] != "ok":
            return None, reply
        self._keys[k] = reply["key"]
        return reply["key"], reply

    # --- public API ------------------------------------------------------------------------------
    def device_facts(self) -> DeviceFacts:
        with self._lock:
            self._cancelled.clear()
            if self._facts is None:
                self._facts = self._query_facts()
            return self._facts

    def _query_facts(self) -> DeviceFacts:
        reply = self._request({"op": "facts"}, START_TIMEOUT_S)
        if reply["status"] != "ok":
            raise NoGpuError(str(reply.get("message")))
        cc = tuple(reply["compute_capability"])
        key = f"{reply['name']}|driver {reply['driver_version']}|device {self.device}"
        cache = self._facts_cache_path()
        stored: dict[str, Any] = {}
        try:
            stored = json.loads(cache.read_text())
        except (OSError, ValueError):
            stored = {}
        bandwidth = stored.get(key, {}).get("copy_bandwidth_gbs")
        if not isinstance(bandwidth, int | float):
            bw = self._request({"op": "bandwidth"}, 120.0)
            bandwidth = float(bw["gbs"]) if bw.get("status") == "ok" else None
            if bandwidth:
                stored[key] = {"copy_bandwidth_gbs": bandwidth, "measured": time.time()}
                write_json_atomic(cache, stored, indent=1)
        fields = {k: reply[k] for k in DeviceFacts.__dataclass_fields__ if k in reply}
        fields["compute_capability"] = (int(cc[0]), int(cc[1]))
        fields["arch"] = f"sm_{cc[0]}{cc[1]}"
        return DeviceFacts(**fields, copy_bandwidth_gbs=bandwidth)

    def _facts_cache_path(self) -> Path:
        if self._cache_dir is not None:
            return self._cache_dir / "device_facts.json"
        import platformdirs

        return Path(platformdirs.user_cache_dir("cuda-llm-lsp")) / "device_facts.json"

    def cancel(self) -> None:
        self._cancelled.set()
        proc = self._proc
        if proc is not None:
            proc.kill()

    def close(self) -> None:
        proc = self._proc
        self._proc = None
        if proc is not None and proc.alive():
            try:
                proc.send({"op": "quit"})
                proc.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
            proc.kill()

    def __enter__(self) -> GpuEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one run -------------------------------------------------------------------------------
    def _run(
        self, key: str, spec: TestSpec, case: Case, inputs: dict[str, np.ndarray], where: str
    ) -> _Run:
        launch = case_launch(spec, case, inputs, key, unchanged_only=True)
        req = {"op": "run", **launch, "timeout_s": self.launch_timeout_s}
        nbytes_total = sum(b["nbytes"] for b in launch["buffers"])
        reply = self._request(req, self.launch_timeout_s + 30.0 + nbytes_total * 4 / 2e8)
        if reply["status"] != "ok":
            return _Run(reply["status"], f"{where}: {reply.get('message', '')}", {}, OK)
        return self._parse(spec, case, inputs, reply["buffers"], where)

    def _parse(
        self,
        spec: TestSpec,
        case: Case,
        inputs: dict[str, np.ndarray],
        buffers: dict[str, bytes],
        where: str,
    ) -> _Run:
        """The worker's guarded buffers -> outputs, and guard / input-unchanged findings.
        Buffers the worker did not send back (`op_time`'s "last": outputs only) are skipped."""
        outputs: dict[str, np.ndarray] = {}
        guard_finding = changed_finding = OK  # the first of each: out_of_bounds wins
        for arg in spec.args:
            if not arg.is_pointer or arg.name not in buffers:
                continue
            dtype = arg.dtype or "float32"
            sd = storage_dtype(dtype)
            count = int(case.counts.get(arg.name, 0))
            raw = buffers[arg.name]
            unchanged = arg.role == "in" and len(raw) == 2 * GUARD_BYTES and count > 0
            nbytes = 0 if unchanged else count * sd.itemsize
            guard = check_guards(arg.name, raw, nbytes, sd.itemsize, where)
            if guard_finding is OK:
                guard_finding = guard
            if unchanged:
                continue
            data = np.frombuffer(split_guarded(raw, nbytes)[1], dtype=sd)
            if arg.name in inputs and arg.role == "in":
                if changed_finding is OK:
                    changed_finding = check_unchanged(arg.name, inputs[arg.name], data, where)
            else:
                outputs[arg.name] = data
        return _Run(
            None, "", outputs, guard_finding if guard_finding is not OK else changed_finding
        )

    def _outputs(self, spec: TestSpec) -> list[tuple[str, str]]:
        names = spec.outputs or tuple(
            a.name for a in spec.args if a.is_pointer and a.role in ("out", "inout")
        )
        result = []
        for name in names:
            arg = spec.arg(name)
            if arg is not None and arg.is_pointer:
                result.append((name, arg.dtype or "float32"))
        return result

    def _compare(
        self,
        spec: TestSpec,
        case: Case,
        expected: _Run,
        got: _Run,
        where: str,
        what: str = "expected",
    ) -> Finding:
        for name, dtype in self._outputs(spec):
            if name not in expected.outputs or name not in got.outputs:
                continue
            f = compare_output(
                name, expected.outputs[name], got.outputs[name], dtype, rtol=spec.rtol,
                atol=spec.atol, where=where, sizes=case.sizes, what=what,
            )  # fmt: skip
            if f is not OK:
                return f
        return OK

    def _unwritten(self, spec: TestSpec, case: Case, run: _Run, where: str) -> Finding:
        for name, dtype in self._outputs(spec):
            if name in run.outputs:
                mask = unwritten_mask(run.outputs[name], dtype)
                if mask.any():
                    idx = np.flatnonzero(mask)
                    return Finding(
                        "unwritten_output",
                        f"{where}: {idx.size} of {mask.size} elements of {name} were never "
                        f"written (first {name}[{int(idx[0])}], last {name}[{int(idx[-1])}])",
                        int(idx.size),
                    )
        return OK

    # --- evaluate ------------------------------------------------------------------------------
    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
    ) -> EvalResult:
        with self._lock:
            self._cancelled.clear()
            seed = secrets.randbits(63) if seed is None else seed
            facts = self.device_facts()
            cases = spec.cases()
            base_key, reply = self._load(baseline)
            if base_key is None:
                raise BaselineFailed(
                    f"the original kernel cannot be loaded: {reply.get('message')}"
                )
            cand_key, reply = self._load(candidate)
            if cand_key is None:
                return EvalResult(reply["status"], str(reply.get("message")), seed)
            outcomes: list[CaseOutcome] = []

            def fail(case: Case, status: Status, message: str) -> EvalResult:
                outcomes.append(CaseOutcome(case.index, dict(case.sizes), status, message))
                return EvalResult(status, message, seed, tuple(outcomes))

            for case in cases:
                where = f"case {case.index} ({case.describe()})"
                inputs = make_inputs(spec, case, case_rng(seed, case.index), spec_dir)
                oracle = self._oracle(base_key, spec, case, inputs, where)
                first = self._run(cand_key, spec, case, inputs, where)
                problem = self._judge(spec, case, oracle, first, where)
                if problem is not OK:
                    return fail(case, problem.status or "wrong_output", problem.message)
                second = self._run(cand_key, spec, case, inputs, where)
                problem = self._judge(spec, case, oracle, second, where + ", second run")
                if problem is OK:
                    problem = self._compare(spec, case, first, second, where, "first run gave")
                    if problem is not OK:
                        problem = Finding("nondeterministic", "two runs on the same inputs "
                                          f"differ: {problem.message}")  # fmt: skip
                if problem is not OK:
                    status: Status = problem.status or "nondeterministic"
                    if status in ("wrong_output", "unwritten_output"):
                        status = "nondeterministic"  # the first run was right
                        problem = replace(problem, message="the second run on the same inputs "
                                          f"differs from the first: {problem.message}")  # fmt: skip
                    return fail(case, status, problem.message)
                outcomes.append(CaseOutcome(case.index, dict(case.sizes), "ok"))

            # timed on the last case's inputs, judged against its oracle run (the loop's last)
            timed, timed_oracle = cases[-1], oracle
            where = f"case {timed.index} ({timed.describe()})"
            fresh = make_inputs(spec, timed, case_rng(seed, timed.index, draw=1), spec_dir)
            fresh_oracle = self._oracle(base_key, spec, timed, fresh, where + ", recheck")
            timed_result = self._time([base_key, cand_key], spec, timed, inputs, {1: fresh})
            if isinstance(timed_result, EvalResult):
                failed = CaseOutcome(timed.index, dict(timed.sizes), timed_result.status,
                                     timed_result.message)  # fmt: skip
                return replace(timed_result, seed=seed, cases=(*outcomes[:-1], failed))
            samples, rechecks = timed_result
            base_t, cand_t = (timing.summarize(s) for s in samples)
            recheck = rechecks[1]
            problem = OK
            what = ""
            if recheck is not None and not any(a.role == "inout" for a in spec.args):
                # outputs were poisoned before every timed launch: the last one must have
                # computed them (no inout buffer evolves across launches, so they are comparable)
                last = self._parse(spec, timed, inputs, recheck["last"], where)
                problem = self._judge(spec, timed, timed_oracle, last, where)
                what = (f"the last of {cand_t.samples} timed launches (outputs poisoned before "
                        "each, same inputs as the first runs) is wrong")  # fmt: skip
            if problem is OK and recheck is not None:
                after = self._parse(spec, timed, fresh, recheck["buffers"], where + ", recheck")
                problem = self._judge(spec, timed, fresh_oracle, after, where)
                what = (f"after the timing runs ({cand_t.samples} timed launches), a run on new "
                        "input values in the same buffers is wrong")  # fmt: skip
            if problem is not OK:
                status = problem.status or "stale_after_timing"
                if status not in ("timeout", "fault", "launch_error", "out_of_bounds",
                                  "input_modified"):  # fmt: skip
                    status = "stale_after_timing"
                msg = f"{what}: {problem.message}"
                outcomes[-1] = CaseOutcome(timed.index, dict(timed.sizes), status, msg)
                return EvalResult(status, msg, seed, tuple(outcomes), base_t, cand_t)

            moved = bytes_moved(spec, timed)
            speedup = base_t.median_ms / cand_t.median_ms if cand_t.median_ms > 0 else None
            bw = moved / (cand_t.median_ms * 1e-3) / 1e9 if cand_t.median_ms > 0 else None
            peak = facts.copy_bandwidth_gbs
            message = (f"{len(outcomes)}/{len(cases)} cases pass; candidate {cand_t.median_ms:.4g} "
                       f"ms vs original {base_t.median_ms:.4g} ms"
                       + (f" ({speedup:.3g}x)" if speedup else ""))  # fmt: skip
            return EvalResult(
                "ok", message, seed, tuple(outcomes), base_t, cand_t, speedup, moved, bw, peak,
                bw / peak if bw and peak else None,
            )  # fmt: skip

    def _oracle(
        self, key: str, spec: TestSpec, case: Case, inputs: dict[str, np.ndarray], where: str
    ) -> _Run:
        run = self._run(key, spec, case, inputs, where)
        problem = self._self_check(spec, case, run, where)
        if problem is not OK:
            raise BaselineFailed(f"the original kernel fails its own spec: {problem.message}")
        return run

    def _self_check(self, spec: TestSpec, case: Case, run: _Run, where: str) -> Finding:
        """What a run shows without an oracle: its failure, guards / inputs, unwritten outputs."""
        if run.status is not None:
            return Finding(run.status, run.message)
        if run.finding is not OK:
            return run.finding
        return self._unwritten(spec, case, run, where)

    def _judge(self, spec: TestSpec, case: Case, oracle: _Run, run: _Run, where: str) -> Finding:
        if run.status is not None:
            return Finding(run.status, run.message)
        if run.finding is not OK:
            return run.finding
        return self._compare(spec, case, oracle, run, where)

    def _time(
        self,
        keys: list[str],
        spec: TestSpec,
        case: Case,
        inputs: dict[str, np.ndarray],
        recheck: dict[int, dict[str, np.ndarray]] | None = None,
    ) -> tuple[list[list[float]], list[dict[str, Any] | None]] | EvalResult:
        """Samples per kernel; `recheck[i]`: new input values that kernel i is run on once more
        after the timing, on the very buffers it was timed on (-> the worker's "rechecks")."""
        kernels = [case_launch(spec, case, inputs, key) for key in keys]
        for i, k in enumerate(kernels):  # (the worker re-poisons the buffers sent with poison)
            if recheck and i in recheck:
                fresh = case_launch(spec, case, recheck[i], None, unchanged_only=True)
                k["recheck"] = {"buffers": fresh["buffers"]}
        plan = self.plan
        req = {"op": "time", "kernels": kernels, "timeout_s": self.launch_timeout_s,
               "plan": plan.__dict__}  # fmt: skip
        nbytes_total = sum(b["nbytes"] for k in kernels for b in k["buffers"])
        hard = (
            60.0
            + plan.budget_s * len(keys) * 2
            + self.launch_timeout_s * (plan.batch + 1) * 2 * len(keys)
            + nbytes_total * 8 / 2e8
        )
        reply = self._request(req, hard)
        if reply["status"] != "ok":
            return EvalResult(reply["status"], f"while timing: {reply.get('message')}", 0)
        return reply["samples"], reply.get("rechecks") or [None] * len(keys)

    # --- benchmark -----------------------------------------------------------------------------
    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
    ) -> EvalResult:
        """The kernel alone: every case run twice (determinism, unwritten, guards, inputs
        unchanged), then the timed case's latency and bandwidth. Every case is reported."""
        with self._lock:
            self._cancelled.clear()
            seed = secrets.randbits(63) if seed is None else seed
            facts = self.device_facts()
            cases = spec.cases()
            key, reply = self._load(kernel)
            if key is None:
                return EvalResult(reply["status"], str(reply.get("message")), seed)
            outcomes: list[CaseOutcome] = []
            for case in cases:
                where = f"case {case.index} ({case.describe()})"
                inputs = make_inputs(spec, case, case_rng(seed, case.index), spec_dir)
                first = self._run(key, spec, case, inputs, where)
                problem = self._self_check(spec, case, first, where)
                if problem is OK:
                    second = self._run(key, spec, case, inputs, where + ", second run")
                    problem = self._self_check(spec, case, second, where + ", second run")
                    if problem is OK:
                        problem = self._compare(spec, case, first, second, where, "first run gave")
                    if problem.status in ("wrong_output", "unwritten_output"):
                        problem = Finding(
                            "nondeterministic",
                            f"the second run on the same inputs differs: {problem.message}",
                        )
                status: Status = problem.status or "ok"
                outcomes.append(CaseOutcome(case.index, dict(case.sizes), status, problem.message))
                if status in ("timeout", "fault"):  # the worker was restarted without `key`
                    return EvalResult(status, problem.message, seed, tuple(outcomes))
            failed = [c for c in outcomes if c.status != "ok"]
            if any(c.status == "launch_error" for c in failed) or len(failed) == len(outcomes):
                first_bad = failed[0]
                return EvalResult(first_bad.status, first_bad.message, seed, tuple(outcomes))
            timed = cases[-1]  # timed on the loop's last inputs (no second draw)
            timed_result = self._time([key], spec, timed, inputs)
            if isinstance(timed_result, EvalResult):
                if outcomes[-1].status == "ok":
                    outcomes[-1] = replace(
                        outcomes[-1], status=timed_result.status, message=timed_result.message
                    )
                return replace(timed_result, seed=seed, cases=tuple(outcomes))
            t = timing.summarize(timed_result[0][0])
            moved = bytes_moved(spec, timed)
            bw = moved / (t.median_ms * 1e-3) / 1e9 if t.median_ms > 0 else None
            peak = facts.copy_bandwidth_gbs
            status = failed[0].status if failed else "ok"
            message = failed[0].message if failed else (
                f"{len(outcomes)}/{len(outcomes)} cases pass; {t.median_ms:.4g} ms")  # fmt: skip
            return EvalResult(
                status, message, seed, tuple(outcomes), baseline=t, bytes_moved=moved,
                bandwidth_gbs=bw, copy_bandwidth_gbs=peak,
                fraction_of_peak=bw / peak if bw and peak else None,
            )  # fmt: skip


def bytes_moved(spec: TestSpec, case: Case) -> int:
    """Bytes of the spec's buffers: `in` read, `out` written, `inout` read and written."""
    total = 0
    for arg in spec.args:
        if arg.is_pointer:
            n = int(case.counts.get(arg.name, 0)) * storage_dtype(arg.dtype or "float32").itemsize
            total += 2 * n if arg.role == "inout" else n
    return total


def case_launch(
    spec: TestSpec,
    case: Case,
    inputs: dict[str, np.ndarray],
    key: str | None,
    *,
    unchanged_only: bool = False,
) -> dict[str, Any]:
    """The worker's description of one launch: buffers (data or poison) and packed params.

    `unchanged_only`: the worker sends `in` buffers back only if the kernel changed them.
    """
    buffers: list[dict[str, Any]] = []
    params: list[tuple[Any, ...]] = []
    for arg in spec.args:
        if arg.is_pointer:
            dtype = arg.dtype or "float32"
            nbytes = int(case.counts.get(arg.name, 0)) * storage_dtype(dtype).itemsize
            buf: dict[str, Any] = {"name": arg.name, "nbytes": nbytes}
            if arg.name in inputs:
                buf["data"] = inputs[arg.name].tobytes()
                buf["unchanged_only"] = unchanged_only and arg.role == "in"
            else:
                buf["poison"] = poison_pattern(dtype)
            buffers.append(buf)
            params.append(("buf", arg.name))
        else:
            params.append(_scalar_param(arg, case))
    return {"key": key, "grid": case.grid, "block": case.block, "smem": case.smem,
            "params": params, "buffers": buffers}  # fmt: skip


def _scalar_param(arg: ArgSpec, case: Case) -> tuple[str, str, int | float]:
    """("scalar", numpy dtype, value) as the worker packs it into kernelParams."""
    value = case.scalars.get(arg.name, 0)
    if arg.dtype == "bfloat16":
        return ("scalar", "uint16", int(bf16_from_float(np.array([value], np.float32))[0]))
    return ("scalar", str(np.dtype(arg.dtype or c_type_dtype(arg.c_type) or "int32")), value)
