"""3 (and 7). Verification speed and memory against reading and hashing every row.

Three ways over the same ledger, each in its own process (so peak RSS belongs to it alone):
  floor   the driver reads every row in seq order and SHA-256-hashes its payload and
          identity bytes in a tight loop
  chain   `verify --chain` (`ledger.integrity.verify.verify_chain`): the seq, hash and chain checks
          over the stored rows in pages, the event hash recomputed over the stored bytes,
          versions contiguous, parent hashes linked
  replay  `verify` (`verify_ledger`): every check, including re-canonicalizing and
          re-validating every payload, re-deciding every round and comparing the projections

Peak RSS is the child's own high-water mark (VmHWM), and the child does nothing but open
the store and run its one check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import ROOT, Section, Series, goal, progress, ratios, rss_mib

MODES = ("floor", "chain", "replay")


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


def _replay(url: str) -> int:
    from ledger.integrity.verify import verify_ledger
    from ledger.store.eventstore import Store

    store = Store(url)
    report = verify_ledger(store)
    store.close()
    if not report.ok:
        raise SystemExit(f"verify failed: {report.as_dict()['first_failure']}")
    return report.events_checked


def child(mode: str, url: str) -> dict[str, Any]:

    if not url.startswith("sqlite"):
        import psycopg  # noqa: F401
    start = time.perf_counter()
    count = {"floor": _floor, "chain": _chain, "replay": _replay}[mode](url)
    seconds = time.perf_counter() - start
    return {"mode": mode, "events": count, "seconds": seconds, "rss_mib": rss_mib()}


def run_child(mode: str, url: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_verify", mode, url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"verify benchmark ({mode}) failed: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def measure(
    targets: list[tuple[str, str]], *, repeats: int, replay_repeats: int, title: str, key: str
) -> Section:
    """`targets`: (label, url) of the ledgers to verify, smallest first."""
    section = Section(key=key, title=title)
    rows = []
    for label, url in targets:
        rate = {mode: Series() for mode in MODES}
        rss = {mode: Series() for mode in MODES}
        events = 0
        for rep in range(repeats):
            for mode in MODES:
                if mode == "replay" and rep >= replay_repeats:
                    continue
                progress(f"{key}: {mode} over {label}, repetition {rep + 1}")
                result = run_child(mode, url)
                events = result["events"]
                rate[mode].add(result["events"] / result["seconds"])
                rss[mode].add(result["rss_mib"])
        floor = rate["floor"].values
        chain_ratio = ratios(rate["chain"].values, floor)
        replay_ratio = ratios(rate["replay"].values, floor[: len(rate["replay"].values)])
        rows.append(
            [
                f"{events:,}",
                rate["floor"].show(),
                rate["chain"].show(),
                chain_ratio.show("{:.2f}"),
                rate["replay"].show(),
                replay_ratio.show("{:.3f}"),
                f"{rss['floor'].median:.0f} / {rss['chain'].median:.0f} / "
                f"{rss['replay'].median:.0f}",
            ]
        )
        section.figures[label] = {
            "events": events,
            **{f"{m}_events_per_s": rate[m].as_dict() for m in MODES},
            **{f"{m}_rss_mib": rss[m].as_dict() for m in MODES},
            "chain_ratio": chain_ratio.as_dict(),
            "replay_ratio": replay_ratio.as_dict(),
        }
        last_chain = chain_ratio.median
    section.intro = (
        "Events per second, median [min-max] of "
        f"{repeats} repetitions ({replay_repeats} for the full replay); each figure in its "
        "own process; ratios to the floor taken within each repetition. Peak RSS in MiB."
    )
    section.table(
        [
            "events",
            "floor: read + SHA-256",
            "chain check",
            "chain / floor",
            "full replay",
            "replay / floor",
            "peak RSS floor / chain / replay",
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
