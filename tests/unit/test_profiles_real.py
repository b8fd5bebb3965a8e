"""Real profiler files (tests/fixtures/profiles/real/PROVENANCE.md): each is read as its
tool wrote it and attributed to the class its own numbers support. Every row says why."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ledger.core.bottleneck import Attribution, TargetCaps, classify
from ledger.errors import InputError
from ledger.inputs.profiles import load_profile, parse_ncu_csv

REAL = Path(__file__).parent.parent / "fixtures" / "profiles" / "real"
NCU = REAL / "ncu-h200"
ASCEND = REAL / "ascend"
H200 = TargetCaps(sm_count=132)
# The cores each mstt file's own launches show: the pipeutil file's MatMulV3 and
# FlashAttention use 20 cube blocks and 40 vector blocks, the arith file's MatMuls 24 and
# its element-wise ops 48.
A2_20 = TargetCaps(cube_cores=20, vector_cores=40)
A2_24 = TargetCaps(cube_cores=24, vector_cores=48)

SAXPY = "CUDAFunctor_add<float>"
TINY = "CUDAFunctorOnSelf_add"
NCU_FORMS = ("metrics", "details", "details-base", "raw", "raw-metrics", "logfile")
WITH_TENSOR_PIPE = ("metrics", "raw", "raw-metrics", "logfile")


def attribute(path: Path, kernel: str, target: TargetCaps, **kw: str) -> Attribution:
    profile = load_profile(path, kernel_name=kernel, **kw)
    return classify(profile.signals, target, attributes=profile.attributes)


# --------------------------------------------------------------------------- ncu, H200


NCU_CASES = [
    # (kernel, class, evidence fragment, why)
    (
        SAXPY,
        "memory-transfer",
        "≥ 0.60",
        "DRAM at 89% of peak (L2 at 91% where the file gives it), SM at 6%",
    ),
    (
        "kl_persistent_copy",
        "memory-transfer",
        "≥ 0.60",
        "DRAM at 70% of peak; grid 132 = the SM count, a persistent kernel, so no "
        "parallelism rule fires despite 6% achieved occupancy",
    ),
    (
        "kl_few_blocks_scale",
        "insufficient-parallelism",
        "grid_size 4 < 0.75 x 132 SMs",
        "4 blocks on 132 SMs for 450 us; DRAM under 1%",
    ),
    (TINY, "fixed-cost", "duration_us 2.", "one block, about 2.2 us: the launch is the cost"),
]


@pytest.mark.parametrize("form", NCU_FORMS)
@pytest.mark.parametrize(
    ("kernel", "expected", "fragment", "why"), NCU_CASES, ids=[c[0] for c in NCU_CASES]
)
def test_h200_ncu_kernels_in_every_form(
    form: str, kernel: str, expected: str, fragment: str, why: str
) -> None:
    a = attribute(NCU / f"{form}.csv", kernel, H200)
    assert a.bottleneck == expected, (why, a.evidence)
    assert fragment in a.evidence[0], a.evidence


@pytest.mark.parametrize("form", NCU_FORMS)
@pytest.mark.parametrize("kernel", ["nvjet_sm90", "kl_triton_matmul"])
def test_h200_gemms_are_compute_bound_not_insufficient_parallelism(form: str, kernel: str) -> None:
    # cuBLAS: grid 132 on 132 SMs, SM 93%, DRAM 19%, tensor pipe 93-97%; Triton: SM 79%,
    # tensor pipe 79-82%, DRAM 15%. Where the file has a tensor-pipe metric the matrix
    # unit is named; the details page has none, so it can only say "SM compute".
    a = attribute(NCU / f"{form}.csv", kernel, H200)
    expected = "cube-compute" if form in WITH_TENSOR_PIPE else "vector-compute"
    assert a.bottleneck == expected, a.evidence
    assert "insufficient-parallelism" not in " ".join(a.flags)
    assert a.evidence[0].startswith("sm_throughput 0.")
    if form not in WITH_TENSOR_PIPE:
        assert "no tensor-pipe metric in the profile" in a.evidence[0]


def test_h200_gemm_full_set_names_the_matrix_unit_from_issue_slots() -> None:
    # --set full details: SM Busy 93% while Issue Slots Busy is 16%: one heavy pipe (the
    # tensor pipe) is saturated, not instruction issue
    a = attribute(NCU / "gemm-full-details.csv", "nvjet_sm90", H200)
    assert a.bottleneck == "cube-compute", a.evidence
    assert "issue_slots_busy 0.16 < half of it" in a.evidence[0]


def test_h200_one_warp_blocks_are_latency_bound_not_insufficient_parallelism() -> None:
    # kl_one_warp_chain: 264 blocks of one warp (2 per SM, occupancy 3%), each a chain of
    # dependent loads: L2 at 8-9%, SM at 1%. The grid fills the SMs; the time is latency.
    for form in ("shapes-metrics", "shapes-details"):
        a = attribute(NCU / f"{form}.csv", "kl_one_warp_chain", H200)
        assert a.bottleneck == "latency-bound", a.evidence
        assert a.flags == ()


def test_h200_one_kernel_two_launch_sizes_are_two_shapes() -> None:
    # kl_saxpy ran on 2^20 floats (grid 1024) and on 2^26 (grid 65536)
    for form in ("shapes-metrics", "shapes-details"):
        p = load_profile(NCU / f"{form}.csv", kernel_name="kl_saxpy")
        assert [s.shape for s in p.shapes] == [
            "grid (1024, 1, 1) block (128, 1, 1)",
            "grid (65536, 1, 1) block (128, 1, 1)",
        ]
        assert p.shape == "grid (65536, 1, 1) block (128, 1, 1)"  # the most total time
        assert p.signals["grid_size"] == 65536 and p.signals["launch_count"] == 1
        small = load_profile(NCU / f"{form}.csv", kernel_name="kl_saxpy", shape="grid (1024")
        assert small.signals["grid_size"] == 1024
        assert small.signals["duration_us"] < p.signals["duration_us"] / 10
        a = classify(p.signals, H200, attributes=p.attributes)
        assert a.bottleneck == "memory-transfer"


def test_ncu_preamble_is_skipped_and_noted() -> None:
    text = (NCU / "metrics.csv").read_text()
    assert text.startswith("==WARNING==") and "checksum, z, c:" in text  # program output
    p = load_profile(NCU / "metrics.csv", kernel_name="kl_persistent_copy")
    assert any("skipped 6 lines before the ncu header" in n for n in p.notes)
    # a BOM (ncu on Windows) and an unbalanced quote in the program's output change nothing
    hostile = "\ufeff" + text.replace("checksum, z, c:", 'checksum, "z, c:')
    again = parse_ncu_csv(hostile, kernel_name="kl_persistent_copy")
    assert again.signals == p.signals


def test_ncu_units_and_names() -> None:
    p = load_profile(NCU / "metrics.csv", kernel_name=SAXPY)
    s = p.signals
    assert s["duration_us"] == pytest.approx(182.72)  # 182,720 ns
    assert s["dram_bytes_read"] == 536_892_672  # "536,892,672" byte
    assert s["dram_bytes"] == 536_892_672 + 245_155_584
    assert s["dram_throughput"] == pytest.approx(0.8896)  # % stored as a fraction
    assert s["l2_hit_rate"] == pytest.approx(0.3385)  # lts__t_sector_hit_rate.pct
    assert s["dram_read_bandwidth_gbps"] == pytest.approx(2938.335551)  # byte/s
    assert s["grid_size"] == 65536 and s["sm_count"] == 132
    assert not [k for k in s if "pct" in k]  # a fraction never carries a "pct" name
    base = load_profile(NCU / "details-base.csv", kernel_name=SAXPY).signals
    assert base["duration_us"] == pytest.approx(181.984)  # nsecond
    raw = load_profile(NCU / "raw.csv", kernel_name=SAXPY).signals
    assert raw["dram_throughput"] == pytest.approx(0.8891, abs=0.01)


def test_ncu_file_with_several_kernels_asks_for_one() -> None:
    with pytest.raises(InputError) as exc:
        load_profile(NCU / "raw.csv")
    message = str(exc.value)
    assert "holds 6 kernels; pass a kernel name" in message and "\n" not in message


# --------------------------------------------------------------------------- Ascend


PIPEUTIL = ASCEND / "mstt-compute-advice-pipeutil.kernel_details.csv"
ARITH = ASCEND / "mstt-advisor-backend-arith.kernel_details.csv"
LEVEL0 = ASCEND / "mstt-level0.kernel_details.csv"

ASCEND_CASES = [
    # (file, kernel, class, evidence fragment, why)
    (
        PIPEUTIL,
        "aclnnMatmul_MatMulCommon_MatMulV2",
        "memory-transfer",
        "aic_mte1_ratio 0.64 + aic_mte2_ratio 0.97",
        "AI_CORE MatMul, 16 blocks on the cube side: MTE2 busy 97% and MTE1 64% of the cube "
        "core's cycles (medians of 4 launches) against mac 82% + fixpipe 3%; the anchor's aic_mte family leads",
    ),
    (
        PIPEUTIL,
        "aclnnMatmul_MatMulV3Common_MatMulV3",
        "memory-transfer",
        "aic_mte2_ratio 0.94",
        "AI_CORE MatMul at 20 blocks: MTE2 94% + MTE1 61% against mac 73% + fixpipe 8%",
    ),
    (
        PIPEUTIL,
        "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
        "cube-compute",
        "cube share 0.98 of aic time",
        "MIX_AIC on 20 cube + 40 vector blocks: mac 46% + fixpipe 52% on the cube side leads "
        "MTE1+MTE2 88%; within the mixed margin, so flagged",
    ),
    (
        PIPEUTIL,
        "aclnnAdd_AddAiCore_Add",
        "memory-transfer",
        "aiv_mte2_ratio 0.84",
        "AI_VECTOR_CORE Add on 40 blocks, shape 512x2x4096 (most time): MTE2 84% + MTE3 13% "
        "of the vector core's cycles against vec 25%; the zeros of the unused cube side are "
        "no signal",
    ),
    (
        ARITH,
        "MatMul91",
        "cube-compute",
        "aic_mac_fp16_ratio 0.89",
        "ArithmeticUtilization: fp16 MAC busy 89% of the cube core's cycles",
    ),
    (
        ARITH,
        "FastGelu106",
        "vector-compute",
        "aiv_vec_fp32_ratio 0.63",
        "ArithmeticUtilization: fp32 vector instructions 63% (+ misc 42%) of the cycles",
    ),
    (
        ARITH,
        "hcom_allReduce__445_2",
        "communication",
        "task_type HCCL",
        "an HCCL collective, Block Dim 0: a class of its own, no pipe rule",
    ),
    (
        ARITH,
        "trans_Cast_5",
        "ai-cpu",
        "task_type AI_CPU",
        "runs on the AI CPU (Block Dim 1 is not a core count there)",
    ),
    (
        ARITH,
        "StatelessDropOutGenMask23/DSASTATELESSGENBITMASK",
        "dsa",
        "task_type DSA_SQE",
        "a DSA queue task, not compute",
    ),
    (
        ARITH,
        "Add88",
        "unknown",
        "vector share 0.04 of aiv time",
        "237 us Add with its vector pipe at 4%: no MTE figures in the ArithmeticUtilization "
        "set, so the time cannot be placed; the evidence names what is missing",
    ),
    (
        ARITH,
        "Cast66",
        "fixed-cost",
        "task_duration_us 3.14 ≤ 5",
        "a 3.1 us cast on 9 of 48 vector cores",
    ),
    (
        LEVEL0,
        "Cast16",
        "unknown",
        "missing: pipe stage ratios or times",
        "level0: 932 us, no pipe columns, Block Dim 0 (not collected) and N/A core type",
    ),
]


@pytest.mark.parametrize(
    ("path", "kernel", "expected", "fragment", "why"),
    ASCEND_CASES,
    ids=[f"{c[0].name.split('.')[0]}-{c[1][:30]}" for c in ASCEND_CASES],
)
def test_ascend_kernel_details(
    path: Path, kernel: str, expected: str, fragment: str, why: str
) -> None:
    a = attribute(path, kernel, A2_20 if path == PIPEUTIL else A2_24)
    assert a.bottleneck == expected, (why, a.evidence)
    assert any(fragment in e for e in a.evidence), a.evidence
    if a.core in ("cube", "mix-aic"):  # counted against the cube cores, not 40/48 vector
        assert "insufficient-parallelism" not in " ".join(a.flags)
    if expected == "unknown":
        assert any(e.startswith("missing: ") for e in a.evidence)
        assert a.first_experiment.startswith("collect ")


def test_every_kernel_of_every_real_ascend_file_is_read_and_attributed() -> None:
    for path in (PIPEUTIL, ARITH, LEVEL0):
        with path.open(encoding="utf-8-sig", newline="") as handle:
            names = list(dict.fromkeys(r["Name"] for r in csv.DictReader(handle)))
        for name in names:
            a = attribute(path, name, A2_20 if path == PIPEUTIL else A2_24)
            assert a.bottleneck, name


def test_two_shapes_under_one_name_are_reported_apart() -> None:
    p = load_profile(PIPEUTIL, kernel_name="aclnnAdd_AddAiCore_Add")
    assert p.shape == "512,2,4096;512,2,4096"
    assert [(s.shape, s.launches) for s in p.shapes] == [
        ("512,2,4096;512,2,4096", 4),
        (";", 4),
    ]
    assert p.signals["block_dim"] == 40  # never the 20.5 median of 40s and 1s
    assert any("never merged" in n for n in p.notes)
    small = load_profile(PIPEUTIL, kernel_name="aclnnAdd_AddAiCore_Add", shape=";")
    assert small.signals["block_dim"] == 1
    assert classify(small.signals, A2_20, attributes=small.attributes).bottleneck == ("fixed-cost")


def test_level0_block_dim_zero_is_dropped_with_a_note() -> None:
    p = load_profile(LEVEL0, kernel_name="Conv2D17")
    assert "block_dim" not in p.signals
    assert any("block_dim 0 means not collected" in n for n in p.notes)
    assert p.attributes.get("task_type") is None  # "N/A"


# --------------------------------------------------------------------------- msprof op


MSPROF_OP = REAL / "msprof-op"
OP_SUMMARY = REAL / "op-summary"
MIX_TINY = MSPROF_OP / "mix-tiny-910b2"
VECTOR_ADD = MSPROF_OP / "vector-add-910b2"
MATMUL_ADD = MSPROF_OP / "tilelang-matmul-add-serial"
MATMUL_ADD_OPPROF = MATMUL_ADD / "OPPROF_20260606121334_TZPHUMBSCSOLEEVR"
# The 910B2 of these runs (npu-smi in the source's logs): 24 cube and 48 vector cores.
A2_910B2 = TargetCaps(cube_cores=24, vector_cores=48)


@pytest.mark.parametrize(
    "path",
    [
        MIX_TINY,  # the folder above OPPROF_001
        MIX_TINY / "OPPROF_001",
        MIX_TINY / "OPPROF_001" / "OpBasicInfo.csv",
        MIX_TINY / "OPPROF_001" / "PipeUtilization.csv",  # a per-core table: its folder
    ],
    ids=["parent", "opprof", "opbasicinfo", "pipeutilization"],
)
def test_msprof_op_folder_is_found_from_any_of_its_paths(path: Path) -> None:
    p = load_profile(path)
    assert p.format == "msprof-op"
    assert p.kernel_name == "sanitized_operator_kernel"
    assert len(p.files) == 7  # every table of the Default metric set is read and hashed


def test_msprof_op_tiny_mix_kernel() -> None:
    p = load_profile(MIX_TINY)
    s = p.signals
    # OpBasicInfo: "sanitized_operator_kernel,mix,5.740459,1,2,0,1000,1800,1800," (trailing
    # comma), so one cube core and its two vector sub-cores
    assert s["task_duration_us"] == 5.740459
    assert (s["block_dim"], s["mix_block_dim"]) == (1, 2)
    assert (s["current_freq_mhz"], s["rated_freq_mhz"]) == (1800, 1800)
    assert p.attributes["op_type"] == "mix"
    # one "cube0" row and one "vector0" row; NA on the other side of each
    assert (s["aic_core_count"], s["aiv_core_count"]) == (1, 1)
    assert s["aic_time_us"] == 2.288333 and s["aiv_time_us"] == 3.200556
    assert s["aic_scalar_ratio"] == 0.334556 and s["aiv_scalar_ratio"] == 0.326222
    assert s["aiv_mte2_ratio"] == 0.183667 and s["aiv_mte3_wait_ratio"] == 0.228333
    assert s["aiv_vec_fops"] == 640  # ArithmeticUtilization
    assert s["gm_to_ub_kb"] == 4.0 and s["ub_to_gm_kb"] == 4.0  # Memory, KB
    assert s["gm_to_ub_bw_usage_rate"] == pytest.approx(0.00302058)  # "0.302058" (%)
    assert s["l1_to_gm_datas_kb_estimate"] == 1.0  # "L1_to_GM_datas(KB)(estimate)"
    assert s["aiv_ub_read_bw_vector_gbps"] == 7.5  # MemoryUB
    # every table repeats aic_time(us), aiv_time(us) and the cycle counts, Memory repeats
    # the MTE ratios: agreeing repeats are no news
    assert p.notes == ()
    a = classify(s, A2_910B2, attributes=p.attributes)
    # 1 block on 24 cube cores for 5.7 us (over the 5 us fixed-cost line); the scalar pipe
    # (33% on both sides) leads the pipes
    assert a.bottleneck == "insufficient-parallelism", a.evidence
    assert a.evidence[0] == "block_dim 1 < 0.75 x 24 usable cube cores"
    assert "also-scalar-flow-control" in a.flags


def test_msprof_op_vector_add_on_eight_of_48_vector_cores() -> None:
    p = load_profile(VECTOR_ADD)
    s = p.signals
    assert p.kernel_name == "sanitized_add_custom_vector" and p.attributes["op_type"] == "vector"
    assert s["task_duration_us"] == 9.22 and s["block_dim"] == 8
    assert "mix_block_dim" not in s  # "NA"
    # the source kept 3 of the 8 blocks' rows: blocks 0-2, "vector0" each
    assert s["aiv_core_count"] == 3 and "aic_core_count" not in s
    assert s["aiv_time_us"] == 8.661667  # the slowest block
    assert s["aiv_time_imbalance"] == pytest.approx(8.661667 / (24.999 / 3), rel=1e-3)
    # ratios weighted by each block's aiv_time(us): 7.899445, 8.438889, 8.661667
    assert s["aiv_scalar_ratio"] == pytest.approx(0.982911, abs=1e-6)
    assert s["aiv_mte2_ratio"] == pytest.approx(0.504800, abs=1e-6)
    assert s["aiv_mte3_ratio"] == pytest.approx(0.328067, abs=1e-6)
    assert s["aiv_vec_ratio"] == pytest.approx(0.059844, abs=1e-6)
    assert s["gm_to_ub_kb"] == 3 * 8.125 and s["ub_to_gm_kb"] == 3 * 4.0  # summed
    assert p.notes == ()
    a = classify(s, A2_910B2, attributes=p.attributes)
    # 8 blocks on 48 vector cores; inside each block the scalar pipe is busy 98% of the
    # time, MTE2+MTE3 83%, the vector pipe 6%
    assert a.bottleneck == "insufficient-parallelism", a.evidence
    assert a.evidence[0] == "block_dim 8 < 0.75 x 48 usable vector cores"
    assert "also-scalar-flow-control" in a.flags and "also-memory-transfer" in a.flags
    assert "scalar share 0.98 of aiv time" in a.evidence[1]


def test_msprof_op_mix_matmul_add_per_core_rows() -> None:
    p = load_profile(MATMUL_ADD)
    s = p.signals
    assert p.kernel_name == "main_kernel_mix_aic"  # msprof op names the mix kernel's AIC part
    assert s["task_duration_us"] == 52.48
    assert (s["block_dim"], s["mix_block_dim"]) == (32, 64)
    # 32 "cube0" rows and 64 "vector0"/"vector1" rows: two vector sub-cores per block
    assert (s["aic_core_count"], s["aiv_core_count"]) == (32, 64)
    assert s["aic_time_us"] == 26.176111 and s["aiv_time_us"] == 28.84111  # the slowest
    assert s["aic_mte2_time_us"] == 13.839444  # max over the cube cores
    assert 0.21 < s["aic_mte2_ratio"] < 0.23  # 0.17-0.27 per block
    assert 0.09 < s["aic_cube_ratio"] < 0.10
    # L2Cache: hit rates in percent become fractions; block 0's cube core reads at 67.2%
    assert 0.85 < s["aic_read_hit_rate"] < 0.95 and 0.80 < s["aiv_total_hit_rate"] < 0.85
    assert s["aiv_write_cache_hit"] == 194  # every vector row says 194
    assert p.notes == ()
    a = classify(s, A2_910B2, attributes=p.attributes)
    # 32 blocks on 24 cube cores fill them; on the cube side MTE2 (22%) + MTE1 (6%) lead
    # the cube pipe (10%) and scalar (7%)
    assert a.bottleneck == "memory-transfer", a.evidence
    assert a.evidence[0].startswith("memory share 0.28 of aic time (aic_mte1_ratio 0.06 + ")
    assert a.flags == ()


def test_msprof_op_and_op_summary_of_one_kernel_agree_on_its_class() -> None:
    # the same TileLang matmul+add: its app-level op_summary (92.6 us) and its msprof op
    # replay (52.5 us) put the MTE pipes first on the cube side
    op = load_profile(MATMUL_ADD)
    summary = load_profile(OP_SUMMARY / "tilelang-matmul-add-serial")
    for p in (op, summary):
        a = classify(p.signals, A2_910B2, attributes=p.attributes)
        assert a.bottleneck == "memory-transfer", (p.format, a.evidence)


# --------------------------------------------------------------------------- op_summary


OP_SUMMARY_CASES = [
    # (folder, launches, duration, class, first evidence, why)
    (
        "tilelang-matmul-add-serial",
        1,
        92.6,
        "memory-transfer",
        "memory share 0.49 of aic time (aic_mte1_ratio 0.16 + aic_mte2_ratio 0.33); next cube 0.29",
        "MIX_AIC on 32 blocks: MTE1 16% + MTE2 33% of the cube core's time against mac 26% "
        "+ fixpipe 3.5%",
    ),
    (
        "tilelang-matmul-add-pipelined",
        1,
        96.16,
        "memory-transfer",
        "memory share 0.50 of aic time (aic_mte1_ratio 0.15 + aic_mte2_ratio 0.35); next cube 0.28",
        "the same kernel pipelined: MTE1 15% + MTE2 35% against mac 25% + fixpipe 3.5%",
    ),
]


@pytest.mark.parametrize(
    ("folder", "launches", "duration", "expected", "first", "why"),
    OP_SUMMARY_CASES,
    ids=[c[0] for c in OP_SUMMARY_CASES],
)
def test_op_summary_files_as_msprof_writes_them(
    folder: str, launches: int, duration: float, expected: str, first: str, why: str
) -> None:
    (path,) = (OP_SUMMARY / folder).glob("op_summary_*.csv")
    for where in (path, path.parent):  # the file, or the folder holding it
        p = load_profile(where)
        assert p.format == "op-summary" and p.kernel_name == "main_kernel"
        s = p.signals
        assert s["launch_count"] == launches and s["task_duration_us"] == duration
        assert (s["block_dim"], s["mix_block_dim"]) == (32, 64)
        assert p.attributes["task_type"] == "MIX_AIC"
        # "Task Start Time(us)" cells end in a tab ("1780747958575020.950\t"): a time of
        # day, never a signal
        assert not [k for k in s if "start" in k]
        assert p.notes == ()
        a = classify(s, A2_910B2, attributes=p.attributes)
        assert a.bottleneck == expected, (why, a.evidence)
        assert a.evidence[0] == first


def test_op_summary_units_and_aliases() -> None:
    p = load_profile(OP_SUMMARY / "tilelang-matmul-add-serial")
    s = p.signals
    assert s["aic_time_us"] == 89.772  # aicore_time(us)
    assert s["aic_cube_ratio"] == 0.256 and s["aic_cube_time_us"] == 23.0  # aic_mac_*
    assert s["aiv_time_us"] == 98.936 and s["aiv_scalar_ratio"] == 0.105
    assert s["cube_utilization"] == pytest.approx(0.28725)  # "28.725" under (%)
    assert s["task_wait_time_us"] == 0
    assert p.attributes["op_state"] == "dynamic" and p.attributes["hf32_eligible"] == "NO"
    assert "input_shapes" not in p.attributes  # "N/A"


def test_op_summary_three_launches_are_medians() -> None:
    p = load_profile(OP_SUMMARY / "tilelang-svd")
    s = p.signals
    assert s["launch_count"] == 3 and p.attributes["task_id"] == "0 | 1 | 2"
    assert s["task_duration_us"] == 86846.72  # of 87139.380, 86808.420, 86846.720
    assert s["task_wait_time_us"] == 6560.58  # of 0, 6958.62, 6560.58
    assert s["aiv_scalar_ratio"] == 0.999 and s["aic_scalar_ratio"] == 0.944
    assert p.shapes == ()  # "N/A" shapes: one group


SCALAR_BOUND_MANY_BLOCKS = [
    # (folder, aiv scalar ratio as evidence)
    ("tilelang-svd", "aiv_scalar_ratio 1.00"),
    ("mix-tiny-910b2", "aiv_scalar_ratio 0.99"),
]


@pytest.mark.parametrize(("folder", "scalar"), SCALAR_BOUND_MANY_BLOCKS)
def test_op_summary_scalar_bound_kernels_show_their_scalar_pipe(folder: str, scalar: str) -> None:
    # MIX_AIC on 256 blocks for 42-87 ms: the vector side spends 99-100% of its time in
    # the scalar pipe, every other pipe under 1%
    p = load_profile(OP_SUMMARY / folder)
    assert p.signals["block_dim"] == 256 and p.signals["task_duration_us"] > 40_000
    a = classify(p.signals, A2_910B2, attributes=p.attributes)
    assert "also-scalar-flow-control" in a.flags or a.bottleneck == "scalar-flow-control"
    assert any(scalar in e for e in a.evidence), a.evidence


@pytest.mark.parametrize("folder", [c[0] for c in SCALAR_BOUND_MANY_BLOCKS])
def test_op_summary_scalar_bound_kernels_are_scalar_flow_control(folder: str) -> None:
    """256 blocks on 24 cube cores, but each block runs for milliseconds: no dispatch cost
    to speak of (rules v3), so the scalar pipe that holds the vector side's time speaks."""
    p = load_profile(OP_SUMMARY / folder)
    a = classify(p.signals, A2_910B2, attributes=p.attributes)
    assert a.bottleneck == "scalar-flow-control", a.evidence
    assert "also-launch-scheduling" not in a.flags
    assert not any("block_dim" in e for e in a.evidence), a.evidence


