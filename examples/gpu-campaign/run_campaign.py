"""The campaign as an agent runs it, on one GPU, through the kernel-ledger command line.

    python3 examples/gpu-campaign/run_campaign.py --out DIR [--op OP]... [--rounds N]
        [--budget-s S] [--kl CMD] [--smoke]

Run from the repository root (the round files name kernels relative to it); needs torch and
triton, and `python3 -m cli` (or --kl) to run kernel-ledger. For each op of campaign_plan.OPS:

1. validate the starting kernel (float64 reference, every case in three dtypes, two seeds:
   do_bench_campaign.validate_kernel) and measure it with the harness
   (ledger/harness/measure.py) as the baseline, then `plan` the run with
   `statistics.sequential` ({"min_repeats": 10, "max_repeats": 100, "batch": 10});
2. for every planned round: pick the variant written on the best kernel of the moment,
   validate it; if it failed, `record` the round (FAIL, never measured); else measure the
   candidate and its parent (the best kernel, as the round's `reference`) interleaved in one
   session, in batches of `batch` samples per case, and after each batch ask
   `kernel-ledger assess --json` whether the round is settled; measure the `more_repeats` it
   asks for, or stop; then `record` the round with its session and reference (a KEEP makes the
   candidate the best kernel);
3. `analyze` (analysis.json, report.md, manifest.json) and `report` (HTML) each run, then
   `verify` the ledger.

Everything goes below DIR:

    ledger.sqlite3                                the ledger
    summary.json                                  per round: decision, settled, repeats
                                                  used, every assess answer, the session,
                                                  kernel time measured and saved
    <op>/config.json, <op>/round-<n>.json         the files given to plan and record
    <op>/validation/<kernel>/                     manifest.json, case-matrix.json
    <op>/baseline/candidate/<case>.json           the baseline session's raw samples
    <op>/round-<n>/{candidate,reference}/<case>.json   each round's raw samples
    <op>/analysis/, <op>/report.html              what analyze and report wrote

`--budget-s` (default 420) stops starting rounds once that much wall time has passed; the
rounds not started are listed in summary.json. `--smoke` runs the same code on the CPU under
TRITON_INTERPRET=1 with at most 8 rows per case and the harness's wall timer: plumbing only,
its numbers are no evidence (tests/test_gpu_campaign.py runs it so).

The round results carry the plan's hypothesis, change and mechanism; they carry no profiler
signals (this script profiles nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "ledger" / "harness"))  # measure.py imports only the stdlib

import campaign_plan as plan  # noqa: E402

SEQUENTIAL = {"min_repeats": 10, "max_repeats": 100, "batch": 10}
BASELINE_REPEATS = 50


def measure_sequentially(harness, until):
    """Batches of `batch` samples per case from min_repeats on; after each, `until(result)`
    says how many more the next look needs (0: settled), up to max_repeats."""
    return harness.run(
        min_repeats=SEQUENTIAL["min_repeats"],
        max_repeats=SEQUENTIAL["max_repeats"],
        batch=SEQUENTIAL["batch"],
        until=until,
    )


class Ledger:
    """`kernel-ledger --db URL ... --json` from the repository root, one process a call."""

    def __init__(self, command: str, db: str) -> None:
        self.words = [*shlex.split(command), "--db", db]
        self.calls: list[dict] = []

    def __call__(self, *args: str, ok: tuple[int, ...] = (0,)) -> dict:
        started = time.perf_counter()
        done = subprocess.run(
            [*self.words, *args, "--json"], cwd=ROOT, capture_output=True, text=True
        )
        self.calls.append({"command": args[0], "seconds": time.perf_counter() - started})
        if done.returncode not in ok:
            raise SystemExit(f"kernel-ledger {shlex.join(args)}: exit {done.returncode}\n"
                             f"{done.stdout}{done.stderr}")  # fmt: skip
        return json.loads(done.stdout)


def launchers(op: str, modules: dict, smoke: bool) -> dict:
    """Per case, a zero-argument launch of each kernel on the case's one input and output."""
    import do_bench_campaign as rc

    out = {}
    for case in plan.CASES:
        x, weight, buf = rc.case_buffers(op, case, smoke)
        out[case["id"]] = {
            name: (lambda m=module, x=x, w=weight, b=buf: rc.call(op, m, x, w, b))
            for name, module in modules.items()
        }
    return out


