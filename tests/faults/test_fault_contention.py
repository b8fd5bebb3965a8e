"""Contention: a writer blocked by another gives up within the busy timeout plus one second
with exit 3, never a hang or a traceback; 8 processes mixing record, analyze, verify and
history on one ledger (8 s on SQLite and 5 s on PostgreSQL in `make test`, 60 s each in
`make faults`) see only exit codes 0 and 3, or 2 where their input went stale, and
`verify` passes afterwards (and every time it ran meanwhile)."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from faultkit import (
    HERE,
    ROOT,
    Files,
    cli,
    kl,
    one_line_error,
    record_figures,
    scale,
    sqlite_file,
    write_json,
)

from ledger.services.service import LedgerService
from ledger.store.engine import PG_APPEND_LOCK
from ledger.store.eventstore import Store

BUSY_TIMEOUT = 1.0
STALE = ("is out of order", "stale parent", "has concluded", "round budget exhausted")


class LockHolder:
    """Another writer that holds the ledger's write lock: BEGIN IMMEDIATE on SQLite, the
    append advisory lock on PostgreSQL."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self.conn = None

    def __enter__(self) -> LockHolder:
        if self.db_url.startswith("sqlite"):
            self.conn = sqlite3.connect(sqlite_file(self.db_url), isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            import psycopg
            from sqlalchemy.engine import make_url

            url = make_url(self.db_url)
            self.conn = psycopg.connect(
                host=url.host, port=url.port, user=url.username, dbname=url.database
            )
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (PG_APPEND_LOCK,))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.conn is not None
        self.conn.rollback()
        self.conn.close()


def test_blocked_writer_gives_up_in_time(db_url: str, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("KERNEL_LEDGER_BUSY_TIMEOUT", str(BUSY_TIMEOUT))
    files = Files(tmp_path / "files")
    assert cli("plan", "--config", files.config("busy-001", tmp_path), db=db_url).code == 0
    round_1 = write_json(
        tmp_path / "round-1.json", files.round_doc(1, files.kernel_sha, candidate=0)
    )
    writers = {
        "record": ["record", "--run", "busy-001", "--result", round_1, "--json"],
        "plan": ["plan", "--config", files.config("busy-002", tmp_path), "--json"],
        "analyze": ["analyze", "--run", "busy-001", "--output-dir", tmp_path / "out", "--json"],
    }
    readers = {
        "status": ["status", "--json"],
        "history": ["history", "--json"],
        "verify": ["verify", "--json"],
    }
    waited = {}
    with LockHolder(db_url):
        for name, args in writers.items():
            result = cli(*args, db=db_url)
            assert result.code == 3, (name, result.stderr)
            assert one_line_error(result.stderr, result.stdout) and "busy" in result.said, (
                result.stderr
            )
            assert json.loads(result.stdout)["exit_code"] == 3
            # it waited the busy timeout, then gave up (the bound only says "no hang":
            # a loaded machine stretches a process's start, not the wait)
            assert result.seconds >= BUSY_TIMEOUT * 0.9, (name, result.seconds)
            assert result.seconds < BUSY_TIMEOUT + 60, (name, result.seconds)
            waited[name] = round(result.seconds, 3)
        for name, args in readers.items():  # readers are not blocked by a writer
            result = cli(*args, db=db_url)
            assert result.code == 0, (name, result.stderr)  # a blocked one would exit 3
        # the same from a separate process: exit 3 and one line, no hang, no traceback
        blocked = kl(*writers["record"], db=db_url, env={"KERNEL_LEDGER_BUSY_TIMEOUT": "1"})
        assert blocked.code == 3 and one_line_error(blocked.stderr, blocked.stdout), blocked.stderr
    assert cli(*writers["record"], db=db_url).code == 0  # the lock is gone: it records
    backend = db_url.split(":", 1)[0].split("+", 1)[0]
    record_figures(
        f"contention[blocked writer, {backend}]",
        busy_timeout_s=BUSY_TIMEOUT,
        waited_s=waited,
        separate_process_s=round(blocked.seconds, 2),
    )


def test_eight_processes_mixing_commands(db_url: str, tmp_path: Path):
    backend = db_url.split(":", 1)[0].split("+", 1)[0]
    seconds = scale(8, 60) if backend == "sqlite" else scale(5, 60)
    db = db_url
    files = Files(tmp_path / "files")
    runs = [f"mix-{i:03d}" for i in range(6)]
    for run_id in runs:
        config = files.config(run_id, tmp_path, max_rounds=500)
        assert cli("plan", "--config", config, db=db).code == 0
    procs = []
    for worker in range(8):
        out = tmp_path / f"worker-{worker}.json"
        command = [
            sys.executable,
            str(HERE / "mixer.py"),
            "--db",
            db,
            "--files",
            str(tmp_path / "files"),
            "--work",
            str(tmp_path / f"worker-{worker}"),
            "--runs",
            ",".join(runs),
            "--conclude",
            ",".join(runs[-2:]),
            "--seconds",
            str(seconds),
            "--seed",
            str(worker),
            "--out",
            str(out),
        ]
        procs.append((subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True), out))
    outcomes = []
    for proc, out in procs:
        try:
            _, err = proc.communicate(timeout=seconds + 180)
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail("a mixing process hung")
        assert proc.returncode == 0, err[-2000:]
        outcomes.extend(json.loads(out.read_text()))
    tally: Counter = Counter()
    for item in outcomes:
        action, code, error = item["action"], item["code"], item["error"]
        tally[f"{action}:{code}"] += 1
        assert not item["traceback"], item
        if code == 0:
            continue
        assert item["lines"] == 1 and error.startswith("Error: "), item
        stale = action == "record" and code == 2 and any(s in error for s in STALE)
        assert code == 3 or stale, item
        # a writer gives up within the busy timeout (5 s) plus one second, with slack for
        # the work around the wait on 2 busy cores
        assert item["seconds"] < 5 + 1 + 4, item
    assert tally["record:0"] > 0
    verify = kl("verify", "--json", db=db)
    assert verify.code == 0, verify.stdout + verify.stderr
    report = verify.json()
    history = kl("history", "--json", db=db).json()
    assert history["count"] == tally["record:0"]  # every acknowledged round, no other
    record_figures(
        f"contention[8 processes, {backend}]",
        seconds=seconds,
        commands=len(outcomes),
        outcomes=dict(sorted(tally.items())),
        events_verified=report["events_checked"],
        slowest_s=max(item["seconds"] for item in outcomes),
    )


def test_many_writers_create_one_ledger(tmp_path: Path):
    """First use by many processes at once: every one opens the same new ledger (it is
    built beside its path and linked into place), every plan lands in it, nothing is left
    over."""
    path = tmp_path / "new" / "ledger.sqlite3"
    url = f"sqlite:///{path}"
    files = Files(tmp_path / "files")
    configs = [files.config(f"first-{i:02d}", tmp_path) for i in range(8)]
    context = multiprocessing.get_context("fork")
    go = context.Event()

    def first_use(config: Path) -> None:
        go.wait(30)
        store = Store(url)
        try:
            LedgerService(store).plan(config)
        finally:
            store.close()

    procs = [context.Process(target=first_use, args=(c,)) for c in configs]
    for proc in procs:
        proc.start()
    go.set()
    for proc in procs:
        proc.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * len(procs)
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.sqlite3"]
    status = cli("status", "--json", db=url)
    assert sorted(r["run_id"] for r in status.json()["runs"]) == [
        f"first-{i:02d}" for i in range(8)
    ]
    assert cli("verify", db=url).code == 0
