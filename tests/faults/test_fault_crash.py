"""Crash: kill -9 writers at random moments during appends (50 times in `make test`, 1,000
in `make faults`). Every append a writer acknowledged is present with the same hash, no
batch is partly stored, nothing appears that no writer tried to append, SQLite's
`PRAGMA integrity_check` is ok and `kernel-ledger verify` passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from faultkit import HERE, ROOT, event_rows, integrity_check, kl, record_figures, scale, sqlite_file


def run_crashes(db_url: str, work: Path, kills: int, seed: int, max_delay_ms: int) -> dict:
    report = work / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "crash_writer.py"),
            "--db",
            db_url,
            "--work",
            str(work),
            "--kills",
            str(kills),
            "--seed",
            str(seed),
            "--max-delay-ms",
            str(max_delay_ms),
            "--report",
            str(report),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(report.read_text())


def check_after_crashes(db_url: str, result: dict) -> dict:
    assert result["errors"] == [], result["errors"][:5]
    stored = event_rows(db_url)
    # 1. every acknowledged event is present, unchanged
    for event_id, event_hash, stream_id, version, seq in result["acked"]:
        assert stored.get(event_id) == (event_hash, stream_id, version, seq), event_id
    # 2. a batch in flight at the kill is stored whole or not at all
    committed_in_flight = 0
    for batch in result["in_flight"]:
        present = [i for i in batch["ids"] if i in stored]
        assert len(present) in (0, len(batch["ids"])), batch
        committed_in_flight += bool(present)
    # 3. nothing else: every stored event was acknowledged or was in a batch in flight
    known = {row[0] for row in result["acked"]}
    known |= {i for batch in result["in_flight"] for i in batch["ids"]}
    assert set(stored) <= known, sorted(set(stored) - known)[:5]
    # 4. seq is gapless
    assert sorted(row[3] for row in stored.values()) == list(range(1, len(stored) + 1))
    # 5. the verifier agrees (chains, replayed decisions, projections, blobs)
    verify = kl("verify", "--json", db=db_url)
    assert verify.code == 0, verify.stdout + verify.stderr
    assert verify.json()["events_checked"] == len(stored)
    return {
        "kills": result["kills"],
        "kills_with_append_in_flight": result["kills_in_flight"],
        "kills_inside_write_transaction": result["kills_in_transaction"],
        "in_flight_batches_committed": committed_in_flight,
        "in_flight_batches_rolled_back": len(result["in_flight"]) - committed_in_flight,
        "acknowledged_events": len(result["acked"]),
        "stored_events": len(stored),
        "lost": 0,
        "partial_batches": 0,
        "seconds": result["seconds"],
    }


def test_kill_nine_during_appends(db_url: str, tmp_path: Path):
    backend = db_url.split(":", 1)[0].split("+", 1)[0]
    kills = scale(50, 1000) if backend == "sqlite" else scale(25, 300)
    # a writer takes longer to connect to PostgreSQL: wait longer, to kill it mid-append
    delay = 120 if backend == "sqlite" else 300
    result = run_crashes(db_url, tmp_path / "work", kills, seed=kills, max_delay_ms=delay)
    assert result["kills_in_transaction"] > 0, "no kill landed inside a write transaction"
    figures = check_after_crashes(db_url, result)
    if backend == "sqlite":
        assert integrity_check(sqlite_file(db_url)) == "ok"
    record_figures(f"crash[{backend}]", **figures)
