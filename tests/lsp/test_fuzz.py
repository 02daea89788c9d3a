"""The server survives what an adversarial editor sends (issue 20's acceptance); so does the CLI.

One real server process on stdio (`tests/support/raw_lsp.py`) gets, in batches: every reproducer
of issue 20 (documents that crashed, hung or silenced it; bad params; settings of 1e400; specs
that overflow or nest 5,000 deep; 10,000 nested `#if`; CR-only, BOM and `#line` files; huge
inputs), then seeded random variants: mutated examples, odd line endings, malformed JSON-RPC,
bad params and huge numbers. After each batch: the process is alive, a known-good file's
diagnostics are right within 5 s, the server's RSS stays bounded, stderr has no traceback.
Finally `shutdown` refuses later requests, and `exit` ends the process at once with status 0
while a compile runs. Bounded: a fixed seed and count, well under two minutes on two cores.

`test_cli_*`: `cuda-llm check` on every reproducer file ends within a time limit with a clear
message and a documented exit status (README, CLI: 0 clean, 1 problems found, 2 not checkable).
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw_lsp import ROOT, RawServer, server_env

EXAMPLES = sorted((ROOT / "examples").rglob("*.cu"))
GOOD = (Path(__file__).parent / "data" / "broken.cu").read_text()  # one known error, line 9
BROKEN = (ROOT / "examples" / "errors" / "broken.cu").read_text()  # "facter", line 9
SEED = 20
MUTATIONS = 150
RSS_GROWTH_MB = 700  # over the server's RSS after its first compile
DIAGNOSTICS_S = 5.0  # the known-good file's diagnostics, after each batch
COMPILE_TIMEOUT_S = 2  # NVRTC's limit for the hanging reproducers (cudaLlm.compileTimeoutS)
CLI_LIMIT_S = 60  # one `cuda-llm check` of a reproducer, NVRTC's own timeout included

SPEC = """/* @cuda-llm
sizes.n = [1, 1024]
grid = {grid}
block = 256
args.x = "float32[n]"
args.n = "n"
*/
extern "C" __global__ void k(float* x, int n) {{ int i = blockIdx.x; if (i < n) x[i] = 0; }}
"""


def _spec(grid: str, extra: str = "", sizes: str = "[1, 1024]") -> str:
    text = SPEC.format(grid=grid).replace("sizes.n = [1, 1024]", f"sizes.n = {sizes}")
    return text.replace("block = 256", f"block = 256\n{extra}" if extra else "block = 256")


def _isolated_compiles() -> bool:
    """Whether NVRTC runs in killable processes (issue 20 items 1-3): their reproducers need it."""
    try:
        from cuda_llm_lsp.compile import isolated  # noqa: F401
        from cuda_llm_lsp.config import Settings

        return hasattr(Settings(), "compile_timeout_s")
    except ImportError:
        return False


def reproducers(tmp: Path) -> dict[str, tuple[str, Any]]:
    """name -> (text, expectation): a (line, substring) diagnostic, "any" or "none" (no error)."""
    found: dict[str, tuple[str, Any]] = {
        "spec: cdiv(1e308 * 10, 1)": (_spec('"cdiv(1e308 * 10, 1)"'), (2, "overflows")),
        "spec: inf - inf": (_spec('"cdiv(1e308*10 - 1e308*10, 1)"'), (2, "overflows")),
        "spec: 1e400 literal": (_spec('"1e400"'), (2, "overflows")),
        "spec: TOML 5,000 deep": (
            _spec("1", "a = " + "[" * 5000 + "]" * 5000),
            (4, "nests"),
        ),
        "spec: 10^6 sizes": (_spec("1", sizes="[" + ",".join(["4"] * 10**6) + "]"), (0, "limit")),
        "spec: 1,000 cases": (_spec("1", sizes="[" + ",".join(["4"] * 1000) + "]"), (1, "cases")),
        "10,000 nested #if": (
            "#if 1\n" * 10_000 + "__global__ void k(float* x) { x[0] = facter; }\n"
            "" + "#endif\n" * 10_000,
            (10_000, "facter"),
        ),
        "CR-only broken.cu": (BROKEN.replace("\n", "\r"), (8, "facter")),
        "CRLF broken.cu": (BROKEN.replace("\n", "\r\n"), (8, "facter")),
        "BOM broken.cu": ("\ufeff" + BROKEN, (8, "facter")),
        "#line 1000": (
            BROKEN.replace("#include <cuda_runtime.h>", "#include <cuda_runtime.h>\n#line 1000"),
            (9, "facter"),
        ),
        "NUL bytes": ("__global__ void k(float* x) {\0 x[0] = 1; }\n", "any"),
        "lone surrogate": ("__global__ void k(float* x) { x[0] = 1; } // \udc80\n", "none"),
    }
    if _isolated_compiles():
        fifo = tmp / "fifo"
        if not fifo.exists():
            os.mkfifo(fifo)
        doubling = "#define A0 x[0]\n" + "".join(
            f"#define A{i} A{i - 1} + A{i - 1}\n" for i in range(1, 31)
        )
        found.update(
            {
                "3,000 nested parentheses": (
                    "__global__ void k(float* x) { x[0] = "
                    + "(" * 3000
                    + "1"
                    + ")" * 3000
                    + "; }\n",
                    "any",
                ),
                "#include of a FIFO": (
                    f'__global__ void k(float* x) {{\n#include "{fifo}"\n x[0] = 1; }}\n',
                    # refused on its line, never opened (a compile once waited its limit here)
                    (1, "not a regular file"),
                ),
                "30 doubling macros": (
                    doubling + "__global__ void k(float* x) { x[0] = A30; }\n",
                    (0, "longer than"),
                ),
                "5,000 kernels": (
                    "".join(
                        f"__global__ void k{i}(float* x) {{ x[{i}] = {i}; }}\n" for i in range(5000)
                    ),
                    "any",
                ),
                "20 MB file": (("// " + "x" * 80 + "\n") * 240_000, "any"),
            }
        )
    return found


# --- the server ----------------------------------------------------------------------------


class Fuzz:
    """The server under test, its known-good document and the checks run after each batch."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.server = RawServer(env=server_env(tmp))
        options = (
            '{"cudaLlm": {"debounceMs": 0, "rounds": 1e400, "candidates": -1e400, '
            f'"compileTimeoutS": {COMPILE_TIMEOUT_S}}}}}'
        )
        self.server.initialize(options)
        self.good_uri = self.server.open(tmp / "good.cu", GOOD)
        self.good_version = 1
        self._check_good()
        self.rss_limit = self.server.rss_mb() + RSS_GROWTH_MB
        self.versions: dict[str, int] = {}

    def _check_good(self) -> None:
        found = self.server.diagnostics(self.good_uri, self.good_version, timeout=60)
        errors = [d for d in found if d.get("severity") == 1]
        assert len(errors) == 1 and "undefined_factor" in errors[0]["message"], found
        assert errors[0]["range"]["start"]["line"] == 8, errors

    def check(self, batch: str) -> None:
        """The server alive, correct within 5 s, bounded in memory, no traceback."""
        server = self.server
        assert server.alive(), f"the server died in batch {batch!r}:\n{server.stderr()[-3000:]}"
        self.good_version += 1
        server.change(self.good_uri, GOOD + f"// after {batch}\n", self.good_version)
        started = time.monotonic()
        found = server.diagnostics(self.good_uri, self.good_version, timeout=DIAGNOSTICS_S)
        errors = [d for d in found if d.get("severity") == 1]
        assert len(errors) == 1 and "undefined_factor" in errors[0]["message"], (batch, found)
        assert errors[0]["range"]["start"]["line"] == 8, (batch, errors)
        assert time.monotonic() - started <= DIAGNOSTICS_S
        assert server.rss_mb() <= self.rss_limit, (batch, server.rss_mb(), self.rss_limit)
        stderr = server.stderr()
        assert "Traceback" not in stderr, f"batch {batch!r}:\n{stderr[-5000:]}"

    def document(self, name: str, text: str) -> tuple[str, int]:
        """Open `name` (or change it, when open); returns its uri and version."""
        path = self.tmp / (re.sub(r"\W+", "_", name) + ".cu")
        uri = path.resolve().as_uri()
        version = self.versions.get(uri, 0) + 1
        self.versions[uri] = version
        if version == 1:
            self.server.open(path, text)
        else:
            self.server.change(uri, text, version)
        return uri, version

    def answered(self, request_id: int, timeout: float = 10) -> dict[str, Any]:
        reply = self.server.response(request_id, timeout=timeout)
        assert "result" in reply or "error" in reply, reply
        return reply


