"""Shared pieces of the audit tests: a realistic ledger (two interleaved runs with a
diagnosis, a profile, every decision and a conclusion), copies of it with the database's
guards dropped, and a consistent rewrite of the history."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from ledger.integrity import audit
from ledger.integrity.hashing import event_hash
from ledger.integrity.verify import rebuild_projections
from ledger.services.analysis import analyze
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store, StoredEvent

from campaign import Campaign

COLUMNS = (
    "seq",
    "event_id",
    "stream_id",
    "stream_version",
    "event_type",
    "schema_version",
    "recorded_at",
    "payload",
    "parent_hash",
    "event_hash",
    "actor",
)


class Clock:
    """A deterministic clock: one second per call."""

    def __init__(self) -> None:
        self.tick = 0

    def __call__(self) -> str:
        self.tick += 1
        return f"2026-11-02T10:{self.tick // 60:02d}:{self.tick % 60:02d}.000000Z"


@dataclass
class Built:
    url: str
    path: Path
    runs: dict[str, Campaign]


def record(service: LedgerService, campaign: Campaign, medians, **kwargs) -> str:
    status = "failed" if medians is None else "passed"
    if campaign.run_id.startswith("softmax-b"):  # run B's kernels differ from run A's
        kwargs["body"] = f"# run b, round {campaign.rounds_written + 1}\nBLOCK = 7\n"
    result = service.record(campaign.run_id, campaign.round(medians, status=status, **kwargs))
    campaign.accepted(result.decision, result.round)
    return result.decision


def build_ledger(root: Path, *, conclude: bool = True, url: str | None = None) -> Built:
    """Two runs whose events interleave in the log: run A keeps, discards, notes noise,
    fails and keeps again (then concludes passed); run B fails three times, is diagnosed,
    and keeps once. On a SQLite file under `root` unless `url` names a ledger."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "ledger.sqlite3"
    url = url or f"sqlite:///{path}"
    store = Store(url)
    service = LedgerService(store, clock=Clock())
    a = Campaign(root / "run-a", run_id="softmax-a-001")
    b = Campaign(root / "run-b", run_id="softmax-b-001", max_rounds=8)
    b.best_kernel = b.kernel("v0.py", "# run b, the starting kernel\nBLOCK = 64\n")
    service.plan(a.config())
    service.plan(b.config())
    decisions = [
        record(service, a, [16.0, 37.0, 23.0]),
        record(service, b, None),
        record(
            service,
            a,
            [15.0, 37.0, 26.0],
            profiler_signals={"aiv_vec_ratio": 0.54, "aiv_scalar_ratio": 0.12},
        ),
        record(service, b, None),
        record(service, a, [16.01, 37.0, 23.0]),
        record(service, b, None),
    ]
    service.diagnose(b.run_id, "memory-transfer", "MTE2 ratio 0.71 while the vector pipe idles")
    decisions += [
        record(service, a, None),
        record(service, b, [17.0, 38.0, 24.0]),
        record(service, a, [14.0, 33.0, 21.0]),
    ]
    assert decisions == ["KEEP", "FAIL", "DISCARD", "FAIL", "NOISE", "FAIL", "FAIL", "KEEP", "KEEP"]
    if conclude:
        analyze(service, a.run_id, root / "analysis-a")
    store.close()
    return Built(url, path, {a.run_id: a, b.run_id: b})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """The realistic ledger, built once per test module; tests work on copies of it."""
    return build_ledger(tmp_path_factory.mktemp("built"))


def copy_ledger(source: Path, target: Path, *, drop_guards: bool = True) -> str:
    """A page-by-page copy of a SQLite ledger; with `drop_guards`, its append-only
    triggers are dropped, as someone with write access to the file could."""
    target.parent.mkdir(parents=True, exist_ok=True)
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    with dst:
        src.backup(dst)
    src.close()
    if drop_guards:
        names = [r[0] for r in dst.execute("SELECT name FROM sqlite_master WHERE type='trigger'")]
        for name in names:
            dst.execute(f"DROP TRIGGER {name}")
        dst.commit()
    dst.close()
    return f"sqlite:///{target}"


