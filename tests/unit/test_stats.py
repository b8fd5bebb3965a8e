"""Noise-aware decisions (SPEC 4.2): the bootstrap, its guard rails, drift, config."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.decide import (
    Decision,
    Objective,
    contract_decision,
    weighted_improvement,
    worst_regression,
)
from ledger.core.stats import (
    FLAG_DRIFT_UNESTIMATED,
    METHOD,
    METHOD_SMOOTHED,
    MIN_DRIFT_PAIRS,
    StatisticsConfig,
    _resampled_medians,
    _Side,
    _smoothing_sds,
    derive_seed,
    estimate_drift,
    noise_aware_decision,
)
from ledger.errors import InputError

GOLDEN_V1 = Path(__file__).resolve().parents[1] / "fixtures" / "stats" / "v1-golden.json"

OBJ = Objective(
    target_relative_improvement=0.10,
    min_relative_improvement=0.01,
    noise_floor=0.005,
    max_case_regression=0.02,
)
FAST = StatisticsConfig(resamples=400)


def lognormal(rng: np.random.Generator, median: float, cv: float, n: int) -> np.ndarray:
    return median * rng.lognormal(0.0, math.sqrt(math.log1p(cv * cv)), n)


def medians(samples):
    return [float(np.median(s)) for s in samples]


def decide(best, cand, *, weights=None, objective=OBJ, config=FAST, seed=7, **kw):
    weights = weights or [1.0] * len(best)
    bm = kw.pop("best_medians", None) or medians(best)
    cm = kw.pop("cand_medians", None) or medians(cand)
    contract = contract_decision(
        weighted_improvement(weights, bm, cm), worst_regression(bm, cm), objective
    )
    kw.setdefault("drift_estimated", False)
    return contract, noise_aware_decision(
        contract=contract,
        weights=weights,
        best_samples=best,
        cand_samples=cand,
        best_medians=bm,
        cand_medians=cm,
        objective=objective,
        config=config,
        seed=seed,
        **kw,
    )


# ------------------------------------------------------------------ the sampler


def ks_distance(a: np.ndarray, b_values: np.ndarray, b_probs: np.ndarray) -> float:
    """Largest CDF gap between the sample `a` and a discrete law (values, probabilities)."""
    order = np.argsort(b_values)
    values, probs = b_values[order], b_probs[order]
    grid = np.union1d(a, values)
    cdf_a = np.searchsorted(np.sort(a), grid, side="right") / a.size
    cdf_b = np.concatenate(([0.0], np.cumsum(probs)))[np.searchsorted(values, grid, "right")]
    return float(np.max(np.abs(cdf_a - cdf_b)))


def draw(x: np.ndarray, count: int, seed: int = 11) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(seed))
    return _resampled_medians(rng, _Side.of([x]), count)[0]


@pytest.mark.parametrize("n", [5, 6])
def test_sampler_matches_the_exact_bootstrap_law(n):
    # Every one of the n**n equally likely resamples, enumerated: the exact bootstrap law.
    x = np.array([3.0, 1.0, 4.0, 1.5, 9.0, 2.6][:n])
    index = np.array(list(itertools.product(range(n), repeat=n)))
    exact = np.median(x[index], axis=1)
    values, counts = np.unique(exact, return_counts=True)
    got = draw(x, 20_000)
    assert set(np.unique(got)) <= set(values)
    # 1.63 / sqrt(N) is the 1% critical value of the one-sample KS statistic.
    assert ks_distance(got, values, counts / counts.sum()) < 1.63 / math.sqrt(got.size)


@pytest.mark.parametrize("n", [10, 11, 40])
def test_sampler_matches_a_brute_force_bootstrap(n):
    rng = np.random.default_rng(n)
    x = np.round(lognormal(rng, 20.0, 0.05, n), 1)  # rounding makes ties, as timers do
    count = 20_000
    brute = np.median(x[np.random.default_rng(99).integers(0, n, (count, n))], axis=1)
    values, freq = np.unique(brute, return_counts=True)
    got = draw(x, count)
    # Two-sample KS at the 1% level: 1.63 * sqrt(2 / N).
    assert ks_distance(got, values, freq / count) < 1.63 * math.sqrt(2.0 / count)
    assert got.std() == pytest.approx(brute.std(), rel=0.05)


def test_sampler_handles_mixed_counts_and_parities_in_one_call():
    rng = np.random.default_rng(3)
    cases = [lognormal(rng, 10.0, 0.1, n) for n in (7, 12, 25)]
    got = _resampled_medians(np.random.Generator(np.random.PCG64(5)), _Side.of(cases), 5000)
    for row, x in zip(got, cases, strict=True):
        # Odd counts give sample values; even counts give midpoints of two sample values.
        assert x.min() <= row.min() and row.max() <= x.max()
        assert abs(np.median(row) - np.median(x)) < 0.03 * np.median(x)


# ------------------------------------------------------------ the decision rule


@pytest.mark.parametrize("bootstrap", ["plain", "smoothed"])
def test_medians_only_returns_the_contract_exactly(bootstrap):
    for bm, cm in [([10.0, 20.0], [9.0, 18.0]), ([10.0], [10.02]), ([10.0, 20.0], [9.0, 21.0])]:
        contract = contract_decision(
            weighted_improvement([1.0] * len(bm), bm, cm), worst_regression(bm, cm), OBJ
        )
        outcome = noise_aware_decision(
            contract=contract,
            weights=[1.0] * len(bm),
            best_samples=[None] * len(bm),
            cand_samples=[None] * len(bm),
            best_medians=bm,
            cand_medians=cm,
            objective=OBJ,
            config=StatisticsConfig(bootstrap=bootstrap),
            seed=1,
            drift_estimated=False,
        )
        assert outcome.decision is contract
        ev = outcome.evidence
        assert ev["kind"] == "medians" and ev["improvement_lower"] is None
        assert ev["improvement"] == weighted_improvement([1.0] * len(bm), bm, cm)
        assert ev["best_sample_counts"] == [0] * len(bm)


def test_too_few_samples_on_one_side_falls_back_to_the_contract():
    rng = np.random.default_rng(0)
    best = [lognormal(rng, 10.0, 0.2, 50)]
    cand = [lognormal(rng, 9.0, 0.2, 9)]  # one short of min_samples
    contract, outcome = decide(best, cand)
    assert outcome.decision is contract
    assert outcome.evidence["kind"] == "medians"
    assert outcome.evidence["candidate_sample_counts"] == [9]


def test_noisy_keep_becomes_noise():
    rng = np.random.default_rng(1)
    best = [lognormal(rng, 100.0, 0.10, 12)]
    cand = [lognormal(rng, 100.0, 0.10, 12)]
    cand = [cand[0] * (medians(best)[0] * 0.985 / medians(cand)[0])]  # point gain of 1.5%
    contract, outcome = decide(best, cand)
    assert contract is Decision.KEEP
    assert outcome.decision is Decision.NOISE
    assert outcome.evidence["changed_by"] == "noise_floor"
    assert outcome.evidence["improvement_lower"] <= OBJ.noise_floor


def test_uncertain_case_regression_becomes_discard():
    rng = np.random.default_rng(2)
    tight = [lognormal(rng, 10.0, 0.002, 30), lognormal(rng, 20.0, 0.10, 30)]
    best = tight
    cand = [tight[0] * 0.90, lognormal(rng, 20.0, 0.10, 30)]
    cand[1] *= medians(best)[1] * 1.015 / medians(cand)[1]  # point regression of 1.5%
    contract, outcome = decide(best, cand)
    assert contract is Decision.KEEP
    assert outcome.decision is Decision.DISCARD
    assert outcome.evidence["changed_by"] == "case_regression"
    assert outcome.evidence["regression_upper"] > OBJ.max_case_regression


def test_clear_gain_is_kept_and_advice_follows_the_margin():
    rng = np.random.default_rng(3)
    best = [lognormal(rng, 50.0, 0.002, 40) for _ in range(2)]
    _, big = decide(best, [s * 0.95 for s in best])
    assert big.decision is Decision.KEEP and big.evidence["advice"] is None
    close = Objective(0.1, 0.01, 0.008, 0.02)  # remeasure below 2 * 0.008 = 0.016
    _, small = decide(best, [s * 0.988 for s in best], objective=close)
    assert small.decision is Decision.KEEP
    assert small.evidence["advice"] == "remeasure"


def test_non_keep_contracts_are_never_changed():
    rng = np.random.default_rng(4)
    best = [lognormal(rng, 10.0, 0.01, 20)]
    for factor, expected in [(1.0, Decision.NOISE), (1.2, Decision.DISCARD)]:
        contract, outcome = decide(best, [best[0] * factor])
        assert contract is expected and outcome.decision is expected
        assert outcome.evidence["kind"] == "samples"


def test_seeded_decisions_reproduce_bit_for_bit():
    rng = np.random.default_rng(5)
    best = [lognormal(rng, 10.0, 0.05, 30) for _ in range(4)]
    cand = [lognormal(rng, 9.8, 0.05, 30) for _ in range(4)]
    config = StatisticsConfig()
    runs = [decide(best, cand, config=config, seed=2**64 - 1, drift_sigma=0.004)[1] for _ in "ab"]
    assert runs[0] == runs[1]
    assert rfc8785.dumps(runs[0].evidence) == rfc8785.dumps(runs[1].evidence)
    other = decide(best, cand, config=config, seed=2**64 - 2, drift_sigma=0.004)[1]
    assert other.evidence["improvement_lower"] != runs[0].evidence["improvement_lower"]
    assert runs[0].evidence["seed"] == "ffffffffffffffff"


def test_evidence_records_every_statistic_and_is_canonical_json():
    rng = np.random.default_rng(6)
    best = [lognormal(rng, 10.0, 0.03, 25), lognormal(rng, 30.0, 0.03, 26)]
    cand = [lognormal(rng, 9.5, 0.03, 27), lognormal(rng, 28.0, 0.03, 28)]
    _, outcome = decide(best, cand, weights=[2.0, 1.0], drift_sigma=0.003, drift_estimated=True)
    ev = outcome.evidence
    for key in (
        "kind", "improvement", "worst_regression", "improvement_lower", "regression_upper",
        "improvement_spread", "resamples", "alpha", "regression_quantile", "min_samples", "seed",
        "best_sample_counts", "candidate_sample_counts", "drift_sigma", "drift_estimated",
        "numpy_version", "advice", "method", "contract_decision", "decision", "bootstrap",
    ):  # fmt: skip
        assert key in ev
    assert ev["bootstrap"] == "smoothed" and ev["method"] == METHOD_SMOOTHED
    # "plain" records exactly the keys of decisions recorded before the setting existed
    _, plain = decide(best, cand, config=StatisticsConfig(resamples=400, bootstrap="plain"))
    assert "bootstrap" not in plain.evidence and plain.evidence["method"] == METHOD
    assert set(ev) - set(plain.evidence) == {"bootstrap"}
    assert ev["best_sample_counts"] == [25, 26] and ev["candidate_sample_counts"] == [27, 28]
    assert ev["numpy_version"] == np.__version__ and ev["drift_estimated"] is True
    rfc8785.dumps(ev)  # raises on NaN, infinities and unsafe integers
    json.dumps(ev, allow_nan=False)


def test_drift_widens_improvement_and_regression_together():
    rng = np.random.default_rng(7)
    best = [lognormal(rng, 10.0, 0.01, 50) for _ in range(2)]
    cand = [s * 0.97 for s in best]
    _, calm = decide(best, cand, seed=3)
    _, drifting = decide(best, cand, seed=3, drift_sigma=0.02)
    assert calm.decision is Decision.KEEP and drifting.decision is Decision.NOISE
    assert drifting.evidence["improvement_spread"] > 5 * calm.evidence["improvement_spread"]
    assert drifting.evidence["regression_upper"] > calm.evidence["regression_upper"]


def test_bad_arguments_are_refused():
    best = [np.full(10, 10.0)]
    with pytest.raises(ValueError, match="FAIL"):
        noise_aware_decision(
            contract=Decision.FAIL, weights=[1.0], best_samples=best, cand_samples=best,
            objective=OBJ, seed=1, drift_estimated=False,
        )  # fmt: skip
    with pytest.raises(ValueError, match="contract does not match"):
        noise_aware_decision(
            contract=Decision.KEEP, weights=[1.0], best_samples=best, cand_samples=best,
            objective=OBJ, seed=1, drift_estimated=False,
        )  # fmt: skip
    bad = [np.array([10.0] * 9 + [float("nan")])]
    with pytest.raises(ValueError, match="positive finite"):
        decide(bad, best)
    with pytest.raises(ValueError, match="seed"):
        decide(best, best, seed=-1)
    with pytest.raises(ValueError, match="drift_sigma"):
        decide(best, best, drift_sigma=float("inf"))


# A strategy for whole rounds: 1-4 cases, 3-25 samples per side, any objective.
@st.composite
def rounds(draw):
    cases = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    best, cand = [], []
    for _ in range(cases):
        base = draw(st.floats(1.0, 1000.0))
        cv = draw(st.sampled_from([0.001, 0.01, 0.05, 0.2]))
        shift = draw(st.floats(0.85, 1.1))
        best.append(lognormal(rng, base, cv, draw(st.integers(3, 25))))
        cand.append(lognormal(rng, base * shift, cv, draw(st.integers(3, 25))))
    objective = Objective(
        0.1,
        draw(st.floats(0.0, 0.05)),
        draw(st.floats(0.0, 0.02)),
        draw(st.floats(0.0, 0.05)),
    )
    weights = [draw(st.floats(0.1, 5.0)) for _ in range(cases)]
    config = StatisticsConfig(
        min_samples=draw(st.integers(3, 12)),
        resamples=100,
        alpha=draw(st.floats(0.01, 0.49)),
        regression_quantile=draw(st.floats(0.51, 0.99)),
        bootstrap=draw(st.sampled_from(["plain", "smoothed"])),
    )
    drift = draw(st.sampled_from([0.0, 0.001, 0.02]))
    return best, cand, weights, objective, config, drift, seed


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_statistics_never_create_a_keep(case):
    best, cand, weights, objective, config, drift, seed = case
    contract, outcome = decide(
        best, cand, weights=weights, objective=objective, config=config, seed=seed,
        drift_sigma=drift,
    )  # fmt: skip
    if contract is Decision.KEEP:
        assert outcome.decision in (Decision.KEEP, Decision.NOISE, Decision.DISCARD)
    else:
        assert outcome.decision is contract
    assert outcome.evidence["decision"] == outcome.decision.value
    assert outcome.evidence["contract_decision"] == contract.value
    json.dumps(outcome.evidence, allow_nan=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds(), st.data())
def test_without_enough_samples_the_decision_is_the_contract(case, data):
    # Medians only (no samples, or a case short of min_samples): SPEC 3 exactly, either way.
    best, cand, weights, objective, config, drift, seed = case
    short = data.draw(st.integers(0, len(best) - 1))
    best = [s if i != short else None for i, s in enumerate(best)]
    bm = [data.draw(st.floats(1.0, 1000.0)) for _ in best]
    cm = [m * data.draw(st.floats(0.85, 1.1)) for m in bm]
    contract, outcome = decide(
        best, cand, weights=weights, objective=objective, config=config, seed=seed,
        drift_sigma=drift, best_medians=bm, cand_medians=cm,
    )  # fmt: skip
    assert contract is contract_decision(
        weighted_improvement(weights, bm, cm), worst_regression(bm, cm), objective
    )
    assert outcome.decision is contract and outcome.evidence["kind"] == "medians"
    assert outcome.evidence["improvement_lower"] is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds())
def test_smoothing_never_turns_a_plain_non_keep_into_a_keep_on_a_shared_round(case):
    # Both variants run on the same round: neither creates a KEEP, and each one's KEEP is a
    # contract KEEP.
    best, cand, weights, objective, config, drift, seed = case
    for bootstrap in ("plain", "smoothed"):
        cfg = StatisticsConfig(**{**config.to_dict(), "bootstrap": bootstrap})
        contract, outcome = decide(
            best, cand, weights=weights, objective=objective, config=cfg, seed=seed,
            drift_sigma=drift,
        )  # fmt: skip
        if outcome.decision is Decision.KEEP:
            assert contract is Decision.KEEP


# ------------------------------------------------------------------ smoothing


def _smoothing_sd(sorted_samples: np.ndarray) -> float:
    """`_smoothing_sds` for one case."""
    counts = np.array([sorted_samples.size], dtype=np.int64)
    return float(_smoothing_sds(sorted_samples, np.zeros(1, dtype=np.int64), counts)[0])


def test_smoothing_sd_is_silverman_on_the_log_samples():
    x = np.sort(np.array([9.8, 10.0, 10.1, 10.3, 9.9, 10.6, 10.2, 9.7, 10.4, 10.05]))
    logs = np.log(x)
    q1, q3 = np.quantile(logs, [0.25, 0.75])
    h = 0.9 * min(np.std(logs, ddof=1), (q3 - q1) / 1.34) * 10**-0.2
    assert _smoothing_sd(x) == pytest.approx(math.sqrt(math.pi / 2) * h / math.sqrt(10))
    # all ties: the IQR and the sd are 0, and so is the smoothing
    assert _smoothing_sd(np.full(12, 7.5)) == 0.0
    # more than half tied (timer resolution): the IQR is 0, the sd takes over
    tied = np.sort(np.array([5.0] * 8 + [5.1, 5.3, 4.9]))
    assert _smoothing_sd(tied) == pytest.approx(
        math.sqrt(math.pi / 2) * 0.9 * np.std(np.log(tied), ddof=1) * 11**-0.2 / math.sqrt(11)
    )


def test_smoothing_of_many_cases_at_once_matches_each_case_alone():
    rng = np.random.default_rng(14)
    cases = [np.sort(lognormal(rng, m, cv, n)) for m, cv, n in [(5.0, 0.02, 10), (80.0, 0.1, 37)]]
    cases.append(np.sort(np.round(lognormal(rng, 20.0, 0.01, 12), 1)))  # ties
    cases.append(np.full(10, 3.0))
    side = _Side.of(cases, smoothed=True)
    assert side.smoothing is not None and side.smoothing.shape == (4, 1)
    for got, x in zip(side.smoothing[:, 0], cases, strict=True):
        logs = np.log(x)
        q1, q3 = np.quantile(logs, [0.25, 0.75])
        sd = np.std(logs, ddof=1)
        scale = min(sd, (q3 - q1) / 1.34) if q3 > q1 else sd
        want = math.sqrt(math.pi / 2) * 0.9 * scale * x.size**-0.2 / math.sqrt(x.size)
        if x[0] == x[-1]:
            want = 0.0  # all tied: exactly no smoothing (np.std leaves a rounding residue)
        assert got == pytest.approx(want, rel=1e-12)
    assert _Side.of(cases).smoothing is None


def test_smoothed_medians_are_wider_at_few_samples_and_fade_with_more():
    rng = np.random.default_rng(12)
    ratios = {}
    for n in (10, 100):
        plain_var, smooth_var = [], []
        for t in range(40):
            x = lognormal(rng, 20.0, 0.05, n)
            gen = np.random.Generator(np.random.PCG64(t))
            plain_var.append(np.var(_resampled_medians(gen, _Side.of([x]), 4000)))
            gen = np.random.Generator(np.random.PCG64(t))
            smooth = _resampled_medians(gen, _Side.of([x], smoothed=True), 4000)
            smooth_var.append(np.var(smooth))
            assert smooth.min() > 0.0
        ratios[n] = math.sqrt(np.mean(smooth_var) / np.mean(plain_var))
    assert 1.08 < ratios[10] < 1.3  # about +32% of the variance at 10 samples
    assert 1.0 < ratios[100] < ratios[10]


def test_smoothing_keeps_extreme_samples_positive():
    x = np.array([1.0, 1.0, 1000.0, 2.0, 500.0, 3.0, 1.5, 800.0, 1.2, 900.0])
    got = _resampled_medians(
        np.random.Generator(np.random.PCG64(1)), _Side.of([x], smoothed=True), 5000
    )
    assert np.all(np.isfinite(got)) and got.min() > 0.0


def test_smoothing_only_adds_draws_after_each_sides_betas():
    # The plain draws are a prefix of each side's smoothed draws: same Beta stream.
    rng = np.random.default_rng(13)
    x = [lognormal(rng, 10.0, 0.05, 11), lognormal(rng, 30.0, 0.05, 10)]
    plain = _resampled_medians(np.random.Generator(np.random.PCG64(4)), _Side.of(x), 300)
    gen = np.random.Generator(np.random.PCG64(4))
    side = _Side.of(x, smoothed=True)
    smooth = _resampled_medians(gen, side, 300)
    factor = smooth / plain
    z = np.log(factor) / side.smoothing
    assert np.allclose(z.std(), 1.0, atol=0.15) and np.all(factor > 0.0)


# ------------------------------------------------------------ older recordings


def _golden():
    return json.loads(GOLDEN_V1.read_text(encoding="utf-8"))


def _same_figures(got: dict, want: dict) -> None:
    """Bit for bit under the numpy that recorded them; to round-off under another."""
    recorded_under = _golden()["numpy_version"]
    assert got.keys() == want.keys()
    for key, value in want.items():
        if key == "numpy_version":
            continue
        if isinstance(value, float) and np.__version__ != recorded_under:
            assert got[key] == pytest.approx(value, rel=1e-9), key
        else:
            assert got[key] == value, key


def test_a_recorded_config_without_the_key_replays_the_v1_rule_exactly():
    golden = _golden()["decision"]
    config = StatisticsConfig.from_recorded(golden["recorded_statistics"])
    assert config.bootstrap == "plain"
    objective = Objective(**golden["objective"])
    _, outcome = decide(
        [np.array(s) for s in golden["best"]], [np.array(s) for s in golden["candidate"]],
        weights=golden["weights"], objective=objective, config=config, seed=golden["seed"],
        drift_sigma=golden["drift_sigma"], drift_estimated=golden["drift_estimated"],
    )  # fmt: skip
    _same_figures(outcome.evidence, golden["evidence"])
    # the same round under the new default is decided by the smoothed rule
    _, smoothed = decide(
        [np.array(s) for s in golden["best"]], [np.array(s) for s in golden["candidate"]],
        weights=golden["weights"], objective=objective, seed=golden["seed"],
        config=StatisticsConfig.from_mapping(golden["recorded_statistics"]),
        drift_sigma=golden["drift_sigma"], drift_estimated=golden["drift_estimated"],
    )  # fmt: skip
    assert smoothed.evidence["method"] == METHOD_SMOOTHED
    assert smoothed.evidence["regression_upper"] != golden["evidence"]["regression_upper"]


def test_a_recorded_config_without_the_key_replays_the_v1_drift_exactly():
    golden = _golden()["drift"]
    config = StatisticsConfig.from_recorded(golden["recorded_statistics"])
    estimate = estimate_drift(golden["pairs"], config=config, seed=golden["seed"])
    _same_figures(estimate.to_evidence(), golden["evidence"])


def test_the_controller_replays_runs_planned_before_the_key_with_the_plain_rule():
    from ledger.core.controller import noise_aware
    from ledger.core.evidence import RunEvidence

    golden = _golden()["decision"]
    common = dict(
        run_id="r", round_no=1, weights=golden["weights"],
        best_medians=medians([np.array(s) for s in golden["best"]]),
        candidate_medians=medians([np.array(s) for s in golden["candidate"]]),
        best_samples=golden["best"], candidate_samples=golden["candidate"],
        objective=Objective(**golden["objective"]), contract=Decision.KEEP,
    )  # fmt: skip
    old = RunEvidence()
    old.statistics = {"resamples": 500}  # as planned before the key existed
    _, evidence = noise_aware(evidence=old, **common)
    assert evidence["method"] == METHOD and "bootstrap" not in evidence
    new = RunEvidence()
    new.statistics = StatisticsConfig.planned({"resamples": 500})
    _, evidence = noise_aware(evidence=new, **common)
    assert evidence["method"] == METHOD_SMOOTHED and evidence["bootstrap"] == "smoothed"


# ------------------------------------------------------------------------ drift


def aa_pairs(rng, count, *, drift, cv=0.01, n=30, cases=2):
    """`count` A/A pairs: one kernel, two sessions each with its own multiplicative shift."""
    pairs = []
    for _ in range(count):
        sessions = []
        for _ in range(2):
            shift = math.exp(rng.normal(0.0, drift))
            sessions.append([lognormal(rng, 10.0 * (c + 1), cv, n) * shift for c in range(cases)])
        pairs.append((sessions[0], sessions[1]))
    return pairs


def test_drift_needs_enough_pairs():
    rng = np.random.default_rng(8)
    estimate = estimate_drift(aa_pairs(rng, MIN_DRIFT_PAIRS - 1, drift=0.01), config=FAST)
    assert estimate.sigma == 0.0 and not estimate.estimated
    assert estimate.flags == (FLAG_DRIFT_UNESTIMATED,)
    # Pairs without enough samples do not count towards the minimum.
    short = aa_pairs(rng, MIN_DRIFT_PAIRS, drift=0.01, n=5)
    assert estimate_drift(short, config=FAST).flags == (FLAG_DRIFT_UNESTIMATED,)


def test_drift_estimate_recovers_the_session_spread():
    rng = np.random.default_rng(9)
    estimate = estimate_drift(aa_pairs(rng, 60, drift=0.01), config=FAST)
    assert estimate.estimated and estimate.flags == () and estimate.pairs_used == 60
    # Two sessions of spread 1% each: I of a pair spreads by sqrt(2) %.
    assert estimate.sigma == pytest.approx(0.01 * math.sqrt(2.0), rel=0.3)
    assert estimate.bootstrap_variance < estimate.improvement_variance
    evidence = estimate.to_evidence()
    assert evidence["drift_sigma"] == estimate.sigma
    rfc8785.dumps(evidence)


def test_no_drift_estimates_near_zero_and_is_reproducible():
    rng = np.random.default_rng(10)
    pairs = aa_pairs(rng, 12, drift=0.0, cv=0.02)
    first = estimate_drift(pairs, config=FAST)
    assert first.estimated and first.sigma < 0.003
    assert estimate_drift(pairs, config=FAST) == first  # seed derived from the samples
    assert estimate_drift(pairs, config=FAST, seed=1).seed == 1


# ------------------------------------------------------------------- seed/config


def test_derive_seed_is_a_stable_64_bit_hash_of_length_prefixed_parts():
    a = derive_seed(b"ab", b"c")
    assert a == derive_seed(b"ab", b"c")
    assert a != derive_seed(b"a", b"bc")
    assert 0 <= a < 2**64
    with pytest.raises(TypeError):
        derive_seed("text")  # type: ignore[arg-type]


def test_config_defaults_and_mapping():
    assert StatisticsConfig.from_mapping(None) == StatisticsConfig()
    config = StatisticsConfig.from_mapping({"resamples": 500, "alpha": 0.1})
    assert config == StatisticsConfig(min_samples=10, resamples=500, alpha=0.1)
    assert StatisticsConfig.from_mapping({"regression_quantile": 1 - 0.2}).to_dict() == {
        "min_samples": 10,
        "resamples": 2000,
        "alpha": 0.05,
        "regression_quantile": 0.8,
        "bootstrap": "smoothed",
    }


def test_recorded_configs_default_to_the_rule_they_were_recorded_under():
    # A configuration written by the user: absent means the current default, "smoothed".
    # A recorded one (RunPlanned.statistics): absent means "plain", the rule before the key.
    assert StatisticsConfig.from_recorded(None).bootstrap == "plain"
    assert StatisticsConfig.from_recorded({"alpha": 0.1}) == StatisticsConfig(
        alpha=0.1, bootstrap="plain"
    )
    assert StatisticsConfig.from_recorded({"bootstrap": "smoothed"}) == StatisticsConfig()
    # plan records the key for every new run, so its replays read "smoothed" back
    assert StatisticsConfig.planned(None) == {"bootstrap": "smoothed"}
    assert StatisticsConfig.planned({"alpha": 0.1}) == {"alpha": 0.1, "bootstrap": "smoothed"}
    assert StatisticsConfig.planned({"bootstrap": "plain"}) == {"bootstrap": "plain"}
    for planned in (None, {"alpha": 0.1}, {"bootstrap": "plain"}):
        recorded = StatisticsConfig.planned(planned)
        assert StatisticsConfig.from_recorded(recorded) == StatisticsConfig.from_mapping(planned)
    with pytest.raises(InputError, match=r"statistics\.bootstrap must be one of"):
        StatisticsConfig.from_recorded({"bootstrap": "jackknife"})


def test_plan_records_the_default_bootstrap(tmp_path):
    from ledger.inputs.models import load_config
    from ledger.services.building import plan_events

    from campaign import Campaign

    doc, config = load_config(Campaign(tmp_path).config())
    planned = plan_events(doc, config, tmp_path).events[0]
    assert planned.statistics == {"bootstrap": StatisticsConfig().bootstrap}


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"bootstraps": 10}, "statistics.bootstraps is not a known setting"),
        ({"resamples": 99}, "statistics.resamples must be between 100 and 100000"),
        ({"resamples": 100_001}, "statistics.resamples must be between 100 and 100000"),
        ({"resamples": 2000.0}, "statistics.resamples must be an integer"),
        ({"min_samples": True}, "statistics.min_samples must be an integer"),
        ({"min_samples": 2}, "statistics.min_samples must be at least 3"),
        ({"alpha": 0.5}, "statistics.alpha must be strictly between 0.0 and 0.5"),
        ({"alpha": 0}, "statistics.alpha must be strictly between 0.0 and 0.5"),
        ({"alpha": float("nan")}, "statistics.alpha must be finite"),
        ({"alpha": False}, "statistics.alpha must be a number"),
        ({"alpha": "0.05"}, "statistics.alpha must be a number"),
        ({"regression_quantile": 1.0}, "statistics.regression_quantile must be strictly"),
        ({"regression_quantile": float("inf")}, "statistics.regression_quantile must be finite"),
        ({"bootstrap": "jackknife"}, "statistics.bootstrap must be one of plain, smoothed"),
        ({"bootstrap": None}, "statistics.bootstrap must be one of plain, smoothed"),
    ],
)
def test_config_rejections_name_the_field(mapping, message):
    with pytest.raises(InputError) as caught:
        StatisticsConfig.from_mapping(mapping)
    assert message in caught.value.message
    assert "\n" not in caught.value.message


def test_config_must_be_an_object():
    with pytest.raises(InputError, match="statistics must be an object"):
        StatisticsConfig.from_mapping([("alpha", 0.1)])  # type: ignore[arg-type]
