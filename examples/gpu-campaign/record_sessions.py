"""Record one device session of run_rounds.py into a ledger, through the real CLI.

    python3 examples/gpu-campaign/record_sessions.py SESSION_DIR --db URL [--kl CMD]

SESSION_DIR is a folder run_rounds.py wrote (examples/gpu-campaign/harness-sessions/session-3,
say). For each op it plans the campaign's run with the session's `statistics.sequential`, then
records each round the session measured: the campaign's round result for that candidate, with
its parent set to the session's best kernel of the moment and its measurements, `session` and
`reference` taken from the round's fragment (samples inline). A round the session did not
measure (its candidate failed validation) is recorded as written, parent adjusted. Then
`analyze`. Run from the repository root (the round files name paths relative to it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def round_file(op: str, candidate: str) -> dict:
    for path in sorted((HERE / op / "rounds").glob("round-*.json")):
        doc = json.loads(path.read_text())
        if Path(doc["candidate"]["path"]).stem == candidate:
            return doc
    raise SystemExit(f"no round result of {op} names the candidate {candidate}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("session", type=Path)
    parser.add_argument("--db", required=True)
    parser.add_argument("--kl", default=f"{sys.executable} -m cli")
    args = parser.parse_args(argv)
    summary = json.loads((args.session / "summary.json").read_text())
    kl = [*shlex.split(args.kl), "--db", args.db]

    def call(*words: str) -> dict:
        done = subprocess.run([*kl, *words, "--json"], cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{shlex.join(words)}: exit {done.returncode}: {done.stderr}")
        return json.loads(done.stdout)

    work = Path(tempfile.mkdtemp(prefix="sessions-"))
    decided = []
    for op, data in summary["ops"].items():
        config = json.loads((HERE / op / "config.json").read_text())
        config["statistics"] = {"sequential": summary["sequential"]}
        (work / f"{op}-config.json").write_text(json.dumps(config))
        run = config["run_id"]
        call("plan", "--config", str(work / f"{op}-config.json"))
        kernels = HERE / "kernels" / op
        for entry in data["rounds"]:
            doc = round_file(op, entry["candidate"])
            doc["round"] = entry["round"]
            doc["parent_kernel_sha256"] = sha256(kernels / f"{entry['parent']}.py")
            fragment = args.session / op / f"round-{entry['round']}" / "fragment.json"
            if fragment.exists():
                measured = json.loads(fragment.read_text())
                doc["session"] = measured["session"]
                doc["measurements"] = [
                    {k: v for k, v in m.items() if k != "source"} for m in measured["measurements"]
                ]
                reference = measured["reference"]
                doc["reference"] = {
                    "kernel_sha256": reference["kernel_sha256"],
                    "measurements": [
                        {k: v for k, v in m.items() if k != "source"}
                        for m in reference["measurements"]
                    ],
                }
            path = work / f"{op}-round-{entry['round']}.json"
            path.write_text(json.dumps(doc))
            result = call("record", "--run", run, "--result", str(path))
            decided.append(
                {
                    "op": op,
                    "round": entry["round"],
                    "session_decision": entry["decision"],
                    "recorded": result["decision"],
                    "repeats_used": result.get("repeats_used"),
                }
            )
        call("analyze", "--run", run, "--output-dir", str(work / f"{op}-analysis"))
    print(json.dumps({"rounds": decided, "work": str(work)}, indent=1))
    return 0 if all(d["session_decision"] == d["recorded"] for d in decided) else 1


if __name__ == "__main__":
    sys.exit(main())
