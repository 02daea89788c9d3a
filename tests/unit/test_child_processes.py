"""Every child the server starts (issue 36): found by absolute path, bounded, never given a
workspace string through a shell, never importing from the workspace.

Real nvcc, real g++, real Python children; the hostile names are planted in `tmp_path`.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cuda_llm_lsp.compile import tools
from cuda_llm_lsp.compile.child_env import child_env, is_kept
from cuda_llm_lsp.compile.device_unit import build_device_unit
from cuda_llm_lsp.compile.isolated import CompilePool
from cuda_llm_lsp.compile.mangled import demangle
from cuda_llm_lsp.compile.nvcc import compile_file, find_nvcc
from cuda_llm_lsp.compile.nvcc_inputs import define_refusal
from cuda_llm_lsp.compile.project_config import find_flags
from cuda_llm_lsp.compile.tools import (
    TOOL_LIMITS,
    find_tool,
    python_command,
    run_tool,
    set_workspace_roots,
    shell_inert,
    spawn_options,
)
from cuda_llm_lsp.compile.types import CompileOptions

needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc (the nvcc extra)")
# run by a shell, wherever its working directory: the mark's path is in the environment
HOSTILE = "$(touch $CUDA_LLM_MARK)`touch $CUDA_LLM_MARK.bq`"


@pytest.fixture(autouse=True)
def _no_roots() -> object:
    yield
    set_workspace_roots(())


@pytest.fixture
def mark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where a command smuggled into a name would leave its trace (`CUDA_LLM_*` reaches nvcc)."""
    path = tmp_path / "PWNED"
    monkeypatch.setenv("CUDA_LLM_MARK", str(path))
    return path


def _planted(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.glob("PWNED*"))


# --- tools by absolute path ---------------------------------------------------------------------


