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


GOLDEN_WORDS = [
    # (run, round, explain(...).text, history --json reason): the words these rounds were
    # given before the contract's words moved into ledger/core/decide.py
    (
        "softmax-demo-001",
        1,
        (
            "KEEP: I = +8.27% is at least the minimum 1.00% and above the noise floor 0.50%, and "
            "worst case R = -3.47% on bf16-64x8193 is within its limit 2.00% (medians only: no raw "
            "samples to test it against noise); the candidate became the best kernel."
        ),
        "I +8.27% reaches 1.00% and R -3.47% stays within 2.00%",
    ),
    (
        "softmax-demo-001",
        2,
        (
            "DISCARD: I = +0.57% is below the minimum improvement 1.00% and worst case R = +5.40% "
            "on bf16-64x8193 is over its limit 2.00%."
        ),
        "I +0.57% is below the minimum improvement 1.00%",
    ),
    (
        "softmax-demo-001",
        3,
        (
            "NOISE: |I| = 0.15% is below the noise floor 0.50%, too small to tell from measurement "
            "noise (worst case R = -0.09% on fp32-4096x129)."
        ),
        "|I| 0.15% is below the noise floor 0.50%",
    ),
    (
        "softmax-demo-001",
        4,
        (
            "FAIL: validation did not pass (the case matrix is not at hand to name the case), so "
            "the candidate was never measured."
        ),
        "validation failed: the candidate was not measured",
    ),
    (
        "softmax-demo-001",
        5,
        (
            "KEEP: I = +6.55% is at least the minimum 1.00% and above the noise floor 0.50%, and "
            "worst case R = -4.88% on bf16-64x8193 is within its limit 2.00% (medians only: no raw "
            "samples to test it against noise); the candidate became the best kernel."
        ),
        "I +6.55% reaches 1.00% and R -4.88% stays within 2.00%",
    ),
    (
        "gpu-softmax-001",
        1,
        (
            "KEEP: I = +9.22% is at least the minimum 2.00% and above the noise floor 1.00%, and "
            "worst case R = +0.41% on fp32-1823x781 is within its limit 10.00%; the bootstrap's 5% "
            "lower bound of I, +8.76%, clears the noise floor and its 80% upper bound of R, +0.78%,"
            " stays within the limit (drift unestimated: 0 A/A pairs usable, 5 needed to widen it); the candidate "
            "became the best kernel. Flags: drift_unestimated, mechanism-refuted."
        ),
        "I +9.22% reaches 2.00% and R +0.41% stays within 10.00%",
    ),
    (
        "gpu-softmax-001",
        3,
        (
            "DISCARD: I = -19.25% is below the minimum improvement 2.00% and worst case R = +45.63%"
            " on fp16-32x4097 is over its limit 10.00%."
        ),
        "I -19.25% is below the minimum improvement 2.00%",
    ),
    (
        "gpu-softmax-001",
        4,
        "DISCARD: I = -3.39% is below the minimum improvement 2.00%.",
        "I -3.39% is below the minimum improvement 2.00%",
    ),
    (
        "gpu-softmax-001",
        7,
        (
            "NOISE: |I| = 0.24% is below the noise floor 1.00%, too small to tell from measurement "
            "noise (worst case R = +0.97% on fp16-32x4097)."
        ),
        "|I| 0.24% is below the noise floor 1.00%",
    ),
    (
        "gpu-rmsnorm-001",
        1,
        (
            "KEEP: I = +8.18% is at least the minimum 2.00% and above the noise floor 1.00%, and "
            "worst case R = +4.00% on fp16-32x4097 is within its limit 10.00%; the bootstrap's 5% "
            "lower bound of I, +7.68%, clears the noise floor and its 80% upper bound of R, +5.02%,"
            " stays within the limit (drift unestimated: 0 A/A pairs usable, 5 needed to widen it); the candidate "
            "became the best kernel. Flags: drift_unestimated."
        ),
        "I +8.18% reaches 2.00% and R +4.00% stays within 10.00%",
    ),
]


def test_the_golden_rounds_are_worded_as_they_always_were(tmp_path):
    """`show` and the report print explain's sentence, `history --json` the short reason;
    both come from the contract version the round records (ledger/core/decide.py)."""
    import json
    import shutil
    import sqlite3

    from ledger.core.events import load_event

    from conftest import CliRunner

    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "ledger.sqlite3"
    with sqlite3.connect(golden) as conn:
        rows = conn.execute(
            "SELECT stream_id, payload FROM events WHERE event_type = 'RoundDecided'"
        ).fetchall()
    decided = {
        (run, d.round): d for run, p in rows if (d := load_event("RoundDecided", 1, json.loads(p)))
    }
    copy = tmp_path / "golden.sqlite3"
    shutil.copyfile(golden, copy)
    cli = CliRunner(f"sqlite:///{copy}")
    assert cli("db", "upgrade").exit_code == 0  # kept at the revision it was made at
    history = cli("history", "--json", "--limit", "100").json()["rounds"]
    reasons = {(r["run_id"], r["round"]): r["reason"] for r in history}
    for run, number, text, reason in GOLDEN_WORDS:
        assert ex.explain(decided[run, number]).text == text
        assert reasons[run, number] == reason


def test_the_worst_case_comes_from_the_reference_the_decision_compared():
    # R +5.4% on "large" against the stored best; against the reference "small" regressed most
    d = decided("DISCARD", [8.0, 21.08])
    assert ex.explain(d).worst_case == "large"
    assert ex.explain(d, reference_us=[7.0, 21.0]).worst_case == "small"
    # decided on a reference whose medians the caller could not read: no case, not a wrong one
    on_reference = d.model_copy(update={"statistics": {"sides": "reference"}})
    assert ex.explain(on_reference).worst_case is None
    assert ex.explain(on_reference, reference_us=[7.0, 21.0]).worst_case == "small"
