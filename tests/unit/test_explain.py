"""explain(): one sentence per round, read from the stored decision, never re-decided."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ledger.core import explain as ex
from ledger.core.events import (
    BestKernel,
    CaseWeight,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    NoiseMeasured,
    ObjectiveFields,
    RoundDecided,
    RunPlanned,
)

OBJECTIVE = ObjectiveFields(
    target_relative_improvement=0.10,
    min_relative_improvement=0.02,
    noise_floor=0.01,
    max_case_regression=0.02,
)
BEST = BestKernel(sha256="a" * 64, path="k.py", round=0, medians_us=[10.0, 20.0])


def decided(
    decision: str,
    medians: list[float] | None,
    *,
    statistics: dict[str, Any] | None = None,
    flags: tuple[str, ...] = (),
) -> RoundDecided:
    from ledger.core.decide import weighted_improvement, worst_regression

    i = r = None
    if medians is not None:
        i = weighted_improvement([1.0, 1.0], BEST.medians_us, medians)
        r = worst_regression(BEST.medians_us, medians)
    return RoundDecided(
        round=3,
        decision=decision,
        evidence="validation" if medians is None else ("samples" if statistics else "medians"),
        case_ids=["small", "large"],
        weights=[1.0, 1.0],
        objective=OBJECTIVE,
        limits=LimitFields(max_rounds=10, max_consecutive_failures=3),
        best_before=BEST,
        candidate_sha256="b" * 64,
        candidate_medians_us=medians,
        relative_improvement=i,
        worst_case_regression=r,
        statistics=statistics,
        best_after=BEST,
        consecutive_failures=1,
        cumulative_improvement=0.0,
        target_met=False,
        needs_diagnosis=False,
        remaining_rounds=7,
        flags=list(flags),
    )


def test_noise_names_the_floor_and_the_size():
    why = ex.explain(decided("NOISE", [10.0, 19.9]))
    assert why.rule == "noise-floor"
    assert why.sentence.startswith("NOISE: |I| = 0.25% is below the noise floor 1.00%")


def test_discard_for_a_regressed_case_names_the_case_and_the_limit():
    why = ex.explain(decided("DISCARD", [8.0, 21.08]))  # I = +7.3%, R = +5.4% on "large"
    assert why.rule == "case-regression"
    assert why.worst_case == "large"
    assert why.sentence == ("DISCARD: worst case R = +5.40% on large is over its limit 2.00%.")


def test_discard_for_too_small_an_improvement():
    why = ex.explain(decided("DISCARD", [9.8, 19.8]))  # I = +1.5%
    assert why.rule == "min-improvement"
    assert "I = +1.50% is below the minimum improvement 2.00%" in why.sentence


def test_keep_on_medians_says_no_samples_tested_it():
    why = ex.explain(decided("KEEP", [9.0, 19.0]))
    assert why.rule == "keep"
    assert why.sentence.startswith("KEEP: I = +7.50% is at least the minimum 2.00%")
    assert "medians only" in why.sentence and "became the best kernel" in why.sentence


def stats(changed_by: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "samples",
        "contract_decision": "KEEP",
        "changed_by": changed_by,
        "improvement_lower": 0.004,
        "regression_upper": 0.031,
        "alpha": 0.05,
        "regression_quantile": 0.8,
        "drift_sigma": 0.0,
        "drift_estimated": False,
        "drift_pairs": 0,
        **extra,
    }


def test_bootstrap_noise_gives_the_lower_bound():
    why = ex.explain(decided("NOISE", [9.0, 19.0], statistics=stats("noise_floor")))
    assert why.rule == "bootstrap-noise-floor"
    assert "the bootstrap's 5% lower bound of I, +0.40%, is not above the noise floor 1.00%" in (
        why.sentence
    )
    assert "drift unestimated" in why.sentence


def test_bootstrap_regression_gives_the_upper_bound_and_the_drift():
    s = stats("case_regression", drift_estimated=True, drift_sigma=0.012, drift_pairs=3)
    why = ex.explain(decided("DISCARD", [9.0, 19.0], statistics=s))
    assert why.rule == "bootstrap-case-regression"
    assert "80% upper bound of R, +3.10%, is over the limit 2.00%" in why.sentence
    assert "drift sigma 1.20% from 3 A/A pairs" in why.sentence


def test_fail_names_the_failed_cases_when_known():
    assert ex.explain(
        decided("FAIL", None), failed_cases=["small (max_abs_err 0.37)"]
    ).sentence == (
        "FAIL: validation failed on case small (max_abs_err 0.37), so the candidate was never "
        "measured."
    )
    assert "not at hand" in ex.explain(decided("FAIL", None)).sentence


def test_the_explanation_follows_the_stored_decision_not_a_new_one():
    # a stored NOISE whose statistics say the bootstrap changed a contract KEEP: the words
    # follow what was recorded even though the medians alone would keep it
    why = ex.explain(decided("NOISE", [9.0, 19.0], statistics=stats("noise_floor")))
    assert why.decision == "NOISE" and why.sentence.startswith("NOISE:")


def test_flags_are_listed_in_the_text_and_explained():
    why = ex.explain(decided("KEEP", [9.0, 19.0], flags=("mechanism-refuted",)))
    assert why.text.endswith("Flags: mechanism-refuted.")
    assert "did not move" in ex.describe_flag("mechanism-refuted")
    assert ex.describe_flag("from-the-future") == "not described by this version of kernel-ledger"


def test_the_glossary_explains_every_flag_the_code_writes():
    root = Path(__file__).resolve().parents[2] / "ledger"
    written: set[str] = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        written |= set(re.findall(r'flags\.append\("([^"]+)"\)', text))
        written |= set(re.findall(r'^(?:FLAG_\w+|\w+_FLAG) = "([^"]+)"', text, re.M))
        # flags.append(NAME) with NAME = "value" in the same module
        constants = dict(re.findall(r'^([A-Z_]+) = "([^"]+)"', text, re.M))
        for name in re.findall(r"flags\.append\(([A-Z_]+)\)", text):
            written.add(constants[name])
    written.discard("also")
    assert {"drift_unestimated", "mechanism-refuted", "reopened", "mixed"} <= written
    assert {"samples-file-not-found", "floor-above-measured"} <= written
    assert written - set(ex.GLOSSARY) == set()
    # the attribution's "also-<class>" flags, one per bottleneck class
    from ledger.core.bottleneck import Bottleneck

    for cls in Bottleneck:
        if cls is not Bottleneck.UNKNOWN:
            assert f"also-{cls}" in ex.GLOSSARY


def measurements(medians: list[float]) -> list[Measurement]:
    return [
        Measurement(case_id=c, median_us=m, repeats=1)
        for c, m in zip(["small", "large"], medians, strict=True)
    ]


def test_noise_summary_pairs_each_remeasure_with_the_kernel_before():
    ref = FileRef(path="x", sha256="c" * 64, size=1)
    plan = RunPlanned(
        run_id="r",
        parent_run_id=None,
        op_name="softmax",
        target={"soc": "x"},
        kernel=ref,
        cases=[CaseWeight(id="small", weight=1.0), CaseWeight(id="large", weight=1.0)],
        objective=OBJECTIVE,
        limits=LimitFields(max_rounds=10, max_consecutive_failures=3),
        config=ref,
        config_document={},
    )
    events = [
        plan,
        MeasurementsRecorded(
            round=0,
            role="baseline",
            kernel_sha256="a" * 64,
            measurements=measurements([10.0, 20.0]),
        ),
        NoiseMeasured(
            kernel_sha256="a" * 64,
            after_round=0,
            measurements=measurements([10.1, 20.0]),
            source=ref,
        ),
    ]
    summary = ex.noise_summary(events)
    assert len(summary.pairs) == 1
    pair = summary.pairs[0]
    assert (pair.first, pair.second) == ("original", "remeasure after round 0")
    assert pair.improvement == pytest.approx(-0.005)
    assert summary.noise_floor == 0.01
    assert "differed by up to 0.50% in I, within the noise floor 1.00%" in summary.sentence


def test_noise_summary_without_remeasures_says_drift_is_not_estimated():
    assert "No A/A remeasures" in ex.noise_summary([]).sentence
