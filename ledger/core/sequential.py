"""Sequential decisions (`statistics.sequential`): decide a round at the first look whose
answer is settled, with the false-KEEP rate held at `alpha` over all looks. Pure: arrays in,
a decision out; no I/O, no clock.

    SequentialConfig.from_mapping(obj)   the validated settings (min_repeats, max_repeats,
                                         batch); `looks()` the sample counts looked at
    alpha_spent(t, alpha)                the spending function: alpha spent by information t
    sequential_decision(...)             the decision at the first settled look, or the
                                         conservative answer when no look settled

Looks are taken at n_1 = min_repeats, n_1 + batch, ... and at max_repeats, on the first n_k
samples of every case on both sides (like positions: docs/statistics.md); at look k the rule
of SPEC 4.2 runs with the KEEP test at level a_k = alpha_spent(t_k) - alpha_spent(t_{k-1}),
t_k = n_k / max_repeats. What settles a look (a KEEP, or futility), what an unsettled round
gets, and why the false-KEEP rate stays at alpha over all looks (the union bound): docs/
statistics.md, "Sequential decisions". Each look's bootstrap seed derives from the look's own
samples, so a decision on only the first `repeats_used` samples re-derives the same look,
settled, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ledger.core import decide
from ledger.core import stats as st

METHOD = "sequential-alpha-spending-pocock/v1"
FUTILITY = 0.025
"""The one-sided level of each look's futility test (I* upper, R* lower quantile)."""
from ledger.core.looks import (  # noqa: E402
    FINAL_SHARE,
    KEYS,
    SequentialConfig,
    alpha_spent,
)

__all__ = ["FINAL_SHARE", "KEYS", "SequentialConfig", "alpha_spent", "sequential_decision"]


@dataclass(frozen=True, slots=True)
class SequentialOutcome:
    """The round's decision and how it was reached: `settled` at the look of `repeats_used`
    candidate samples per case; unsettled, `more_repeats` samples per case the next look
    needs (0: max_repeats reached, the decision is final)."""

    decision: decide.Decision
    settled: bool
    repeats_used: int
    more_repeats: int
    look: int | None  # 1-based index of the deciding look; None before the first look
    evidence: dict[str, Any]


def _prefix(samples: Sequence[np.ndarray], n: int) -> list[np.ndarray]:
    return [s[:n] for s in samples]


def look_seed(context: bytes, weights: Sequence[float], best, cand) -> int:
    """A look's bootstrap seed: from `context` (what names the round, not its samples) and the
    look's own samples, so a decision on a prefix re-derives the look's draws exactly."""
    parts = [context, np.asarray(weights, dtype="<f8").tobytes()]
    for s in (*best, *cand):
        parts.append(np.ascontiguousarray(s, dtype="<f8").tobytes())
    return st.derive_seed(b"sequential-look", *parts)


