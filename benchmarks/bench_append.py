"""1 (and 7). Bulk append through the real store against raw inserts of identical rows.

The store path: `Store.append` (canonical payload, event hash, chain), the projection fold
and `Store.save_view`, kernel sources into `blobs`, whole runs packed into transactions of
about 1,000 events (`workload.BulkWriter`). The floor: the same rows, read back from the
ledger the store wrote, inserted with the driver's executemany into a fresh ledger of the
same schema (indexes and triggers included), with the same pragmas and the same
transaction boundaries. The two alternate within each repetition.

A second row does the same with the transactions `LedgerService.append` uses in normal
operation: one per plan, record and conclusion (3 to 5 events each).
"""

from __future__ import annotations

import random
import sqlite3
import time
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.common import (
    Section,
    Series,
    goal,
    progress,
    ratios,
    remove_sqlite,
    sqlite_url,
)
from benchmarks.workload import BulkWriter, GeneratedRun, Generator, Shape, event_ids
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

COLUMNS = (
    "seq, event_id, stream_id, stream_version, event_type, schema_version, recorded_at, "
    "payload, parent_hash, event_hash"
)


# The tables an append writes besides `events`, each with the column naming its run (None:
# content-addressed, shared by every run).
PROJECTION_TABLES = (
    ("blobs", None),
    ("runs", "run_id"),
    ("run_cases", "run_id"),
    ("rounds", "run_id"),
    ("profiles", "run_id"),
)


