"""The `cuda-llm` command: one subcommand per module in this package.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int`; this module only
wires them, so the CLI, the language server and tests share the same engine. The one-line helps
are listed here so that only the subcommand being run is imported (with `importlib`, the one
lazy import of the CLI): `cuda-llm --help` then loads none of them, ~80 ms instead of ~400 ms
with all of them (NVRTC, tree-sitter, numpy, the FSR loop; measured with `python -X importtime`
and wall clock).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence

from cuda_llm_lsp import __version__
from cuda_llm_lsp.source.untrusted import NeutralStream

SUBCOMMANDS = {
    "check": "compile CUDA files with NVRTC: diagnostics and per-kernel resource use",
    "bench": "Check a kernel's test cases and time it on the local GPU.",
    "optimize": (
        "Optimize a kernel with the FSR loop (Feature Search and Reinforcement: rounds of LLM "
        "candidates, each checked and timed on the GPU, the best fed back to the next round)."
    ),
    "history": "List recorded optimization runs (all, or those of FILE).",
    "suite": "Run the kernel suite (bench, optionally optimize) and write a report.",
    "tune": "Search a kernel's tunables (tune.NAME in its spec) for its fastest configuration.",
    "profile": "Profile a kernel's timed case with Nsight Compute: findings per source line.",
    "capture": "Run your program and record one kernel launch (sizes, launch, data, outputs).",
    "spec": "Write a kernel's test spec from a capture (spec --from-capture DIR FILE).",
    "verify": "Run your program again: the kernel's outputs and times against its capture.",
}


def arch_argument(value: str) -> str:
    """`--arch`: an architecture NVRTC can compile for, else a usage error (exit 2) naming them.

    A typo used to fall back to the default silently, and an unknown number to fail as a
    compile error of every file (exit 1).
    """
    from cuda_llm_lsp.engine.analysis import normalize_arch  # the compiler's imports: ~0.35 s

    arch = normalize_arch(value)
    supported = _supported_archs()
    if arch is None or (supported and int(arch[3:].rstrip("af")) not in supported):
        known = ", ".join(f"sm_{n}" for n in supported) if supported else "sm_75, sm_80, sm_90 …"
        raise argparse.ArgumentTypeError(f"{value!r} is not an architecture NVRTC knows ({known})")
    return arch


def _supported_archs() -> tuple[int, ...]:
    """The compute capabilities this NVRTC supports (empty when it cannot be asked)."""
    try:  # imported here: loading NVRTC costs ~100 ms that only `--arch` needs
        from cuda.bindings import nvrtc

        err, archs = nvrtc.nvrtcGetSupportedArchs()
    except Exception:  # no NVRTC here: the compile reports that itself
        return ()
    return tuple(archs) if err == nvrtc.nvrtcResult.NVRTC_SUCCESS else ()


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser, with the arguments of the subcommand `argv` names (if any) filled in."""
    parser = argparse.ArgumentParser(
        prog="cuda-llm",
        description="Compile, check, benchmark and optimize CUDA kernels.",
    )
    parser.add_argument("--version", action="version", version=f"cuda-llm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    for name, help_text in SUBCOMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(f"cuda_llm_lsp.cli.{name}")
            module.add_arguments(command)
            command.set_defaults(handler=module.run)
    return parser


# subcommands that always need the local GPU's worker: it starts before their imports
EARLY_WORKER = frozenset({"bench"})


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    if chosen in EARLY_WORKER and not {"-h", "--help"} & set(argv):
        from cuda_llm_lsp.engine.worker_start import start_early

        start_early()  # `cuda-llm bench` <= 2 s: the worker's start overlaps our imports
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help()
        return 2
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = NeutralStream(out), NeutralStream(err)  # type: ignore[assignment]
    try:  # no escape sequence or hidden character of model text reaches the terminal
        code = int(args.handler(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except KeyboardInterrupt:
        print("cuda-llm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `cuda-llm check ... | head`: the reader has what it wanted
        _quiet_stdout()
        return 128 + 13  # as a shell reports a command ended by SIGPIPE
    finally:
        sys.stdout, sys.stderr = out, err


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's flush at exit does not raise again.
    Not SIGPIPE's default action: it would also end us on a compile process's closed pipe."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ else 1)
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
