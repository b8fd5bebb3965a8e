"""3 (and 7). Verification speed and memory against reading and hashing every row.

Three ways over the same ledger, each in its own process (so peak RSS belongs to it alone):
  floor   the driver reads every row in seq order and SHA-256-hashes its payload and
          identity bytes in a tight loop
  chain   `verify --chain` (`ledger.integrity.verify.verify_chain`): the seq, hash and chain checks
          over the stored rows in pages, the event hash recomputed over the stored bytes,
          versions contiguous, parent hashes linked
  replay  `verify` (`verify_ledger`): every check, including re-canonicalizing and
          re-validating every payload, re-deciding every round and comparing the projections;
          as the command runs it: a ledger of 20,000 events or more is shared among worker
          processes, one per CPU (at most 8)
  replay1 the same in one process (`workers=1`, KERNEL_LEDGER_VERIFY_WORKERS=1)

Peak RSS is the child's own high-water mark (VmHWM), and the child does nothing but open
the store and run its one check (with workers: the parent's, which holds no run; each worker
holds the runs of its share).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from typing import Any

from benchmarks.common import ROOT, Section, Series, goal, progress, python_json, ratios, rss_mib

MODES = ("floor", "chain", "replay1", "replay")


def _floor(url: str) -> int:
    if url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        cursor = conn.execute(
            "SELECT seq, event_id, stream_id, stream_version, event_type, schema_version, "
            "recorded_at, payload, parent_hash, event_hash FROM events ORDER BY seq"
        )
    else:
        import psycopg
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        conn = psycopg.connect(
            host=parsed.host, port=parsed.port, user=parsed.username, dbname=parsed.database
        )
        cursor = conn.cursor(name="floor")  # server-side: streamed, like the store's pages
        cursor.itersize = 2000
        cursor.execute(
            "SELECT seq, event_id, stream_id, stream_version, event_type, schema_version, "
            "recorded_at, payload, parent_hash, event_hash FROM events ORDER BY seq"
        )
    sha256 = hashlib.sha256
    count = 0
    for row in cursor:
        digest = sha256(row[7])
        digest.update(f"{row[1]}{row[2]}{row[3]}{row[4]}{row[5]}{row[6]}{row[8]}".encode())
        digest.hexdigest()
        count += 1
    conn.close()
    return count


def _chain(url: str) -> int:
    from ledger.integrity.verify import verify_chain
    from ledger.store.eventstore import Store

    store = Store(url)
    report = verify_chain(store)
    store.close()
    if not report.ok:
        raise SystemExit(f"verify --chain failed: {report.as_dict()['first_failure']}")
    return report.events_checked


WORKERS: list[int] = []  # how many processes the replay ran in


def _replay(url: str, workers: int | None = None) -> int:
    from ledger.integrity.verify import verify_ledger, worker_count
    from ledger.store.eventstore import Store

    store = Store(url)
    with store.transaction() as conn:
        total = store.event_count(conn)
    WORKERS.append(worker_count(workers, total))  # as verify decides it: idle CPUs, now
    report = verify_ledger(store, workers=WORKERS[-1])
    store.close()
    if not report.ok:
        raise SystemExit(f"verify failed: {report.as_dict()['first_failure']}")
    return report.events_checked


def _replay_one_process(url: str) -> int:
    return _replay(url, workers=1)


def child(mode: str, url: str) -> dict[str, Any]:
    import ledger.integrity.verify
    import ledger.store.eventstore  # noqa: F401  (imports are not what is measured)

    if not url.startswith("sqlite"):
        import psycopg  # noqa: F401
    start = time.perf_counter()
    count = {
        "floor": _floor,
        "chain": _chain,
        "replay1": _replay_one_process,
        "replay": _replay,
    }[mode](url)
    seconds = time.perf_counter() - start
    return {
        "mode": mode,
        "events": count,
        "seconds": seconds,
        "rss_mib": rss_mib(),
        "workers": WORKERS[-1] if WORKERS else None,
    }


def run_child(mode: str, url: str) -> dict[str, Any]:
    return python_json(
        ["-m", "benchmarks.bench_verify", mode, url], cwd=ROOT, what=f"verify benchmark ({mode})"
    )


def measure(
    targets: list[tuple[str, str]], *, repeats: int, replay_repeats: int, title: str, key: str
) -> Section:
    """`targets`: (label, url) of the ledgers to verify, smallest first."""
    from ledger.integrity.verify import PARALLEL_MIN_EVENTS

    section = Section(key=key, title=title)
    rows = []
    for label, url in targets:
        rate = {mode: Series() for mode in MODES}
        rss = {mode: Series() for mode in MODES}
        events = 0
        workers: list[int] = []
        for rep in range(repeats):
            for mode in MODES:
                if mode.startswith("replay") and rep >= replay_repeats:
                    continue
                progress(f"{key}: {mode} over {label}, repetition {rep + 1}")
                result = run_child(mode, url)
                events = result["events"]
                rate[mode].add(result["events"] / result["seconds"])
                rss[mode].add(result["rss_mib"])
                if mode == "replay":
                    workers.append(result["workers"])
        floor = rate["floor"].values
        chain_ratio = ratios(rate["chain"].values, floor)
        replayed = len(rate["replay"].values)
        one_ratio = ratios(rate["replay1"].values, floor[:replayed])
        replay_ratio = ratios(rate["replay"].values, floor[:replayed])
        speedup = ratios(rate["replay"].values, rate["replay1"].values)
        shared = ", ".join(map(str, workers))
        rows.append(
            [
                f"{events:,}",
                rate["floor"].show(),
                rate["chain"].show(),
                chain_ratio.show("{:.2f}"),
                rate["replay1"].show(),
                one_ratio.show("{:.3f}"),
                f"{rate['replay'].show()} ({shared})",
                replay_ratio.show("{:.3f}"),
                speedup.show("{:.2f}"),
                " / ".join(f"{rss[m].median:.0f}" for m in MODES),
            ]
        )
        section.figures[label] = {
            "events": events,
            "replay_workers": workers,
            **{f"{m}_events_per_s": rate[m].as_dict() for m in MODES},
            **{f"{m}_rss_mib": rss[m].as_dict() for m in MODES},
            "chain_ratio": chain_ratio.as_dict(),
            "replay_one_process_ratio": one_ratio.as_dict(),
            "replay_ratio": replay_ratio.as_dict(),
            "replay_workers_speedup": speedup.as_dict(),
        }
        last_chain = chain_ratio.median
    section.intro = (
        "Events per second, median [min-max] of "
        f"{repeats} repetitions ({replay_repeats} for each full replay); each figure in its "
        "own process; ratios to the floor taken within each repetition. The full replay in "
        "one process (`workers=1`), and as `verify` runs it: a ledger of "
        f"{PARALLEL_MIN_EVENTS:,} events or more shared among worker processes, one per idle "
        "CPU when it starts (the CPUs less those busy over 50 ms, from the kernel's CPU "
        "time counters; how many in parentheses), each replaying the runs that begin in its "
        "part of the log and reading only that stretch. Peak RSS in MiB (of the process "
        "the figure was taken in; with workers, the parent's)."
    )
    section.table(
        [
            "events",
            "floor: read + SHA-256",
            "chain check",
            "chain / floor",
            "full replay, one process",
            "/ floor",
            "full replay (workers)",
            "/ floor",
            "workers / one process",
            "peak RSS floor / chain / replay, one process / workers",
        ],
        rows,
    )
    section.notes.append(f"Chain-check goal at the largest ledger: {goal(last_chain, 0.5)}.")
    return section


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("url")
    args = parser.parse_args()
    sys.stdout.write(json.dumps(child(args.mode, args.url)) + "\n")
