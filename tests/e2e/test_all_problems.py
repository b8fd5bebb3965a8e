"""A refused input lists every problem it has, each with its JSON path: one line each on
the command line, a list in `--json` and in MCP tool errors; near-miss keys anywhere warn
with the likely key, and `--strict` refuses them. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

from cli.mcpserver import call_tool

from campaign import Campaign, write_json


def test_a_config_with_four_problems_lists_them_all(cli, campaign: Campaign):
    doc = campaign.config_doc()
    doc["cases"][2]["weight"] = -1
    doc["max_rounds"] = 0
    del doc["op_name"]
    doc["baseline"][1]["median_us"] = "40"
    path = write_json(campaign.root / "bad.json", doc)
    result = cli("plan", "--config", path)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (
        f"Error: invalid config {path}: 4 problems:\n"
        "  op_name is required\n"
        "  cases[2].weight must be positive and finite\n"
        "  baseline[1].median_us must be positive and finite\n"
        "  max_rounds must be an integer ≥ 1\n"
    )
    as_json = cli("plan", "--config", path, "--json")
    assert as_json.json()["problems"] == [
        "op_name is required",
        "cases[2].weight must be positive and finite",
        "baseline[1].median_us must be positive and finite",
        "max_rounds must be an integer ≥ 1",
    ]


def test_case_rows_list_every_problem(cli, campaign: Campaign):
    doc = campaign.config_doc()
    doc["baseline"][0]["case_id"] = "fp99-unknown"
    doc["baseline"][2]["case_id"] = "fp32-64x1024"
    path = write_json(campaign.root / "bad.json", doc)
    result = cli("plan", "--config", path)
    assert (result.exit_code, result.stderr) == (
        2,
        "Error: 4 problems:\n"
        "  baseline[0].case_id 'fp99-unknown' is not a planned case\n"
        "  baseline[2].case_id 'fp32-64x1024' appears more than once\n"
        "  baseline has no row for planned case 'fp16-128x257'\n"
        "  baseline has no row for planned case 'bf16-8x8193'\n",
    )


def test_more_than_twenty_problems_are_cut_and_say_so(cli, campaign: Campaign):
    campaign.cases = [(f"case-{i}", 1.0) for i in range(25)]
    campaign.baseline = [10.0] * 25
    doc = campaign.config_doc()
    for row in doc["baseline"]:
        row["repeats"] = 0
    path = write_json(campaign.root / "bad.json", doc)
    result = cli("plan", "--config", path, "--json")
    assert result.exit_code == 2
    problems = result.json()["problems"]
    assert len(problems) == 21
    assert problems[0] == "baseline[0].repeats must be an integer ≥ 1"
    assert problems[-1] == "... and 5 more (fix these first)"


def test_round_measurements_list_every_row(cli, campaign: Campaign):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    doc = campaign.round_doc([16.0, 37.0, 23.0])
    doc["measurements"][0]["median_us"] = 0
    doc["measurements"][2]["repeats"] = -4
    path = write_json(campaign.root / "r.json", doc)
    before = cli.event_count()
    result = cli("record", "--run", campaign.run_id, "--result", path)
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: invalid round result {path}: 2 problems:\n"
        "  measurements[0].median_us must be positive and finite\n"
        "  measurements[2].repeats must be an integer ≥ 1\n",
    )
    assert cli.event_count() == before


def test_near_miss_keys_anywhere_warn_and_strict_refuses(cli, campaign: Campaign):
    doc = campaign.config_doc()
    doc["cases"][1]["wieght"] = doc["cases"][1].pop("weight")
    doc["baseline"][0]["repeat"] = doc["baseline"][0]["repeats"]
    path = write_json(campaign.root / "typo.json", doc)
    warned = [
        "config key cases[1].wieght is not one the contract knows (kept as evidence); did "
        "you mean cases[1].weight?",
    ]
    strict = cli("plan", "--config", path, "--strict")
    assert (strict.exit_code, strict.stderr) == (
        2,
        f"Error: config {path} refused by --strict: {warned[0]}\n",
    )
    checked = cli("plan", "--config", path, "--dry-run")
    assert checked.exit_code == 0
    assert checked.stderr == f"warning: {warned[0]}\n"
    planned = cli("plan", "--config", path, "--json")
    assert planned.json()["warnings"] == warned

    round_doc = campaign.round_doc([16.0, 37.0, 23.0])
    row = round_doc["measurements"][1]
    row["medain_us"] = row.pop("median_us")
    round_doc["mechanism"] = "rows per program"
    round_doc["hypotesis"] = round_doc.pop("hypothesis")
    rpath = write_json(campaign.root / "r.json", round_doc)
    before = cli.event_count()
    refused = cli("record", "--run", campaign.run_id, "--result", rpath, "--strict")
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"Error: invalid round result {rpath}: hypothesis is required\n",
    )
    round_doc["hypothesis"] = "the hypothesis"
    round_doc["expected_sinal"] = {"metric": "occupancy", "direction": "increase"}
    write_json(rpath, round_doc)
    refused = cli("record", "--run", campaign.run_id, "--result", rpath, "--strict")
    assert (refused.exit_code, refused.stderr) == (
        2,
        f"Error: round result {rpath} refused by --strict: 2 problems:\n"
        "  round result key measurements[1].medain_us is not one the contract knows (kept "
        "as evidence); did you mean measurements[1].median_us?\n"
        "  round result key expected_sinal is not one the contract knows (kept as evidence); "
        "did you mean expected_signal?\n",
    )
    assert cli.event_count() == before
    row["median_us"] = 37.0
    write_json(rpath, round_doc)
    checked = cli("record", "--run", campaign.run_id, "--result", rpath, "--dry-run", "--json")
    assert checked.exit_code == 0
    assert checked.json()["status"] == "checked"
    assert checked.json()["warnings"] == [
        "round result key expected_sinal is not one the contract knows (kept as evidence); "
        "did you mean expected_signal?"
    ]
    assert cli.event_count() == before
    recorded = cli("record", "--run", campaign.run_id, "--result", rpath)
    assert recorded.exit_code == 0
    assert recorded.stderr == f"warning: {checked.json()['warnings'][0]}\n"


def test_mcp_errors_carry_the_list(cli, campaign: Campaign, monkeypatch):
    from cli.declare import Env

    doc = campaign.config_doc()
    doc["cases"][0]["weight"] = 0
    doc["max_consecutive_failures"] = True
    path = write_json(campaign.root / "bad.json", doc)
    is_error, document, text = call_tool(
        Env(cli.db_url, as_json=True), "plan", {"config": str(path)}
    )
    assert is_error
    assert document["problems"] == [
        "cases[0].weight must be positive and finite",
        "max_consecutive_failures must be an integer ≥ 1",
    ]
    assert text == f"Error: {document['error']}"
    assert json.dumps(document)  # serializable


def test_an_expected_signal_no_profile_holds_is_refused(cli, campaign: Campaign):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    signals = write_json(campaign.root / "b.json", {"aiv_scalar_ratio": 0.45, "aiv_vec_ratio": 0.2})
    assert cli("profile", signals, "--run", campaign.run_id, "--baseline").exit_code == 0
    doc = campaign.round_doc(
        [16.0, 37.0, 23.0],
        expected_signal={"metric": "not_a_metric", "direction": "decrease"},
        profiler_signals={"aiv_scalar_ratio": 0.3},
    )
    path = write_json(campaign.root / "r.json", doc)
    before = cli.event_count()
    for extra in ([], ["--dry-run"]):
        result = cli("record", "--run", campaign.run_id, "--result", path, *extra)
        assert (result.exit_code, result.stderr) == (
            2,
            "Error: expected_signal.metric 'not_a_metric' is not a signal of the profiles the "
            "round is checked against; they hold: aiv_scalar_ratio, aiv_vec_ratio\n",
        )
    assert cli.event_count() == before
    doc["expected_signal"]["metric"] = "aiv_scalar_ratio"
    write_json(path, doc)
    assert cli("record", "--run", campaign.run_id, "--result", path).exit_code == 0


def test_a_closed_file_names_the_key_a_refused_one_likely_meant(cli, campaign: Campaign):
    doc = campaign.config_doc()
    manifest = Path(doc["validation_manifest"])
    content = json.loads(manifest.read_text())
    content["enviroment"] = content.pop("environment")
    write_json(manifest, content)
    path = write_json(campaign.root / "c.json", doc)
    result = cli("plan", "--config", path)
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: invalid validation manifest {manifest}: 2 problems:\n"
        "  environment is required\n"
        "  enviroment is not an allowed key (did you mean environment?)\n",
    )