def test_every_real_msprof_op_and_op_summary_file_is_read_and_attributed() -> None:
    folders = sorted(MSPROF_OP.iterdir())
    assert len(folders) == 5
    for folder in folders:
        p = load_profile(folder)
        assert p.format == "msprof-op" and p.files
        a = classify(p.signals, A2_910B2, attributes=p.attributes)
        assert a.bottleneck != "unknown", (folder.name, a.evidence)
    files = sorted(OP_SUMMARY.rglob("op_summary*.csv"))
    assert len(files) == 12
    for path in files:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            names = list(dict.fromkeys(r["Op Name"] for r in csv.DictReader(handle)))
        for name in names:
            p = load_profile(path, kernel_name=name)
            assert p.format == "op-summary", path
            a = classify(p.signals, A2_910B2, attributes=p.attributes)
            # a class, or (the metric sets without pipe ratios) what is missing
            assert a.bottleneck != "unknown" or any(
                e.startswith("missing: ") for e in a.evidence
            ), (path, name, a.evidence)


# ---------------------------------------------------- op_summary of every metric set, and more


ONE_RUN = OP_SUMMARY / "vllm-ascend-moe-lora"  # one msprof run per --aic-metrics set
GROUPED_MATMUL = "aclnnGroupedMatmulV5_GroupedMatmul_GroupedMatmul"
ONES_LIKE = "aclnnInplaceOne_OnesLikeAiCore_OnesLike"
METRIC_SET_SIGNALS = [
    # (metric set, kernel, signal the set adds, its value in the file)
    ("PipeUtilization", GROUPED_MATMUL, "aic_fixpipe_ratio", 0.367),
    ("ArithmeticUtilization", GROUPED_MATMUL, "aic_cube_fops", 49807360.0),
    ("Memory", GROUPED_MATMUL, "aic_main_mem_read_bw_gbps", 0.251),
    ("MemoryL0", GROUPED_MATMUL, "aic_l0c_write_bw_cube_gbps", 8.947),
    ("MemoryUB", ONES_LIKE, "aiv_ub_write_bw_vector_gbps", 1.145),
    ("L2Cache", GROUPED_MATMUL, "aic_r0_read_cache_hit", 7382.0),
    ("ResourceConflictRatio", ONES_LIKE, "aiv_vec_bankgroup_cflt_ratio", 0.0),
]


