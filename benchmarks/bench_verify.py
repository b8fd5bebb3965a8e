"""Verify on a large ledger: the whole replay (`verify`) against `verify --since` from a
checkpoint note of all but the newest events.

The ledger (`events` events, built once through the append path, `workload.BulkWriter`, and
cached under .bench-cache/ with its checkpoint note) gets `new` more events in new runs on a
copy; then, each in a process of its own, the full verify and the incremental one from the
note, in turn. The ratio incremental / full is taken within each repetition.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    ROOT,
    Section,
    Series,
    copy_sqlite,
    goal,
    progress,
    python_json,
    ratios,
    rss_mib,
    sqlite_url,
)

CACHE = ROOT / ".bench-cache"
GOAL = 0.02


def cached_ledger(events: int) -> tuple[Path, str, int]:
    """(ledger file, checkpoint note of all its events, next run number): built once."""
    path = CACHE / f"verify-{events}.sqlite3"
    meta = path.with_suffix(".json")
    if meta.exists() and path.exists():
        found = json.loads(meta.read_text())
        return path, found["note"], found["next_run"]
    from benchmarks.common import remove_sqlite
    from benchmarks.workload import BulkWriter, Generator, Shape
    from ledger.integrity import audit
    from ledger.integrity.checkpoint import Checkpoint, format_note
    from ledger.store.eventstore import Store

    CACHE.mkdir(exist_ok=True)
    remove_sqlite(path)
    store = Store(sqlite_url(path))
    writer = BulkWriter(store, batch=1000)
    generator = Generator(Shape(), prefix="big", distinct=480)
    k = 0
    while writer.events_written + writer.pending_events < events:
        writer.add(generator.run(k))
        k += 1
        if k % 2000 == 0:
            progress(f"verify: {writer.events_written:,} events written")
    writer.flush()
    with store.transaction() as conn:
        tree = audit.stored_tree(store, conn)
        origin = audit.origin_for(store.ledger_id(conn))
    store.close()
    note = format_note(Checkpoint(origin, tree.size, tree.root()))
    meta.write_text(json.dumps({"note": note, "next_run": k}))
    return path, note, k


def grown(base: Path, out: Path, first_run: int, new: int) -> int:
    """A copy of `base` with about `new` more events in new runs; events added."""
    from benchmarks.workload import BulkWriter, Generator, Shape
    from ledger.store.eventstore import Store

    copy_sqlite(base, out)
    store = Store(sqlite_url(out))
    writer = BulkWriter(store, batch=1000, seed=first_run)  # event ids unlike the base's
    generator = Generator(Shape(), prefix="big", distinct=480)
    k = first_run
    while writer.events_written + writer.pending_events < new:
        writer.add(generator.run(k))
        k += 1
    writer.flush()
    store.close()
    return writer.events_written


def child(mode: str, url: str, note: str) -> dict[str, Any]:
    from ledger.integrity import audit
    from ledger.store.eventstore import Store

    start, cpu = time.perf_counter(), time.process_time()
    store = Store(url)
    report = audit.verify(store) if mode == "full" else audit.verify_since(store, note)
    store.close()
    if not report.ok:
        raise SystemExit(f"verify failed: {report.as_dict()['first_failure']}")
    return {
        "mode": mode,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu,
        "events_checked": report.ledger.events_checked,
        "rss_mib": rss_mib(),
    }


def measure(work: Path, *, events: int, new: int, repeats: int) -> Section:
    base, note, next_run = cached_ledger(events)
    work.mkdir(parents=True, exist_ok=True)
    ledger = work / "grown.sqlite3"
    added = grown(base, ledger, next_run, new)
    note_file = work / "checkpoint.txt"
    note_file.write_text(note)
    seconds = {"full": Series(), "since": Series()}
    cpu = {"full": Series(), "since": Series()}
    checked, rss = {}, {}
    for rep in range(repeats):
        for mode in ("full", "since"):
            progress(f"verify: repetition {rep + 1}, {mode}")
            found = python_json(
                ["-m", "benchmarks.bench_verify", mode, sqlite_url(ledger), str(note_file)],
                cwd=ROOT,
                what=f"verify benchmark ({mode})",
            )
            seconds[mode].add(found["seconds"])
            cpu[mode].add(found["cpu_seconds"])
            checked[mode], rss[mode] = found["events_checked"], found["rss_mib"]
    ratio = ratios(seconds["since"].values, seconds["full"].values)
    cpu_ratio = ratios(cpu["since"].values, cpu["full"].values)
    section = Section(
        "verify",
        "Verify (SQLite)",
        f"A ledger of {events + added:,} events: a checkpoint note of the first {events:,} "
        f"(cached in .bench-cache/), then {added:,} events in new runs. Seconds, median "
        f"[min-max] of {repeats} repetitions, each command in a process of its own; the ratio "
        "is taken within each repetition. Commands: `kernel-ledger verify` and "
        "`kernel-ledger verify --since checkpoint.txt`.",
    )
    section.table(
        ["command", "seconds", "CPU seconds", "events replayed", "peak RSS MiB"],
        [
            [
                f"`{name}`",
                seconds[m].show("{:.2f}"),
                cpu[m].show("{:.2f}"),
                f"{checked[m]:,}",
                f"{rss[m]:.0f}",
            ]
            for name, m in (("verify", "full"), ("verify --since", "since"))
        ],
    )
    section.notes.append(
        f"`verify --since` / `verify`: {ratio.show('{:.4f}')}; "
        f"{goal(ratio.median, GOAL, at_least=False)}; in CPU time {cpu_ratio.show('{:.4f}')}: "
        f"{goal(cpu_ratio.median, GOAL, at_least=False)}."
    )
    section.figures = {
        "events": events + added,
        "full_s": seconds["full"].as_dict(),
        "since_s": seconds["since"].as_dict(),
        "since_over_full": ratio.as_dict(),
        "since_over_full_cpu": cpu_ratio.as_dict(),
    }
    return section


if __name__ == "__main__":
    mode, url, note_path = sys.argv[1:4]
    print(json.dumps(child(mode, url, Path(note_path).read_text())))
