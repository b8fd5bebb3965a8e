"""The replay shared among worker processes reports exactly what the replay of every event
in one process reports: the same first failure (the one at the lowest seq), the same
events and runs checked before it, the same warnings, on intact and tampered ledgers, on
SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sqlite3
from pathlib import Path

import audit_kit
import pytest
from audit_kit import COLUMNS, consistent_rewrite, copy_ledger, read_events, swap
from test_audit_tamper import _byte_change, _field_change

from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.integrity import verify
from ledger.integrity.hashing import canonical
from ledger.integrity.verify import verify_ledger
from ledger.store.eventstore import Store

built = audit_kit.built  # two interleaved runs, a diagnosis, a profile, a conclusion
SEED = 20261203


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """Twelve runs with raw samples and profiles, some still open."""
    path = tmp_path_factory.mktemp("generated") / "ledger.sqlite3"
    store = Store(f"sqlite:///{path}")
    writer = BulkWriter(store, batch=150)
    generator = Generator(Shape(rounds=5, samples_every=3, samples=12, profile_every=2), "par")
    for k in range(12):
        writer.add(generator.run(k))
    writer.flush()
    store.close()
    return path


def _both(url: str) -> dict:
    """The report of one process and of three workers, which must be equal."""
    store = Store(url)
    try:
        alone = verify_ledger(store, workers=1).as_dict()
        shared = verify_ledger(store, workers=3).as_dict()
    finally:
        store.close()
    assert shared == alone
    return alone


def test_the_workers_really_replay_and_the_shares_cover_every_run(generated, built):
    for path in (generated, built.path):
        store = Store(f"sqlite:///{path}")
        with store.transaction() as conn:
            plan = verify._plan_shares(verify._read_spans(store, conn), 3)
        assert plan is not None
        shares = verify._replay_in_processes(store, plan, None)
        store.close()
        assert shares is not None
        runs = sum(len(share.first_seen) for share in shares)
        assert runs == len({e.stream_id for e in read_events(path)}) == len(plan.owner)
        assert all(share.failure is None and share.events == plan.snapshot[0] for share in shares)
        if path == generated:
            assert all(share.first_seen for share in shares)  # every worker had runs
            # each share reads its own stretch of the log, not the whole of it
            spans = [hi - lo + 1 for lo, hi in plan.spans]
            assert max(spans) < plan.snapshot[0]
    assert _both(f"sqlite:///{generated}")["status"] == "ok"
    assert _both(built.url)["status"] == "ok"


def test_a_ledger_that_moved_under_the_workers_is_replayed_in_one_process(generated, tmp_path):
    url = copy_ledger(generated, tmp_path / "moved.sqlite3")
    store = Store(url)
    with store.transaction() as conn:
        plan = verify._plan_shares(verify._read_spans(store, conn), 2)
        count = store.event_count(conn)
    assert plan is not None
    moved = dataclasses.replace(plan, snapshot=(count - 1, 1, count - 1))
    assert verify._replay_in_processes(store, moved, None) is None
    report = verify_ledger(store, workers=2)
    store.close()
    assert report.ok and report.events_checked == count


def _column_change(conn, events, rng) -> None:
    column = rng.choice(COLUMNS)
    e = rng.choice(events)
    old = getattr(e, column)
    for _ in range(20):
        new = (
            _byte_change(rng, old)
            if rng.random() < 0.5
            else _field_change(rng, column, old, events)
        )
        if new == old:
            continue
        try:
            conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (new, e.seq))
            return
        except sqlite3.IntegrityError:
            continue


def _gap(conn, events, rng) -> None:
    conn.execute("DELETE FROM events WHERE seq = ?", (rng.choice(events).seq,))


def _swap(conn, events, rng) -> None:
    a, b = rng.sample(range(1, len(events) + 1), 2)
    swap(conn, a, b)


def _projection(conn, events, rng) -> None:
    table, sets = rng.choice(
        [
            ("runs", "kept_rounds = kept_rounds + 1"),
            ("runs", "status = 'active', conclusion = NULL"),
            ("rounds", "decision = 'KEEP'"),
            ("run_cases", "best_median_us = best_median_us * 2"),
            ("profiles", "signals = '{}'"),
        ]
    )
    key = "rowid"
    rows = [r[0] for r in conn.execute(f"SELECT {key} FROM {table}")]
    if rows:
        conn.execute(f"UPDATE {table} SET {sets} WHERE {key} = ?", (rng.choice(rows),))


def _orphan_rows(conn, events, rng) -> None:
    run = rng.choice(events).stream_id
    conn.execute("DELETE FROM rounds WHERE run_id = ?", (run,))
    conn.execute("DELETE FROM run_cases WHERE run_id = ?", (run,))
    conn.execute("DELETE FROM profiles WHERE run_id = ?", (run,))
    conn.execute("DELETE FROM runs WHERE run_id = ?", (run,))


def _blob(conn, events, rng) -> None:
    digests = [r[0] for r in conn.execute("SELECT sha256 FROM blobs ORDER BY sha256")]
    digest = rng.choice(digests)
    if rng.random() < 0.5:
        conn.execute("DELETE FROM blobs WHERE sha256 = ?", (digest,))
    else:
        conn.execute("UPDATE blobs SET content = content || x'0a' WHERE sha256 = ?", (digest,))
        conn.execute("UPDATE blobs SET size = length(content) WHERE sha256 = ?", (digest,))


def _storage_type(conn, events, rng) -> None:
    """A payload stored as text: found by the storage check, which the parent process makes
    while the workers replay, and which comes before any replay finding."""
    seq = rng.choice(events).seq
    conn.execute("UPDATE events SET payload = CAST(payload AS TEXT) WHERE seq = ?", (seq,))


def _storage_and_later_faults(conn, events, rng) -> None:
    _blob(conn, events, rng)
    _projection(conn, events, rng)
    _storage_type(conn, events, rng)


def _two_at_once(conn, events, rng) -> None:
    """Two damaged runs: the first failure by seq must win in every share."""
    for _ in range(2):
        _column_change(conn, events, rng)


CHANGES = [
    _column_change,
    _gap,
    _swap,
    _projection,
    _orphan_rows,
    _blob,
    _two_at_once,
    _storage_type,
    _storage_and_later_faults,
]


@pytest.mark.parametrize("source", ["generated", "built"])
def test_every_tampering_gets_the_same_report_from_one_process_and_from_workers(
    source, generated, built, tmp_path
):
    path = generated if source == "generated" else built.path
    events = read_events(path)
    rng = random.Random(SEED + len(source))
    seen = set()
    for trial in range(3 * len(CHANGES)):
        change = CHANGES[trial % len(CHANGES)]
        url = copy_ledger(path, tmp_path / f"{source}-{trial}.sqlite3")
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        with conn:
            change(conn, events, rng)
        conn.close()
        report = _both(url)
        if report["first_failure"]:
            seen.add(report["first_failure"]["check"])
    assert {"hash", "projection", "blobs", "payload"} <= seen


def test_a_forged_decision_rehashed_consistently_is_found_by_workers_too(built, tmp_path):
    path = tmp_path / "forged.sqlite3"
    copy_ledger(built.path, path)
    events = read_events(path)
    decided = next(i for i, e in enumerate(events) if e.event_type == "RoundDecided")

    def forge(e):
        payload = json.loads(e.payload)
        payload["decision"] = "KEEP" if payload["decision"] != "KEEP" else "DISCARD"
        return {"payload": canonical(payload)}

    consistent_rewrite(path, decided, forge)
    report = _both(f"sqlite:///{path}")
    assert report["first_failure"]["check"] == "replay"
    assert report["first_failure"]["seq"] == events[decided].seq


def test_postgresql_workers_report_as_one_process(db_url: str, tmp_path):
    store = Store(db_url)
    writer = BulkWriter(store, batch=100)
    generator = Generator(Shape(rounds=4, samples_every=2, samples=12), prefix="pg")
    for k in range(6):
        writer.add(generator.run(k))
    writer.flush()
    with store.transaction(write=True) as conn:
        conn.exec_driver_sql("UPDATE rounds SET decision = 'KEEP' WHERE round = 3")
    store.close()
    report = _both(db_url)
    assert report["first_failure"]["check"] == "projection"


def _recorded_under_older_numpy(path: Path, count: int) -> list[int]:
    """Rewrite (as a careful forger would) the first sample-based decision of `count` runs
    as if recorded under another numpy with slightly other figures: the replay then warns
    instead of failing. Returns the seqs of the rewritten decisions."""
    done: list[int] = []
    runs: set[str] = set()
    for index, e in enumerate(read_events(path)):
        if len(done) == count:
            break
        if e.event_type != "RoundDecided" or e.stream_id in runs:
            continue
        payload = json.loads(e.payload)
        stats = payload.get("statistics")
        if not stats or "improvement_lower" not in stats:
            continue

        def older(event, payload=payload):
            stats = dict(payload["statistics"], numpy_version="1.0.0")
            stats["improvement_lower"] = stats["improvement_lower"] * (1 + 1e-9)
            return {"payload": canonical({**payload, "statistics": stats})}

        consistent_rewrite(path, index, older)
        runs.add(e.stream_id)
        done.append(e.seq)
    return done


def test_warnings_come_in_the_order_and_up_to_the_failure_of_one_process(generated, tmp_path):
    path = tmp_path / "drift.sqlite3"
    copy_ledger(generated, path)
    drifted = _recorded_under_older_numpy(path, 3)
    assert len(drifted) == 3
    report = _both(f"sqlite:///{path}")
    assert report["status"] == "ok" and len(report["warnings"]) == 3
    assert [w.split(":")[0] for w in report["warnings"]] == [f"seq {s}" for s in drifted]
    # a failure between the second and third warning, in a run another worker replays than
    # the third warning's: that worker goes on past the failure, and its warning must not count
    events = read_events(path)
    third = next(e.stream_id for e in events if e.seq == drifted[2])
    store = Store(f"sqlite:///{path}")
    with store.transaction() as conn:
        plan = verify._plan_shares(verify._read_spans(store, conn), 3)
    store.close()
    assert plan is not None
    bad = next(
        e.seq
        for e in events
        if drifted[1] < e.seq < drifted[2] and plan.owner[e.stream_id] != plan.owner[third]
    )
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET event_hash = ? WHERE seq = ?", ("0" * 64, bad))
    report = _both(f"sqlite:///{path}")
    assert report["first_failure"]["seq"] == bad
    assert [w.split(":")[0] for w in report["warnings"]] == [f"seq {s}" for s in drifted[:2]]


def test_busy_cpus_reads_the_kernels_counters():
    busy = verify.busy_cpus(window=0.02)
    if busy is None:  # no /proc/stat here
        pytest.skip("no CPU time counters on this system")
    assert 0.0 <= busy <= len(os.sched_getaffinity(0))


def test_busy_cpus_leave_out_this_process_own_work(monkeypatch):
    """Half of 2 CPUs' time was busy while this process used 0.5 CPU itself (reading the
    runs' spans, say): 0.5 CPU was busy with other work."""
    start = verify.CpuSample(ticks=1000, idle=400, own=1.0, at=0.0)
    end = verify.CpuSample(ticks=1020, idle=410, own=1.05, at=0.1)
    monkeypatch.setattr(verify, "cpu_sample", lambda: end)
    monkeypatch.setattr(verify, "_cpus", lambda: 2)
    assert verify.busy_cpus(start) == pytest.approx(0.5)
    quiet = verify.CpuSample(ticks=1020, idle=420, own=1.05, at=0.1)  # all idle but ours
    monkeypatch.setattr(verify, "cpu_sample", lambda: quiet)
    assert verify.busy_cpus(start) == 0.0


