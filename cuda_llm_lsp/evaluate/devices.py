"""Several GPUs as one evaluator: a pool of single-GPU evaluators, each leased by one call.

Why a pool and not a parallel evaluator: every rule of `gpu.GpuEvaluator` (the baseline and the
candidate interleaved A B A B in the same worker process, stream and context) holds only inside
one device. So a call never spans GPUs: `GpuPool` hands each call one free device, runs the
whole evaluation there, and labels the result with that GPU (`EvalResult.gpu`); speedups stay
same-GPU ratios and statuses are those of a single-GPU run. Parallelism comes from several calls
at once (`evaluate_many`, or the FSR loop's lane with one thread per device).

A device is local (`local_devices`: one `GpuEvaluator` per ordinal, each its own worker process
and CUDA context) or a Ray actor (`evaluate.ray_cluster`). A device whose host is gone raises
`DeviceLost` (never for a candidate's own fault, which is a status); the pool re-runs that call
on another device and leaves the lost one to restart itself on its next call (resting it
meanwhile, longer with each loss in a row). Devices whose architecture differs from the first's
are left out (a cubin is built for one arch).
"""

from __future__ import annotations

import concurrent.futures
import importlib
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from cuda_llm_lsp.cancel import CancelToken
from cuda_llm_lsp.compile.child_env import child_env
from cuda_llm_lsp.compile.tools import GPU_LIMITS, neutral_cwd, python_command, spawn_options
from cuda_llm_lsp.evaluate.types import (
    DeviceFacts,
    EvalResult,
    EvaluationCancelled,
    Evaluator,
    KernelBinary,
    NoGpuError,
)

if TYPE_CHECKING:
    from cuda_llm_lsp.evaluate.timing import Plan
    from cuda_llm_lsp.source.spec import TestSpec

log = logging.getLogger(__name__)
T = TypeVar("T")

#: CPU tests: how many devices the CUDA driver double pretends to have (tests/unit/fake_cuda_driver)
FAKE_DEVICES_ENV = "CUDA_LLM_FAKE_DEVICES"
COUNT_TIMEOUT_S = 60.0
LOST_REST_S = 30.0  # a lost device is leased again after this, or when no other one can run
LOST_REST_MAX_S = 600.0  # its rest doubles with each loss in a row, up to this


@dataclass(frozen=True)
class GpuId:
    """Which GPU ran a call: its ordinal on its host, its name, the host (empty: this one)."""

    index: int
    name: str = ""
    host: str = ""

    @property
    def label(self) -> str:
        """Short, for a progress cell: `gpu1`, `node-a:gpu1`."""
        return f"{self.host}:gpu{self.index}" if self.host else f"gpu{self.index}"

    def describe(self) -> str:
        """For a result: `gpu1 (NVIDIA H200)`."""
        return f"{self.label} ({self.name})" if self.name else self.label


class DeviceLost(RuntimeError):
    """The device's host is gone (a Ray actor or its node died), not the candidate's doing:
    the call is re-run on another device."""


@dataclass
class Device:
    """One GPU of the pool: its identity and the single-GPU evaluator that runs on it."""

    gpu: GpuId
    evaluator: Evaluator


def parse_gpus(value: str | None) -> tuple[int, ...] | None:
    """`all` (or empty, None): None, every visible GPU; else the ordinals of `0,2` / `0 2`.
    Raises ValueError with a message a user can act on."""
    text = (value or "all").strip().lower()
    if text == "all":
        return None
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValueError(
            f"gpus must be 'all' or a list of GPU numbers such as '0,1', not {value!r}"
        )
    ordinals = tuple(dict.fromkeys(int(p) for p in parts))
    if any(i > 255 for i in ordinals):
        raise ValueError(f"gpus: no GPU number above 255 ({value!r})")
    return ordinals


def count_local_gpus() -> int:
    """Visible CUDA devices, asked in a child process (this process never creates a context)."""
    cmd = python_command("cuda_llm_lsp.evaluate.devices", "--count")
    try:
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=COUNT_TIMEOUT_S,
            env=child_env({}),
            cwd=neutral_cwd(),
            **spawn_options(GPU_LIMITS),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NoGpuError(f"cannot count the GPUs: {exc}") from exc
    out = done.stdout.strip()
    if done.returncode != 0 or not out.isdigit():
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise NoGpuError(f"cannot count the GPUs: {tail}")
    return int(out)


def local_devices(
    gpus: str | None = "all", *, plan: Plan | None = None, cache_dir: Path | None = None
) -> list[Device]:
    """One `GpuEvaluator` per selected local GPU (its worker starts on first use)."""
    from cuda_llm_lsp.evaluate.gpu import GpuEvaluator

    chosen = parse_gpus(gpus)
    if chosen is None:
        count = count_local_gpus()
        if count == 0:
            raise NoGpuError("no CUDA GPU is visible")
        chosen = tuple(range(count))
    return [Device(GpuId(i), GpuEvaluator(i, plan=plan, cache_dir=cache_dir)) for i in chosen]


