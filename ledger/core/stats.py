"""Noise-aware decisions from raw timing samples (SPEC 4.2). Pure: arrays in, numbers out.

The contract decision of SPEC 3 (``ledger.core.decide``) always comes first. Statistics may only
turn its ``KEEP`` into ``NOISE`` or ``DISCARD``; they never create a ``KEEP`` and never touch
any other decision.

With at least ``min_samples`` samples per case on both sides, a seeded bootstrap resamples
every case's samples (with replacement, same size) and takes the median, giving resampled
medians b_i, c_i and from them

    I* = sum_i (w_i / W) * (b_i - c_i) / b_i        R* = max_i (c_i - b_i) / b_i

A measured session drift sigma_d adds one N(0, sigma_d^2) draw e to each resample:
I* + e and R* - e (a session shift moves every case's relative change by the same amount,
so it enters I and R together, with opposite signs). Then

* ``NOISE``   if quantile(I*, alpha) <= noise_floor;
* ``DISCARD`` if quantile(R*, regression_quantile) > max_case_regression;
* otherwise the contract's ``KEEP`` stands.

docs/statistics.md derives the rest: the smoothed bootstrap (``bootstrap: "smoothed"``, the
default; "plain" is the rule as first recorded, and a recorded configuration without the key
means "plain", so older events replay exactly), resampled medians drawn as two Beta order
statistics instead of n draws, and reproducibility: ``Generator(PCG64(seed))`` draws in a
fixed order, sums over cases left to right, never through BLAS; the evidence records the
numpy version, as another platform's C math library may differ in the last bits.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from statistics import NormalDist
from typing import Any

import numpy as np

from ledger.core.aa import (  # noqa: F401 (re-exported)
    DRIFT_PAIRS_RULE,
    FLAG_DRIFT_UNESTIMATED,
    MIN_DRIFT_PAIRS,
)
from ledger.core.decide import (
    CONTRACTS,
    Decision,
    Objective,
    weighted_improvement,
    worst_regression,
)
from ledger.errors import InputError

METHOD = "bootstrap-median-order-statistics/v1"  # bootstrap "plain"
METHOD_SMOOTHED = "bootstrap-median-order-statistics-smoothed/v2"  # bootstrap "smoothed"
BOOTSTRAPS = ("plain", "smoothed")
RECORDED_DEFAULT_BOOTSTRAP = "plain"  # what a recorded configuration without the key meant
SEED_DOMAIN = b"kernel-ledger/statistics/v1"
DEFAULT_ASSUMED_DRIFT = 0.02
"""statistics.assumed_drift's default: the sd of I between two sessions assumed when the two
sides of a decision come from different sessions and the run has no drift estimate. 2%: the
H200 campaign's best kernel ran 1.9% faster in one session than in another (another GPU)."""
OPTIONAL_SETTINGS = ("sequential", "assumed_drift")
REMEASURE_FACTOR = 2.0


# --------------------------------------------------------------------------- seed


def derive_seed(*parts: bytes) -> int:
    """A 64-bit seed: the first 8 bytes (big-endian) of SHA-256 over length-prefixed parts.

    Each part is prefixed with its 8-byte length, so (b"ab", b"c") and (b"a", b"bc") differ.
    Pass canonical bytes of the recorded inputs (e.g. the RFC 8785 form of the measurements).
    """
    digest = hashlib.sha256()
    for part in (SEED_DOMAIN, *parts):
        if not isinstance(part, bytes | bytearray | memoryview):
            raise TypeError(f"derive_seed takes bytes, not {type(part).__name__}")
        data = bytes(part)
        digest.update(len(data).to_bytes(8, "big"))
        digest.update(data)
    return int.from_bytes(digest.digest()[:8], "big")


def seed_hex(seed: int) -> str:
    """The seed as 16 lowercase hex digits: JSON-safe (RFC 8785 integers stop at 2^53)."""
    return f"{seed:016x}"


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError("seed must be an integer")
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError("seed must be in [0, 2**64)")
    return seed


# ------------------------------------------------------------------------ config


