"""GPU workers as Ray actors: the `GpuPool` devices of a cluster (`--cluster ray://HOST:PORT`).

Kernel Tuner's parallel runner does the same: one actor per GPU (`num_gpus=1`). Each actor holds
a `GpuEvaluator` on the one GPU Ray gave it (Ray sets `CUDA_VISIBLE_DEVICES`, so it is ordinal 0
there), which runs the same worker process as a local run: the CUDA context, the judge and every
integrity rule live inside the actor exactly as on a workstation. Only kernels, specs and
results cross the network; the LLM loop stays on the client.

An actor that dies, or whose node is lost, makes its call raise `DeviceLost`: the pool re-runs it
on another actor, and Ray restarts the lost one (`max_restarts`), on another node if its own is
gone; its next call waits up to `RESTART_TIMEOUT_S` for it. Ray is an optional extra (`pip
install "cuda-llm-lsp[ray]"`); this module imports it only when a cluster is asked for, and every
node needs cuda-llm-lsp installed (the actors import it).
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cuda_llm_lsp.cancel import CancelToken, relayed
from cuda_llm_lsp.evaluate.devices import Device, DeviceLost, GpuId, GpuPool
from cuda_llm_lsp.evaluate.types import DeviceFacts, EvalResult, KernelBinary, NoGpuError

if TYPE_CHECKING:
    from cuda_llm_lsp.evaluate.timing import Plan
    from cuda_llm_lsp.source.spec import TestSpec

log = logging.getLogger(__name__)
T = TypeVar("T")

RAY_MISSING = 'a cluster needs Ray: pip install "cuda-llm-lsp[ray]"'
RESTART_TIMEOUT_S = 120.0  # a restarted actor (its node lost: on another one) must answer by then
CONNECT_TIMEOUT_S = 120.0
RESTART_POLL_S = 0.5  # between asks while an actor restarts
_CALL_IDS = itertools.count(1)  # the client's calls, each cancellable alone on its actor


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise NoGpuError(RAY_MISSING) from exc
    return ray


class GpuActor:
    """The actor's body: a `GpuEvaluator` on the GPU Ray assigned (ordinal 0 in the actor)."""

    def __init__(self, plan: Plan | None, launch_timeout_s: float = 5.0) -> None:
        import os
        import socket

        from cuda_llm_lsp.evaluate.gpu import GpuEvaluator

        ray = _ray()
        ids = ray.get_gpu_ids()
        self.index = int(ids[0]) if ids else 0
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.evaluator = GpuEvaluator(0, plan=plan, launch_timeout_s=launch_timeout_s)
        self._stops: dict[int, CancelToken] = {}  # the client's call ids -> their tokens
        self._stops_lock = threading.Lock()

    def identity(self) -> tuple[int, str, int]:
        return self.index, self.host, self.pid

    def device_facts(self) -> DeviceFacts:
        return self.evaluator.device_facts()

    def _stop(self, call: int) -> CancelToken:
        with self._stops_lock:
            return self._stops.setdefault(call, CancelToken())

    def _done(self, call: int) -> None:
        with self._stops_lock:
            self._stops.pop(call, None)

    def benchmark(
        self, kernel: KernelBinary, spec: TestSpec, kwargs: dict[str, Any], call: int = 0
    ) -> EvalResult:
        try:
            return self.evaluator.benchmark(kernel, spec, stop=self._stop(call), **kwargs)
        finally:
            self._done(call)

    def evaluate(
        self,
        baseline: KernelBinary,
        candidate: KernelBinary,
        spec: TestSpec,
        kwargs: dict[str, Any],
        call: int = 0,
    ) -> EvalResult:
        try:
            stop = self._stop(call)
            return self.evaluator.evaluate(baseline, candidate, spec, stop=stop, **kwargs)
        finally:
            self._done(call)

    def cancel(self, call: int | None = None) -> None:
        """The call in flight; with `call`, that call only, even one that has not begun here
        yet (the client's cancel can overtake its request)."""
        if call is None:
            self.evaluator.cancel()
        else:
            self._stop(call).cancel()

    def close(self) -> None:
        self.evaluator.close()


