"""Turn the device output of do_bench_campaign.py into kernel-ledger input files.

    python3 build_inputs.py [--dir DIR]

Standard library only. DIR (default: this folder) holds what do_bench_campaign.py wrote
(environment.json, <op>/validation, <op>/raw, <op>/profiles). For each op it writes:

    <op>/config.json               run configuration (SPEC 2.1), baseline = starting kernel
    <op>/rounds/round-N.json       round results (SPEC 2.2), in campaign order
    <op>/noise/aa-K.json           A/A re-measurements of the final best kernel
    <op>/profiles/<kernel>.<case>.ncu.csv  Nsight Compute rows of one launch (if ncu ran)
    <op>/profiles/signals.json     per kernel and case: duration, DRAM, SM, occupancy
    <op>/expected-decisions.json   the decision rule replayed here on the medians

Every path inside these files is relative to the repository root (the workspace the replay
runs from), as the JSON-file controller resolves paths against the working directory; a
manifest's artifact URIs stay relative to the manifest's folder. Medians
and samples are computed from the raw files exactly as the ledger reads them (milliseconds
scaled to microseconds from the decimal text, one rounding). Which kernel is best before
each round comes from replaying SPEC 3 on the medians (campaign_plan.simulate); the round's
candidate is the variant written on top of that kernel. If no variant was, the script stops
(exit 1) rather than write a round whose candidate changes more than one thing.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKSPACE = HERE.parents[1]  # the repository root: replay.sh runs from there
sys.path.insert(0, str(HERE))

import campaign_plan as plan  # noqa: E402

# Signals as kernel-ledger normalizes ncu metrics: durations in us, percentages as fractions.
SIGNAL_METRICS = {
    # signal: (ncu metric names, first found wins; "time" or "pct" or "count")
    "duration_us": (("gpu__time_duration.sum", "Duration"), "time"),
    "dram_throughput": (
        ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM Throughput"),
        "pct",
    ),
    "sm_throughput": (
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "Compute (SM) Throughput"),
        "pct",
    ),
    "achieved_occupancy": (
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "Achieved Occupancy"),
        "pct",
    ),
    "memory_throughput": (("Memory Throughput",), "pct"),
    "theoretical_occupancy": (("Theoretical Occupancy",), "pct"),
    "registers_per_thread": (("Registers Per Thread",), "count"),
    "grid_size": (("Grid Size",), "count"),
    "block_size": (("Block Size",), "count"),
}
# The plan names expected signals by its own words and gives min_change relative to the
# parent kernel's value; the ledger compares absolute changes of its normalized signals.
PLAN_SIGNAL_NAMES = {
    "duration_us": "duration_us",
    "achieved_occupancy_pct": "achieved_occupancy",
    "dram_throughput_pct": "dram_throughput",
    "sm_throughput_pct": "sm_throughput",
}


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_json(path: Path):
    return json.loads(path.read_text())


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")


def measurement(raw_path: Path, case_id: str) -> dict:
    raw = read_json(raw_path)
    if raw.get("unit") != "ms":
        raise SystemExit(f"{raw_path}: expected unit ms, got {raw.get('unit')!r}")
    samples_us = [plan.ms_to_us(v) for v in raw["samples"]]
    return {
        "case_id": case_id,
        "median_us": plan.median(samples_us),
        "repeats": len(samples_us),
        "samples_us": samples_us,
        "source": rel(raw_path),
    }


def rel(path: Path) -> str:
    """A path as the input files write it: relative to the workspace (the working directory)."""
    import os

    return os.path.relpath(path, WORKSPACE).replace(os.sep, "/")


# --- Nsight Compute ------------------------------------------------------------------------


def parse_ncu(csv_text: str):
    """Rows of ncu's --csv details page; lines that are not CSV (==PROF== ...) dropped."""
    lines = [ln for ln in csv_text.splitlines() if ln.startswith('"')]
    if not lines:
        return [], []
    reader = csv.DictReader(io.StringIO("\n".join(lines) + "\n"))
    return reader.fieldnames or [], list(reader)


