"""Which bottleneck a profile points at, and how much time is left to win: pure rules.

`classify` reads normalized signals (ledger.inputs.profiles, docs/profiles.md) and the profile's
categorical facts (the core type), and returns an `Attribution`: the bottleneck class, the
evidence as sentences with numbers, the first experiment from the decision table
(PROFILE_FORMATS.md), the headroom down to the nearest floor, and flags. No I/O, no clock.

Rules version 3 (`RULES_VERSION`; recorded in every new attribution) run in the order
docs/profiles.md ("Bottleneck classification") gives, with the reasoning behind each; the
first that fires is the bottleneck and every other one that fires is an ``also-<class>``
flag.

>>> a = classify({"task_duration_us": 40.0, "aiv_scalar_ratio": 0.41, "aiv_vec_ratio": 0.2})
>>> a.bottleneck, a.evidence[0].split(" ≥ ")[0]
('scalar-flow-control', 'scalar share 0.41 of aiv time (aiv_scalar_ratio 0.41)')
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum

from ledger.errors import InputError

__all__ = [
    "FIRST_EXPERIMENTS",
    "GPU_FIRST_EXPERIMENTS",
    "NEUTRAL_FIRST_EXPERIMENTS",
    "RULES_VERSION",
    "TARGET_EXCEEDS_HEADROOM",
    "Attribution",
    "Bottleneck",
    "Floors",
    "TargetCaps",
    "Thresholds",
    "classify",
    "core_kind",
    "first_experiment",
    "floors_us",
    "headroom_flag",
    "wording",
]

RULES_VERSION = 3
"""Version of the rules below. Attributions made before versions were recorded (no
``rules`` key) were made by version 1; verify never re-derives a stored attribution."""


class Bottleneck(StrEnum):
    LAUNCH_SCHEDULING = "launch-scheduling"
    INSUFFICIENT_PARALLELISM = "insufficient-parallelism"
    MEMORY_TRANSFER = "memory-transfer"
    SCALAR_FLOW_CONTROL = "scalar-flow-control"
    VECTOR_COMPUTE = "vector-compute"
    CUBE_COMPUTE = "cube-compute"
    LATENCY = "latency-bound"
    UB_LIVE_SET = "ub-live-set"
    FIXED_COST = "fixed-cost"
    AI_CPU = "ai-cpu"
    COMMUNICATION = "communication"
    DSA = "dsa"
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
    Bottleneck.CUBE_COMPUTE: (
        "tile shape and K alignment for the matrix unit, a cheaper dtype, or less redundant "
        "matrix work"
    ),
    Bottleneck.LATENCY: (
        "more bytes in flight: more independent loads per thread, more warps or blocks per "
        "SM, fewer dependent steps"
    ),
    Bottleneck.UB_LIVE_SET: "shrink the tile and shorten live ranges",
    Bottleneck.FIXED_COST: "specialize for the shape or fuse with a neighbouring op",
    Bottleneck.AI_CPU: "move the operator onto the AI Core (a supported dtype or shape)",
    Bottleneck.COMMUNICATION: "overlap the collective with compute, or move fewer bytes",
    Bottleneck.DSA: "not compute: look at the kernels around this task",
    Bottleneck.UNKNOWN: (
        "profile with pipe utilization (msprof op) or ncu throughput metrics before choosing "
        "a mechanism"
    ),
}

_NOT_AI_CORE = {
    c: FIRST_EXPERIMENTS[c] for c in (Bottleneck.AI_CPU, Bottleneck.COMMUNICATION, Bottleneck.DSA)
}
"""The classes of a task that is no AI Core kernel, the same on every platform."""

GPU_FIRST_EXPERIMENTS: dict[str, str] = {
    Bottleneck.LAUNCH_SCHEDULING: (
        "a persistent grid (one program per SM looping over tiles) or larger tiles, so fewer "
        "blocks are launched"
    ),
    Bottleneck.INSUFFICIENT_PARALLELISM: (
        "a grid that fills the SMs: smaller tiles, or split another independent axis (split-K, "
        "rows) until grid size is several times the SM count"
    ),
    Bottleneck.MEMORY_TRANSFER: (
        "coalesced, vectorized accesses (contiguous along the fastest axis of a warp), fewer "
        "bytes moved (fusion, a narrower dtype), or a tile order that reuses L2"
    ),
    Bottleneck.SCALAR_FLOW_CONTROL: (
        "hoist index arithmetic and invariant loads out of the loop; fewer branches and "
        "masks in the inner loop"
    ),
    Bottleneck.VECTOR_COMPUTE: (
        "fuse passes or remove work algebraically; move matrix-shaped math onto tensor cores "
        "(tl.dot)"
    ),
    Bottleneck.CUBE_COMPUTE: (
        "tensor-core friendly tiles (multiples of 16 in M, N, K), a cheaper dtype (bf16, fp8), "
        "or more pipeline stages (num_stages) to keep the tensor cores fed"
    ),
    Bottleneck.LATENCY: (
        "occupancy and bytes in flight: fewer registers per thread or less shared memory per "
        "block (more warps per SM), more independent loads per thread, fewer dependent steps"
    ),
    Bottleneck.UB_LIVE_SET: (
        "smaller tiles: fewer registers per thread and less shared memory per block, so no "
        "spills to local memory"
    ),
    Bottleneck.FIXED_COST: (
        "fuse with a neighbouring kernel, or capture the sequence in a CUDA graph to remove "
        "launch overhead"
    ),
    **_NOT_AI_CORE,
    Bottleneck.UNKNOWN: (
        "profile with ncu's SpeedOfLight, LaunchStats and Occupancy sections (--page details) "
        "before choosing a mechanism"
    ),
}
"""The first experiment of each class on a GPU (an ncu profile): the same classes, in the
GPU's terms (SMs, warps, registers, shared memory, tensor cores, L2) instead of the Ascend
ones (cores, MTE2/MTE3, UB, multibuffering) of `FIRST_EXPERIMENTS`."""

NEUTRAL_FIRST_EXPERIMENTS: dict[str, str] = {
    Bottleneck.LAUNCH_SCHEDULING: (
        "fewer, larger units of work: fewer launches or calls, each looping over more of the data"
    ),
    Bottleneck.INSUFFICIENT_PARALLELISM: (
        "spread the work over more of the target's cores or lanes: smaller chunks, or split "
        "another independent axis"
    ),
    Bottleneck.MEMORY_TRANSFER: (
        "contiguous, cache-friendly accesses, fewer bytes moved (fusion, a narrower dtype), or "
        "blocking so each byte loaded is reused"
    ),
    Bottleneck.SCALAR_FLOW_CONTROL: GPU_FIRST_EXPERIMENTS[Bottleneck.SCALAR_FLOW_CONTROL],
    Bottleneck.VECTOR_COMPUTE: "fuse passes or remove work algebraically; vectorize the inner loop",
    Bottleneck.CUBE_COMPUTE: (
        "blocking that keeps the matrix unit (or a tuned matrix library call) busy, or a "
        "cheaper dtype"
    ),
    Bottleneck.LATENCY: (
        "more independent work in flight: fewer dependent steps, more independent loads"
    ),
    Bottleneck.UB_LIVE_SET: (
        "smaller blocks and shorter live ranges, so the working set fits the fastest memory"
    ),
    Bottleneck.FIXED_COST: FIRST_EXPERIMENTS[Bottleneck.FIXED_COST],
    **_NOT_AI_CORE,
    Bottleneck.UNKNOWN: (
        "measure where the time goes (a memory and a compute share, in a signal map) before "
        "choosing a mechanism"
    ),
}
"""The first experiment of each class on a platform that is neither Ascend nor a GPU (a CPU
target): the same classes, in no vendor's terms (no SMs, warps, MTE or UB)."""

