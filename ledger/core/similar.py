"""Which past rounds started from a profile like this one? Pure scoring of candidates that
the store found by bottleneck class (an indexed query)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.core.projections import RoundRow


@dataclass(frozen=True, slots=True)
class Similar:
    row: RoundRow
    distance: float
    shared_signals: int


_FRACTION_SUFFIXES = ("_ratio", "_rate", "_throughput", "_active", "_occupancy", "_frac")


def is_fraction(key: str) -> bool:
    """A signal that is a fraction (a ratio, a share of peak), by its name."""
    return key.endswith(_FRACTION_SUFFIXES) or key.startswith("achieved_occupancy")


def _difference(key: str, x: float, y: float) -> float:
    """Fractions (ratios, shares of peak) differ by their difference; magnitudes
    (durations, sizes, bytes, counts) by the decades between them, so a 2x slower kernel
    is as far as a 2x faster one and no single large signal drowns the others."""
    if is_fraction(key):
        return x - y
    if x == y:
        return 0.0
    if x > 0 and y > 0:
        return math.log10(x) - math.log10(y)
    return 1.0  # present on one side only, or of opposite sign


def signal_distance(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[float, int]:
    """Euclidean distance over the signals both profiles have (0 = identical), with each
    signal's difference from `_difference`; rounded to 12 decimals so that float noise
    reads as 0.

    >>> signal_distance({"x": 1.0, "y": 100.0}, {"x": 1.0, "y": 10.0})
    (1.0, 2)
    >>> signal_distance({"dram_throughput": 0.9}, {"dram_throughput": 0.6})
    (0.3, 1)
    """
    shared = sorted(set(a) & set(b))
    if not shared:
        return float("inf"), 0
    total = math.fsum(_difference(k, float(a[k]), float(b[k])) ** 2 for k in shared)
    return round(math.sqrt(total), 12), len(shared)


def rank(signals: Mapping[str, float], candidates: Sequence[RoundRow], limit: int) -> list[Similar]:
    """Candidates ordered by signal distance, nearest first (ties: newest first)."""
    scored = []
    for order, row in enumerate(candidates):
        other = json.loads(row.start_signals) if row.start_signals else {}
        distance, shared = signal_distance(signals, other)
        scored.append((distance, order, Similar(row, distance, shared)))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in scored[:limit]]
