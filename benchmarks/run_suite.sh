#!/usr/bin/env bash
# Run the kernel suite twice on the local GPU and keep both reports under $OUT (default:
# benchmarks/results): the baselines alone, then the FSR loop replaying the hand-written
# candidates (labelled, not model output). A failing kernel never stops the run; each command's
# exit status is printed. Budget: a few minutes of device time in all.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # works without `pip install -e .`
BUDGET="${SUITE_TIME_BUDGET:-0.5}"   # timing budget per timed kernel, seconds
mkdir -p "$OUT"

echo "== suite: baselines =="
time "$PY" -m cuda_llm_lsp.cli suite benchmarks/suite --out "$OUT/suite" --time-budget "$BUDGET" \
    2>&1 | tee "$OUT/suite.log"
echo "exit status: ${PIPESTATUS[0]}"

echo "== suite: FSR loop replaying benchmarks/recordings/hand-written =="
time "$PY" -m cuda_llm_lsp.cli suite benchmarks/suite --optimize \
    --replay benchmarks/recordings/hand-written --out "$OUT/suite-opt" --time-budget "$BUDGET" \
    2>&1 | tee "$OUT/suite-opt.log"
echo "exit status: ${PIPESTATUS[0]}"
ls -l "$OUT/suite" "$OUT/suite-opt" 2>/dev/null
