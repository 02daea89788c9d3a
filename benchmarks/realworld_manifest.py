"""Write a `manifest.toml` (benchmarks/realworld_corpus.py) for checkouts of public projects.

A corpus nobody here wrote is the real test of the fast tier: check out any projects side by
side in one directory, write their manifest with this, record nvcc's verdicts, then run:

    python benchmarks/realworld_manifest.py CORPUS [--only-under PATH ...] \\
        [--flags 'PROJECT=-Ipath -DNAME=1 -std=c++20' ...]
    python benchmarks/realworld_corpus.py CORPUS --record --jobs 2
    python benchmarks/realworld_corpus.py CORPUS --jobs 2 --json out.json

Each top-level directory of CORPUS is a project. Every `.cu` file of it (or only those under
`--only-under`, paths relative to CORPUS) gets, in order: its own directory, the project's root,
each `include`, `common` or `Common` directory of the project, then the project's `--flags`
(`-I` relative to CORPUS, `-D`, `-std`, and `NVCC_DIALECT` flags such as
`--expt-relaxed-constexpr`). Nothing is compiled here.
"""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

_SHARED_DIRS = ("include", "common", "Common")
# flags of a project's build that change what nvcc accepts (ThunderKittens, CUTLASS 3 use them)
NVCC_DIALECT = ("--expt-relaxed-constexpr", "--expt-extended-lambda", "--extended-lambda")


@dataclass
class ProjectFlags:
    include_dirs: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    std: str = "c++17"
    flags: list[str] = field(default_factory=list)  # nvcc's dialect flags (`NVCC_DIALECT`)


def parse_flags(specs: list[str]) -> dict[str, ProjectFlags]:
    """`PROJECT=-Ia -Ib -DX -std=c++20` -> the project's flags."""
    out: dict[str, ProjectFlags] = {}
    for spec in specs:
        project, _, flags = spec.partition("=")
        parsed = out.setdefault(project.strip(), ProjectFlags())
        for flag in shlex.split(flags):
            if flag.startswith("-I"):
                parsed.include_dirs.append(flag[2:])
            elif flag.startswith("-D"):
                parsed.defines.append(flag[2:])
            elif flag.startswith(("-std=", "--std=")):
                parsed.std = flag.split("=", 1)[1]
            elif flag in NVCC_DIALECT:
                parsed.flags.append(flag)
            else:
                raise SystemExit(f"--flags {project}: not understood: {flag}")
    return out


def entries(corpus: Path, only_under: list[str], flags: dict[str, ProjectFlags]) -> list[str]:
    out: list[str] = []
    shared: dict[str, list[str]] = {}
    for source in sorted(corpus.rglob("*.cu")):
        path = source.relative_to(corpus).as_posix()
        if only_under and not any(path.startswith(p.rstrip("/") + "/") for p in only_under):
            continue
        project = path.split("/", 1)[0]
        if project not in shared:
            root = corpus / project
            found = sorted(
                d.relative_to(corpus).as_posix()
                for name in _SHARED_DIRS
                for d in root.rglob(name)
                if d.is_dir()
            )
            shared[project] = found
        extra = flags.get(project, ProjectFlags())
        include_dirs = list(
            dict.fromkeys(
                [source.parent.relative_to(corpus).as_posix(), project, *shared[project],
                 *extra.include_dirs]
            )
        )  # fmt: skip
        out.append(
            "[[file]]\n"
            f"path = {json.dumps(path)}\n"
            f"project = {json.dumps(project)}\n"
            f"include_dirs = {json.dumps(include_dirs)}\n"
            f"defines = {json.dumps(extra.defines)}\n"
            f"std = {json.dumps(extra.std)}\n"
            + (f"flags = {json.dumps(extra.flags)}\n" if extra.flags else "")
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("corpus", type=Path, help="directory of project checkouts")
    parser.add_argument("--only-under", action="append", default=[], metavar="PATH")
    parser.add_argument("--flags", action="append", default=[], metavar="PROJECT=FLAGS")
    args = parser.parse_args(argv)
    written = entries(args.corpus, args.only_under, parse_flags(args.flags))
    (args.corpus / "manifest.toml").write_text("\n".join(written), encoding="utf-8")
    print(f"{len(written)} files in {args.corpus / 'manifest.toml'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
