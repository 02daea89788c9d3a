#!/usr/bin/env bash
# One device call for the evaluator (issue 3): its GPU tests, then the throughput and timing
# repeatability benchmarks. Logs go to $OUT (the device tool's output folder) or ./gpu-logs.
# Needs the project's wheels in .whl (../shared/gpu/make-wheels.sh .whl).
set -u
out=${OUT:-gpu-logs}; mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import sys, cuda.bindings, numpy; print(sys.version.split()[0], 'cuda-bindings', cuda.bindings.__version__, 'numpy', numpy.__version__)"
  command -v compute-sanitizer; } 2>&1 | tee "$out/env.log"
timeout 400 python3 -m pytest -q -s -rs -p no:cacheprovider tests/gpu/test_evaluator_gpu.py 2>&1 | tee "$out/gpu-tests.log"
timeout 150 python3 benchmarks/evaluator_throughput.py 2>&1 | tee "$out/throughput.log"
timeout 150 python3 benchmarks/timing_repeatability.py 2>&1 | tee "$out/repeatability.log"
echo "=== summary"; tail -n 3 "$out/gpu-tests.log"; tail -n 5 "$out/throughput.log" "$out/repeatability.log"
