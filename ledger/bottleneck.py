"""Which bottleneck a profile points at, and how much time is left to win: pure rules.

`classify` reads normalized signals (ledger.profiles, docs/profiles.md) and returns an
`Attribution`: the bottleneck class, the evidence as sentences with numbers, the first
experiment from the decision table (PROFILE_FORMATS.md), the headroom down to the nearest
floor, and flags. No I/O, no clock.

Rules, in order; the first that fires is the bottleneck and every other one that fires is
reported as an ``also-<class>`` flag:

1. fixed-cost: the duration is within ``empty_kernel_multiple`` x the empty-kernel cost
   (when that floor is known), else at most ``fixed_cost_duration_us``;
2. launch-scheduling: ``block_dim`` >= ``blocks_per_core_max`` x usable cores (Ascend);
3. insufficient-parallelism: ``block_dim`` (or ncu ``grid_size``) < ``min_core_fill`` x usable
   cores (or SMs); or ncu ``achieved_occupancy`` < ``low_occupancy`` with fewer than
   ``few_blocks_per_sm`` x SMs blocks;
4. ub-live-set: ``ub_overflow`` or ``multibuffer_disabled`` > 0, or ``ub_bytes_used`` >=
   ``ub_fill`` x the target's UB size;
5. pipes: memory-transfer (largest MTE2/MTE3 ratio >= ``mte_ratio``, or ncu
   ``dram_throughput`` >= ``dram_throughput``), scalar-flow-control (largest scalar ratio >=
   ``scalar_ratio``) and vector-compute (largest of ``aiv_vec_ratio``/``aic_cube_ratio`` >=
   ``vec_ratio``, or ncu ``sm_throughput`` >= ``sm_throughput``) compete: the one furthest
   above its threshold (value / threshold) wins, ties in that order;
6. unknown.

>>> a = classify({"task_duration_us": 40.0, "aiv_scalar_ratio": 0.41})
>>> a.bottleneck, a.evidence[0]
('scalar-flow-control', 'aiv_scalar_ratio 0.41 ≥ 0.30')
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum

from ledger.errors import InputError

__all__ = [
    "FIRST_EXPERIMENTS",
    "TARGET_EXCEEDS_HEADROOM",
    "Attribution",
    "Bottleneck",
    "Floors",
    "TargetCaps",
    "Thresholds",
    "classify",
    "floors_us",
    "headroom_flag",
]


class Bottleneck(StrEnum):
    LAUNCH_SCHEDULING = "launch-scheduling"
    INSUFFICIENT_PARALLELISM = "insufficient-parallelism"
    MEMORY_TRANSFER = "memory-transfer"
    SCALAR_FLOW_CONTROL = "scalar-flow-control"
    VECTOR_COMPUTE = "vector-compute"
    UB_LIVE_SET = "ub-live-set"
    FIXED_COST = "fixed-cost"
    UNKNOWN = "unknown"


FIRST_EXPERIMENTS: dict[str, str] = {
    Bottleneck.LAUNCH_SCHEDULING: (
        "physical-core grid-stride loop: launch one program per usable core and loop over "
        "the blocks"
    ),
    Bottleneck.INSUFFICIENT_PARALLELISM: (
        "smaller inter-core tile, or split another independent axis across cores"
    ),
    Bottleneck.MEMORY_TRANSFER: (
        "larger contiguous transfers, a tile change, or multibuffering so MTE2/MTE3 overlap compute"
    ),
    Bottleneck.SCALAR_FLOW_CONTROL: (
        "linearize indices and hoist invariants (address, mask, divide/modulo, dtype lowering)"
    ),
    Bottleneck.VECTOR_COMPUTE: "fuse passes or remove work algebraically",
    Bottleneck.UB_LIVE_SET: "shrink the tile and shorten live ranges",
    Bottleneck.FIXED_COST: "specialize for the shape or fuse with a neighbouring op",
    Bottleneck.UNKNOWN: (
        "profile with pipe utilization (msprof op) or ncu throughput metrics before choosing "
        "a mechanism"
    ),
}

TARGET_EXCEEDS_HEADROOM = "target-exceeds-headroom"
FLOOR_ABOVE_MEASURED = "floor-above-measured"


def _check(owner: str, name: str, value: float | None, *, allow_zero: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{owner} {name} must be a finite number, not {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{owner} {name} must be {'≥' if allow_zero else '>'} 0, not {value!r}")


@dataclass(frozen=True, slots=True)
class TargetCaps:
    """What the target offers; unknown fields stay None and the rules needing them skip."""

    vector_cores: int | None = None
    cube_cores: int | None = None
    ub_bytes: int | None = None
    sm_count: int | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            _check("target", f.name, getattr(self, f.name), allow_zero=False)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Rule thresholds; docs/profiles.md gives the reasoning behind each default."""

    scalar_ratio: float = 0.30
    mte_ratio: float = 0.50
    vec_ratio: float = 0.60
    dram_throughput: float = 0.60
    sm_throughput: float = 0.60
    low_occupancy: float = 0.25
    fixed_cost_duration_us: float = 5.0
    empty_kernel_multiple: float = 2.0
    blocks_per_core_max: float = 4.0
    min_core_fill: float = 0.75
    few_blocks_per_sm: float = 2.0
    ub_fill: float = 0.95

    def __post_init__(self) -> None:
        for f in fields(self):
            _check("threshold", f.name, getattr(self, f.name), allow_zero=False)


