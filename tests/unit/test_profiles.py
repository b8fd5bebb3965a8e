"""Profile ingest: every format, every quirk listed in PROFILE_FORMATS.md, every rejection."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.inputs import profiles
from ledger.inputs.profiles import (
    ParsedProfile,
    load_profile,
    merge_launches,
    parse_kernel_details,
    parse_msprof_op,
    parse_ncu_csv,
    parse_op_summary,
    parse_signals_json,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "profiles"
MSPROF = FIXTURES / "msprof-op"
MULTI = MSPROF / "multi"
OP_SUMMARY = FIXTURES / "op-summary" / "op_summary_20250301120000.csv"
KERNEL_DETAILS = FIXTURES / "kernel-details" / "kernel_details.csv"
NCU_DETAILS = FIXTURES / "ncu" / "details.csv"
NCU_RAW = FIXTURES / "ncu" / "raw.csv"


def one_line_error(exc: pytest.ExceptionInfo[InputError], *needles: str) -> str:
    message = str(exc.value)
    assert "\n" not in message and message.strip() == message
    for needle in needles:
        assert needle in message, message
    return message


def all_finite(profile: ParsedProfile) -> bool:
    return all(isinstance(v, float) and math.isfinite(v) for v in profile.signals.values())


# --------------------------------------------------------------------------- msprof op


def test_msprof_single_folder_aggregates_cores_as_documented() -> None:
    p = load_profile(MSPROF / "single")
    assert p.format == "msprof-op"
    assert p.kernel_name == "add_kernel"
    s = p.signals
    assert s["task_duration_us"] == 35.5
    assert s["block_dim"] == 2
    assert "mix_block_dim" not in s  # NA
    assert s["current_freq_mhz"] == 1800
    # ratios: weighted by each core's aiv_time(us) (10 us and 30 us)
    assert s["aiv_vec_ratio"] == pytest.approx((0.2 * 10 + 0.3 * 30) / 40)
    assert s["aiv_scalar_ratio"] == pytest.approx(0.25)
    assert s["aiv_mte2_ratio"] == pytest.approx(0.575)
    assert s["aiv_icache_miss_rate"] == pytest.approx((0.1 * 10 + 0.03 * 30) / 40)
    # times: max over cores; bandwidths: mean over cores with a value
    assert s["aiv_time_us"] == 30
    assert s["aiv_mte2_time_us"] == 18
    assert s["aiv_total_cycles"] == 54000
    assert s["aiv_mte2_bw_gbps"] == pytest.approx(110)
    assert s["aiv_mte3_bw_gbps"] == pytest.approx(80)  # the NA core is skipped
    assert s["aiv_core_count"] == 2
    assert s["aiv_time_mean_us"] == 20
    assert s["aiv_time_imbalance"] == pytest.approx(1.5)
    # ResourceConflictRatio: mean over cores
    assert s["aiv_vec_wait_ratio"] == pytest.approx(0.3)
    assert s["aiv_mte2_wait_ratio"] == pytest.approx(0.2)
    # Memory: volumes summed, bandwidths mean, percentages as fractions
    assert s["gm_to_ub_kb"] == 2048
    assert s["ub_to_gm_kb"] == 1024
    assert s["gm_to_ub_bw_gbps"] == pytest.approx(110)
    assert s["ub_to_gm_bw_gbps"] == pytest.approx(85)
    assert s["aiv_gm_to_ub_bw_usage_rate"] == pytest.approx(0.055)
    assert "aic_cube_ratio" not in s  # all NA on vector cores
    assert "block_id" not in s
    assert p.attributes == {
        "device_id": "0",
        "op_name": "add_kernel",
        "op_type": "vector",
        "pid": "12345",
    }
    assert "weighted" in p.aggregation and "max over cores" in p.aggregation
    assert all_finite(p)


def test_msprof_files_are_hashed_and_arithmetic_utilization_read() -> None:
    p = load_profile(MSPROF / "single")
    names = [f.path for f in p.files]
    assert names == [
        "ArithmeticUtilization.csv",
        "Memory.csv",
        "OpBasicInfo.csv",
        "PipeUtilization.csv",
        "ResourceConflictRatio.csv",
    ]
    for record in p.files:
        data = (MSPROF / "single" / record.path).read_bytes()
        assert record.sha256 == hashlib.sha256(data).hexdigest()
        assert record.size == len(data)


def test_msprof_fixture_keeps_its_quirks() -> None:
    raw = (MSPROF / "single" / "OpBasicInfo.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw and b",\r\n" in raw


def test_msprof_table_file_loads_its_folder() -> None:
    folder = load_profile(MSPROF / "single")
    table = load_profile(MSPROF / "single" / "PipeUtilization.csv")
    assert table.signals == folder.signals and table.files == folder.files


def test_msprof_multi_selects_operator_and_takes_median_over_launches() -> None:
    p = load_profile(MULTI, kernel_name="add_kernel")
    assert p.kernel_name == "add_kernel"
    assert p.signals["launch_count"] == 3
    assert p.signals["task_duration_us"] == 22.0  # median of 20, 22, 30
    assert p.signals["aiv_vec_ratio"] == pytest.approx(0.4)
    assert p.signals["block_dim"] == 40
    assert "median over 3 launches" in p.aggregation
    assert len(p.files) == 6
    assert all(
        f.path.startswith("OPPROF_20250301120000_ABCDEF/device0/add_kernel/") for f in p.files
    )
    assert any(f.path.endswith("OpBasicInfo_20250301120101.csv") for f in p.files)


def test_msprof_multi_unique_substring_is_accepted_with_a_note() -> None:
    p = load_profile(MULTI, kernel_name="fused")
    assert p.kernel_name == "add_kernel_fused"
    assert p.signals["task_duration_us"] == 15.0
    assert any("substring" in n for n in p.notes)


@pytest.mark.parametrize(
    ("kernel", "needles"),
    [
        (None, ("holds 3 kernels", "'add_kernel'", "'mul_kernel'")),
        ("kernel", ("ambiguous", "'add_kernel_fused'")),
        ("sub_kernel", ("no kernel named 'sub_kernel'", "available", "'mul_kernel'")),
    ],
)
def test_msprof_multi_ambiguous_or_unknown_kernel(
    kernel: str | None, needles: tuple[str, ...]
) -> None:
    with pytest.raises(InputError) as exc:
        load_profile(MULTI, kernel_name=kernel)
    one_line_error(exc, str(MULTI), *needles)


def test_msprof_mix_operator_uses_cube_and_vector_rows() -> None:
    p = load_profile(MSPROF / "mix")
    s = p.signals
    assert p.attributes["op_type"] == "mix"
    assert p.attributes["device_id"] == "1"  # 'Device ID' spelling
    assert p.attributes["pid"] == "777"  # 'PID' spelling
    assert s["mix_block_dim"] == 40
    assert s["aic_cube_ratio"] == pytest.approx(0.8)
    assert s["aic_time_us"] == 100
    assert s["aiv_vec_ratio"] == pytest.approx((0.2 * 50 + 0.4 * 150) / 200)
    assert s["aiv_time_us"] == 150
    assert s["aic_core_count"] == 1 and s["aiv_core_count"] == 2


def test_msprof_310p_without_mix_block_dim_and_na_rows() -> None:
    p = load_profile(MSPROF / "310p")
    assert p.signals["task_duration_us"] == 6.25  # the N/A row is skipped
    assert "mix_block_dim" not in p.signals
    assert any("PipeUtilization" in n for n in p.notes)


def test_msprof_per_core_table_without_op_basic_info_is_rejected() -> None:
    with pytest.raises(InputError) as exc:
        load_profile(MSPROF / "orphan")
    one_line_error(exc, "no OpBasicInfo.csv")


def test_parse_msprof_op_text_with_crlf_bom_trailing_commas_and_quotes() -> None:
    basic = (
        "\ufeffOp Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,\r\n"
        '"k","vector","12.5","8",NA,\r\n'
    )
    pipe = (
        "block_id,sub_block_id,aiv_time(us),aiv_vec_ratio,aiv_mte2_active_bw(GB/s),\r\n"
        "0,vector0,4.0,0.5,N/A,\r\n"
        "1,vector0,NA,0.7,90,\r\n"
    )
    p = parse_msprof_op(basic, pipe)
    assert p.signals["task_duration_us"] == 12.5
    assert p.signals["block_dim"] == 8
    # one row lacks its weight: the ratio falls back to a plain mean
    assert p.signals["aiv_vec_ratio"] == pytest.approx(0.6)
    assert p.signals["aiv_mte2_bw_gbps"] == 90
    assert p.kernel_name == "k"


def test_parse_msprof_op_requires_duration_column() -> None:
    with pytest.raises(InputError) as exc:
        parse_msprof_op("Op Name,Block Dim\nk,8\n", sources={"OpBasicInfo": "x/OpBasicInfo.csv"})
    one_line_error(exc, "x/OpBasicInfo.csv", "Task Duration(us)")


# --------------------------------------------------------------------------- op_summary


def test_op_summary_median_over_launches() -> None:
    p = load_profile(OP_SUMMARY, kernel_name="add_kernel")
    assert p.format == "op-summary"
    s = p.signals
    assert s["launch_count"] == 3
    assert s["task_duration_us"] == 11.5  # 10, 12 and a quoted "11.5"
    assert s["task_wait_time_us"] == 1.5  # NA skipped
    assert s["block_dim"] == 40
    assert s["aiv_vec_ratio"] == pytest.approx(0.45)
    assert "aic_cube_ratio" not in s  # N/A in every selected row
    assert not any("start" in k for k in s)  # timestamps are not signals
    assert p.attributes["input_shapes"] == "4096,1024;4096,1024"
    assert p.attributes["task_type"] == "AI_VECTOR_CORE"
    assert p.attributes["task_id"] == "11 | 15 | 19"
    assert p.files[0].path == OP_SUMMARY.name
    assert all_finite(p)


def test_op_summary_mac_columns_thousands_separator() -> None:
    p = load_profile(OP_SUMMARY, kernel_name="MatMul_1")
    assert p.signals["task_duration_us"] == 1234.5  # "1,234.5"
    assert p.signals["aic_cube_ratio"] == pytest.approx(0.83)  # aic_mac_ratio
    assert p.signals["aic_cube_time_us"] == 1000  # aic_mac_time(us)
    assert p.signals["aic_time_us"] == 1200  # aicore_time(us)
    assert p.attributes["op_type"] == "MatMulV2"


def test_op_summary_found_in_a_folder_and_needs_a_name() -> None:
    with pytest.raises(InputError) as exc:
        load_profile(OP_SUMMARY.parent)
    one_line_error(exc, OP_SUMMARY.name, "holds 2 kernels", "'MatMul_1'")
    assert load_profile(OP_SUMMARY.parent, kernel_name="MatMul_1").files[0].path == OP_SUMMARY.name


def test_op_summary_unknown_columns_are_kept() -> None:
    text = (
        "Op Name,OP Type,Task ID,Task Duration(us),My Counter,Extra Rate(%),Vendor Note\n"
        "k,Add,1,5.0,7,50,fast\n"
        "k,Add,2,7.0,9,70,fast\n"
    )
    p = parse_op_summary(text)
    assert p.signals["my_counter"] == 8
    assert p.signals["extra_rate"] == pytest.approx(0.6)
    assert p.attributes["vendor_note"] == "fast"
    assert p.signals["task_duration_us"] == 6.0


def test_op_summary_shapes_are_never_merged() -> None:
    text = (
        "Op Name,Task ID,Task Duration(us),Block Dim,Input Shapes\n"
        'k,1,5,8,"1,2"\nk,2,6,8,"3,4"\nk,3,7,8,"3,4"\nk,4,20,16,"1,2"\n'
    )
    p = parse_op_summary(text)
    # "1,2" has the most total time (25 us): attributed on its own, medians of its rows
    assert p.shape == "1,2"
    assert p.attributes["input_shapes"] == "1,2"
    assert p.signals["block_dim"] == 12.0  # median of 8 and 16, both launches of "1,2"
    assert p.signals["launch_count"] == 2
    assert [(s.shape, s.launches, s.total_us) for s in p.shapes] == [
        ("1,2", 2, 25.0),
        ("3,4", 2, 13.0),
    ]
    assert p.shapes[1].signals["task_duration_us"] == 6.5
    assert any("2 different shapes, never merged" in n and "--shape" in n for n in p.notes)
    chosen = parse_op_summary(text, shape="3, 4")
    assert chosen.shape == "3,4" and chosen.signals["task_duration_us"] == 6.5
    with pytest.raises(InputError) as exc:
        parse_op_summary(text, shape="9,9")
    one_line_error(exc, "shape '9,9' matches none of the shapes of 'k'", "'1,2'")


# --------------------------------------------------------------------------- kernel_details


def test_kernel_details_renamed_columns_and_quirks() -> None:
    p = load_profile(KERNEL_DETAILS, kernel_name="softmax_kernel")
    assert p.format == "kernel-details"
    s = p.signals
    assert s["task_duration_us"] == 32.0  # Duration(us), median of two steps
    assert s["block_dim"] == 48  # Block Num
    assert s["launch_count"] == 2
    assert "hf32_eligible" not in p.attributes  # N/A
    assert p.attributes["input_shapes"] == "4096,1,1024;1024"  # triple quotes stripped
    assert p.attributes["step_id"] == "1 | 2"
    assert p.attributes["task_type"] == "AI_VECTOR_CORE"  # Accelerator Core
    assert "cube_utilization" not in s


def test_kernel_details_cube_utilization_percentage_becomes_fraction() -> None:
    p = load_profile(KERNEL_DETAILS, kernel_name="MatMul_7")
    assert p.signals["cube_utilization"] == pytest.approx(0.80)
    assert p.signals["aic_cube_ratio"] == pytest.approx(0.805)


def test_kernel_details_block_dim_spelling_and_unquoted_tab() -> None:
    p = load_profile(FIXTURES / "kernel-details" / "block-dim")
    assert p.kernel_name == "gelu_kernel"
    assert p.signals["block_dim"] == 16 and p.signals["mix_block_dim"] == 32
    assert p.attributes["task_type"] == "MIX_AIV"
    assert p.files[0].path == "kernel_details.csv"


def test_kernel_details_text_with_op_summary_spellings() -> None:
    text = "Step Id,Op Name,Task Duration(us),Block Dim\n1,k,3.0,2\n"
    assert parse_kernel_details(text).signals["task_duration_us"] == 3.0


# --------------------------------------------------------------------------- ncu


def test_ncu_details_long_form() -> None:
    p = load_profile(NCU_DETAILS, kernel_name="add_kernel")
    assert p.format == "ncu-csv"
    assert p.kernel_name == "add_kernel(float const*, float*, int)"
    s = p.signals
    assert s["duration_us"] == pytest.approx(13.5)  # 12.50 usecond and "14,500" nsecond
    assert s["launch_count"] == 2
    assert s["dram_throughput"] == pytest.approx(0.862)
    assert s["memory_throughput"] == pytest.approx(0.862)
    assert s["memory_throughput_gbps"] == pytest.approx(2850)  # Tbyte/second
    assert s["sm_throughput"] == pytest.approx(0.302)
    assert s["achieved_occupancy"] == pytest.approx(0.79)
    assert s["theoretical_occupancy"] == 1.0
    assert s["block_size"] == 256 and s["grid_size"] == 1024
    assert s["registers_per_thread"] == 16 and s["sm_count"] == 132
    assert s["sm_frequency_mhz"] == pytest.approx(1750)
    assert s["elapsed_cycles"] == 21875
    assert "achieved_active_warps_per_sm" not in s  # n/a
    assert p.attributes["block_shape"] == "(256, 1, 1)"
    assert all_finite(p)


def test_ncu_msecond_and_ambiguous_names() -> None:
    assert load_profile(NCU_DETAILS, kernel_name="mul_kernel").signals["duration_us"] == (
        pytest.approx(10.5)
    )
    with pytest.raises(InputError) as exc:
        load_profile(NCU_DETAILS)
    one_line_error(exc, "details.csv", "holds 2 kernels")
    with pytest.raises(InputError) as exc:
        load_profile(NCU_DETAILS, kernel_name="_kernel")
    one_line_error(exc, "ambiguous")
    with pytest.raises(InputError) as exc:
        load_profile(NCU_DETAILS, kernel_name="gemm")
    one_line_error(exc, "no kernel named 'gemm'")


def test_ncu_raw_wide_form_with_unit_row() -> None:
    p = load_profile(NCU_RAW, kernel_name="layernorm_fwd")
    s = p.signals
    assert s["duration_us"] == 6.25
    assert s["dram_bytes_read"] == pytest.approx(4.19e6)
    assert s["dram_bytes_write"] == pytest.approx(4194.30e3)
    assert s["dram_bytes"] == pytest.approx(4.19e6 + 4194.30e3)
    assert s["dram_throughput"] == pytest.approx(0.035)
    assert s["achieved_occupancy"] == pytest.approx(0.115)
    assert s["grid_size"] == 8 and s["block_size"] == 128
    assert "wide" in p.aggregation
    assert load_profile(NCU_RAW, kernel_name="softmax").signals["grid_size"] == 4096


@pytest.mark.parametrize(
    ("unit", "value", "expected_us"),
    [
        ("nsecond", "1,500", 1.5),
        ("usecond", "2.5", 2.5),
        ("msecond", "0.004", 4.0),
        ("second", "0.000001", 1.0),
        ("ns", "800", 0.8),
    ],
)
def test_ncu_duration_units(unit: str, value: str, expected_us: float) -> None:
    text = (
        '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n'
        f'"0","k","GPU Speed Of Light Throughput","Duration","{unit}","{value}"\n'
    )
    assert parse_ncu_csv(text).signals["duration_us"] == pytest.approx(expected_us)


def test_ncu_raw_metric_without_unit_row_is_nanoseconds() -> None:
    text = '"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","2,000"\n"1","k","4,000"\n'
    p = parse_ncu_csv(text)
    assert p.signals["duration_us"] == pytest.approx(3.0)
    assert p.signals["launch_count"] == 2


def test_ncu_duration_with_a_non_time_unit_is_ignored_with_a_note() -> None:
    text = (
        '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
        '"0","k","Duration","cycle","9"\n'
    )
    p = parse_ncu_csv(text)
    assert "duration_us" not in p.signals
    assert any("not a time" in n for n in p.notes)


def test_ncu_without_kernel_rows() -> None:
    with pytest.raises(InputError) as exc:
        parse_ncu_csv('"ID","Kernel Name","Metric Name","Metric Value"\n', source="n.csv")
    one_line_error(exc, "n.csv", "no kernel rows")


# --------------------------------------------------------------------------- JSON


def test_signals_json() -> None:
    p = load_profile(FIXTURES / "signals-json" / "signals.json", kernel_name="k")
    assert p.format == "signals-json"
    assert p.signals == {"aiv_scalar_ratio": 0.41, "block_dim": 40.0, "task_duration_us": 42.0}
    assert p.kernel_name == "k"
    assert p.files[0].path == "signals.json"


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("boolean.json", "must be a number, not bool"),
        ("nan.json", "non-finite"),
        ("list.json", "expected a JSON object"),
    ],
)
def test_signals_json_fixture_rejections(name: str, needle: str) -> None:
    with pytest.raises(InputError) as exc:
        load_profile(FIXTURES / "signals-json" / name)
    one_line_error(exc, name, needle)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"a": Infinity}', "non-finite"),
        ('{"a": -Infinity}', "non-finite"),
        ('{"a": 1' + "0" * 400 + "}", "not a finite number"),
        ('{"a": 1e400}', "not a finite number"),
        ('{"a": "1.0"}', "not str"),
        ('{"a": {"b": 1}}', "not dict"),
        ('{"a": null}', "not NoneType"),
        ("{}", "no signals"),
        ('{"": 1}', "empty"),
        ("{nope", "not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, "JSON"),
    ],
)
def test_signals_json_rejections(text: str, needle: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_signals_json(text, source="s.json")
    one_line_error(exc, "s.json", needle)


# --------------------------------------------------------------------------- bad inputs


def test_bad_fixture_files() -> None:
    cases = {
        "op_summary_missing_duration.csv": "missing required column 'Task Duration(us)'",
        "unknown.csv": "not a recognised profile",
        "header_only_op_summary.csv": "no data rows",
        "empty.csv": "is empty",
        "blank.csv": "is empty",
    }
    for name, needle in cases.items():
        with pytest.raises(InputError) as exc:
            load_profile(FIXTURES / "bad" / name)
        one_line_error(exc, name, needle)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
        ("Op Name,Task Duration(us)\ncaf\u00e9,1\n".encode("latin-1"), "not UTF-8"),
        ("Op Name,Task Duration(us)\nk,1\n".encode("utf-16"), "UTF-16"),
        (b'Op Name,Task ID,Task Duration(us)\nk,1,"' + b"x" * 200_000 + b'"\n', "malformed CSV"),
    ],
)
def test_bad_bytes(tmp_path: Path, data: bytes, needle: str) -> None:
    path = tmp_path / "op_summary_0.csv"
    path.write_bytes(data)
    with pytest.raises(InputError) as exc:
        load_profile(path)
    one_line_error(exc, "op_summary_0.csv", needle)


def test_too_large_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "op_summary_big.csv"
    with path.open("wb") as handle:
        handle.truncate(profiles.MAX_FILE_BYTES + 1)
    with pytest.raises(InputError) as exc:
        load_profile(path)
    one_line_error(exc, "op_summary_big.csv", "64 MiB")


def test_too_large_table_inside_a_folder(tmp_path: Path) -> None:
    (tmp_path / "OpBasicInfo.csv").write_text("Op Name,Task Duration(us)\nk,1\n")
    with (tmp_path / "PipeUtilization.csv").open("wb") as handle:
        handle.truncate(profiles.MAX_FILE_BYTES + 1)
    with pytest.raises(InputError) as exc:
        load_profile(tmp_path)
    one_line_error(exc, "PipeUtilization.csv", "64 MiB")


def test_folders_without_profiles(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        load_profile(tmp_path)
    one_line_error(exc, str(tmp_path), "no profile files found")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "MemoryL1.csv").write_text("a,b\n1,2\n")
    (tmp_path / "visualize_data.bin").write_bytes(b"\x00\x01")
    with pytest.raises(InputError) as exc:
        load_profile(tmp_path)
    one_line_error(exc, "no profile files found")


def test_folder_with_two_full_run_files(tmp_path: Path) -> None:
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "kernel_details.csv").write_text("Name,Duration(us)\nk,1\n")
    with pytest.raises(InputError) as exc:
        load_profile(tmp_path)
    one_line_error(exc, "holds 2", "a/kernel_details.csv")


def test_missing_path_and_empty_kernel_name(tmp_path: Path) -> None:
    with pytest.raises(InputError) as exc:
        load_profile(tmp_path / "nope")
    one_line_error(exc, "no such file")
    with pytest.raises(InputError) as exc:
        load_profile(MSPROF / "single", kernel_name="  ")
    one_line_error(exc, "kernel name is empty")


def test_csv_rows_longer_or_shorter_than_header() -> None:
    text = "Name,Duration(us),Block Dim\nk,4.0,2,surplus,cells\nk,6.0\n"
    p = parse_kernel_details(text, source="kd.csv")
    assert p.signals["task_duration_us"] == 5.0
    assert p.signals["block_dim"] == 2
    assert any("more cells than the header" in n for n in p.notes)


def test_non_numeric_duration_for_the_kernel() -> None:
    with pytest.raises(InputError) as exc:
        parse_kernel_details("Name,Duration(us)\nk,N/A\n", source="kd.csv")
    one_line_error(exc, "kd.csv", "no numeric duration")


def test_merge_launches_and_frozen_profile() -> None:
    a = ParsedProfile("msprof-op", {"x": 1.0, "y": 5.0}, {"op_name": "k"}, kernel_name="k")
    b = ParsedProfile("msprof-op", {"x": 3.0}, {"op_name": "k"}, kernel_name="k")
    merged = merge_launches([a, b])
    assert merged.signals == {"x": 2.0, "y": 5.0, "launch_count": 2.0}
    assert merge_launches([a]) is a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.format = "x"  # type: ignore[misc]


def test_every_fixture_profile_is_json_serializable_and_finite() -> None:
    loaded = [
        load_profile(MSPROF / "single"),
        load_profile(MULTI, kernel_name="mul_kernel"),
        load_profile(OP_SUMMARY, kernel_name="add_kernel"),
        load_profile(KERNEL_DETAILS, kernel_name="MatMul_7"),
        load_profile(NCU_DETAILS, kernel_name="add"),
        load_profile(NCU_RAW, kernel_name="softmax_fwd"),
    ]
    for p in loaded:
        assert p.format in profiles.FORMATS
        assert all_finite(p)
        json.dumps(dataclasses.asdict(p), allow_nan=False)


# --------------------------------------------------------------------------- never crash

_csvish = st.text(
    alphabet=st.sampled_from(list('ab,"\t\r\n \ufeff0123456789.-NA/()%kKIDNameOp')), max_size=300
)
_headers = st.sampled_from(
    [
        "Op Name,Task Duration(us),Block Dim\n",
        "Op Name,OP Type,Task ID,Task Duration(us)\n",
        "Name,Duration(us),cube_utilization(%)\n",
        '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n',
        '"ID","Kernel Name","gpu__time_duration.sum"\n',
        "block_id,sub_block_id,aiv_time(us),aiv_vec_ratio\n",
        "",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(header=_headers, body=_csvish, kernel=st.one_of(st.none(), st.sampled_from(["a", "k"])))
def test_parsers_only_ever_raise_input_error(header: str, body: str, kernel: str | None) -> None:
    text = header + body
    for call in (
        lambda: parse_op_summary(text, kernel_name=kernel),
        lambda: parse_kernel_details(text, kernel_name=kernel),
        lambda: parse_ncu_csv(text, kernel_name=kernel),
        lambda: parse_msprof_op(text, text, text, text, kernel_name=kernel),
        lambda: parse_signals_json(text),
    ):
        try:
            p = call()
        except InputError as exc:
            assert "\n" not in str(exc)
        else:
            assert all_finite(p)


def test_ncu_long_form_without_id_column_is_one_launch() -> None:
    text = (
        '"Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
        '"k","Duration","usecond","4.0"\n'
        '"k","DRAM Throughput","%","50"\n'
    )
    p = parse_ncu_csv(text)
    assert p.signals == {"duration_us": 4.0, "dram_throughput": 0.5, "launch_count": 1.0}


def test_msprof_operator_name_from_folder_when_op_name_is_na(tmp_path: Path) -> None:
    launch = tmp_path / "OPPROF_1" / "my_op" / "0"
    launch.mkdir(parents=True)
    (launch / "OpBasicInfo.csv").write_text("Op Name,Task Duration(us)\nNA,7.5\n")
    p = load_profile(tmp_path, kernel_name="my_op")
    assert p.kernel_name == "my_op"
    assert p.signals["task_duration_us"] == 7.5
    assert p.files[0].path == "OPPROF_1/my_op/0/OpBasicInfo.csv"


def test_ncu_preamble_lines_with_commas_are_skipped():
    """ncu prints ==WARNING== lines before the CSV; one of them contains a comma."""
    plain = load_profile(FIXTURES / "ncu" / "details.csv", kernel_name="add_kernel")
    noisy = load_profile(FIXTURES / "ncu" / "with-preamble.csv", kernel_name="add_kernel")
    assert noisy.format == "ncu-csv"
    assert noisy.signals == plain.signals


def test_full_run_csv_after_a_preamble_is_read_from_its_header(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_text(
        "profiling exported by a wrapper, 2 steps\n"
        "Name,Accelerator Core,Duration(us),Block Dim\nk,AI_VECTOR_CORE,12.5,40\n"
    )
    p = load_profile(path)
    assert p.signals["task_duration_us"] == 12.5
    assert p.notes[0] == "kernel_details.csv: skipped 1 line before the header"


def test_msprof_repeated_columns_are_noted_only_when_they_disagree() -> None:
    basic = "Op Name,Op Type,Task Duration(us),Block Dim,\nk,vector,10,2,\n"
    pipe = (
        "block_id,sub_block_id,aiv_time(us),aiv_mte2_ratio,\n"
        "0,vector0,4.0,0.5,\n1,vector0,6.0,0.7,\n"
    )
    agreeing = pipe.replace("aiv_mte2_ratio", "aiv_mte2_instructions")
    same = parse_msprof_op(basic, pipe, memory=agreeing)
    assert same.notes == ()  # aiv_time(us) repeats with the same values: no news
    assert same.signals["aiv_mte2_instructions"] == 1.2
    other = "block_id,sub_block_id,aiv_time(us),aiv_mte2_ratio,\n0,vector0,4.0,0.1,\n"
    p = parse_msprof_op(basic, pipe, memory=other)
    assert p.signals["aiv_mte2_ratio"] == pytest.approx(0.62)  # PipeUtilization's, kept
    assert len(p.notes) == 2  # aiv_time(us) max 4 vs 6, and the ratio 0.1 vs 0.62
    assert p.notes[1] == (
        "Memory.csv: column 'aiv_mte2_ratio' gives 0.1 where an earlier table gave "
        "aiv_mte2_ratio 0.62; the earlier value is kept"
    )


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_profile_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str):
    """Read through the one bounded reader: a FIFO is refused, never waited on, and a device
    never read without end."""
    import threading

    path = Path("/dev/zero")
    if kind == "fifo":
        path = tmp_path / "profile.csv"
        os.mkfifo(path)
    outcome: list[BaseException] = []

    def load() -> None:
        try:
            load_profile(path)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "load_profile blocked on a file that is not regular"
    assert len(outcome) == 1 and isinstance(outcome[0], InputError)
    assert "is not a regular file" in str(outcome[0])


def test_ncu_one_launch_size_with_two_compilations_is_never_a_mean():
    """Two cases of one Triton kernel ran with the same grid and block but different tiles
    (96 and 55 registers per thread): they were folded into one launch with registers 75.5.
    Self-made file (the layout of ncu --csv --metrics, values chosen)."""
    path = FIXTURES / "ncu" / "selfmade-one-grid-two-compilations.csv"
    profile = load_profile(path)
    assert profile.signals["registers_per_thread"] == 96.0  # the one with the most time
    assert profile.shape == "grid (4096, 1, 1) block (128, 1, 1) registers 96"
    assert [(s.shape, s.launches, s.signals["registers_per_thread"]) for s in profile.shapes] == [
        ("grid (4096, 1, 1) block (128, 1, 1) registers 96", 1, 96.0),
        ("grid (4096, 1, 1) block (128, 1, 1) registers 55", 1, 55.0),
    ]
    other = load_profile(path, shape="registers 55")
    assert other.signals["registers_per_thread"] == 55.0
    assert other.signals["duration_us"] == 12.064
