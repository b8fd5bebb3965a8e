"""The streamed replay: a concluded run is compared at once and then dropped, yet events
after a conclusion are judged as against a run kept whole, and what the early comparisons
find is reported where it always was, after every event has passed."""

from __future__ import annotations

import uuid
from pathlib import Path

from ledger.core.events import RoundSubmitted
from ledger.integrity.verify import verify_chain, verify_ledger
from ledger.services.analysis import analyze
from ledger.services.service import LedgerService
from ledger.store.eventstore import NewEvent, Store

from campaign import Campaign, late_profile

A, B = "softmax-a-001", "softmax-b-001"


def _build(store: Store, root: Path) -> LedgerService:
    """Run A: two rounds, concluded, then profiled; run B: planned after A, one round
    recorded after A's conclusion."""
    service = LedgerService(store)
    a = Campaign(root / "a", run_id=A)
    b = Campaign(root / "b", run_id=B)
    service.plan(a.config())
    for medians in ([16.0, 37.0, 23.0], [14.0, 33.0, 21.0]):
        result = service.record(A, a.round(medians))
        a.accepted(result.decision, result.round)
    service.plan(b.config())
    analyze(service, A, root / "analysis-a")
    # `profile` refuses a concluded run now; ledgers written before hold profiles after a
    # conclusion, and those verify: append one as such a ledger holds it
    late_profile(service, A, {"aiv_vec_ratio": 0.54, "aiv_scalar_ratio": 0.12})
    result = service.record(B, b.round([17.0, 38.0, 24.0]))
    b.accepted(result.decision, result.round)
    return service


def _late_round(store: Store) -> int:
    """Append (events only, as a forger would) a round to run A after its conclusion."""
    with store.transaction(write=True) as conn:
        stream = store.read_stream(conn, A)
        first = next(e.event() for e in stream if e.event_type == "RoundSubmitted")
        assert isinstance(first, RoundSubmitted)
        late = first.model_copy(update={"round": 3})
        at = stream[-1].recorded_at
        (stored,) = store.append(conn, A, len(stream), [NewEvent(str(uuid.uuid4()), late, at)])
    return stored.seq


def test_events_after_a_conclusion_verify(store: Store, tmp_path: Path):
    _build(store, tmp_path)
    report = verify_ledger(store)
    assert report.ok, report.first_failure
    assert (report.runs_checked, report.checks["projection"]) == (2, "ok")
    with store.transaction() as conn:
        total = store.event_count(conn)
    assert report.events_checked == total
    chain = verify_chain(store)
    assert chain.ok and (chain.events_checked, chain.runs_checked) == (total, 2)


def test_a_round_after_the_conclusion_is_a_replay_failure(store: Store, tmp_path: Path):
    _build(store, tmp_path)
    seq = _late_round(store)
    report = verify_ledger(store)
    assert report.first_failure is not None
    assert report.first_failure.as_dict() == {
        "seq": seq,
        "stream_id": A,
        "stream_version": report.first_failure.stream_version,
        "check": "replay",
        "reason": "a round was submitted after the run concluded",
    }
    assert report.events_checked == seq - 1
    assert verify_chain(store).ok  # the late event is well chained: only a replay sees it


def test_a_concluded_runs_projection_drift_is_reported_after_every_event(
    store: Store, tmp_path: Path
):
    _build(store, tmp_path)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE runs SET best_round = 99 WHERE run_id = '{A}'")
    report = verify_ledger(store)
    assert report.first_failure is not None
    assert report.first_failure.as_dict() == {
        "seq": None,
        "stream_id": None,
        "stream_version": None,
        "check": "projection",
        "reason": f"run '{A}': table runs differs from a rebuild from events",
    }
    with store.transaction() as conn:
        assert report.events_checked == store.event_count(conn)
    assert report.checks["blobs"] == "not run"
    # a failing event later in the log is still the first failure, as it always was
    seq = _late_round(store)
    late = verify_ledger(store).first_failure
    assert late is not None and (late.seq, late.check) == (seq, "replay")


def test_concluded_runs_report_the_first_projection_fault_by_run_id(store: Store, tmp_path: Path):
    """Three runs concluded one after another and never reopened, each compared at its
    conclusion: drifted rows in two of them are reported by run id, not by when each was
    compared."""
    service = LedgerService(store)
    ids = ["softmax-c-001", "softmax-c-002", "softmax-c-003"]
    for run_id in ids:
        campaign = Campaign(tmp_path / run_id, run_id=run_id)
        service.plan(campaign.config())
        result = service.record(run_id, campaign.round([16.0, 37.0, 23.0]))
        campaign.accepted(result.decision, result.round)
        analyze(service, run_id, tmp_path / f"analysis-{run_id}")
    assert verify_ledger(store).ok
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE runs SET best_round = 99 WHERE run_id = '{ids[2]}'")
        conn.exec_driver_sql(f"UPDATE rounds SET decision = 'FAIL' WHERE run_id = '{ids[1]}'")
    failure = verify_ledger(store).first_failure
    assert failure is not None and (failure.check, failure.reason) == (
        "projection",
        f"run '{ids[1]}': table rounds differs from a rebuild from events",
    )
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE rounds SET decision = 'KEEP' WHERE run_id = '{ids[1]}'")
    failure = verify_ledger(store).first_failure
    assert failure is not None and failure.reason.startswith(f"run '{ids[2]}': table runs")