@pytest.fixture
def fuzz(tmp_path: Path) -> Iterator[Fuzz]:
    f = Fuzz(tmp_path)
    yield f
    f.server.close()


def _bad_positions(rng: random.Random) -> list[str]:
    fixed = [
        '{"line": -1, "character": 0}',
        '{"line": 0, "character": 1.5}',
        "null",
        "[]",
        '{"line": 1e400, "character": 0}',
        '{"line": "0", "character": 0}',
        '{"character": 2}',
        '{"line": 99999999999999999999, "character": 0}',
        '{"line": true, "character": false}',
        '{"line": 0, "character": 2147483647}',
    ]
    numbers = ["-7", "0.5", "1e308", "-0", "2147483648", "1E2", "null", '"x"', "{}"]
    return fixed + [
        f'{{"line": {rng.choice(numbers)}, "character": {rng.choice(numbers)}}}' for _ in range(10)
    ]


MALFORMED = [
    "not json at all",
    "{",
    '{"jsonrpc": "2.0", "id": 1',
    "[]",
    '[{"jsonrpc": "2.0", "id": 9001, "method": "shutdown"}]',
    "null",
    "12345",
    '"a string"',
    '{"jsonrpc": "1.0", "id": 9002, "method": "textDocument/hover", "params": {}}',
    '{"id": 9003, "method": "textDocument/hover", "params": {}}',
    '{"jsonrpc": "2.0", "id": {"nested": 1}, "method": "textDocument/hover", "params": {}}',
    '{"jsonrpc": "2.0", "id": null, "method": "textDocument/hover", "params": {}}',
    '{"jsonrpc": "2.0", "id": 9004, "method": null, "params": {}}',
    '{"jsonrpc": "2.0", "id": 9005, "method": ["x"], "params": {}}',
    '{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": "text"}',
    '{"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {"textDocument": {}}}',
    '{"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": [1]}}',
    '{"jsonrpc": "2.0", "id": 9006, "result": {"unexpected": "response"}}',
    '{"jsonrpc": "2.0", "id": 9007, "error": {"code": "x"}}',
    '{"jsonrpc": "2.0", "id": 9008, "method": "workspace/executeCommand", '
    '"params": {"command": "cudaLlm.optimize", "arguments": [null, 1e400, [], {}]}}',
    '{"jsonrpc": "2.0", "id": 9009, "method": "workspace/executeCommand", '
    '"params": {"command": "no.such.command", "arguments": "x"}}',
    '{"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", '
    '"params": {"settings": {"cudaLlm": {"rounds": 1e400, "debounceMs": -1e400, '
    '"defines": [1e400], "includePaths": {"a": 1}, "model": null, "arch": ""}}}}',
    '{"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", '
    '"params": {"settings": {"cudaLlm": {"debounceMs": 0}}}}',
    "[" * 100_000 + "]" * 100_000,
    '{"jsonrpc": "2.0", "id": 9010, "method": "textDocument/hover", "params": '
    + '{"a": ' * 3000
    + "1"
    + "}" * 3000
    + "}",
]


