"""A campaign on an op outside the corpus whose rounds follow `kernel-ledger suggest`.

    python3 follow_suggestions.py --out DIR [--op outside.softmax] [--history PATH ...]
                                  [--rounds 10] [--budget-s 300] [--repeats 40]
                                  [--tiny] [--no-ncu]

1. A fresh ledger in DIR imports the history: every bundle under corpus/ (the committed
   captures) and under each --history path that exists (a capture made just before).
2. The op's baseline is checked, timed and planned as run_corpus.py does (run
   `outside-OP-001`); ncu profiles it on every case and `profile --baseline` records it,
   so `suggest` compares the run by its bottleneck and signals too.
3. Each round asks `suggest --run RUN --limit 50` and follows the first suggested entry
   for which the op's MENU holds a variant not yet tried (an entry without one is logged
   as passed over); the variant is checked, timed interleaved with the current best and
   recorded; a KEEP makes it the new best. The campaign ends when the rounds or the budget
   run out, or no suggested entry has a variant left.
4. ncu profiles every kernel recorded, `analyze` concludes the run, `export` writes its
   bundle and `verify` checks the ledger.

DIR/follow-log.json holds each round's suggestions (entry, score, keeps and tries, why),
the entry followed, its rank, the entries passed over and the decision; DIR/follow-log.md
says the same as a table. Under TRITON_INTERPRET=1 with --tiny --no-ncu it runs on a CPU
(tests/test_kernel_corpus.py); those numbers are no evidence of speed.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run_corpus as rc  # noqa: E402

CORPUS = HERE / "corpus"


def bundles_under(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(path.rglob("*.bundle.jsonl"))
    return found


def pct(value) -> str:
    return "—" if value is None else f"{value * 100:+.1f}%"


def write_markdown(path: Path, log: dict) -> None:
    lines = [
        f"# {log['run_id']}: a campaign that follows `kernel-ledger suggest`",
        "",
        f"History: {len(log['history_runs'])} runs imported ({', '.join(log['history_runs'])}).",
        "",
        "| round | suggested (top 5, score) | followed (rank) | passed over | variant | decision "
        "| I |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in log["rounds"]:
        top = ", ".join(f"{s['entry']} {s['score']:.2f}" for s in r["suggested"][:5])
        lines.append(
            f"| {r.get('round', '—')} | {top} | {r['followed']} ({r['rank']}) | "
            f"{', '.join(r['passed_over']) or '—'} | {r['variant']} | {r.get('decision')} | "
            f"{pct(r.get('relative_improvement'))} |"
        )
    lines += ["", f"Ended: {log['ended']}.", f"Best kernel: {log.get('best')}.", ""]
    path.write_text("\n".join(lines))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--op", default="outside.softmax", help="the op's module")
    parser.add_argument("--history", action="append", default=[], help="bundles or a folder")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (interpreter)")
    parser.add_argument("--no-ncu", action="store_true")
    args = parser.parse_args(argv)
    args.max_rounds = args.rounds + 1
    import torch

    t0 = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    device = (
        "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
    )
    env = rc.environment(device)
    env["started_at"] = rc.now()
    op = importlib.import_module(args.op)
    run_id = f"outside-{op.NAME.replace('_', '-')}-001"
    ledger = rc.InProcessLedger(
        [], f"sqlite:///{out / 'ledger.sqlite3'}", out / "ledger-commands.log", out
    )
    os.environ["PYTHONPATH"] = os.pathsep.join([str(rc.REPO), os.environ.get("PYTHONPATH", "")])
    history = bundles_under([CORPUS, *(Path(h) for h in args.history)])
    log: dict = {"run_id": run_id, "op": op.NAME, "history_bundles": [], "rounds": []}
    for bundle in history:
        code, doc, err = ledger("import", str(bundle))
        log["history_bundles"].append({"bundle": str(bundle), "rc": code, "error": err or None})
    code, doc, _ = ledger("status")
    runs = (doc or {}).get("runs", []) if isinstance(doc, dict) else []
    log["history_runs"] = sorted({r["run_id"] for r in runs if isinstance(r, dict)})
    ncu_ok = not args.no_ncu and device == "cuda" and shutil.which("ncu") is not None
    log["ncu"] = {"used": ncu_ok}

    summary, best = rc.start_run(op, run_id, out, ledger, env, args, device)
    log["plan"] = summary.get("plan") or {"skipped": summary.get("skipped")}
    best_name = op.BASELINE["name"]
    if best is None:
        log["ended"] = f"the baseline was not planned: {summary.get('skipped') or summary}"
        rc.write_json(out / "follow-log.json", log)
        write_markdown(out / "follow-log.md", log)
        print(log["ended"])
        return 1
    if ncu_ok:
        log["ncu"]["baseline"] = profile(op, [best_name], out / "ncu" / "baseline", ledger, run_id)

    used: set[str] = set()
    number = 0
    log["ended"] = f"{args.rounds} rounds done"
    while number < args.rounds:
        if time.time() - t0 > args.budget_s * 0.8:
            log["ended"] = f"budget: {time.time() - t0:.0f}s of {args.budget_s:.0f}s spent"
            break
        code, doc, err = ledger("suggest", "--run", run_id, "--limit", "50")
        if code != 0 or not isinstance(doc, dict):
            log["ended"] = f"suggest failed (rc={code}): {err}"
            break
        suggested = doc.get("suggestions", [])
        passed_over: list[str] = []
        pick = None
        for rank, s in enumerate(suggested, start=1):
            if s["entry"] in op.MENU and op.MENU[s["entry"]]["name"] not in used:
                pick = (rank, s)
                break
            if s["entry"] not in op.MENU:
                passed_over.append(s["entry"])
        if pick is None:
            log["ended"] = "no suggested entry has a variant left"
            break
        rank, s = pick
        var = op.MENU[s["entry"]]
        used.add(var["name"])
        number += 1
        row = rc.try_variant(
            op, var, number, best_name, best, run_id, out, ledger, env, args, device
        )
        entry = {
            "round": number if row["rc"] == 0 else None,
            "note": doc.get("note"),
            "suggested": [
                {k: x.get(k) for k in ("entry", "score", "keeps", "tries", "runs", "tried_here")}
                | {"why": x.get("why")}
                for x in suggested
            ],
            "followed": s["entry"],
            "rank": rank,
            "passed_over": passed_over,
            "variant": var["name"],
            **{k: row.get(k) for k in ("rc", "decision", "relative_improvement", "failed_cases")},
            "error": row.get("error"),
        }
        log["rounds"].append(entry)
        if row["rc"] != 0:
            number -= 1
            continue
        summary["kernels"].append(var["name"])
        summary["rounds"].append(row)
        if row["decision"] == "KEEP":
            best_name, best = var["name"], rc.CURRENT_PARAMS[(op.NAME, var["name"])]
        rc.write_json(out / "follow-log.json", log)
    log["best"] = best_name
    left = args.budget_s - (time.time() - t0) - 10
    rest = [k for k in summary["kernels"] if k != op.BASELINE["name"]]
    if ncu_ok and rest and left < 15:
        log["ncu"]["rounds"] = {"skipped": f"budget: {left + 10:.0f}s left"}
    elif ncu_ok and rest:
        rounds = {r["variant"]: r["round"] for r in summary["rounds"]}
        log["ncu"]["rounds"] = profile(
            op, rest, out / "ncu" / "rounds", ledger, run_id, rounds=rounds, timeout=min(left, 90)
        )
    code, _, err = ledger("analyze", "--run", run_id, "--output-dir", str(out / "analysis"))
    log["analyze"] = {"rc": code, "error": err or None}
    bundle = out / "bundles" / f"{run_id}.bundle.jsonl"
    bundle.parent.mkdir(exist_ok=True)
    code, _, err = ledger("export", "--run", run_id, "--out", str(bundle), "--force")
    log["bundle"] = {"rc": code, "path": rc.rel(bundle, out), "error": err or None}
    code, _, err = ledger("verify")
    log["verify"] = {"rc": code, "error": err or None}
    env["finished_at"] = rc.now()
    rc.write_json(out / "environment.json", env)
    log["wall_s"] = round(time.time() - t0, 1)
    rc.write_json(out / "follow-log.json", log)
    write_markdown(out / "follow-log.md", log)
    print((out / "follow-log.md").read_text())
    return 0


def profile(
    op, kernels, pdir: Path, ledger, run_id: str, rounds: dict | None = None, timeout: float = 60
) -> dict:
    """ncu over `kernels` on every case, each launch recorded with `profile` (the baseline,
    or the round whose candidate it is)."""
    info = rc.run_ncu(op, kernels, pdir, timeout=timeout)
    files = rc.split_ncu(pdir)
    info["profiles"] = len(files)
    info["ingested"] = []
    for (kernel, case_id), path in sorted(files.items()):
        target = ["--baseline"] if rounds is None else ["--round", str(rounds[kernel])]
        code, _, err = ledger("profile", "--run", run_id, *target, str(path))
        info["ingested"].append(
            {"kernel": kernel, "case_id": case_id, "rc": code, "error": err or None}
        )
    return info


if __name__ == "__main__":
    sys.exit(main())
