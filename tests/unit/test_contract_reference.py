"""An independent, deliberately plain reference of SPEC 3, compared with the controller's
pure core (decide_round + the projection fold) over thousands of generated round
sequences. The reference shares no code with ledger/. It is version 1 of the contract (the
JSON-file controller's rules, which old histories replay under forever), so the core is
asked for version 1 by number: a newer version never changes what this test holds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core import projections
from ledger.core.controller import conclusion_event, decide_round
from ledger.core.events import (
    CaseWeight,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    ObjectiveFields,
    RoundSubmitted,
    RunPlanned,
)
from ledger.core.evidence import RunEvidence


def reference(config, rounds):
    """SPEC 3 as written, in plain Python. Returns per-round tuples and the conclusion."""
    weights = [w for _, w in config["cases"]]
    total = 0.0
    for w in weights:
        total += w
    baseline = list(config["baseline"])
    best = list(baseline)
    obj = config["objective"]
    failures = 0
    out = []
    for n, cand in enumerate(rounds, start=1):
        if cand is None:
            decision, imp, reg = "FAIL", None, None
        else:
            imp = 0.0
            for w, b, c in zip(weights, best, cand, strict=True):
                imp += (w / total) * ((b - c) / b)
            reg = max((c - b) / b for b, c in zip(best, cand, strict=True))
            if abs(imp) < obj["noise_floor"]:
                decision = "NOISE"
            elif imp >= obj["min"] and reg <= obj["max_reg"]:
                decision = "KEEP"
            else:
                decision = "DISCARD"
        if decision == "KEEP":
            best = list(cand)
            failures = 0
        else:
            failures += 1
        cumulative = 0.0
        for w, b, c in zip(weights, baseline, best, strict=True):
            cumulative += (w / total) * ((b - c) / b)
        target_met = cumulative >= obj["target"]
        needs = failures >= config["max_cf"]
        remaining = config["max_rounds"] - n
        out.append((decision, imp, reg, cumulative, target_met, needs, remaining))
    if not out:
        return out, None
    _, _, _, _, target_met, needs, remaining = out[-1]
    conclusion = (
        "passed" if target_met else ("failed" if remaining <= 0 or needs else "inconclusive")
    )
    return out, conclusion


positive = st.floats(min_value=0.5, max_value=500.0, allow_nan=False, allow_infinity=False)


@st.composite
def campaigns(draw):
    n_cases = draw(st.integers(1, 5))
    cases = [(f"c{i}", draw(st.floats(0.1, 10.0))) for i in range(n_cases)]
    baseline = [draw(positive) for _ in range(n_cases)]
    objective = {
        "target": draw(st.sampled_from([0.0, 0.05, 0.1, 0.3])),
        "min": draw(st.sampled_from([0.0, 0.01, 0.02])),
        "noise_floor": draw(st.sampled_from([0.0, 0.005, 0.01])),
        "max_reg": draw(st.sampled_from([0.0, 0.02, 0.05])),
    }
    max_rounds = draw(st.integers(1, 12))
    config = {
        "cases": cases,
        "baseline": baseline,
        "objective": objective,
        "max_rounds": max_rounds,
        "max_cf": draw(st.integers(1, 4)),
    }
    rounds = []
    for _ in range(draw(st.integers(0, max_rounds))):
        if draw(st.booleans()) and draw(st.booleans()):
            rounds.append(None)
            continue
        # candidates near the baseline make every decision reachable
        factors = [draw(st.floats(0.85, 1.08)) for _ in range(n_cases)]
        rounds.append([b * f for b, f in zip(baseline, factors, strict=True)])
    return config, rounds


def controller(config, rounds):
    ref = FileRef(path="/k.py", sha256="0" * 64, size=1)
    planned = RunPlanned(
        run_id="r",
        parent_run_id=None,
        op_name="op",
        target={"soc": "x"},
        kernel=ref,
        cases=[CaseWeight(id=c, weight=w) for c, w in config["cases"]],
        objective=ObjectiveFields(
            target_relative_improvement=config["objective"]["target"],
            min_relative_improvement=config["objective"]["min"],
            noise_floor=config["objective"]["noise_floor"],
            max_case_regression=config["objective"]["max_reg"],
        ),
        limits=LimitFields(
            max_rounds=config["max_rounds"], max_consecutive_failures=config["max_cf"]
        ),
        config=ref,
        config_document={},
    )
    baseline = MeasurementsRecorded(
        round=0,
        role="baseline",
        kernel_sha256=ref.sha256,
        measurements=[
            Measurement(case_id=c, median_us=m, repeats=1)
            for (c, _), m in zip(config["cases"], config["baseline"], strict=True)
        ],
    )
    view = projections.apply(None, 1, "t", planned)
    view = projections.apply(view, 2, "t", baseline)
    version = 2
    out = []
    for n, cand in enumerate(rounds, start=1):
        sha = f"{n:064x}"
        submitted = RoundSubmitted(
            round=n,
            parent_kernel_sha256=view.run.best_kernel_sha256,
            candidate=FileRef(path=f"/c{n}.py", sha256=sha, size=1),
            hypothesis="h",
            change="c",
            result=ref,
            result_document={},
        )
        decided = decide_round(
            view=view,
            submitted=submitted,
            evidence=RunEvidence(),
            candidate_medians=cand,
            contract=1,
        )
        view = projections.apply(view, version + 1, "t", submitted)
        view = projections.apply(view, version + 2, "t", decided)
        version += 2
        out.append(
            (
                decided.decision,
                decided.relative_improvement,
                decided.worst_case_regression,
                decided.cumulative_improvement,
                decided.target_met,
                decided.needs_diagnosis,
                decided.remaining_rounds,
            )
        )
    conclusion = conclusion_event(view, contract=1).conclusion if rounds else None
    return out, conclusion


@settings(max_examples=3000, deadline=None)
@given(campaigns())
def test_controller_matches_reference_bit_for_bit(case):
    config, rounds = case
    assert controller(config, rounds) == reference(config, rounds)
