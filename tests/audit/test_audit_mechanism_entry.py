"""A decision's mechanism entry is evidence like the rest of it: a forger who changes it
and re-hashes every later event consistently still fails `verify`'s replay."""

from __future__ import annotations

import json

import audit_kit
from audit_kit import consistent_rewrite, copy_ledger, read_events

from ledger.integrity.hashing import canonical
from ledger.integrity.verify import verify_ledger
from ledger.store.eventstore import Store

built = audit_kit.built  # the realistic ledger, once per module


def test_a_forged_mechanism_entry_fails_the_replay(built, tmp_path):
    path = tmp_path / "forged.sqlite3"
    copy_ledger(built.path, path)
    events = read_events(path)
    decided = next(
        i
        for i, e in enumerate(events)
        if e.event_type == "RoundDecided" and "mechanism_entry" in json.loads(e.payload)
    )
    recorded = json.loads(events[decided].payload)["mechanism_entry"]
    assert recorded["vocabulary"] == 1 and recorded["entry"] != "fusion"

    def forge(e):
        payload = json.loads(e.payload)
        payload["mechanism_entry"] = {**payload["mechanism_entry"], "entry": "fusion"}
        return {"payload": canonical(payload)}

    consistent_rewrite(path, decided, forge)
    store = Store(f"sqlite:///{path}")
    report = verify_ledger(store, workers=1).as_dict()
    store.close()
    failure = report["first_failure"]
    assert (failure["check"], failure["seq"]) == ("replay", events[decided].seq)
    assert "mechanism_entry differ from a re-derivation" in failure["reason"]
