#!/usr/bin/env bash
# The real-world corpora on the GPU machine's own environment (issue 38, item 7): no network, the
# image's python3 (its PyTorch venv) and the nvcc a user of it finds (PATH, else the system
# toolkit's /usr/local/cuda/bin). Called by `benchmarks/gpu_all.sh corpus` / `corpus-nvcc`.
#   usage: bash benchmarks/gpu_corpus.sh WORK fast|nvcc
# The sources are carried, not downloaded: make the tarball on a machine with network with
#   python benchmarks/realworld_fetch.py --pack .corpus/realworld.tar.gz
# and carry `.corpus` (about 12 MiB). `fast`: unpack it, record this machine's nvcc verdicts
# (`realworld_corpus.py --record`; the CPU machine's manifest is kept beside them), check every
# nvcc-clean file with the fast tier (`check --no-nvcc`), then `check` and `bench` a kernel file
# including cuBLAS. `nvcc`: the same files with the nvcc tier merged (`check`'s default where
# nvcc is found), from the verdicts `fast` recorded if this machine still has them (run it
# right after `corpus`, while the machine is warm; on a fresh one it records first, and the nvcc
# tier then gets what is left of the 10 minutes).
# Writes into WORK: manifest-cpu.toml, manifest-gpu.toml, verdicts.log, corpus-fast.{json,log},
# corpus-nvcc.{json,log}, cublas-*.{json,log}. CORPUS_TARBALL, CORPUS_DIR (/tmp/corpus) and
# CORPUS_JOBS (all cores) change where it reads, unpacks and how many files at once.
set -u
work=${1:?WORK}
stage=${2:-fast}
tarball=${CORPUS_TARBALL:-.corpus/realworld.tar.gz}
dir=${CORPUS_DIR:-/tmp/corpus}
jobs=${CORPUS_JOBS:-$(nproc)}

command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
{ echo "python3: $(command -v python3)"
  found=$(python3 -c "from cuda_llm_lsp.compile.nvcc import find_nvcc; print(find_nvcc() or '')")
  echo "nvcc cuda-llm finds: ${found:-none}"
  [ -n "$found" ] && "$found" --version | tail -n 2
  python3 -c "from cuda_llm_lsp.compile import headers; from cuda_llm_lsp.compile.nvcc import find_nvcc
print('cublas_v2.h for that nvcc:', headers.find_library_header('cublas_v2.h', headers.nvcc_include_dirs(find_nvcc())))
print('NVRTC include directories:', *headers.toolkit_include_dirs())
print('of them from that nvcc toolkit:', *headers.borrowed_include_dirs() or ['(none)'])"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  python3 -m pip list 2>/dev/null | grep -iE "^(nvidia-(cublas|nccl|cuda-runtime|cuda-nvrtc|cuda-cccl)|cuda-pathfinder) "
} 2>&1 | tee "$work/corpus-env.log"

# headers of this environment a project's build is pointed at (LightGBM's <nccl.h>: PyTorch's
# NCCL wheel); the toolkit's own (cuBLAS included) nvcc and the fast tier find by themselves
include=()
nccl=$(python3 - <<'PY'
import pathlib
try:
    import nvidia
except ImportError:
    raise SystemExit(0)
found = [h.parent for r in nvidia.__path__ for h in sorted(pathlib.Path(r).glob("*/include/nccl.h"))]
print(found[0] if found else "")
PY
)
[ -n "$nccl" ] && include+=(--include "$nccl")
# PyTorch extensions' builds (torch.utils.cpp_extension) add torch's headers and Python's: the
# venv's own, found without importing torch
while IFS= read -r dir_; do
  [ -n "$dir_" ] && include+=(--include "$dir_")
done < <(python3 - <<'PY'
import importlib.util, pathlib, sysconfig
spec = importlib.util.find_spec("torch")
if spec and spec.submodule_search_locations:
    root = pathlib.Path(next(iter(spec.submodule_search_locations))) / "include"
    for d in (root, root / "torch" / "csrc" / "api" / "include"):
        if d.is_dir():
            print(d)
    print(sysconfig.get_paths()["include"])
PY
)
echo "extra include directories: ${include[*]:-(none)}" | tee -a "$work/corpus-env.log"

