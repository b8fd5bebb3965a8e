"""Every acceptance rule of SPEC 2.1-2.3: exit 2, one line on stderr, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from campaign import Campaign, sha256, write_json


def assert_rejected(cli, result, fragment: str, before: int) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert fragment in result.stderr, result.stderr
    assert cli.event_count() == before


def _set(doc: dict, path: str, value) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        doc = doc[int(key)] if key.isdigit() else doc[key]
    last = keys[-1]
    if value is _DELETE:
        del doc[int(last) if last.isdigit() else last]
    elif last.isdigit():
        doc[int(last)] = value
    else:
        doc[last] = value


_DELETE = object()

CONFIG_CASES = [
    ("schema_version", 2, "schema_version must be 1"),
    ("schema_version", True, "schema_version must be 1"),
    ("run_id", "", "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("run_id", 7, "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("run_id", "/tmp/x/victim", "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("run_id", "../../../../x", "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("run_id", "a b", "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("run_id", "run\n", "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("run_id", "r" * 10_000, "run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("parent_run_id", "../up", "parent_run_id must match ^[a-z0-9][a-z0-9._-]{0,127}$"),
    ("op_name", "o" * 257, "op_name must be at most 256 characters"),
    ("target.soc", "s" * 257, "target.soc must be at most 256 characters"),
    ("cases.0.id", "c" * 257, "cases[0].id must be at most 256 characters"),
    ("op_name", "  ", "op_name must be a non-empty string"),
    ("validation_manifest", _DELETE, "validation_manifest is required"),
    ("kernel.path", "", "kernel.path must be a non-empty string"),
    ("target.soc", "", "target.soc must be a non-empty string"),
    ("target", _DELETE, "target is required"),
    ("cases", [], "cases must be a non-empty list"),
    ("cases.1.id", "fp16-128x257", "cases[1].id 'fp16-128x257' is not unique"),
    ("cases.0.weight", 0, "cases[0].weight must be positive and finite"),
    ("cases.0.weight", -1.0, "cases[0].weight must be positive and finite"),
    ("cases.0.weight", True, "cases[0].weight must be positive and finite"),
    ("cases.0.weight", "1.0", "cases[0].weight must be positive and finite"),
    ("objective.noise_floor", -0.1, "objective.noise_floor must be a finite number ≥ 0"),
    ("objective.max_case_regression", False, "objective.max_case_regression must be a finite"),
    (
        "objective.min_relative_improvement",
        _DELETE,
        "objective.min_relative_improvement is required",
    ),
    ("max_rounds", 0, "max_rounds must be an integer ≥ 1"),
    ("max_rounds", 2.0, "max_rounds must be an integer ≥ 1"),
    ("max_consecutive_failures", True, "max_consecutive_failures must be an integer ≥ 1"),
    ("baseline.2.median_us", 0, "baseline[2].median_us must be positive and finite"),
    ("baseline.2.median_us", -3.0, "baseline[2].median_us must be positive and finite"),
    ("baseline.1.repeats", 0, "baseline[1].repeats must be an integer ≥ 1"),
    ("baseline.1.repeats", 1.5, "baseline[1].repeats must be an integer ≥ 1"),
    ("baseline.2", _DELETE, "baseline has no row for planned case 'bf16-8x8193'"),
    ("kernel.path", "does/not/exist.py", "kernel.path"),
]


@pytest.mark.parametrize(("path", "value", "fragment"), CONFIG_CASES)
def test_config_rules(cli, campaign: Campaign, path, value, fragment):
    doc = campaign.config_doc()
    _set(doc, path, value)
    config = write_json(campaign.root / "bad.json", doc)
    before = cli.event_count()
    assert_rejected(cli, cli("plan", "--config", config), fragment, before)


def test_config_rejects_run_already_in_ledger(cli, campaign):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    before = cli.event_count()
    result = cli("plan", "--config", campaign.config())
    assert_rejected(cli, result, f"run '{campaign.run_id}' is already in the ledger", before)


def test_config_rejects_kernel_path_that_is_a_directory(cli, campaign):
    config = campaign.config(kernel={"path": str(campaign.root)})
    assert_rejected(cli, cli("plan", "--config", config), "is a directory", 0)


MANIFEST_CASES = [
    ({"run_type": "performance"}, "has run_type 'performance', not 'correctness'"),
    ({"status": "failed"}, "has status 'failed'; the starting kernel must have passed"),
    ({"status": "done"}, "status must be one of"),
    ({"run_id": "Bad ID"}, "run_id must match"),
    ({"created_at": "2026-11-02 09:00:00"}, "created_at must be an RFC 3339 UTC time ending in Z"),
    ({"updated_at": "2026-11-02T09:00:00+01:00"}, "updated_at must be an RFC 3339 UTC time"),
    ({"environment_variables": {"HF_TOKEN": "x"}}, "looks like a secret"),
    ({"environment_variables": {"DB_PASSWORD": "x"}}, "looks like a secret"),
    ({"environment_variables": {"N": 1}}, "environment_variables.N must be a string"),
    ({"command": "pytest"}, "command must be an array"),
    ({"topology": []}, "topology must be an object"),
    ({"artifacts": []}, "has no artifact named 'kernel'"),
    ({"extra_key": 1}, "extra_key is not an allowed key"),
    ({"": 1}, '[""] is not an allowed key'),
    ({"environment_variables": {"A B": 1}}, 'environment_variables["A B"] must be a string'),
]


@pytest.mark.parametrize(("overrides", "fragment"), MANIFEST_CASES)
def test_manifest_rules(cli, campaign: Campaign, overrides, fragment):
    kernel = campaign.kernel("v0.py")
    campaign.best_kernel = kernel
    manifest = campaign.manifest("custom", kernel, **overrides)
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), fragment, 0)


def test_manifest_missing_key(cli, campaign):
    kernel = campaign.kernel("v0.py")
    campaign.best_kernel = kernel
    manifest = campaign.manifest("custom", kernel)
    doc = json.loads(manifest.read_text())
    del doc["model"]
    write_json(manifest, doc)
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), "model is required", 0)


def test_manifest_duplicate_artifact_names(cli, campaign):
    kernel = campaign.kernel("v0.py")
    campaign.best_kernel = kernel
    manifest = campaign.manifest("custom", kernel)
    doc = json.loads(manifest.read_text())
    doc["artifacts"].append(dict(doc["artifacts"][0]))
    write_json(manifest, doc)
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), "is not unique", 0)


def test_manifest_for_another_kernel(cli, campaign):
    other = campaign.kernel("other.py", "# other\n")
    campaign.best_kernel = campaign.kernel("v0.py")
    manifest = campaign.manifest("custom", other)
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), f"vouches for kernel {sha256(other)}", 0)


def test_case_matrix_for_another_kernel(cli, campaign):
    kernel = campaign.kernel("v0.py")
    campaign.best_kernel = kernel
    manifest = campaign.manifest("custom", kernel, matrix_sha="0" * 64)
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), "case matrix", 0)


def test_case_matrix_missing_a_case(cli, campaign):
    kernel = campaign.kernel("v0.py")
    campaign.best_kernel = kernel
    manifest = campaign.manifest("custom", kernel, case_ids=campaign.case_ids[:2])
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), "does not cover the planned cases", 0)


def test_case_matrix_missing_file(cli, campaign):
    kernel = campaign.kernel("v0.py")
    campaign.best_kernel = kernel
    manifest = campaign.manifest("custom", kernel)
    (manifest.parent / "case-matrix.json").unlink()
    config = campaign.config(validation_manifest=str(manifest))
    assert_rejected(cli, cli("plan", "--config", config), "case matrix", 0)


# --- round results (SPEC 2.2) ------------------------------------------------------------


@pytest.fixture
def planned(cli, campaign):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    return campaign


def _record(cli, campaign: Campaign, doc: dict):
    path = write_json(campaign.root / "rounds" / "bad.json", doc)
    return cli("record", "--run", campaign.run_id, "--result", path)


ROUND_CASES = [
    ("round", 2, "round 2 is out of order: the next round of run 'softmax-t-001' is 1"),
    ("round", 0, "round must be an integer ≥ 1"),
    ("hypothesis", "   ", "hypothesis must be a non-empty string"),
    ("mechanism", "m" * 257, "mechanism must be at most 256 characters"),
    ("change", "", "change must be a non-empty string"),
    ("parent_kernel_sha256", "ABC", "parent_kernel_sha256 must be 64 lowercase hex digits"),
    ("parent_kernel_sha256", "0" * 64, "stale parent"),
    ("candidate.path", "nope.py", "candidate.path"),
    ("measurements.0.median_us", float("nan"), "not valid JSON"),
    ("measurements.0.median_us", True, "measurements[0].median_us must be positive and finite"),
    ("measurements.0.median_us", "16.0", "measurements[0].median_us must be positive and finite"),
    ("measurements.1.repeats", -4, "measurements[1].repeats must be an integer ≥ 1"),
    ("measurements.2", _DELETE, "measurements has no row for planned case 'bf16-8x8193'"),
    ("measurements", _DELETE, "measurements is required"),
    ("verification", _DELETE, "verification is required"),
    ("profiler_signals", {"x": True}, "profiler_signals.x must be a number"),
]


@pytest.mark.parametrize(("path", "value", "fragment"), ROUND_CASES)
def test_round_rules(cli, planned: Campaign, path, value, fragment):
    doc = planned.round_doc([16.0, 37.0, 23.0])
    _set(doc, path, value)
    before = cli.event_count()
    assert_rejected(cli, _record(cli, planned, doc), fragment, before)


def test_round_manifest_with_foreign_parent_run(cli, planned):
    doc = planned.round_doc([16.0, 37.0, 23.0])
    manifest = Path(doc["verification"]["manifest"])
    content = json.loads(manifest.read_text())
    content["parent_run_id"] = "someone-else"
    write_json(manifest, content)
    before = cli.event_count()
    assert_rejected(cli, _record(cli, planned, doc), "has parent_run_id 'someone-else'", before)


def test_round_manifest_for_another_candidate(cli, planned):
    doc = planned.round_doc([16.0, 37.0, 23.0])
    Path(doc["candidate"]["path"]).write_text("# edited after validation\n")
    before = cli.event_count()
    assert_rejected(cli, _record(cli, planned, doc), "vouches for kernel", before)


def test_failed_validation_ignores_measurements(cli, planned):
    doc = planned.round_doc(None, status="failed")
    doc["measurements"] = "not even a list"
    result = _record(cli, planned, doc)
    assert result.exit_code == 2  # the file's shape is still checked
    doc["measurements"] = [{"case_id": "zzz", "median_us": -1, "repeats": 0}]
    result = _record(cli, planned, doc)
    assert result.exit_code == 0, result.stderr
    assert "FAIL" in result.stdout


def test_unknown_run(cli, campaign):
    result = cli("record", "--run", "ghost", "--result", campaign.root / "r.json")
    assert_rejected(cli, result, "round result", 0)