def ncu_signals(rows: list[dict]) -> dict:
    """Profiled launch ID -> {signal: value}."""
    by_id: dict[str, dict] = {}
    for row in rows:
        metrics = by_id.setdefault(row["ID"], {"_units": {}, "_kernel": row.get("Kernel Name")})
        name = row.get("Metric Name", "")
        value = row.get("Metric Value", "").replace(",", "")
        try:
            metrics[name] = float(value)
            metrics["_units"][name] = row.get("Metric Unit", "")
        except ValueError:
            continue
    out = {}
    for launch_id, metrics in by_id.items():
        signals = {}
        for signal, (names, kind) in SIGNAL_METRICS.items():
            for name in names:
                if name not in metrics:
                    continue
                value = metrics[name]
                if kind == "time":
                    value = to_us(value, metrics["_units"].get(name, ""))
                    if value is None:
                        continue
                elif kind == "pct":
                    value = value / 100.0
                signals[signal] = value
                break
        out[launch_id] = {"kernel_name": metrics["_kernel"], "signals": signals}
    return out


def to_us(value: float, unit: str) -> float | None:
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    return value * scale[unit] if unit in scale else None


def build_profiles(op: str, opdir: Path) -> dict:
    """Split ncu.csv per kernel, return {kernel: {case_id: signals}}."""
    pdir = opdir / "profiles"
    csv_path, launches_path = pdir / "ncu.csv", pdir / "ncu-launches.json"
    if not csv_path.exists() or not launches_path.exists():
        return {}
    header, rows = parse_ncu(csv_path.read_text())
    if not rows:
        return {}
    launches = read_json(launches_path)
    signals = ncu_signals(rows)
    ids = sorted(signals, key=int)
    if len(ids) != len(launches):
        print(f"{op}: ncu profiled {len(ids)} launches, expected {len(launches)}; skipping")
        return {}
    out: dict = {}
    per_launch_rows: dict[tuple[str, str], list[dict]] = {}
    for launch_id, launch in zip(ids, launches, strict=True):
        kernel = launch["kernel"]
        name = (signals[launch_id]["kernel_name"] or "").split("(")[0].strip()
        if name != f"kl_{op}_{kernel}":
            raise SystemExit(f"{op}: ncu launch {launch_id} is {name!r}, expected {kernel}")
        out.setdefault(kernel, {})[launch["case_id"]] = signals[launch_id]["signals"]
        per_launch_rows[(kernel, launch["case_id"])] = [r for r in rows if r["ID"] == launch_id]
    for old in pdir.glob("*.ncu.csv"):
        old.unlink()
    for (kernel, case_id), krows in per_launch_rows.items():
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=header, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writeheader()
        writer.writerows(krows)
        (pdir / f"{kernel}.{case_id}.ncu.csv").write_text(buf.getvalue())
    write_json(
        pdir / "signals.json",
        {
            "source": "ncu.csv (Nsight Compute --csv, --clock-control none, --print-units base); "
            "<kernel>.<case>.ncu.csv hold the rows of one launch each",
            "units": "duration_us in microseconds; throughputs and occupancies as fractions",
            "launch_order": "ncu-launches.json",
            "signals_by_kernel_and_case": out,
        },
    )
    return out


# --- one op ------------------------------------------------------------------------------