MEDIANS_ONLY: dict[str, Any] = {"min_samples": 2**53 - 1}
"""`statistics` settings under which no case ever has enough raw samples, so every decision
is the contract's on the medians: how the JSON-file controller decides (it never reads
samples), for runs imported from its folders."""


@dataclass(frozen=True, slots=True)
class StatisticsConfig:
    """The ``statistics`` settings of a run configuration (SPEC 4.2)."""

    min_samples: int = 10
    resamples: int = 2000
    alpha: float = 0.05
    regression_quantile: float = 0.80
    bootstrap: str = "smoothed"
    sequential: Any = None  # a SequentialConfig (ledger/core/sequential.py) or None
    assumed_drift: float | None = None  # None: DEFAULT_ASSUMED_DRIFT where drift is needed

    def __post_init__(self) -> None:
        if self.sequential is not None:
            from ledger.core.looks import SequentialConfig

            if not isinstance(self.sequential, SequentialConfig):
                object.__setattr__(
                    self, "sequential", SequentialConfig.from_mapping(self.sequential)
                )
        if self.assumed_drift is not None:
            object.__setattr__(
                self, "assumed_drift", _open_interval("assumed_drift", self.assumed_drift, 0.0, 1.0)
            )
        _integer_field("min_samples", self.min_samples, low=3, high=None)
        _integer_field("resamples", self.resamples, low=100, high=100_000)
        object.__setattr__(self, "alpha", _open_interval("alpha", self.alpha, 0.0, 0.5))
        object.__setattr__(
            self,
            "regression_quantile",
            _open_interval("regression_quantile", self.regression_quantile, 0.5, 1.0),
        )
        if not isinstance(self.bootstrap, str) or self.bootstrap not in BOOTSTRAPS:
            raise InputError(
                f"statistics.bootstrap must be one of {', '.join(BOOTSTRAPS)}, "
                f"got {self.bootstrap!r}"
            )

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> StatisticsConfig:
        """Build from the config's ``statistics`` object; absent keys take the defaults."""
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise InputError("statistics must be an object")
        known = [f.name for f in fields(cls)]
        for key in mapping:
            if key not in known:
                raise InputError(
                    f"statistics.{key} is not a known setting (known: {', '.join(known)})"
                )
        return cls(**dict(mapping))

    @classmethod
    def from_recorded(cls, mapping: Mapping[str, Any] | None) -> StatisticsConfig:
        """Build from a run's recorded ``statistics`` (RunPlanned) for a decision or a replay.

        As ``from_mapping``, except that an absent ``bootstrap`` means "plain": runs planned
        before the key existed replay with the rule they were recorded under. `plan` records
        the key for every new run (``planned``)."""
        recorded = dict(mapping) if isinstance(mapping, Mapping) else mapping
        if recorded is None:
            recorded = {}
        if isinstance(recorded, dict):
            recorded.setdefault("bootstrap", RECORDED_DEFAULT_BOOTSTRAP)
            if recorded.get("sequential") is not None:
                from ledger.core.looks import SequentialConfig

                recorded["sequential"] = SequentialConfig.from_recorded(recorded["sequential"])
        return cls.from_mapping(recorded)

    @staticmethod
    def planned(mapping: Mapping[str, Any] | None) -> dict[str, Any]:
        """The ``statistics`` a new run records: the configuration's own keys, plus the
        ``bootstrap`` in force when it is absent (so ``from_recorded`` reads it back), and
        with ``sequential``, its ``unpaired_best`` (ledger/core/looks.py) likewise."""
        config = StatisticsConfig.from_mapping(mapping)
        out = {**dict(mapping or {}), "bootstrap": config.bootstrap}
        if config.sequential is not None:
            out["sequential"] = {
                **dict(out["sequential"]),
                "unpaired_best": config.sequential.unpaired_best,
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON; `sequential` and `assumed_drift` only where they are set
        (decisions recorded before they existed keep their bytes)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        for key in OPTIONAL_SETTINGS:
            if out[key] is None:
                del out[key]
        if self.sequential is not None:
            out["sequential"] = self.sequential.to_dict()
        return out

    @property
    def drift_assumed(self) -> float:
        """The drift a decision across sessions assumes without an estimate."""
        return DEFAULT_ASSUMED_DRIFT if self.assumed_drift is None else self.assumed_drift

    @property
    def smoothed(self) -> bool:
        return self.bootstrap == "smoothed"

    @property
    def method(self) -> str:
        return METHOD_SMOOTHED if self.smoothed else METHOD

    def evidence_settings(self) -> dict[str, Any]:
        """The settings a decision records. "plain" leaves ``bootstrap`` out, exactly as
        decisions recorded before the key existed (their ``method`` says v1)."""
        out = self.to_dict()
        if not self.smoothed:
            del out["bootstrap"]
        return out


def _integer_field(name: str, value: object, *, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"statistics.{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InputError(f"statistics.{name} must be {bound}, got {value}")


def _open_interval(name: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"statistics.{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise InputError(f"statistics.{name} must be finite, got {value!r}")
    if not low < number < high:
        raise InputError(
            f"statistics.{name} must be strictly between {low} and {high}, got {value!r}"
        )
    return number


# ---------------------------------------------------------------------- sampling


@dataclass(frozen=True, slots=True)
class _Side:
    """One side's samples, sorted per case and concatenated, ready for gathering."""

    flat: np.ndarray  # all cases' sorted samples, end to end
    offsets: np.ndarray  # (cases, 1) start of each case in `flat`
    counts: np.ndarray  # (cases, 1) sample count of each case
    smoothing: np.ndarray | None = None  # (cases, 1) log-scale sd s of the smoothing factor

    @classmethod
    def of(cls, samples: Sequence[np.ndarray], *, smoothed: bool = False) -> _Side:
        arrays = [np.sort(a) for a in samples]
        counts = np.array([a.size for a in arrays], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
        flat = np.concatenate(arrays)
        smoothing = _smoothing_sds(flat, offsets, counts)[:, None] if smoothed else None
        return cls(flat, offsets[:, None], counts[:, None], smoothing)


SILVERMAN_FACTOR = 0.9
IQR_PER_SD = 1.34  # the IQR of a normal law is 1.349 sd; Silverman's rule uses 1.34
MEDIAN_KERNEL_FACTOR = math.sqrt(math.pi / 2.0)  # sd of a normal median = this * sd / sqrt(n)


def _smoothing_sds(flat: np.ndarray, offsets: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per case s = sqrt(pi/2) * h / sqrt(n), h Silverman's bandwidth of the log samples.

    `flat` holds every case's samples, each case sorted, at `offsets` with `counts`. The sd
    is two-pass with ddof 1; the quartiles interpolate linearly between the sorted values at
    position p (n - 1) (numpy's default "linear" method), all cases at once."""
    logs = np.log(flat)
    n = counts.astype(np.float64)
    mean = np.add.reduceat(logs, offsets) / n
    deviations = logs - np.repeat(mean, counts)
    sd = np.sqrt(np.add.reduceat(deviations * deviations, offsets) / (n - 1.0))

    def quartile(p: float) -> np.ndarray:
        position = p * (n - 1.0)
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, counts - 1)
        low, high = logs[offsets + below], logs[offsets + above]
        return low + (position - below) * (high - low)

    iqr = quartile(0.75) - quartile(0.25)
    scale = np.where(iqr > 0.0, np.minimum(sd, iqr / IQR_PER_SD), sd)
    bandwidth = SILVERMAN_FACTOR * scale * n**-0.2
    tied = flat[offsets] == flat[offsets + counts - 1]  # nothing to smooth (and no residue)
    return np.where(tied, 0.0, MEDIAN_KERNEL_FACTOR * bandwidth / np.sqrt(n))


def _as_samples(values: object, where: str) -> np.ndarray | None:
    """Validated float64 1-D samples, or None where a case has none."""
    if values is None:
        return None
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{where} must be one-dimensional")
    if array.size and not (np.all(np.isfinite(array)) and np.all(array > 0.0)):
        raise ValueError(f"{where} must hold positive finite times")
    return array if array.size else None


def _resampled_medians(rng: np.random.Generator, side: _Side, resamples: int) -> np.ndarray:
    """(cases, resamples) medians of with-replacement resamples, by order statistics."""
    n = side.counts
    k = (n + 1) // 2  # odd n: the middle; even n: the lower middle
    shape = (n.shape[0], resamples)
    u_low = rng.beta(k, n + 1 - k, size=shape)
    v = rng.beta(1, n - k, size=shape)  # n - k >= 1 because n >= 3
    u_high = u_low + (1.0 - u_low) * v
    last = n - 1
    low = side.flat[side.offsets + np.minimum((n * u_low).astype(np.int64), last)]
    high = side.flat[side.offsets + np.minimum((n * u_high).astype(np.int64), last)]
    medians = np.where(n % 2 == 0, (low + high) / 2.0, low)
    if side.smoothing is not None:
        medians = medians * np.exp(side.smoothing * rng.standard_normal(shape))
    return medians


def _bootstrap(
    rng: np.random.Generator,
    weights: Sequence[float],
    best: _Side,
    cand: _Side,
    resamples: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap draws of I and R, with the contract's arithmetic per resample. The sides
    carry their smoothing (``_Side.of(..., smoothed=...)``)."""
    mb = _resampled_medians(rng, best, resamples)
    mc = _resampled_medians(rng, cand, resamples)
    total = 0.0
    for w in weights:
        total += w
    improvement = np.zeros(resamples)
    for i, w in enumerate(weights):
        improvement += (w / total) * ((mb[i] - mc[i]) / mb[i])
    regression = np.max((mc - mb) / mb, axis=0)
    return improvement, regression


def _quantile(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q, method="linear"))


# ---------------------------------------------------------------------- decision


@dataclass(frozen=True, slots=True)
class StatsOutcome:
    """The final decision and the JSON-ready evidence a replay needs to re-derive it."""

    decision: Decision
    evidence: dict[str, Any]


def _weights(weights: Sequence[float], cases: int) -> list[float]:
    out = [float(w) for w in weights]
    if len(out) != cases or not out:
        raise ValueError("weights must have one positive finite entry per case")
    if not all(math.isfinite(w) and w > 0.0 for w in out):
        raise ValueError("weights must be positive and finite")
    return out


def noise_aware_decision(
    *,
    contract: Decision,
    weights: Sequence[float],
    best_samples: Sequence[object],
    cand_samples: Sequence[object],
    objective: Objective,
    config: StatisticsConfig = StatisticsConfig(),
    seed: int,
    drift_sigma: float = 0.0,
    drift_estimated: bool,
    best_medians: Sequence[float] | None = None,
    cand_medians: Sequence[float] | None = None,
) -> StatsOutcome:
    """Apply SPEC 4.2 to a contract decision.

    `best_samples` / `cand_samples` hold one array (or None) per case, in configuration
    order. `best_medians` / `cand_medians` are the medians the contract decided on
    (``median_us``); when omitted they are computed from the samples. `contract` must be
    the SPEC 3 decision for those medians under one of the contract's versions (checked; a
    replay decides under the version the round recorded). Without ``min_samples`` samples
    for every case on both sides the contract is returned unchanged with ``kind``
    "medians"."""
    if not isinstance(contract, Decision) or contract is Decision.FAIL:
        raise ValueError("contract must be KEEP, DISCARD or NOISE (FAIL rounds are not measured)")
    cases = len(best_samples)
    if len(cand_samples) != cases:
        raise ValueError("best_samples and cand_samples must have one entry per case")
    w = _weights(weights, cases)
    best = [_as_samples(s, f"best_samples[{i}]") for i, s in enumerate(best_samples)]
    cand = [_as_samples(s, f"cand_samples[{i}]") for i, s in enumerate(cand_samples)]
    b_med = _medians(best_medians, best, "best")
    c_med = _medians(cand_medians, cand, "cand")
    seed = _check_seed(seed)
    drift_sigma = float(drift_sigma)
    if not (math.isfinite(drift_sigma) and drift_sigma >= 0.0):
        raise ValueError("drift_sigma must be finite and >= 0")

    improvement = weighted_improvement(w, b_med, c_med)
    regression = worst_regression(b_med, c_med)
    if all(
        c.decision(improvement, regression, objective) is not contract for c in CONTRACTS.values()
    ):
        raise ValueError("contract does not match the SPEC 3 decision for these medians")

    enough = all(s is not None and s.size >= config.min_samples for s in (*best, *cand))
    evidence: dict[str, Any] = {
        "kind": "samples" if enough else "medians",
        "method": config.method,
        "contract_decision": contract.value,
        "decision": contract.value,
        "changed_by": None,
        "improvement": improvement,
        "worst_regression": regression,
        "improvement_lower": None,
        "regression_upper": None,
        "improvement_spread": None,
        **config.evidence_settings(),
        "quantile_method": "linear",
        "seed": seed_hex(seed),
        "best_sample_counts": [0 if s is None else int(s.size) for s in best],
        "candidate_sample_counts": [0 if s is None else int(s.size) for s in cand],
        "drift_sigma": drift_sigma,
        "drift_estimated": bool(drift_estimated),
        "numpy_version": np.__version__,
        "advice": None,
    }
    decision = contract
    spread: float | None = None
    if enough:
        rng = np.random.Generator(np.random.PCG64(seed))
        draws_i, draws_r = _bootstrap(
            rng,
            w,
            _Side.of(best, smoothed=config.smoothed),
            _Side.of(cand, smoothed=config.smoothed),
            config.resamples,  # type: ignore[arg-type]
        )
        if drift_sigma > 0.0:
            shift = rng.normal(0.0, drift_sigma, size=config.resamples)
            draws_i = draws_i + shift
            draws_r = draws_r - shift
        lower = _quantile(draws_i, config.alpha)
        upper = _quantile(draws_r, config.regression_quantile)
        spread = float(np.std(draws_i, ddof=1))
        evidence.update(improvement_lower=lower, regression_upper=upper, improvement_spread=spread)
        if contract is Decision.KEEP:
            if lower <= objective.noise_floor:
                decision, evidence["changed_by"] = Decision.NOISE, "noise_floor"
            elif upper > objective.max_case_regression:
                decision, evidence["changed_by"] = Decision.DISCARD, "case_regression"
    if decision is Decision.KEEP:
        margin = REMEASURE_FACTOR * max(objective.noise_floor, spread or 0.0)
        if improvement <= margin:
            evidence["advice"] = "remeasure"
    evidence["decision"] = decision.value
    return StatsOutcome(decision=decision, evidence=evidence)


def _medians(
    given: Sequence[float] | None, samples: list[np.ndarray | None], side: str
) -> list[float]:
    if given is None:
        if any(s is None for s in samples):
            raise ValueError(f"{side}_medians are needed where a case has no samples")
        return [float(np.median(s)) for s in samples]  # type: ignore[arg-type]
    out = [float(m) for m in given]
    if len(out) != len(samples):
        raise ValueError(f"{side}_medians must have one entry per case")
    if not all(math.isfinite(m) and m > 0.0 for m in out):
        raise ValueError(f"{side}_medians must be positive and finite")
    return out


# ------------------------------------------------------------------------- drift


FLAG_REMEASURE = "remeasure-advised"
REMEASURE_ACROSS_SESSIONS = "measure the best kernel in the candidate's session"


def different_sessions(first: Mapping[str, Any] | None, second: Mapping[str, Any] | None) -> bool:
    """Whether two measurement sets are known to come from different sessions: both name a
    session (`session` objects), and the ids differ, or the ids agree and both name a
    device and the devices differ. A side without a session is unknown: not different."""
    if not first or not second:
        return False
    if first.get("id") != second.get("id"):
        return True
    a, b = first.get("device"), second.get("device")
    return a is not None and b is not None and a != b


def clears_drift(improvement: float, sigma: float, alpha: float, noise_floor: float) -> bool:
    """Whether a KEEP decided on medians whose two sides come from different sessions clears
    the drift sigma: I - z_(1-alpha) * sigma > noise_floor (the same test the bootstrap makes
    with its drift draws, for a side with no samples)."""
    z = NormalDist().inv_cdf(1.0 - alpha)
    return improvement - z * sigma > noise_floor


@dataclass(frozen=True, slots=True)
class DriftEstimate:
    """Session-to-session drift of I, from repeated measurements of one kernel (A/A)."""

    sigma: float
    estimated: bool
    pairs_used: int
    flags: tuple[str, ...]
    improvement_variance: float | None  # mean(I^2) over the pairs: variance about zero
    bootstrap_variance: float | None  # mean over pairs of the bootstrap variance of I
    seed: int | None

    def to_evidence(self) -> dict[str, Any]:
        return {
            "drift_sigma": self.sigma,
            "drift_estimated": self.estimated,
            "drift_pairs": self.pairs_used,
            "drift_flags": list(self.flags),
            "drift_improvement_variance": self.improvement_variance,
            "drift_bootstrap_variance": self.bootstrap_variance,
            "drift_seed": None if self.seed is None else seed_hex(self.seed),
        }


def estimate_drift(
    pairs: Sequence[tuple[Sequence[object], Sequence[object]]],
    *,
    weights: Sequence[float] | None = None,
    config: StatisticsConfig = StatisticsConfig(),
    seed: int | None = None,
) -> DriftEstimate:
    """sigma_d^2 = max(0, var(I of the pairs) - mean bootstrap variance of those I).

    Each pair is (first, second): per-case sample arrays of the same kernel measured in two
    sessions; I is the improvement of second over first. The true I of an A/A pair is zero,
    so var is taken about zero, mean(I^2), with one degree of freedom per pair (a session
    offset that repeats in every pair is drift too, and counts). Only pairs with ``min_samples``
    samples for every case on both sides count; with fewer than MIN_DRIFT_PAIRS of them
    sigma is 0 and the estimate carries the flag "drift_unestimated". Without a seed one is
    derived from the samples themselves, so the estimate is a pure function of its inputs.
    """
    usable: list[tuple[list[np.ndarray], list[np.ndarray]]] = []
    cases: int | None = None
    for p, (first, second) in enumerate(pairs):
        a = [_as_samples(s, f"pairs[{p}][0][{i}]") for i, s in enumerate(first)]
        b = [_as_samples(s, f"pairs[{p}][1][{i}]") for i, s in enumerate(second)]
        if len(a) != len(b) or (cases is not None and len(a) != cases) or not a:
            raise ValueError("every pair must have the same, non-zero number of cases per side")
        cases = len(a)
        if all(s is not None and s.size >= config.min_samples for s in (*a, *b)):
            usable.append((a, b))  # type: ignore[arg-type]
    if len(usable) < MIN_DRIFT_PAIRS:
        return DriftEstimate(0.0, False, len(usable), (FLAG_DRIFT_UNESTIMATED,), None, None, None)
    assert cases is not None
    w = _weights([1.0] * cases if weights is None else weights, cases)
    if seed is None:
        parts = [np.asarray(w, dtype="<f8").tobytes()]
        for a, b in usable:
            for s in (*a, *b):
                parts.append(np.ascontiguousarray(s, dtype="<f8").tobytes())
        seed = derive_seed(b"drift", *parts)
    seed = _check_seed(seed)
    rng = np.random.Generator(np.random.PCG64(seed))
    points = []
    boot_vars = []
    for a, b in usable:
        points.append(
            weighted_improvement(
                w, [float(np.median(s)) for s in a], [float(np.median(s)) for s in b]
            )
        )
        draws, _ = _bootstrap(
            rng,
            w,
            _Side.of(a, smoothed=config.smoothed),
            _Side.of(b, smoothed=config.smoothed),
            config.resamples,
        )
        boot_vars.append(float(np.var(draws, ddof=1)))
    improvement_variance = float(np.mean(np.square(np.array(points))))
    bootstrap_variance = float(np.mean(np.array(boot_vars)))
    sigma = math.sqrt(max(0.0, improvement_variance - bootstrap_variance))
    return DriftEstimate(
        sigma, True, len(usable), (), improvement_variance, bootstrap_variance, seed
    )
