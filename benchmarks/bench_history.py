"""4. Filtered cross-run history queries against a full scan of the same rows.

The indexed figure is `query_rounds` (what `kernel-ledger history` runs). The scan is the
very same SELECT with SQLite told not to use any index on `rounds` (`NOT INDEXED`), so it
reads every row; its rows are fetched and built by the same `fetch_rounds`. Repetitions
alternate between the two; results must be identical.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from benchmarks.common import Section, Series, goal, progress, ratios
from ledger.store.eventstore import Store
from ledger.store.history import RoundFilter, fetch_rounds, query_rounds, rounds_sql


def _filters(sample_run: str, middle: str) -> list[tuple[str, RoundFilter]]:
    start = datetime.fromisoformat(middle[:10]).replace(tzinfo=UTC)
    since, until = (d.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for d in (start, start + timedelta(1)))
    filters = [
        RoundFilter(run_id=sample_run),
        RoundFilter(op_name="softmax", decision="KEEP", limit=50),
        RoundFilter(bottleneck="scalar-flow-control", limit=50),
        RoundFilter(mechanism="NUM_STAGES", limit=50),
        RoundFilter(soc="Ascend310P3", decision="FAIL", limit=50),
        RoundFilter(op_name="gelu", since=since, until=until),
        RoundFilter(decision="KEEP", since=since, until=until),
        RoundFilter(op_name="softmax", actor="nobody"),  # no decision recorded by them
    ]
    return [(_label(f), f) for f in filters]


def _label(f: RoundFilter) -> str:
    """The `history` flags of a filter (a one-day --since/--until window shown as such)."""
    parts = []
    for name, value in (
        ("run", f.run_id),
        ("op", f.op_name),
        ("soc", f.soc),
        ("decision", f.decision),
        ("bottleneck", f.bottleneck),
        ("mechanism", f.mechanism),
        ("actor", f.actor),
        ("limit", f.limit),
    ):
        if value is not None:
            parts.append(f"--{name} {value}")
    if f.since is not None:
        parts.append("--since/--until (one day)")
    return " ".join(parts)


def _plan(conn, sql: str, params: tuple) -> str:
    rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params).all()
    return "; ".join(str(r[-1]) for r in rows)


def measure(url: str, *, repeats: int) -> Section:
    store = Store(url)
    section = Section(key="history", title="History queries")
    with store.transaction() as conn:
        total = conn.execute(text("SELECT count(*) FROM rounds")).scalar_one()
        events = store.event_count(conn)
        sample = conn.execute(
            text("SELECT run_id FROM runs ORDER BY run_id LIMIT 1 OFFSET :n"),
            {"n": max(0, conn.execute(text("SELECT count(*) FROM runs")).scalar_one() // 2)},
        ).scalar_one()
        middle = conn.execute(  # the day of the median round: the one-day window
            text("SELECT recorded_at FROM rounds ORDER BY recorded_at LIMIT 1 OFFSET :n"),
            {"n": total // 2},
        ).scalar_one()
    rows = []
    worst = None
    for label, f in _filters(sample, middle):
        with store.transaction() as conn:
            sql, params = rounds_sql(conn, f)
        scan_sql = sql.replace("FROM rounds", "FROM rounds NOT INDEXED", 1)
        assert scan_sql != sql

        def indexed(f: RoundFilter = f) -> tuple[float, int]:
            with store.transaction() as conn:
                start = time.perf_counter()
                found = query_rounds(conn, f)
                return time.perf_counter() - start, len(found)

        def scanned(scan_sql: str = scan_sql, params: tuple = params) -> tuple[float, int]:
            with store.transaction() as conn:
                start = time.perf_counter()
                found = fetch_rounds(conn, scan_sql, params)  # the same rows, built the same way
                return time.perf_counter() - start, len(found)

        fast, slow = Series(), Series()
        count = None
        progress(f"history: {label}")
        for _ in range(repeats):
            (a, n1), (b, n2) = indexed(), scanned()
            if n1 != n2:
                raise RuntimeError(f"{label}: indexed query found {n1} rows, the scan {n2}")
            count = n1
            fast.add(a * 1000)
            slow.add(b * 1000)
        ratio = ratios(slow.values, fast.values)
        with store.transaction() as conn:
            plan = _plan(conn, sql, params)
        rows.append(
            [
                f"`{label}`",
                str(count),
                fast.show("{:.2f}"),
                slow.show("{:.1f}"),
                ratio.show("{:,.0f}"),
                plan,
            ]
        )
        section.figures[label] = {
            "rows": count,
            "indexed_ms": fast.as_dict(),
            "scan_ms": slow.as_dict(),
            "speedup": ratio.as_dict(),
            "plan": plan,
        }
        worst = ratio.median if worst is None else min(worst, ratio.median)
    store.close()
    section.intro = (
        f"{events:,} events, {total:,} rows in `rounds`. Milliseconds, median [min-max] of "
        f"{repeats} repetitions; speed-up = scan / indexed within each repetition."
    )
    section.table(
        ["history filter", "rows", "indexed (ms)", "full scan (ms)", "speed-up", "SQLite plan"],
        rows,
    )
    assert worst is not None
    section.notes.append(
        f"Goal for every filter: {goal(worst, 100)} (smallest speed-up {worst:,.0f}x)."
    )
    section.notes.append(_row_bound(section.figures))
    return section


def _row_bound(figures: dict) -> str:
    """What the widest filter says about the goal: an indexed query pays for each row it
    returns (an index entry, then the row's table page), so its speed-up over the scan falls
    as the rows it returns grow, whatever the index."""
    label, widest = max(figures.items(), key=lambda item: item[1]["rows"])
    per_row_ms = widest["indexed_ms"]["median"] / widest["rows"]
    scan_ms = widest["scan_ms"]["median"]
    most = int(scan_ms / (100 * per_row_ms))
    narrow = [f["speedup"]["median"] for f in figures.values() if f["rows"] <= most]
    verdict = (
        f"every filter returning at most {most} rows: {goal(min(narrow), 100)} "
        f"(smallest speed-up {min(narrow):,.0f}x)"
        if narrow
        else f"no filter here returns {most} rows or fewer"
    )
    return (
        f"An indexed query pays for every row it returns: `{label}` returns "
        f"{widest['rows']:,} rows in {widest['indexed_ms']['median']:.2f} ms, "
        f"{per_row_ms * 1000:.1f} µs a row (an index entry, then the row's own table page), "
        f"against {scan_ms:.1f} ms for the scan. At that cost a filter can be 100x faster than "
        f"the scan only while it returns at most {most} rows; {verdict}."
    )