ODD = ["\r", "\r\n", "\ufeff", "\u2028", "\x0c", "\t", "{", "}", "(", ")", "/*", "*/", '"',
       "#if 1\n", "#endif\n", "\\\n", "é", "\U0001f600", "__global__ ", "<<<", ">>>",
       "#line 99999\n", "/* @cuda-llm\ngrid = 1e400\n*/\n"]  # fmt: skip


COMMANDS = ("cudaLlm.optimize", "cudaLlm.benchmark", "cudaLlm.accept", "cudaLlm.reject",
            "cudaLlm.showSuggestion", "cudaLlm.addSpec", "cudaLlm.showResources",
            "cudaLlm.tune")  # fmt: skip


def _mutate(rng: random.Random, text: str) -> str:
    """One seeded random edit: delete, duplicate, insert odd characters or swap line endings."""
    if not text:
        return "x"
    kind = rng.randrange(6)
    at = rng.randrange(len(text))
    span = rng.randint(1, 40)
    if kind == 0:
        return text[:at] + text[at + span :]
    if kind == 1:
        return text[:at] + text[at : at + span] * rng.randint(2, 20) + text[at:]
    if kind == 2:
        odd = rng.choice(ODD)
        return text[:at] + odd * rng.randint(1, 5) + text[at:]
    if kind == 3:
        return text.replace("\n", rng.choice(["\r", "\r\n", "\n\r"]))
    if kind == 4:
        return text[:at]
    return text[:at] + "".join(chr(rng.randrange(1, 0x2FF)) for _ in range(span)) + text[at:]


