"""Which past rounds started from a profile like this one? Pure scoring of candidates that
the store found by bottleneck class (an indexed query)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.projections import RoundRow


@dataclass(frozen=True, slots=True)
class Similar:
    row: RoundRow
    distance: float
    shared_signals: int


def signal_distance(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[float, int]:
    """Mean relative difference over the signals both profiles have (0 = identical).

    >>> signal_distance({"x": 1.0, "y": 2.0}, {"x": 1.0, "y": 1.0})
    (0.25, 2)
    """
    shared = sorted(set(a) & set(b))
    if not shared:
        return float("inf"), 0
    total = 0.0
    for key in shared:
        scale = max(abs(a[key]), abs(b[key]), 1e-12)
        total += abs(a[key] - b[key]) / scale
    return total / len(shared), len(shared)


def rank(signals: Mapping[str, float], candidates: Sequence[RoundRow], limit: int) -> list[Similar]:
    """Candidates ordered by signal distance, nearest first (ties: newest first)."""
    scored = []
    for order, row in enumerate(candidates):
        other = json.loads(row.start_signals) if row.start_signals else {}
        distance, shared = signal_distance(signals, other)
        scored.append((distance, order, Similar(row, distance, shared)))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [item[2] for item in scored[:limit]]
