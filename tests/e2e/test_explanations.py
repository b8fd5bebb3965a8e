"""Why a round got its decision, wherever a decision is shown: `show`, `history` and
`analyze`'s report.md (the HTML report is checked in test_report.py)."""

from __future__ import annotations

import pytest

from campaign import record_round as record


@pytest.fixture
def three_rounds(cli, campaign):
    """KEEP, a DISCARD for one regressed case, and a FAIL (baseline 18.2, 40.0, 25.0)."""
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    assert record(cli, campaign, [16.0, 36.0, 22.0]) == "KEEP"
    assert record(cli, campaign, [14.0, 30.0, 23.1]) == "DISCARD"  # +5.0% on bf16-8x8193
    assert record(cli, campaign, None, status="failed") == "FAIL"
    return campaign


def test_show_says_which_rule_fired_with_its_numbers(cli, three_rounds):
    result = cli("show", "--run", three_rounds.run_id, "--round", "2")
    assert result.exit_code == 0, result.stderr
    assert (
        "  why: DISCARD: worst case R = +5.00% on bf16-8x8193 is over its limit 2.00%.\n"
        in result.stdout
    )
    doc = cli("show", "--run", three_rounds.run_id, "--round", "2", "--json").json()
    assert doc["explanation"]["rule"] == "case-regression"
    assert doc["explanation"]["worst_case"] == "bf16-8x8193"


def test_show_names_the_failed_validation_cases(cli, three_rounds):
    result = cli("show", "--run", three_rounds.run_id, "--round", "3")
    assert result.exit_code == 0, result.stderr
    assert (
        "  why: FAIL: validation failed on cases fp16-128x257, fp32-64x1024, bf16-8x8193, so "
        "the candidate was never measured.\n" in result.stdout
    )


def test_show_without_the_case_matrix_says_it_cannot_name_the_case(cli, three_rounds):
    (three_rounds.root / "validation" / "round-3" / "case-matrix.json").write_text("{}")
    result = cli("show", "--run", three_rounds.run_id, "--round", "3")
    assert "the case matrix is not at hand to name the case" in result.stdout


def test_history_explains_every_row(cli, three_rounds):
    result = cli("history", "--run", three_rounds.run_id)
    assert result.exit_code == 0, result.stderr
    why = result.stdout[result.stdout.index("why:\n") :].splitlines()[1:]
    assert [line.split(": ", 2)[1] for line in why] == ["KEEP", "DISCARD", "FAIL"]
    assert why[0].startswith(f"  {three_rounds.run_id} round 1: KEEP: I = +")


def test_analyze_report_md_explains_each_round(cli, three_rounds, tmp_path):
    out = tmp_path / "analysis"
    result = cli("analyze", "--run", three_rounds.run_id, "--output-dir", out)
    assert result.exit_code == 0, result.stderr
    report = (out / "report.md").read_text()
    section = report[report.index("## Why each round got its decision") :]
    assert "- Round 2: DISCARD: worst case R = +5.00% on bf16-8x8193 is over its limit" in section
    assert "- Round 3: FAIL: validation failed on cases" in section
