"""`python -m cuda_llm_lsp` started in a cloned repository imports none of its modules (issue 36).

Python puts the start directory first on `sys.path` for `-m`; the server's `__main__` takes it
off before its own imports, so a repository's `argparse.py` or `logging.py` never runs in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cuda_llm_lsp.__main__ import without_start_directory

ROOT = Path(__file__).resolve().parents[2]


def test_the_start_directory_leaves_sys_path_unless_it_holds_the_package() -> None:
    path = ["/repo", "/src", "/usr/lib/python3.11"]
    assert without_start_directory(path, "/repo", "/src") == ["/src", "/usr/lib/python3.11"]
    assert without_start_directory(["", "/src"], "/repo", "/src") == ["/src"]  # `-c`
    assert without_start_directory(["/src", "/lib"], "/src", "/src") == ["/src", "/lib"]
    assert without_start_directory(["/bin", "/lib"], "/repo", "/src") == ["/bin", "/lib"]
    assert without_start_directory([], "/repo", "/src") == []


def test_python_m_in_a_repository_runs_none_of_its_modules(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    mark = tmp_path / "imported"
    for name in ("argparse", "logging", "lsprotocol", "pygls"):
        (repo / f"{name}.py").write_text(f"open({str(mark)!r}, 'a').write({name!r})\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    # no empty entry: one would be the start directory by the user's own PYTHONPATH
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "cuda_llm_lsp", "--version"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cuda-llm-lsp ")
    assert not mark.exists(), mark.read_text()