ASCEND, GPU, NEUTRAL = "ascend", "gpu", "neutral"
_FIRST = {ASCEND: FIRST_EXPERIMENTS, GPU: GPU_FIRST_EXPERIMENTS, NEUTRAL: NEUTRAL_FIRST_EXPERIMENTS}


def wording(core: str | None, platform: str | None = None, sm_count: int | None = None) -> str:
    """The platform an attribution's words are for: the one place Ascend, GPU or neutral
    wording is chosen. `platform` is the run's platform family (`suggest.platform_family`
    of its `target.soc`; None where no run is known): one that is neither "ascend" nor
    "gpu" (a CPU) is worded neutrally whatever its signals are named; otherwise the core
    kind the profile routes on decides (`gpu` for ncu signals, any other kind Ascend's),
    and a profile that shows none takes the run's platform (a GPU target, or one with an
    SM count, the GPU's; else Ascend's).

    >>> wording("vector"), wording(None, "gpu"), wording("gpu", "x86_64")
    ('ascend', 'gpu', 'neutral')
    """
    if platform is not None and platform not in (ASCEND, GPU):
        return NEUTRAL
    if core is not None:
        return GPU if core == GPU else ASCEND
    return GPU if platform == GPU or (platform is None and sm_count is not None) else ASCEND


