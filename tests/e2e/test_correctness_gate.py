"""The correctness gate reads the case matrix, not only the manifest's status: a planned case
the matrix reports as not passed refuses `plan` (exit 2) and makes the round FAIL at
`record`, whatever the manifest says. (The JSON-file controller plans and keeps both;
docs/migration.md.) On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from campaign import Campaign, record_round, write_json


def fail_cases(manifest: Path, failed: dict[str, str]) -> None:
    """Rewrite the manifest's case matrix: each case in `failed` gets that status."""
    matrix = manifest.parent / "case-matrix.json"
    doc = json.loads(matrix.read_text())
    for case in doc["cases"]:
        if case["id"] in failed:
            case["status"] = failed[case["id"]]
    write_json(matrix, doc)


def test_plan_refuses_a_case_matrix_with_a_failed_case(cli, campaign: Campaign):
    config = campaign.config()
    manifest = Path(json.loads(config.read_text())["validation_manifest"])
    fail_cases(manifest, {"fp32-64x1024": "failed", "bf16-8x8193": "skipped"})
    for extra in ((), ("--dry-run",)):
        result = cli("plan", "--config", config, *extra)
        assert result.exit_code == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr == (
            f"Error: case matrix {manifest.parent / 'case-matrix.json'} reports planned cases "
            "not passed: fp32-64x1024, bf16-8x8193 (whatever the manifest's status says); the "
            "starting kernel must pass every planned case\n"
        )
    fail_cases(manifest, {"fp32-64x1024": "passed", "bf16-8x8193": "passed"})
    assert cli("plan", "--config", config).exit_code == 0  # nothing was locked before


def test_record_fails_a_round_whose_case_matrix_reports_a_failed_case(cli, campaign: Campaign):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    assert record_round(cli, campaign, [17.0, 38.0, 24.0]) == "KEEP"
    path = campaign.round([15.0, 30.0, 20.0])  # a clear KEEP on its timings
    doc = json.loads(path.read_text())
    fail_cases(Path(doc["verification"]["manifest"]), {"fp16-128x257": "failed"})
    before = cli.event_count()

    result = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["decision"] == "FAIL"
    assert out["failed_cases"] == ["fp16-128x257"]
    assert out["relative_improvement"] is None
    assert cli.event_count() == before + 3  # submitted, validation, decision: never measured

    text = cli("show", "--run", campaign.run_id, "--round", "2")
    assert text.exit_code == 0
    assert "fp16-128x257" in text.stdout
    assert cli("verify").exit_code == 0


def test_record_text_names_the_failed_cases(cli, campaign: Campaign):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    path = campaign.round([15.0, 30.0, 20.0])
    doc = json.loads(path.read_text())
    fail_cases(Path(doc["verification"]["manifest"]), {"fp32-64x1024": "failed"})
    result = cli("record", "--run", campaign.run_id, "--result", path)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "round 1: FAIL  I —  R —  cumulative +0.00%  target not met  9 rounds left\n"
        "  why: FAIL: validation failed on case fp32-64x1024, so the candidate was never "
        "measured.\n"
        "  mechanism block-shape (named by its mechanism); no profile of the candidate read; "
        "no expected_signal\n"
    )
