"""One of the processes that share a ledger in the contention test.

    python tests/faults/mixer.py --db URL --files DIR --work DIR --runs A,B,C --conclude C
                                 --seconds S --seed N --out FILE

Until the time is up it runs real commands through the CLI entry point (`cli.app.main`, in
this process): `record` (after reading the run's `status`, as a user would, so its round
number or parent may be stale by the time it records), `history`, `verify` and now and then
`analyze`, which concludes one of the runs named by --conclude (the others stay open).
Every command's exit code, first stderr line and duration go to FILE as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

from faultkit import Files, cli  # noqa: E402

ACTIONS = (("record", 55), ("history", 20), ("verify", 15), ("analyze", 3), ("status", 7))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--files", required=True, type=Path)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--runs", required=True)
    parser.add_argument("--conclude", required=True, help="the runs `analyze` may conclude")
    parser.add_argument("--seconds", required=True, type=float)
    parser.add_argument("--seed", required=True, type=int)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    files = Files(args.files, write=False)
    runs = args.runs.split(",")
    args.work.mkdir(parents=True, exist_ok=True)
    outcomes: list[dict] = []
    names = [a for a, _ in ACTIONS]
    weights = [w for _, w in ACTIONS]

    def run(action: str, *argv: object) -> dict:
        result = cli(*argv, db=args.db)
        item = {
            "action": action,
            "code": result.code,
            "error": result.said.splitlines()[0] if result.said else "",
            "lines": result.said.count("\n"),
            "traceback": "Traceback" in result.said,
            "seconds": round(result.seconds, 4),
        }
        outcomes.append(item)
        return {**item, "stdout": result.stdout}

    deadline = time.monotonic() + args.seconds
    count = 0
    while time.monotonic() < deadline:
        count += 1
        action = rng.choices(names, weights)[0]
        run_id = rng.choice(runs)
        if action == "record":
            state = run("status", "status", "--run", run_id, "--json")
            if state["code"] != 0:
                continue
            row = json.loads(state["stdout"])["run"]
            pick = rng.randrange(len(files.passed) + 1)
            doc = files.round_doc(
                row["rounds_recorded"] + 1,
                row["best_kernel_sha256"],
                candidate=None if pick == len(files.passed) else pick,
                factor=rng.uniform(0.8, 1.1),
            )
            path = args.work / f"round-{count}.json"
            path.write_text(json.dumps(doc))
            run("record", "record", "--run", run_id, "--result", path, "--json")
        elif action == "history":
            run("history", "history", "--run", run_id, "--json")
        elif action == "verify":
            run("verify", "verify", "--json")
        elif action == "analyze":
            run_id = rng.choice(args.conclude.split(","))
            out = args.work / f"analysis-{run_id}"
            run("analyze", "analyze", "--run", run_id, "--output-dir", out, "--json")
        else:
            run("status", "status", "--json")
    args.out.write_text(json.dumps(outcomes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
