"""Upcasting on read: an event stored under an older schema version is read as the current
model through the chain of steps in `events.UPCASTERS`; its stored bytes, version and hash
stay as they were, so `verify` still checks them as stored."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import ClassVar

import pytest

from ledger.core.events import (
    EVENT_TYPES,
    UPCASTERS,
    Event,
    RunConcluded,
    UnknownEventType,
    load_event,
)
from ledger.integrity.verify import verify_ledger
from ledger.store.eventstore import Store

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "ledger.sqlite3"


class Widget(Event):
    """A made-up event at schema version 3: version 1 called `name` `title`; version 2 had
    no `size`."""

    event_type: ClassVar[str] = "Widget"
    schema_version: ClassVar[int] = 3
    name: str
    size: int


@pytest.fixture
def widget(monkeypatch):
    monkeypatch.setitem(EVENT_TYPES, "Widget", Widget)
    monkeypatch.setitem(
        UPCASTERS,
        ("Widget", 1),
        lambda p: {"name": p["title"], **{k: v for k, v in p.items() if k != "title"}},
    )
    monkeypatch.setitem(UPCASTERS, ("Widget", 2), lambda p: {**p, "size": p.get("size", 0)})


def test_every_older_version_reads_as_the_current_model(widget):
    assert load_event("Widget", 1, {"title": "a"}) == Widget(name="a", size=0)
    assert load_event("Widget", 2, {"name": "a"}) == Widget(name="a", size=0)
    assert load_event("Widget", 2, {"name": "a", "size": 4}) == Widget(name="a", size=4)
    assert load_event("Widget", 3, {"name": "a", "size": 4}) == Widget(name="a", size=4)


def test_a_version_without_a_way_up_or_from_the_future_is_refused(widget, monkeypatch):
    with pytest.raises(UnknownEventType, match="version 4"):
        load_event("Widget", 4, {"name": "a", "size": 1})
    monkeypatch.delitem(UPCASTERS, ("Widget", 1))
    with pytest.raises(UnknownEventType, match="no upcast from version 1"):
        load_event("Widget", 1, {"title": "a"})
    with pytest.raises(UnknownEventType):
        load_event("Gadget", 1, {})


def test_no_event_type_is_past_version_one_yet():
    """The table is empty because no payload has changed its meaning; the day one does, its
    class gets version 2 and this test a line for the step from version 1."""
    assert {cls.schema_version for cls in EVENT_TYPES.values()} == {1}
    assert UPCASTERS == {}


@pytest.fixture
def golden(tmp_path: Path):
    path = tmp_path / "ledger.sqlite3"
    shutil.copyfile(GOLDEN, path)
    old = Store(f"sqlite:///{path}", check_schema=False)
    old.upgrade()  # the golden ledger is kept as it was made, at an older revision
    old.close()
    store = Store(f"sqlite:///{path}")
    yield store
    store.close()


def test_a_stored_ledger_verifies_after_a_schema_bump_through_its_upcaster(
    golden: Store, monkeypatch
):
    monkeypatch.setattr(RunConcluded, "schema_version", 2)
    without = verify_ledger(golden)
    assert not without.ok
    assert without.first_failure is not None
    assert without.first_failure.check == "payload"
    assert "RunConcluded" in without.first_failure.reason

    monkeypatch.setitem(UPCASTERS, ("RunConcluded", 1), dict)
    report = verify_ledger(golden)
    assert report.ok, report.as_dict()
    with golden.transaction() as conn:
        stored = [e for e in golden.iter_events(conn) if e.event_type == "RunConcluded"]
    assert stored and {e.schema_version for e in stored} == {1}  # read up, never rewritten
    assert all(e.computed_hash() == e.event_hash for e in stored)
