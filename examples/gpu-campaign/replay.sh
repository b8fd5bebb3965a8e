#!/usr/bin/env bash
# Replay the H200 campaign into a kernel-ledger database: plan, baseline profile, rounds,
# A/A remeasures, analysis, verification. Uses the ledger given by --db / KERNEL_LEDGER_DB.
#
#   KERNEL_LEDGER_DB=sqlite:////tmp/gpu-campaign.sqlite3 bash examples/gpu-campaign/replay.sh
#
# KL overrides the command (default: kernel-ledger); OUT_DIR where analyze writes (default: a
# new temporary folder); JSON=1 prints each command's JSON object instead of readable lines. The A/A files re-time the final best kernel, which is the best from
# round 1 on, so they are recorded right after round 1.
#
# The input files name paths relative to the repository root, the workspace they were
# written for (as agents run the JSON-file controller from the workspace root), so the
# replay runs from there.
set -euo pipefail
out_dir=${OUT_DIR:-$(mktemp -d)}
case $out_dir in /*) ;; *) out_dir="$PWD/$out_dir" ;; esac
case ${KL:-} in */*) KL="$(cd "$(dirname "$KL")" && pwd)/$(basename "$KL")" ;; esac
KL=${KL:-kernel-ledger}
cd "$(dirname "$0")/../.."
here=examples/gpu-campaign
fmt=${JSON:+--json}
case_id=fp16-4096x1024  # campaign_plan.REPRESENTATIVE_CASE

for op in softmax rmsnorm; do
    run="gpu-$op-001"
    start=$([ "$op" = softmax ] && echo s0_base || echo n0_base)
    $KL plan --config "$here/$op/config.json" $fmt
    $KL profile --run "$run" --baseline "$here/$op/profiles/$start.$case_id.ncu.csv" --json >/dev/null
    for result in $(ls "$here/$op/rounds/" | sort -t- -k2 -n); do
        $KL record --run "$run" --result "$here/$op/rounds/$result" $fmt
        if [ "$result" = round-1.json ]; then
            for aa in "$here/$op/noise/"aa-*.json; do
                $KL noise --run "$run" --measurements "$aa" --json >/dev/null
            done
        fi
    done
    $KL analyze --run "$run" --output-dir "$out_dir/$op" $fmt
done
$KL verify $fmt