@pytest.mark.parametrize(
    ("metric_set", "kernel", "signal", "value"),
    METRIC_SET_SIGNALS,
    ids=[c[0] for c in METRIC_SET_SIGNALS],
)
def test_op_summary_of_every_metric_set(
    metric_set: str, kernel: str, signal: str, value: float
) -> None:
    folder = ONE_RUN / metric_set
    with pytest.raises(InputError, match="holds 2 kernels; pass a kernel name"):
        load_profile(folder)
    p = load_profile(folder, kernel_name=kernel)
    assert p.format == "op-summary" and p.signals[signal] == value
    # newer CANN: "Block Num" / "Mix Block Num"; a MIX_AIC GroupedMatmul writes
    # "Mix Block Num" 0 (not collected) and its vector side all zero
    assert "mix_block_dim" not in p.signals
    assert any("mix_block_dim 0 means not collected" in n for n in p.notes)
    a = classify(p.signals, A2_910B2, attributes=p.attributes)
    if metric_set == "PipeUtilization":
        # GroupedMatmul on 20 blocks: MTE2 44% of the cube core's time against fixpipe 37%
        # + mac 0.7%, scalar 27%; within the mixed margin of the cube family
        assert a.bottleneck == "memory-transfer", a.evidence
        assert a.evidence[0].startswith("memory share 0.45 of aic time")
        assert "mixed" in a.flags and "also-cube-compute" in a.flags
    else:
        # no pipe ratios (the other sets): no class, and the evidence says what is missing
        assert a.bottleneck == "unknown", a.evidence
        assert any(e.startswith("missing: pipe stage ratios") for e in a.evidence)


