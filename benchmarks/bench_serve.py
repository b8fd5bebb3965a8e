"""8. The web view's pages (`kernel-ledger serve`) on a large ledger.

Each page is requested in-process through the ASGI app (starlette's TestClient: the whole
request, routing, the read-only SQLite queries and the Jinja2 rendering; no socket), first
pages and keyset pages from the middle of each list, HTML and JSON. The run page renders the
report's charts with matplotlib and replays the run's events for its verification panel; it
costs what one run costs, whatever the ledger's size.
"""

from __future__ import annotations

import time
import warnings
from urllib.parse import urlencode

from sqlalchemy import text

from benchmarks.common import Section, Series, progress
from ledger.store.eventstore import Store


def _pages(url: str) -> list[tuple[str, str]]:
    store = Store(url, read_only=True)
    with store.transaction() as conn:
        runs = conn.execute(text("SELECT count(*) FROM runs")).scalar_one()
        middle_run = conn.execute(
            text("SELECT run_id FROM runs ORDER BY run_id LIMIT 1 OFFSET :n"), {"n": runs // 2}
        ).scalar_one()
        total = conn.execute(text("SELECT count(*) FROM rounds")).scalar_one()
        at, run, number = conn.execute(
            text(
                "SELECT recorded_at, run_id, round FROM rounds "
                "ORDER BY recorded_at, run_id, round LIMIT 1 OFFSET :n"
            ),
            {"n": total // 2},
        ).one()
        versions = conn.execute(
            text("SELECT max(stream_version) FROM events WHERE stream_id = :r"), {"r": middle_run}
        ).scalar_one()
    store.close()
    after = urlencode({"after_at": at, "after_run": run, "after_round": number})
    q = urlencode({"id": middle_run})
    r = urlencode({"run": middle_run})
    return [
        ("runs, first page", "/"),
        ("runs, a page from the middle", f"/?{urlencode({'after': middle_run})}"),
        ("runs JSON, a page from the middle", f"/api/runs?{urlencode({'after': middle_run})}"),
        ("a run (the report's content)", f"/run?{q}"),
        ("a run's event log", f"/events?{r}"),
        ("a run's event log, second page", f"/events?{r}&after={max(1, versions // 2)}&limit=20"),
        ("kernel diff, original to round 1", f"/diff?{r}&a=0&b=1"),
        ("history, first page", "/history"),
        ("history, a page from the middle", f"/history?{after}"),
        ("history JSON, softmax KEEP", "/api/history?op=softmax&decision=KEEP"),
        ("checkpoints (without verifying)", "/checkpoints"),
    ]


def measure(url: str, *, repeats: int) -> Section:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from ledger.reports.web import create_app

    section = Section(key="serve", title="Web view (`kernel-ledger serve`)")
    store = Store(url, read_only=True)
    with store.transaction() as conn:
        events = store.event_count(conn)
    store.close()
    rows = []
    with TestClient(create_app(url)) as client:
        for label, path in _pages(url):
            progress(f"serve: {label}")
            start = time.perf_counter()
            first = client.get(path)  # warm: templates compiled, statements cached, charts drawn
            first_ms = (time.perf_counter() - start) * 1000
            if first.status_code != 200:
                raise RuntimeError(f"{path}: HTTP {first.status_code}: {first.text[:200]}")
            series = Series()
            for _ in range(repeats):
                start = time.perf_counter()
                response = client.get(path)
                series.add((time.perf_counter() - start) * 1000)
                assert response.status_code == 200
            route = f"`{path.split('?')[0]}`"
            rows.append(
                [label, route, f"{len(first.content):,}", f"{first_ms:.1f}", series.show("{:.1f}")]
            )
            section.figures[label] = {
                "path": path,
                "bytes": len(first.content),
                "first_ms": first_ms,
                "ms": series.as_dict(),
            }
    section.intro = (
        f"A ledger of {events:,} events. Milliseconds per request, median [min-max] of "
        f"{repeats} requests after the first, through the ASGI app in-process. A run's "
        "charts are drawn on its first view and kept for that state of the run (they are a "
        "pure function of its events); its verification panel replays the run every time."
    )
    section.table(["page", "route", "bytes", "first request (ms)", "latency (ms)"], rows)
    lists = [v["ms"]["median"] for k, v in section.figures.items() if "run (" not in k]
    section.notes.append(
        f"Every list page (runs, event log, history, checkpoints) answers in at most "
        f"{max(lists):.0f} ms at this size: each is one keyset-paged, indexed query."
    )
    return section
