#!/usr/bin/env bash
# Replay the softmax demo campaign into a fresh embedded SQLite ledger:
# plan, record every round (one of them rejected for a stale parent), analyze, verify.
set -uo pipefail
cd "$(dirname "$0")/../.."
KL=".venv/bin/kernel-ledger"
EX=examples/softmax-demo
OUT=.demo
rm -rf "$OUT" && mkdir -p "$OUT"
export KERNEL_LEDGER_DB="sqlite:///$OUT/ledger.sqlite3"
# --keep-verify-for-later: the caller verifies the whole ledger after more campaigns
final_verify=true
[ "${1:-}" = "--keep-verify-for-later" ] && final_verify=false

step() { printf '\n$ %s\n' "$*"; "$@" 2>&1; }

echo "kernel-ledger demo: a softmax campaign of five rounds on Ascend910B2 (ledger: $OUT/ledger.sqlite3)"
step $KL plan --config $EX/config.json || exit 1
step $KL record --run softmax-demo-001 --result $EX/rounds/round-1.json || exit 1
printf '\n# a round prepared against the starting kernel must be refused (exit 2), nothing written:'
step $KL record --run softmax-demo-001 --result $EX/rounds/round-2-stale-parent.json
rc=$?
[ "$rc" = 2 ] || { echo "expected exit 2, got $rc"; exit 1; }
for n in 2 3 4 5; do
  step $KL record --run softmax-demo-001 --result $EX/rounds/round-$n.json || exit 1
done
step $KL analyze --run softmax-demo-001 --output-dir $OUT/analysis || exit 1
step $KL history --run softmax-demo-001 || exit 1
step $KL status --run softmax-demo-001 || exit 1
printf '\n# the report analyze wrote: %s\n' "$OUT/analysis/report.md"
$final_verify && step $KL verify
exit 0
