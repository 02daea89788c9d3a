"""The GPU worker's protocol: typed requests and replies, and the one framing they travel in.

Every message between the evaluator and its worker process (and in a one-shot file for
compute-sanitizer or ncu) is one of the frozen dataclasses below, framed as an 8-byte
little-endian length followed by the body: the message pickled at the highest protocol, which
carries large buffers as raw bytes without a conversion. Frames come only from our own processes
(candidates reach the worker as cubins, run as device code); `decode` still checks that a body
holds a message and raises `ProtocolError` on anything else.

Only summaries cross the pipe, never arrays. Inputs travel as descriptions (`Generated`: the
worker makes the values on the GPU from a counter-based generator), except a user hook's arrays
(`Buffer.data`). The worker checks each run on the device (`Checks`: guard bands, inputs
unchanged, unwritten outputs, outputs against a run it kept) and answers with `RunReply`'s
summaries; `judge` words them into statuses and messages.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Literal

from cuda_llm_lsp.evaluate.compare import ChangeSummary, GuardSummary, OutputSummary
from cuda_llm_lsp.evaluate.counter import Generated
from cuda_llm_lsp.evaluate.timing import Plan
from cuda_llm_lsp.evaluate.types import DeviceFacts

HEADER = struct.Struct("<Q")


class ProtocolError(ValueError):
    """A frame that does not hold one message of this protocol."""


# --- what a launch needs ----------------------------------------------------------------------
@dataclass(frozen=True)
class Buffer:
    """One device buffer of a launch: `data` uploaded, values `generated` on the device, or
    filled with `poison` (an output). `dtype`: the spec's element type (what checks compare)."""

    name: str
    nbytes: int
    dtype: str = "uint8"
    data: bytes | None = None
    generated: Generated | None = None
    poison: bytes | None = None  # one element's bit pattern, repeated over the buffer
    is_input: bool = False  # an `in` buffer: checked unchanged after each run
    fill: Generated | None = None  # an `out` buffer pre-filled with plausible values, not poison
    offset: int = 0  # bytes past a 256-byte-aligned base (hidden offset cases)

    @property
    def is_output(self) -> bool:
        """Poisoned (or pre-filled) before the run (`out`): what every launch must write."""
        return self.data is None and self.generated is None


@dataclass(frozen=True)
class BufferArg:
    """A kernel parameter that is the device address of the launch's buffer `name`."""

    name: str


@dataclass(frozen=True)
class ScalarArg:
    """A kernel parameter passed by value, packed as the numpy `dtype`."""

    dtype: str
    value: int | float


@dataclass(frozen=True)
class BytesArg:
    """A kernel parameter passed as raw bytes (a captured struct), with the device address of
    buffer `name` plus `delta` written over the 8 bytes at each `(at, name, delta)`."""

    raw: bytes
    relocations: tuple[tuple[int, str, int], ...] = ()


Param = BufferArg | ScalarArg | BytesArg


@dataclass(frozen=True)
class Launch:
    """One kernel launch on its own buffers: what `RunRequest` and `TimeRequest` run."""

    key: str | None  # a `LoadReply.key`; None in a one-shot file: the kernel loaded last
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    params: tuple[Param, ...]
    buffers: tuple[Buffer, ...]

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.buffers)


# --- requests ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class FactsRequest:
    """The device's name, limits and driver version."""


@dataclass(frozen=True)
class LoadRequest:
    cubin: bytes
    entry: str  # the lowered symbol


@dataclass(frozen=True)
class Checks:
    """What the worker checks after a run, on the device: every buffer's guard bands, every
    `in` buffer unchanged, each of `outputs` alone (unwritten elements) and against the same
    output of each run named in `against`; `keep` names this run's outputs for later ones
    (replacing a run kept under that name; every kept run is dropped after a `TimeRequest` and
    on an `UnloadRequest`, each the end of an evaluation)."""

    outputs: tuple[str, ...] = ()
    rtol: float = 0.0
    atol: float = 0.0
    keep: str | None = None
    against: tuple[str, ...] = ()
    finite: bool = False  # count non-finite elements of each floating-point output
    atol_relative: bool = False  # atol is a type's default: times min(1, mean |expected|)


