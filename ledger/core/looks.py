"""The settings of `statistics.sequential` and when its looks are taken, at what level:
the part of the sequential rule (ledger/core/sequential.py) that needs no numpy, so the
statistics settings can validate it without an import cycle."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.errors import InputError

FINAL_SHARE = 0.5
"""The share of alpha the last look's KEEP test gets: at max_repeats the rule then needs a
smaller lower bound than the fixed rule at half as many samples, so measuring on to
max_repeats can recover what the early looks' small levels cost in power."""
KEYS = ("min_repeats", "max_repeats", "batch")
SETTINGS = (*KEYS, "unpaired_best")
UNPAIRED_BEST = ("first-n", "all")
"""How a look without a same-session reference takes the best kernel's stored samples:
"first-n", its first n in measurement order beside the candidate's first n (like positions
of two sessions, the rule of every run planned since), or "all" of them at every look (the
rule as first recorded; a recorded `sequential` without the key means it)."""
RECORDED_DEFAULT_UNPAIRED_BEST = "all"


def alpha_spent(t: float, alpha: float) -> float:
    """The Lan-DeMets Pocock-type spending function alpha * ln(1 + (e - 1) t), 0 <= t <= 1:
    alpha spent by information fraction t (0 at t = 0, alpha at t = 1)."""
    return alpha * math.log1p((math.e - 1.0) * min(max(t, 0.0), 1.0))


@dataclass(frozen=True, slots=True)
class SequentialConfig:
    """`statistics.sequential`: look at every `batch` candidate samples per case, from
    `min_repeats` to `max_repeats` (the last look is at `max_repeats`)."""

    min_repeats: int = 10
    max_repeats: int = 100
    batch: int = 10
    unpaired_best: str = "first-n"

    def __post_init__(self) -> None:
        if not isinstance(self.unpaired_best, str) or self.unpaired_best not in UNPAIRED_BEST:
            raise InputError(
                "statistics.sequential.unpaired_best must be one of "
                f"{', '.join(UNPAIRED_BEST)}, got {self.unpaired_best!r}"
            )
        for name in KEYS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InputError(f"statistics.sequential.{name} must be an integer, got {value!r}")
        if self.min_repeats < 3:
            raise InputError(
                f"statistics.sequential.min_repeats must be at least 3, got {self.min_repeats}"
            )
        if self.max_repeats < self.min_repeats:
            raise InputError(
                "statistics.sequential.max_repeats must be at least min_repeats "
                f"({self.min_repeats}), got {self.max_repeats}"
            )
        if self.max_repeats > 100_000:
            raise InputError(
                f"statistics.sequential.max_repeats must be at most 100000, got {self.max_repeats}"
            )
        if self.batch < 1:
            raise InputError(f"statistics.sequential.batch must be at least 1, got {self.batch}")

    @classmethod
    def from_mapping(cls, mapping: Any) -> SequentialConfig:
        if not isinstance(mapping, Mapping):
            raise InputError(
                f"statistics.sequential must be an object (keys, each optional: "
                f"{', '.join(SETTINGS)}; `template config` describes them)"
            )
        for key in mapping:
            if key not in SETTINGS:
                raise InputError(
                    f"statistics.sequential.{key} is not a known setting "
                    f"(known: {', '.join(SETTINGS)})"
                )
        return cls(**dict(mapping))

    @classmethod
    def from_recorded(cls, mapping: Any) -> SequentialConfig:
        """As `from_mapping`, for a run's recorded settings: an absent `unpaired_best` is
        "all", the rule those runs were decided by (`plan` records the key since)."""
        if isinstance(mapping, Mapping):
            mapping = {"unpaired_best": RECORDED_DEFAULT_UNPAIRED_BEST, **mapping}
        return cls.from_mapping(mapping)

    def to_dict(self) -> dict[str, Any]:
        """The settings as recorded: `unpaired_best` only where it is not "all", so the
        decisions recorded before the key existed keep their bytes."""
        out: dict[str, Any] = {k: getattr(self, k) for k in KEYS}
        if self.unpaired_best != RECORDED_DEFAULT_UNPAIRED_BEST:
            out["unpaired_best"] = self.unpaired_best
        return out

    def looks(self) -> list[int]:
        """The candidate samples per case at each look, ascending, the last max_repeats."""
        out = list(range(self.min_repeats, self.max_repeats, self.batch))
        return [*out, self.max_repeats]

    def levels(self, alpha: float) -> list[float]:
        """The KEEP test's level a_k at each look, summing to alpha: the last look (at
        max_repeats) gets FINAL_SHARE of alpha, the looks before it the rest, spent along
        alpha_spent over their information fraction n_k / n_(K-1). One look: alpha."""
        looks = self.looks()
        if len(looks) == 1:
            return [alpha]
        early = alpha * (1.0 - FINAL_SHARE)
        last_early = looks[-2]
        spent = [alpha_spent(n / last_early, early) for n in looks[:-1]]
        increments = [b - a for a, b in zip([0.0, *spent[:-1]], spent, strict=True)]
        return [*increments, alpha - sum(increments)]


@dataclass(frozen=True, slots=True)
class Saving:
    """What a sequential decision spared: repeats per case at the deciding look, the
    repeats the fixed budget (max_repeats) would have taken, and the device time of the
    samples not measured (every case, candidate and reference where there was one)."""

    repeats_used: int
    max_repeats: int
    device_time_saved_us: float


def saving(
    statistics: Mapping[str, Any] | None,
    candidate_medians: Sequence[float] | None,
    reference_medians: Sequence[float] | None = None,
) -> Saving | None:
    """The saving of a decided round from its recorded statistics (None: not decided by the
    sequential rule). A case's unmeasured samples are max_repeats - the samples measured,
    each costing the case's median (plus the reference's, measured beside it)."""
    if not statistics or "repeats_used" not in statistics or candidate_medians is None:
        return None
    top = int(statistics["sequential"]["max_repeats"])
    measured = int(statistics.get("available_repeats", statistics["repeats_used"]))
    left = max(0, top - measured)
    per_sample = sum(candidate_medians) + (sum(reference_medians) if reference_medians else 0.0)
    return Saving(int(statistics["repeats_used"]), top, left * per_sample)