def _diagnostic_ok(found: list[dict[str, Any]], expectation: Any) -> bool:
    if expectation == "any":
        return True
    if expectation == "none":
        return not any(d.get("severity") == 1 for d in found)
    line, needle = expectation
    return any(d["range"]["start"]["line"] == line and needle in d["message"] for d in found)


def test_the_server_survives_the_fuzz(fuzz: Fuzz) -> None:
    started = time.monotonic()
    server = fuzz.server
    rng = random.Random(SEED)

    # settings of 1e400 in initializationOptions were reported, not fatal
    assert any(
        m.get("method") == "window/showMessage" and "cudaLlm.rounds" in m["params"]["message"]
        for m in server.messages
    )

    # issue 20's reproducers, each checked for its diagnostic (at the right line)
    waiting = []
    for name, (text, expectation) in reproducers(fuzz.tmp).items():
        uri, version = fuzz.document(name, text)
        waiting.append((name, uri, version, expectation))
    for name, uri, version, expectation in waiting:
        found = server.diagnostics(uri, version, timeout=60)
        assert _diagnostic_ok(found, expectation), (name, expectation, found[:5])
    fuzz.check("reproducers")

    # bad params, including huge numbers: every request answered
    uri, _ = fuzz.document("saxpy", (ROOT / "examples" / "saxpy.cu").read_text())
    for position in _bad_positions(rng):
        for method in ("textDocument/hover", "textDocument/codeAction"):
            params = (
                f'{{"textDocument": {{"uri": "{uri}"}}, "position": {position}, '
                f'"range": {{"start": {position}, "end": {position}}}, '
                '"context": {"diagnostics": []}}'
            )
            reply = fuzz.answered(server.request(method, raw_params=params))
            if "error" in reply:
                assert reply["error"]["code"] == -32602, reply
    methods = (
        "textDocument/hover",
        "textDocument/codeLens",
        "textDocument/documentSymbol",
        "textDocument/codeAction",
        "workspace/executeCommand",
        "initialize",
    )
    for method in methods:
        fuzz.answered(server.request(method, raw_params=rng.choice(["null", "[]", "{}", "7"])))
    fuzz.check("bad params")

    # well-typed requests about documents never opened, and commands with odd arguments
    unknown = (fuzz.tmp / "never-opened.cu").resolve().as_uri()
    position = {"line": 3, "character": 4}
    for target in (unknown, "untitled:Untitled-1", "file:///dev/zero", "not a uri", ""):
        document = {"textDocument": {"uri": target}}
        where = {"start": position, "end": position}
        fuzz.answered(server.request("textDocument/hover", {**document, "position": position}))
        fuzz.answered(server.request("textDocument/codeLens", document))
        fuzz.answered(server.request("textDocument/documentSymbol", document))
        context = {"diagnostics": []}
        fuzz.answered(
            server.request(
                "textDocument/codeAction", {**document, "range": where, "context": context}
            )
        )
    for command in COMMANDS:
        for arguments in ([], [None], [unknown, "k"], [{"uri": unknown, "kernel": 5}], ["x"] * 50):
            params = {"command": command, "arguments": arguments}
            fuzz.answered(server.request("workspace/executeCommand", params), timeout=30)
    fuzz.check("odd targets")

    # malformed JSON-RPC
    for body in MALFORMED:
        server.send(body)
    server.send_bytes(b"X-Unknown: 1\r\n" + b"Content-Length: 2\r\n\r\n{}")
    for request_id in (9004, 9005, 9008, 9009):  # requests with an id and a method: answered
        fuzz.answered(request_id)
    fuzz.check("malformed JSON-RPC")

    # seeded random mutations of the examples, as fast edits to three documents
    sources = [p.read_text() for p in EXAMPLES]
    docs = [f"mutant{i}" for i in range(3)]
    texts = {d: rng.choice(sources) for d in docs}
    latest: dict[str, tuple[str, int]] = {}
    for n in range(MUTATIONS):
        doc = docs[n % len(docs)]
        texts[doc] = _mutate(rng, texts[doc]) if rng.random() < 0.8 else rng.choice(sources)
        latest[doc] = fuzz.document(doc, texts[doc])
        if n % 30 == 29:  # the last version of each is analysed and published, then the checks
            for uri, version in latest.values():
                server.diagnostics(uri, version, timeout=30)
            fuzz.check(f"mutations to {n + 1}")

    # odd line endings of the broken example: the error stays on line 9 whatever the breaks
    for ending in ("\r", "\r\n", "\n"):
        breaks = [rng.choice(["\r", "\r\n", "\n"]) if ending == "\n" else ending for _ in range(40)]
        lines = BROKEN.split("\n")
        text = "".join(line + breaks[i % len(breaks)] for i, line in enumerate(lines))
        uri, version = fuzz.document(f"endings {ending!r}", text)
        found = server.diagnostics(uri, version, timeout=30)
        assert _diagnostic_ok(found, (8, "facter")), (repr(ending), found)
    fuzz.check("line endings")

    # the end: shutdown refuses later requests; exit ends the process at once, status 0
    if _isolated_compiles():
        fuzz.document("doubling at exit", reproducers(fuzz.tmp)["30 doubling macros"][0] + " ")
    assert "error" not in fuzz.answered(server.request("shutdown"), timeout=15)
    reply = server.response(server.request("textDocument/hover", raw_params="{}"))
    assert reply["error"]["code"] == -32600, reply
    server.notify("exit")
    exited = time.monotonic()
    assert server.exit_status(timeout=10) == 0
    if _isolated_compiles():  # "within a second": 3 s leaves room for a loaded CI machine
        assert time.monotonic() - exited < 3.0
    assert "Traceback" not in server.stderr()
    assert time.monotonic() - started < 110