def test_op_summary_grouped_matmul_attributes_as_written() -> None:
    p = load_profile(ONE_RUN / "PipeUtilization", kernel_name=GROUPED_MATMUL)
    assert p.signals["block_dim"] == 20 and p.signals["task_duration_us"] == 26.661
    assert p.signals["cube_utilization"] == pytest.approx(0.87384)  # "87.384" (%)
    assert p.attributes["task_type"] == "MIX_AIC"
    assert p.attributes["input_shapes"] == "512,16;8,2048,16;;;;;;8"  # was """512,16;…"""
    assert p.attributes["input_formats"] == "ND;NCL;ND;ND;ND;ND;ND;ND"
    assert p.kernel_name == GROUPED_MATMUL


def test_op_summary_one_kernel_two_shapes_from_a_real_run() -> None:
    # OnesLike ran on [512,16] (8 blocks, 4.6 us) and on [8,2048,16] (40 blocks, 8.1 us)
    p = load_profile(ONE_RUN / "PipeUtilization", kernel_name=ONES_LIKE)
    assert [(s.shape, s.launches) for s in p.shapes] == [("512,16", 1), ("8,2048,16", 1)]
    assert p.shape == "8,2048,16" and p.signals["block_dim"] == 40
    a = classify(p.signals, A2_910B2, attributes=p.attributes)
    # 40 of 48 vector cores; scalar 17% of the vector core's time, MTE3 12%, vec 3%
    assert a.bottleneck == "scalar-flow-control", a.evidence
    small = load_profile(ONE_RUN / "PipeUtilization", kernel_name=ONES_LIKE, shape="512,16")
    assert small.signals["task_duration_us"] == 4.601 and small.signals["block_dim"] == 8
    b = classify(small.signals, A2_910B2, attributes=small.attributes)
    assert b.bottleneck == "fixed-cost", b.evidence  # 4.6 us: the launch is the cost