def first_experiment(bottleneck: str, core: str | None) -> str:
    """The first experiment for a class, worded for the platform (`wording`, or the core
    kind the profile came from).

    >>> first_experiment("memory-transfer", "gpu").startswith("coalesced")
    True
    >>> "MTE2/MTE3" in first_experiment("memory-transfer", "vector")
    True
    >>> first_experiment("memory-transfer", "neutral").startswith("contiguous")
    True
    """
    return _FIRST.get(core or ASCEND, FIRST_EXPERIMENTS)[Bottleneck(bottleneck)]


TARGET_EXCEEDS_HEADROOM = "target-exceeds-headroom"
FLOOR_ABOVE_MEASURED = "floor-above-measured"
MIXED = "mixed"


def _check(owner: str, name: str, value: float | None, *, allow_zero: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{owner} {name} must be a finite number, not {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{owner} {name} must be {'≥' if allow_zero else '>'} 0, not {value!r}")


@dataclass(frozen=True, slots=True)
class TargetCaps:
    """What the target offers; unknown fields stay None and the rules needing them skip.
    `peak_bandwidth_gbps` (GB/s) and `peak_tflops` (10^12 FLOP/s) turn bytes or FLOPs over
    the duration into a share of the roofline where the profile gives no throughput."""

    vector_cores: int | None = None
    cube_cores: int | None = None
    ub_bytes: int | None = None
    sm_count: int | None = None
    peak_bandwidth_gbps: float | None = None
    peak_tflops: float | None = None

    def __post_init__(self) -> None:
        for f in fields(self):
            _check("target", f.name, getattr(self, f.name), allow_zero=False)


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Rule thresholds; docs/profiles.md gives the reasoning behind each default.
    `scalar_ratio`, `mte_ratio`, `vec_ratio`, `low_occupancy` and `few_blocks_per_sm` were
    read by rules version 1 only; they stay accepted so existing configurations load."""

    scalar_ratio: float = 0.30
    mte_ratio: float = 0.50
    vec_ratio: float = 0.60
    dram_throughput: float = 0.60
    sm_throughput: float = 0.60
    low_occupancy: float = 0.25
    fixed_cost_duration_us: float = 5.0
    empty_kernel_multiple: float = 2.0
    blocks_per_core_max: float = 4.0
    block_time_max_us: float = 50.0
    min_core_fill: float = 0.75
    few_blocks_per_sm: float = 2.0
    ub_fill: float = 0.95
    mixed_margin: float = 0.10

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
    core: str | None = None


def _fmt(value: float) -> str:
    if not math.isfinite(value):  # a ratio over a vanishing duration
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
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


def _time_per_block(s: Mapping[str, float], blocks: float, cores: int) -> tuple[str, float] | None:
    """The kernel's duration over the blocks each core runs in turn: how long one block
    works between two dispatches. None without a duration."""
    duration = _duration(s)
    if duration is None or duration[1] <= 0:
        return None
    return f"{duration[0]} {_fmt(duration[1])}", duration[1] / math.ceil(blocks / cores)


def _duration(s: Mapping[str, float]) -> tuple[str, float] | None:
    for key in ("task_duration_us", "duration_us"):
        if key in s:
            return key, s[key]
    return None


# --------------------------------------------------------------------------- core type

# Spellings of `Task Type` (op_summary), `Accelerator Core` (kernel_details) and
# `Op Type` (msprof op OpBasicInfo) -> the core kind the rules route on.
_CORE_SPELLINGS: dict[str, str] = {
    "ai_core": "cube",
    "aicore": "cube",
    "cube": "cube",
    "ai_vector_core": "vector",
    "aivector": "vector",
    "aiv": "vector",
    "vector": "vector",
    "mix_aic": "mix-aic",
    "mix_aiv": "mix-aiv",
    "mix": "mix-aic",
    "mix_cv": "mix-aic",
    "ai_cpu": "ai-cpu",
    "aicpu": "ai-cpu",
    "hccl": "communication",
    "communication": "communication",
    "dsa": "dsa",
    "dsa_sqe": "dsa",
}
_ROUTED = {
    "ai-cpu": Bottleneck.AI_CPU,
    "communication": Bottleneck.COMMUNICATION,
    "dsa": Bottleneck.DSA,
}
_GPU_KEYS = ("sm_throughput", "dram_throughput", "grid_size", "memory_throughput", "sm_count")


def _nonzero(s: Mapping[str, float], prefix: str) -> bool:
    return any(v != 0 for k, v in s.items() if k.startswith(prefix) and k != prefix + "core_count")


def core_kind(
    signals: Mapping[str, float], attributes: Mapping[str, str] | None = None
) -> tuple[str | None, str]:
    """The core kind the rules route on and why: ``cube``, ``vector``, ``mix-aic``,
    ``mix-aiv``, ``ai-cpu``, ``communication``, ``dsa``, ``gpu`` or None (unknown).

    >>> core_kind({}, {"task_type": "AI_VECTOR_CORE"})
    ('vector', 'task_type AI_VECTOR_CORE')
    >>> core_kind({"aic_cube_ratio": 0.8, "aiv_vec_ratio": 0.0})
    ('cube', 'only aic_* signals are non-zero')
    """
    attributes = attributes or {}
    for key in ("task_type", "op_type"):
        raw = attributes.get(key, "")
        values = {v.strip() for v in raw.split("|") if v.strip()}
        kinds = {_CORE_SPELLINGS.get(v.lower().replace(" ", "_")) for v in values}
        kinds.discard(None)
        if len(kinds) == 1:
            return kinds.pop(), f"{key} {raw}"
    if any(k in signals for k in _GPU_KEYS):
        return "gpu", "ncu throughput or launch signals"
    aic, aiv = _nonzero(signals, "aic_"), _nonzero(signals, "aiv_")
    if aic and aiv:
        return "mix-aic", "both aic_* and aiv_* signals are non-zero"
    if aic:
        return "cube", "only aic_* signals are non-zero"
    if aiv:
        return "vector", "only aiv_* signals are non-zero"
    return None, "no core type and no aic_*/aiv_* signal"


def _usable_cores(kind: str | None, target: TargetCaps) -> tuple[int, str] | None:
    if kind in ("cube", "mix-aic") and target.cube_cores:
        return target.cube_cores, "cube"
    if kind in ("vector", "mix-aiv") and target.vector_cores:
        return target.vector_cores, "vector"
    if kind is None:
        if target.vector_cores:
            return target.vector_cores, "vector"
        if target.cube_cores:
            return target.cube_cores, "cube"
    return None


# --------------------------------------------------------------------------- pipe shares

# family -> side -> stages; a stage is read as `<side>_<stage>_ratio` (share of that core's
# cycles), else `<side>_<stage>_time_us` / `<side>_time_us`.
_STAGES: dict[str, dict[str, tuple[str, ...]]] = {
    "cube": {"aic": ("cube", "fixpipe")},
    "vector": {"aiv": ("vec",)},
    "memory": {"aic": ("mte1", "mte2"), "aiv": ("mte2", "mte3")},
    "scalar": {"aic": ("scalar",), "aiv": ("scalar",)},
}
_FAMILY_CLASS = {
    "cube": Bottleneck.CUBE_COMPUTE,
    "vector": Bottleneck.VECTOR_COMPUTE,
    "memory": Bottleneck.MEMORY_TRANSFER,
    "scalar": Bottleneck.SCALAR_FLOW_CONTROL,
}
# ArithmeticUtilization gives the cube and vector pipes per dtype; their sum stands in for
# a missing aic_cube_ratio / aiv_vec_ratio.
_DTYPES = r"(?:fp8|fp16|bf16|hf32|fp32|fp64|int4|int8|int16|int32|int64|uint8|misc)"
_ARITHMETIC = {
    ("aic", "cube"): re.compile(rf"^aic_(?:mac|cube)_{_DTYPES}_ratio$"),
    ("aiv", "vec"): re.compile(rf"^aiv_(?:vec_)?{_DTYPES}_ratio$"),
}


def _stage_share(s: Mapping[str, float], side: str, stage: str) -> tuple[float, str] | None:
    ratio = f"{side}_{stage}_ratio"
    if ratio in s:
        return s[ratio], f"{ratio} {_fmt(s[ratio])}"
    pattern = _ARITHMETIC.get((side, stage))
    if pattern:
        parts = {k: v for k, v in s.items() if pattern.match(k)}
        if parts:
            total = math.fsum(parts.values())
            return total, " + ".join(f"{k} {_fmt(v)}" for k, v in sorted(parts.items()))
    time_key, core_key = f"{side}_{stage}_time_us", f"{side}_time_us"
    if time_key in s and s.get(core_key, 0.0) > 0:
        share = s[time_key] / s[core_key]
        return share, f"{time_key} {_fmt(s[time_key])} / {core_key} {_fmt(s[core_key])}"
    return None


def _sides(kind: str | None) -> tuple[str, ...]:
    if kind == "cube":
        return ("aic",)
    if kind in ("vector", "communication"):
        return ("aiv",)
    return ("aic", "aiv")


def _pipe_families(s: Mapping[str, float], kind: str | None) -> dict[str, tuple[float, str, str]]:
    """family -> (share, side, how it was read), the larger side where a family has two."""
    out: dict[str, tuple[float, str, str]] = {}
    for family, by_side in _STAGES.items():
        for side, stages in by_side.items():
            if side not in _sides(kind):
                continue
            if kind is None and not _nonzero(s, side + "_"):
                continue  # the unused side's zeros are no signal
            parts = [p for p in (_stage_share(s, side, st) for st in stages) if p is not None]
            if not parts:
                continue
            share = math.fsum(p[0] for p in parts)
            how = " + ".join(p[1] for p in parts)
            if family not in out or share > out[family][0]:
                out[family] = (share, side, how)
    return out


def _roofline(
    s: Mapping[str, float], target: TargetCaps
) -> tuple[tuple[float, str] | None, tuple[float, str] | None, tuple[float, str] | None]:
    """(memory, compute, tensor) shares of peak for a GPU kernel, each with its reading."""
    memory = compute = tensor = None
    for key in ("dram_throughput", "l2_throughput"):
        if key in s and (memory is None or s[key] > memory[0]):
            memory = (s[key], f"{key} {_fmt(s[key])}")
    if memory is None and "memory_throughput" in s:
        memory = (s["memory_throughput"], f"memory_throughput {_fmt(s['memory_throughput'])}")
    duration = _duration(s)
    if memory is None and target.peak_bandwidth_gbps and duration and duration[1] > 0:
        moved = _bytes_moved(s)
        if moved is not None:
            gbps = moved[0] / (duration[1] * 1e3)
            share = gbps / target.peak_bandwidth_gbps
            memory = (
                share,
                f"memory share {_fmt(share)} ({moved[1]} over {duration[0]} "
                f"{_fmt(duration[1])} = {_fmt(gbps)} GB/s of peak_bandwidth_gbps "
                f"{_fmt(target.peak_bandwidth_gbps)})",
            )
    if "sm_throughput" in s:
        compute = (s["sm_throughput"], f"sm_throughput {_fmt(s['sm_throughput'])}")
    elif target.peak_tflops and duration and duration[1] > 0 and s.get("flop_count"):
        tflops = s["flop_count"] / (duration[1] * 1e6)
        share = tflops / target.peak_tflops
        compute = (
            share,
            f"compute share {_fmt(share)} (flop_count over {duration[0]} {_fmt(duration[1])} "
            f"= {_fmt(tflops)} TFLOP/s of peak_tflops {_fmt(target.peak_tflops)})",
        )
    if "tensor_pipe_active" in s:
        tensor = (s["tensor_pipe_active"], f"tensor_pipe_active {_fmt(s['tensor_pipe_active'])}")
    return memory, compute, tensor


def _bytes_moved(s: Mapping[str, float]) -> tuple[float, str] | None:
    if "bytes_moved" in s:
        return s["bytes_moved"], "bytes_moved"
    if "gm_to_ub_kb" in s or "ub_to_gm_kb" in s:
        total = (s.get("gm_to_ub_kb", 0.0) + s.get("ub_to_gm_kb", 0.0)) * 1024.0
        return total, "(gm_to_ub_kb + ub_to_gm_kb) x 1024"
    if "dram_bytes" in s:
        return s["dram_bytes"], "dram_bytes"
    if "dram_bytes_read" in s or "dram_bytes_write" in s:
        total = s.get("dram_bytes_read", 0.0) + s.get("dram_bytes_write", 0.0)
        return total, "dram_bytes_read + dram_bytes_write"
    return None


def floors_us(signals: Mapping[str, float], floors: Floors | None = None) -> dict[str, float]:
    """The floors (in us) computable from `floors`, with bytes moved taken from the signals
    (``bytes_moved``, else ``gm_to_ub_kb`` + ``ub_to_gm_kb`` at 1024 bytes per KB, else
    ``dram_bytes``, else ``dram_bytes_read`` + ``dram_bytes_write``) when
    `floors.bytes_moved` is None.

    >>> floors_us({}, Floors(bytes_moved=1e6, effective_bandwidth_gbps=1000.0))
    {'memory': 1.0}
    """
    floors = floors or Floors()
    s = _validated(signals)
    out: dict[str, float] = {}
    moved = floors.bytes_moved
    if moved is None:
        found = _bytes_moved(s)
        moved = found[0] if found else None
    if moved is not None and floors.effective_bandwidth_gbps:
        out["memory"] = moved / (floors.effective_bandwidth_gbps * 1e3)
    if floors.elements is not None and floors.vector_throughput_elems_per_us:
        out["vector"] = floors.elements / floors.vector_throughput_elems_per_us
    if floors.empty_kernel_us is not None:
        out["launch"] = floors.empty_kernel_us
    return out


Fired = list[tuple[str, list[str]]]


def _fixed_cost(s: Mapping[str, float], t: Thresholds, floors: Floors, fired: Fired) -> None:
    duration = _duration(s)
    if duration is None:
        return
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


def _parallelism(
    s: Mapping[str, float],
    kind: str | None,
    target: TargetCaps,
    t: Thresholds,
    fired: Fired,
    quiet: list[str],
) -> None:
    blocks = s.get("block_dim")
    if blocks is not None and blocks <= 0:
        quiet.append("block_dim 0: not collected in this profile")
        blocks = None
    cores = _usable_cores(kind, target)
    if blocks is not None and cores is not None:
        count, what = cores
        if blocks >= t.blocks_per_core_max * count:
            text = (
                f"block_dim {_fmt(blocks)} ≥ {_fmt(t.blocks_per_core_max)} x {count} "
                f"usable {what} cores"
            )
            per_block = _time_per_block(s, blocks, count)
            if per_block is None:
                fired.append((Bottleneck.LAUNCH_SCHEDULING, [text]))
            elif per_block[1] <= t.block_time_max_us:
                shown = f"{per_block[0]} / {_fmt(math.ceil(blocks / count))} blocks per core"
                fired.append(
                    (
                        Bottleneck.LAUNCH_SCHEDULING,
                        [
                            text,
                            f"{shown} = {_fmt(per_block[1])} us a block ≤ "
                            f"{_fmt(t.block_time_max_us)}: dispatch is a visible share",
                        ],
                    )
                )
            else:
                quiet.append(
                    f"{text}, but each block runs {_fmt(per_block[1])} us > "
                    f"{_fmt(t.block_time_max_us)}: dispatch is no visible share"
                )
        elif blocks < t.min_core_fill * count:
            text = f"block_dim {_fmt(blocks)} < {_fmt(t.min_core_fill)} x {count}"
            fired.append((Bottleneck.INSUFFICIENT_PARALLELISM, [f"{text} usable {what} cores"]))
    elif blocks is not None:
        quiet.append(f"block_dim known but the target's {kind or 'usable'} core count is not")
    grid = s.get("grid_size")
    sms = s.get("sm_count") or (float(target.sm_count) if target.sm_count else None)
    if grid is not None and sms and grid < t.min_core_fill * sms:
        fired.append(
            (
                Bottleneck.INSUFFICIENT_PARALLELISM,
                [f"grid_size {_fmt(grid)} < {_fmt(t.min_core_fill)} x {_fmt(sms)} SMs"],
            )
        )


def _ub(s: Mapping[str, float], target: TargetCaps, t: Thresholds, fired: Fired) -> None:
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


def _ascend_pipes(
    s: Mapping[str, float],
    kind: str | None,
    target: TargetCaps,
    t: Thresholds,
    fired: Fired,
    quiet: list[str],
) -> list[str]:
    """Fire the family with the largest share of its core's time; returns flags."""
    families = _pipe_families(s, kind)
    if "memory" not in families:
        memory, _, _ = _roofline({k: v for k, v in s.items() if k != "sm_throughput"}, target)
        if memory is not None:
            families["memory"] = (memory[0], "roofline", memory[1])
    ranked = sorted(families.items(), key=lambda kv: (-kv[1][0], list(_STAGES).index(kv[0])))
    if not ranked or ranked[0][1][0] <= 0:
        return []
    family, (share, side, how) = ranked[0]
    text = how if side == "roofline" else f"{family} share {_fmt(share)} of {side} time ({how})"
    if side != "roofline" and share > 1:
        # a family's stages run side by side (MTE2 loads while MTE3 stores): their shares of
        # the core's time add up past 1
        text += f"; its {side} stages overlap in time"
    if "memory" not in families:
        # compute pipes alone (ArithmeticUtilization): a low share says nothing about MTE
        limit = t.scalar_ratio if family == "scalar" else t.vec_ratio
        if share < limit:
            quiet.append(f"{text} < {_fmt(limit)} with no MTE share to compare against")
            return []
        text += f" ≥ {_fmt(limit)} (no MTE share in the profile)"
    flags: list[str] = []
    if len(ranked) > 1:
        runner, (second, _, _) = ranked[1]
        text += f"; next {runner} {_fmt(second)}"
        total = math.fsum(v[0] for v in families.values())
        if total > 0 and (share - second) / total < t.mixed_margin:
            flags.append(MIXED)
            fired.append((Bottleneck(_FAMILY_CLASS[family]), [text]))
            fired.append(
                (
                    _FAMILY_CLASS[runner],
                    [f"{runner} share {_fmt(second)} is within mixed_margin of {family}"],
                )
            )
            return flags
    fired.append((_FAMILY_CLASS[family], [text]))
    return flags


def _gpu_pipes(s: Mapping[str, float], target: TargetCaps, t: Thresholds, fired: Fired) -> None:
    memory, compute, tensor = _roofline(s, target)
    if memory is None and compute is None:
        return
    mem_share, mem_text = memory if memory else (0.0, "no memory throughput")
    cmp_share, cmp_text = compute if compute else (0.0, "no SM throughput")
    compute_class, detail = Bottleneck.VECTOR_COMPUTE, ""
    issue = s.get("issue_slots_busy")
    if tensor is not None:
        detail = f"; {tensor[1]}"
        if tensor[0] >= t.sm_throughput:
            compute_class = Bottleneck.CUBE_COMPUTE
    elif issue is not None and issue < 0.5 * cmp_share:
        # the SM is busy in one heavy pipe while few instructions issue: the matrix unit
        compute_class = Bottleneck.CUBE_COMPUTE
        detail = f"; issue_slots_busy {_fmt(issue)} < half of it: one heavy pipe is busy"
    else:
        detail = "; no tensor-pipe metric in the profile"
    mem_hot = memory is not None and mem_share >= t.dram_throughput
    cmp_hot = compute is not None and cmp_share >= t.sm_throughput
    if not mem_hot and not cmp_hot:
        if memory is not None and compute is not None:
            fired.append(
                (
                    Bottleneck.LATENCY,
                    [
                        f"{mem_text} < {_fmt(t.dram_throughput)} and {cmp_text} < "
                        f"{_fmt(t.sm_throughput)}: neither memory nor compute is near its peak"
                    ],
                )
            )
        return
    mem = (Bottleneck.MEMORY_TRANSFER, [f"{mem_text} ≥ {_fmt(t.dram_throughput)}"])
    cmp = (compute_class, [f"{cmp_text} ≥ {_fmt(t.sm_throughput)}{detail}"])
    if mem_hot and cmp_hot:
        fired.extend([mem, cmp] if mem_share >= cmp_share else [cmp, mem])
    else:
        fired.append(mem if mem_hot else cmp)


def _missing(words: str, s: Mapping[str, float]) -> str:
    if words == NEUTRAL:
        need = "a memory and a compute share of the time (a signal map with memory_throughput "
        need += "and sm_throughput as fractions, or bytes_moved and flop_count with the "
        need += "target's peak_bandwidth_gbps and peak_tflops)"
        return need if _duration(s) is not None else need + " and a duration"
    if words == GPU:
        return (
            "SM and DRAM throughput (ncu sm__throughput / dram__throughput, the "
            "SpeedOfLight section), or DRAM bytes and a duration with the target's "
            "peak_bandwidth_gbps"
        )
    need = "pipe stage ratios or times (aic_*/aiv_* columns: PipeUtilization or "
    need += "ArithmeticUtilization metrics, level1 or above)"
    if _duration(s) is None:
        need += " and a task duration"
    return need


def _rules(
    s: Mapping[str, float],
    kind: str | None,
    target: TargetCaps,
    t: Thresholds,
    floors: Floors,
) -> tuple[Fired, list[str], list[str]]:
    """Every rule that fires, in rule order, with its evidence; sentences on what was
    checked without firing; and flags."""
    fired: Fired = []
    quiet: list[str] = []
    if _duration(s) is None:
        quiet.append("no task_duration_us or duration_us signal")
    _fixed_cost(s, t, floors, fired)
    _parallelism(s, kind, target, t, fired, quiet)
    _ub(s, target, t, fired)
    flags: list[str] = []
    if kind == "gpu":
        _gpu_pipes(s, target, t, fired)
    else:
        flags = _ascend_pipes(s, kind, target, t, fired, quiet)
    return fired, quiet, flags


def classify(
    signals: Mapping[str, float],
    target: TargetCaps | None = None,
    thresholds: Thresholds | None = None,
    floors: Floors | None = None,
    attributes: Mapping[str, str] | None = None,
    platform: str | None = None,
) -> Attribution:
    """Attribute the profile's time to one bottleneck class; see the module docstring.
    `attributes` are the profile's categorical facts (``task_type``, ``op_type``);
    `platform` the run's platform family, which its words follow (`wording`)."""
    s = _validated(signals)
    target = target or TargetCaps()
    t = thresholds or Thresholds()
    floors = floors or Floors()
    kind, why = core_kind(s, attributes)
    words = wording(kind, platform, target.sm_count)
    if kind == "communication" and _nonzero(s, "aiv_"):
        kind, why = "vector", f"{why} with vector pipe time (communication fused with AIV work)"
    if kind in _ROUTED:
        winner = _ROUTED[kind]
        fired: Fired = [(winner, [f"{why}: not an AI Core kernel; no pipe rules apply"])]
        quiet: list[str] = []
        flags: list[str] = []
    else:
        fired, quiet, flags = _rules(s, kind, target, t, floors)
    first = None
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
        missing = _missing(words, s)
        evidence = [*quiet, f"missing: {missing}"]
        first = f"collect {missing} before choosing a mechanism"
    if kind == GPU and words == NEUTRAL:
        evidence.append("read with the throughput rules (throughput or launch signals)")
    elif kind is not None:
        evidence.append(f"core: {kind} ({why})")

    floor_values = floors_us(s, floors)
    duration = _duration(s)
    headroom: float | None = None
    floor: float | None = None
    if floor_values:
        which = max(floor_values, key=lambda k: floor_values[k])
        floor = floor_values[which]
        evidence.append(
            "floors (us): " + ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(floor_values.items()))
        )
        if duration is not None and duration[1] > 0:
            key, value = duration
            headroom = max(0.0, 1.0 - floor / value)
            evidence.append(
                f"headroom {_fmt(headroom)}: {key} {_fmt(value)} down to the {which} floor "
                f"{_fmt(floor)} us"
            )
            if floor > value:
                flags.append(FLOOR_ABOVE_MEASURED)
    return Attribution(
        bottleneck=str(winner),
        evidence=tuple(evidence),
        first_experiment=first or first_experiment(winner, words),
        headroom=headroom,
        flags=tuple(flags),
        floor_us=floor,
        core=kind,
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