# --- the CLI ---------------------------------------------------------------------------------


def _check(
    *args: str, timeout: float = CLI_LIMIT_S
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        # the fast tier's robustness (`--no-nvcc`): nvcc has its own limit, --nvcc-timeout
        [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "--no-nvcc", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=server_env(Path(os.environ.get("TMPDIR", "/tmp"))),
    )
    return done, time.monotonic() - started


def test_cli_ends_every_reproducer_with_a_message_and_a_documented_status(tmp_path: Path) -> None:
    """Files with an expected error go in one run (status 1, each error at its line, in one
    process: two cores); the others one run each, for their own status."""
    timeout = ["--compile-timeout", str(COMPILE_TIMEOUT_S)] if _isolated_compiles() else []
    paths: dict[str, tuple[Path, Any]] = {}
    for name, (text, expectation) in reproducers(tmp_path).items():
        path = tmp_path / (re.sub(r"\W+", "_", name) + ".cu")
        path.write_text(text, encoding="utf-8", errors="surrogatepass", newline="")
        paths[name] = (path, expectation)
    erroneous = [(n, p, e) for n, (p, e) in paths.items() if isinstance(e, tuple)]
    done, took = _check(*timeout, "--format", "json", *(str(p) for _, p, _ in erroneous))
    assert took < CLI_LIMIT_S and "Traceback" not in done.stderr, (took, done.stderr[-3000:])
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    found = json.loads(done.stdout)["diagnostics"]
    for name, path, (line, needle) in erroneous:
        mine = [d for d in found if d["file"] == str(path)]
        assert any(d["line"] == line + 1 and needle in d["message"] for d in mine), (name, mine)
    for name, (path, expectation) in paths.items():
        if isinstance(expectation, tuple):
            continue
        done, took = _check(*timeout, "--format", "json", str(path))
        assert took < CLI_LIMIT_S and "Traceback" not in done.stderr, (name, done.stderr[-3000:])
        errors = [d for d in json.loads(done.stdout)["diagnostics"] if d["severity"] == "error"]
        if expectation == "none":
            assert done.returncode == 0 and not errors, (name, errors)
        else:
            assert done.returncode in (0, 1, 2), (name, done.returncode)
            assert (done.returncode == 0) == (not errors), (name, done.returncode, errors)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/urandom"])
def test_cli_refuses_what_is_not_a_source_file(tmp_path: Path, special: str) -> None:
    if not _isolated_compiles():
        pytest.skip("needs the compile processes of issue 20 items 1-3")
    target = special
    if special == "fifo":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    done, took = _check(target, timeout=30)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "not read" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert took < 10
