"""The tamper campaign: seeded random single-byte and single-field changes of every stored
column of every event, on a copy of a real ledger whose append-only triggers were dropped.
Every change must be detected and reported at the event that was changed."""

from __future__ import annotations

import json
import random
import sqlite3
import uuid
from collections import Counter

import audit_kit
from audit_kit import COLUMNS, copy_ledger, read_events

from ledger.core.events import EVENT_TYPES
from ledger.integrity import audit
from ledger.integrity.hashing import ZERO_HASH, canonical
from ledger.store.eventstore import Store

built = audit_kit.built  # the realistic ledger, once per module
TRIALS = 400
SEED = 20261202


def _leaves(value, path=()):
    """(path, leaf value) of every scalar in a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


def _set(value, path, new):
    target = value
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new


def _changed_scalar(rng: random.Random, old):
    if isinstance(old, bool):
        return not old
    if old is None:
        return 0
    if isinstance(old, int):
        return old + rng.choice((-1, 1))
    if isinstance(old, float):
        return old + rng.choice((-1.0, 1.0)) * max(abs(old) * 0.01, 0.001)
    return old + "x" if not old or rng.random() < 0.5 else old[:-1]


def _byte_change(rng: random.Random, old):
    """One byte of the stored value changed."""
    if isinstance(old, bytes):
        position = rng.randrange(len(old))
        flipped = old[position] ^ rng.randrange(1, 256)
        return old[:position] + bytes([flipped]) + old[position + 1 :]
    if isinstance(old, str):
        position = rng.randrange(len(old))
        choices = [chr(c) for c in range(33, 127) if chr(c) != old[position]]
        return old[:position] + rng.choice(choices) + old[position + 1 :]
    return old ^ (1 << rng.randrange(0, 12))


def _field_change(rng: random.Random, column: str, old, events):
    """The whole field replaced by another plausible value."""
    if column == "payload":
        value = json.loads(old)
        leaves = list(_leaves(value))
        path, leaf = rng.choice(leaves)
        _set(value, path, _changed_scalar(rng, leaf))
        return canonical(value)
    if column == "event_id":
        return str(uuid.uuid4())
    if column == "stream_id":
        return rng.choice(sorted({e.stream_id for e in events} - {old} | {old + "-forged"}))
    if column == "event_type":
        return rng.choice(sorted(set(EVENT_TYPES) - {old}))
    if column == "recorded_at":
        return old.replace("2026-11-02", rng.choice(("2026-11-01", "2026-11-03")))
    if column in ("parent_hash", "event_hash"):
        return rng.choice(sorted({e.event_hash for e in events} | {ZERO_HASH} - {old}))
    if column == "seq":
        return len(events) + rng.randrange(1, 1000)
    if column == "stream_version":
        return max(1, old + rng.choice((-2, -1, 1, 2, 10)))
    if column == "actor":  # another user claimed, or another label
        return old.replace(rng.choice(('"tester"', '"test-suite"')), '"mallory"')
    return old + rng.choice((-1, 1))  # schema_version


def test_untouched_copies_pass(built, tmp_path):
    url = copy_ledger(built.path, tmp_path / "copy.sqlite3")
    store = Store(url)
    report = audit.verify(store)
    assert report.ok, report.as_dict()
    assert report.ledger.events_checked == len(read_events(built.path)) == 41
    store.close()


def test_every_random_change_of_any_column_is_detected_at_its_seq(built, tmp_path):
    path = tmp_path / "tampered.sqlite3"
    store = Store(copy_ledger(built.path, path))
    events = read_events(path)
    rng = random.Random(SEED)
    conn = sqlite3.connect(path)
    missed, caught_by, trials, refused = [], Counter(), 0, 0
    while trials < TRIALS:
        column = COLUMNS[trials % len(COLUMNS)]
        kind = "byte" if (trials // len(COLUMNS)) % 2 == 0 else "field"
        e = rng.choice(events)
        old = getattr(e, column)
        new = _byte_change(rng, old) if kind == "byte" else _field_change(rng, column, old, events)
        if new == old:
            continue
        try:
            with conn:
                conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (new, e.seq))
        except sqlite3.IntegrityError:
            refused += 1  # the change broke a key the database still enforces: draw again
            continue
        trials += 1
        report = audit.verify(store)
        f = report.first_failure
        where_seq = new if column == "seq" else e.seq
        with conn:
            conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (old, where_seq))
        if column == "seq":
            located = f is not None and f.check == "seq" and f"expected seq {e.seq}," in f.reason
        else:
            located = f is not None and f.seq == e.seq
        if report.ok or not located:
            missed.append((column, kind, e.seq, repr(new)[:60], f and f.as_dict()))
        else:
            caught_by[f.check] += 1
    conn.close()
    assert missed == [], f"{len(missed)} of {TRIALS} changes were missed or misplaced: {missed[:5]}"
    assert sum(caught_by.values()) == TRIALS
    assert {"hash", "seq"} <= set(caught_by)
    assert refused < TRIALS  # most changes are possible once the triggers are gone
    after = audit.verify(store)  # every change was undone: the copy is intact again
    assert after.ok, after.as_dict()
    store.close()


def test_every_column_of_every_event_is_covered(built, tmp_path):
    """One change per (event, column): no stored field is outside the checks."""
    path = tmp_path / "each.sqlite3"
    store = Store(copy_ledger(built.path, path))
    events = read_events(path)
    rng = random.Random(SEED + 1)
    conn = sqlite3.connect(path)
    missed = []
    for e in events:
        for column in COLUMNS:
            old = getattr(e, column)
            new = len(events) + 7 if column == "seq" else _byte_change(rng, old)
            if column in ("stream_version", "schema_version"):
                new = old + 100
            with conn:
                conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (new, e.seq))
            report = audit.verify(store)
            with conn:
                where = new if column == "seq" else e.seq
                conn.execute(f"UPDATE events SET {column} = ? WHERE seq = ?", (old, where))
            f = report.first_failure
            if column == "seq":
                located = f is not None and f"expected seq {e.seq}," in f.reason
            else:
                located = f is not None and f.seq == e.seq
            if report.ok or not located:
                missed.append((e.seq, column))
    conn.close()
    assert missed == []
    store.close()


def test_a_forged_decision_is_reported_through_the_command_line(built, tmp_path):
    from conftest import CliRunner

    path = tmp_path / "cli.sqlite3"
    cli = CliRunner(copy_ledger(built.path, path))
    target = next(
        e for e in read_events(path) if e.event_type == "RoundDecided" and b'"DISCARD"' in e.payload
    )
    with sqlite3.connect(path) as conn:
        forged = target.payload.replace(b'"decision":"DISCARD"', b'"decision":"KEEP"')
        assert forged != target.payload
        conn.execute("UPDATE events SET payload = ? WHERE seq = ?", (forged, target.seq))
    result = cli("verify", "--json")
    assert result.exit_code == 1
    body = result.json()
    assert body["status"] == "failed"
    assert body["first_failure"]["seq"] == target.seq
    assert body["first_failure"]["stream_id"] == target.stream_id
    assert body["first_failure"]["check"] == "hash"
    assert body["checks"]["hash"] == "failed" and body["checks"]["replay"] == "not run"
    assert body["error"].startswith(f"verification failed at seq {target.seq} ")
    assert result.stderr == ""