def build_op(op: str, root: Path, env: dict) -> list[dict]:
    spec = plan.OPS[op]
    opdir = root / op
    kernels = plan.kernel_names(op)
    case_ids = [c["id"] for c in plan.CASES]
    passed: dict = {}
    for k in kernels:
        manifest = opdir / "validation" / k / "manifest.json"
        passed[k] = manifest.exists() and read_json(manifest)["status"] == "passed"
    medians: dict = {}
    for k in kernels:
        if passed[k]:
            medians[k] = {
                c: measurement(opdir / "raw" / k / f"{c}.json", c)["median_us"] for c in case_ids
            }
    rounds = plan.simulate(op, medians, passed)
    bad = [r for r in rounds if not r["lineage_ok"]]
    if bad:
        raise SystemExit(
            f"{op}: round {bad[0]['round']} has no candidate written on top of "
            f"{bad[0]['parent']} (the best kernel then); add one and re-run the campaign"
        )
    profiles = build_profiles(op, opdir)

    start = spec["start"]
    target = {
        "soc": "NVIDIA H200",
        "gpu_name": env.get("gpu_name"),
        "sm_count": env.get("sm_count"),
        "compute_capability": env.get("compute_capability"),
        "driver": env.get("driver"),
        "cuda": env.get("torch_cuda"),
        "torch": env.get("torch"),
        "triton": env.get("triton"),
    }
    baseline = [measurement(opdir / "raw" / start / f"{c}.json", c) for c in case_ids]
    all_repeats = [
        read_json(p)["samples"].__len__() for p in sorted((opdir / "raw").glob("*/*.json"))
    ]
    config = {
        "schema_version": 1,
        "run_id": spec["run_id"],
        "parent_run_id": spec["parent_run_id"],
        "op_name": op,
        "kernel": {"path": rel(HERE / "kernels" / op / f"{start}.py")},
        "validation_manifest": rel(opdir / "validation" / start / "manifest.json"),
        "target": target,
        "cases": [
            {"id": c["id"], "weight": c["weight"], "dtype": c["dtype"], "shape": list(c["shape"])}
            for c in plan.CASES
        ],
        "baseline": baseline,
        "objective": dict(plan.OBJECTIVE),
        "max_rounds": plan.MAX_ROUNDS,
        "max_consecutive_failures": plan.MAX_CONSECUTIVE_FAILURES,
        "measurement_policy": {
            "timer": "triton.testing.do_bench",
            "warmup": plan.BENCH_WARMUP_MS,
            "repeats": min(all_repeats),
            "warmup_unit": "ms (do_bench time budget)",
            "rep_ms": plan.BENCH_REP_MS,
            "repeats_note": "each do_bench session repeats for rep_ms milliseconds, so the "
            "count varies per measurement; each row records its own; this is the smallest",
            "sessions_per_measurement": plan.BENCH_SESSIONS,
            "interleaving": "per case, the kernels take turns, one do_bench session each, "
            "sessions_per_measurement times; the samples of a kernel are pooled",
            "output_buffer": "one preallocated output per case, shared by every kernel",
            "return_mode": "all",
            "raw_unit": "ms",
            "statistic": "median",
            "l2_flush": "do_bench zeroes a 256 MB buffer before every repeat",
            "inputs": "torch random data, seed 1000, same tensor for every kernel of a case",
        },
        "environment": env,
        "command": ["python3", "run_campaign.py"],
    }
    write_json(opdir / "config.json", config)

    rdir = opdir / "rounds"
    for old in rdir.glob("round-*.json"):
        old.unlink()
    by_round = {r["round"]: r for r in spec["rounds"]}
    for sim in rounds:
        meta = by_round[sim["round"]]
        cand = sim["candidate"]
        parent = sim["parent"]
        doc = {
            "schema_version": 1,
            "round": sim["round"],
            "parent_kernel_sha256": sha256_file(HERE / "kernels" / op / f"{parent}.py"),
            "candidate": {"path": rel(HERE / "kernels" / op / f"{cand}.py")},
            "hypothesis": meta["hypothesis"],
            "change": meta["change"],
            "mechanism": meta["mechanism"],
            "verification": {"manifest": rel(opdir / "validation" / cand / "manifest.json")},
        }
        if passed[cand]:
            doc["measurements"] = [
                measurement(opdir / "raw" / cand / f"{c}.json", c) for c in case_ids
            ]
            sig = profiles.get(cand, {}).get(plan.REPRESENTATIVE_CASE)
            if sig:
                doc["profiler_signals"] = sig
                doc["profile"] = {
                    "path": rel(opdir / "profiles" / f"{cand}.{plan.REPRESENTATIVE_CASE}.ncu.csv"),
                    "format": "ncu-csv",
                    "case_id": plan.REPRESENTATIVE_CASE,
                }
        parent_sig = profiles.get(parent, {}).get(plan.REPRESENTATIVE_CASE) or {}
        if "expected_signal" in meta:
            want = meta["expected_signal"]
            metric = PLAN_SIGNAL_NAMES[want["metric"]]
            if metric in parent_sig:
                absolute = want["min_change"] * abs(parent_sig[metric])
                doc["expected_signal"] = {
                    "metric": metric,
                    "direction": want["direction"],
                    "min_change": absolute,
                }
                doc["expected_signal_basis"] = {
                    "relative_min_change": want["min_change"],
                    "parent_value": parent_sig[metric],
                    "case_id": plan.REPRESENTATIVE_CASE,
                    "note": "min_change = relative_min_change x the parent's value (absolute, "
                    "in the signal's unit)",
                }
        doc["derived_from"] = parent
        write_json(rdir / f"round-{sim['round']}.json", doc)

    best = rounds[-1]["best_after"] if rounds else start
    ndir = opdir / "noise"
    for old in ndir.glob("aa-*.json"):
        old.unlink()
    for k in range(1, plan.AA_SESSIONS + 1):
        sdir = opdir / "raw" / f"aa-{k}"
        if not sdir.exists():
            continue
        kernels_seen = {read_json(p)["kernel"] for p in sdir.glob("*.json")}
        if kernels_seen != {best}:
            raise SystemExit(f"{op}: {sdir} re-measured {kernels_seen}, not the best {best}")
        write_json(
            ndir / f"aa-{k}.json",
            {
                "kernel_sha256": sha256_file(HERE / "kernels" / op / f"{best}.py"),
                "kernel": {"path": rel(HERE / "kernels" / op / f"{best}.py")},
                "session": f"aa-{k}",
                "measurements": [measurement(sdir / f"{c}.json", c) for c in case_ids],
            },
        )

    expected = []
    for sim in rounds:
        expected.append(
            {
                "round": sim["round"],
                "candidate": sim["candidate"],
                "parent": sim["parent"],
                "decision": sim["decision"],
                "weighted_improvement": sim["improvement"],
                "worst_case_regression": sim["regression"],
                "best_after": sim["best_after"],
                "cumulative_improvement": sim["cumulative_improvement"],
            }
        )
    cumulative = expected[-1]["cumulative_improvement"] if expected else 0.0
    consecutive = 0
    for row in expected:
        consecutive = 0 if row["decision"] == "KEEP" else consecutive + 1
    write_json(
        opdir / "expected-decisions.json",
        {
            "note": "SPEC 3 on medians only (no bootstrap); the ledger must reach these",
            "objective": plan.OBJECTIVE,
            "rounds": expected,
            "best_kernel": best,
            "best_kernel_sha256": sha256_file(HERE / "kernels" / op / f"{best}.py"),
            "cumulative_improvement": cumulative,
            "target_met": cumulative >= plan.OBJECTIVE["target_relative_improvement"],
            "consecutive_failures": consecutive,
            "needs_diagnosis": consecutive >= plan.MAX_CONSECUTIVE_FAILURES,
            "medians_us": medians,
        },
    )
    return expected


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=str(HERE), help="do_bench_campaign.py output (here)")
    args = parser.parse_args(argv)
    root = Path(args.dir).resolve()
    env_path = root / "environment.json"
    env = read_json(env_path) if env_path.exists() else {}
    if env.get("smoke"):
        print("warning: this is --smoke output (CPU interpreter), not evidence", file=sys.stderr)
    for op in plan.OPS:
        if not (root / op / "validation").exists():
            print(f"{op}: no device output under {root / op}; skipped")
            continue
        for row in build_op(op, root, env):
            imp = row["weighted_improvement"]
            reg = row["worst_case_regression"]
            nums = "" if imp is None else f"  I={imp:+.4f} R={reg:+.4f}"
            print(f"{op} round {row['round']}: {row['candidate']:20s} {row['decision']}{nums}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
