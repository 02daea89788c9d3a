"""The parent's side of the worker pipe: large replies arrive whole and in linear time.

A 16M-element case sends back buffers of 64 MB each; a reply buffer grown with `bytes +=`
made that quadratic (minutes per evaluation on the H100 machine's CPU). This reads a real
pipe fed by a thread, as the worker's stdout is read.
"""

from __future__ import annotations

import os
import pickle
import struct
import threading
import time
from types import SimpleNamespace

import numpy as np

from cuda_llm_lsp.evaluate.pool import _Process


def _reader(payloads: list[dict]) -> _Process:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as out:
            for payload in payloads:
                body = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
                out.write(struct.pack("<Q", len(body)) + body)

    threading.Thread(target=feed, daemon=True).start()
    process = _Process.__new__(_Process)
    process._buffer = bytearray()
    process.proc = SimpleNamespace(stdout=os.fdopen(read_fd, "rb"))  # type: ignore[assignment]
    return process


def test_large_replies_arrive_whole_and_fast() -> None:
    big = np.arange(16 << 20, dtype=np.float32)  # 64 MB, as one output of a 16M-element case
    process = _reader([{"buffers": {"y": big.tobytes()}}, {"status": "ok"}])
    start = time.perf_counter()
    first = process.receive(60.0, threading.Event())
    elapsed = time.perf_counter() - start
    assert first is not None
    assert np.array_equal(np.frombuffer(first["buffers"]["y"], dtype=np.float32), big)
    assert process.receive(5.0, threading.Event()) == {"status": "ok"}  # framing kept
    assert elapsed < 10.0, f"a 64 MB reply took {elapsed:.1f} s"


def test_a_closed_pipe_is_end_of_file() -> None:
    process = _reader([])
    assert process.receive(5.0, threading.Event()) is None
