"""Does `suggest` name the mechanism that was kept next? Leave-one-run-out over a corpus.

Run from the repository root:

    .venv/bin/python benchmarks/knowledge.py                      # the corpus, if committed
    .venv/bin/python benchmarks/knowledge.py --bundle DIR_OR_FILE  # run bundles (export)
    .venv/bin/python benchmarks/knowledge.py --db sqlite:///ledger.sqlite3
    .venv/bin/python benchmarks/knowledge.py --gpu-campaign       # examples/gpu-campaign

Without an argument it imports every bundle under examples/kernel-corpus/corpus/ when that
folder exists, else it replays examples/gpu-campaign. `--json FILE` also writes the figures,
`--output FILE` the report (docs/knowledge-benchmark.md is written so:
`.venv/bin/python benchmarks/knowledge.py --output docs/knowledge-benchmark.md`).

For every KEEP round of every run, the run is cut at that round's start (its earlier rounds
tried, its starting profile) and every other run is the history. Three rankers name their
top three mechanism entries (ledger/core/mechanisms.py), and a hit is the kept round's
entry among them:

- `suggest` (ledger/core/suggest.py), as `kernel-ledger suggest` ranks;
- the workspace's own `knowledge_query.py` (run, never copied) over the same history
  exported as candidates and promoted (`knowledge export`'s DIR/knowledge), queried with the
  op, the SoC, the starting bottleneck and the strongest signals, `--kind
  backend-constraints --limit 3`; each match names its entry in its scope;
- a prior: entries by their KEEP count over the whole history.

Failure signatures: for every run (as it stands at its end, every other run the history),
the entries that failed validation or were discarded in two or more other runs similar to it
(same op family, or a starting bottleneck class in common: a notion independent of
suggest's own score) should be among suggest's failure signatures. The report lists the
missed ones with the failing runs and suggest's similarity of each (its most similar round).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ledger.core import knowledge, mechanisms  # noqa: E402
from ledger.core.projections import RunView  # noqa: E402
from ledger.core.suggest import (  # noqa: E402
    FAILED,
    MIN_SIMILARITY,
    entry_of,
    likeness,
    op_family,
    start_profiles,
    suggest,
    target_of,
)

CORPUS = ROOT / "examples" / "kernel-corpus" / "corpus"
REFERENCE = Path("/work/shared/reference/vllm-ascend-workspace/.agents")
QUERY = REFERENCE / "scripts" / "knowledge_query.py"
TOP = 3


def _kl(db: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "cli", "--db", db, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"kernel-ledger {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def _ledger(args, work: Path) -> tuple[str, str]:
    """The ledger to read, and a sentence saying what it holds."""
    if args.db:
        return args.db, f"the ledger {args.db}"
    db = f"sqlite:///{work / 'corpus.sqlite3'}"
    bundles = [Path(b) for b in args.bundle]
    if not bundles and not args.gpu_campaign and CORPUS.is_dir():
        bundles = [CORPUS]
    files = sorted(
        f
        for b in bundles
        for f in ([b] if b.is_file() else b.rglob("*"))
        if f.is_file() and (f.suffix == ".jsonl" or f.name.endswith(".bundle"))
    )
    ledgers = sorted(f for b in bundles for f in ([b] if b.is_file() else b.rglob("*.sqlite3")))
    if not files and ledgers:
        import shutil

        shutil.copyfile(ledgers[0], work / "corpus.sqlite3")
        _kl(db, "db", "upgrade", "--json")
        return (
            db,
            f"the ledger {ledgers[0]}",
        )
    if files:
        for f in files:
            _kl(db, "import", str(f), "--json")
        shown = sorted(
            {
                str(b.resolve().relative_to(ROOT)) if b.resolve().is_relative_to(ROOT) else str(b)
                for b in bundles
            }
        )
        return db, f"{len(files)} bundles ({', '.join(shown)})"
    script = ROOT / "examples" / "gpu-campaign" / "replay.sh"
    done = subprocess.run(
        ["bash", str(script)],
        env={
            "PATH": "/usr/bin:/bin",
            "KERNEL_LEDGER_DB": db,
            "KL": str(ROOT / ".venv" / "bin" / "kernel-ledger"),
            "OUT_DIR": str(work / "analysis"),
        },
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"replay of examples/gpu-campaign failed: {done.stderr.strip()}")
    return db, "examples/gpu-campaign (replay.sh)"


@dataclass
class Case:
    run_id: str
    round: int
    kept: str
    suggest: list[str]
    untried_first_off: list[str]  # suggest without ranking the run's own failed tries last
    query: list[str]
    prior: list[str]
    op_in_history: bool  # another run of the same op is in the history
    kept_in_history: bool  # another run kept the same entry


def _prior(history: Sequence[RunView]) -> list[str]:
    keeps = Counter(entry_of(r) for v in history for r in v.rounds if r.decision == "KEEP")
    keeps.pop(mechanisms.OTHER, None)
    return [e for e, _ in sorted(keeps.items(), key=lambda kv: (-kv[1], kv[0]))][:TOP]


def _query_text(view: RunView, at_round: int) -> str:
    row = next(r for r in view.rounds if r.round == at_round)
    starts = start_profiles(view, row)
    words = [view.run.op_name, view.run.soc]
    words += sorted({p.bottleneck for p in starts if p.bottleneck})
    words += knowledge.strong_signals(starts)
    return " ".join(words)


def _knowledge_query(folder: Path, text: str, ids: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [
            sys.executable,
            str(QUERY),
            "--query",
            text,
            "--knowledge-dir",
            str(folder),
            "--kind",
            "backend-constraints",
            "--limit",
            str(TOP),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"knowledge_query.py failed: {done.stdout} {done.stderr}")
    out: list[str] = []
    for match in json.loads(done.stdout)["matches"]:
        entry = ids[match["id"]]
        if entry not in out:
            out.append(entry)
    return out


def _export(history: Sequence[RunView], hashes, folder: Path) -> dict[str, str]:
    """The history as `knowledge export` promotes it, written where knowledge_query.py reads;
    candidate id -> its entry."""
    found = knowledge.candidates(history, hashes, dict.fromkeys(hashes_runs(hashes), True))
    folder.mkdir(parents=True, exist_ok=True)
    for name, document in knowledge.promoted(found).items():
        (folder / name).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    return {c["candidate_id"]: c["scope"]["mechanism_entry"] for c in found}


def hashes_runs(hashes) -> set[str]:
    return {run for run, _ in hashes}


def _similar_by_kind(target: RunView, other: RunView) -> bool:
    """Similar for the failure-signature check: same op family, or a starting bottleneck
    class in common."""
    if op_family(target.run.op_name) == op_family(other.run.op_name):
        return True
    return bool(_bottlenecks(target) & _bottlenecks(other))


def _bottlenecks(view: RunView) -> set[str]:
    """The bottleneck classes of every round's starting profiles (per case)."""
    return {p.bottleneck for r in view.rounds for p in start_profiles(view, r) if p.bottleneck}


