#!/usr/bin/env bash
# make demo: two campaigns into one fresh embedded SQLite ledger (.demo/ledger.sqlite3).
#   1. softmax-demo: a hand-made Ascend softmax campaign that exercises every decision
#      (KEEP, DISCARD, NOISE, FAIL) and a refused stale-parent round; it meets its target.
#   2. gpu-campaign: a real Triton campaign (softmax and RMSNorm) captured on an NVIDIA H200,
#      with raw do_bench samples, ncu profiles and A/A remeasures. GPU timings.
# Then cross-run history, the reports, and a full verification of the ledger.
set -uo pipefail
cd "$(dirname "$0")/.."
KL=".venv/bin/kernel-ledger"
OUT=.demo
export KERNEL_LEDGER_DB="sqlite:///$OUT/ledger.sqlite3"

bash examples/softmax-demo/demo.sh --keep-verify-for-later || exit 1

printf '\n== Replaying the H200 Triton campaign (GPU timings; no GPU needed) ==\n'
KL=$KL OUT_DIR=$OUT/gpu bash examples/gpu-campaign/replay.sh 2>&1 | grep -v '^verified' || exit 1

step() { printf '\n$ %s\n' "$*"; "$@" 2>&1; }
step $KL status
step $KL history --op softmax --decision KEEP
step $KL history --like-profile examples/gpu-campaign/softmax/profiles/s1_multirow.fp16-4096x1024.ncu.csv --kernel-name kl_softmax_s1_multirow --limit 3
step $KL compare --run gpu-rmsnorm-001 --round 0 --round 1
for run in softmax-demo-001 gpu-softmax-001 gpu-rmsnorm-001; do
  step $KL report --run $run --html $OUT/reports/$run.html || exit 1
done
printf '\n# open the HTML reports in a browser: %s\n' "$OUT/reports/*.html"
step $KL checkpoint
step $KL check-merge --run softmax-demo-001 --kernel examples/softmax-demo/kernels/softmax_r5_gridstride.py || exit 1
step $KL verify --chain
step $KL verify