record() {
  if [ ! -f "$tarball" ]; then
    echo "no $tarball: make it with 'python benchmarks/realworld_fetch.py --pack $tarball'" \
      "where the network is, and carry .corpus"
    exit 2
  fi
  rm -rf "$dir"; mkdir -p "$dir"; tar -xzf "$tarball" -C "$dir"
  cp "$dir/manifest.toml" "$work/manifest-cpu.toml"
  # (each verdict is written as it comes: a stop at the time limit keeps those it has)
  timeout 330 python3 benchmarks/realworld_corpus.py "$dir" --record --jobs "$jobs" "${include[@]}" \
    > "$work/verdicts.log" 2>&1
  echo "record exit: $?" | tee -a "$work/verdicts.log"
  cp "$dir/manifest.toml" "$work/manifest-gpu.toml"
  touch "$dir/.recorded-here"
  python3 - "$work/manifest-cpu.toml" "$work/manifest-gpu.toml" <<'PY' | tee -a "$work/verdicts.log"
import sys, tomllib
cpu, gpu = ({f["path"]: f for f in tomllib.load(open(p, "rb"))["file"]} for p in sys.argv[1:3])
projects = sorted({f["project"] for f in gpu.values()})
for project in projects:
    mine = [p for p, f in gpu.items() if f["project"] == project]
    clean_gpu = sum(gpu[p]["nvcc"] == "clean" for p in mine)
    clean_cpu = sum(cpu.get(p, {}).get("nvcc") == "clean" for p in mine)
    kernels = sum(gpu[p]["ptxas_kernels"] for p in mine if gpu[p]["nvcc"] == "clean")
    print(f"verdicts {project}: {clean_gpu} of {len(mine)} nvcc-clean here "
          f"({clean_cpu} on the CPU machine), {kernels} ptxas kernels")
PY
}

case "$stage" in
fast)
  # first a kernel file including cuBLAS: check (nvcc's verdict and the fast tier's), the fast
  # tier alone, bench
  cublas=tests/data/realworld/cublas_twice.cu
  for mode in check check-no-nvcc bench; do
    case $mode in
      check) args=(check "$cublas") ;;
      check-no-nvcc) args=(check --no-nvcc "$cublas") ;;
      bench) args=(bench "$cublas") ;;
    esac
    timeout 60 python3 -m cuda_llm_lsp.cli "${args[@]}" > "$work/cublas-$mode.log" 2>&1
    echo "cublas $mode exit: $?" | tee -a "$work/cublas-$mode.log"
    timeout 60 python3 -m cuda_llm_lsp.cli "${args[@]}" --format json > "$work/cublas-$mode.json" 2>/dev/null
    tail -n 15 "$work/cublas-$mode.log"
  done
  record
  timeout 180 python3 benchmarks/realworld_corpus.py "$dir" --jobs "$jobs" "${include[@]}" \
    --json "$work/corpus-fast.json" > "$work/corpus-fast.log" 2>&1
  echo "corpus fast tier exit: $?" | tee -a "$work/corpus-fast.log"
  tail -n 60 "$work/corpus-fast.log"
  ;;
nvcc)
  limit=540
  if [ ! -f "$dir/.recorded-here" ]; then
    echo "no verdicts recorded here yet (a fresh machine): recording first"; record; limit=220
  fi
  timeout "$limit" python3 benchmarks/realworld_corpus.py "$dir" --nvcc --jobs "$jobs" "${include[@]}" \
    --json "$work/corpus-nvcc.json" > "$work/corpus-nvcc.log" 2>&1
  echo "corpus nvcc tier exit: $?" | tee -a "$work/corpus-nvcc.log"
  tail -n 60 "$work/corpus-nvcc.log"
  ;;
*) echo "unknown stage $stage (fast | nvcc)"; exit 2 ;;
esac