def read_events(path: Path) -> list[StoredEvent]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM events ORDER BY seq").fetchall()
    return [StoredEvent(*r[:7], bytes(r[7]), *r[8:]) for r in rows]


def rehash(e: StoredEvent, **changes) -> StoredEvent:
    """The event with some fields changed and its event_hash recomputed."""
    fields = {name: getattr(e, name) for name in COLUMNS}
    fields.update(changes)
    fields["event_hash"] = event_hash(
        **{k: fields[k] for k in COLUMNS if k not in ("seq", "event_hash")}
    )
    return StoredEvent(**fields)


def write_event(conn: sqlite3.Connection, seq: int, e: StoredEvent) -> None:
    """Overwrite every column but `seq` of the row at `seq` with `e`'s (guards dropped)."""
    names = COLUMNS[1:]
    sets = ", ".join(f"{c} = ?" for c in names)
    conn.execute(f"UPDATE events SET {sets} WHERE seq = ?", [getattr(e, c) for c in names] + [seq])


PARKED = 10**9  # a free position while rows trade places


def swap(conn: sqlite3.Connection, a: int, b: int) -> None:
    """Exchange the positions (seq) of two events."""
    conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (PARKED, a))
    conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (a, b))
    conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (b, PARKED))


def move_to_end(conn: sqlite3.Connection, seq: int) -> None:
    """Take the event at `seq` out, close the gap, and put it last."""
    last = conn.execute("SELECT MAX(seq) FROM events").fetchone()[0]
    conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (PARKED, seq))
    for later in range(seq + 1, last + 1):
        conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (later - 1, later))
    conn.execute("UPDATE events SET seq = ? WHERE seq = ?", (last, PARKED))


def consistent_rewrite(path: Path, keep: int, change) -> list[StoredEvent]:
    """Rewrite the history after the first `keep` events as a careful forger would:
    `change(event)` alters event keep+1 (returning new field values), and every later event
    of its run is re-linked and re-hashed, so every per-event check still passes. The
    projections are rebuilt and the stored checkpoints removed. Returns the new events."""
    events = read_events(path)
    target = events[keep]
    new = {target.seq: rehash(target, **change(target))}
    last_hash = {target.stream_id: new[target.seq].event_hash}
    for e in events[keep + 1 :]:
        if e.stream_id in last_hash:
            new[e.seq] = rehash(e, parent_hash=last_hash[e.stream_id])
            last_hash[e.stream_id] = new[e.seq].event_hash
    with sqlite3.connect(path) as conn:
        for seq, e in new.items():
            write_event(conn, seq, e)
        conn.execute("DELETE FROM checkpoints")
    store = Store(f"sqlite:///{path}")
    rebuild_projections(store)
    store.close()
    return read_events(path)


def checkpoint_notes(url: str) -> list[str]:
    """The checkpoint note of every prefix of the ledger (sizes 0..N)."""
    from ledger.integrity import checkpoint, merkle

    store = Store(url)
    origin = audit.ledger_origin(store)
    with store.transaction() as conn:
        leaves = [bytes.fromhex(e.event_hash) for e in store.iter_events(conn)]
    store.close()
    builder = merkle.ProofBuilder(leaves)
    return [
        checkpoint.format_note(checkpoint.Checkpoint(origin, size, builder.root(size)))
        for size in range(len(leaves) + 1)
    ]


@pytest.fixture
def other_url(request, db_url: str, tmp_path: Path) -> str:
    """A second, empty ledger on the same backend as `db_url`."""
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'other.sqlite3'}"
    from conftest import new_pg_database

    server = request.getfixturevalue("pg_server")
    return new_pg_database(server, request.getfixturevalue("pg_template"))


def stream_rows(url: str, run_id: str) -> list[tuple]:
    """Everything but seq of a run's stored events."""
    store = Store(url)
    with store.transaction() as conn:
        stream = store.read_stream(conn, run_id)
    store.close()
    return [tuple(getattr(e, c) for c in COLUMNS[1:]) for e in stream]


def event_count(url: str) -> int:
    store = Store(url)
    with store.transaction() as conn:
        count = store.event_count(conn)
    store.close()
    return count
