"""Where a spec's `inputs = "file.py:function"` hook may live: inside the `.cu` file's directory.

The hook is Python the evaluator imports and runs, so its path is part of the trust boundary: a
spec that came from a model (or a file copied from elsewhere) must not point it at a script
anywhere on the machine. `hook_path_problem` is the syntactic check the parser reports at the
spec's line; `resolve_hook` is the check the evaluator makes before importing, with symlinks
resolved (a link inside the tree that points out of it is refused too).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath


def hook_path_problem(file_part: str) -> str | None:
    """Why `file_part` (the path before `:function`) cannot name a file in the spec's tree."""
    posix, windows = PurePosixPath(file_part), PureWindowsPath(file_part)
    if posix.is_absolute() or windows.is_absolute() or windows.drive or file_part.startswith("~"):
        return "must be a path relative to the .cu file's directory, not an absolute one"
    if ".." in posix.parts or ".." in windows.parts:
        return "must stay inside the .cu file's directory ('..' is not allowed)"
    return None


def resolve_hook(file_part: str, spec_dir: Path) -> Path | str:
    """The hook file, resolved, if it lies inside `spec_dir`'s tree; else why not."""
    problem = hook_path_problem(file_part)
    if problem:
        return problem
    root = spec_dir.resolve()
    path = (root / file_part).resolve()
    if not path.is_relative_to(root):
        return f"resolves outside {root} (a symbolic link out of the file's directory)"
    if not path.is_file():
        return f"{path} does not exist"
    return path
