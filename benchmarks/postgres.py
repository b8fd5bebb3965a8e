"""7. PostgreSQL: a throwaway cluster (tests/pgcluster.py) and the append floor over psycopg.

The cluster is the test suite's: fsync, synchronous_commit and full_page_writes are off, so
commits cost no disk flush. Store and floor share that setting; the figures compare the
ledger's own work with the driver's, not durable PostgreSQL throughput.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy.engine import make_url

from benchmarks.bench_append import _CPU, COLUMNS, all_rows_batches, every_row
from benchmarks.common import ROOT, progress
from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.store.eventstore import Store


@contextmanager
def pg_cluster() -> Iterator[Any]:
    """A started PgCluster, or a string saying why there is none."""
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from pgcluster import PgCluster
    finally:
        sys.path.remove(str(ROOT / "tests"))
    cluster = PgCluster("kl_bench")
    try:
        progress("postgres: starting a throwaway cluster")
        cluster.start()
    except Exception as exc:  # no server binaries, no user, no port: report, do not fail
        yield f"no PostgreSQL cluster could be started ({exc})"
        return
    try:
        yield cluster
    finally:
        cluster.stop()


class PgBackend:
    name = "PostgreSQL"

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def note(self) -> str:
        return (
            f"PostgreSQL {self.cluster.version}, the test suite's throwaway cluster: "
            "fsync, synchronous_commit and full_page_writes are off for store and floor alike."
        )

    def fresh(self) -> str:
        name = f"bench_{uuid.uuid4().hex[:10]}"
        url = self.cluster.create_database(name)
        Store(url, check_schema=False).upgrade()
        return url

    def drop(self, url: str) -> None:
        self.cluster.drop_database(make_url(url).database)

    def _connect(self, url: str):
        return self.cluster.connect(make_url(url).database)

    def rows(self, url: str) -> list[tuple[Any, ...]]:
        with self._connect(url) as conn:
            return conn.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq").fetchall()

    def raw_insert(self, url: str, rows: list[tuple[Any, ...]], sizes: list[int]) -> float:
        sql = f"INSERT INTO events ({COLUMNS}) VALUES ({', '.join(['%s'] * 10)})"
        with self._connect(url) as conn:
            cursor = conn.cursor()
            start, cpu = time.perf_counter(), time.thread_time()
            at = 0
            for size in sizes:
                with conn.transaction():
                    cursor.executemany(sql, rows[at : at + size])
                at += size
            seconds = time.perf_counter() - start
            _CPU["floor"] = time.thread_time() - cpu  # this client's CPU; the server's is apart
            return seconds

    def raw_insert_all(self, url: str, source: str, rows: list, sizes: list[int]) -> float:
        """Seconds to insert every row the store wrote, grouped in its transactions."""
        with self._connect(source) as src:
            batches = all_rows_batches(src, every_row(src, rows), sizes)
        with self._connect(url) as conn:
            cursor = conn.cursor()
            start = time.perf_counter()
            for batch in batches:
                with conn.transaction():
                    for table, chunk in batch:
                        marks = ", ".join(["%s"] * len(chunk[0]))
                        cursor.executemany(f"INSERT INTO {table} VALUES ({marks})", chunk)
            return time.perf_counter() - start

    def ledger(self, *, events: int) -> str:
        """A PostgreSQL ledger of about `events` events, written like the SQLite ones."""
        url = self.fresh()
        store = Store(url)
        writer = BulkWriter(store)
        generator = Generator(Shape(), prefix="pg", distinct=480)
        k = 0
        while writer.events_written + writer.pending_events < events:
            writer.add(generator.run(k))
            k += 1
        writer.flush()
        store.close()
        progress(f"postgres: ledger of {writer.events_written:,} events")
        return url
