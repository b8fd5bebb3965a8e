"""2. In-process `record` latency against the size of the ledger, and against the length of
the run it records into.

Each measurement plans a fresh run from real files (8 cases) and records rounds into it
with `LedgerService.record`, timing only that call (writing the next round's files is not
timed). Repetitions alternate between the ledger sizes.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from benchmarks.campaign_files import FileCampaign
from benchmarks.common import Section, Series, goal, progress, ratios
from benchmarks.ledgers import Ledgers
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store


def _campaign(url: str, root: Path, run_id: str, rounds: int) -> tuple[float, list[float]]:
    """(plan seconds, per-round record seconds) for one fresh run."""
    store = Store(url)
    service = LedgerService(store)
    campaign = FileCampaign(root, run_id)
    config = campaign.config()
    start = time.perf_counter()
    service.plan(config)
    plan_seconds = time.perf_counter() - start
    latencies = []
    for _ in range(rounds):
        path, medians = campaign.next_round()
        start = time.perf_counter()
        result = service.record(run_id, path)
        latencies.append(time.perf_counter() - start)
        campaign.recorded(result.decision, medians)
    store.close()
    return plan_seconds, latencies


def measure(ledgers: Ledgers, work: Path, *, repeats: int, rounds: int, long_run: int) -> Section:
    sizes = ledgers.sizes
    record = {size: Series() for size in sizes}
    plan = {size: Series() for size in sizes}
    for rep in range(repeats):
        for size in sizes:
            progress(f"record: ledger of {size:,} events, repetition {rep + 1}")
            plan_s, latencies = _campaign(
                ledgers.url(size), work / f"record-{size}-{rep}", f"rec-{size}-{rep}", rounds
            )
            plan[size].add(plan_s * 1000)
            record[size].add(statistics.median(latencies) * 1000)
    empty, largest = sizes[0], sizes[-1]
    section = Section(key="record", title="Record cost against ledger size")
    section.intro = (
        f"`LedgerService.record` in-process, 8 cases per round; each repetition plans a new "
        f"run in every ledger and records {rounds} rounds into it; the figure per repetition "
        f"is the median of those {rounds} calls. Milliseconds, median [min-max] of {repeats} "
        "repetitions; the ratio to the empty ledger is taken within each repetition."
    )
    rows = []
    for size in sizes:
        ratio = ratios(record[size].values, record[empty].values)
        rows.append(
            [
                f"{ledgers.stats.copies.get(size, size):,}",
                plan[size].show("{:.1f}"),
                record[size].show("{:.1f}"),
                ratio.show("{:.2f}"),
            ]
        )
        section.figures[str(size)] = {
            "events": ledgers.stats.copies.get(size, size),
            "plan_ms": plan[size].as_dict(),
            "record_ms": record[size].as_dict(),
            "ratio_to_empty": ratio.as_dict(),
        }
    section.table(["ledger events", "plan (ms)", "record (ms)", "record / empty ledger"], rows)
    final = ratios(record[largest].values, record[empty].values).median
    section.notes.append(
        f"Goal at {ledgers.stats.copies.get(largest, largest):,} events: "
        f"{goal(final, 1.2, at_least=False)}."
    )

    progress(f"record: one run of {long_run} rounds")
    _, latencies = _campaign(ledgers.url(empty), work / "record-long", "rec-long", long_run)
    tenth = min(10, max(1, long_run // 10))  # the first and the last ten rounds
    first = statistics.median(latencies[:tenth]) * 1000
    last = statistics.median(latencies[-tenth:]) * 1000
    section.notes.append(
        f"Against the length of the run (one run of {long_run:,} rounds in the empty ledger, "
        "every round through `LedgerService.record`): "
        f"median record latency {first:.1f} ms over rounds 1-{tenth}, {last:.1f} ms over "
        f"rounds {long_run - tenth + 1:,}-{long_run:,} ({last / first:.2f}x; goal: flat)."
    )
    section.figures["run_length"] = {
        "rounds": long_run,
        "window": tenth,
        "first_ms": first,
        "last_ms": last,
        "ratio": last / first,
    }
    return section
