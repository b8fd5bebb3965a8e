"""The store contract, run on SQLite and on a real PostgreSQL from the same code."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from ledger.core.events import FileRef, ValidationLinked
from ledger.errors import ConflictError, InputError
from ledger.integrity.hashing import ZERO_HASH
from ledger.integrity.verify import rebuild_projections, verify_ledger
from ledger.services.service import LedgerService
from ledger.store.eventstore import NewEvent, Store

from campaign import Campaign


def _event(n: int) -> ValidationLinked:
    ref = FileRef(path=f"/m/{n}.json", sha256="a" * 64, size=n)
    return ValidationLinked(
        round=n,
        kernel_sha256="b" * 64,
        manifest=ref,
        manifest_run_id=f"m-{n}",
        manifest_parent_run_id=None,
        status="passed",
        case_matrix=None,
        case_ids=["c"],
    )


def _new(n: int, event_id: str | None = None) -> NewEvent:
    return NewEvent(event_id or str(uuid.uuid4()), _event(n), "2026-11-30T00:00:00.000000Z")


def test_append_and_read_back(store: Store):
    with store.transaction(write=True) as conn:
        first = store.append(conn, "s1", 0, [_new(1), _new(2)])
    with store.transaction(write=True) as conn:
        store.append(conn, "s2", 0, [_new(3)])
        third = store.append(conn, "s1", 2, [_new(4)])
    assert [e.seq for e in first] == [1, 2] and third[0].seq == 4
    assert first[0].parent_hash == ZERO_HASH
    assert first[1].parent_hash == first[0].event_hash
    assert third[0].parent_hash == first[1].event_hash
    with store.transaction() as conn:
        stream = store.read_stream(conn, "s1")
        everything = list(store.iter_events(conn, batch=2))
    assert [e.stream_version for e in stream] == [1, 2, 3]
    assert [e.seq for e in everything] == [1, 2, 3, 4]
    for e in everything:
        assert e.computed_hash() == e.event_hash
        assert e.event() == _event(e.event().round)


def test_stale_expected_version_conflicts_and_writes_nothing(store: Store):
    with store.transaction(write=True) as conn:
        store.append(conn, "s1", 0, [_new(1)])
    with (
        pytest.raises(ConflictError, match="is at version 1, not 0"),
        store.transaction(write=True) as conn,
    ):
        store.append(conn, "s1", 0, [_new(2)])
    with store.transaction() as conn:
        assert store.event_count(conn) == 1


def test_duplicate_event_id_is_a_conflict(store: Store):
    event_id = str(uuid.uuid4())
    with store.transaction(write=True) as conn:
        store.append(conn, "s1", 0, [_new(1, event_id)])
    with pytest.raises(ConflictError), store.transaction(write=True) as conn:
        store.append(conn, "s2", 0, [_new(1, event_id)])


def test_retry_with_same_event_ids_stores_one_copy(store: Store):
    batch = [_new(1), _new(2)]
    with store.transaction(write=True) as conn:
        first = store.append(conn, "s1", 0, batch)
    with store.transaction(write=True) as conn:
        again = store.append(conn, "s1", 0, batch)
    assert again == first
    with store.transaction(write=True) as conn:
        assert store.append_or_find(conn, "s1", 0, batch) == (first, False)
        more = [_new(3)]
        stored, written = store.append_or_find(conn, "s1", 2, more)
        assert written and [e.stream_version for e in stored] == [3]
    with store.transaction() as conn:
        assert store.event_count(conn) == 3


def _refused(store: Store, sql: str) -> None:
    with pytest.raises(Exception) as info, store.engine.begin() as conn:
        conn.exec_driver_sql(sql)
    assert "append-only" in str(info.value) or "already exists" in str(info.value)


def test_database_refuses_update_delete_and_replace(store: Store):
    with store.transaction(write=True) as conn:
        store.append(conn, "s1", 0, [_new(1)])
        store.put_blob(conn, b"kernel source")
    _refused(store, "UPDATE events SET event_type = 'X'")
    _refused(store, "DELETE FROM events")
    _refused(store, "UPDATE blobs SET content = content")
    _refused(store, "DELETE FROM blobs")
    if store.dialect == "sqlite":
        _refused(
            store,
            "INSERT OR REPLACE INTO events SELECT 1, event_id, stream_id, stream_version, "
            "'Forged', schema_version, recorded_at, payload, parent_hash, event_hash, actor "
            "FROM events",
        )
        _refused(store, "REPLACE INTO blobs SELECT sha256, size, x'00' FROM blobs")
    else:
        _refused(store, "TRUNCATE events")
        _refused(store, "TRUNCATE blobs")
        _refused(
            store,
            "INSERT INTO events SELECT * FROM events ON CONFLICT (seq) DO UPDATE SET "
            "event_type = 'Forged'",
        )
        with store.engine.begin() as conn:  # replica mode does not switch ALWAYS triggers off
            conn.exec_driver_sql("SET session_replication_role = replica")
            with pytest.raises(Exception, match="append-only"):
                conn.exec_driver_sql("DELETE FROM events")
    with store.transaction() as conn:
        assert store.event_count(conn) == 1


def test_blobs_are_content_addressed(store: Store):
    with store.transaction(write=True) as conn:
        digest = store.put_blob(conn, b"print('hi')\n")
        assert store.put_blob(conn, b"print('hi')\n") == digest
    with store.transaction() as conn:
        assert store.get_blob(conn, digest) == b"print('hi')\n"
        assert store.get_blob(conn, "0" * 64) is None


def _run_campaign(store: Store, campaign: Campaign) -> LedgerService:
    service = LedgerService(store)
    service.plan(campaign.config())
    for medians in ([16.0, 37.0, 23.0], [15.0, 37.0, 26.0], None, [14.0, 33.0, 21.0]):
        status = "failed" if medians is None else "passed"
        result = service.record(campaign.run_id, campaign.round(medians, status=status))
        campaign.accepted(result.decision, result.round)
    return service


def _projection_rows(store: Store) -> dict[str, list]:
    out = {}
    with store.engine.connect() as conn:
        for table, order in (
            ("runs", "run_id"),
            ("run_cases", "run_id, position"),
            ("rounds", "run_id, round"),
        ):
            out[table] = [
                tuple(r) for r in conn.execute(text(f"SELECT * FROM {table} ORDER BY {order}"))
            ]
    return out


def test_rebuild_equals_live_projections(store: Store, campaign: Campaign):
    service = _run_campaign(store, campaign)
    from ledger.services.analysis import analyze

    analyze(service, campaign.run_id, campaign.root / "analysis")
    live = _projection_rows(store)
    assert len(live["rounds"]) == 4
    assert rebuild_projections(store) == 1
    assert _projection_rows(store) == live
    assert verify_ledger(store).ok


def test_plan_twice_is_refused(store: Store, campaign: Campaign):
    service = LedgerService(store)
    service.plan(campaign.config())
    with pytest.raises(InputError, match="already in the ledger"):
        service.plan(campaign.config())


def test_verify_detects_projection_drift(store: Store, campaign: Campaign):
    _run_campaign(store, campaign)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE runs SET best_round = 0")
    report = verify_ledger(store)
    assert not report.ok
    assert report.first_failure.check == "projection"
    assert "table runs differs" in report.first_failure.reason


def test_one_writer_takes_new_and_stored_events_alike(store: Store, tmp_path):
    """`Store.write` is the one way into the log: events another ledger stored keep their
    bytes and hashes and get this log's next seq; an event that does not continue its run's
    chain, or whose hash does not hold, is refused and nothing is written."""
    import dataclasses

    other = Store(f"sqlite:///{tmp_path / 'other.sqlite3'}")
    with other.transaction(write=True) as conn:
        other.append(conn, "x", 0, [_new(9)])  # the other log's seq 1 is another run's
        source = other.append(conn, "s1", 0, [_new(1), _new(2), _new(3)])
    other.close()
    with store.transaction(write=True) as conn:
        head = store.write(conn, "s1", (0, ZERO_HASH), source[:1])
        rest = store.write(conn, "s1", (1, head[0].event_hash), [*source[1:2], _new(4)])
    assert [e.seq for e in (*head, *rest)] == [1, 2, 3]
    assert [e.event_hash for e in (*head, *rest)][:2] == [e.event_hash for e in source[:2]]
    assert rest[1].parent_hash == source[1].event_hash  # a new event continues a copied one

    forged = dataclasses.replace(source[2], payload=source[2].payload.replace(b"m-3", b"m-8"))
    after_two = (2, source[1].event_hash)
    for batch, at, reason in (
        ([forged], after_two, "event_hash does not match"),
        (source[2:], (1, head[0].event_hash), "does not continue run 's1' at version 2"),
    ):
        with pytest.raises(InputError, match=reason), store.transaction(write=True) as conn:
            store.write(conn, "s1", at, batch)
    with store.transaction() as conn:
        assert store.event_count(conn) == 3
