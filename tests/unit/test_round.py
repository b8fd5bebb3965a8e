"""The one round path (ledger/core/round.py): which rounds are admitted, how a refusal is worded
where it is reported, and the events a round becomes. Pure: no store, no files."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from ledger.core import projections
from ledger.core.controller import conclusion_event, decide_round
from ledger.core.events import (
    CaseWeight,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    ObjectiveFields,
    ProfileRecorded,
    RoundDecided,
    RoundSubmitted,
    RunPlanned,
    ValidationLinked,
)
from ledger.core.evidence import RunEvidence
from ledger.core.round import RULES, admit, decision, round_events

ROOT = Path(__file__).resolve().parents[2]
KERNEL = FileRef(path="/k/v0.py", sha256="a" * 64, size=10)
CASES = [("c1", 1.0), ("c2", 2.0)]


def _plan(max_rounds: int = 3) -> RunPlanned:
    return RunPlanned(
        run_id="run-1",
        parent_run_id=None,
        op_name="softmax",
        target={"soc": "Ascend910B2"},
        kernel=KERNEL,
        cases=[CaseWeight(id=c, weight=w) for c, w in CASES],
        objective=ObjectiveFields(
            target_relative_improvement=0.5,
            min_relative_improvement=0.01,
            noise_floor=0.005,
            max_case_regression=0.02,
        ),
        limits=LimitFields(max_rounds=max_rounds, max_consecutive_failures=2),
        config=KERNEL,
        config_document={},
    )


def _measured(round_no: int, sha: str, medians: list[float], samples: bool = False):
    return [
        Measurement(
            case_id=c,
            median_us=m,
            repeats=5,
            samples_us=[m * f for f in (0.99, 1.0, 1.0, 1.01, 1.0)] if samples else None,
        )
        for (c, _), m in zip(CASES, medians, strict=True)
    ]


def _start(max_rounds: int = 3, samples: bool = False):
    plan = _plan(max_rounds)
    base = MeasurementsRecorded(
        round=0,
        role="baseline",
        kernel_sha256=KERNEL.sha256,
        measurements=_measured(0, KERNEL.sha256, [10.0, 20.0], samples),
    )
    view = projections.apply(None, 1, "t", plan)
    view = projections.apply(view, 2, "t", base)
    evidence = RunEvidence()
    evidence.apply(plan)
    evidence.apply(base)
    return plan, view, evidence


def _round(view, number: int, *, passed: bool = True, signals=None, expected=None):
    sha = f"{number:064x}"
    submitted = RoundSubmitted(
        round=number,
        parent_kernel_sha256=view.run.best_kernel_sha256,
        candidate=FileRef(path=f"/k/r{number}.py", sha256=sha, size=10),
        hypothesis="h",
        change=f"BLOCK={number - 1} -> {number}",
        profiler_signals=signals,
        expected_signal=expected,
        result=KERNEL,
        result_document={},
    )
    validation = ValidationLinked(
        round=number,
        kernel_sha256=sha,
        manifest=KERNEL,
        manifest_run_id="m",
        manifest_parent_run_id="run-1",
        status="passed" if passed else "failed",
        case_matrix=None,
        case_ids=[c for c, _ in CASES],
    )
    return submitted, validation


def _inputs(plan, view, evidence, submitted, validation, measurements):
    return {
        "view": view,
        "evidence": evidence,
        "plan": plan,
        "submitted": submitted,
        "validation": validation,
        "measurements": measurements,
    }


def _apply(view, events):
    version = view.run.stream_version
    for event in events:
        version += 1
        view = projections.apply(view, version, "t", event)
    return view


def test_the_next_round_on_the_best_kernel_is_admitted():
    _, view, _ = _start()
    assert admit(view, 1, KERNEL.sha256) == []


def test_every_broken_rule_is_reported_in_rule_order():
    _, view, _ = _start()
    refused = admit(view, 3, "b" * 64)
    assert [r.rule for r in refused] == ["order", "parent"]
    assert [r.message for r in refused] == [
        "round 3 is out of order: the next round of run 'run-1' is 1",
        f"stale parent: parent_kernel_sha256 {'b' * 64} is not the current best kernel of "
        f"run 'run-1' ({KERNEL.sha256})",
    ]
    assert [r.reason for r in refused] == [
        "round 3 is out of sequence",
        "the round's parent was not the best kernel of its time",
    ]
    assert refused[0].problem("rounds.json rounds[0]") == (
        "rounds.json rounds[0] is round 3, but the next round is 1"
    )
    assert refused[1].problem("x") == (
        f"broken parent chain: round 3 names parent {'b' * 12}…, but the best kernel after "
        f"round 0 was {'a' * 12}…"
    )
    assert set(RULES) >= {r.rule for r in refused}


def test_a_spent_budget_and_a_concluded_run_refuse_every_round():
    plan, view, evidence = _start(max_rounds=1)
    submitted, validation = _round(view, 1, passed=False)
    outcome = round_events(**_inputs(plan, view, evidence, submitted, validation, None))
    view = _apply(view, outcome.events)
    spent = admit(view, 2, view.run.best_kernel_sha256)
    assert [r.rule for r in spent] == ["budget"]
    assert spent[0].message == "round budget exhausted: run 'run-1' has recorded all 1 rounds"
    assert spent[0].reason == "round 2 exceeds max_rounds"
    assert spent[0].problem("x") == "round 2 is beyond the budget of 1 rounds"
    full = projections.RunView(run=view.run, cases=view.cases, rounds=view.rounds)
    view = _apply(view, [conclusion_event(full)])
    refused = admit(view, 2, view.run.best_kernel_sha256)
    assert [r.rule for r in refused] == ["concluded", "budget"]
    assert refused[0].message == "run 'run-1' has concluded (failed); it accepts no rounds"
    assert refused[0].reason == "a round was submitted after the run concluded"


def test_a_failed_validation_becomes_three_events_and_a_fail():
    plan, view, evidence = _start()
    submitted, validation = _round(view, 1, passed=False)
    outcome = round_events(**_inputs(plan, view, evidence, submitted, validation, None))
    assert [type(e) for e in outcome.events] == [RoundSubmitted, ValidationLinked, RoundDecided]
    assert outcome.decided is outcome.events[-1]
    assert outcome.decided.decision == "FAIL"
    assert outcome.decided.evidence == "validation"
    assert evidence.failed_mechanisms == {"BLOCK": [1]}  # the decision is folded in too


def test_a_measured_round_with_signals_is_profiled_before_its_decision():
    plan, view, evidence = _start(samples=True)
    submitted, validation = _round(
        view,
        1,
        signals={"vector_ratio": 0.5, "mte2_ratio": 0.2},
        expected={"metric": "vector_ratio", "direction": "increase", "min_change": 0.1},
    )
    measured = _measured(1, submitted.candidate.sha256, [8.0, 16.0], samples=True)
    untouched = copy.deepcopy(evidence)
    outcome = round_events(**_inputs(plan, view, evidence, submitted, validation, measured))
    kinds = [type(e) for e in outcome.events]
    assert kinds == [
        RoundSubmitted,
        ValidationLinked,
        MeasurementsRecorded,
        ProfileRecorded,
        RoundDecided,
    ]
    profile = outcome.events[3]
    assert isinstance(profile, ProfileRecorded)
    assert profile.origin == "round-result" and profile.kernel_sha256 == submitted.candidate.sha256
    decided = outcome.decided
    assert decided.decision == "KEEP"
    assert decided.mechanism_check is not None  # the candidate's profile was folded first
    # the same decision as the pure core gives on the same evidence
    for event in outcome.events[:-1]:
        untouched.apply(event)
    assert decided == decide_round(
        view=view,
        submitted=submitted,
        evidence=untouched,
        candidate_medians=[8.0, 16.0],
        candidate_samples=[list(m.samples_us or []) for m in measured],
    )
    assert decision(view, submitted, untouched, measured) == decided


def _calls(name: str) -> list[str]:
    found = []
    for folder in ("ledger", "cli", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call):
                    func = node.func
                    called = (
                        func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    )
                    if called == name:
                        found.append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("name", ["decide_round"])
def test_decide_round_has_one_caller(name):
    """Every decision, recorded, imported, replayed or generated, goes through round.py."""
    assert _calls(name) == ["ledger/core/round.py"]


def test_every_round_writer_goes_through_the_round_module():
    assert sorted(set(_calls("round_events"))) == [
        "benchmarks/workload.py",
        "ledger/services/legacy.py",
        "ledger/services/writes.py",
    ]
    assert sorted(set(_calls("admit"))) == [
        "benchmarks/workload.py",
        "ledger/integrity/verify.py",
        "ledger/services/legacy.py",
        "ledger/services/writes.py",
    ]
