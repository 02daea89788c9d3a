"""The downloadable real-world corpus: other projects' CUDA files, fetched at test time.

Other projects' code is not vendored in this repository. `tests/data/realworld/sources.toml`
pins each source instead: a public package (a Debian binary package, through `apt-get
download`; a file of a Debian source package's pool folder, its orig tarball or a binary .deb
built from it, of any archive area (main, contrib: `component`); a PyPI wheel
or sdist, through the simple index pip itself uses), its version, its archive's file name and
sha256, its licence, and optionally the subtrees of it its files need (only those are extracted
and packed: a large project's tarball stays out of the carried corpus); then every file
checked, with the include directories, defines and C++ standard its own build uses and nvcc's
recorded verdict (the fields of `realworld_corpus.Entry`, paths starting with the source's name).

`fetch` downloads each archive (bounded in time, sha256 checked), extracts it under
`CACHE/<source name>/` and writes the runner's `manifest.toml` into CACHE, so that
`realworld_corpus.py CACHE` checks it. An archive already there with the right sha256 is not
downloaded again. With `--record`, nvcc's verdicts (realworld_corpus.py --record) are written
back into sources.toml. With `--pack FILE.tar.gz`, the corpus ready to check (the manifest and
every source's C, C++ and CUDA files and licences, nothing of the archives' binaries) is written
into one tarball: what a machine without network (the GPU machine) is carried, to be unpacked and
checked there with `realworld_corpus.py` (`benchmarks/gpu_all.sh corpus`).

    python benchmarks/realworld_fetch.py [--cache DIR] [--record [--only TEXT]...
                                         [--include DIR]...] [--jobs N] [--pack FILE]

`--only TEXT` (repeatable) records only the files whose path contains TEXT (`--only lammps/`:
one new source's files, not the whole corpus again). `--include DIR` (repeatable) gives the
runner a directory of this machine's environment for recording (a library's headers the
toolkit lacks: cuBLAS's for ggml), as `realworld_corpus.py --include` does; it is not written
into sources.toml, so check with the same `--include`. The cache defaults to
$CUDA_LLM_CORPUS_CACHE, else ~/.cache/cuda-llm-lsp/realworld. Debian source archives come from
$CUDA_LLM_DEBIAN_MIRROR, else the Debian mirror this machine's apt sources name, else
deb.debian.org.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import tomllib

HERE = Path(__file__).resolve().parent
SOURCES = HERE.parent / "tests" / "data" / "realworld" / "sources.toml"
TIMEOUT_S = 180  # one archive's download
DEBIAN_MIRROR = "http://deb.debian.org/debian"
APT_SOURCES = Path("/etc/apt")  # where this machine's Debian mirror is named (read, not run)

if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import realworld_corpus  # noqa: E402  (a sibling script, not a package)


class FetchError(Exception):
    """A source could not be downloaded or did not match its pinned sha256."""


@dataclass
class Source:
    name: str  # the directory it is extracted into; files' paths start with it
    kind: str  # "debian" (apt-get download), "debian-source" (the pool) or "pypi" (the index)
    package: str  # a Debian source package's name for "debian-source" (its pool folder)
    version: str
    archive: str  # the file name, as the archive serves it
    sha256: str
    licence: str
    licence_file: str  # inside the extracted tree
    note: str = ""
    # the archive's paths (directories or files) extracted and packed, the licence file too;
    # empty: all of it
    subtrees: list[str] = field(default_factory=list)
    # a "debian-source" package's archive area: "main", or "contrib" / "non-free" (the pool's
    # first folder: packages that build against or need software outside main)
    component: str = "main"


def load_sources(path: Path = SOURCES) -> tuple[list[Source], list[realworld_corpus.Entry]]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    sources = [Source(**item) for item in data.get("source", [])]
    entries = [realworld_corpus.Entry(**item) for item in data.get("file", [])]
    names = {s.name for s in sources}
    for entry in entries:
        if entry.project not in names or not entry.path.startswith(entry.project + "/"):
            raise FetchError(f"{path}: {entry.path} names no source ({entry.project})")
    return sources, entries


_HEADER = """\
# The real-world corpus, downloaded at test time (benchmarks/realworld_fetch.py): nothing of
# these projects is vendored here. Each [[source]] pins a public package by version and sha256;
# each [[file]] is one file of it with the flags its own build uses (paths from the corpus
# root: the source's name first) and nvcc 13's verdict, written by
# `python benchmarks/realworld_fetch.py --record`.
"""


def write_sources(path: Path, sources: list[Source], entries: list[realworld_corpus.Entry]) -> None:
    lines = [_HEADER]
    for source in sources:
        lines.append("[[source]]")
        fields = {
            k: v
            for k, v in asdict(source).items()
            if (k != "subtrees" or v) and (k != "component" or v != "main")
        }
        lines += [f"{key} = {json.dumps(value)}" for key, value in fields.items()]
        lines.append("")
    manifest = Path(tempfile.mkdtemp(prefix="sources-"))
    realworld_corpus.write_manifest(manifest, entries)
    body = (manifest / "manifest.toml").read_text(encoding="utf-8")
    shutil.rmtree(manifest)
    lines.append(body[body.index("[[file]]") :] if "[[file]]" in body else "")
    path.write_text("\n".join(lines), encoding="utf-8")


def default_cache() -> Path:
    env = os.environ.get("CUDA_LLM_CORPUS_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "cuda-llm-lsp" / "realworld"


def fetch(cache: Path, sources_path: Path = SOURCES) -> list[realworld_corpus.Entry]:
    """Every source downloaded, checked and extracted under `cache`; the manifest written."""
    sources, entries = load_sources(sources_path)
    archives = cache / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    for source in sources:
        archive = archives / source.archive
        if not (archive.is_file() and _sha256(archive) == source.sha256):
            _download(source, archives)
            got = _sha256(archive)
            if got != source.sha256:
                archive.unlink()
                raise FetchError(
                    f"{source.archive}: sha256 {got}, pinned {source.sha256} (a changed archive)"
                )
        tree = cache / source.name
        stamp = tree / ".extracted"
        extracted = " ".join([source.sha256, *source.subtrees])
        if not (stamp.is_file() and stamp.read_text() == extracted):
            shutil.rmtree(tree, ignore_errors=True)
            keep = [*source.subtrees, source.licence_file] if source.subtrees else []
            _extract(archive, tree, keep)
            stamp.write_text(extracted)
        if not (tree / source.licence_file).is_file():
            raise FetchError(f"{source.name}: no licence file {source.licence_file}")
    missing = [e.path for e in entries if not (cache / e.path).is_file()]
    if missing:
        raise FetchError(f"not in the archives: {', '.join(missing[:5])}")
    realworld_corpus.write_manifest(cache, entries)
    return entries


# what a compile of the corpus reads: sources and headers (libcu++'s have no suffix)
_PACKED_SUFFIXES = frozenset(
    [
        ".cu",
        ".cuh",
        ".h",
        ".hpp",
        ".hxx",
        ".hh",
        ".hu",
        ".inl",
        ".ipp",
        ".tcc",
        ".inc",
        ".def",
        ".c",
        ".cc",
        ".cpp",
        ".cxx",
    ]
)


def pack(cache: Path, out: Path, sources_path: Path = SOURCES) -> int:
    """The fetched corpus as one tarball (manifest, sources, headers, licences): its size."""
    sources, _ = load_sources(sources_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(cache / "manifest.toml", arcname="manifest.toml")
        for source in sources:
            tree = cache / source.name
            for path in sorted(tree.rglob("*")):
                if path.is_symlink() or not path.is_file():
                    continue
                inside = path.relative_to(tree)
                wanted = path.suffix in _PACKED_SUFFIXES or not path.suffix
                if wanted or inside == Path(source.licence_file):
                    tar.add(path, arcname=f"{source.name}/{inside}")
    partial.replace(out)
    return out.stat().st_size


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(source: Source, into: Path) -> None:
    if source.kind == "debian":
        _apt_download(source, into)
    elif source.kind == "debian-source":
        pool = debian_pool_path(source.package, source.archive, source.component)
        url = f"{_debian_mirror()}/{pool}"
        _http_download(source, url, into / source.archive)
    elif source.kind == "pypi":
        _pypi_download(source, into / source.archive)
    else:
        raise FetchError(f"{source.name}: unknown kind {source.kind!r}")


def _apt_download(source: Source, into: Path) -> None:
    """Debian's own client, so the mirror configured on the machine is used."""
    if shutil.which("apt-get") is None:
        raise FetchError(f"{source.package}: no apt-get on this machine")
    try:
        done = subprocess.run(
            ["apt-get", "download", f"{source.package}={source.version}"],
            cwd=into,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise FetchError(f"{source.package}: apt-get download took over {TIMEOUT_S}s") from exc
    if done.returncode != 0 or not (into / source.archive).is_file():
        why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no archive"]
        raise FetchError(
            f"{source.package}={source.version}: apt-get download failed ({why[0]}); "
            "offline, or the package lists are missing (apt-get update)"
        )


def debian_pool_path(package: str, archive: str, component: str = "main") -> str:
    """Where Debian's archive keeps a source package's files: `pool/<component>/<prefix>/
    <package>/` (component main, contrib, non-free or non-free-firmware), the prefix `lib` and
    the next letter for a name starting with lib, else its first letter."""
    if component not in _COMPONENTS:
        raise FetchError(f"{package}: not a Debian archive area: {component!r}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", package):
        raise FetchError(f"{package!r}: not a Debian source package name")
    if not re.fullmatch(r"[A-Za-z0-9+~_-][A-Za-z0-9+.~_-]*", archive):
        raise FetchError(f"{package}: not an archive's file name: {archive!r}")
    prefix = package[:4] if package.startswith("lib") and len(package) > 3 else package[0]
    return f"pool/{component}/{prefix}/{package}/{archive}"


_COMPONENTS = frozenset(["main", "contrib", "non-free", "non-free-firmware"])


def _debian_mirror() -> str:
    """$CUDA_LLM_DEBIAN_MIRROR, else the first Debian mirror this machine's apt sources name
    (`URIs:` of *.sources, `deb` lines of *.list: read as text), else deb.debian.org."""
    if url := os.environ.get("CUDA_LLM_DEBIAN_MIRROR"):
        return url.rstrip("/")
    files = [APT_SOURCES / "sources.list", *sorted(APT_SOURCES.glob("sources.list.d/*.list"))]
    files += sorted(APT_SOURCES.glob("sources.list.d/*.sources"))
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if words[:1] in (["URIs:"], ["deb"], ["deb-src"]):
                for word in words[1:]:
                    url = word.rstrip("/")
                    if re.fullmatch(r"https?://[A-Za-z0-9.:-]+(/[A-Za-z0-9._~-]+)*/debian", url):
                        return url
    return DEBIAN_MIRROR


def _index_url() -> str:
    """The index pip uses here: $PIP_INDEX_URL, else pip's own default."""
    if url := os.environ.get("PIP_INDEX_URL"):
        return url.rstrip("/")
    try:
        from pip._internal.models.index import PyPI
    except ImportError as exc:
        raise FetchError("pip is not installed: cannot find the package index") from exc
    return str(PyPI.simple_url).rstrip("/")


def _pypi_download(source: Source, target: Path) -> None:
    """The archive's address from the simple index (PEP 691 JSON), as pip finds it."""
    page = f"{_index_url()}/{source.package}/"
    request = urllib.request.Request(
        page, headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            files = json.load(answer).get("files", [])
        url = next((f["url"] for f in files if f.get("filename") == source.archive), None)
        if url is None:
            raise FetchError(f"{source.package}: the index has no {source.archive}")
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        raise FetchError(f"{source.package}: cannot download {source.archive} ({exc})") from exc
    _http_download(source, urllib.parse.urljoin(page, url), target)


def _http_download(source: Source, url: str, target: Path) -> None:
    """The archive at `url` into `target`, through a .part file (no half archive kept)."""
    partial = target.with_suffix(target.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer, partial.open("wb") as out:
            shutil.copyfileobj(answer, out)
        partial.replace(target)
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise FetchError(f"{source.package}: cannot download {source.archive} ({exc})") from exc


def _wanted(member: str, keep: list[str]) -> bool:
    """A member of the archive inside one of `keep` (none: every member); unsafe names refused."""
    parts = Path(member).parts
    if member.startswith("/") or ".." in parts:
        raise FetchError(f"unsafe member {member}")
    return not keep or any(parts[: len(Path(k).parts)] == Path(k).parts for k in keep)


def _refuse_links_out(member: tarfile.TarInfo) -> None:
    """A link whose target leaves the tree (absolute, or `..` past its root) or a device or
    FIFO member: refused, as tarfile's "data" filter refuses them where it exists."""
    if member.isdev():
        raise FetchError(f"special file {member.name}")
    if not (member.issym() or member.islnk()):
        return
    target = Path(member.linkname)
    if member.issym():  # relative to the link's folder; a hard link names an archive member
        target = Path(member.name).parent / target
    depth = 0
    for part in target.parts:
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            break
    if member.linkname.startswith("/") or depth < 0:
        raise FetchError(f"link {member.name} -> {member.linkname} leaves the tree")


def _extract(archive: Path, tree: Path, keep: list[str] | None = None) -> None:
    """The archive's members (those under `keep`, if given) under `tree`: no absolute or escaping
    names, no links out, no special files (our checks, and tarfile's "data" filter where this
    Python has it)."""
    tree.mkdir(parents=True)
    name = archive.name
    keep = keep or []
    try:
        if name.endswith(".whl") or name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zipped:
                members = [m for m in zipped.namelist() if _wanted(m, keep)]
                zipped.extractall(tree, members)
            return
        if name.endswith(".deb"):
            opened = tarfile.open(fileobj=io.BytesIO(_deb_data(archive)))  # noqa: SIM115
        elif name.endswith((".tar.gz", ".tgz", ".tar.xz", ".tar.bz2")):
            opened = tarfile.open(archive)  # noqa: SIM115
        else:
            raise FetchError(f"{name}: unknown archive type")
        with opened as tar:
            chosen = [m for m in tar.getmembers() if _wanted(m.name, keep)]
            for member in chosen:
                _refuse_links_out(member)
            if hasattr(tarfile, "data_filter"):  # Python 3.11.4+, 3.12: a second check
                tar.extractall(tree, chosen, filter="data")
            else:  # Debian 12's 3.11.2 has no filter: the checks above are the guard
                tar.extractall(tree, chosen)
    except FetchError as exc:
        raise FetchError(f"{name}: {exc}") from exc
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
        raise FetchError(f"{name}: cannot extract ({exc})") from exc


def _deb_data(archive: Path) -> bytes:
    """data.tar.* of a .deb (an `ar` archive), without dpkg."""
    blob = archive.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise FetchError(f"{archive.name}: not a Debian package")
    at = 8
    while at + 60 <= len(blob):
        header = blob[at : at + 60]
        member = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        if member.startswith("data.tar"):
            return blob[at + 60 : at + 60 + size]
        at += 60 + size + (size % 2)
    raise FetchError(f"{archive.name}: no data.tar member")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="where archives are kept")
    parser.add_argument("--sources", type=Path, default=SOURCES)
    parser.add_argument("--record", action="store_true", help="record nvcc's verdicts")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="--record only files whose path contains TEXT (repeatable)",
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="DIR",
        help="--record: an include directory of this machine for every file (cuBLAS's headers "
        "where the toolkit has none); passed to the runner, never written into sources.toml",
    )
    parser.add_argument("--pack", type=Path, help="write the corpus into this .tar.gz too")
    args = parser.parse_args(argv)
    cache = (args.cache or default_cache()).resolve()
    try:
        fetch(cache, args.sources)
    except FetchError as exc:
        print(f"realworld_fetch: {exc}", file=sys.stderr)
        return 2
    print(f"corpus ready: {cache}")
    if args.record:
        for only in args.only or [""]:
            argv_ = [str(cache), "--record", "--jobs", str(args.jobs), "--only", only]
            argv_ += [f"--include={d}" for d in args.include]
            realworld_corpus.main(argv_)
        sources, _ = load_sources(args.sources)
        write_sources(args.sources, sources, realworld_corpus.load_manifest(cache))
    if args.pack:
        size = pack(cache, args.pack.resolve(), args.sources)
        print(f"corpus packed: {args.pack} ({size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