@dataclass(frozen=True)
class RunRequest:
    """One launch on its own buffers; `guards=False` (the sanitizer's mode) allocates exact
    sizes, so that memcheck sees any access past a buffer, and checks nothing."""

    launch: Launch
    timeout_s: float = 10.0
    guards: bool = True
    checks: Checks | None = None


@dataclass(frozen=True)
class TimedKernel:
    """A kernel to time. Before every launch (outside the timed region) its generated inputs
    (`in` and `inout`) are made again with a key no launch has had (`fresh` salts it), a hook's
    data is copied in from a rotation of sets, and `out` buffers are re-poisoned. With `checks`,
    the worker picks one launch per batch of the first `len(refs)` batches (positions the kernel
    cannot know) to run on reference set r (`refs[r]`: its input buffers and the kept run of the
    oracle on them), and checks that launch's outputs against the reference and its inputs
    unchanged; after the timing, every buffer's guards and the last launch's outputs."""

    launch: Launch
    fresh: int = 0
    refs: tuple[tuple[tuple[Buffer, ...], str], ...] = ()
    checks: Checks | None = None


@dataclass(frozen=True)
class TimeRequest:
    kernels: tuple[TimedKernel, ...]
    plan: Plan
    timeout_s: float = 10.0  # per launch


@dataclass(frozen=True)
class BandwidthRequest:
    """Device-to-device copy bandwidth, for the reports' fraction of peak."""

    nbytes: int = 1 << 30
    repeats: int = 12


@dataclass(frozen=True)
class UnloadRequest:
    """Unload a candidate's module: no `__device__` state survives into a later evaluation
    (nor does any kept run: the worker drops them too)."""

    key: str


@dataclass(frozen=True)
class KeepRequest:
    """Keep `outputs` (name -> raw bytes) as the run `name`, as if a launch had left them: a
    capture's outputs, which the original's run is then checked against (`Checks.against`)."""

    name: str
    outputs: Mapping[str, bytes]


@dataclass(frozen=True)
class PingRequest:
    pass


@dataclass(frozen=True)
class QuitRequest:
    pass


Request = (
    FactsRequest
    | LoadRequest
    | RunRequest
    | TimeRequest
    | BandwidthRequest
    | UnloadRequest
    | KeepRequest
    | PingRequest
    | QuitRequest
)


# --- replies ----------------------------------------------------------------------------------
FailureStatus = Literal["launch_error", "timeout", "fault", "no_gpu", "error"]


@dataclass(frozen=True)
class Ready:
    """The worker's first message: its CUDA context is up."""

    pid: int


@dataclass(frozen=True)
class Failure:
    """A request that failed. `launch_error`: the context survives (a bad launch configuration);
    `fault` / `timeout`: the context is lost, `fatal` is set and the worker exits after replying;
    `no_gpu`: no driver or device (the answer to every request); `error`: a bug on our side."""

    status: FailureStatus
    message: str
    fatal: bool = False


@dataclass(frozen=True)
class FactsReply:
    facts: DeviceFacts  # without the measured fields (bandwidth, peaks)
    driver_version: int


@dataclass(frozen=True)
class LoadReply:
    key: str  # names the loaded kernel in later launches of this worker process
    registers: int
    static_smem: int


@dataclass(frozen=True)
class RunReply:
    """What the checks found after one launch (empty where nothing was checked): guard bands
    per buffer, changed `in` buffers, each checked output alone, and each checked output
    against each kept run (`compared[run][output]`)."""

    guards: Mapping[str, GuardSummary] = field(default_factory=dict)
    changed: Mapping[str, ChangeSummary] = field(default_factory=dict)
    unwritten: Mapping[str, OutputSummary] = field(default_factory=dict)
    compared: Mapping[str, Mapping[str, OutputSummary]] = field(default_factory=dict)
    nonfinite: Mapping[str, int] = field(default_factory=dict)  # with `Checks.finite`
    seconds: Mapping[str, float] = field(default_factory=dict)  # "inputs", "run", "checks"


