"""RunReopened on both backends: a concluded run takes a round only when the caller gives a
reason, the reopening and the round are one append, the projection and the verifier follow,
and a reopening the history does not justify is caught by `verify`."""

from __future__ import annotations

import pytest

from ledger.core.events import RunReopened
from ledger.errors import InputError
from ledger.integrity.verify import rebuild_projections, verify_ledger
from ledger.services.service import LedgerService

from campaign import Campaign

REASON = "a round recorded after analyze"


@pytest.fixture
def concluded(store, tmp_path) -> tuple[LedgerService, Campaign]:
    """A run with one NOISE round, concluded inconclusive."""
    service = LedgerService(store)
    campaign = Campaign(tmp_path / "campaign")
    service.plan(campaign.config())
    result = service.record(campaign.run_id, campaign.round([18.2, 40.0, 25.0]))
    campaign.accepted(result.decision, result.round)
    assert service.conclude(campaign.run_id).run.conclusion == "inconclusive"
    return service, campaign


def test_a_concluded_run_takes_a_round_only_with_a_reason(concluded) -> None:
    service, campaign = concluded
    path = campaign.round([15.0, 35.0, 22.0])
    with pytest.raises(InputError, match="has concluded"):
        service.record(campaign.run_id, path)
    result = service.record(campaign.run_id, path, reopen=REASON)
    assert result.decision == "KEEP" and isinstance(result.events[0], RunReopened)
    assert result.events[0] == RunReopened(conclusion="inconclusive", round=2, reason=REASON)
    view = service.full_view(campaign.run_id)
    assert (view.run.status, view.run.conclusion, view.run.rounds_recorded) == ("active", None, 2)
    assert [r.flags for r in view.rounds] == [None, "reopened"]
    assert verify_ledger(service.store).ok
    # concluded anew, from every round
    again = service.conclude(campaign.run_id)
    assert (again.run.conclusion, again.run.kept_rounds) == ("passed", 1)
    report = verify_ledger(service.store)
    assert report.ok, report.first_failure
    stored = service.full_view(campaign.run_id)
    rebuild_projections(service.store)
    assert service.full_view(campaign.run_id) == stored


def test_a_refused_round_leaves_the_run_concluded(concluded) -> None:
    service, campaign = concluded
    with service.store.transaction() as conn:
        before = service.store.event_count(conn)
    stale = campaign.round([15.0, 35.0, 22.0], parent_sha="0" * 64)
    with pytest.raises(InputError, match="stale parent"):
        service.record(campaign.run_id, stale, reopen=REASON)
    with service.store.transaction() as conn:
        assert service.store.event_count(conn) == before
    assert service.view(campaign.run_id).run.conclusion == "inconclusive"


@pytest.mark.parametrize(
    ("conclude", "event", "reason"),
    [
        (False, RunReopened(conclusion="inconclusive", round=2, reason=REASON), "has not"),
        (True, RunReopened(conclusion="passed", round=2, reason=REASON), "does not match"),
        (True, RunReopened(conclusion="inconclusive", round=5, reason=REASON), "does not match"),
    ],
)
def test_verify_refuses_a_reopening_the_history_does_not_justify(
    store, tmp_path, conclude, event, reason
) -> None:
    service = LedgerService(store)
    campaign = Campaign(tmp_path / "campaign")
    service.plan(campaign.config())
    service.record(campaign.run_id, campaign.round([18.2, 40.0, 25.0]))
    if conclude:
        service.conclude(campaign.run_id)
    service.append(campaign.run_id, service.full_view(campaign.run_id), [event], [])
    report = verify_ledger(store)
    assert not report.ok
    failure = report.first_failure
    assert failure is not None and failure.check == "replay" and reason in failure.reason
