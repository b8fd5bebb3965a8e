"""Bottleneck attribution: one row per rule, overrides, headroom and its flag."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.core.bottleneck import (
    FIRST_EXPERIMENTS,
    GPU_FIRST_EXPERIMENTS,
    TARGET_EXCEEDS_HEADROOM,
    Attribution,
    Bottleneck,
    Floors,
    TargetCaps,
    Thresholds,
    classify,
    floors_us,
    headroom_flag,
)
from ledger.errors import InputError
from ledger.inputs.profiles import load_profile

FIXTURES = Path(__file__).parent.parent / "fixtures" / "profiles"
A2 = TargetCaps(vector_cores=40, cube_cores=20, ub_bytes=192 * 1024)
H100 = TargetCaps(sm_count=132)

CASES = [
    # (id, signals, target, floors, bottleneck, evidence fragment)
    (
        "fixed-cost-absolute",
        {"task_duration_us": 3.0, "aiv_vec_ratio": 0.9},
        A2,
        None,
        "fixed-cost",
        "task_duration_us 3 ≤ 5",
    ),
    (
        "fixed-cost-empty-kernel",
        {"duration_us": 3.5},
        H100,
        Floors(empty_kernel_us=2.0),
        "fixed-cost",
        "≤ 2 x empty-kernel 2 us",
    ),
    (
        "launch-scheduling",
        {"task_duration_us": 900.0, "block_dim": 4096, "aiv_vec_ratio": 0.2},
        A2,
        None,
        "launch-scheduling",
        "block_dim 4096 ≥ 4 x 40 usable vector cores",
    ),
    (
        "parallelism-ascend",
        {"task_duration_us": 80.0, "block_dim": 8, "aiv_mte2_ratio": 0.9},
        A2,
        None,
        "insufficient-parallelism",
        "block_dim 8 < 0.75 x 40 usable vector cores",
    ),
    (
        "parallelism-mix-uses-cube-cores",
        {"task_duration_us": 80.0, "block_dim": 4, "mix_block_dim": 8, "aic_cube_ratio": 0.3},
        A2,
        None,
        "insufficient-parallelism",
        "x 20 usable cube cores",
    ),
    (
        "parallelism-ncu-grid",
        {"duration_us": 50.0, "grid_size": 8, "dram_throughput": 0.1},
        H100,
        None,
        "insufficient-parallelism",
        "grid_size 8 < 0.75 x 132 SMs",
    ),
    (
        # a persistent cuBLAS GEMM: one block per SM, low occupancy by design
        "persistent-kernel-is-not-insufficient-parallelism",
        {
            "duration_us": 1403.0,
            "grid_size": 132,
            "sm_count": 132,
            "achieved_occupancy": 0.148,
            "sm_throughput": 0.93,
            "dram_throughput": 0.19,
            "tensor_pipe_active": 0.97,
        },
        None,
        None,
        "cube-compute",
        "sm_throughput 0.93 ≥ 0.60; tensor_pipe_active 0.97",
    ),
    (
        "ub-overflow",
        {"task_duration_us": 60.0, "block_dim": 40, "ub_overflow": 1},
        A2,
        None,
        "ub-live-set",
        "ub_overflow 1 > 0",
    ),
    (
        "ub-multibuffer",
        {"task_duration_us": 60.0, "multibuffer_disabled": 1.0},
        None,
        None,
        "ub-live-set",
        "multibuffer_disabled 1 > 0",
    ),
    (
        "ub-nearly-full",
        {"task_duration_us": 60.0, "ub_bytes_used": 190_000},
        A2,
        None,
        "ub-live-set",
        "ub_bytes_used 190000 ≥ 0.95 x 196608 UB bytes",
    ),
    (
        "memory-ascend",
        {"task_duration_us": 60.0, "block_dim": 40, "aiv_mte2_ratio": 0.72, "aiv_vec_ratio": 0.2},
        A2,
        None,
        "memory-transfer",
        "aiv_mte2_ratio 0.72",
    ),
    (
        "memory-mte3",
        {"task_duration_us": 60.0, "aiv_mte3_ratio": 0.55},
        None,
        None,
        "memory-transfer",
        "memory share 0.55 of aiv time (aiv_mte3_ratio 0.55)",
    ),
    (
        "memory-ncu",
        {"duration_us": 60.0, "grid_size": 1024, "dram_throughput": 0.86, "sm_throughput": 0.3},
        H100,
        None,
        "memory-transfer",
        "dram_throughput 0.86 ≥ 0.60",
    ),
    (
        "scalar",
        {"task_duration_us": 40.0, "aiv_scalar_ratio": 0.41},
        None,
        None,
        "scalar-flow-control",
        "scalar share 0.41 of aiv time (aiv_scalar_ratio 0.41)",
    ),
    (
        "vector",
        {"task_duration_us": 40.0, "aiv_vec_ratio": 0.82},
        None,
        None,
        "vector-compute",
        "vector share 0.82 of aiv time (aiv_vec_ratio 0.82)",
    ),
    (
        "cube",
        {"task_duration_us": 400.0, "aic_cube_ratio": 0.85},
        None,
        None,
        "cube-compute",
        "cube share 0.85 of aic time (aic_cube_ratio 0.85)",
    ),
    (
        "ncu-compute",
        {"duration_us": 400.0, "sm_throughput": 0.92, "dram_throughput": 0.2},
        None,
        None,
        "vector-compute",
        "sm_throughput 0.92 ≥ 0.60",
    ),
    (
        "unknown-level0-block-dim-zero",
        {"task_duration_us": 40.0, "block_dim": 0.0},
        A2,
        None,
        "unknown",
        "block_dim 0: not collected",
    ),
    (
        "latency-ncu",
        {"duration_us": 7.5, "grid_size": 8192, "dram_throughput": 0.06, "sm_throughput": 0.4},
        H100,
        None,
        "latency-bound",
        "dram_throughput 0.06 < 0.60 and sm_throughput 0.40 < 0.60",
    ),
    (
        "roofline-from-bytes-and-peak",
        {"duration_us": 100.0, "grid_size": 4096, "dram_bytes": 400e6},
        TargetCaps(sm_count=132, peak_bandwidth_gbps=4800.0),
        None,
        "memory-transfer",
        "memory share 0.83 (dram_bytes over duration_us 100 = 4000 GB/s of peak_bandwidth_gbps",
    ),
    ("unknown-nothing", {}, None, None, "unknown", "no task_duration_us or duration_us"),
]


@pytest.mark.parametrize(
    ("signals", "target", "floors", "expected", "fragment"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_classification_table(
    signals: dict[str, float],
    target: TargetCaps | None,
    floors: Floors | None,
    expected: str,
    fragment: str,
) -> None:
    a = classify(signals, target, floors=floors)
    assert a.bottleneck == expected
    assert any(fragment in e for e in a.evidence), a.evidence
    if expected == "unknown":  # the advice names what is missing
        assert a.first_experiment.startswith("collect ")
        assert any(e.startswith("missing: ") for e in a.evidence)
    elif a.core == "gpu" or (a.core is None and target and target.sm_count):
        # an ncu profile, or one with no core kind on a target with SMs: the GPU's wording
        assert a.first_experiment == GPU_FIRST_EXPERIMENTS[expected]
    else:
        assert a.first_experiment == FIRST_EXPERIMENTS[expected]


def test_every_class_has_a_first_experiment_from_the_table() -> None:
    assert set(FIRST_EXPERIMENTS) == set(Bottleneck) == set(GPU_FIRST_EXPERIMENTS)
    assert "grid-stride" in FIRST_EXPERIMENTS["launch-scheduling"]
    assert "multibuffer" in FIRST_EXPERIMENTS["memory-transfer"]
    assert "hoist invariants" in FIRST_EXPERIMENTS["scalar-flow-control"]


def test_pipes_compete_by_share_of_time_not_ratio_over_threshold() -> None:
    # rules v1 divided each ratio by its threshold: scalar 0.76/0.30 beat mte2 0.91/0.50
    a = classify({"task_duration_us": 50.0, "aiv_mte2_ratio": 0.91, "aiv_scalar_ratio": 0.76})
    assert a.bottleneck == "memory-transfer"
    assert a.flags == ("mixed", "also-scalar-flow-control")  # within 0.10 of the total
    assert a.evidence[0] == (
        "memory share 0.91 of aiv time (aiv_mte2_ratio 0.91); next scalar 0.76"
    )


def test_close_families_are_flagged_mixed() -> None:
    a = classify({"task_duration_us": 50.0, "aiv_mte2_ratio": 0.50, "aiv_vec_ratio": 0.46})
    assert a.bottleneck == "memory-transfer"
    assert a.flags == ("mixed", "also-vector-compute")
    b = classify(
        {"task_duration_us": 50.0, "aiv_mte2_ratio": 0.50, "aiv_vec_ratio": 0.46},
        thresholds=Thresholds(mixed_margin=0.01),
    )
    assert b.flags == ()


def test_mte_stages_of_one_side_add_up_and_sides_stay_apart() -> None:
    a = classify(
        {
            "task_duration_us": 50.0,
            "aiv_mte2_ratio": 0.35,
            "aiv_mte3_ratio": 0.30,
            "aiv_vec_ratio": 0.5,
        },
        attributes={"task_type": "AI_VECTOR_CORE"},
    )
    assert a.bottleneck == "memory-transfer"
    assert "aiv_mte2_ratio 0.35 + aiv_mte3_ratio 0.30" in a.evidence[0]
    assert "overlap" not in a.evidence[0]


def test_stages_that_overlap_past_the_whole_core_time_say_so() -> None:
    """MTE2 and MTE3 run side by side, so their shares can add up past 1 (as real mix
    kernels' op_summary rows do): the evidence says why the share exceeds the whole."""
    a = classify(
        {"task_duration_us": 50.0, "aiv_mte2_ratio": 0.8, "aiv_mte3_ratio": 0.37},
        attributes={"task_type": "AI_VECTOR_CORE"},
    )
    assert a.bottleneck == "memory-transfer"
    assert a.evidence[0].startswith(
        "memory share 1.17 of aiv time (aiv_mte2_ratio 0.80 + aiv_mte3_ratio 0.37); its aiv "
        "stages overlap in time"
    )


def test_core_type_routes_first() -> None:
    cube_zeros = {
        "task_duration_us": 300.0,
        "block_dim": 20,
        "aic_mac_ratio_unused": 0.0,
        "aic_cube_ratio": 0.86,
        "aic_mte2_ratio": 0.3,
        "aiv_vec_ratio": 0.0,
        "aiv_mte2_ratio": 0.0,
        "aiv_scalar_ratio": 0.0,
    }
    # a MatMul on all 20 cube cores: not "insufficient" against 40 vector cores
    a = classify(cube_zeros, A2, attributes={"task_type": "AI_CORE"})
    assert a.bottleneck == "cube-compute"
    assert a.core == "cube"
    assert "also-insufficient-parallelism" not in a.flags
    # the same numbers without a core type: the zero vector side is no signal
    assert classify(cube_zeros, A2).bottleneck == "cube-compute"
    for task, expected in (
        ("AI_CPU", "ai-cpu"),
        ("HCCL", "communication"),
        ("COMMUNICATION", "communication"),
        ("DSA_SQE", "dsa"),
    ):
        routed = classify(
            {"task_duration_us": 900.0, "block_dim": 1}, A2, attributes={"task_type": task}
        )
        assert routed.bottleneck == expected
        assert routed.flags == ()
    fused = classify(
        {"task_duration_us": 90.0, "aiv_mte2_ratio": 0.7, "aiv_vec_ratio": 0.1},
        attributes={"task_type": "COMMUNICATION"},
    )
    assert fused.bottleneck == "memory-transfer"


def test_mix_operators_count_cube_cores_and_compare_both_sides() -> None:
    signals = {
        "task_duration_us": 120.0,
        "block_dim": 20,
        "mix_block_dim": 40,
        "aic_cube_ratio": 0.3,
        "aiv_vec_ratio": 0.7,
    }
    a = classify(signals, A2, attributes={"task_type": "MIX_AIC"})
    assert a.bottleneck == "vector-compute"
    assert "also-insufficient-parallelism" not in a.flags
    b = classify(signals, A2, attributes={"task_type": "MIX_AIV"})
    assert b.bottleneck == "insufficient-parallelism"  # 20 blocks < 0.75 x 40 vector cores


def test_arithmetic_utilization_stands_in_for_pipe_ratios() -> None:
    fast_gelu = {"task_duration_us": 60.0, "aiv_vec_fp32_ratio": 0.63, "aiv_vec_fp16_ratio": 0.0}
    assert classify(fast_gelu).bottleneck == "vector-compute"
    matmul = {"task_duration_us": 600.0, "aic_mac_fp16_ratio": 0.86, "aic_mac_int8_ratio": 0.0}
    assert classify(matmul).bottleneck == "cube-compute"


def test_arithmetic_dtype_ratios_only_not_conflict_or_wait_ratios() -> None:
    conflicts = {
        "task_duration_us": 60.0,
        "aiv_vec_total_cflt_ratio": 0.9,
        "aiv_vec_wait_ratio": 0.8,
    }
    assert classify(conflicts).bottleneck == "unknown"
    msprof_op = {"task_duration_us": 60.0, "aiv_fp32_ratio": 0.7, "aic_cube_fp16_ratio": 0.0}
    a = classify(msprof_op, attributes={"op_type": "vector"})
    assert a.bottleneck == "vector-compute"
    assert "aiv_fp32_ratio 0.70" in a.evidence[0]


def test_stage_times_over_core_time_when_no_ratio() -> None:
    a = classify(
        {
            "task_duration_us": 60.0,
            "aiv_time_us": 50.0,
            "aiv_mte2_time_us": 40.0,
            "aiv_vec_time_us": 10.0,
        }
    )
    assert a.bottleneck == "memory-transfer"
    assert "aiv_mte2_time_us 40 / aiv_time_us 50" in a.evidence[0]


def test_structural_rules_come_before_pipes() -> None:
    signals = {"task_duration_us": 900.0, "block_dim": 4096, "aiv_mte2_ratio": 0.9}
    a = classify(signals, A2)
    assert a.bottleneck == "launch-scheduling"
    assert "also-memory-transfer" in a.flags
    # without a core count the launch rule cannot fire
    b = classify(signals)
    assert b.bottleneck == "memory-transfer"


def test_fixed_cost_empty_kernel_floor_replaces_absolute_threshold() -> None:
    signals = {"task_duration_us": 4.5}
    assert classify(signals).bottleneck == "fixed-cost"
    assert classify(signals, floors=Floors(empty_kernel_us=1.0)).bottleneck == "unknown"


@pytest.mark.parametrize(
    ("signals", "thresholds", "expected"),
    [
        (
            {"duration_us": 80.0, "sm_throughput": 0.5, "dram_throughput": 0.1},
            Thresholds(sm_throughput=0.45),
            "vector-compute",
        ),
        ({"task_duration_us": 8.0}, Thresholds(fixed_cost_duration_us=10.0), "fixed-cost"),
        (
            {"task_duration_us": 80.0, "block_dim": 100},
            Thresholds(blocks_per_core_max=2.0),
            "launch-scheduling",
        ),
        (
            {"task_duration_us": 80.0, "block_dim": 36},
            Thresholds(min_core_fill=1.0),
            "insufficient-parallelism",
        ),
        (
            {"duration_us": 80.0, "dram_throughput": 0.5},
            Thresholds(dram_throughput=0.4),
            "memory-transfer",
        ),
    ],
)
def test_threshold_overrides(
    signals: dict[str, float], thresholds: Thresholds, expected: str
) -> None:
    assert classify(signals, A2, thresholds).bottleneck == expected


def test_defaults_without_override() -> None:
    assert classify({"duration_us": 80.0, "dram_throughput": 0.5}).bottleneck == "unknown"
    assert classify({"task_duration_us": 80.0, "block_dim": 100}, A2).bottleneck == "unknown"
    assert classify({"task_duration_us": 40.0, "aiv_mte2_ratio": 0.35}).bottleneck == (
        "memory-transfer"
    )


# --------------------------------------------------------------------------- headroom


def test_headroom_down_to_the_nearest_floor() -> None:
    floors = Floors(
        bytes_moved=8e6,  # 8 MB at 1000 GB/s = 8 us
        effective_bandwidth_gbps=1000.0,
        elements=1e6,  # 1e6 elements at 1e5 per us = 10 us
        vector_throughput_elems_per_us=1e5,
        empty_kernel_us=2.0,
    )
    assert floors_us({}, floors) == {"memory": 8.0, "vector": 10.0, "launch": 2.0}
    a = classify({"task_duration_us": 20.0, "aiv_vec_ratio": 0.8}, floors=floors)
    assert a.headroom == pytest.approx(0.5)
    assert a.floor_us == 10.0
    assert any("vector floor 10 us" in e for e in a.evidence)


def test_headroom_bytes_from_signals() -> None:
    floors = Floors(effective_bandwidth_gbps=1.024)
    s = {"task_duration_us": 10.0, "gm_to_ub_kb": 3.0, "ub_to_gm_kb": 2.0}
    assert floors_us(s, floors)["memory"] == pytest.approx(5.0)
    assert classify(s, floors=floors).headroom == pytest.approx(0.5)
    ncu = {"duration_us": 10.0, "dram_bytes": 4000.0}
    assert floors_us(ncu, Floors(effective_bandwidth_gbps=1.0))["memory"] == pytest.approx(4.0)
    explicit = {"task_duration_us": 10.0, "bytes_moved": 1000.0, "gm_to_ub_kb": 99.0}
    assert floors_us(explicit, Floors(effective_bandwidth_gbps=1.0))["memory"] == 1.0


def test_headroom_unknown_and_floor_above_measured() -> None:
    assert classify({"task_duration_us": 10.0}).headroom is None
    assert classify({}, floors=Floors(empty_kernel_us=1.0)).headroom is None
    a = classify(
        {"task_duration_us": 10.0, "aiv_mte2_ratio": 0.9},
        floors=Floors(bytes_moved=2e4, effective_bandwidth_gbps=1.0),
    )
    assert a.headroom == 0.0
    assert "floor-above-measured" in a.flags


def test_headroom_flag() -> None:
    a = classify(
        {"task_duration_us": 20.0, "aiv_mte2_ratio": 0.9},
        floors=Floors(bytes_moved=8e6, effective_bandwidth_gbps=1000.0),
    )
    assert a.headroom == pytest.approx(0.6)
    assert headroom_flag(0.7, a) == TARGET_EXCEEDS_HEADROOM
    assert headroom_flag(0.6, a) is None
    assert headroom_flag(0.1, a) is None
    assert headroom_flag(0.9, classify({"task_duration_us": 20.0})) is None
    with pytest.raises(InputError):
        headroom_flag(math.nan, a)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "signals",
    [{"x": math.nan}, {"x": math.inf}, {"x": True}, {"x": "0.5"}, {"x": None}],
)
def test_bad_signal_values(signals: dict[str, object]) -> None:
    with pytest.raises(InputError) as exc:
        classify(signals)  # type: ignore[arg-type]
    assert "'x'" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "build",
    [
        lambda: Thresholds(scalar_ratio=0.0),
        lambda: Thresholds(mte_ratio=-1.0),
        lambda: Thresholds(vec_ratio=math.inf),
        lambda: TargetCaps(vector_cores=0),
        lambda: TargetCaps(sm_count=True),
        lambda: Floors(effective_bandwidth_gbps=0.0),
        lambda: Floors(bytes_moved=-1.0),
    ],
)
def test_bad_settings(build: object) -> None:
    with pytest.raises(InputError):
        build()  # type: ignore[operator]