def test_op_summary_block_num_spelling_and_eleven_launches() -> None:
    p = load_profile(OP_SUMMARY / "tilelang-sigmoid")
    s = p.signals
    assert p.kernel_name == "main_kernel" and s["launch_count"] == 11
    assert (s["block_dim"], s["mix_block_dim"]) == (96, 192)  # "Block Num", "Mix Block Num"
    assert s["task_duration_us"] == 226.62  # median of 224.1 … 300.0
    assert s["aiv_mte2_ratio"] == 0.811 and s["aiv_vec_ratio"] == 0.532
    assert "op_state" not in p.attributes  # "N/A"
    a = classify(s, A2_910B2, attributes=p.attributes)
    assert "also-memory-transfer" in a.flags or a.bottleneck == "memory-transfer"


def test_op_summary_sigmoid_is_memory_transfer() -> None:
    p = load_profile(OP_SUMMARY / "tilelang-sigmoid")
    assert classify(p.signals, A2_910B2, attributes=p.attributes).bottleneck == ("memory-transfer")


def test_msprof_op_newer_pipe_columns_and_many_tiny_blocks() -> None:
    # CANN that splits the scalar pipe's time (single/dual issue, stalls, waits); the file
    # is trimmed to blocks 0-3 of the 512 its OpBasicInfo names (PROVENANCE.md)
    p = load_profile(MSPROF_OP / "tilelang-sigmoid-trimmed")
    s = p.signals
    assert (s["block_dim"], s["mix_block_dim"]) == (512, 1024)
    assert s["current_freq_mhz"] == 1650 and s["task_duration_us"] == 71.918564
    assert (s["aic_core_count"], s["aiv_core_count"]) == (4, 8)
    assert s["aiv_scalar_wait_ib_time_us"] == 0.134545  # max over the vector sub-cores
    assert s["aic_scalar_dual_time_us"] == 0.04
    assert s["aiv_time_us"] == 2.831515
    assert p.notes == ()
    a = classify(s, A2_910B2, attributes=p.attributes)
    # 512 blocks on 24 cube cores (21 per core), each vector sub-core busy about 2 us of a
    # 72 us kernel, every pipe under 2%: the blocks' own launches are the cost
    assert a.bottleneck == "launch-scheduling", a.evidence
    assert a.evidence[0] == "block_dim 512 ≥ 4 x 24 usable cube cores"


