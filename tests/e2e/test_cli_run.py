"""A whole run through the command line, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from ledger.store.schema import HEAD_REVISION

from campaign import Campaign, sha256


def plan(cli, campaign: Campaign):
    result = cli("plan", "--config", campaign.config(), "--json")
    assert result.exit_code == 0, result.stderr
    return result.json()


def record(cli, campaign: Campaign, medians, **kwargs):
    path = campaign.round(medians, **kwargs)
    result = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    campaign.accepted(body["decision"], body["round"])
    return body


def test_whole_run_keep_discard_noise_fail_and_analyze(cli, campaign, tmp_path):
    planned = plan(cli, campaign)
    assert planned == {
        "status": "planned",
        "run_id": campaign.run_id,
        "kernel_sha256": sha256(campaign.best_kernel),
        "case_count": 3,
        "warnings": [],
        "merge_rule": "check-merge will pass only if the cumulative improvement reaches "
        "+10.00% (objective.target_relative_improvement)",
    }
    r1 = record(cli, campaign, [16.0, 37.0, 23.0])
    assert r1["status"] == "recorded"
    assert (r1["round"], r1["decision"]) == (1, "KEEP")
    assert r1["remaining_rounds"] == 9 and r1["target_met"] is False
    assert record(cli, campaign, [15.0, 37.0, 26.0])["decision"] == "DISCARD"
    assert record(cli, campaign, [16.01, 37.0, 23.0])["decision"] == "NOISE"
    fail = record(cli, campaign, None, status="failed")
    assert fail["decision"] == "FAIL" and fail["needs_diagnosis"] is True
    assert fail["relative_improvement"] is None
    r5 = record(cli, campaign, [14.0, 33.0, 21.0])
    assert r5["decision"] == "KEEP" and r5["target_met"] is True and r5["needs_diagnosis"] is False

    out = tmp_path / "analysis"
    analyzed = cli("analyze", "--run", campaign.run_id, "--output-dir", out, "--json")
    assert analyzed.exit_code == 0, analyzed.stderr
    body = analyzed.json()
    assert body["status"] == "passed" and body["target_met"] is True
    assert body["best_kernel_sha256"] == sha256(campaign.best_kernel)
    analysis = json.loads((out / "analysis.json").read_text())
    for key in (
        "schema_version",
        "status",
        "op_name",
        "best_kernel",
        "relative_improvement_vs_original",
        "target_relative_improvement",
        "target_met",
        "kept_rounds",
        "round_count",
        "needs_diagnosis",
        "rounds",
    ):
        assert key in analysis
    assert analysis["kept_rounds"] == [1, 5]
    assert [r["decision"] for r in analysis["rounds"]] == [
        "KEEP",
        "DISCARD",
        "NOISE",
        "FAIL",
        "KEEP",
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["run_type"] == "performance" and manifest["status"] == "passed"
    names = {a["name"]: a for a in manifest["artifacts"]}
    assert names["analysis.json"]["sha256"] == sha256(out / "analysis.json")
    assert names["report.md"]["sha256"] == sha256(out / "report.md")
    assert "KEEP" in (out / "report.md").read_text()

    # concluded: no more rounds, and analyze again adds no event
    count = cli.event_count()
    late = cli("record", "--run", campaign.run_id, "--result", campaign.round([1.0, 1.0, 1.0]))
    assert late.exit_code == 2
    assert (
        late.stderr
        == f"Error: run '{campaign.run_id}' has concluded (passed); it accepts no rounds\n"
    )
    again = cli("analyze", "--run", campaign.run_id, "--output-dir", out, "--json")
    assert again.exit_code == 0 and cli.event_count() == count

    verified = cli("verify", "--json")
    assert verified.exit_code == 0
    report = verified.json()
    assert report["status"] == "ok" and report["runs_checked"] == 1
    assert report["events_checked"] == count and report["first_failure"] is None


def test_status_and_history(cli, campaign):
    plan(cli, campaign)
    record(cli, campaign, [16.0, 37.0, 23.0])
    record(cli, campaign, [16.01, 37.0, 23.0])
    status = cli("status", "--run", campaign.run_id, "--json").json()
    assert status["best_kernel"]["round"] == 1
    assert [c["best_median_us"] for c in status["cases"]] == [16.0, 37.0, 23.0]
    assert [c["baseline_median_us"] for c in status["cases"]] == [18.2, 40.0, 25.0]
    listing = cli("status", "--json").json()
    assert [r["run_id"] for r in listing["runs"]] == [campaign.run_id]
    history = cli("history", "--run", campaign.run_id, "--json").json()
    assert [(r["round"], r["decision"]) for r in history["rounds"]] == [(1, "KEEP"), (2, "NOISE")]
    keeps = cli("history", "--decision", "keep", "--json").json()
    assert [r["round"] for r in keeps["rounds"]] == [1]
    text = cli("history", "--run", campaign.run_id)
    assert text.exit_code == 0 and "NOISE" in text.stdout
    unknown = cli("history", "--run", "nope")
    assert (unknown.exit_code, unknown.stderr) == (2, "Error: run 'nope' is not in the ledger\n")


def test_round_budget_exhausted(cli, campaign):
    campaign.max_rounds = 1
    plan(cli, campaign)
    assert record(cli, campaign, [18.0, 40.0, 25.0])["remaining_rounds"] == 0
    result = cli("record", "--run", campaign.run_id, "--result", campaign.round([1.0, 1.0, 1.0]))
    assert result.exit_code == 2
    assert "round budget exhausted" in result.stderr
    analyzed = cli(
        "analyze", "--run", campaign.run_id, "--output-dir", campaign.root / "a", "--json"
    )
    assert analyzed.json()["status"] == "failed"


def test_json_error_object(cli, campaign):
    result = cli("record", "--run", "missing-run", "--result", campaign.root / "x.json", "--json")
    assert result.exit_code == 2
    assert result.json() == {
        "status": "error",
        "error": f"round result {campaign.root / 'x.json'} does not exist",
        "exit_code": 2,
    }
    assert result.stderr == ""  # one channel: the JSON object alone


def test_db_current_and_upgrade(cli):
    current = cli("db", "current", "--json")
    if cli.db_url.startswith("sqlite"):  # a missing ledger file is not created by a query
        assert current.exit_code == 4 and "there is no ledger at" in current.json()["error"]
    else:
        assert current.exit_code == 0
        assert current.json()["revision"] in (None, HEAD_REVISION)
    upgraded = cli("db", "upgrade", "--json")
    assert upgraded.exit_code == 0 and upgraded.json()["revision"] == HEAD_REVISION
    assert cli("db", "current", "--json").json()["current"] is True