def evaluate(views: Sequence[RunView], hashes, work: Path) -> dict:
    cases: list[Case] = []
    query_ok = QUERY.is_file()
    for view in views:
        history = [v for v in views if v.run.run_id != view.run.run_id]
        ids = _export(history, hashes, work / "knowledge" / view.run.run_id) if query_ok else {}
        prior = _prior(history)
        kept_elsewhere = {entry_of(r) for v in history for r in v.rounds if r.decision == "KEEP"}
        for row in view.rounds:
            if row.decision != "KEEP":
                continue
            target = target_of(view, at_round=row.round)
            found = suggest(target, history, limit=TOP)
            plain = suggest(target, history, limit=TOP, tried_last=False)
            cases.append(
                Case(
                    run_id=view.run.run_id,
                    round=row.round,
                    kept=entry_of(row),
                    suggest=[r.entry for r in found.ranked],
                    untried_first_off=[r.entry for r in plain.ranked],
                    query=(
                        _knowledge_query(
                            work / "knowledge" / view.run.run_id,
                            _query_text(view, row.round),
                            ids,
                        )
                        if query_ok
                        else []
                    ),
                    prior=prior,
                    op_in_history=any(v.run.op_name == view.run.op_name for v in history),
                    kept_in_history=entry_of(row) in kept_elsewhere,
                )
            )
    named = [c for c in cases if c.kept != mechanisms.OTHER]
    same_op = [c for c in cases if c.op_in_history]
    new_op = [c for c in cases if not c.op_in_history]
    by_prior = [c for c in cases if c.kept in c.prior]
    not_by_prior = [c for c in cases if c.kept not in c.prior]

    def rate(pick, among) -> float | None:
        return sum(c.kept in pick(c) for c in among) / len(among) if among else None

    expected = listed = 0
    missed: list[tuple[str, str, list[tuple[str, float]]]] = []  # with suggest's similarity
    for view in views:
        history = [v for v in views if v.run.run_id != view.run.run_id]
        failing: dict[str, set[str]] = {}
        for other in history:
            if not _similar_by_kind(view, other):
                continue
            for r in other.rounds:
                entry = entry_of(r)
                if r.decision in FAILED and entry != mechanisms.OTHER:
                    failing.setdefault(entry, set()).add(other.run.run_id)
        wanted = {e for e, runs in failing.items() if len(runs) >= 2}
        target = target_of(view)
        got = {s.entry for s in suggest(target, history).signatures}
        expected += len(wanted)
        listed += len(wanted & got)
        by_id = {v.run.run_id: v for v in history}
        missed += [
            (
                view.run.run_id,
                e,
                [
                    (run, max(likeness(target, by_id[run], r).value for r in by_id[run].rounds))
                    for run in sorted(failing[e])
                ],
            )
            for e in sorted(wanted - got)
        ]
    return {
        "runs": len(views),
        "rounds": sum(len(v.rounds) for v in views),
        "keep_rounds": len(cases),
        "keep_rounds_named": len(named),
        "keep_rounds_op_in_history": len(same_op),
        "top3": {
            "suggest": rate(lambda c: c.suggest, cases),
            "suggest_untried_first_off": rate(lambda c: c.untried_first_off, cases),
            "knowledge_query": rate(lambda c: c.query, cases) if query_ok else None,
            "prior_keep_count": rate(lambda c: c.prior, cases),
        },
        "top3_named_only": {
            "suggest": rate(lambda c: c.suggest, named),
            "suggest_untried_first_off": rate(lambda c: c.untried_first_off, named),
            "knowledge_query": rate(lambda c: c.query, named) if query_ok else None,
            "prior_keep_count": rate(lambda c: c.prior, named),
        },
        "top3_by_history": {
            part: {
                "suggest": rate(lambda c: c.suggest, among),
                "knowledge_query": rate(lambda c: c.query, among) if query_ok else None,
                "prior_keep_count": rate(lambda c: c.prior, among),
            }
            for part, among in (("op_in_history", same_op), ("op_not_in_history", new_op))
        },
        "top3_by_prior": {
            part: {
                "rounds": len(among),
                "suggest": rate(lambda c: c.suggest, among),
                "knowledge_query": rate(lambda c: c.query, among) if query_ok else None,
            }
            for part, among in (("prior_names_it", by_prior), ("prior_does_not", not_by_prior))
        },
        "kept_in_no_other_run": [
            (c.run_id, c.round, c.kept) for c in cases if not c.kept_in_history
        ],
        "failure_signatures": {
            "expected": expected,
            "listed": listed,
            "recall": listed / expected if expected else None,
            "missed": missed,
        },
        "cases": [c.__dict__ for c in cases],
    }