def round_document(op: str, rnd: dict, candidate: str, parent: str, manifest: Path) -> dict:
    import do_bench_campaign as rc

    return {
        "schema_version": 1,
        "round": rnd["round"],
        "parent_kernel_sha256": rc.sha256_file(rc.kernel_file(op, parent)),
        "candidate": {"path": str(rc.kernel_file(op, candidate).relative_to(ROOT))},
        "hypothesis": rnd["hypothesis"],
        "change": rnd["change"],
        "mechanism": rnd["mechanism"],
        "verification": {"manifest": str(manifest)},
    }


class Campaign:
    def __init__(self, args, kl: Ledger) -> None:
        import do_bench_campaign as rc

        self.args, self.kl, self.out = args, kl, args.out
        self.env = rc.collect_environment(args.smoke)
        self.command = ["python3", "examples/gpu-campaign/run_campaign.py", *args.argv]
        self.validated: dict[tuple[str, str], tuple[bool, Path]] = {}
        self.started = time.perf_counter()

    def harness(self):
        from measure import Harness

        return Harness(timer="wall" if self.args.smoke else "cuda")

    def validate(self, op: str, kernel: str) -> tuple[bool, Path]:
        """The kernel's correctness manifest (written once per kernel)."""
        import do_bench_campaign as rc

        key = (op, kernel)
        if key not in self.validated:
            _, _, passed, failed = rc.validate_kernel(
                op, kernel, str(self.out), self.env, self.command, self.args.smoke
            )
            path = self.out / op / "validation" / kernel / "manifest.json"
            self.validated[key] = (passed, path)
            print(
                f"{op}: validate {kernel}: {'passed' if passed else 'FAILED ' + ','.join(failed)}"
            )
        return self.validated[key]

    def baseline(self, op: str) -> dict:
        """Measure the starting kernel and plan the run."""
        import do_bench_campaign as rc

        start = plan.OPS[op]["start"]
        passed, manifest = self.validate(op, start)
        if not passed:
            raise SystemExit(f"{op}: the starting kernel {start} failed validation")
        harness = self.harness()
        for case_id, kernels in launchers(
            op, {start: rc.load_kernel(op, start)}, self.args.smoke
        ).items():
            harness.add_case(case_id, candidate=kernels[start])
        result = harness.run(repeats=BASELINE_REPEATS)
        fragment = result.write(self.out / op / "baseline")
        config = json.loads((HERE / op / "config.json").read_text())
        config.update(
            validation_manifest=str(manifest),
            baseline=fragment["measurements"],
            session=fragment["session"],
            statistics={"sequential": SEQUENTIAL},
            measurement_policy={
                "timer": "ledger/harness/measure.py, CUDA events around one launch"
                if not self.args.smoke
                else "ledger/harness/measure.py, wall clock (smoke: no evidence)",
                "l2_flush": "a 256 MB read before every sample",
                "interleaving": "candidate and reference alternate per sample, per case",
                "baseline_repeats": BASELINE_REPEATS,
                "sequential": SEQUENTIAL,
            },
            environment=self.env,
            command=self.command,
        )
        path = self.out / op / "config.json"
        rc.write_json(path, config)
        self.kl("plan", "--config", str(path))
        return config

    def measure(self, op: str, doc: dict, modules: dict, candidate: str, parent: str) -> dict:
        """Candidate and reference interleaved, assess after every batch until settled."""
        import do_bench_campaign as rc

        harness = self.harness()
        kernels = launchers(op, modules, self.args.smoke)
        for case_id, by_name in kernels.items():
            harness.add_case(case_id, candidate=by_name[candidate], reference=by_name[parent])
        raw = self.out / op / f"round-{doc['round']}"
        path = self.out / op / f"round-{doc['round']}.json"
        answers: list[dict] = []
        parent_sha = doc["parent_kernel_sha256"]

        def until(result) -> int:
            rc.write_json(path, {**doc, **result.fragment(parent_sha)})
            answer = self.kl("assess", "--run", plan.OPS[op]["run_id"], "--result", str(path))
            answers.append({k: answer.get(k) for k in ("repeats_used", "settled",
                            "more_repeats", "decision", "relative_improvement")})  # fmt: skip
            return 0 if answer.get("settled") else int(answer.get("more_repeats") or 0)

        started = time.perf_counter()
        result = measure_sequentially(harness, until)
        seconds = time.perf_counter() - started
        rc.write_json(path, {**doc, **result.write(raw, reference_sha256=parent_sha)})
        measured_us = sum(sum(v) for per in result.samples.values() for v in per.values())
        # as the report counts it: each sample not measured costs the case's medians
        per_sample_us = sum(statistics.median(v) for per in result.samples.values()
                            for v in per.values())  # fmt: skip
        left = SEQUENTIAL["max_repeats"] - result.repeats
        return {
            "path": path,
            "repeats_measured": result.repeats,
            "assess": answers,
            "session": result.session.as_dict(),
            "kernel_time_measured_ms": measured_us / 1000.0,
            "kernel_time_saved_ms": left * per_sample_us / 1000.0,
            "measure_seconds": seconds,
        }

    def run_op(self, op: str) -> dict:
        import do_bench_campaign as rc

        spec = plan.OPS[op]
        run = spec["run_id"]
        self.baseline(op)
        best = spec["start"]
        rounds, skipped = [], []
        for rnd in spec["rounds"][: self.args.rounds]:
            if time.perf_counter() - self.started > self.args.budget_s:
                skipped.append(rnd["round"])
                continue
            candidate = next((v for v in rnd["variants"] if v[1] == best), rnd["variants"][0])[0]
            passed, manifest = self.validate(op, candidate)
            doc = round_document(op, rnd, candidate, best, manifest)
            row: dict = {"round": rnd["round"], "candidate": candidate, "parent": best}
            if passed:
                modules = {k: rc.load_kernel(op, k) for k in {best, candidate}}
                measured = self.measure(op, doc, modules, candidate, best)
                path = measured.pop("path")
                row.update(measured)
            else:
                path = self.out / op / f"round-{rnd['round']}.json"
                rc.write_json(path, doc)
            recorded = self.kl("record", "--run", run, "--result", str(path))
            row.update(
                decision=recorded["decision"],
                relative_improvement=recorded.get("relative_improvement"),
                target_met=recorded["target_met"],
            )
            shown = self.kl("show", "--run", run, "--round", str(rnd["round"]))
            statistics = (shown.get("decision") or {}).get("statistics") or {}
            row.update(
                settled=statistics.get("settled"), repeats_used=statistics.get("repeats_used")
            )
            if recorded["decision"] == "KEEP":
                best = candidate
            row["best_after"] = best
            rounds.append(row)
            shown_keys = ("round", "candidate", "decision", "settled", "repeats_used",
                          "kernel_time_saved_ms")  # fmt: skip
            print(json.dumps({"op": op, **{k: row.get(k) for k in shown_keys}}), flush=True)
        analysis = self.kl("analyze", "--run", run, "--output-dir", str(self.out / op / "analysis"))
        self.kl("report", "--run", run, "--html", str(self.out / op / "report.html"), "--force")
        return {
            "run_id": run,
            "rounds": rounds,
            "skipped_rounds": skipped,
            "best": best,
            "conclusion": analysis.get("status"),
            "kernel_time_measured_ms": sum(r.get("kernel_time_measured_ms", 0.0) for r in rounds),
            "kernel_time_saved_ms": sum(r.get("kernel_time_saved_ms", 0.0) for r in rounds),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--op", choices=sorted(plan.OPS), action="append")
    parser.add_argument("--rounds", type=int, default=None, help="at most this many rounds")
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--kl", default=f"{sys.executable} -m cli")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.out = args.out.resolve()
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"
    args.out.mkdir(parents=True, exist_ok=True)
    kl = Ledger(args.kl, f"sqlite:///{args.out / 'ledger.sqlite3'}")
    campaign = Campaign(args, kl)
    summary: dict = {"sequential": SEQUENTIAL, "smoke": args.smoke, "environment": campaign.env}
    summary["ops"] = {op: campaign.run_op(op) for op in args.op or sorted(plan.OPS)}
    verified = kl("verify", ok=(0, 1))
    summary["verify"] = verified.get("status")
    summary["wall_seconds"] = time.perf_counter() - campaign.started
    summary["kernel_ledger_seconds"] = sum(c["seconds"] for c in kl.calls)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for op, info in summary["ops"].items():
        measured, saved = info["kernel_time_measured_ms"], info["kernel_time_saved_ms"]
        print(f"{op}: {info['conclusion']}, best {info['best']}, kernel time measured "
              f"{measured:.1f} ms, saved {saved:.1f} ms")  # fmt: skip
    print(f"verify: {summary['verify']}; {summary['wall_seconds']:.0f} s")
    return 0 if summary["verify"] == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main())
