"""A consistent rewrite: history after event k rewritten with every later hash recomputed,
projections rebuilt and stored checkpoints removed. The per-event checks pass (the limit
docs/audit.md documents); every checkpoint of size > k fails, every one of size <= k holds."""

from __future__ import annotations

import json
import uuid

import audit_kit
import pytest
from audit_kit import checkpoint_notes, consistent_rewrite, copy_ledger, read_events

from ledger.integrity import audit
from ledger.integrity.hashing import canonical
from ledger.store.eventstore import Store

built = audit_kit.built


def _new_event_id(e):
    return {"event_id": str(uuid.uuid4())}


# A payload field each event type carries that no replay rule depends on.
FREE_TEXT = {
    "RunPlanned": ("config_document", "op_note"),
    "RoundSubmitted": ("hypothesis", None),
    "ValidationLinked": ("manifest_run_id", None),
    "DiagnosisRecorded": ("evidence", None),
    "ProfileRecorded": ("kernel_name", None),
}


def _reworded(e):
    """The forger changes what the event says, not just its id."""
    value = json.loads(e.payload)
    key, inner = FREE_TEXT.get(e.event_type, (None, None))
    if key is None:
        return {"event_id": str(uuid.uuid4())}
    if inner is not None:
        value[key][inner] = "rewritten"
    else:
        value[key] = f"{value[key] or ''} (rewritten)"
    return {"payload": canonical(value)}


@pytest.mark.parametrize("keep", [0, 1, 6, 11, 16, 28, 39, 40])
@pytest.mark.parametrize("change", [_new_event_id, _reworded], ids=["event-id", "payload"])
def test_consistent_rewrite_fails_every_later_checkpoint_only(built, tmp_path, keep, change):
    path = tmp_path / "rewritten.sqlite3"
    url = copy_ledger(built.path, path)
    before = read_events(path)
    notes = checkpoint_notes(url)
    assert len(notes) == len(before) + 1
    after = consistent_rewrite(path, keep, change)
    assert [e.event_hash for e in after[:keep]] == [e.event_hash for e in before[:keep]]
    assert after[keep].event_hash != before[keep].event_hash
    store = Store(url)
    try:
        plain = audit.verify(store)
        assert plain.ok, plain.as_dict()  # the documented limit: nothing per event shows it
        for size, note in enumerate(notes):
            report = audit.verify(store, pinned_note=note)
            if size <= keep:
                assert report.ok, (size, report.as_dict())
            else:
                assert not report.ok, size
                f = report.first_failure
                assert f.check == "checkpoint" and f.seq is None
                assert f"history at or before event {size} was rewritten" in f.reason
    finally:
        store.close()


def test_a_rewrite_is_found_for_one_run_too(built, tmp_path):
    """verify --run builds the tree from the stored hashes of every run."""
    path = tmp_path / "run.sqlite3"
    url = copy_ledger(built.path, path)
    notes = checkpoint_notes(url)
    events = consistent_rewrite(path, 20, _new_event_id)
    store = Store(url)
    try:
        run_id = events[20].stream_id
        assert audit.verify(store, run_id).ok
        assert audit.verify(store, run_id, pinned_note=notes[20]).ok
        failed = audit.verify(store, run_id, pinned_note=notes[21])
        assert not failed.ok and failed.pinned.status == "failed"
    finally:
        store.close()