def sequential_decision(
    *,
    weights: Sequence[float],
    best_samples: Sequence[object],
    cand_samples: Sequence[object],
    paired: bool,
    objective: decide.Objective,
    config: st.StatisticsConfig,
    sequential: SequentialConfig,
    context: bytes = b"",
    drift_sigma: float = 0.0,
    contract: int | None = None,
) -> SequentialOutcome:
    """The sequential rule on one round's raw samples (one array per case, configuration
    order, measurement order). `paired`: the best side is a same-session reference measured
    interleaved with the candidate, so a look takes the same number of samples from both."""
    rules = decide.contract(contract)
    w = [float(x) for x in weights]
    best = [st._as_samples(s, f"best_samples[{i}]") for i, s in enumerate(best_samples)]
    cand = [st._as_samples(s, f"cand_samples[{i}]") for i, s in enumerate(cand_samples)]
    if len(best) != len(cand) or not best or len(w) != len(best):
        raise ValueError("weights, best_samples and cand_samples need one entry per case")
    if any(s is None for s in (*best, *cand)):
        raise ValueError("the sequential rule needs samples for every case on both sides")
    available = min(s.size for s in cand)  # type: ignore[union-attr]
    if paired:
        available = min(available, *(s.size for s in best))  # type: ignore[union-attr]
    like_positions = sequential.unpaired_best == "first-n"
    looks = sequential.looks()
    levels = sequential.levels(config.alpha)
    history: list[dict[str, Any]] = []
    base = {
        "method": METHOD,
        "sequential": sequential.to_dict(),
        "futility": FUTILITY,
        "paired": paired,
        "available_repeats": int(available),
        "drift_sigma": float(drift_sigma),
    }
    last: tuple[decide.Decision, int, int] | None = None
    for index, (n, level) in enumerate(zip(looks, levels, strict=True), start=1):
        if n > available:
            break
        c = _prefix(cand, n)  # type: ignore[arg-type]
        b = _prefix(best, n) if paired or like_positions else list(best)  # type: ignore[arg-type]
        verdict, look = _look(rules, w, b, c, objective, config, level, context, drift_sigma)
        look.update(look=index, repeats=n, level=level)
        history.append(look)
        if verdict is not None:
            return SequentialOutcome(
                verdict,
                True,
                n,
                0,
                index,
                {**base, "settled": True, "repeats_used": n, "looks": history},
            )
        last = (_conservative(rules, look), index, n)
    if last is None:  # fewer than min_repeats samples: no look yet
        first = _prefix(best, available) if paired or like_positions else best  # type: ignore[arg-type]
        b_med = [float(np.median(s)) for s in first]
        c_med = [float(np.median(s)) for s in cand]  # type: ignore[arg-type]
        i = decide.weighted_improvement(w, b_med, c_med)
        r = decide.worst_regression(b_med, c_med)
        provisional = rules.decision(i, r, objective)
        decision = decide.Decision.NOISE if provisional is decide.Decision.KEEP else provisional
        more = sequential.min_repeats - available
        return SequentialOutcome(
            decision,
            False,
            int(available),
            more,
            None,
            {**base, "settled": False, "repeats_used": int(available), "looks": history},
        )
    decision, index, n = last
    following = [m for m in looks if m > n]
    more = following[0] - n if following else 0
    return SequentialOutcome(
        decision,
        False,
        n,
        more,
        index,
        {**base, "settled": False, "repeats_used": n, "more_repeats": more, "looks": history},
    )


def _conservative(rules: decide.Contract, look: dict[str, Any]) -> decide.Decision:
    """An unsettled look's answer: the contract's decision on its medians, KEEP made NOISE."""
    contract = decide.Decision(look["contract_decision"])
    return decide.Decision.NOISE if contract is decide.Decision.KEEP else contract


def _look(
    rules: decide.Contract,
    w: list[float],
    best: list[np.ndarray],
    cand: list[np.ndarray],
    objective: decide.Objective,
    config: st.StatisticsConfig,
    level: float,
    context: bytes,
    drift_sigma: float,
) -> tuple[decide.Decision | None, dict[str, Any]]:
    """One look: the settled decision or None (continue), and what the look saw."""
    b_med = [float(np.median(s)) for s in best]
    c_med = [float(np.median(s)) for s in cand]
    improvement = decide.weighted_improvement(w, b_med, c_med)
    regression = decide.worst_regression(b_med, c_med)
    contract = rules.decision(improvement, regression, objective)
    seed = look_seed(context, w, best, cand)
    rng = np.random.Generator(np.random.PCG64(seed))
    draws_i, draws_r = st._bootstrap(
        rng,
        w,
        st._Side.of(best, smoothed=config.smoothed),
        st._Side.of(cand, smoothed=config.smoothed),
        config.resamples,
    )
    if drift_sigma > 0.0:
        shift = rng.normal(0.0, drift_sigma, size=config.resamples)
        draws_i = draws_i + shift
        draws_r = draws_r - shift
    lower, upper_i = np.quantile(draws_i, [level, 1.0 - FUTILITY], method="linear")
    lower_r, upper_r = np.quantile(draws_r, [FUTILITY, config.regression_quantile], method="linear")
    look: dict[str, Any] = {
        "contract_decision": contract.value,
        "improvement": improvement,
        "worst_regression": regression,
        "improvement_lower": float(lower),
        "improvement_upper": float(upper_i),
        "regression_lower": float(lower_r),
        "regression_upper": float(upper_r),
        "seed": st.seed_hex(seed),
    }
    verdict: decide.Decision | None = None
    if (
        contract is decide.Decision.KEEP
        and lower > objective.noise_floor
        and upper_r <= objective.max_case_regression
    ):
        verdict = decide.Decision.KEEP
        look["settled_by"] = "keep"
    elif lower_r > objective.max_case_regression:
        verdict = decide.Decision.DISCARD
        look["settled_by"] = "futility-regression"
    elif upper_i < objective.min_relative_improvement:
        verdict = decide.Decision.NOISE if contract is decide.Decision.KEEP else contract
        look["settled_by"] = "futility-improvement"
    look["decision"] = None if verdict is None else verdict.value
    return verdict, look