def test_msprof_op_launch_folder_with_timestamped_tables() -> None:
    # msprof op --launch-count: OPPROF_*/<kernel>/<launch>/OpBasicInfo_<timestamp>.csv
    p = load_profile(MSPROF_OP / "vllm-ascend-moe-lora-scatter")
    s = p.signals
    assert p.kernel_name == "moe_lora_prefill_scatter_a2a_fp16_int32_bool_34"
    assert [f.path.rsplit("/", 1)[1] for f in p.files] == [
        "OpBasicInfo_20260823205051111.csv",
        "PipeUtilization_20260823205051111.csv",
    ]
    assert s["task_duration_us"] == 24.440489 and s["block_dim"] == 40
    assert s["launch_count"] == 1 and s["aiv_core_count"] == 40
    assert s["aiv_time_us"] == 23.784445  # block 8; block 39 ran 10.6 us
    assert s["aiv_time_imbalance"] == pytest.approx(23.784445 / 21.738486, rel=1e-6)
    # weighted by each block's aiv_time(us); here ratio = time / aiv_time row by row
    assert s["aiv_mte2_ratio"] == pytest.approx(0.408684, abs=1e-6)
    assert s["aiv_mte3_ratio"] == pytest.approx(0.325838, abs=1e-6)
    assert s["aiv_scalar_ratio"] == pytest.approx(0.556572, abs=1e-6)
    assert s["aiv_vec_ratio"] == pytest.approx(0.068562, abs=1e-6)
    assert s["aiv_scalar_wait_time_us"] == 10.321667
    assert p.notes == ()
    a = classify(s, A2_910B2, attributes=p.attributes)
    # 40 of 48 vector cores; MTE2 41% + MTE3 33% of the vector core's time lead the scalar
    # pipe's 56% (by more than the mixed margin) and the vector pipe's 7%
    assert a.bottleneck == "memory-transfer", a.evidence
    assert a.evidence[0] == (
        "memory share 0.73 of aiv time (aiv_mte2_ratio 0.41 + aiv_mte3_ratio 0.33); "
        "next scalar 0.56"
    )
    assert a.flags == ()
