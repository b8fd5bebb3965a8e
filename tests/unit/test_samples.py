"""Raw timing files: every accepted format and unit, every rejection, the median rules."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.inputs import samples as samples_mod
from ledger.inputs.samples import check_median_agrees, load_samples_file, median


def write(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


# ------------------------------------------------------------------------ JSON


def test_json_list_is_microseconds(tmp_path):
    path = write(tmp_path, "raw.json", "[18.2, 18.5, 17.9, 19]")
    source = load_samples_file(path)
    assert source.samples_us == (18.2, 18.5, 17.9, 19.0)
    assert (source.unit, source.format) == ("us", "json-list")
    assert source.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("unit", "values", "expected"),
    [
        ("us", [15.3, 16], (15.3, 16.0)),
        ("ms", [0.0153, 0.016, 1], (15.3, 16.0, 1000.0)),  # Triton do_bench(return_mode="all")
        ("ns", [15300, 16000.5], (15.3, 16.0005)),
    ],
)
def test_json_object_units_convert_with_one_rounding(tmp_path, unit, values, expected):
    doc = {"unit": unit, "samples": values, "tool": "triton.testing.do_bench", "rep": 100}
    source = load_samples_file(write(tmp_path, "bench.json", json.dumps(doc)))
    assert source.samples_us == expected  # 0.0153 * 1000 in floats would be 15.299999999999999
    assert (source.unit, source.format) == (unit, "json-object")


def test_json_is_recognised_without_the_extension_and_with_a_bom(tmp_path):
    source = load_samples_file(write(tmp_path, "raw.txt", '\ufeff  {"unit":"ms","samples":[2]}'))
    assert source.samples_us == (2000.0,) and source.format == "json-object"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2", "is not valid JSON"),
        ("[]", "holds no samples"),
        ('{"unit": "us", "samples": []}', "holds no samples"),
        ('[1, "2"]', "item 1 must be a number, not a string"),
        ("[1, null]", "item 1 must be a number, not null"),
        ("[1, true]", "item 1 must be a number, not a boolean"),
        ("[1, [2]]", "item 1 must be a number, not a list"),
        ("[1, NaN]", "is not valid JSON: NaN is not a finite number"),
        ("[Infinity]", "is not valid JSON: Infinity is not a finite number"),
        ("[-Infinity]", "is not valid JSON: -Infinity is not a finite number"),
        ("[1e400]", "overflows to infinity"),
        ("[1e-400]", "must be a positive time"),
        ("[3, -1]", "item 1 must be a positive time"),
        ("[0]", "item 0 must be a positive time"),
        ('{"unit": "s", "samples": [1]}', "unknown unit 's'"),
        ('{"unit": 1, "samples": [1]}', "unknown unit 1"),
        ('{"samples": [1]}', 'has no "unit"'),
        ('{"unit": "us"}', 'has no "samples" list'),
        ('{"unit": "us", "samples": 5}', '"samples" must be a list'),
        ('{"unit": "us", "samples": [false]}', "samples[0] must be a number, not a boolean"),
        ('"18.2"', "must hold a list of numbers"),
        ('{"unit": "us", "unit": "ms", "samples": [1]}', "duplicate key 'unit'"),
        ("", "is empty"),
        ("  \n", "is empty"),
    ],
)
def test_bad_json_is_rejected_in_one_line_naming_the_file(tmp_path, content, message):
    path = write(tmp_path, "bad.json", content)
    with pytest.raises(InputError) as caught:
        load_samples_file(path)
    assert message in caught.value.message
    assert str(path) in caught.value.message
    assert "\n" not in caught.value.message


# ------------------------------------------------------------------------- CSV

KERNEL_DETAILS = (
    "\ufeffStep Id,Name,Type,Accelerator Core,Start Time(us)\t,Duration(us),Wait Time(us),"
    "Input Shapes\n"
    '0,softmax_kernel,softmax,AI_VECTOR_CORE,1700000000.1\t,18.24,0.5,"""128,257"""\n'
    '0,softmax_kernel,softmax,AI_VECTOR_CORE,1700000100.1\t,N/A,0.5,"""128,257"""\n'
    '0,softmax_kernel,softmax,AI_VECTOR_CORE,1700000200.1\t, 18.31\t,0.4,"""128,257"""\n'
    "\n"
)


def test_kernel_details_csv(tmp_path):
    source = load_samples_file(write(tmp_path, "kernel_details.csv", KERNEL_DETAILS))
    assert source.samples_us == (18.24, 18.31)
    assert (source.unit, source.format) == ("us", "csv")


def test_op_summary_and_op_basic_info_columns(tmp_path):
    op_summary = (
        "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,Task Duration(us),"
        "Task Wait Time(us)\n"
        "0,4294967295,12,2,softmax,Softmax,20.5,1.0\n"
        "0,4294967295,13,2,softmax,Softmax,NA,1.0\n"
        "0,4294967295,14,2,softmax,Softmax,20.75,1.0\n"
    )
    assert load_samples_file(write(tmp_path, "op_summary_0.csv", op_summary)).samples_us == (
        20.5,
        20.75,
    )
    basic = (
        "Op Name,Op Type,Task Duration(us),Block Dim,Mix Block Dim,Device Id,Pid,"
        "Current Freq,Rated Freq,\n"
        "softmax,vector,17.9,40,0,0,1234,1800,1800,\n"
    )
    assert load_samples_file(write(tmp_path, "OpBasicInfo.csv", basic)).samples_us == (17.9,)


def test_duration_is_preferred_when_both_columns_exist(tmp_path):
    content = "Task Duration(us),Duration(us)\n99,10\n"
    assert load_samples_file(write(tmp_path, "both.csv", content)).samples_us == (10.0,)


def test_csv_is_recognised_without_the_extension(tmp_path):
    source = load_samples_file(write(tmp_path, "timings.txt", "Duration(us)\n3.5\n"))
    assert source.format == "csv" and source.samples_us == (3.5,)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("Name,Start Time(us)\nx,1\n", "has no Duration(us) or Task Duration(us) column"),
        ("Duration(us)\nN/A\nNA\n\n", "has no Duration(us) values"),
        ("Duration(us)\n18.2\nfast\n", "line 3 Duration(us) is not a number"),
        ("Duration(us)\n18.2\nnan\n", "line 3 Duration(us) is not finite"),
        ("Duration(us)\ninf\n", "line 2 Duration(us) is not finite"),
        ("Duration(us)\n-3\n", "line 2 Duration(us) must be a positive time"),
        ("Duration(us)\n0\n", "must be a positive time"),
        ("\n\n", "is empty"),
        (",,\n", "has no header row"),
    ],
)
def test_bad_csv_is_rejected_in_one_line_naming_the_file(tmp_path, content, message):
    path = write(tmp_path, "bad.csv", content)
    with pytest.raises(InputError) as caught:
        load_samples_file(path)
    assert message in caught.value.message
    assert str(path) in caught.value.message
    assert "\n" not in caught.value.message


# ----------------------------------------------------------------------- files


def test_missing_file_directory_size_and_encoding(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="does not exist"):
        load_samples_file(tmp_path / "absent.json")
    with pytest.raises(InputError, match="is a directory"):
        load_samples_file(tmp_path)
    with pytest.raises(InputError, match="is not UTF-8"):
        load_samples_file(write(tmp_path, "latin.csv", b"Duration(us)\n\xff\n"))
    big = write(tmp_path, "big.json", "[" + ", ".join(["1.5"] * 100) + "]")
    monkeypatch.setattr(samples_mod, "MAX_SAMPLES_FILE_BYTES", 64)
    with pytest.raises(InputError, match="over the 64-byte limit"):
        load_samples_file(big)


def test_the_size_limit_is_64_mib():
    assert samples_mod.MAX_SAMPLES_FILE_BYTES == 64 * 1024 * 1024


# ---------------------------------------------------------------------- median


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(1e-3, 1e6, allow_nan=False), min_size=1, max_size=60))
def test_median_matches_numpy_bit_for_bit(values):
    assert median(values) == float(np.median(np.array(values)))


def test_median_refuses_empty_and_nan():
    with pytest.raises(ValueError):
        median([])
    with pytest.raises(ValueError):
        median([1.0, float("nan")])


def test_check_median_agrees():
    values = [18.2437, 18.31, 18.19, 18.27]
    exact = median(values)
    check_median_agrees(exact, values)
    check_median_agrees(exact * (1 + 1e-12), values)  # round-off from another tool
    with pytest.raises(InputError) as caught:
        check_median_agrees(round(exact, 1), values, label="measurements[0].median_us")
    assert caught.value.message.startswith("measurements[0].median_us 18.3 disagrees")
    check_median_agrees(round(exact, 1), values, rel_tol=0.01)  # an explicit looser rule
