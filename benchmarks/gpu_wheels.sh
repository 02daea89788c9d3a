#!/usr/bin/env bash
# For a GPU machine that reaches no package index: download the project's dependencies as wheels
# (Python 3.12, x86-64) into DIR, leaving out what a CUDA image usually has (numpy, CUDA, NVIDIA,
# CuPy, PyTorch). Carry DIR to that machine; benchmarks/gpu_all.sh installs from ./.whl if present.
# usage: bash benchmarks/gpu_wheels.sh [DIR=.whl]        (in the project root, on a machine with pip)
set -euo pipefail
out=${1:-.whl}
reqs=$(python3 - <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
wanted = project["dependencies"] + ["pytest", "pytest-timeout", "pytest-asyncio", "pytest-lsp"]
skip = ("numpy", "cuda-", "cuda_", "nvidia", "cupy", "torch")
print("\n".join(d for d in wanted if not d.lower().startswith(skip)))
PY
)
rm -rf "$out"; mkdir -p "$out"
platforms=(--platform manylinux2014_x86_64 --platform linux_x86_64)
for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
echo "$reqs" > "$out/requirements.txt"
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$out" -r "$out/requirements.txt"
rm -f "$out"/numpy-* "$out"/cuda_* "$out"/nvidia_* "$out"/cupy* "$out"/torch-*
du -sh "$out"
