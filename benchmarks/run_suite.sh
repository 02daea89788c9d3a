#!/usr/bin/env bash
# Run the kernel suite on the local GPU and keep the report under $OUT (default:
# benchmarks/results): every kernel's baseline is benched, and the FSR loop replays the
# hand-written candidates (labelled, not model output) where a kernel has them, so one report
# holds baselines and winners measured in the same run. SUITE_BASELINES=1 adds a baselines-only
# run. SUITE_DEADLINE=S starts no kernel after S seconds (the rest are reported as skipped), so a
# run under a hard time limit still ends with a report. A failing kernel never stops the run;
# each command's exit status is printed.
#
# The optimize pass runs with `--launch free` (SUITE_LAUNCH=auto|keep overrides): the suite
# measures kernels, and nothing is written back to its files, so a candidate's own
# `/* @cuda-llm launch */` block (grid, block, smem) is judged with that launch. (`auto` gives the
# same here: every suite `main` launches its kernel in terms a rewrite can follow.)
#
# SUITE_TUNE=N adds a tuning pass (`--tune N`): every kernel whose spec declares tunables is
# searched (up to N configurations) and the report (suite-tune/) shows tuned against untuned,
# both measured in the same run. SUITE_TUNE_DEADLINE=S bounds that pass as SUITE_DEADLINE does.
# SUITE_OPTIMIZE=0 leaves out the optimize pass (e.g. for the tuning pass alone).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-benchmarks/results}"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # works without `pip install -e .`
BUDGET="${SUITE_TIME_BUDGET:-0.5}"   # timing budget per timed kernel, seconds
LAUNCH="${SUITE_LAUNCH:-free}"      # the optimize pass's launch policy (see above)
deadline=()
[ -n "${SUITE_DEADLINE:-}" ] && deadline=(--deadline "$SUITE_DEADLINE")
mkdir -p "$OUT"

if [ "${SUITE_BASELINES:-0}" = 1 ]; then
  echo "== suite: baselines =="
  time "$PY" -m cuda_llm_lsp.cli suite benchmarks/suite --out "$OUT/suite" --time-budget "$BUDGET" \
      "${deadline[@]}" 2>&1 | tee "$OUT/suite.log"
  echo "exit status: ${PIPESTATUS[0]}"
fi

if [ "${SUITE_OPTIMIZE:-1}" = 1 ]; then
  echo "== suite: baselines, and the FSR loop replaying benchmarks/recordings/hand-written (--launch $LAUNCH) =="
  time "$PY" -m cuda_llm_lsp.cli suite benchmarks/suite --optimize \
      --replay benchmarks/recordings/hand-written --launch "$LAUNCH" --out "$OUT/suite-opt" \
      --time-budget "$BUDGET" \
      "${deadline[@]}" 2>&1 | tee "$OUT/suite-opt.log"
  echo "exit status: ${PIPESTATUS[0]}"
fi
if [ -n "${SUITE_TUNE:-}" ]; then
  tune_deadline=()
  [ -n "${SUITE_TUNE_DEADLINE:-}" ] && tune_deadline=(--deadline "$SUITE_TUNE_DEADLINE")
  echo "== suite: tunables searched (--tune $SUITE_TUNE), tuned against untuned =="
  time "$PY" -m cuda_llm_lsp.cli suite benchmarks/suite --tune "$SUITE_TUNE" --no-vendor \
      --out "$OUT/suite-tune" --time-budget "$BUDGET" "${tune_deadline[@]}" 2>&1 | tee "$OUT/suite-tune.log"
  echo "exit status: ${PIPESTATUS[0]}"
fi
ls -l "$OUT/suite" "$OUT/suite-opt" "$OUT/suite-tune" 2>/dev/null
