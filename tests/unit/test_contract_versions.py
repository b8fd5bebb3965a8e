"""The contract is versioned (ledger/core/decide.py): a new decision is made under the newest
version and records it; a stored decision or conclusion replays under the version it records,
and one that records none is version 1. A made-up version 3 shows it: added to the public
registry `decide.CONTRACTS`, it decides what is recorded from then on, while the golden
ledger and the rounds recorded before it still verify under the versions they record."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ledger.core import decide, projections
from ledger.core.controller import conclusion_as_recorded, conclusion_event
from ledger.core.decide import ChainedContract, Contract, Decision, Grounds, Objective
from ledger.core.events import (
    MeasurementsRecorded,
    RoundDecided,
    RunPlanned,
    load_event,
)

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "ledger.sqlite3"
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"
OBJ = Objective(0.10, min_relative_improvement=0.01, noise_floor=0.005, max_case_regression=0.02)


class TwiceTheFloor(ChainedContract):
    """A made-up version 3: a change smaller than twice the noise floor is noise."""

    version = 3

    def decision(self, improvement: float, regression: float, objective: Objective) -> Decision:
        if abs(improvement) < 2 * objective.noise_floor:
            return Decision.NOISE
        return super().decision(improvement, regression, objective)

    def grounds(self, decision, improvement, regression, objective, worst_case=None) -> Grounds:
        if decision != Decision.NOISE:
            return super().grounds(decision, improvement, regression, objective, worst_case)
        twice = 2 * objective.noise_floor
        return Grounds(
            Decision.NOISE,
            "noise-floor",
            f"|I| = {abs(improvement) * 100:.2f}% is below twice the noise floor, "
            f"{twice * 100:.2f}%",
            f"|I| {abs(improvement):.2%} is below twice the noise floor {twice:.2%}",
        )


@pytest.fixture
def version_three(monkeypatch):
    monkeypatch.setitem(decide.CONTRACTS, 3, TwiceTheFloor())


def test_the_versions_today_are_one_and_two():
    """The day a rule changes, it gets the next version and this test a line for it.
    Version 2 chains the cumulative improvement over same-session references."""
    assert sorted(decide.CONTRACTS) == [1, 2]
    assert decide.contract().version == 2
    assert type(decide.contract(1)) is Contract
    assert type(decide.contract(2)) is ChainedContract


@pytest.mark.parametrize(
    ("improvement", "regression", "one", "two"),
    [
        (0.0049999, 0.0, Decision.NOISE, Decision.NOISE),
        (0.005, 0.0, Decision.DISCARD, Decision.NOISE),  # at the floor: not noise under 1
        (0.0099999, -0.1, Decision.DISCARD, Decision.NOISE),
        (0.01, 0.02, Decision.KEEP, Decision.KEEP),  # twice the floor is not noise under 2
        (0.01, 0.0200001, Decision.DISCARD, Decision.DISCARD),
        (-0.5, -0.1, Decision.DISCARD, Decision.DISCARD),
    ],
)
def test_each_version_decides_by_its_own_rule(version_three, improvement, regression, one, two):
    assert decide.contract(1).decision(improvement, regression, OBJ) is one
    assert decide.contract(2).decision(improvement, regression, OBJ) is one
    assert decide.contract(3).decision(improvement, regression, OBJ) is two
    # the newest version decides what is decided now (record, the dry-run decide)
    assert decide.contract().version == 3
    assert decide.contract_decision(improvement, regression, OBJ) is two


def test_each_version_words_its_own_outcome(version_three):
    one = decide.contract(1).grounds(Decision.DISCARD, 0.006, 0.0, OBJ)
    assert (one.rule, one.sentence()) == (
        "min-improvement",
        "DISCARD: I = +0.60% is below the minimum improvement 1.00%.",
    )
    two = decide.contract(3).grounds(Decision.NOISE, 0.006, 0.0, OBJ)
    assert two.sentence() == "NOISE: |I| = 0.60% is below twice the noise floor, 1.00%."


def test_an_unknown_version_is_refused_with_the_versions_known():
    with pytest.raises(ValueError, match=r"contract version 4 is not known .*\(1, 2\)$"):
        decide.contract(4)
    stored = _golden_payloads("RoundDecided")[0]
    with pytest.raises(ValueError, match="contract version 4 is not known"):
        load_event("RoundDecided", 1, {**stored, "contract": 4})


def test_version_one_is_recorded_by_leaving_the_key_out():
    """So every decision recorded before versions existed, and every one under version 1
    since, has the very bytes it had; a later version is written."""
    stored = _golden_payloads("RoundDecided")[0]
    assert "contract" not in stored
    old = load_event("RoundDecided", 1, stored)
    assert old.contract == 1
    assert old.payload() == stored
    newer = old.model_copy(update={"contract": 2})
    assert newer.payload() == {**stored, "contract": 2}
    assert load_event("RoundDecided", 1, newer.payload()) == newer
    concluded = _golden_payloads("RunConcluded")[0]
    assert load_event("RunConcluded", 1, concluded).payload() == concluded


def test_the_golden_ledger_replays_under_version_one_after_later_versions_exist(
    version_three, tmp_path
):
    # version 3 would not have made the decisions the golden ledger holds
    measured = [
        d
        for d in map(RoundDecided.model_validate, _golden_payloads("RoundDecided"))
        if d.relative_improvement is not None and d.worst_case_regression is not None
    ]
    differ = [
        d
        for d in measured
        if decide.contract(3).decision(
            d.relative_improvement, d.worst_case_regression, Objective.of(d.objective)
        )
        != (d.statistics or {}).get("contract_decision", d.decision)
    ]
    assert [(d.round, d.decision, d.evidence) for d in differ] == [
        (2, "DISCARD", "medians"),
        (5, "DISCARD", "samples"),
    ]
    copy = tmp_path / "golden.sqlite3"
    shutil.copyfile(GOLDEN, copy)
    cli = CliRunner(f"sqlite:///{copy}")
    assert cli("db", "upgrade").exit_code == 0  # kept at the revision it was made at
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout


def test_a_run_recorded_across_a_new_version_replays_each_round_under_its_own(
    monkeypatch, tmp_path
):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    cli = CliRunner(url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    assert _record(cli, 1) == "KEEP"
    assert _record(cli, 2) == "DISCARD"  # I +0.57%: above the floor 0.50%, below the minimum
    monkeypatch.setitem(decide.CONTRACTS, 3, TwiceTheFloor())
    assert [_record(cli, n) for n in (3, 4, 5)] == ["NOISE", "FAIL", "KEEP"]
    analyzed = cli("analyze", "--run", RUN, "--output-dir", tmp_path / "out", "--json")
    assert analyzed.exit_code == 0, analyzed.stderr

    versions = [(e["event_type"], e["payload"].get("contract")) for e in _events(url)]
    assert [v for t, v in versions if t == "RoundDecided"] == [2, 2, 3, 3, 3]
    assert [v for t, v in versions if t == "RunConcluded"] == [3]
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    shown = cli("show", "--run", RUN, "--round", "2", "--json").json()
    assert shown["explanation"]["sentence"] == (
        "DISCARD: I = +0.57% is below the minimum improvement 1.00% and worst case R = "
        "+5.40% on bf16-64x8193 is over its limit 2.00%."
    )
    shown = cli("show", "--run", RUN, "--round", "3", "--json").json()
    assert shown["explanation"]["sentence"] == (
        "NOISE: |I| = 0.15% is below twice the noise floor, 1.00%."
    )

    # a kernel-ledger that knows only versions 1 and 2 refuses what it cannot replay
    monkeypatch.delitem(decide.CONTRACTS, 3)
    refused = cli("verify", "--json")
    assert refused.exit_code == 1
    failure = refused.json()["first_failure"]
    assert failure["check"] == "payload"
    assert "contract version 3 is not known to this kernel-ledger (1, 2)" in failure["reason"]


def test_a_conclusion_before_any_round_may_rest_on_either_reading_under_version_one_only(
    version_three,
):
    """Before migration 0008 a target of 0 counted as met from the plan on; version-1
    conclusions do not say which reading they were drawn under, a later version's do."""
    plan = RunPlanned.model_validate(_golden_payloads("RunPlanned")[0])
    zero = plan.objective.model_copy(update={"target_relative_improvement": 0.0})
    baseline = MeasurementsRecorded.model_validate(_golden_payloads("MeasurementsRecorded")[0])
    assert baseline.role == "baseline"
    view = projections.apply(None, 1, "t", plan.model_copy(update={"objective": zero}))
    view = projections.apply(view, 2, "t", baseline)  # and analyzed at once
    today = conclusion_event(view)
    assert (today.contract, today.conclusion, today.target_met) == (3, "inconclusive", False)
    earlier = today.model_copy(update={"conclusion": "passed", "target_met": True})
    for version in (1, 2, 3):
        assert conclusion_as_recorded(view, today.model_copy(update={"contract": version}))
    assert conclusion_as_recorded(view, earlier.model_copy(update={"contract": 1}))
    assert not conclusion_as_recorded(view, earlier)  # recorded under version 3


def _record(cli: CliRunner, n: int) -> str:
    done = cli("record", "--run", RUN, "--result", DEMO / "rounds" / f"round-{n}.json", "--json")
    assert done.exit_code == 0, done.stderr
    return done.json()["decision"]


def _events(url: str) -> list[dict]:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        rows = conn.execute("SELECT event_type, payload FROM events ORDER BY seq").fetchall()
    return [{"event_type": t, "payload": json.loads(p)} for t, p in rows]


def _golden_payloads(event_type: str) -> list[dict]:
    with sqlite3.connect(GOLDEN) as conn:
        rows = conn.execute(
            "SELECT payload FROM events WHERE event_type = ? ORDER BY seq", (event_type,)
        ).fetchall()
    return [json.loads(p) for (p,) in rows]
