"""`projections.RunFold` (the replay's fold, whose frozen view is built only when read) gives
the very view `projections.apply` gives after every event, wherever the view is read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import projections
from ledger.store.eventstore import StoredEvent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEDGERS = [
    FIXTURES / "golden" / "ledger.sqlite3",
    *sorted((FIXTURES / "ledgers").glob("*.sqlite3")),
]


def _runs(path: Path) -> list[list[tuple[int, str, object]]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT seq, event_id, stream_id, stream_version, event_type, schema_version, "
            "recorded_at, payload, parent_hash, event_hash FROM events ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    runs: dict[str, list[tuple[int, str, object]]] = {}
    for row in rows:
        e = StoredEvent(*row[:7], bytes(row[7]), *row[8:])
        runs.setdefault(e.stream_id, []).append((e.stream_version, e.recorded_at, e.event()))
    return list(runs.values())


RUNS = [run for path in LEDGERS for run in _runs(path)]


def test_the_fixtures_hold_runs_of_every_shape():
    types = {type(event).__name__ for run in RUNS for _, _, event in run}
    assert {"RunPlanned", "RoundDecided", "ProfileRecorded", "RunConcluded"} <= types
    assert len(RUNS) >= 5


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_the_view_read_anywhere_is_the_view_of_apply(data):
    run = data.draw(st.sampled_from(RUNS), label="run")
    reads = data.draw(st.lists(st.booleans(), min_size=len(run), max_size=len(run)))
    fold = projections.RunFold()
    assert fold.view is None
    view = None
    for (version, at, event), read in zip(run, reads, strict=True):
        view = projections.apply(view, version, at, event)
        fold.apply(version, at, event)
        if read:
            assert fold.view == view
    assert fold.view == view


def test_a_fold_refuses_what_apply_refuses():
    run = RUNS[0]
    fold = projections.RunFold()
    with pytest.raises(projections.ProjectionError):
        fold.apply(*run[1])  # not a RunPlanned first
    fold.apply(*run[0])
    with pytest.raises(projections.ProjectionError):
        fold.apply(*run[0])  # a second RunPlanned
