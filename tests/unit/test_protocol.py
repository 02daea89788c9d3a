"""The worker protocol: every message survives the one framing, large buffers included, a run's
reply is a summary whatever its buffers' sizes, and a damaged frame is a `ProtocolError`, never a
message."""

from __future__ import annotations

import io
import pickle
import time
from dataclasses import replace

import numpy as np
import pytest

from cuda_llm_lsp.evaluate import timing
from cuda_llm_lsp.evaluate.compare import ChangeSummary, GuardSummary, OutputSummary
from cuda_llm_lsp.evaluate.counter import Generated
from cuda_llm_lsp.evaluate.protocol import (
    HEADER,
    BandwidthReply,
    BandwidthRequest,
    Buffer,
    BufferArg,
    Checks,
    FactsReply,
    FactsRequest,
    Failure,
    FrameReader,
    Launch,
    LoadReply,
    LoadRequest,
    Message,
    PingRequest,
    Pong,
    ProtocolError,
    QuitRequest,
    Ready,
    RunReply,
    RunRequest,
    ScalarArg,
    TimedChecks,
    TimedKernel,
    TimeReply,
    TimeRequest,
    UnloadRequest,
    as_reply,
    as_request,
    decode,
    encode,
    frame,
    read_message,
    read_requests,
    write_message,
)
from cuda_llm_lsp.evaluate.recorded import DEFAULT_DEVICE

LAUNCH = Launch(
    key="abc",
    grid=(4, 1, 1),
    block=(256, 1, 1),
    smem=0,
    params=(BufferArg("x"), BufferArg("y"), ScalarArg("int32", 1000)),
    buffers=(
        Buffer(
            "x", 4000, "float32", data=np.arange(1000, dtype=np.float32).tobytes(), is_input=True
        ),
        Buffer("z", 4000, "float32", generated=Generated(1, 5.0, 0.1, key=1 << 63), is_input=True),
        Buffer("y", 4000, "float32", poison=b"\xa5\xa5\xa5\x7f"),
    ),
)

RUN_REPLY = RunReply(
    guards={"x": GuardSummary(), "y": GuardSummary(0, 0, 3, 0, 11)},
    changed={"x": ChangeSummary(1, 7, np.float32(0.5), np.float32(0.0))},
    unwritten={"y": OutputSummary(1000, 1, 999, 999)},
    compared={
        "oracle": {"y": OutputSummary(1000, 0, 0, 0, 10, 3, 5, np.float32(1), np.float32(2), 1.0)}
    },
)

MESSAGES: list[Message] = [
    FactsRequest(),
    LoadRequest(b"\x7fELF cubin", "_Z5twicePKfPfi"),
    RunRequest(LAUNCH, timeout_s=0.5, guards=False),
    RunRequest(LAUNCH, checks=Checks(("y",), 1e-4, 1e-5, keep="oracle", against=("first",))),
    TimeRequest(
        (
            TimedKernel(LAUNCH),
            TimedKernel(LAUNCH, 7, ((LAUNCH.buffers, "reference 0"),), Checks(("y",))),
        ),
        timing.Plan(budget_s=0.3, batch=5),
        timeout_s=2.0,
    ),
    BandwidthRequest(nbytes=1 << 20, repeats=3),
    PingRequest(),
    QuitRequest(),
    Ready(pid=1234),
    Failure("fault", "kernel execution: CUDA error 700 (illegal memory access)", fatal=True),
    FactsReply(DEFAULT_DEVICE, driver_version=12040),
    LoadReply("abc", registers=32, static_smem=0),
    RUN_REPLY,
    TimeReply(
        ((0.5, 0.25), (0.125,)), (None, TimedChecks(RunReply(), RUN_REPLY, ((3, RUN_REPLY),)))
    ),
    UnloadRequest("abc"),
    BandwidthReply(gbs=3000.0, nbytes=1 << 30),
    Pong(),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: Message) -> None:
    assert decode(encode(message)) == message
    stream = io.BytesIO()
    write_message(stream, message)
    assert stream.getvalue() == frame(message)
    stream.seek(0)
    assert read_message(stream) == message
    assert read_message(stream) is None  # end of stream