class GpuPool:
    """An `Evaluator` over several devices: each call leased one free device (module docstring).

    Thread-safe: calls from several threads run at once, one per device; more wait for a free
    one. `devices` are made by `make_devices` on first use (counting local GPUs starts a process).
    """

    def __init__(self, make_devices: Callable[[], Sequence[Device]]) -> None:
        self._make_devices = make_devices
        self._devices: list[Device] | None = None
        self._facts: DeviceFacts | None = None  # the first usable device's, read at start
        self.left_out: list[str] = []  # devices dropped at start, and why
        self._free: list[Device] = []
        self._cond = threading.Condition()
        self._resolving = threading.Lock()
        self._cancels = 0  # cancel generation: a call waiting for a device when it moves stops
        self._resting: dict[int, float] = {}  # lost devices: not leased before this time
        self._losses: dict[int, int] = {}  # lost devices: losses in a row (the rest doubles)
        self._closed = False

    # --- devices -----------------------------------------------------------------------------
    @property
    def devices(self) -> list[Device]:
        """The pool's usable devices (started on first access; NoGpuError when none is)."""
        with self._resolving:
            if self._devices is None:
                self._devices = self._start()
                with self._cond:
                    self._free = list(self._devices)
                    self._cond.notify_all()
            return self._devices

    @property
    def width(self) -> int:
        return len(self.devices)

    def _start(self) -> list[Device]:
        made = list(self._make_devices())
        if not made:
            raise NoGpuError("no GPU selected")
        facts: dict[int, DeviceFacts | Exception] = {}
        with concurrent.futures.ThreadPoolExecutor(len(made), "gpu-facts") as pool:
            futures = {pool.submit(d.evaluator.device_facts): i for i, d in enumerate(made)}
            for future, i in futures.items():
                try:
                    facts[i] = future.result()
                except Exception as exc:  # NoGpuError, a lost actor: that device is left out
                    facts[i] = exc
        usable: list[Device] = []
        arch: str | None = None
        for i, device in enumerate(made):
            found = facts[i]
            if isinstance(found, Exception):
                self.left_out.append(f"{device.gpu.label}: {found}")
                device.evaluator.close()
                continue
            if arch is None:
                arch = found.arch
            if found.arch != arch:
                self.left_out.append(
                    f"{device.gpu.label}: {found.name} is {found.arch}, the first GPU is {arch} "
                    "(one build serves every GPU)"
                )
                device.evaluator.close()
                continue
            device.gpu = replace(device.gpu, name=device.gpu.name or found.name)
            usable.append(device)
            if self._facts is None:
                self._facts = found
        for note in self.left_out:
            log.warning("GPU left out: %s", note)
        if not usable:
            first = facts[0]
            if isinstance(first, NoGpuError):
                raise first
            raise NoGpuError("no usable GPU: " + "; ".join(self.left_out))
        return usable

    # --- leasing -----------------------------------------------------------------------------
    def run(
        self,
        job: Callable[[Device], T],
        on_device: Callable[[GpuId], None] | None = None,
        *,
        stop: CancelToken | None = None,
    ) -> T:
        """`job` on one free device; re-run on another when that device is lost. `on_device`
        hears every device the job is given (progress: which GPU evaluates what). `stop` set
        (one editor job's cancel, with `wake`): a call still waiting for a device gives up."""
        devices = self.devices
        generation = self._cancels
        tried: set[int] = set()
        attempts = 2 * len(devices)
        for _ in range(attempts):
            avoid = tried if len(tried) < len(devices) else set()
            device = self._lease(generation, avoid, stop)
            try:
                if on_device is not None:
                    on_device(device.gpu)
                result = job(device)
                if id(device) in self._losses:
                    with self._cond:  # back: its next loss rests it LOST_REST_S again
                        self._losses.pop(id(device), None)
                return result
            except DeviceLost as exc:
                log.warning("%s lost (%s): its call runs again elsewhere", device.gpu.label, exc)
                tried.add(id(device))
                with self._cond:  # others first while it restarts; longer each time in a row
                    losses = self._losses.get(id(device), 0)
                    self._losses[id(device)] = losses + 1
                    rest = min(LOST_REST_S * 2 ** min(losses, 16), LOST_REST_MAX_S)
                    self._resting[id(device)] = time.monotonic() + rest
            finally:
                self._release(device)
        raise NoGpuError(f"every GPU worker was lost {attempts} times in a row")

    def _lease(self, generation: int, avoid: set[int], stop: CancelToken | None) -> Device:
        with self._cond:
            while True:
                if self._cancels != generation or (stop is not None and stop.cancelled):
                    raise EvaluationCancelled("cancelled")
                if self._closed:
                    raise EvaluationCancelled("the GPU pool was closed")
                now = time.monotonic()
                free = [d for d in self._free if id(d) not in avoid]
                ready = [d for d in free if self._resting.get(id(d), 0.0) <= now]
                # a device lost a moment ago waits unless it is the only one left to try
                choice = (
                    ready[0]
                    if ready
                    else (free[0] if free and not self._busy_other(free) else None)
                )
                if choice is not None:
                    self._free.remove(choice)
                    return choice
                self._cond.wait(0.5)

    def _busy_other(self, free: list[Device]) -> bool:
        """Whether a device that is not resting is busy (a call may soon free it)."""
        now = time.monotonic()
        resting = {id(d) for d in free}
        return any(
            id(d) not in resting and self._resting.get(id(d), 0.0) <= now
            for d in self._devices or []
        )

    def _release(self, device: Device) -> None:
        with self._cond:
            self._free.append(device)
            self._cond.notify_all()

    def wake(self) -> None:
        """Calls waiting for a device look at their `stop` again now."""
        with self._cond:
            self._cond.notify_all()

    # --- the Evaluator protocol ----------------------------------------------------------------
    def device_facts(self) -> DeviceFacts:
        """The first GPU's facts, as read at start: they do not change, and asking its worker
        again would fail while that worker is lost (a dead actor mid-run)."""
        _ = self.devices  # starts the pool, which reads every device's facts
        assert self._facts is not None
        return self._facts

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        return self.run(
            lambda d: _labelled(
                d, d.evaluator.benchmark(kernel, spec, spec_dir=spec_dir, seed=seed, stop=stop)
            ),
            stop=stop,
        )

    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        candidate_spec: TestSpec | None = None,
        on_device: Callable[[GpuId], None] | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        """One candidate on one free GPU, timed against the baseline on that GPU."""
        return self.run(
            lambda d: _labelled(
                d,
                d.evaluator.evaluate(
                    baseline,
                    candidate,
                    spec,
                    spec_dir=spec_dir,
                    seed=seed,
                    candidate_spec=candidate_spec,
                    stop=stop,
                ),
            ),
            on_device,
            stop=stop,
        )

    def evaluate_many(
        self,
        baseline: KernelBinary,
        candidates: Sequence[KernelBinary],
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seeds: Sequence[int | None] | None = None,
    ) -> list[EvalResult]:
        """Every candidate at once, spread over the devices; results in `candidates`' order."""
        seeds = list(seeds) if seeds is not None else [None] * len(candidates)
        if len(seeds) != len(candidates):
            raise ValueError("one seed per candidate")
        if not candidates:
            return []
        threads = min(self.width, len(candidates))
        with concurrent.futures.ThreadPoolExecutor(threads, "gpu-pool") as pool:
            futures = [
                pool.submit(self.evaluate, baseline, c, spec, spec_dir=spec_dir, seed=s)
                for c, s in zip(candidates, seeds, strict=True)
            ]
            return [f.result() for f in futures]

    def cancel(self) -> None:
        """Stops every call in flight and every call waiting for a device. Only leased devices
        are cancelled: an idle one has nothing to stop (a cancelled local worker is killed, and
        would pay a restart, context and modules, on its next call)."""
        with self._cond:
            self._cancels += 1
            self._cond.notify_all()
            leased = [d for d in self._devices or [] if all(d is not f for f in self._free)]
        for device in leased:
            try:
                device.evaluator.cancel()
            except Exception:  # a lost actor cannot be cancelled; it is gone already
                log.debug("cancel on %s failed", device.gpu.label, exc_info=True)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for device in self._devices or []:
            try:
                device.evaluator.close()
            except Exception:
                log.debug("close on %s failed", device.gpu.label, exc_info=True)

    def __enter__(self) -> GpuPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _labelled(device: Device, result: EvalResult) -> EvalResult:
    return replace(result, gpu=device.gpu.describe())


# --- the child's half: counting devices -------------------------------------------------------
def _count_here() -> int:
    from cuda_llm_lsp.evaluate.worker import DRIVER_ENV

    name = os.environ.get(DRIVER_ENV) or "cuda.bindings.driver"
    driver = importlib.import_module(name)
    (err,) = driver.cuInit(0)[:1]
    if int(err) != 0:
        raise RuntimeError(f"cuInit: CUDA error {int(err)}")
    err, count = driver.cuDeviceGetCount()
    if int(err) != 0:
        raise RuntimeError(f"cuDeviceGetCount: CUDA error {int(err)}")
    return int(count)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["--count"]:
        print("usage: python -m cuda_llm_lsp.evaluate.devices --count", file=sys.stderr)
        return 2
    try:
        print(_count_here())
    except Exception as exc:
        print(f"no CUDA driver: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