@dataclass(frozen=True)
class TimedChecks:
    """What the checks of a timed kernel found: every buffer's guard bands after all its
    launches (`guards`), the outputs the last timed launch left alone (`last`: unwritten
    elements; its inputs were new, there is no reference), and each sampled launch
    (`sampled`: its 0-based index among the timed launches and its checks against the
    reference, inputs unchanged included)."""

    guards: RunReply
    last: RunReply
    sampled: tuple[tuple[int, RunReply], ...] = ()


@dataclass(frozen=True)
class TimeReply:
    samples: tuple[tuple[float, ...], ...]  # milliseconds per launch, per kernel
    checks: tuple[TimedChecks | None, ...]  # per kernel


@dataclass(frozen=True)
class BandwidthReply:
    gbs: float  # bytes read + written per second / 1e9
    nbytes: int


@dataclass(frozen=True)
class Pong:
    pass


Reply = Ready | Failure | FactsReply | LoadReply | RunReply | TimeReply | BandwidthReply | Pong
Message = Request | Reply


# --- framing ----------------------------------------------------------------------------------
def encode(message: Message) -> bytes:
    """A frame's body: the message, pickled (large `bytes` fields are copied in as they are)."""
    if not isinstance(message, Message):
        raise ProtocolError(f"not a protocol message: {type(message).__name__}")
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def decode(body: bytes | bytearray | memoryview) -> Message:
    """The message in a frame's body; `ProtocolError` for a truncated or foreign body."""
    try:
        message = pickle.loads(body)
    except Exception as exc:  # a damaged pickle fails in many ways
        raise ProtocolError(f"undecodable frame ({len(body)} bytes): {exc!r}") from exc
    if not isinstance(message, Message):
        raise ProtocolError(f"not a protocol message: {type(message).__name__}")
    return message


def frame(message: Message) -> bytes:
    """The whole frame: length, then body (for files and tests; streams use `write_message`)."""
    body = encode(message)
    return HEADER.pack(len(body)) + body


def write_message(stream: IO[bytes], message: Message) -> None:
    body = encode(message)
    stream.write(HEADER.pack(len(body)))
    stream.write(body)  # not concatenated: a body can be hundreds of MB
    stream.flush()


def read_message(stream: IO[bytes]) -> Message | None:
    """The next message from a blocking stream; None at its end (a frame cut short included)."""
    header = _read_exact(stream, HEADER.size)
    if header is None:
        return None
    (length,) = HEADER.unpack(header)
    body = _read_exact(stream, length)
    if body is None:
        return None
    return decode(body)


def read_requests(stream: IO[bytes]) -> list[Request]:
    """Every request of a stream of frames (a one-shot file)."""
    requests = []
    while (message := read_message(stream)) is not None:
        requests.append(as_request(message))
    return requests


def as_request(message: Message) -> Request:
    if not isinstance(message, Request):
        raise ProtocolError(f"a reply where a request belongs: {type(message).__name__}")
    return message


def as_reply(message: Message) -> Reply:
    if not isinstance(message, Reply):
        raise ProtocolError(f"a request where a reply belongs: {type(message).__name__}")
    return message


def _read_exact(stream: IO[bytes], n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class FrameReader:
    """Frames from chunks as a non-blocking reader gets them (the parent polls the pipe with a
    deadline). A `bytearray` keeps appending amortised O(1): `bytes +=` made a 128 MB reply cost
    minutes of copying."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._need: int | None = None

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk

    def next(self) -> Message | None:
        """The next whole message, or None until more bytes arrive."""
        if self._need is None and len(self._buffer) >= HEADER.size:
            (self._need,) = HEADER.unpack_from(self._buffer)
        if self._need is None or len(self._buffer) < HEADER.size + self._need:
            return None
        end = HEADER.size + self._need
        self._need = None
        try:
            with memoryview(self._buffer) as view, view[HEADER.size : end] as body:
                return decode(body)  # no copy of the body before unpickling
        finally:
            del self._buffer[:end]
