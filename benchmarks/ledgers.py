"""Large ledgers for the benchmarks, generated through the real append path.

One ledger file grows run by run (`workload.BulkWriter`, ~1,000-event transactions); when it
passes each requested size a copy is kept, so every size is available at once and the
measurements can alternate between them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import copy_sqlite, progress, remove_sqlite, sqlite_url
from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.store.eventstore import Store


@dataclass
class BuildStats:
    events: int = 0
    runs: int = 0
    seconds: float = 0.0
    generate_seconds: float = 0.0
    write_seconds: float = 0.0
    copies: dict[int, int] = field(default_factory=dict)  # requested size -> actual events


class Ledgers:
    """Ledgers of (about) the requested sizes in events; size 0 is an empty ledger."""

    def __init__(self, folder: Path, sizes: list[int], *, shape: Shape, distinct: int) -> None:
        self.folder = folder
        self.sizes = sorted(set(sizes))
        self.shape = shape
        self.distinct = distinct
        self.paths: dict[int, Path] = {}
        self.stats = BuildStats()

    def build(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        largest = self.sizes[-1]
        main = self.folder / f"ledger-{largest}.sqlite3"
        remove_sqlite(main)
        generator = Generator(self.shape, prefix="hist", distinct=self.distinct)
        store = Store(sqlite_url(main))
        writer = BulkWriter(store, batch=1000)
        started = time.perf_counter()
        k = 0
        for size in self.sizes:
            while writer.events_written + writer.pending_events < size:
                t0 = time.perf_counter()
                run = generator.run(k)
                t1 = time.perf_counter()
                writer.add(run)
                self.stats.generate_seconds += t1 - t0
                self.stats.write_seconds += time.perf_counter() - t1
                k += 1
                if k % 2000 == 0:
                    progress(f"ledgers: {writer.events_written:,} events written")
            t0 = time.perf_counter()
            writer.flush()
            self.stats.write_seconds += time.perf_counter() - t0
            self.stats.copies[size] = writer.events_written
            if size == largest:
                self.paths[size] = main
            else:
                store.close()
                copy = self.folder / f"ledger-{size}.sqlite3"
                copy_sqlite(main, copy)
                self.paths[size] = copy
                store = Store(sqlite_url(main))
                writer.store = store
        store.close()
        self.stats.events = writer.events_written
        self.stats.runs = k
        self.stats.seconds = time.perf_counter() - started

    def url(self, size: int) -> str:
        return sqlite_url(self.paths[size])

    def largest(self) -> int:
        return self.sizes[-1]

    def note(self) -> str:
        s = self.stats
        rate = s.events / s.write_seconds if s.write_seconds else 0.0
        copies = ", ".join(f"{n:,}" for n in s.copies.values())
        return (
            f"The ledgers ({copies} events; {s.runs:,} runs of {self.shape.rounds} rounds, "
            f"{self.distinct} distinct run histories replayed under new run ids and times) "
            f"were generated in {s.seconds:.0f} s: {s.generate_seconds:.0f} s building event "
            f"objects with the controller's own decision function, {s.write_seconds:.0f} s "
            f"appending through `Store.append`, the projection fold and `save_view` "
            f"({rate:,.0f} events/s, ~1,000-event transactions)."
        )