def _fake_tool(directory: Path, name: str, marker: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text(f"#!/bin/sh\ntouch {marker}\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("entry", ["", ".", "bin", "workspace"])
def test_no_tool_is_run_from_a_relative_path_entry_or_the_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    workspace = tmp_path / "repo"
    marker = tmp_path / "ran"
    _fake_tool(workspace, "c++filt", marker)
    _fake_tool(workspace / "bin", "c++filt", marker)
    _fake_tool(workspace, "cu++filt", marker)
    _fake_tool(workspace / "bin", "cu++filt", marker)
    monkeypatch.chdir(workspace)
    set_workspace_roots([str(workspace)])
    first = str(workspace / "bin") if entry == "workspace" else entry
    monkeypatch.setenv("PATH", first + os.pathsep + os.environ["PATH"])
    found = find_tool("c++filt")
    assert found is None or (os.path.isabs(found) and not found.startswith(str(workspace)))
    demangle(["_Z3fooi"])
    assert not marker.exists()
    assert str(workspace) not in child_env()["PATH"].split(os.pathsep)
    assert "" not in child_env()["PATH"].split(os.pathsep)


def test_secret_looking_names_never_reach_a_child() -> None:
    for name in ("CUDA_LLM_PRIVATE_PEM", "NVIDIA_private_thing", "CUDA_LLM_PASSPHRASE",
                 "XDG_SESSION_COOKIE", "CUDA_LLM_CREDS", "CUDA_SIGNING_CERT"):  # fmt: skip
        assert not is_kept(name), name
    for name in ("PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES", "CUDA_LLM_LSP_DRIVER", "LC_ALL"):
        assert is_kept(name), name


# --- one spawn helper: stdin, limits, death with the server ------------------------------------


def test_a_tool_child_gets_no_stdin_and_the_limits() -> None:
    probe = (
        "import os, resource, sys; print(sys.stdin.read() == '',"
        " resource.getrlimit(resource.RLIMIT_AS)[0], resource.getrlimit(resource.RLIMIT_CPU)[0],"
        " os.getsid(0) == os.getpid())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
        **spawn_options(TOOL_LIMITS),
    )  # fmt: skip
    empty, memory, cpu, leader = done.stdout.split()
    assert empty == "True" and leader == "True"
    assert int(memory) == TOOL_LIMITS.memory_mb * 1024 * 1024
    assert int(cpu) == TOOL_LIMITS.cpu_s


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_tool_child_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    parent = (
        "import subprocess, sys, time\n"
        "from cuda_llm_lsp.compile.tools import spawn_options\n"
        "p = subprocess.Popen(['sleep', '300'], **spawn_options())\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(300)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    server = subprocess.Popen([sys.executable, "-c", parent], env=env)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    child = int(pid_file.read_text())
    server.kill()
    server.wait()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        # a zombie reparented to init is gone too once reaped; /proc says which
        state = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return
        time.sleep(0.1)
    os.kill(child, 9)
    pytest.fail("the tool outlived the server")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_guarded_tools_children_die_with_the_server_too(tmp_path: Path) -> None:
    """nvcc's sh, cicc and gcc: children of the tool, which PR_SET_PDEATHSIG does not reach."""
    pid_file = tmp_path / "grandchild.pid"
    script = f"sleep 300 & echo $! > {pid_file}; wait"
    parent = (
        "import subprocess, time\n"
        "from cuda_llm_lsp.compile.tools import guarded, spawn_options\n"
        f"subprocess.Popen(guarded(['/bin/sh', '-c', {script!r}]), **spawn_options())\n"
        "time.sleep(300)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    server = subprocess.Popen([sys.executable, "-c", parent], env=env)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    grandchild = int(pid_file.read_text())
    server.kill()
    server.wait()
    assert _gone(grandchild), "the tool's own child outlived the server"


def _gone(pid: int) -> bool:
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    os.kill(pid, 9)
    return False


def test_run_tool_passes_input_and_runs_in_a_neutral_directory(tmp_path: Path) -> None:
    done = run_tool(["/bin/cat"], input="x\n", timeout=30, env=child_env())
    assert done.stdout == "x\n"
    pwd = run_tool(["/bin/pwd"], timeout=30, env=child_env()).stdout.strip()
    assert pwd == os.path.realpath(tools.neutral_cwd())


# --- Python children: the workspace is never on sys.path ---------------------------------------


def _plant_modules(directory: Path, marker: Path) -> None:
    body = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("argparse", "numpy", "pickle", "struct", "select"):
        (directory / f"{name}.py").write_text(body)
    (directory / "cuda_llm_lsp.py").write_text(body)


def test_python_children_never_import_from_the_servers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "repo"
    workspace.mkdir()
    marker = tmp_path / "imported"
    _plant_modules(workspace, marker)
    monkeypatch.chdir(workspace)  # as Neovim starts the server: in the project
    command = python_command("json.tool", "--help")
    assert ("-P" in command) == (sys.version_info >= (3, 11))
    pool = CompilePool(size=1)
    try:
        text = "__global__ void k(float* x) { x[0] = 1.0f; }\n"
        unit = build_device_unit(text, workspace / "k.cu", ())
        result = pool.compile(unit, CompileOptions(arch="sm_90"), ("k",))
        assert result.ok, result.log  # the child ran (pickle, struct, select imported)
    finally:
        pool.close()
    subprocess.run(
        python_command("cuda_llm_lsp.compile.tools"), cwd=tools.neutral_cwd(),
        env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2])),
        capture_output=True, timeout=60, **spawn_options(),
    )  # fmt: skip
    assert not marker.exists(), marker.read_text()


# --- nvcc: nothing a repository chose reaches its shell ---------------------------------------


@pytest.mark.parametrize(
    ("define", "refused"),
    [
        ("NDEBUG", False),
        ("CUTLASS_ARCH_MMA_SM90_SUPPORTED=1", False),
        ("X=a.b/c-d+1", False),
        (f"X={HOSTILE}", True),
        ('X="quoted"', True),
        ("X=a b", True),
        ("X=\\", True),
        ("1X=2", True),
    ],
)
def test_defines_nvcc_gets_are_shell_inert(define: str, refused: bool) -> None:
    assert (define_refusal(define) is not None) == refused
    assert not shell_inert(HOSTILE)


@needs_nvcc
def test_a_hostile_file_name_define_and_include_dir_run_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mark: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    directory = tmp_path / f"src{HOSTILE}"
    include = tmp_path / f"inc{HOSTILE}"
    directory.mkdir()
    include.mkdir()
    (include / "far.h").write_text("#define FAR 2.0f\n")
    (directory / "near.h").write_text("#define NEAR 1.0f\n")
    path = directory / f"k{HOSTILE}.cu"
    text = (
        '#include "near.h"\n#include "far.h"\n'
        "__global__ void k(float* x) { x[0] = NEAR + FAR + GOOD; }\n"
        "int bad = ;\n"
    )
    path.write_text(text)
    result = compile_file(
        text, path, include_paths=[str(include)], defines=[f"EVIL={HOSTILE}", "GOOD=3"],
        define_sources={f"EVIL={HOSTILE}": "compile_flags.txt"}, timeout=300,
    )  # fmt: skip
    time.sleep(0.5)
    assert _planted(tmp_path) == []
    (error,) = result.errors  # the headers were found through our links; GOOD defined
    assert error.line == 4 and error.file is None, result.log
    assert path.name in result.log and "unit.cu" not in result.log
    (refusal,) = result.refused
    assert "EVIL" in refusal and "compile_flags.txt" in refusal


@needs_nvcc
@pytest.mark.parametrize("target", ["/dev/stdin", "/dev/zero", "/proc/self/environ", "fifo"])
def test_nvcc_never_reads_what_the_fast_tier_refuses(tmp_path: Path, target: str) -> None:
    if target == "fifo":
        os.mkfifo(tmp_path / "fifo.h")
        target = "fifo.h"
    (tmp_path / "outer.h").write_text(f'#include "{target}"\n')
    path = tmp_path / "main.cu"
    for text in (f'#include "{target}"\nint x;\n', '#include "outer.h"\nint x;\n'):
        started = time.monotonic()
        result = compile_file(text, path, timeout=60)
        assert result.skipped and not result.ok, result
        assert time.monotonic() - started < 10


@needs_nvcc
def test_nvcc_refuses_special_include_directories(tmp_path: Path) -> None:
    path = tmp_path / "main.cu"
    result = compile_file("int x;\n", path, include_paths=["/proc/self", "/dev"], timeout=300)
    assert result.ok, result.log
    assert len(result.refused) == 2 and all("never read" in r for r in result.refused)


def test_limits_reach_children_of_children() -> None:
    """rlimits are inherited: nvcc's sh, cicc and gcc have them too."""
    done = subprocess.run(
        ["/bin/sh", "-c", "ulimit -v"], capture_output=True, text=True, timeout=30,
        **spawn_options(),
    )  # fmt: skip
    assert int(done.stdout) == TOOL_LIMITS.memory_mb * 1024
    assert resource.getrlimit(resource.RLIMIT_AS)[0] != TOOL_LIMITS.memory_mb * 1024 * 1024


# --- the project configuration: where it is looked for, what it may open ----------------------


def test_the_project_configuration_is_looked_for_up_to_the_workspace_or_repository(
    tmp_path: Path,
) -> None:
    project = tmp_path / "outer" / "repo"
    (project / "src").mkdir(parents=True)
    (tmp_path / "outer" / "compile_flags.txt").write_text("-DABOVE=1\n")
    source = project / "src" / "k.cu"
    source.write_text("int x;\n")
    found = find_flags(source)  # the CLI outside any repository: up to /
    assert found is not None and found.defines == ("ABOVE=1",)
    (project / ".git").mkdir()  # the CLI in a repository: up to its root
    assert find_flags(source) is None
    (project / ".git").rmdir()
    set_workspace_roots([str(project)])  # the server: up to the workspace folder
    assert find_flags(source) is None
    (project / "compile_flags.txt").write_text("-DINSIDE=1\n")
    found = find_flags(source)
    assert found is not None and found.defines == ("INSIDE=1",)


def test_a_database_entry_naming_a_device_or_fifo_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.cu")
    entries = [
        {"directory": str(tmp_path), "file": name, "arguments": ["nvcc", "-DX=1", "-c", name]}
        for name in ("/dev/ptmx", "pipe.cu", "/dev/zero")
    ]
    (tmp_path / "compile_commands.json").write_text(json.dumps(entries))
    (tmp_path / "k.cuh").write_text("int y;\n")
    done: list[object] = []
    thread = threading.Thread(
        target=lambda: done.append(find_flags(tmp_path / "k.cuh")), daemon=True
    )
    thread.start()
    thread.join(20)
    assert done, "find_flags blocked on a device or FIFO"


@needs_nvcc
def test_check_nvcc_in_the_cli_runs_nothing_a_repository_named(tmp_path: Path, mark: Path) -> None:
    """`cuda-llm check --nvcc` in a cloned repository: a hostile file name and compile_flags.txt
    define run nothing; an `#include "/dev/stdin"` does not read the terminal."""
    (tmp_path / "compile_flags.txt").write_text(f"-DEVIL={HOSTILE}\n")
    name = f"k{HOSTILE}.cu"
    (tmp_path / name).write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    (tmp_path / "stdin.cu").write_text('#include "/dev/stdin"\nint x;\n')
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    env["CUDA_LLM_CACHE_DIR"] = str(tmp_path / "cache")
    env["CUDA_LLM_MARK"] = str(mark)
    for target in (name, "stdin.cu"):
        done = subprocess.run(
            [sys.executable, "-m", "cuda_llm_lsp.cli", "check", "--format", "json", "--nvcc",
             "--compile-timeout", "300", target],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
            input="int stolen_from_stdin = ;\n",
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert "stolen_from_stdin" not in done.stdout + done.stderr
    time.sleep(0.5)
    assert _planted(tmp_path) == []