def every_row(conn: Any, events: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table the store wrote, in a stable order (a DB-API connection)."""
    tables: dict[str, list[tuple[Any, ...]]] = {"events": events}
    for table, _ in PROJECTION_TABLES:
        tables[table] = [tuple(r) for r in conn.execute(f"SELECT * FROM {table}").fetchall()]
    return tables


def all_rows_batches(
    conn: Any, tables: dict[str, list[tuple[Any, ...]]], sizes: list[int]
) -> list[list[tuple[str, list[tuple[Any, ...]]]]]:
    """The rows of `every_row` grouped as the store wrote them: each transaction's events and
    the projection rows of the runs those events belong to; blobs spread evenly."""
    events = tables["events"]
    home: dict[str, int] = {}
    at = 0
    for number, size in enumerate(sizes):
        for row in events[at : at + size]:
            home.setdefault(row[2], number)  # stream_id: the run's first transaction
        at += size
    batches: list[list[tuple[str, list[tuple[Any, ...]]]]] = [[] for _ in sizes]
    at = 0
    for number, size in enumerate(sizes):
        batches[number].append(("events", events[at : at + size]))
        at += size
    for table, run_column in PROJECTION_TABLES:
        rows = tables[table]
        grouped: list[list[tuple[Any, ...]]] = [[] for _ in sizes]
        if run_column is None:
            for k, row in enumerate(rows):
                grouped[k * len(sizes) // max(1, len(rows))].append(row)
        else:
            names = [d[0] for d in conn.execute(f"SELECT * FROM {table} LIMIT 0").description]
            index = names.index(run_column)
            for row in rows:
                grouped[home[row[index]]].append(row)
        for number, chunk in enumerate(grouped):
            if chunk:
                batches[number].append((table, chunk))
    return batches


class Backend:
    """Fresh ledgers and the raw-driver floor for one database kind."""

    name = "SQLite"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        path = self.folder / f"append-{self.count}.sqlite3"
        remove_sqlite(path)
        Store(sqlite_url(path)).close()  # created at head: schema, indexes, triggers
        return sqlite_url(path)

    def drop(self, url: str) -> None:
        remove_sqlite(Path(url.removeprefix("sqlite:///")))

    def rows(self, url: str) -> list[tuple[Any, ...]]:
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq").fetchall()

    def raw_insert(self, url: str, rows: list[tuple[Any, ...]], sizes: list[int]) -> float:
        """Seconds to insert `rows` in transactions of `sizes` rows, as the store's pragmas
        (WAL, synchronous=FULL, busy timeout, foreign keys) and BEGIN IMMEDIATE do."""
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        sql = f"INSERT INTO events ({COLUMNS}) VALUES ({', '.join('?' * 10)})"
        start, cpu = time.perf_counter(), time.thread_time()
        at = 0
        for size in sizes:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(sql, rows[at : at + size])
            conn.execute("COMMIT")
            at += size
        seconds = time.perf_counter() - start
        _CPU["floor"] = time.thread_time() - cpu
        conn.close()
        return seconds

    def raw_insert_all(self, url: str, source: str, rows: list, sizes: list[int]) -> float:
        """Seconds to insert every row the store wrote (events, projection rows, blobs),
        grouped in the store's transactions, with the store's pragmas."""
        with sqlite3.connect(source.removeprefix("sqlite:///")) as src:
            batches = all_rows_batches(src, every_row(src, rows), sizes)
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        start = time.perf_counter()
        for batch in batches:
            conn.execute("BEGIN IMMEDIATE")
            for table, chunk in batch:
                marks = ", ".join("?" * len(chunk[0]))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})", chunk)
            conn.execute("COMMIT")
        seconds = time.perf_counter() - start
        conn.close()
        return seconds


def _bulk(backend: Backend, runs: list[GeneratedRun]) -> tuple[float, str, list[int]]:
    url = backend.fresh()
    store = Store(url)
    writer = BulkWriter(store, batch=1000)
    start, cpu = time.perf_counter(), time.thread_time()
    for run in runs:
        writer.add(run)
    writer.flush()
    seconds = time.perf_counter() - start
    _CPU["store"] = time.thread_time() - cpu
    store.close()
    return seconds, url, writer.sizes


_CPU: dict[str, float] = {}  # CPU seconds of this process in the last bulk run and its floor


def _per_append(backend: Backend, runs: list[GeneratedRun]) -> tuple[float, str, list[int]]:
    """One transaction per plan / record / conclusion, through `LedgerService.append`."""
    url = backend.fresh()
    store = Store(url)
    ids = event_ids(random.Random(5))
    service = LedgerService(store, new_id=lambda: next(ids))
    sizes = []
    start = time.perf_counter()
    for run in runs:
        view = None
        blobs = iter(run.blobs)
        for number, (items, at) in enumerate(zip(run.appends, run.times, strict=True)):
            # plan stores the starting kernel, each record its candidate, conclude nothing
            kernel = [next(blobs)] if number < len(run.appends) - 1 else []
            view, _ = service.append(run.run_id, view, items, kernel, at=at)
            sizes.append(len(items))
    seconds = time.perf_counter() - start
    store.close()
    return seconds, url, sizes


def measure(
    backend: Backend,
    *,
    runs: int,
    per_append_runs: int,
    repeats: int,
    shape: Shape | None = None,
) -> Section:
    generator = Generator(shape or Shape(), prefix="append")
    progress(f"append ({backend.name}): generating {runs} runs")
    pool = [generator.run(k) for k in range(runs)]
    events = sum(r.event_count for r in pool)
    few = pool[:per_append_runs]
    few_events = sum(r.event_count for r in few)
    section = Section(
        key="append" if backend.name == "SQLite" else "append-pg",
        title=f"Bulk append ({backend.name})",
    )
    rows_table = []
    for label, subset, path in (
        ("~1,000-event transactions (bulk, `BulkWriter`)", pool, _bulk),
        ("one transaction per plan/record/conclude (`LedgerService.append`)", few, _per_append),
    ):
        count = events if subset is pool else few_events
        store_rate, floor_rate, all_rate = Series(), Series(), Series()
        store_cpu, floor_cpu = Series(), Series()
        sizes_seen: list[int] = []
        for rep in range(repeats):
            progress(f"append ({backend.name}): {label.split(' (')[0]} repetition {rep + 1}")
            seconds, url, sizes = path(backend, subset)
            rows = backend.rows(url)
            assert len(rows) == count, (len(rows), count)
            payload = sum(len(r[7]) for r in rows) / count
            floor_url = backend.fresh()
            floor_seconds = backend.raw_insert(floor_url, rows, sizes)
            backend.drop(floor_url)
            if subset is pool:
                floor_url = backend.fresh()
                all_rate.add(count / backend.raw_insert_all(floor_url, url, rows, sizes))
                backend.drop(floor_url)
            backend.drop(url)
            store_rate.add(count / seconds)
            floor_rate.add(count / floor_seconds)
            if subset is pool:
                store_cpu.add(_CPU.pop("store") * 1e6 / count)
                floor_cpu.add(_CPU.pop("floor") * 1e6 / count)
            sizes_seen = sizes
        ratio = ratios(store_rate.values, floor_rate.values)
        rows_table.append(
            [
                label,
                f"{count:,} events in {len(sizes_seen):,} transactions",
                store_rate.show(),
                floor_rate.show(),
                ratio.show("{:.2f}"),
            ]
        )
        section.figures[label] = {
            "events": count,
            "transactions": len(sizes_seen),
            "store_events_per_s": store_rate.as_dict(),
            "floor_events_per_s": floor_rate.as_dict(),
            "ratio": ratio.as_dict(),
        }
        if subset is pool:
            bulk_ratio = ratio.median
            bulk_all, all_ratio = all_rate, ratios(store_rate.values, all_rate.values)
            section.figures[label]["floor_all_rows_events_per_s"] = all_rate.as_dict()
            section.figures[label]["ratio_all_rows"] = all_ratio.as_dict()
            section.figures[label]["store_cpu_us_per_event"] = store_cpu.as_dict()
            section.figures[label]["floor_cpu_us_per_event"] = floor_cpu.as_dict()
            cpu_ratio = ratios(floor_cpu.values, store_cpu.values)
    section.intro = (
        f"{events:,} events in {runs} runs of {generator.shape.rounds} rounds "
        f"(~{events // runs} events per run, {payload:.0f} payload bytes per event on "
        "average); events per second, median [min-max] of "
        f"{repeats} repetitions; the ratio is taken within each repetition."
    )
    section.table(
        ["transactions", "workload", "store (events/s)", "raw inserts (events/s)", "ratio"],
        rows_table,
    )
    section.notes.append(f"Bulk goal: {goal(bulk_ratio, 0.5)}.")
    section.notes.append(
        "A second floor inserts every row the store wrote, not only the events: the same "
        "events plus the projection rows (runs, run_cases, rounds, profiles) and kernel "
        "blobs, grouped in the store's transactions (each run's rows with its events), by "
        f"the raw driver: {bulk_all.show()} events/s; store / that floor "
        f"{all_ratio.show('{:.2f}')}: {goal(all_ratio.median, 0.5)}."
    )
    store_us = section.figures[BULK]["store_cpu_us_per_event"]["median"]
    floor_us = section.figures[BULK]["floor_cpu_us_per_event"]["median"]
    stages = breakdown(pool)
    section.figures["stages_us_per_event"] = stages
    known = sum(v for k, v in stages.items() if not k.startswith("("))
    rows = [[name, f"{us:.1f}"] for name, us in stages.items()]
    rows.append(["the insert itself (the floor's executemany)", f"{floor_us:.1f}"])
    rows.append(
        [
            "everything else (SQLAlchemy, `save_view`, blobs, rows and objects)",
            f"{max(0.0, store_us - known - floor_us):.1f}",
        ]
    )
    rows.append(["**bulk store path, whole**", f"**{store_us:.1f}**"])
    section.table(["where one event's CPU time goes (bulk)", "µs per event"], rows)
    section.notes.append(
        "CPU time of this process (`time.thread_time`): the whole store path and the floor's "
        f"inserts per repetition (median; CPU ratio floor/store {cpu_ratio.show('{:.2f}')}), "
        "and each stage timed alone over the same events (best of 3). Rows in parentheses "
        "are for reference, not part of the path. Wall-clock rates above also include waiting "
        "for the disk and for the other processes on this shared machine."
    )
    return section


BULK = "~1,000-event transactions (bulk, `BulkWriter`)"


def breakdown(pool: list[GeneratedRun]) -> dict[str, float]:
    """CPU microseconds per event of each stage of the store's append path, timed alone."""
    import rfc8785

    from ledger.core import projections
    from ledger.integrity.hashing import canonical, event_hash

    items = [
        (run, item, at)
        for run in pool
        for its, at in zip(run.appends, run.times, strict=True)
        for item in its
    ]
    count = len(items)

    def best(fn) -> float:
        fastest = float("inf")
        for _ in range(3):
            start = time.thread_time()
            fn()
            fastest = min(fastest, time.thread_time() - start)
        return fastest * 1e6 / count

    try:
        canonical({}, string_keys=True)
        fast = partial(canonical, string_keys=True)
    except TypeError:  # an older tree (measuring the "before")
        fast = canonical
    payloads = [item.payload() for _, item, _ in items]
    blobs = [fast(p) for p in payloads]

    def fold() -> None:  # as `BulkWriter` folds: one call per run
        for run in pool:
            projections.fold_into(
                None,
                (
                    (version, at, item)
                    for version, (item, at) in enumerate(
                        (
                            (item, at)
                            for its, at in zip(run.appends, run.times, strict=True)
                            for item in its
                        ),
                        start=1,
                    )
                ),
            )

    def hashes() -> None:
        for (run, item, at), blob in zip(items, blobs, strict=True):
            event_hash(
                stream_id=run.run_id,
                stream_version=1,
                event_id="00000000-0000-4000-8000-000000000000",
                event_type=item.event_type,
                schema_version=item.schema_version,
                recorded_at=at,
                parent_hash="0" * 64,
                payload=blob,
            )

    return {
        "event model to JSON values (`Event.payload`, pydantic)": best(
            lambda: [item.payload() for _, item, _ in items]
        ),
        "canonical bytes (`hashing.canonical`)": best(lambda: [fast(p) for p in payloads]),
        "(canonical bytes by the `rfc8785` package, as before)": best(
            lambda: [rfc8785.dumps(p) for p in payloads]
        ),
        "event hash over the envelope (`hashing.event_hash`)": best(hashes),
        "projection fold (`projections.fold_into`, one call per run)": best(fold),
    }
