"""The GPU worker: a child process that owns the CUDA context and runs kernels for the evaluator.

It speaks `protocol` (typed requests in on stdin, replies out on stdout, one framing). Only the
parent (our own evaluator) writes requests; candidates only ever reach this process as cubins,
run as device code. Anything printed by libraries goes to stderr: the reply channel is a private
copy of the original stdout. A `Failure` reply says "launch_error" (the context survives: a bad
launch configuration), or "fault" / "timeout" (the context is lost: the worker replies and exits,
the parent starts a new one), or "no_gpu" (no driver or device: sent for every request).

Every device buffer is a plain cuMemAlloc allocation (reused from a pool by size across runs,
zeroed before it goes back), with a guard band on each side (`compare.guard_bytes`: 4 KiB, or
1/32 of a large buffer); inputs are generated on the device (or uploaded from a hook's data),
`out` buffers poisoned (with the run's poison) or pre-filled before each run. After a run the
worker checks it on the device with its own kernels (`device_checks`) and replies with summaries
only; outputs named by `Checks.keep` are copied into this process's host memory, and come back
to the device only to be compared, after a later run has finished. A per-launch watchdog polls
the stream until a deadline; the parent has its own hard watchdog too, as a hung kernel can hang
a driver call.

One-shot mode (`python -m cuda_llm_lsp.evaluate.worker --oneshot FILE`) runs the requests framed
in FILE (`process.write_requests`), for compute-sanitizer and ncu, and exits 0 when none failed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from cuda_llm_lsp.evaluate import device_checks, timing
from cuda_llm_lsp.evaluate.compare import (
    GUARD_BYTE,
    GUARD_BYTES,
    GuardSummary,
    guard_bytes,
    storage_dtype,
)
from cuda_llm_lsp.evaluate.counter import DTYPE_CODES, Generated, mix
from cuda_llm_lsp.evaluate.process import exit_with_parent
from cuda_llm_lsp.evaluate.protocol import (
    BandwidthReply,
    BandwidthRequest,
    Buffer,
    BufferArg,
    BytesArg,
    Checks,
    FactsReply,
    FactsRequest,
    Failure,
    KeepRequest,
    Launch,
    LoadReply,
    LoadRequest,
    Param,
    PingRequest,
    Pong,
    QuitRequest,
    Ready,
    Reply,
    Request,
    RunReply,
    RunRequest,
    TimedChecks,
    TimedKernel,
    TimeReply,
    TimeRequest,
    UnloadRequest,
    as_request,
    read_message,
    read_requests,
    write_message,
)
from cuda_llm_lsp.evaluate.types import DeviceFacts
from cuda_llm_lsp.evaluate.worker_checks import CHECK_TIMEOUT_S, DeviceChecks, Placed
from cuda_llm_lsp.evaluate.worker_driver import (
    DRIVER_ENV,
    LAUNCH_ERRORS,
    CudaError,
    Timeout,
    driver_module,
)

__all__ = ["DRIVER_ENV", "CudaBackend", "CudaError", "main"]

POOL_BYTES = 8 << 30  # free allocations kept for reuse (at most 1/8 of the device's memory)
OUT_OF_MEMORY = 2  # CUDA_ERROR_OUT_OF_MEMORY: the pool is freed and the allocation retried
# While timing, the stream is polled at least this often: the GPU idles from a batch's end until
# the next batch is queued, and a long idle lets its clocks fall, which moved a short kernel's
# median between two runs by more than 1 % (issue 41; benchmarks/RESULTS.md). Queuing more work
# instead (bigger or overlapping batches) was measured too and made it worse.
TIMING_POLL_S = 2e-4
# A timed kernel's launches rotate over `Plan.placements` copies of its buffers while all of them
# together stay within this: large buffers span many pages already, and the copies cost memory
PLACEMENT_BYTES = 256 << 20


def placements_for(buffers: Sequence[Buffer], wanted: int) -> int:
    """How many copies of `buffers` (guards included) a timing rotates over: `wanted`, fewer
    where they would pass `PLACEMENT_BYTES`, at least one."""
    one = sum(buf.offset + buf.nbytes + 2 * guard_bytes(buf.nbytes) for buf in buffers)
    return max(1, min(wanted, PLACEMENT_BYTES // max(one, 1)))


def helper_cubin(arch: str) -> bytes:
    """`device_checks.SOURCE` compiled for `arch`, cached on disk by source, arch and NVRTC."""
    digest = hashlib.sha256(
        f"{device_checks.SOURCE}|{arch}|{device_checks.nvrtc_version()}".encode()
    ).hexdigest()[:20]
    path = device_checks.cache_dir() / f"checks-{arch}-{digest}.cubin"
    with contextlib.suppress(OSError):
        return path.read_bytes()
    build = device_checks.compile_helpers(arch)
    if build.cubin is None:
        raise RuntimeError(f"the worker's check kernels do not compile: {build.log}")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(build.cubin)
        os.replace(tmp, path)
    return build.cubin


def relocated(param: BytesArg, ptrs: Mapping[str, int]) -> np.ndarray:
    """A captured struct's bytes with this run's buffer addresses written where the program's
    were (8-byte aligned copies, so the driver reads them as the kernel's parameter)."""
    words = np.zeros((len(param.raw) + 7) // 8, dtype=np.uint64)
    data = words.view(np.uint8)
    data[: len(param.raw)] = np.frombuffer(param.raw, dtype=np.uint8)
    for at, name, delta in param.relocations:
        data[at : at + 8] = np.array([ptrs[name] + delta], dtype=np.uint64).view(np.uint8)
    return words


class CudaBackend(DeviceChecks):
    """The device side: one CUDA context, its stream and loaded modules; runs requests."""

    def __init__(self, device: int) -> None:
        driver = driver_module()
        self.d = driver
        self.check(driver.cuInit(0), "cuInit")
        count = self.check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            raise CudaError(100, "no CUDA device")
        if device >= count:
            raise CudaError(101, f"device {device} requested, {count} present")
        self.dev = self.check(driver.cuDeviceGet(device), "cuDeviceGet")
        self.ctx = self.check(driver.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        self.check(driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.stream = self.check(driver.cuStreamCreate(0), "cuStreamCreate")
        self.modules: dict[str, tuple[Any, Any]] = {}  # key -> (module, function)
        self.flush_buf: Any = None
        self.flush_vectors = 0  # 16-byte elements of flush_buf
        self.helpers: dict[str, Any] | None = None  # device_checks' kernels, loaded on first use
        self.pool: dict[int, list[int]] = {}  # free allocations by size
        total = int(self.check(driver.cuDeviceTotalMem(self.dev), "cuDeviceTotalMem"))
        self.pool_limit = min(POOL_BYTES, total // 8)
        self.pooled_bytes = 0
        # run -> output -> its values, in this process's host memory: a kept run (the oracle's
        # above all) is never on the device while a candidate runs (docs/design.md)
        self.kept: dict[str, dict[str, np.ndarray]] = {}

    # --- plumbing -------------------------------------------------------------------------
    def check(self, result: Any, where: str) -> Any:
        err = result[0] if isinstance(result, tuple) else result
        code = int(err)
        if code != 0:
            raise CudaError(code, where)
        if isinstance(result, tuple):
            return result[1] if len(result) == 2 else result[1:]
        return None

    def attr(self, name: str) -> int:
        a = getattr(self.d.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(self.check(self.d.cuDeviceGetAttribute(a, self.dev), name))

    def sync(self, timeout_s: float, longest_sleep: float = 2e-3) -> None:
        """Wait for the stream, polling, until `timeout_s`: the per-launch watchdog."""
        deadline = time.monotonic() + timeout_s
        sleep = 1e-5
        not_ready = int(self.d.CUresult.CUDA_ERROR_NOT_READY)
        while True:
            (err,) = self.d.cuStreamQuery(self.stream)
            code = int(err)
            if code == 0:
                return
            if code != not_ready:
                raise CudaError(code, "kernel execution")
            if time.monotonic() > deadline:
                raise Timeout(f"the kernel did not finish within {timeout_s:g} s")
            time.sleep(sleep)
            sleep = min(sleep * 2, longest_sleep)

    # --- ops ------------------------------------------------------------------------------
    def facts(self) -> FactsReply:
        d = self.d
        name = self.check(d.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        name = bytes(name).split(b"\0", 1)[0].decode(errors="replace").strip()
        total = self.check(d.cuDeviceTotalMem(self.dev), "cuDeviceTotalMem")
        driver = self.check(d.cuDriverGetVersion(), "cuDriverGetVersion")
        major = self.attr("COMPUTE_CAPABILITY_MAJOR")
        minor = self.attr("COMPUTE_CAPABILITY_MINOR")

        def safe(attr: str) -> int:
            try:
                return self.attr(attr)
            except CudaError:
                return 0

        facts = DeviceFacts(
            name=name,
            compute_capability=(major, minor),
            arch=f"sm_{major}{minor}",
            sm_count=self.attr("MULTIPROCESSOR_COUNT"),
            max_threads_per_block=self.attr("MAX_THREADS_PER_BLOCK"),
            shared_per_block=self.attr("MAX_SHARED_MEMORY_PER_BLOCK"),
            shared_per_block_optin=self.attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            shared_per_sm=self.attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
            registers_per_block=self.attr("MAX_REGISTERS_PER_BLOCK"),
            registers_per_sm=self.attr("MAX_REGISTERS_PER_MULTIPROCESSOR"),
            l2_bytes=self.attr("L2_CACHE_SIZE"),
            memory_bytes=int(total),
            clock_khz=safe("CLOCK_RATE"),
            memory_clock_khz=safe("MEMORY_CLOCK_RATE"),
            memory_bus_width=safe("GLOBAL_MEMORY_BUS_WIDTH"),
        )
        return FactsReply(facts, int(driver))

    def load(self, req: LoadRequest) -> LoadReply | Failure:
        cubin, entry = req.cubin, req.entry
        key = hashlib.sha256(cubin + b"\0" + entry.encode()).hexdigest()[:24]
        if key not in self.modules:
            try:
                module = self.check(self.d.cuModuleLoadData(cubin), "cuModuleLoadData")
            except CudaError as exc:
                return Failure("launch_error", f"cannot load the cubin: {exc}")
            try:
                fn = self.check(self.d.cuModuleGetFunction(module, entry.encode()), entry)
            except CudaError as exc:
                self.d.cuModuleUnload(module)
                return Failure("launch_error", f"no kernel {entry!r} in cubin: {exc}")
            self.modules[key] = (module, fn)
        fn = self.modules[key][1]
        fa = self.d.CUfunction_attribute
        regs = self.d.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
        smem = self.d.cuFuncGetAttribute(fa.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn)
        return LoadReply(key, int(self.check(regs, "attr")), int(self.check(smem, "attr")))

    def unload(self, req: UnloadRequest) -> Pong:
        """cuModuleUnload of a candidate's module: its `__device__` variables go with it. The
        evaluation is over: the runs kept for it (in host memory) go too."""
        self.kept.clear()
        found = self.modules.pop(req.key, None)
        if found is not None:
            self.check(self.d.cuModuleUnload(found[0]), "cuModuleUnload")
        return Pong()

    def _function(self, key: str | None) -> Any:
        if key is None or key not in self.modules:
            raise KeyError(f"kernel {key} is not loaded")
        return self.modules[key][1]

    def _alloc(self, nbytes: int) -> int:
        return int(self.check(self.d.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))

    def _free(self, ptrs: list[int]) -> None:
        for p in ptrs:
            self.d.cuMemFree(p)

    # --- allocations, reused: 128 MB cuMemAlloc / cuMemFree per run is not free -------------
    def _take(self, nbytes: int) -> int:
        """An allocation of exactly `nbytes` (at least 1), from the pool when one is free."""
        size = max(nbytes, 1)
        free = self.pool.get(size)
        if free:
            self.pooled_bytes -= size
            return free.pop()
        try:
            return self._alloc(size)
        except CudaError as exc:
            if exc.code != OUT_OF_MEMORY or not self.pooled_bytes:
                raise
            self._free([base for bases in self.pool.values() for base in bases])
            self.pool, self.pooled_bytes = {}, 0
            return self._alloc(size)

    def _give(self, allocations: list[tuple[int, int]]) -> None:
        """Allocations back to the pool (freed beyond `POOL_BYTES`)."""
        for base, nbytes in allocations:
            size = max(nbytes, 1)
            if self.pooled_bytes + size > self.pool_limit:
                self._free([base])
                continue
            self.pool.setdefault(size, []).append(base)
            self.pooled_bytes += size

    def _fill(self, ptr: int, nbytes: int, pattern: bytes) -> None:
        """Fill `nbytes` at `ptr` with `pattern` repeated: a device memset where it can be one."""
        if not nbytes:
            return
        if len(pattern) == 4 and nbytes % 4 == 0 and ptr % 4 == 0:
            value = int.from_bytes(pattern, "little")
            self.check(self.d.cuMemsetD32(ptr, value, nbytes // 4), "cuMemsetD32")
        elif len(pattern) == 2 and nbytes % 2 == 0 and ptr % 2 == 0:
            value = int.from_bytes(pattern, "little")
            self.check(self.d.cuMemsetD16(ptr, value, nbytes // 2), "cuMemsetD16")
        elif len(set(pattern)) == 1:
            self.check(self.d.cuMemsetD8(ptr, pattern[0], nbytes), "cuMemsetD8")
        else:
            reps = -(-nbytes // len(pattern))
            host = np.frombuffer((pattern * reps)[:nbytes], dtype=np.uint8)
            self.check(self.d.cuMemcpyHtoD(ptr, host.ctypes.data, nbytes), "cuMemcpyHtoD")

    def _fill_data(self, buffers: Sequence[Buffer], placed: Placed) -> None:
        """Each buffer's data (uploaded), generated values or poison, guards untouched; an `in`
        buffer's values are copied aside, to check after the run that they are unchanged."""
        for buf in buffers:
            data = placed.ptrs[buf.name]
            if buf.data is not None:
                host = np.frombuffer(buf.data, dtype=np.uint8)
                if host.size:
                    self.check(
                        self.d.cuMemcpyHtoD(data, host.ctypes.data, host.size), "cuMemcpyHtoD"
                    )
            elif buf.generated is not None:
                self._generate(data, buf)
            elif buf.fill is not None:
                self._generate(data, buf, buf.fill)
            elif buf.poison is not None:
                self._fill(data, buf.nbytes, buf.poison)
            if buf.is_input and buf.nbytes and placed.checked:
                if buf.name not in placed.pristine:
                    placed.pristine[buf.name] = self._take(buf.nbytes)
                    placed.allocations.append((placed.pristine[buf.name], buf.nbytes))
                copy = self.d.cuMemcpyDtoDAsync(
                    placed.pristine[buf.name], data, buf.nbytes, self.stream
                )
                self.check(copy, "cuMemcpyDtoDAsync")

    def _place(self, buffers: Sequence[Buffer], guard: int, checked: bool = True) -> Placed:
        """Guarded allocations (from the pool) filled per `_fill_data`."""
        placed = Placed(guard, checked)
        for buf in buffers:
            band = max(guard, guard_bytes(buf.nbytes)) if guard else 0
            total = buf.offset + buf.nbytes + 2 * band
            base = self._take(total)
            placed.allocations.append((base, total))
            start = base + buf.offset  # (an offset case: the data is not 16-byte aligned)
            if band:
                self.check(self.d.cuMemsetD8(start, GUARD_BYTE, band), "cuMemsetD8")
                end = start + band + buf.nbytes
                self.check(self.d.cuMemsetD8(end, GUARD_BYTE, band), "cuMemsetD8")
            placed.ptrs[buf.name] = start + band
            placed.bases[buf.name] = (base, total)
            placed.guards[buf.name] = band
        self._fill_data(buffers, placed)
        return placed

    def _release(self, placed: Placed) -> None:
        """A run's allocations back to the pool, scrubbed (every output written there is gone
        before another run can take them)."""
        self._give(self._scrub(placed.allocations))

    # --- the worker's own kernels (device_checks) --------------------------------------------
    def _helper(self, name: str) -> Any:
        if self.helpers is None:
            arch = f"sm_{self.attr('COMPUTE_CAPABILITY_MAJOR')}"
            arch += str(self.attr("COMPUTE_CAPABILITY_MINOR"))
            cubin = helper_cubin(arch)
            module = self.check(self.d.cuModuleLoadData(cubin), "cuModuleLoadData (checks)")
            self.helpers = {
                n: self.check(self.d.cuModuleGetFunction(module, n.encode()), n)
                for n in device_checks.HELPER_NAMES
            }
        return self.helpers[name]

    def _call(self, name: str, n: int, args: Sequence[tuple[str, int | float]]) -> None:
        """Launch helper `name` over `n` elements on the worker's stream (no sync)."""
        keep = [np.array([value], dtype=np.dtype(t)) for t, value in args]
        addresses = np.array([a.ctypes.data for a in keep], dtype=np.uint64)
        grid = device_checks.grid_for(n)
        result = self.d.cuLaunchKernel(
            self._helper(name),
            grid,
            1,
            1,
            device_checks.BLOCK,
            1,
            1,
            0,
            self.stream,
            addresses.ctypes.data,
            0,
        )
        self.check(result, name)
        del keep, addresses  # (the launch has copied its parameters)

    def _generate(self, ptr: int, buf: Buffer, values: Generated | None = None) -> None:
        g = values or buf.generated
        assert g is not None
        n = buf.nbytes // storage_dtype(buf.dtype).itemsize
        if not n:
            return
        self._call(
            "cl_generate",
            n,
            [
                ("uint64", ptr),
                ("uint64", n),
                ("int32", DTYPE_CODES[buf.dtype]),
                ("int32", g.kind),
                ("float64", g.a),
                ("float64", g.b),
                ("int64", g.lo),
                ("uint64", g.span),
                ("uint64", g.key),
            ],
        )

    def _keep(
        self, name: str | None, buffers: Sequence[Buffer], placed: Placed, outputs: Sequence[str]
    ) -> None:
        """Copy `outputs` into host memory as the run `name` (replacing one of that name); the
        device allocations are scrubbed when the run releases them."""
        if name is None:
            return
        kept: dict[str, np.ndarray] = {}
        for buf in buffers:
            if buf.name in outputs:
                host = np.empty(buf.nbytes, dtype=np.uint8)
                if buf.nbytes:
                    self.check(
                        self.d.cuMemcpyDtoH(host.ctypes.data, placed.ptrs[buf.name], buf.nbytes),
                        "cuMemcpyDtoH",
                    )
                kept[buf.name] = host
        self.kept[name] = kept

    def _params(self, params: Sequence[Param], ptrs: Mapping[str, int]) -> tuple[Any, list[Any]]:
        """kernelParams: an array of pointers to each argument's bytes (kept alive by `keep`)."""
        keep: list[Any] = []
        for p in params:
            if isinstance(p, BufferArg):
                keep.append(np.array([ptrs[p.name]], dtype=np.uint64))
            elif isinstance(p, BytesArg):
                keep.append(relocated(p, ptrs))
            else:
                keep.append(np.array([p.value], dtype=np.dtype(p.dtype)))
        addresses = np.array([a.ctypes.data for a in keep], dtype=np.uint64)
        keep.append(addresses)
        return addresses.ctypes.data, keep

    def _prepare(self, fn: Any, smem: int) -> None:
        if smem > 48 * 1024:
            fa = self.d.CUfunction_attribute
            attr = fa.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            try:
                self.check(self.d.cuFuncSetAttribute(fn, attr, smem), "cuFuncSetAttribute")
            except CudaError as exc:
                optin = self.attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
                raise CudaError(
                    exc.code,
                    f"{smem} bytes of dynamic shared memory requested; this device allows at most "
                    f"{optin} per block (static shared memory included)",
                ) from None

    def _launch(self, fn: Any, launch: Launch, params: Any) -> None:
        g, b = launch.grid, launch.block
        result = self.d.cuLaunchKernel(
            fn, g[0], g[1], g[2], b[0], b[1], b[2], int(launch.smem), self.stream, params, 0
        )
        code = int(result[0] if isinstance(result, tuple) else result)
        if code != 0:
            raise CudaError(code, f"launch grid={tuple(g)} block={tuple(b)} smem={launch.smem}")

    def run(self, req: RunRequest) -> RunReply:
        """One launch on guarded buffers (from the pool), then the request's checks on the
        device (`guards=False`: exact sizes and no checks, for the sanitizer)."""
        launch = req.launch
        fn = self._function(launch.key)
        self._prepare(fn, int(launch.smem))
        guard = GUARD_BYTES if req.guards else 0
        checks = req.checks if req.guards else None
        t0 = time.perf_counter()
        placed = self._place(launch.buffers, guard, checked=checks is not None)
        try:
            self.sync(CHECK_TIMEOUT_S)  # (the inputs' share of the time, for the benchmarks)
            t1 = time.perf_counter()
            params, keep = self._params(launch.params, placed.ptrs)
            self._launch(fn, launch, params)
            self.sync(float(req.timeout_s))
            del keep
            t2 = time.perf_counter()
            if checks is None:
                return RunReply()
            reply = self._check(launch.buffers, placed, checks)
            self._keep(checks.keep, launch.buffers, placed, checks.outputs)
            seconds = {"inputs": t1 - t0, "run": t2 - t1, "checks": time.perf_counter() - t2}
            return replace(reply, seconds=seconds)
        except Timeout:
            placed.allocations = []  # cuMemFree would wait for the hung kernel: the process exits
            raise
        finally:
            self._release(placed)

    def _ensure_flush(self) -> None:
        """The buffer `_flush` reads: twice the L2 (at least 64 MiB), zeroed once."""
        if self.flush_buf is None:
            l2 = self.attr("L2_CACHE_SIZE")
            nbytes = max(2 * l2, 64 << 20)
            self.flush_vectors = nbytes // 16
            self.flush_buf = self._alloc(self.flush_vectors * 16)
            memset = self.d.cuMemsetD32Async(self.flush_buf, 0, self.flush_vectors * 4, self.stream)
            self.check(memset, "L2 flush buffer")

    def _flush(self) -> None:
        """Enqueue the L2 flush: `cl_flush` reads the whole flush buffer (docs/design.md,
        "Timing": a read leaves clean lines; a memset left dirty ones for the timed kernel)."""
        self._call(
            "cl_flush",
            self.flush_vectors,
            [
                ("uint64", self.flush_buf),
                ("uint64", self.flush_vectors),
                ("uint32", device_checks.FLUSH_NEVER),
            ],
        )

    def time(self, req: TimeRequest) -> TimeReply:
        """Interleaved timing of several launches, each on its own copy of the buffers.

        Before every launch (warm-up and timed, outside the timed region, before the L2 flush)
        each kernel gets inputs no launch has had and its `out` buffers are poisoned again
        (`_Rotation`), so a launch that skips its work leaves poison behind and one that
        replays an earlier result replays it for other inputs. A kernel with `checks` has one
        launch in each of its first batches run on a reference set and checked afterwards
        against the oracle's run on it (kept in host memory until then), inputs included;
        after the timing, every buffer's guards and the last launch's outputs are checked.
        """
        self._ensure_flush()
        plan = req.plan
        timeout_s = float(req.timeout_s)
        placements: list[Placed] = []
        extra: list[tuple[int, int]] = []
        rotations: list[_Rotation] = []
        try:
            for k in req.kernels:
                launch = k.launch
                fn = self._function(launch.key)
                self._prepare(fn, int(launch.smem))
                places: list[tuple[Placed, Callable[[], None], Any]] = []
                for _ in range(placements_for(launch.buffers, plan.placements)):
                    placed = self._place(launch.buffers, GUARD_BYTES, checked=False)
                    placements.append(placed)
                    params, keep = self._params(launch.params, placed.ptrs)
                    places.append((placed, partial(self._launch, fn, launch, params), keep))
                rotations.append(_Rotation(self, k, places, plan.batch, extra))
            # the watchdog scales with the batch: every launch in it may take up to timeout_s
            batch_timeout = timeout_s * max(plan.batch, plan.warmup) * len(rotations)
            samples = timing.time_interleaved(
                self.d,
                self.stream,
                [r.launch for r in rotations],
                self._flush,
                lambda: self.sync(batch_timeout, longest_sleep=TIMING_POLL_S),
                plan,
                check=self.check,
                prepare=[r.prepare for r in rotations],
                after=[r.after for r in rotations],
            )
            self.sync(batch_timeout)
            checks = tuple(r.results() for r in rotations)
            return TimeReply(tuple(tuple(s) for s in samples), checks)
        except Timeout:
            placements, extra = [], []  # cuMemFree would wait for the hung kernel
            raise
        finally:
            self.kept.clear()  # the timing is an evaluation's last use of them (a benchmark's too)
            for placed in placements:
                self._release(placed)
            self._give(self._scrub(extra))

    def _poison_async(self, ptr: int, nbytes: int, pattern: bytes, source: int | None) -> None:
        """Fill `nbytes` at `ptr` with `pattern` on the worker's stream (ordered with the
        launches; a float64 pattern is copied from `source`: no 64-bit memset exists)."""
        if not nbytes:
            return
        if source is not None:
            result = self.d.cuMemcpyDtoDAsync(ptr, source, nbytes, self.stream)
        elif len(pattern) == 4:
            value = int.from_bytes(pattern, "little")
            result = self.d.cuMemsetD32Async(ptr, value, nbytes // 4, self.stream)
        elif len(pattern) == 2:
            value = int.from_bytes(pattern, "little")
            result = self.d.cuMemsetD16Async(ptr, value, nbytes // 2, self.stream)
        else:
            result = self.d.cuMemsetD8Async(ptr, pattern[0], nbytes, self.stream)
        self.check(result, "poison")

    def _copy_async(self, dst: int, src: int, nbytes: int) -> None:
        if nbytes:
            self.check(self.d.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream), "copy")

    def bandwidth(self, req: BandwidthRequest) -> BandwidthReply:
        """Device-to-device copy bandwidth in GB/s (bytes read + written), median of repeats."""
        free, _ = self.check(self.d.cuMemGetInfo(), "cuMemGetInfo")
        nbytes = int(min(req.nbytes, free // 4))
        nbytes -= nbytes % 4096
        src, dst = self._alloc(nbytes), self._alloc(nbytes)
        try:
            self.check(self.d.cuMemsetD8(src, 1, nbytes), "cuMemsetD8")
            ev0 = self.check(self.d.cuEventCreate(0), "cuEventCreate")
            ev1 = self.check(self.d.cuEventCreate(0), "cuEventCreate")
            times = []
            for i in range(int(req.repeats)):
                self.check(self.d.cuEventRecord(ev0, self.stream), "cuEventRecord")
                self.check(self.d.cuMemcpyDtoDAsync(dst, src, nbytes, self.stream), "copy")
                self.check(self.d.cuEventRecord(ev1, self.stream), "cuEventRecord")
                self.sync(30.0)
                if i >= 2:  # warm-up
                    times.append(float(self.check(self.d.cuEventElapsedTime(ev0, ev1), "elapsed")))
            self.d.cuEventDestroy(ev0)
            self.d.cuEventDestroy(ev1)
            ms = timing.median(times)
            return BandwidthReply(2 * nbytes / (ms * 1e-3) / 1e9, nbytes)
        finally:
            self._free([src, dst])

    def handle(self, req: Request) -> Reply:
        try:
            if isinstance(req, PingRequest):
                return Pong()
            if isinstance(req, FactsRequest):
                return self.facts()
            if isinstance(req, LoadRequest):
                return self.load(req)
            if isinstance(req, RunRequest):
                return self.run(req)
            if isinstance(req, TimeRequest):
                return self.time(req)
            if isinstance(req, BandwidthRequest):
                return self.bandwidth(req)
            if isinstance(req, UnloadRequest):
                return self.unload(req)
            if isinstance(req, KeepRequest):
                self.kept[req.name] = {
                    n: np.frombuffer(b, dtype=np.uint8).copy() for n, b in req.outputs.items()
                }
                return Pong()
        except Timeout as exc:
            return Failure("timeout", str(exc), fatal=True)
        except CudaError as exc:
            if (
                exc.code in LAUNCH_ERRORS and "launch" in exc.where
            ) or "shared memory" in exc.where:
                return Failure("launch_error", str(exc))
            return Failure("fault", str(exc), fatal=True)
        return Failure("error", f"unknown op {_op(req)!r}")


class _Rotation:
    """One timed kernel's inputs and checks across its launches (`CudaBackend.time`).

    The launches rotate over `places`, copies of the kernel's buffers (`Plan.placements`), so
    the median averages where buffers land in memory. Fresh launches regenerate every generated
    input (`in` and `inout`: an `inout` is restored as well) with a key no launch has had, and
    copy a hook's data from a rotation of sets; sampled launches (one at a random position in
    each of the first `len(refs)` batches) copy in reference set r, and their buffers are copied
    aside after the launch's end event, to be checked once the timing is over. Every launch's
    `out` buffers are poisoned before it."""

    def __init__(
        self,
        backend: CudaBackend,
        kernel: TimedKernel,
        places: list[tuple[Placed, Callable[[], None], Any]],
        batch: int,
        extra: list[tuple[int, int]],
    ) -> None:
        self.b, self.k, self.extra = backend, kernel, extra
        self.places = [placed for placed, _, _ in places]
        self.launchers = [launcher for _, launcher, _ in places]
        self.keep = [keep for _, _, keep in places]  # the launches' parameters, alive
        self.at = 0  # the place of the launch being prepared (and of the last one, at the end)
        buffers = kernel.launch.buffers
        self.inputs = [buf for buf in buffers if not buf.is_output]
        self.poison: list[tuple[str, int, bytes, int | None]] = []
        for buf in buffers:
            if buf.is_output and buf.poison is not None:
                source = None
                if buf.nbytes and len(buf.poison) not in (1, 2, 4):
                    source = self._alloc(buf.nbytes)
                    backend._fill(source, buf.nbytes, buf.poison)
                self.poison.append((buf.name, buf.nbytes, buf.poison, source))
        # reference sets: their inputs made once, into allocations of their own
        self.sets: list[dict[str, int]] = []
        for ref_buffers, _kept in kernel.refs:
            by_name = {b.name: b for b in ref_buffers}
            made: dict[str, int] = {}
            for buf in self.inputs:
                ref = by_name.get(buf.name)
                if ref is None or ref.nbytes != buf.nbytes:
                    raise ValueError(f"reference set without a matching buffer {buf.name!r}")
                made[buf.name] = self._alloc(buf.nbytes)
                backend._fill_data([ref], Placed(0, False, ptrs={buf.name: made[buf.name]}))
            self.sets.append(made)
        # a hook's data: the launch's own values, then each reference set's, in turn
        self.data_sources: dict[str, list[int]] = {}
        for buf in self.inputs:
            if buf.generated is None:
                own = self._alloc(buf.nbytes)
                backend._copy_async(own, self.places[0].ptrs[buf.name], buf.nbytes)
                self.data_sources[buf.name] = [own] + [made[buf.name] for made in self.sets]
        self.positions = (
            {r * batch + secrets.randbelow(max(batch, 1)): r for r in range(len(self.sets))}
            if kernel.checks
            else {}
        )
        # where each sampled launch's buffers are copied, allocated now (not inside the timing)
        snapped = [
            buf
            for buf in buffers
            if buf.is_input or buf.name in (kernel.checks.outputs if kernel.checks else ())
        ]
        self.spare = {
            index: {buf.name: self._alloc(buf.nbytes) for buf in snapped}
            for index in self.positions
        }
        self.snapshots: dict[int, dict[str, int]] = {}
        self.launches = 0  # warm-up included: the fresh keys' counter and the rotation's
        self.timed = 0
        self.sampled: int | None = None

    def _alloc(self, nbytes: int) -> int:
        ptr = self.b._take(nbytes)
        self.extra.append((ptr, nbytes))
        return ptr

    def prepare(self, timed: bool) -> None:
        b = self.b
        self.at = self.launches % len(self.places)
        ptrs = self.places[self.at].ptrs
        self.sampled = self.positions.get(self.timed) if timed else None
        self.launches += 1
        if self.sampled is not None:
            made = self.sets[self.sampled]
            for buf in self.inputs:
                b._copy_async(ptrs[buf.name], made[buf.name], buf.nbytes)
        else:
            salt = mix(((self.k.fresh & 0xFFFFFF) << 40) ^ self.launches)
            for buf in self.inputs:
                if buf.generated is not None:
                    fresh = replace(buf.generated, key=mix(buf.generated.key ^ salt))
                    b._generate(ptrs[buf.name], buf, fresh)
                else:
                    sources = self.data_sources[buf.name]
                    b._copy_async(ptrs[buf.name], sources[self.launches % len(sources)], buf.nbytes)
        for name, nbytes, pattern, source in self.poison:
            b._poison_async(ptrs[name], nbytes, pattern, source)

    def launch(self) -> None:
        self.launchers[self.at]()

    def after(self, timed: bool) -> None:
        if not timed:
            return
        if self.sampled is not None:
            snap = self.spare[self.timed]
            ptrs = self.places[self.at].ptrs
            for buf in self.k.launch.buffers:
                if buf.name in snap:
                    self.b._copy_async(snap[buf.name], ptrs[buf.name], buf.nbytes)
            self.snapshots[self.timed] = snap
        self.timed += 1

    def results(self) -> TimedChecks | None:
        checks = self.k.checks
        if checks is None:
            return None
        b, buffers = self.b, self.k.launch.buffers
        guards = _worst_guards([b._check(buffers, placed, Checks()) for placed in self.places])
        outputs = [buf for buf in buffers if buf.name in checks.outputs]
        last_place = replace(self.places[self.at], guards={})  # the last launch's
        last = b._check(outputs, last_place, Checks(checks.outputs))
        sampled = []
        for index, snap in sorted(self.snapshots.items()):
            r = self.positions[index]
            made = self.sets[r]
            placed = Placed(
                0,
                True,
                ptrs=snap,
                pristine={buf.name: made[buf.name] for buf in buffers if buf.is_input},
            )
            against = Checks(
                checks.outputs,
                checks.rtol,
                checks.atol,
                against=(self.k.refs[r][1],),
                atol_relative=checks.atol_relative,
            )
            sampled.append((index, b._check(buffers, placed, against)))
        return TimedChecks(guards, last, tuple(sampled))


def _worst_guards(replies: Sequence[RunReply]) -> RunReply:
    """One reply for the guards of every place: each buffer's first damaged band, if any."""
    merged: dict[str, GuardSummary] = {}
    for reply in replies:
        for name, summary in reply.guards.items():
            seen = merged.get(name)
            if seen is None or not (seen.front_changed or seen.back_changed):
                merged[name] = summary
    return replace(replies[0], guards=merged)


def _op(req: Request) -> str:
    """The request's short name in messages: "load", "run", "time" ..."""
    return type(req).__name__.removesuffix("Request").lower()


def _start(device: int) -> tuple[CudaBackend | None, Failure | None]:
    try:
        return CudaBackend(device), None
    except CudaError as exc:
        return None, Failure("no_gpu", f"no usable CUDA GPU: {exc}")
    except Exception as exc:  # the driver library itself is missing
        return None, Failure("no_gpu", f"no CUDA driver: {exc}")


def serve(device: int) -> int:
    exit_with_parent()
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints (ours or a library's) go to stderr
    sys.stdout = sys.stderr
    replies = os.fdopen(reply_fd, "wb")
    requests = os.fdopen(0, "rb")
    backend, failure = _start(device)
    write_message(replies, failure or Ready(os.getpid()))
    while True:
        message = read_message(requests)
        if message is None or isinstance(message, QuitRequest):
            # at once: the driver frees the context with the process, and the parent waits
            replies.close()
            os._exit(0)
        if backend is None:
            assert failure is not None
            write_message(replies, failure)
            continue
        try:
            reply = backend.handle(as_request(message))
        except Exception as exc:  # a bug on our side: report it, keep serving
            reply = Failure("error", f"{type(exc).__name__}: {exc}")
        write_message(replies, reply)
        if isinstance(reply, Failure) and reply.fatal:
            replies.close()
            os._exit(3)  # the context is unusable after a fault or while a kernel hangs


def oneshot(path: str, device: int) -> int:
    with open(path, "rb") as f:
        requests = read_requests(f)
    backend, failure = _start(device)
    if backend is None:
        print(failure.message if failure else "no GPU", file=sys.stderr)
        return 2
    worst = 0
    key = None
    for req in requests:
        if isinstance(req, RunRequest) and req.launch.key is None:
            req = replace(req, launch=replace(req.launch, key=key))
        reply = backend.handle(req)
        if isinstance(reply, LoadReply):
            key = reply.key
        if isinstance(reply, Failure):
            print(f"{_op(req)}: {reply.status}: {reply.message}", file=sys.stderr)
            worst = 1
            if reply.fatal:
                break
    return worst


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--oneshot", metavar="FILE")
    args = parser.parse_args(argv)
    if args.oneshot:
        return oneshot(args.oneshot, args.device)
    return serve(args.device)


if __name__ == "__main__":
    sys.exit(main())
