"""pyeventsourcing saving given events, for `bench_bulk` (run by the peer's own interpreter,
never imported by the project).

    .venv-peer/bin/python benchmarks/peer_eventsourcing.py DB MODE < payloads.jsonl

stdin: one JSON array per line, the payloads of one run's events in order. Every run
becomes one aggregate whose events each carry one payload dict; they are all built before
the clock starts. MODE "per-run" saves each aggregate in its own `Application.save`;
"batched" saves aggregates together in ~1,000-event saves. stdout: {"events", "seconds",
"cpu_seconds" (this thread's CPU time over the saves), "synchronous"} (the SQLite
synchronous level its connection ran with: 2 is FULL).
"""

from __future__ import annotations

import json
import os
import sys
import time

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event


class Run(Aggregate):
    @event("Planned")
    def __init__(self, payload: dict) -> None:
        self.events = 1

    @event("Recorded")
    def record(self, payload: dict) -> None:
        self.events += 1


def main() -> None:
    db, mode = sys.argv[1], sys.argv[2]
    os.environ.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=db)
    app = Application()
    saves: list[list[Run]] = [[]]
    pending = 0
    count = 0
    for line in sys.stdin:
        payloads = json.loads(line)
        run = Run(payloads[0])
        for payload in payloads[1:]:
            run.record(payload)
        count += len(payloads)
        saves[-1].append(run)
        pending += len(payloads)
        if mode == "per-run" or pending >= 1000:
            saves.append([])
            pending = 0
    start, cpu = time.perf_counter(), time.thread_time()
    for group in saves:
        if group:
            app.save(*group)
    seconds, cpu = time.perf_counter() - start, time.thread_time() - cpu
    with app.recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute("PRAGMA synchronous")
        synchronous = cursor.fetchone()[0]
    print(
        json.dumps(
            {"events": count, "seconds": seconds, "cpu_seconds": cpu, "synchronous": synchronous}
        )
    )


if __name__ == "__main__":
    main()