def test_attribution_is_frozen_and_zero_floors_allowed() -> None:
    a = classify({"task_duration_us": 9.0}, floors=Floors(bytes_moved=0.0, elements=0.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.bottleneck = "x"  # type: ignore[misc]
    assert isinstance(a, Attribution)


# --------------------------------------------------------------------------- with profiles


def test_classify_loaded_profiles() -> None:
    single = load_profile(FIXTURES / "msprof-op" / "single")
    a = classify(single.signals, A2)
    assert a.bottleneck == "insufficient-parallelism"  # 2 blocks on 40 vector cores
    assert "also-memory-transfer" in a.flags  # aiv_mte2_ratio 0.575
    ncu = load_profile(FIXTURES / "ncu" / "details.csv", kernel_name="add_kernel")
    assert classify(ncu.signals).bottleneck == "memory-transfer"


_KEYS = [
    "task_duration_us",
    "duration_us",
    "block_dim",
    "mix_block_dim",
    "grid_size",
    "sm_count",
    "achieved_occupancy",
    "dram_throughput",
    "sm_throughput",
    "aiv_vec_ratio",
    "aiv_scalar_ratio",
    "aiv_mte2_ratio",
    "aiv_mte3_ratio",
    "aic_cube_ratio",
    "ub_overflow",
    "ub_bytes_used",
    "gm_to_ub_kb",
    "dram_bytes",
    "l2_throughput",
    "tensor_pipe_active",
    "issue_slots_busy",
    "aic_mac_fp16_ratio",
    "aiv_vec_fp32_ratio",
    "aic_mte2_ratio",
    "aic_fixpipe_ratio",
    "aiv_time_us",
    "aiv_mte2_time_us",
    "flop_count",
]


@settings(max_examples=300, deadline=None)
@given(
    signals=st.dictionaries(
        st.sampled_from(_KEYS), st.floats(0.0, 1e7, allow_nan=False), max_size=len(_KEYS)
    ),
    bandwidth=st.one_of(st.none(), st.floats(0.001, 1e4)),
    task_type=st.sampled_from(
        ["", "AI_CORE", "AI_VECTOR_CORE", "MIX_AIC", "MIX_AIV", "AI_CPU", "HCCL", "DSA_SQE", "N/A"]
    ),
)
def test_classify_is_total(
    signals: dict[str, float], bandwidth: float | None, task_type: str
) -> None:
    target = TargetCaps(vector_cores=40, cube_cores=20, sm_count=132, peak_bandwidth_gbps=1600.0)
    a = classify(
        signals,
        target,
        floors=Floors(effective_bandwidth_gbps=bandwidth),
        attributes={"task_type": task_type},
    )
    assert a.bottleneck in set(Bottleneck)
    assert a.evidence and a.first_experiment
    assert a.evidence
    assert a.headroom is None or 0.0 <= a.headroom <= 1.0


def test_classify_survives_a_vanishing_duration() -> None:
    """Bytes over a subnormal duration overflow to an infinite rate; the evidence line must
    still print (found by test_classify_is_total)."""
    target = TargetCaps(vector_cores=40, cube_cores=20, sm_count=132, peak_bandwidth_gbps=1600.0)
    a = classify(
        {"task_duration_us": 2.2e-309, "duration_us": 0.0, "gm_to_ub_kb": 1.0},
        target,
        floors=Floors(),
        attributes={"task_type": "AI_VECTOR_CORE"},
    )
    assert a.bottleneck in set(Bottleneck)
    assert a.evidence
    assert a.headroom is None or 0.0 <= a.headroom <= 1.0


def test_many_blocks_are_launch_scheduling_only_while_dispatch_is_a_visible_share() -> None:
    """Blocks far above the cores are a scheduling cost only when each block is short: the
    duration over the blocks each core runs in turn against `block_time_max_us`."""
    signals = {"task_duration_us": 900.0, "block_dim": 4096, "aiv_scalar_ratio": 0.9}
    short = classify(signals, A2)
    assert short.bottleneck == "launch-scheduling"
    assert any("us a block ≤ 50: dispatch is a visible share" in e for e in short.evidence)
    # the same grid, each block running 8 ms: the scalar pipe speaks, nothing of launches
    long = classify({**signals, "task_duration_us": 900_000.0}, A2)
    assert long.bottleneck == "scalar-flow-control"
    assert "also-launch-scheduling" not in long.flags
    # the threshold is the user's
    assert classify(signals, A2, Thresholds(block_time_max_us=5.0)).bottleneck == (
        "scalar-flow-control"
    )
    quiet = classify({"task_duration_us": 900_000.0, "block_dim": 4096}, A2)
    assert any("dispatch is no visible share" in e for e in quiet.evidence), quiet.evidence


ASCEND_TERMS = ("MTE", "multibuffer", "UB", "AI Core", "usable core")


def test_gpu_first_experiments_speak_of_the_gpu_not_of_ascend() -> None:
    for cls in ("insufficient-parallelism", "memory-transfer", "latency-bound", "cube-compute"):
        text = GPU_FIRST_EXPERIMENTS[cls]
        assert not any(term in text for term in ASCEND_TERMS), (cls, text)
    assert "registers" in GPU_FIRST_EXPERIMENTS["latency-bound"]
    assert "coalesced" in GPU_FIRST_EXPERIMENTS["memory-transfer"]
    assert "SM count" in GPU_FIRST_EXPERIMENTS["insufficient-parallelism"]
    assert "tensor cores" in GPU_FIRST_EXPERIMENTS["cube-compute"]
    assert "L2" in GPU_FIRST_EXPERIMENTS["memory-transfer"]
