"""The real-world corpus runner (benchmarks/realworld_corpus.py), and zero false errors.

`test_runner_*` run here on a small corpus made in the test: a file nvcc accepts that used to
give false errors (a project header reached with `<...>` through -I, glibc's `uint`), one
that nvcc rejects (not counted), kernels against ptxas's count.

`test_zero_false_errors_on_the_real_corpus` checks every nvcc-clean file of a corpus of real
projects' files (llm.c, cuda-samples, SGEMM_CUDA, GPU MODE's lectures: see
benchmarks/RESULTS.md) with the fast tier, in parallel within a bounded time. The corpus is
not part of the repository (other projects' code is not vendored): point
`CUDA_LLM_REALWORLD_CORPUS` at a directory holding its `manifest.toml`; marked `slow`.

`test_no_false_errors_on_the_downloaded_corpus` needs no local corpus: it downloads the one
pinned in tests/data/realworld/sources.toml (public Debian binary and source packages and PyPI
packages, sha256 checked; benchmarks/realworld_fetch.py) into $CUDA_LLM_CORPUS_CACHE or its tmp
dir and checks every nvcc-clean file; it skips, saying why, when the packages cannot be
downloaded. `test_fetch_*` run the fetcher against a package index (or a Debian archive's pool)
on a local port.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _benchmark_script(name: str) -> Any:
    """benchmarks/NAME.py as a module (registered first: its dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


corpus_runner = _benchmark_script("realworld_corpus")


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_LLM_CACHE_DIR", str(tmp_path / "cache"))


def make_corpus(root: Path) -> None:
    files = {
        "proj/Common/helper.h": "#pragma once\n#include <fstream>\n"
        'inline bool ok() { std::ofstream f("x"); return f.good(); }\n'
        "__device__ inline uint twice(uint x) { return 2u * x; }\n",
        "proj/good.cu": "#include <helper.h>\n"
        "__global__ void a(uint* o) { o[threadIdx.x] = twice(o[threadIdx.x]); }\n"
        "__global__ void b(uint* o) { o[0] = 1u; }\n"
        "int main() { return ok() ? 0 : 1; }\n",
        "proj/bad.cu": "__global__ void c(float* o) { o[0] = missing; }\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    entries = [
        corpus_runner.Entry("proj/good.cu", "proj", ["proj/Common"], [], "c++17", "clean", 2,
                            {"_Z1aPj": 8, "_Z1bPj": 8}),
        corpus_runner.Entry("proj/bad.cu", "proj", [], [], "c++17", "error", 0, {}),
    ]  # fmt: skip
    corpus_runner.write_manifest(root, entries)


def test_runner_reads_back_what_it_writes(tmp_path: Path) -> None:
    make_corpus(tmp_path)
    entries = corpus_runner.load_manifest(tmp_path)
    assert [e.path for e in entries] == ["proj/good.cu", "proj/bad.cu"]
    assert entries[0].ptxas_registers == {"_Z1aPj": 8, "_Z1bPj": 8}
    assert entries[0].include_dirs == ["proj/Common"] and entries[1].nvcc == "error"


def test_runner_counts_false_errors_kernels_and_time(tmp_path: Path) -> None:
    make_corpus(tmp_path)
    out = tmp_path / "report.json"
    status = corpus_runner.main([str(tmp_path), "--json", str(out)])
    report = json.loads(out.read_text())
    summary = report["summary"]
    assert status == 0, report
    assert summary["files"] == 1  # bad.cu is not nvcc-clean: not counted
    assert summary["false_errors"] == 0
    assert summary["ptxas_kernels"] == 2 and summary["kernels_with_resources"] == 2
    assert summary["files_registers_equal"] == 1
    assert summary["median_s"] >= summary["syntax_median_s"] > 0 and summary["timeouts"] == 0


def test_runner_reports_a_false_error(tmp_path: Path) -> None:
    """A manifest whose flags miss the header's directory: the file's error is counted."""
    make_corpus(tmp_path)
    entries = corpus_runner.load_manifest(tmp_path)
    entries[0].include_dirs = []
    corpus_runner.write_manifest(tmp_path, entries)
    assert corpus_runner.main([str(tmp_path)]) == 1


def test_runner_adds_this_machines_include_dirs_without_writing_them(tmp_path: Path) -> None:
    """`--include DIR`: a header of this machine's environment (NCCL from a venv) reaches every
    file's compile; the manifest keeps the project's own flags only. Per-project totals."""
    make_corpus(tmp_path)
    entries = corpus_runner.load_manifest(tmp_path)
    entries[0].include_dirs = []  # helper.h now comes from "the environment"
    corpus_runner.write_manifest(tmp_path, entries)
    before = (tmp_path / "manifest.toml").read_text()
    out = tmp_path / "report.json"
    extra = str(tmp_path / "proj" / "Common")
    status = corpus_runner.main([str(tmp_path), "--include", extra, "--json", str(out)])
    summary = json.loads(out.read_text())["summary"]
    assert status == 0 and summary["false_errors"] == 0, summary
    assert summary["projects"]["proj"]["files"] == 1
    assert summary["projects"]["proj"]["kernels_with_resources"] == 2
    assert (tmp_path / "manifest.toml").read_text() == before


CORPUS = os.environ.get("CUDA_LLM_REALWORLD_CORPUS")


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS, reason="CUDA_LLM_REALWORLD_CORPUS names no corpus directory")
def test_zero_false_errors_on_the_real_corpus(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    status = corpus_runner.main([str(CORPUS), "--jobs", jobs, "--json", str(out)])
    summary = json.loads(out.read_text())["summary"]
    assert summary["files"] >= 100
    assert summary["false_errors"] == 0 and status == 0, summary


# --- The downloadable corpus (benchmarks/realworld_fetch.py, tests/data/realworld/sources.toml)

corpus_fetch = _benchmark_script("realworld_fetch")


def test_the_pinned_corpus_is_large_enough_and_recorded() -> None:
    """At least 100 nvcc-clean files from at least four projects, each source pinned."""
    sources, entries = corpus_fetch.load_sources()
    for source in sources:
        assert source.kind in {"debian", "debian-source", "pypi"}
        assert source.version and source.licence
        assert len(source.sha256) == 64 and int(source.sha256, 16) >= 0
    assert all(e.nvcc in {"clean", "error"} for e in entries), "run realworld_fetch --record"
    clean = [e for e in entries if e.nvcc == "clean"]
    assert len(clean) >= 100
    assert len({e.project for e in clean}) >= 4
    assert sum(e.ptxas_kernels for e in clean) > 0


class _Index:
    """A package index on a local port, as pip's simple index (PEP 691 JSON) serves it."""

    def __init__(self, files: dict[str, bytes], paths: dict[str, bytes] | None = None) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/simple/"):
                    listing = [{"filename": n, "url": f"/files/{n}"} for n in index.files]
                    body = json.dumps({"files": listing}).encode()
                elif self.path.startswith("/files/") and self.path[7:] in index.files:
                    body = index.files[self.path[7:]]
                elif self.path in index.paths:  # a file by its whole path (Debian's pool)
                    body = index.paths[self.path]
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.files = files
        self.paths = paths or {}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"


def _wheel(files: dict[str, str]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for name, text in files.items():
            zipped.writestr(name, text)
    return buffer.getvalue()


def _sources_file(path: Path, archive: bytes, sha256: str | None = None) -> Path:
    import hashlib

    source = corpus_fetch.Source(
        "proj", "pypi", "proj", "1.0", "proj-1.0-py3-none-any.whl",
        sha256 or hashlib.sha256(archive).hexdigest(), "MIT", "LICENSE",
    )  # fmt: skip
    entry = corpus_runner.Entry(
        "proj/k.cu", "proj", ["proj/inc"], ["N=4"], "c++17", "clean", 1, {"_Z1kPf": 8}
    )
    corpus_fetch.write_sources(path, [source], [entry])
    return path


def test_fetch_downloads_checks_and_extracts_a_pinned_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the index's JSON to the file, sha256 checked; the runner's manifest written."""
    archive = _wheel({"LICENSE": "MIT\n", "k.cu": "__global__ void k(float* o) { o[0] = N; }\n"})
    index = _Index({"proj-1.0-py3-none-any.whl": archive})
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    sources = _sources_file(tmp_path / "sources.toml", archive)
    cache = tmp_path / "cache"
    entries = corpus_fetch.fetch(cache, sources)
    assert [e.path for e in entries] == ["proj/k.cu"]
    assert (cache / "proj" / "k.cu").read_text().startswith("__global__")
    manifest = corpus_runner.load_manifest(cache)
    assert manifest[0].defines == ["N=4"] and manifest[0].ptxas_registers == {"_Z1kPf": 8}
    index.files.clear()  # a second fetch uses the archive it has: no download
    assert corpus_fetch.fetch(cache, sources)[0].path == "proj/k.cu"
    index.server.shutdown()


def test_fetch_refuses_an_archive_whose_sha256_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = _wheel({"LICENSE": "MIT\n", "k.cu": "__global__ void k() {}\n"})
    index = _Index({"proj-1.0-py3-none-any.whl": archive})
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    sources = _sources_file(tmp_path / "sources.toml", archive, sha256="0" * 64)
    with pytest.raises(corpus_fetch.FetchError, match="sha256"):
        corpus_fetch.fetch(tmp_path / "cache", sources)
    assert not list((tmp_path / "cache" / "archives").glob("*.whl"))  # not kept
    index.server.shutdown()


def test_record_only_passes_each_text_to_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--record --only TEXT` (repeatable): the runner records each TEXT's files in turn (a new
    source's files, not the whole corpus again); sources.toml is rewritten from its manifest."""
    archive = _wheel({"LICENSE": "MIT\n", "k.cu": "__global__ void k() {}\n"})
    index = _Index({"proj-1.0-py3-none-any.whl": archive})
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    sources = _sources_file(tmp_path / "sources.toml", archive)
    calls: list[list[str]] = []
    monkeypatch.setattr(corpus_fetch.realworld_corpus, "main", lambda argv: calls.append(argv))
    argv = ["--cache", str(tmp_path / "cache"), "--sources", str(sources), "--record"]
    assert corpus_fetch.main([*argv, "--only", "proj/", "--only", "other/"]) == 0
    assert [c[c.index("--only") + 1] for c in calls] == ["proj/", "other/"]
    assert all("--record" in c for c in calls)
    assert corpus_fetch.load_sources(sources)[1][0].ptxas_registers == {"_Z1kPf": 8}
    calls.clear()  # a directory of this machine's environment reaches the runner, not the file
    assert corpus_fetch.main([*argv, "--only", "proj/", "--include", "/opt/blas"]) == 0
    assert "--include=/opt/blas" in calls[0] and "/opt/blas" not in sources.read_text()
    calls.clear()
    assert corpus_fetch.main(argv) == 0 and calls[0][calls[0].index("--only") + 1] == ""  # all
    index.server.shutdown()


def test_fetch_offline_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No index to reach: one line naming the package, and the CLI's status 2, no traceback."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port
    sources = _sources_file(tmp_path / "sources.toml", b"x")
    with pytest.raises(corpus_fetch.FetchError, match="proj: cannot download"):
        corpus_fetch.fetch(tmp_path / "cache", sources)
    argv = ["--cache", str(tmp_path / "cache"), "--sources", str(sources)]
    assert corpus_fetch.main(argv) == 2


def _deb(files: dict[str, str]) -> bytes:
    """A binary .deb as dpkg-deb writes it: an `ar` archive whose data.tar.xz holds `files`."""
    import io
    import tarfile

    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:xz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    members = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", b"c"),
        ("data.tar.xz", data.getvalue()),
    ]
    deb = b"!<arch>\n"
    for name, blob in members:
        deb += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(blob):<10}`\n".encode()
        deb += blob + (b"\n" if len(blob) % 2 else b"")
    return deb


def test_fetch_reads_a_debian_package_without_dpkg(tmp_path: Path) -> None:
    """A .deb is an `ar` archive holding data.tar.*: extracted by hand, so any machine can."""
    text = "__global__ void k() {}\n"
    (tmp_path / "p.deb").write_bytes(_deb({"./usr/share/doc/p/k.cu": text}))
    corpus_fetch._extract(tmp_path / "p.deb", tmp_path / "tree")
    assert (tmp_path / "tree/usr/share/doc/p/k.cu").read_text() == text


def _tarball(
    members: dict[str, str], links: dict[str, str] | None = None, compression: str = "xz"
) -> bytes:
    """A .tar.xz as Debian's orig tarballs are (.tar.gz, as sdists are, with "gz"): these
    files, and symbolic links name -> target."""
    import io
    import tarfile

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}") as tar:
        for name, text in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return buffer.getvalue()


_ORIG = "libfoo_1.0.orig.tar.xz"
_POOL = f"/debian/pool/main/libf/libfoo/{_ORIG}"  # Debian's prefix: lib and the next letter


def _debian_source_file(path: Path, archive: bytes, sha256: str | None = None) -> Path:
    import hashlib

    source = corpus_fetch.Source(
        "foo", "debian-source", "libfoo", "1.0-1", _ORIG,
        sha256 or hashlib.sha256(archive).hexdigest(), "MIT", "libfoo-1.0/LICENSE",
        subtrees=["libfoo-1.0/gpu"],
    )  # fmt: skip
    entry = corpus_runner.Entry("foo/libfoo-1.0/gpu/k.cu", "foo", [], [], "c++17", "clean", 1, {})
    corpus_fetch.write_sources(path, [source], [entry])
    return path


def test_fetch_takes_a_debian_source_archive_from_the_pool_only_its_subtrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An orig tarball from `pool/main/libf/libfoo/` of the mirror named, sha256 checked; only
    the subtrees pinned (and the licence) extracted and packed, not the rest of the project."""
    import tarfile

    archive = _tarball(
        {
            "libfoo-1.0/LICENSE": "MIT\n",
            "libfoo-1.0/gpu/k.cu": "__global__ void k() {}\n",
            "libfoo-1.0/gpu/inc/k.h": "#pragma once\n",
            "libfoo-1.0/gpu.cu": "__global__ void g() {}\n",  # gpu's prefix, not under gpu/
            "libfoo-1.0/src/big.cpp": "int big;\n",
        }
    )
    pool = _Index({}, {_POOL: archive})
    monkeypatch.setenv("CUDA_LLM_DEBIAN_MIRROR", pool.url.removesuffix("/simple") + "/debian/")
    sources = _debian_source_file(tmp_path / "sources.toml", archive)
    assert 'subtrees = ["libfoo-1.0/gpu"]' in sources.read_text()
    cache = tmp_path / "cache"
    assert [e.path for e in corpus_fetch.fetch(cache, sources)] == ["foo/libfoo-1.0/gpu/k.cu"]
    tree = cache / "foo"
    extracted = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert extracted == [
        ".extracted", "libfoo-1.0/LICENSE", "libfoo-1.0/gpu/inc/k.h", "libfoo-1.0/gpu/k.cu"
    ]  # fmt: skip
    out = tmp_path / "corpus.tar.gz"
    corpus_fetch.pack(cache, out, sources)
    with tarfile.open(out) as tar:
        assert "foo/libfoo-1.0/src/big.cpp" not in tar.getnames()
        assert "foo/libfoo-1.0/gpu/inc/k.h" in tar.getnames()
    pool.server.shutdown()


def test_fetch_takes_a_contrib_package_from_the_contrib_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source package of Debian's contrib area (free code that needs software outside main)
    lives under `pool/contrib/`, not `pool/main/`: its `component` names the area, and the
    archive may be the binary .deb built from it (the files of its examples folder)."""
    import hashlib

    deb = _deb({"./usr/share/doc/foo/COPYING": "BSD\n", "./usr/share/doc/foo/ex/k.cu": ""})
    name = "libfoo_1.0-1_all.deb"
    pool = _Index({}, {f"/debian/pool/contrib/libf/libfoo/{name}": deb})
    monkeypatch.setenv("CUDA_LLM_DEBIAN_MIRROR", pool.url.removesuffix("/simple") + "/debian")
    source = corpus_fetch.Source(
        "foo", "debian-source", "libfoo", "1.0-1", name, hashlib.sha256(deb).hexdigest(),
        "BSD-3-Clause", "usr/share/doc/foo/COPYING", subtrees=["usr/share/doc/foo/ex"],
        component="contrib",
    )  # fmt: skip
    entry = corpus_runner.Entry("foo/usr/share/doc/foo/ex/k.cu", "foo", [], [], "c++17")
    sources = tmp_path / "sources.toml"
    corpus_fetch.write_sources(sources, [source], [entry])
    assert 'component = "contrib"' in sources.read_text()
    assert corpus_fetch.load_sources(sources)[0] == [source]
    assert corpus_fetch.fetch(tmp_path / "cache", sources) == [entry]
    assert (tmp_path / "cache/foo/usr/share/doc/foo/ex/k.cu").is_file()
    pool.server.shutdown()
    main = corpus_fetch.Source(**{**source.__dict__, "component": "main"})
    corpus_fetch.write_sources(sources, [main], [entry])
    assert "component" not in sources.read_text()  # the default is not written


def test_fetch_takes_only_the_subtrees_of_a_pypi_sdist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PyPI sdist (.tar.gz, one top folder) through the index, its pinned subtrees only: a
    folder and single headers beside it, the licence deeper in the tree; nothing else."""
    import hashlib

    tree = {
        "proj-1.0/vendor/lib/LICENSE": "MIT\n",
        "proj-1.0/vendor/lib/src/gpu/k.cu": '#include "common.h"\n__global__ void k() {}\n',
        "proj-1.0/vendor/lib/src/common.h": "#pragma once\n",
        "proj-1.0/vendor/lib/src/common.hpp": "int not_pinned;\n",  # the prefix, another file
        "proj-1.0/vendor/lib/src/cpu/big.c": "int big;\n",
        "proj-1.0/setup.py": "",
    }
    archive = _tarball(tree, compression="gz")
    index = _Index({"proj-1.0.tar.gz": archive})
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    source = corpus_fetch.Source(
        "proj", "pypi", "proj", "1.0", "proj-1.0.tar.gz", hashlib.sha256(archive).hexdigest(),
        "MIT", "proj-1.0/vendor/lib/LICENSE",
        subtrees=["proj-1.0/vendor/lib/src/gpu", "proj-1.0/vendor/lib/src/common.h"],
    )  # fmt: skip
    entry = corpus_runner.Entry("proj/proj-1.0/vendor/lib/src/gpu/k.cu", "proj", [], [])
    sources = tmp_path / "sources.toml"
    corpus_fetch.write_sources(sources, [source], [entry])
    cache = tmp_path / "cache"
    assert [e.path for e in corpus_fetch.fetch(cache, sources)] == [entry.path]
    got = sorted(
        str(p.relative_to(cache / "proj")) for p in (cache / "proj").rglob("*") if p.is_file()
    )
    assert got == [
        ".extracted", "proj-1.0/vendor/lib/LICENSE", "proj-1.0/vendor/lib/src/common.h",
        "proj-1.0/vendor/lib/src/gpu/k.cu",
    ]  # fmt: skip
    index.server.shutdown()


def test_fetch_refuses_a_debian_source_archive_whose_sha256_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = _tarball({"libfoo-1.0/LICENSE": "MIT\n", "libfoo-1.0/gpu/k.cu": ""})
    pool = _Index({}, {_POOL: archive})
    monkeypatch.setenv("CUDA_LLM_DEBIAN_MIRROR", pool.url.removesuffix("/simple") + "/debian")
    sources = _debian_source_file(tmp_path / "sources.toml", archive, sha256="0" * 64)
    with pytest.raises(corpus_fetch.FetchError, match="sha256"):
        corpus_fetch.fetch(tmp_path / "cache", sources)
    assert not list((tmp_path / "cache" / "archives").iterdir())  # not kept, no .part either
    pool.server.shutdown()


@pytest.mark.parametrize(
    ("members", "links"),
    [
        ({"libfoo-1.0/gpu/../../../evil.cu": "x"}, {}),  # escapes through a kept subtree
        ({"/tmp/evil.cu": "x"}, {}),
        ({}, {"libfoo-1.0/gpu/k.cu": "/etc/passwd"}),  # a link out of the tree
    ],
)
@pytest.mark.parametrize("data_filter", [True, False], ids=["data-filter", "no-filter"])
def test_fetch_refuses_a_debian_source_archive_with_an_escaping_member(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    members: dict[str, str],
    links: dict[str, str],
    data_filter: bool,
) -> None:
    """A member named outside the tree (absolute, `..`, a link out): a FetchError naming the
    archive, nothing written outside the cache; also where Python's tarfile has no "data"
    filter (Debian 12's 3.11.2, 3.10), so the fetcher's own checks are the guard."""
    if not data_filter:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    archive = _tarball({"libfoo-1.0/LICENSE": "MIT\n", **members}, links)
    pool = _Index({}, {_POOL: archive})
    monkeypatch.setenv("CUDA_LLM_DEBIAN_MIRROR", pool.url.removesuffix("/simple") + "/debian")
    cache = tmp_path / "deep" / "cache"
    sources = _debian_source_file(tmp_path / "sources.toml", archive)
    with pytest.raises(corpus_fetch.FetchError, match=_ORIG):
        corpus_fetch.fetch(cache, sources)
    assert not (tmp_path / "evil.cu").exists() and not (tmp_path / "deep" / "evil.cu").exists()
    pool.server.shutdown()


def test_debian_pool_paths_and_the_mirror_this_machine_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debian's prefix rule; the mirror from apt's sources (deb822 or one-line), read as text,
    the environment's first; deb.debian.org without either."""
    assert corpus_fetch.debian_pool_path("eigen3", "e.tar.bz2") == "pool/main/e/eigen3/e.tar.bz2"
    assert corpus_fetch.debian_pool_path("libx11", "a.tar.xz") == "pool/main/libx/libx11/a.tar.xz"
    contrib = corpus_fetch.debian_pool_path("nvidia-x", "a_all.deb", "contrib")
    assert contrib == "pool/contrib/n/nvidia-x/a_all.deb"
    bads = [("../etc", "a.tar.xz"), ("eigen3", "../a.tar.xz"), ("eigen3", "a/b.tar.xz")]
    for bad in [*bads, ("eigen3", "a.tar.xz", "../main"), ("eigen3", "a.tar.xz", "Main")]:
        with pytest.raises(corpus_fetch.FetchError):
            corpus_fetch.debian_pool_path(*bad)
    monkeypatch.delenv("CUDA_LLM_DEBIAN_MIRROR", raising=False)
    monkeypatch.setattr(corpus_fetch, "APT_SOURCES", tmp_path)
    assert corpus_fetch._debian_mirror() == "http://deb.debian.org/debian"
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\n# URIs: http://commented.example/debian\n"
        "URIs: http://security.example/debian-security\nSuites: bookworm-security\n\n"
        "Types: deb\nURIs: https://mirror.example/debian/\nSuites: bookworm\n"
    )
    assert corpus_fetch._debian_mirror() == "https://mirror.example/debian"
    listed = "deb [arch=amd64] http://list.example/debian bookworm main\n"
    (tmp_path / "sources.list").write_text(listed)
    assert corpus_fetch._debian_mirror() == "http://list.example/debian"
    monkeypatch.setenv("CUDA_LLM_DEBIAN_MIRROR", "http://env.example/debian/")
    assert corpus_fetch._debian_mirror() == "http://env.example/debian"


def test_pack_carries_sources_headers_and_licences_not_binaries(tmp_path: Path) -> None:
    """The tarball a machine without network is given: the manifest, the C/C++/CUDA files and
    extensionless headers (libcu++'s) of each source, its licence; no binaries, no archives."""
    import tarfile

    archive = _wheel({"LICENSE.txt": "MIT\n"})
    sources = _sources_file(tmp_path / "sources.toml", archive)
    cache = tmp_path / "cache"
    tree = cache / "proj"
    files = {
        "k.cu": "__global__ void k(float* o) { o[0] = N; }\n",
        "inc/a.hpp": "#pragma once\n",
        "inc/cuda/std/atomic": "#pragma once\n",
        "LICENSE": "MIT\n",
        "lib/libproj.so": "\x7fELF",
        "proj/__init__.py": "",
    }
    for name, text in files.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)
    (cache / "archives").mkdir()
    (cache / "archives" / "proj-1.0-py3-none-any.whl").write_bytes(archive)
    _, entries = corpus_fetch.load_sources(sources)
    corpus_runner.write_manifest(cache, entries)
    out = tmp_path / "carry" / "corpus.tar.gz"
    assert corpus_fetch.pack(cache, out, sources) == out.stat().st_size > 0
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
    assert names == {
        "manifest.toml", "proj/k.cu", "proj/inc/a.hpp", "proj/inc/cuda/std/atomic", "proj/LICENSE"
    }  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 222 files on 2 cores beside other slow tests: past the 300 s default
def test_no_false_errors_on_the_downloaded_corpus(tmp_path: Path) -> None:
    """Every nvcc-clean file of tests/data/realworld/sources.toml (downloaded from its pinned
    packages) checked by the fast tier with its own build's flags: not one error that nvcc
    does not report (issue 28). Prints the summary."""
    cache = Path(os.environ.get("CUDA_LLM_CORPUS_CACHE") or tmp_path / "corpus")
    try:
        corpus_fetch.fetch(cache)
    except corpus_fetch.FetchError as exc:
        pytest.skip(f"the real-world corpus could not be downloaded (offline?): {exc}")
    _, entries = corpus_fetch.load_sources()
    clean = [e for e in entries if e.nvcc == "clean"]
    out = tmp_path / "report.json"
    status = corpus_runner.main([str(cache), "--jobs", "2", "--json", str(out)])
    summary = json.loads(out.read_text())["summary"]
    print("real-world corpus:", json.dumps(summary))
    assert summary["files"] == len(clean) >= 100
    found = {f["path"]: f["errors"] for f in json.loads(out.read_text())["files"] if f["errors"]}
    assert not found, f"false errors on nvcc-clean files: {found}"
    assert status == 0, summary


corpus_manifest = _benchmark_script("realworld_manifest")


def test_manifest_writer_gives_each_file_its_projects_directories(tmp_path: Path) -> None:
    (tmp_path / "proj" / "src" / "k").mkdir(parents=True)
    (tmp_path / "proj" / "include").mkdir()
    (tmp_path / "proj" / "src" / "k" / "a.cu").write_text("__global__ void a() {}\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "b.cu").write_text("__global__ void b() {}\n")
    status = corpus_manifest.main(
        [
            str(tmp_path),
            "--only-under",
            "proj/src",
            "--flags",
            "proj=-Iextra -DX=1 -std=c++20 --expt-relaxed-constexpr",
        ]
    )
    assert status == 0
    (entry,) = corpus_runner.load_manifest(tmp_path)
    assert entry.path == "proj/src/k/a.cu" and entry.project == "proj"
    assert entry.include_dirs == ["proj/src/k", "proj", "proj/include", "extra"]
    assert entry.defines == ["X=1"] and entry.std == "c++20"
    assert entry.flags == ["--expt-relaxed-constexpr"]  # to nvcc, and to the nvcc tier
