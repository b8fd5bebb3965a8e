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
    assert recorded["vocabulary"] == 2 and recorded["entry"] != "fusion"

    def forge(e):
        payload = json.loads(e.payload)
        payload["mechanism_entry"] = {**payload["mechanism_entry"], "entry": "fusion"}
        return {"payload": canonical(payload)}

    consistent_rewrite(path, decided, forge)
    store = Store(f"sqlite:///{path}")
    report = verify_ledger(store).as_dict()
    store.close()
    failure = report["first_failure"]
    assert (failure["check"], failure["seq"]) == ("replay", events[decided].seq)
    assert "mechanism_entry differ from a re-derivation" in failure["reason"]


def test_a_decision_replays_under_the_vocabulary_version_it_records(tmp_path, monkeypatch):
    """Version 1 knew no phrase for "chunk size of the scan" (`other`); version 2 names
    split-reduction. A decision recorded under version 1 verifies as `other`; one that
    claims version 2 with `other` does not."""
    from ledger.core.mechanisms import classify

    from campaign import Campaign, record_round
    from conftest import CliRunner

    assert classify("chunk size of the scan", "CHUNK=1024 -> 4096", 1).entry == "other"
    assert classify("chunk size of the scan", "CHUNK=1024 -> 4096").entry == "split-reduction"
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    path = tmp_path / "ledger.sqlite3"
    cli = CliRunner(f"sqlite:///{path}")
    campaign = Campaign(tmp_path / "c")
    assert cli("plan", "--config", campaign.config(), "--json").exit_code == 0
    record_round(
        cli,
        campaign,
        [16.0, 36.0, 22.0],
        mechanism="chunk size of the scan",
        change="CHUNK=1024 -> 4096",
    )
    events = read_events(path)
    decided = next(i for i, e in enumerate(events) if e.event_type == "RoundDecided")
    assert json.loads(events[decided].payload)["mechanism_entry"] == {
        "entry": "split-reduction",
        "source": "mechanism",
        "vocabulary": 2,
    }

    def as_version(version):
        def change(e):
            payload = json.loads(e.payload)
            payload["mechanism_entry"] = {"entry": "other", "source": None, "vocabulary": version}
            return {"payload": canonical(payload)}

        return change

    for version, ok in ((1, True), (2, False)):
        copy = tmp_path / f"v{version}.sqlite3"
        copy_ledger(path, copy)
        consistent_rewrite(copy, decided, as_version(version))
        store = Store(f"sqlite:///{copy}")
        report = verify_ledger(store).as_dict()
        store.close()
        assert (report["first_failure"] is None) == ok, report["first_failure"]
