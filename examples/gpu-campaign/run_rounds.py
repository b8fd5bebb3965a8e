"""The campaign's rounds measured like-for-like: every round's candidate and its parent (the
best kernel of the moment, as `reference`) interleaved in one session by the harness
(ledger/harness/measure.py), in batches, stopped at the sequential rule's first settled look.

    python3 run_rounds.py [--out DIR] [--smoke]

needs torch and triton, and kernel-ledger importable (the repository's .venv). For each op it
walks the planned rounds (campaign_plan.OPS) as `simulate` does, over the kernels whose
validation manifest (<op>/validation/<kernel>/manifest.json) passed, and writes below DIR
(default: <this folder>/harness):

    <op>/round-<n>/raw/{candidate,reference}/<case>.json   samples in µs, with the session
    <op>/round-<n>/fragment.json      `session`, `measurements`, `reference`: merge it into
                                      the round result `kernel-ledger record` takes
    summary.json                      per round: decision, settled, repeats used, the looks,
                                      device time measured and saved against max_repeats

After each batch the round is decided by `kernel-ledger decide`'s own code
(ledger.services.dryrun.decide_one) with the statistics below; `more_repeats` says how many
samples per case the next look needs. `--smoke` runs on the CPU under TRITON_INTERPRET=1
with 8-row cases and the wall-clock timer: plumbing only, no evidence.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

import campaign_plan as plan  # noqa: E402
from run_campaign import SEQUENTIAL, measure_sequentially  # noqa: E402


def passed(op: str, kernel: str) -> bool:
    path = HERE / op / "validation" / kernel / "manifest.json"
    return path.exists() and json.loads(path.read_text()).get("status") == "passed"


def decide_input(result, objective: dict) -> dict:
    """The `decide` input for the samples measured so far (candidate against reference)."""

    def rows(role: str) -> list[dict]:
        return [
            {"case_id": c, "samples_us": list(result.samples[role][c])} for c in result.case_ids
        ]

    return {
        "objective": objective,
        "cases": [{"id": c["id"], "weight": c["weight"]} for c in plan.CASES],
        "best": rows("reference"),
        "reference": rows("reference"),
        "candidate": rows("candidate"),
        "statistics": {"sequential": SEQUENTIAL},
    }


def measure_round(op, modules, parent, candidate, out_dir, smoke, objective) -> dict:
    """One round: candidate and parent interleaved, looks until settled or max_repeats."""
    import do_bench_campaign as rc

    from ledger.harness.measure import Harness
    from ledger.services.dryrun import decide_one, parse_input

    harness = Harness(timer="wall" if smoke else "cuda")
    for case in plan.CASES:
        x, weight, out = rc.case_buffers(op, case, smoke)

        def launch(module, x=x, weight=weight, out=out):
            return lambda: rc.call(op, module, x, weight, out)

        harness.add_case(
            case["id"], candidate=launch(modules[candidate]), reference=launch(modules[parent])
        )
    answers: list[dict] = []

    def until(result) -> int:
        answer = decide_one(parse_input(decide_input(result, objective), "look"), "look")
        answers.append(answer)
        return 0 if answer["settled"] else int(answer.get("more_repeats", 0))

    started = time.perf_counter()
    result = measure_sequentially(harness, until)
    seconds = time.perf_counter() - started
    parent_sha = rc.sha256_file(rc.kernel_file(op, parent))
    fragment = result.write(out_dir / "raw", reference_sha256=parent_sha)
    rc.write_json(out_dir / "fragment.json", fragment)
    # the answer on every sample measured (the harness asks no look at max_repeats)
    final = decide_one(parse_input(decide_input(result, objective), "round"), "round")
    measured_us = sum(sum(v) for per in result.samples.values() for v in per.values())
    per_sample_us = measured_us / max(1, result.repeats)
    saved_us = (SEQUENTIAL["max_repeats"] - result.repeats) * per_sample_us
    return {
        "decision": final["decision"],
        "settled": final["settled"],
        "repeats_used": final["repeats_used"],
        "repeats_measured": result.repeats,
        "looks": result.looks,
        "relative_improvement": final["relative_improvement"],
        "session": result.session.as_dict(),
        "kernel_time_measured_ms": measured_us / 1000.0,
        "kernel_time_saved_ms": saved_us / 1000.0,
        "wall_seconds": seconds,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "harness")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--op", choices=sorted(plan.OPS), action="append")
    args = parser.parse_args(argv)
    if args.smoke:
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import do_bench_campaign as rc

    summary: dict = {"sequential": SEQUENTIAL, "smoke": args.smoke, "ops": {}}
    for op in args.op or sorted(plan.OPS):
        modules = {k: rc.load_kernel(op, k) for k in plan.kernel_names(op) if passed(op, k)}
        best = plan.OPS[op]["start"]
        rounds = []
        for rnd in plan.OPS[op]["rounds"]:
            chosen = next((v for v in rnd["variants"] if v[1] == best), rnd["variants"][0])
            name = chosen[0]
            row = {"round": rnd["round"], "candidate": name, "parent": best}
            if name not in modules:
                row.update(decision="FAIL", repeats_used=0)
            else:
                out_dir = args.out / op / f"round-{rnd['round']}"
                row.update(
                    measure_round(op, modules, best, name, out_dir, args.smoke, plan.OBJECTIVE)
                )
                if row["decision"] == "KEEP":
                    best = name
            row["best_after"] = best
            rounds.append(row)
            print(json.dumps({"op": op, **{k: row.get(k) for k in ("round", "decision",
                  "settled", "repeats_used", "kernel_time_saved_ms")}}), flush=True)  # fmt: skip
        summary["ops"][op] = {
            "rounds": rounds,
            "kernel_time_saved_ms": sum(r.get("kernel_time_saved_ms", 0.0) for r in rounds),
        }
    rc.write_json(args.out / "summary.json", summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