@dataclass(frozen=True, slots=True)
class Floors:
    """What the kernel must at least cost. memory floor = bytes_moved / bandwidth; vector
    floor = elements / throughput; launch floor = empty_kernel_us."""

    bytes_moved: float | None = None
    elements: float | None = None
    effective_bandwidth_gbps: float | None = None
    vector_throughput_elems_per_us: float | None = None
    empty_kernel_us: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            zero_ok = f.name in ("bytes_moved", "elements", "empty_kernel_us")
            _check("floor", f.name, getattr(self, f.name), allow_zero=zero_ok)


@dataclass(frozen=True, slots=True)
class Attribution:
    bottleneck: str
    evidence: tuple[str, ...]
    first_experiment: str
    headroom: float | None
    flags: tuple[str, ...] = ()
    floor_us: float | None = None


def _fmt(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:.1f}"


def _validated(signals: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in signals.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InputError(f"signal {key!r} must be a number, not {type(value).__name__}")
        if not math.isfinite(value):
            raise InputError(f"signal {key!r} is not a finite number")
        out[str(key)] = float(value)
    return out


def _duration(s: Mapping[str, float]) -> tuple[str, float] | None:
    for key in ("task_duration_us", "duration_us"):
        if key in s:
            return key, s[key]
    return None


def _largest(s: Mapping[str, float], keys: tuple[str, ...]) -> tuple[str, float] | None:
    present = [(k, s[k]) for k in keys if k in s]
    return max(present, key=lambda kv: kv[1]) if present else None


def _usable_cores(s: Mapping[str, float], target: TargetCaps) -> tuple[int, str] | None:
    has_aiv = any(k.startswith("aiv_") for k in s)
    has_aic = any(k.startswith("aic_") for k in s)
    cube_side = s.get("mix_block_dim", 0.0) > 0 or (has_aic and not has_aiv)
    if cube_side and target.cube_cores:
        return target.cube_cores, "cube"
    if target.vector_cores:
        return target.vector_cores, "vector"
    if target.cube_cores:
        return target.cube_cores, "cube"
    return None


def floors_us(signals: Mapping[str, float], floors: Floors | None = None) -> dict[str, float]:
    """The floors (in us) computable from `floors`, with bytes moved taken from the signals
    (``bytes_moved``, else ``gm_to_ub_kb`` + ``ub_to_gm_kb`` at 1024 bytes per KB, else
    ``dram_bytes``) when `floors.bytes_moved` is None.

    >>> floors_us({}, Floors(bytes_moved=1e6, effective_bandwidth_gbps=1000.0))
    {'memory': 1.0}
    """
    floors = floors or Floors()
    s = _validated(signals)
    out: dict[str, float] = {}
    moved = floors.bytes_moved
    if moved is None:
        if "bytes_moved" in s:
            moved = s["bytes_moved"]
        elif "gm_to_ub_kb" in s or "ub_to_gm_kb" in s:
            moved = (s.get("gm_to_ub_kb", 0.0) + s.get("ub_to_gm_kb", 0.0)) * 1024.0
        elif "dram_bytes" in s:
            moved = s["dram_bytes"]
    if moved is not None and floors.effective_bandwidth_gbps:
        out["memory"] = moved / (floors.effective_bandwidth_gbps * 1e3)
    if floors.elements is not None and floors.vector_throughput_elems_per_us:
        out["vector"] = floors.elements / floors.vector_throughput_elems_per_us
    if floors.empty_kernel_us is not None:
        out["launch"] = floors.empty_kernel_us
    return out


def _rules(
    s: Mapping[str, float], target: TargetCaps, t: Thresholds, floors: Floors
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Every rule that fires, in rule order, with its evidence; and sentences on what was
    checked without firing (for an `unknown` answer)."""
    fired: list[tuple[str, list[str]]] = []
    quiet: list[str] = []
    duration = _duration(s)

    # 1. fixed cost
    if duration is not None:
        key, value = duration
        if floors.empty_kernel_us:
            limit = t.empty_kernel_multiple * floors.empty_kernel_us
            text = (
                f"{key} {_fmt(value)} ≤ {_fmt(t.empty_kernel_multiple)} x empty-kernel "
                f"{_fmt(floors.empty_kernel_us)} us"
            )
        else:
            limit = t.fixed_cost_duration_us
            text = f"{key} {_fmt(value)} ≤ {_fmt(limit)}"
        if value <= limit:
            fired.append((Bottleneck.FIXED_COST, [text]))
    else:
        quiet.append("no task_duration_us or duration_us signal")

    # 2-3. blocks against usable cores (Ascend) or SMs (ncu)
    cores = _usable_cores(s, target)
    blocks = s.get("block_dim")
    if blocks is not None and cores is not None:
        count, kind = cores
        if blocks >= t.blocks_per_core_max * count:
            fired.append(
                (
                    Bottleneck.LAUNCH_SCHEDULING,
                    [
                        f"block_dim {_fmt(blocks)} ≥ {_fmt(t.blocks_per_core_max)} x {count} "
                        f"usable {kind} cores"
                    ],
                )
            )
        elif blocks < t.min_core_fill * count:
            fired.append(
                (
                    Bottleneck.INSUFFICIENT_PARALLELISM,
                    [
                        f"block_dim {_fmt(blocks)} < {_fmt(t.min_core_fill)} x {count} "
                        f"usable {kind} cores"
                    ],
                )
            )
    elif blocks is not None:
        quiet.append("block_dim known but the target's core count is not")
    grid = s.get("grid_size")
    sms = s.get("sm_count") or (float(target.sm_count) if target.sm_count else None)
    if grid is not None and sms:
        occupancy = s.get("achieved_occupancy")
        if grid < t.min_core_fill * sms:
            fired.append(
                (
                    Bottleneck.INSUFFICIENT_PARALLELISM,
                    [f"grid_size {_fmt(grid)} < {_fmt(t.min_core_fill)} x {_fmt(sms)} SMs"],
                )
            )
        elif (
            occupancy is not None
            and occupancy < t.low_occupancy
            and grid < t.few_blocks_per_sm * sms
        ):
            fired.append(
                (
                    Bottleneck.INSUFFICIENT_PARALLELISM,
                    [
                        f"achieved_occupancy {_fmt(occupancy)} < {_fmt(t.low_occupancy)}",
                        f"grid_size {_fmt(grid)} < {_fmt(t.few_blocks_per_sm)} x {_fmt(sms)} SMs",
                    ],
                )
            )

    # 4. UB live set
    ub: list[str] = [
        f"{key} {_fmt(s[key])} > 0"
        for key in ("ub_overflow", "multibuffer_disabled")
        if s.get(key, 0.0) > 0
    ]
    used = s.get("ub_bytes_used")
    if used is not None and target.ub_bytes and used >= t.ub_fill * target.ub_bytes:
        ub.append(f"ub_bytes_used {_fmt(used)} ≥ {_fmt(t.ub_fill)} x {target.ub_bytes} UB bytes")
    if ub:
        fired.append((Bottleneck.UB_LIVE_SET, ub))

    # 5. pipes compete by how far each is above its threshold
    families = (
        (
            Bottleneck.MEMORY_TRANSFER,
            ("aiv_mte2_ratio", "aiv_mte3_ratio", "aic_mte2_ratio", "aic_mte3_ratio"),
            t.mte_ratio,
            ("dram_throughput", "memory_throughput"),
            t.dram_throughput,
        ),
        (
            Bottleneck.SCALAR_FLOW_CONTROL,
            ("aiv_scalar_ratio", "aic_scalar_ratio"),
            t.scalar_ratio,
            (),
            t.scalar_ratio,
        ),
        (
            Bottleneck.VECTOR_COMPUTE,
            ("aiv_vec_ratio", "aic_cube_ratio"),
            t.vec_ratio,
            ("sm_throughput",),
            t.sm_throughput,
        ),
    )
    pipes: list[tuple[float, int, str, list[str]]] = []
    for order, (cls, ratio_keys, ratio_limit, ncu_keys, ncu_limit) in enumerate(families):
        best: tuple[float, str] | None = None
        for keys, limit in ((ratio_keys, ratio_limit), (ncu_keys, ncu_limit)):
            top = _largest(s, keys)
            if top is None:
                continue
            key, value = top
            if value >= limit:
                score = value / limit
                if best is None or score > best[0]:
                    best = (score, f"{key} {_fmt(value)} ≥ {_fmt(limit)}")
            else:
                quiet.append(f"{key} {_fmt(value)} < {_fmt(limit)}")
        if best is not None:
            pipes.append((-best[0], order, cls, [best[1]]))
    for _, _, cls, evidence in sorted(pipes, key=lambda p: (p[0], p[1])):
        fired.append((cls, evidence))
    return fired, quiet


def classify(
    signals: Mapping[str, float],
    target: TargetCaps | None = None,
    thresholds: Thresholds | None = None,
    floors: Floors | None = None,
) -> Attribution:
    """Attribute the profile's time to one bottleneck class; see the module docstring."""
    s = _validated(signals)
    target = target or TargetCaps()
    t = thresholds or Thresholds()
    floors = floors or Floors()
    fired, quiet = _rules(s, target, t, floors)

    flags: list[str] = []
    if fired:
        winner, evidence = fired[0]
        evidence = list(evidence)
        for cls, extra in fired[1:]:
            if cls == winner:
                continue
            flag = f"also-{cls}"
            if flag not in flags:
                flags.append(flag)
            evidence.extend(f"also {cls}: {e}" for e in extra)
    else:
        winner = Bottleneck.UNKNOWN
        evidence = quiet or ["no recognised pipe, throughput or launch signal"]

    floor_values = floors_us(s, floors)
    duration = _duration(s)
    headroom: float | None = None
    floor: float | None = None
    if floor_values:
        kind = max(floor_values, key=lambda k: floor_values[k])
        floor = floor_values[kind]
        evidence.append(
            "floors (us): " + ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(floor_values.items()))
        )
        if duration is not None and duration[1] > 0:
            key, value = duration
            headroom = max(0.0, 1.0 - floor / value)
            evidence.append(
                f"headroom {_fmt(headroom)}: {key} {_fmt(value)} down to the {kind} floor "
                f"{_fmt(floor)} us"
            )
            if floor > value:
                flags.append(FLOOR_ABOVE_MEASURED)
    return Attribution(
        bottleneck=str(winner),
        evidence=tuple(evidence),
        first_experiment=FIRST_EXPERIMENTS[winner],
        headroom=headroom,
        flags=tuple(flags),
        floor_us=floor,
    )


def headroom_flag(target_relative_improvement: float, attribution: Attribution) -> str | None:
    """`TARGET_EXCEEDS_HEADROOM` when the run asks for more relative improvement than the
    floors leave; None when it fits or the headroom is unknown.

    >>> a = Attribution("memory-transfer", (), "", headroom=0.2)
    >>> headroom_flag(0.3, a), headroom_flag(0.1, a)
    ('target-exceeds-headroom', None)
    """
    _check("target", "relative improvement", target_relative_improvement, allow_zero=True)
    if attribution.headroom is None:
        return None
    if target_relative_improvement > attribution.headroom + 1e-12:
        return TARGET_EXCEEDS_HEADROOM
    return None
