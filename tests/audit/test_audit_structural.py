"""Structural changes to the log: deleted, duplicated, swapped, reordered events and changed
parents. Each is detected; the two the per-event checks cannot see (a swap of two runs'
events, a deleted last event with rebuilt projections) are caught by a checkpoint."""

from __future__ import annotations

import sqlite3

import audit_kit
from audit_kit import COLUMNS, copy_ledger, move_to_end, read_events, rehash, swap, write_event

from ledger.integrity import audit
from ledger.integrity.eventchecks import BAD_PARENT
from ledger.integrity.verify import rebuild_projections
from ledger.store.eventstore import Store

built = audit_kit.built


def _verify(url: str, **kwargs) -> audit.AuditReport:
    store = Store(url)
    try:
        return audit.verify(store, **kwargs)
    finally:
        store.close()


def _copy(built, tmp_path, name="copy.sqlite3"):
    path = tmp_path / name
    return path, copy_ledger(built.path, path)


def _store_checkpoint(url: str) -> str:
    from ledger.services.session import utc_now

    store = Store(url)
    made = audit.make_checkpoint(store, clock=utc_now)
    store.close()
    return made.note


def test_deleting_an_event_leaves_a_gap_named_by_its_seq(built, tmp_path):
    path, url = _copy(built, tmp_path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE seq = 20")
    report = _verify(url)
    f = report.first_failure
    assert (f.check, f.seq) == ("seq", 21)
    assert f.reason.startswith("expected seq 20, found 21")


def test_deleting_the_last_event_is_seen_by_projections_then_by_a_checkpoint(built, tmp_path):
    path, url = _copy(built, tmp_path)
    note = _store_checkpoint(url)
    last = read_events(path)[-1]
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM events WHERE seq = ?", (last.seq,))
    report = _verify(url)
    assert report.first_failure.check == "projection"
    store = Store(url)
    rebuild_projections(store)  # a careful forger rebuilds the projections too
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM checkpoints")  # ... and removes the stored checkpoint
    report = _verify(url)
    assert report.ledger.ok  # every per-event check passes: the documented limit
    report = _verify(url, pinned_note=note)  # the pinned checkpoint does not
    assert not report.ok
    assert report.first_failure.check == "checkpoint"
    assert f"holds {last.seq - 1} events, fewer than the {last.seq}" in report.first_failure.reason


def test_a_duplicated_event_breaks_its_run_chain(built, tmp_path):
    path, url = _copy(built, tmp_path)
    victim = read_events(path)[14]
    with sqlite3.connect(path) as conn:
        # The unique keys would refuse a copy; a forger rebuilds the table without them.
        conn.executescript(
            """
            CREATE TABLE events_loose AS SELECT * FROM events;
            DROP TABLE events;
            ALTER TABLE events_loose RENAME TO events;
            """
        )
        marks = ", ".join("?" for _ in COLUMNS)
        count = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        row = [getattr(victim, c) for c in COLUMNS]
        row[0] = count + 1
        conn.execute(f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({marks})", row)
    report = _verify(url)
    f = report.first_failure
    assert (f.check, f.seq) == ("chain", count + 1)
    assert "not contiguous" in f.reason


def test_swapping_two_events_of_one_run_breaks_the_chain(built, tmp_path):
    path, url = _copy(built, tmp_path)
    events = read_events(path)
    first, second = events[9], events[13]  # run A's round 1 decision and round 2 submission
    assert first.stream_id == second.stream_id
    with sqlite3.connect(path) as conn:
        swap(conn, first.seq, second.seq)
    report = _verify(url)
    f = report.first_failure
    assert (f.check, f.seq) == ("chain", first.seq)


def test_swapping_two_runs_events_is_caught_by_checkpoints(built, tmp_path):
    """Each run's chain stays intact when events of different runs trade places: only the
    Merkle tree over the whole log (seq order) sees it."""
    path, url = _copy(built, tmp_path)
    events = read_events(path)
    index = next(
        i for i in range(len(events) - 1) if events[i].stream_id != events[i + 1].stream_id
    )
    first, second = events[index], events[index + 1]
    notes = audit_kit.checkpoint_notes(url)
    stored = _store_checkpoint(url)
    with sqlite3.connect(path) as conn:
        swap(conn, first.seq, second.seq)
    report = _verify(url)
    assert report.ledger.ok  # per-event checks and projections cannot see it
    assert not report.ok and report.first_failure.check == "checkpoints"
    assert "was rewritten" in report.first_failure.reason
    for size, note in enumerate(notes):
        pinned = _verify(url, pinned_note=note).pinned
        expected = "ok" if size < first.seq else "failed"
        assert pinned.status == expected, (size, pinned.reason)
    assert _verify(url, pinned_note=stored).pinned.status == "failed"


def test_moving_an_event_to_the_end_is_detected(built, tmp_path):
    path, url = _copy(built, tmp_path)
    events = read_events(path)
    moved = events[9]
    with sqlite3.connect(path) as conn:
        move_to_end(conn, moved.seq)
    report = _verify(url)
    f = report.first_failure
    follower = next(e for e in events[10:] if e.stream_id == moved.stream_id)
    assert (f.check, f.seq, f.stream_id) == ("chain", follower.seq - 1, moved.stream_id)


def test_a_changed_parent_is_detected_with_or_without_a_new_hash(built, tmp_path):
    path, url = _copy(built, tmp_path)
    events = read_events(path)
    victim = events[20]
    other = events[3].event_hash
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET parent_hash = ? WHERE seq = ?", (other, victim.seq))
    f = _verify(url).first_failure
    assert (f.check, f.seq) == ("hash", victim.seq)
    with sqlite3.connect(path) as conn:  # the forger also recomputes the event's own hash
        write_event(conn, victim.seq, rehash(victim, parent_hash=other))
    f = _verify(url).first_failure
    assert (f.check, f.seq) == ("chain", victim.seq)
    assert "parent_hash does not link" in f.reason


def test_an_actor_rewritten_and_rehashed_is_caught_by_the_chain_or_its_form(built, tmp_path):
    """Another name written into an event's actor with its hash recomputed breaks the link
    to the next event; an actor that is not one the ledger writes (not canonical, an
    unknown field) fails the canonical check even when every hash after it is redone."""
    path, url = _copy(built, tmp_path)  # the append-only triggers dropped
    events = read_events(path)
    target = next(e for e in events if e.event_type == "RoundDecided")
    forged = rehash(target, actor=target.actor.replace('"tester"', '"mallory"'))
    with sqlite3.connect(path) as conn:
        write_event(conn, target.seq, forged)
    f = _verify(url).first_failure
    later = next(e for e in events if e.seq > target.seq and e.stream_id == target.stream_id)
    assert (f.check, f.seq, f.reason) == ("chain", later.seq, BAD_PARENT)

    for bad, why in (
        ('{ "label":"x"}', "actor text is not RFC 8785 canonical"),
        ('{"role":"x"}', "actor has unknown fields ['role']"),
    ):
        path, url = _copy(built, tmp_path / why[:5])
        with sqlite3.connect(path) as conn:
            parent = target.parent_hash
            for e in (e for e in events if e.stream_id == target.stream_id):
                if e.seq < target.seq:
                    continue
                e = rehash(e, parent_hash=parent, **({"actor": bad} if e is target else {}))
                write_event(conn, e.seq, e)
                parent = e.event_hash
        f = _verify(url).first_failure
        assert (f.check, f.seq, f.reason) == ("canonical", target.seq, why)