class RayEvaluator:
    """The client's handle on one GPU actor: the `Evaluator` protocol, `DeviceLost` when the
    actor or its node died (Ray restarts it; the next call waits for that)."""

    def __init__(self, actor: Any, gpu: GpuId) -> None:
        self.actor = actor
        self.gpu = gpu
        self.device: Device | None = None  # updated with the restarted actor's identity
        self.lost = 0  # times the actor was found dead
        self._suspect = False  # lost before: check it is back before the next call
        self._lock = threading.Lock()

    def _call(self, method: str, *args: Any) -> Any:
        ray = _ray()
        if self._suspect:
            self._await_restart(ray)
        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except _lost_errors(ray) as exc:
            self.lost += 1
            self._suspect = True
            raise DeviceLost(f"{self.gpu.label}: {type(exc).__name__}") from exc

    def _await_restart(self, ray: Any) -> None:
        """Wait for the restarted actor, up to RESTART_TIMEOUT_S. A call made while it restarts
        is refused at once with `ActorUnavailableError` (as Ray 2.60 does), not queued: ask
        again."""
        restarting = getattr(ray.exceptions, "ActorUnavailableError", ())
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            try:
                left = max(deadline - time.monotonic(), 0.1)
                index, host, _pid = ray.get(self.actor.identity.remote(), timeout=left)
                break
            except restarting as exc:
                if time.monotonic() >= deadline:
                    raise DeviceLost(f"{self.gpu.label} did not come back: {exc}") from exc
                time.sleep(RESTART_POLL_S)
            except (*_lost_errors(ray), ray.exceptions.GetTimeoutError) as exc:
                name = type(exc).__name__
                raise DeviceLost(f"{self.gpu.label} did not come back: {name}") from exc
        self._suspect = False
        name = self.device.gpu.name if self.device is not None else self.gpu.name
        self.gpu = GpuId(index, name, host)
        if self.device is not None:
            self.device.gpu = self.gpu

    def device_facts(self) -> DeviceFacts:
        facts: DeviceFacts = self._call("device_facts")
        return facts

    def _stoppable(self, method: str, stop: CancelToken | None, *args: Any) -> EvalResult:
        """`method` on the actor; `stop`'s cancel reaches that call only, by its id."""
        call = next(_CALL_IDS)
        with relayed(stop, lambda: self.actor.cancel.remote(call)):
            result: EvalResult = self._call(method, *args, call)
        return result

    def benchmark(
        self,
        kernel: KernelBinary,
        spec: TestSpec,
        *,
        spec_dir: Path | None = None,
        seed: int | None = None,
        stop: CancelToken | None = None,
    ) -> EvalResult:
        return self._stoppable(
            "benchmark", stop, kernel, spec, {"spec_dir": spec_dir, "seed": seed}
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
        stop: CancelToken | None = None,
    ) -> EvalResult:
        kwargs = {"spec_dir": spec_dir, "seed": seed, "candidate_spec": candidate_spec}
        return self._stoppable("evaluate", stop, baseline, candidate, spec, kwargs)

    def cancel(self) -> None:
        self.actor.cancel.remote()  # a threaded actor: it runs beside the call it cancels

    def close(self) -> None:
        ray = _ray()
        try:
            if not self._suspect:  # a lost one may be waiting for resources: just let it go
                ray.get(self.actor.close.remote(), timeout=10)
        except Exception:  # gone already
            log.debug("closing %s failed", self.gpu.label, exc_info=True)
        try:
            ray.kill(self.actor, no_restart=True)
        except Exception:  # the connection was left (another cluster joined): gone with it
            log.debug("killing %s failed", self.gpu.label, exc_info=True)


def _lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    e = ray.exceptions
    names = (
        "RayActorError",
        "ActorDiedError",
        "ActorUnavailableError",
        "NodeDiedError",
        "WorkerCrashedError",
        "ObjectLostError",
        "OwnerDiedError",
    )
    return tuple(getattr(e, n) for n in names if hasattr(e, n))


_joined: list[str] = []  # the address this process joined (not a connection made by others)


def connect(address: str) -> Any:
    """Joins the cluster at `address` (`ray://HOST:PORT`, `auto`, or a GCS `HOST:PORT`); an
    already connected process (a test's local cluster) is used as it is. A cluster joined here
    for another address (`cudaLlm.cluster` changed) is left first: one cluster per process."""
    ray = _ray()
    if ray.is_initialized() and _joined and _joined[-1] != address:
        ray.shutdown()
        _joined.clear()
    if not ray.is_initialized():
        try:
            ray.init(address=address, log_to_driver=False)
        except Exception as exc:  # ConnectionError, a bad address...
            raise NoGpuError(f"cannot join the Ray cluster at {address}: {exc}") from exc
        _joined.append(address)
    return ray


def ray_devices(
    address: str,
    *,
    plan: Plan | None = None,
    launch_timeout_s: float = 5.0,
    gpus: int | None = None,
) -> list[Device]:
    """One actor per GPU of the cluster (`gpus`: at most that many), each `num_gpus=1`."""
    ray = connect(address)
    total = int(ray.cluster_resources().get("GPU", 0))
    count = min(total, gpus) if gpus is not None else total
    if count == 0:
        raise NoGpuError(f"the Ray cluster at {address} has no GPU")
    remote = ray.remote(num_gpus=1, max_restarts=-1, max_task_retries=0, max_concurrency=2)
    actor_class = remote(GpuActor)
    actors = [actor_class.remote(plan, launch_timeout_s) for _ in range(count)]
    asked = [actor.identity.remote() for actor in actors]
    # every actor has the same CONNECT_TIMEOUT_S, all at once (not one after another)
    ready, _late = ray.wait(asked, num_returns=len(asked), timeout=CONNECT_TIMEOUT_S)
    answered = set(ready)
    devices: list[Device] = []
    for actor, identity in zip(actors, asked, strict=True):
        try:
            if identity not in answered:
                raise TimeoutError(f"no answer within {CONNECT_TIMEOUT_S:.0f} s")
            index, host, _pid = ray.get(identity)
        except Exception as exc:
            log.warning("a GPU actor did not start: %s", exc)
            ray.kill(actor, no_restart=True)
            continue
        evaluator = RayEvaluator(actor, GpuId(index, host=host))
        device = Device(evaluator.gpu, evaluator)
        evaluator.device = device
        devices.append(device)
    if not devices:
        raise NoGpuError(f"no GPU actor started on the Ray cluster at {address}")
    return devices


def ray_pool(
    address: str,
    *,
    plan: Plan | None = None,
    launch_timeout_s: float = 5.0,
    gpus: int | None = None,
) -> GpuPool:
    """A `GpuPool` of the cluster's GPUs; the actors start on first use. ValueError without
    Ray installed (checked without importing it)."""
    if importlib.util.find_spec("ray") is None:
        raise ValueError(RAY_MISSING)
    make: Callable[[], list[Device]] = lambda: ray_devices(  # noqa: E731
        address, plan=plan, launch_timeout_s=launch_timeout_s, gpus=gpus
    )
    return GpuPool(make)
