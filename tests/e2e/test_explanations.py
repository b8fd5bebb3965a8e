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


def test_the_worst_case_is_named_from_the_reference_the_decision_compared(cli, campaign):
    """Against the round's same-session reference the worst case is bf16-8x8193 (+22.50%);
    against the best kernel's stored medians (another session) it would be fp16-128x257
    (+1.65%). Every view names the first: the comparison R was computed on."""
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    reference = [
        {"case_id": c, "median_us": m, "repeats": 50}
        for c, m in zip(campaign.case_ids, [18.2, 40.0, 20.0], strict=True)
    ]
    path = campaign.round(
        [18.5, 33.0, 24.5], reference={"kernel_sha256": parent, "measurements": reference}
    )
    recorded = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert recorded.exit_code == 0, recorded.stderr
    assert recorded.json()["decision"] == "DISCARD"
    assert recorded.json()["why"]["worst_case"] == "bf16-8x8193"
    campaign.accepted("DISCARD", 1)
    sentence = "DISCARD: worst case R = +22.50% on bf16-8x8193 is over its limit 2.00%."
    shown = cli("show", "--run", campaign.run_id, "--round", "1")
    assert f"  why: {sentence}\n" in shown.stdout
    doc = cli("show", "--run", campaign.run_id, "--round", "1", "--json").json()
    assert doc["explanation"]["worst_case"] == "bf16-8x8193"
    assert doc["explanation"]["sentence"] == sentence
    history = cli("history", "--run", campaign.run_id)
    assert f"  {campaign.run_id} round 1: {sentence}\n" in history.stdout
    out = campaign.root / "analysis"
    assert cli("analyze", "--run", campaign.run_id, "--output-dir", out).exit_code == 0
    assert sentence in (out / "report.md").read_text()


def test_record_and_assess_say_why_as_show_does(cli, campaign):
    """record (and its dry run, and a retry of a recorded file) and assess print the
    sentence show prints on a second line, and give it in --json as `why`."""
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    path = campaign.round([16.0, 36.0, 26.25])  # +5.00% on bf16-8x8193
    sentence = "DISCARD: worst case R = +5.00% on bf16-8x8193 is over its limit 2.00%."
    why = {"rule": "case-regression", "sentence": sentence, "worst_case": "bf16-8x8193",
           "flags": {}}  # fmt: skip
    assessed = cli("assess", "--run", campaign.run_id, "--result", path)
    assert assessed.exit_code == 0, assessed.stderr
    assert assessed.stdout == (
        "round 1: DISCARD  I +6.77%  R +5.00%  (medians)  (nothing was written)\n"
        f"  why: {sentence}\n"
    )
    assessed = cli("assess", "--run", campaign.run_id, "--result", path, "--json")
    assert assessed.json()["why"] == why
    checked = cli("record", "--run", campaign.run_id, "--result", path, "--dry-run")
    assert checked.stdout.splitlines()[1:3] == [
        "round 1: DISCARD  I +6.77%  R +5.00%  cumulative +0.00%  target not met  9 rounds left",
        f"  why: {sentence}",
    ]
    for attempt in ("first", "retry"):
        recorded = cli("record", "--run", campaign.run_id, "--result", path)
        assert recorded.exit_code == 0, recorded.stderr
        lines = recorded.stdout.splitlines()
        assert lines[-2 if attempt == "first" else -1] == f"  why: {sentence}", attempt
        body = cli("record", "--run", campaign.run_id, "--result", path, "--json").json()
        assert body["why"] == why
    shown = cli("show", "--run", campaign.run_id, "--round", "1", "--json").json()
    assert shown["explanation"] == why


def test_a_candidate_measured_again_until_it_was_kept_is_said(cli, campaign):
    """One candidate file (one sha256) submitted in rounds 1, 2 and 3: DISCARD, DISCARD,
    KEEP. show, status, check-merge (verdict unchanged) and report.md say so."""
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    same = "# one kernel, measured three ways\nBLOCK = 64\n"
    assert record(cli, campaign, [16.0, 36.0, 26.25], body=same) == "DISCARD"
    assert record(cli, campaign, [16.0, 36.0, 26.25], body=same) == "DISCARD"
    assert record(cli, campaign, [16.0, 36.0, 22.0], body=same) == "KEEP"
    run = campaign.run_id
    best = (
        "the best kernel (round 3) was also the candidate of rounds 1, 2 (DISCARD, DISCARD): "
        "kept on its third submission"
    )
    shown = cli("show", "--run", run, "--round", "3")
    assert shown.stdout.endswith(
        "  resubmitted: the candidate of round 3 was also the candidate of rounds 1, 2 "
        "(DISCARD, DISCARD): kept on its third submission\n"
    )
    doc = cli("show", "--run", run, "--round", "2", "--json").json()
    assert doc["resubmission"] == {
        "rounds": [1],
        "decisions": ["DISCARD"],
        "sentence": "the candidate of round 2 was also the candidate of round 1 (DISCARD): "
        "discarded on its second submission",
    }
    assert "resubmission" not in cli("show", "--run", run, "--round", "1", "--json").json()
    status = cli("status", "--run", run)
    assert f"\n    {best}\n" in status.stdout
    body = cli("status", "--run", run, "--json").json()
    assert body["best_kernel"]["resubmission"] == {
        "rounds": [1, 2], "decisions": ["DISCARD", "DISCARD"], "sentence": best
    }  # fmt: skip
    out = campaign.root / "analysis"
    assert cli("analyze", "--run", run, "--output-dir", out).exit_code == 0
    report = (out / "report.md").read_text()
    assert f"- Resubmitted: {best}.\n" in report
    assert "Resubmitted: the candidate of round 2 was also the candidate of round 1" in report
    kernel = campaign.root / "kernels" / "r3.py"
    merged = cli("check-merge", "--run", run, "--kernel", kernel)
    assert merged.exit_code == 0, merged.stdout
    assert f"  note: {best[0].upper()}{best[1:]}.\n" in merged.stdout
    notes = cli("check-merge", "--run", run, "--kernel", kernel, "--json").json()["notes"]
    assert f"{best[0].upper()}{best[1:]}." in notes
