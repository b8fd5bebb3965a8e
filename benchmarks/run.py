"""Run the performance suite and write docs/benchmarks.md.

    .venv/bin/python benchmarks/run.py                  # the full suite (~15-20 min, 2 cores)
    .venv/bin/python benchmarks/run.py --quick          # small sizes, few repetitions (~2 min)
    .venv/bin/python benchmarks/run.py --only verify,history --output /tmp/b.md

`verify` builds a 1,000,000-event ledger once and caches it under .bench-cache/ (git-ignored),
so later runs start at once.

Every figure is a ratio to a floor measured in the same run (repeated; median with the
spread over repetitions). Nothing here is a pass/fail test: goals are reported, not asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import (
    bench_agents,
    bench_append,
    bench_history,
    bench_record,
    bench_serve,
    bench_small,
    bench_verify,
)
from benchmarks.common import ROOT, Section, machine_facts, progress
from benchmarks.ledgers import Ledgers
from benchmarks.workload import Shape

NAMES = (
    "append",
    "record",
    "verify",
    "history",
    "serve",
    "startup",
    "decisions",
    "postgres",
    "agents",
)
DEFAULT = ("record", "startup", "verify", "history", "serve")  # what a user waits for


def _sizes(quick: bool) -> list[int]:
    return [0, 2_000, 20_000] if quick else [0, 10_000, 100_000, 1_000_000]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repetitions")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run these benchmarks (comma-separated or repeated; default {','.join(DEFAULT)}): "
        f"{', '.join(NAMES)}",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=ROOT / "docs" / "benchmarks.md",
        help="where to write the report (default docs/benchmarks.md)",
    )
    parser.add_argument(
        "--sizes",
        metavar="N,N,...",
        help="ledger sizes in events for record/verify/history (default 0,10000,100000,1000000; "
        "--quick 0,2000,20000)",
    )
    parser.add_argument("--json", type=Path, help="also write every figure as JSON here")
    parser.add_argument("--work", type=Path, help="folder for the ledgers (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    only = {n.strip() for item in args.only for n in item.split(",") if n.strip()}
    unknown = only - set(NAMES)
    if unknown:
        parser.error(f"unknown benchmark {sorted(unknown)[0]!r}; choose from {', '.join(NAMES)}")
    selected = [n for n in NAMES if n in only or (not only and n in DEFAULT)]
    quick = args.quick
    try:
        sizes = sorted({int(n) for n in args.sizes.split(",")}) if args.sizes else _sizes(quick)
    except ValueError:
        parser.error("--sizes takes whole numbers of events, comma-separated")
    if sizes[0] != 0 or len(sizes) < 2:
        parser.error("--sizes must start with 0 (the empty ledger) and name a larger size")
    work = args.work or Path(tempfile.mkdtemp(prefix="kl-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    facts = machine_facts()
    sections: list[Section] = []
    try:
        sections = _run(selected, quick, work, sizes)
    finally:
        if not args.keep and args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started
    command = "python benchmarks/run.py" + (" --quick" if quick else "")
    if args.sizes:
        command += f" --sizes {','.join(map(str, sizes))}"
    if only:
        command += f" --only {','.join(selected)}"
    report = _markdown(sections, facts, command, elapsed, quick)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(report)
    if args.json:
        args.json.write_text(
            json.dumps({s.key: s.figures for s in sections}, indent=1, default=str) + "\n"
        )
    progress(f"wrote {args.output} after {elapsed / 60:.1f} min")
    return 0


def _run(selected: list[str], quick: bool, work: Path, sizes: list[int]) -> list[Section]:
    sections: list[Section] = []
    reps = 3 if quick else 5

    def timed(section: Section, t0: float) -> Section:
        section.seconds = time.perf_counter() - t0
        sections.append(section)
        return section

    if "append" in selected:
        t0 = time.perf_counter()
        timed(
            bench_append.measure(
                bench_append.Backend(work),
                runs=30 if quick else 120,
                per_append_runs=3 if quick else 8,
                repeats=reps,
            ),
            t0,
        )
    ledgers = None
    if {"record", "history", "serve"} & set(selected):
        t0 = time.perf_counter()
        progress("building the ledgers")
        ledgers = Ledgers(work / "ledgers", sizes, shape=Shape(), distinct=480)
        ledgers.build()
        progress(ledgers.note())
    if "record" in selected:
        assert ledgers is not None
        t0 = time.perf_counter()
        section = bench_record.measure(
            ledgers,
            work / "record",
            repeats=reps,
            rounds=10 if quick else 20,
            long_run=200 if quick else 1000,
        )
        section.notes.insert(0, ledgers.note())
        timed(section, t0)
    if "verify" in selected:
        t0 = time.perf_counter()
        events = 20_000 if quick else 1_000_000
        # a full verify of the large ledger takes a minute or more: two repetitions
        section = bench_verify.measure(work / "verify", events=events, new=1000, repeats=2)
        timed(section, t0)
    if "history" in selected:
        assert ledgers is not None
        t0 = time.perf_counter()
        timed(bench_history.measure(ledgers.url(ledgers.largest()), repeats=reps), t0)
    if "serve" in selected:
        assert ledgers is not None
        t0 = time.perf_counter()
        timed(bench_serve.measure(ledgers.url(ledgers.largest()), repeats=reps), t0)
    if "startup" in selected:
        t0 = time.perf_counter()
        timed(bench_small.startup(work, repeats=5 if quick else 15), t0)
    if "decisions" in selected:
        t0 = time.perf_counter()
        timed(bench_small.decisions(repeats=5 if quick else 20), t0)
    if "postgres" in selected:
        sections.extend(_postgres(work, quick, reps))
    if "agents" in selected:
        t0 = time.perf_counter()
        at = (1, 20, 100) if quick else (1, 100, 1000)
        timed(bench_agents.measure(work / "agents", at=at, repeats=reps), t0)
    return sections


def _postgres(work: Path, quick: bool, reps: int) -> list[Section]:
    from benchmarks.postgres import PgBackend, pg_cluster

    t0 = time.perf_counter()
    with pg_cluster() as cluster:
        if isinstance(cluster, str):
            skipped = Section(key="postgres", title="PostgreSQL")
            skipped.notes.append(f"Skipped: {cluster}")
            return [skipped]
        backend = PgBackend(cluster)
        append = bench_append.measure(
            backend,
            runs=30 if quick else 120,
            per_append_runs=3 if quick else 8,
            repeats=reps,
        )
        append.seconds = time.perf_counter() - t0
        append.notes.insert(0, backend.note())
    return [append]


def _markdown(
    sections: list[Section], facts: list[tuple[str, str]], command: str, elapsed: float, quick: bool
) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`benchmarks/run.py`); do not edit by hand.",
        "",
        f"- date: {now}",
        f"- command: `{command}`" + (" (quick sizes: not the figures to quote)" if quick else ""),
        f"- wall time of the whole run: {elapsed / 60:.1f} min",
    ]
    out += [f"- {name}: {value}" for name, value in facts]
    out += [
        "",
        "What a user waits for: a record call, start-up, verify in full and from a "
        "checkpoint, a history query, a served page. Each figure is repeated; medians are "
        "quoted with [min-max] over the repetitions, and each ratio is formed within one "
        f"repetition. Other work on the machine ({os.cpu_count()} logical cores) moves "
        "absolute times between runs; the ratios are the figures to compare. The suite never "
        "asserts a time.",
        "",
    ]
    for section in sections:
        out.append(section.markdown())
        out.append(f"_({section.seconds:.0f} s)_\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