def _read(db: str) -> tuple[list[RunView], dict[tuple[str, int], str]]:
    from ledger.services.service import LedgerService
    from ledger.store.eventstore import Store

    service = LedgerService(Store(db))
    views = service.all_views()
    hashes = {}
    with service.store.transaction() as conn:
        for view in views:
            for stored in service.store.read_stream(conn, view.run.run_id, types=("RoundDecided",)):
                hashes[(view.run.run_id, stored.payload_value()["round"])] = stored.event_hash
    return views, hashes


def _p(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def report(figures: dict, source: str) -> str:
    t, n, f = figures["top3"], figures["top3_named_only"], figures["failure_signatures"]
    b = figures["top3_by_history"]
    lines = [
        f"Corpus: {source}: {figures['runs']} runs, {figures['rounds']} rounds, "
        f"{figures['keep_rounds']} KEEP rounds ({figures['keep_rounds_named']} with a "
        "mechanism entry other than `other`).",
        "",
        "| top-3 hit rate of the kept mechanism | suggest | suggest, tried not last "
        "| knowledge_query.py | KEEP-count prior |",
        "|---|---|---|---|---|",
        f"| every KEEP round | {_p(t['suggest'])} | {_p(t['suggest_untried_first_off'])} | "
        f"{_p(t['knowledge_query'])} | {_p(t['prior_keep_count'])} |",
        f"| KEEP rounds with an entry | {_p(n['suggest'])} | "
        f"{_p(n['suggest_untried_first_off'])} | {_p(n['knowledge_query'])} | "
        f"{_p(n['prior_keep_count'])} |",
        *(
            f"| KEEP rounds whose op {label} ({count}) | {_p(b[part]['suggest'])} | | "
            f"{_p(b[part]['knowledge_query'])} | {_p(b[part]['prior_keep_count'])} |"
            for part, label, count in (
                ("op_in_history", "has another run", figures["keep_rounds_op_in_history"]),
                (
                    "op_not_in_history",
                    "has no other run",
                    figures["keep_rounds"] - figures["keep_rounds_op_in_history"],
                ),
            )
            if count
        ),
        *(
            f"| KEEP rounds whose entry the prior's top three {label} ({p['rounds']}) | "
            f"{_p(p['suggest'])} | | {_p(p['knowledge_query'])} | {_p(value)} |"
            for p, label, value in (
                (figures["top3_by_prior"]["prior_names_it"], "names", 1.0),
                (figures["top3_by_prior"]["prior_does_not"], "does not name", 0.0),
            )
            if p["rounds"]
        ),
        "",
        "KEEP rounds whose entry no other run kept (no ranker has a KEEP to go by): "
        + (
            ", ".join(f"{r} round {n} ({e})" for r, n, e in figures["kept_in_no_other_run"])
            or "none"
        )
        + ".",
        "",
        f"Failure signatures: {f['listed']} of {f['expected']} mechanisms that failed in two "
        f"or more similar runs are listed ({_p(f['recall'])}).",
    ]
    return "\n".join(lines)


def document(figures: dict, source: str, argv: list[str] | None) -> str:
    """docs/knowledge-benchmark.md: the figures, the command, when and on what."""
    import datetime as dt
    import platform

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    command = " ".join(["python benchmarks/knowledge.py", *(argv or sys.argv[1:])])
    goals = (
        "Goals (issue 32): suggest's top-3 hit rate at least 70%, at least 20 points above "
        "both knowledge_query.py and the KEEP-count prior; at least 80% of the mechanisms "
        "that failed in two or more similar runs among the failure signatures."
    )
    missed = figures["failure_signatures"]["missed"]
    lines = [
        "# Knowledge: leave-one-run-out",
        "",
        "Generated by `benchmarks/knowledge.py` (its docstring says what it measures); do not "
        "edit by hand.",
        "",
        f"- command: `{command}`",
        f"- date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- git commit: {commit or 'unknown'}; Python {platform.python_version()}",
        "",
        report(figures, source),
        "",
        goals,
        "",
        "Every KEEP round, with each ranker's top three (`kept` is the round's entry):",
        "",
        "| run | round | kept | suggest | knowledge_query.py | prior |",
        "|---|---|---|---|---|---|",
    ]
    for c in figures["cases"]:
        lines.append(
            f"| {c['run_id']} | {c['round']} | {c['kept']} | {', '.join(c['suggest'])} | "
            f"{', '.join(c['query'])} | {', '.join(c['prior'])} |"
        )
    if missed:
        lines += [
            "",
            "Failure signatures not listed (the runs it failed in, with suggest's similarity of "
            f"each; a similar run is one at least {MIN_SIMILARITY} similar):",
            "",
            *(
                f"- {e} for {r}: " + ", ".join(f"{run} ({like:.3f})" for run, like in runs)
                for r, e, runs in missed
            ),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="a ledger holding the corpus")
    parser.add_argument("--bundle", action="append", default=[], help="a bundle or a folder")
    parser.add_argument("--gpu-campaign", action="store_true", help="replay examples/gpu-campaign")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--output", help="also write the report (markdown) to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kl-knowledge-") as tmp:
        work = Path(tmp)
        db, source = _ledger(args, work)
        views, hashes = _read(db)
        figures = evaluate(views, hashes, work)
    figures["source"] = source
    print(report(figures, source))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    if args.output:
        Path(args.output).write_text(document(figures, source, argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