def test_how_many_workers(monkeypatch):
    from ledger.errors import InputError

    monkeypatch.delenv("KERNEL_LEDGER_VERIFY_WORKERS", raising=False)
    assert verify.worker_count(None, verify.PARALLEL_MIN_EVENTS - 1) == 1
    assert 1 <= verify.worker_count(None, verify.PARALLEL_MIN_EVENTS) <= 8
    monkeypatch.setattr(verify.os, "sched_getaffinity", lambda pid: set(range(4)))
    for busy, workers in ((0.0, 4), (0.6, 3), (2.2, 2), (3.9, 1), (9.0, 1)):
        monkeypatch.setattr(verify, "busy_cpus", lambda since=None, busy=busy: busy)
        assert verify.replay_workers() == workers  # the idle CPUs, at least one
    monkeypatch.setattr(
        verify, "busy_cpus", lambda since=None: None
    )  # no CPU counters: load average
    monkeypatch.setattr(verify.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert verify.replay_workers() == 4  # every CPU idle
    monkeypatch.setattr(verify.os, "getloadavg", lambda: (3.2, 0.0, 0.0))
    assert verify.replay_workers() == 2  # this process and one more CPU are idle
    monkeypatch.setattr(verify.os, "getloadavg", lambda: (9.0, 0.0, 0.0))
    assert verify.replay_workers() == 1  # a busy machine: replayed here alone
    monkeypatch.setenv("KERNEL_LEDGER_VERIFY_WORKERS", "3")
    assert verify.worker_count(None, 10) == 3  # asked for: whatever the size
    assert verify.worker_count(1, 10**6) == 1  # the caller's number first
    for bad in ("0", "65", "two", "-1", ""):
        monkeypatch.setenv("KERNEL_LEDGER_VERIFY_WORKERS", bad)
        with pytest.raises(InputError, match="KERNEL_LEDGER_VERIFY_WORKERS"):
            verify.replay_workers()