def test_requests_and_replies_are_told_apart() -> None:
    assert as_request(PingRequest()) == PingRequest()
    assert as_reply(Pong()) == Pong()
    with pytest.raises(ProtocolError, match="reply where a request belongs"):
        as_request(Pong())
    with pytest.raises(ProtocolError, match="request where a reply belongs"):
        as_reply(PingRequest())


def test_a_run_reply_is_a_summary_whatever_the_buffer_sizes() -> None:
    """Only summaries cross the pipe: a 128 MB output's reply is a few hundred bytes."""
    big = replace(
        LAUNCH, buffers=tuple(replace(b, nbytes=128 << 20, data=None) for b in LAUNCH.buffers[1:])
    )
    assert len(frame(RunRequest(big, checks=Checks(("y",))))) < 2048
    assert len(frame(RUN_REPLY)) < 2048


def test_a_large_buffer_arrives_whole_through_the_frame_reader_in_chunks() -> None:
    """A hook's inputs still travel as data (64 MB here)."""
    big = np.random.default_rng(0).random(16 << 20, dtype=np.float32)  # 64 MB
    request = RunRequest(replace(LAUNCH, buffers=(Buffer("y", big.nbytes, data=big.tobytes()),)))
    data = frame(request) + frame(Pong())
    reader = FrameReader()
    start = time.perf_counter()
    got = []
    for i in range(0, len(data), 1 << 22):  # as the parent reads the pipe: 4 MiB at a time
        reader.feed(data[i : i + (1 << 22)])
        while (message := reader.next()) is not None:
            got.append(message)
    elapsed = time.perf_counter() - start
    assert len(got) == 2 and got[1] == Pong()
    assert isinstance(got[0], RunRequest)
    data_y = got[0].launch.buffers[0].data
    assert data_y is not None and np.array_equal(np.frombuffer(data_y, dtype=np.float32), big)
    assert elapsed < 10.0, f"a 64 MB frame took {elapsed:.1f} s"


def test_a_truncated_body_is_a_protocol_error() -> None:
    body = encode(RUN_REPLY)
    with pytest.raises(ProtocolError, match="undecodable frame"):
        decode(body[: len(body) // 2])


def test_garbage_and_foreign_objects_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match="undecodable frame"):
        decode(b"\x00not a pickle at all")
    with pytest.raises(ProtocolError, match="not a protocol message: dict"):
        decode(pickle.dumps({"op": "run"}))
    with pytest.raises(ProtocolError, match="not a protocol message: dict"):
        encode({"op": "run"})  # type: ignore[arg-type]


def test_a_frame_cut_short_is_the_end_of_the_stream() -> None:
    data = frame(Pong()) + frame(RUN_REPLY)[:-10]
    stream = io.BytesIO(data)
    assert read_message(stream) == Pong()
    assert read_message(stream) is None
    reader = FrameReader()
    reader.feed(data)
    assert reader.next() == Pong()
    assert reader.next() is None  # waits for the rest
    assert reader.next() is None


def test_a_malformed_frame_in_the_reader_is_a_protocol_error_and_is_skipped() -> None:
    garbage = b"\xff" * 16
    reader = FrameReader()
    reader.feed(HEADER.pack(len(garbage)) + garbage + frame(Pong()))
    with pytest.raises(ProtocolError):
        reader.next()
    assert reader.next() == Pong()


def test_a_oneshot_file_holds_requests_only() -> None:
    requests = [LoadRequest(b"cubin", "k"), RunRequest(LAUNCH, guards=False)]
    assert read_requests(io.BytesIO(b"".join(frame(r) for r in requests))) == requests
    with pytest.raises(ProtocolError):
        read_requests(io.BytesIO(frame(Pong())))
