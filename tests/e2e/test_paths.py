"""Paths inside input files resolve as the JSON-file controller resolves them: against the
working directory (agents run it from the workspace root), a manifest's artifact URIs
against the manifest's folder; and a raw-samples file that is named but absent is accepted
on the row's median, with a visible flag."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

from campaign import Campaign, sha256, write_json

RUN = "softmax-t-001"


def _relative(doc: dict, workspace: Path) -> dict:
    """The document with every absolute path under `workspace` written relative to it."""
    text = json.dumps(doc).replace(str(workspace) + os.sep, "")
    return json.loads(text)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch) -> tuple[Path, Campaign]:
    """A workspace root with the run's files under runs/x/, as agents lay it out; the
    working directory is the workspace root."""
    root = tmp_path / "ws"
    campaign = Campaign(root / "runs" / "x", run_id=RUN)
    campaign.root.mkdir(parents=True)
    monkeypatch.chdir(root)
    return root, campaign


def _plan(cli, root: Path, campaign: Campaign, **overrides) -> dict:
    doc = _relative(campaign.config_doc(**overrides), root)
    config = write_json(campaign.root / "config.json", doc)
    result = cli("plan", "--config", "runs/x/config.json", "--json")
    assert result.exit_code == 0, result.stderr
    assert config.exists()
    return result.json()


def _payloads(db_url: str, event_type: str) -> list[dict]:
    store = Store(db_url)
    with store.transaction() as conn:
        stream = store.read_stream(conn, RUN)
    store.close()
    return [r.payload_value() for r in stream if r.event_type == event_type]


def test_config_and_round_paths_resolve_against_the_working_directory(cli, workspace, db_url):
    root, campaign = workspace
    _plan(cli, root, campaign)
    planned = _payloads(db_url, "RunPlanned")[0]
    assert planned["config_document"]["kernel"]["path"] == "runs/x/kernels/v0.py"
    assert planned["kernel"]["path"] == str(root / "runs/x/kernels/v0.py")
    assert planned["kernel"]["written_path"] == "runs/x/kernels/v0.py"
    linked = _payloads(db_url, "ValidationLinked")[0]
    assert linked["manifest"]["written_path"] == "runs/x/validation/baseline/manifest.json"
    # the case matrix URI is relative to the manifest's folder, not the working directory
    assert linked["case_matrix"]["path"] == str(
        root / "runs/x/validation/baseline/case-matrix.json"
    )
    assert linked["case_matrix"]["written_path"] == "case-matrix.json"

    round_doc = _relative(campaign.round_doc([16.0, 37.0, 23.0]), root)
    write_json(campaign.root / "rounds" / "round-1.json", round_doc)
    result = cli("record", "--run", RUN, "--result", "runs/x/rounds/round-1.json", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["decision"] == "KEEP"
    submitted = _payloads(db_url, "RoundSubmitted")[0]
    assert submitted["candidate"]["path"] == str(root / "runs/x/kernels/r1.py")
    assert submitted["candidate"]["written_path"] == "runs/x/kernels/r1.py"
    assert cli("verify").exit_code == 0


def test_a_path_relative_to_the_config_folder_is_not_found(cli, workspace):
    root, campaign = workspace
    doc = campaign.config_doc()
    doc["kernel"]["path"] = "kernels/v0.py"  # relative to runs/x/, not to the workspace
    write_json(campaign.root / "config.json", doc)
    result = cli("plan", "--config", "runs/x/config.json")
    assert result.exit_code == 2
    assert result.stderr == f"Error: kernel.path {root / 'kernels/v0.py'} does not exist\n"
    assert cli.event_count() == 0


def test_the_service_takes_the_base_folder_explicitly(workspace, tmp_path, monkeypatch, db_url):
    root, campaign = workspace
    config = write_json(campaign.root / "config.json", _relative(campaign.config_doc(), root))
    round_doc = _relative(campaign.round_doc([16.0, 37.0, 23.0]), root)
    result = write_json(campaign.root / "rounds" / "round-1.json", round_doc)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    store = Store(db_url, create=True)
    service = LedgerService(store)
    with pytest.raises(Exception, match="does not exist"):
        service.plan(config)  # the working directory is not the workspace
    assert service.plan(config, base_dir=root).run_id == RUN
    assert service.record(RUN, result, base_dir=root).decision == "KEEP"
    store.close()


def test_absolute_paths_are_recorded_as_before(cli, campaign, db_url):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    planned = _payloads(db_url, "RunPlanned")[0]
    assert set(planned["kernel"]) == {"path", "sha256", "size"}
    linked = _payloads(db_url, "ValidationLinked")[0]
    assert set(linked["manifest"]) == {"path", "sha256", "size"}
    # an artifact URI as written ("case-matrix.json") differs from the absolute path
    assert linked["case_matrix"]["written_path"] == "case-matrix.json"


# --- a named but absent raw-samples file ----------------------------------------------------


def test_an_absent_samples_file_is_accepted_on_the_median_and_flagged(cli, workspace, db_url):
    root, campaign = workspace
    doc = campaign.config_doc()
    doc["baseline"][1]["source"] = "runs/x/raw/baseline-missing.json"
    plan = _plan(cli, root, campaign, baseline=doc["baseline"])
    assert plan["samples_not_found"] == ["fp32-64x1024"]
    zero = cli("show", "--run", RUN, "--round", 0, "--json").json()
    rows = zero["measurements"]["measurements"]
    assert rows[1]["source_not_found"] == {
        "path": str(root / "runs/x/raw/baseline-missing.json"),
        "written_path": "runs/x/raw/baseline-missing.json",
    }
    assert rows[1]["source"] is None and rows[1]["median_us"] == 40.0
    assert "source_not_found" not in rows[0]
    text = cli("show", "--run", RUN, "--round", 0).stdout
    assert "file not found" in text

    round_doc = _relative(campaign.round_doc([16.0, 37.0, 23.0]), root)
    round_doc["measurements"][0]["source"] = "runs/x/raw/r1-gone.json"
    write_json(campaign.root / "rounds" / "round-1.json", round_doc)
    recorded = cli("record", "--run", RUN, "--result", "runs/x/rounds/round-1.json", "--json")
    assert recorded.exit_code == 0, recorded.stderr
    body = recorded.json()
    # the decision is the controller's, on the medians
    assert body["decision"] == "KEEP"
    assert body["flags"] == ["samples-file-not-found"]
    assert body["samples_not_found"] == ["fp16-128x257"]
    history = cli("history", "--run", RUN, "--json").json()
    assert "samples-file-not-found" in json.dumps(history)
    shown = cli("show", "--run", RUN, "--round", 1).stdout
    assert "flags: samples-file-not-found" in shown
    html = root / "report.html"
    assert cli("report", "--run", RUN, "--html", html).exit_code == 0
    page = html.read_text()
    assert "samples-file-not-found" in page and "fp32-64x1024" in page
    assert cli("verify").exit_code == 0


def test_an_absent_samples_file_without_a_median_is_refused(cli, workspace):
    root, campaign = workspace
    doc = campaign.config_doc()
    doc["baseline"][0] = {"case_id": "fp16-128x257", "repeats": 5, "source": "runs/x/raw/no.json"}
    write_json(campaign.root / "config.json", _relative(doc, root))
    result = cli("plan", "--config", "runs/x/config.json")
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: baseline[0].median_us is required: the samples file baseline[0].source "
        f"{root / 'runs/x/raw/no.json'} does not exist\n"
    )
    assert cli.event_count() == 0


def test_a_present_samples_file_is_still_read_and_checked(cli, workspace):
    root, campaign = workspace
    raw = campaign.root / "raw" / "b.json"
    raw.parent.mkdir(parents=True)
    raw.write_text(json.dumps([39.0, 41.0, 40.0]))
    doc = campaign.config_doc()
    doc["baseline"][1]["source"] = "runs/x/raw/b.json"
    _plan(cli, root, campaign, baseline=doc["baseline"])
    rows = cli("show", "--run", RUN, "--round", 0, "--json").json()["measurements"]
    row = rows["measurements"][1]
    assert row["source"]["sha256"] == sha256(raw)
    assert row["source"]["written_path"] == "runs/x/raw/b.json"
    assert row["samples_us"] == [39.0, 41.0, 40.0]


def test_a_source_that_is_not_a_samples_file_is_kept_as_evidence_and_flagged(
    cli, workspace, db_url
):
    """A benchmark log named as `source` (the controller never reads it): recorded by its
    sha256, the median and repeats as given, the round flagged."""
    root, campaign = workspace
    log = campaign.root / "raw" / "bench-r1.log"
    log.parent.mkdir(parents=True)
    log.write_text("triton.testing.do_bench fp16-128x257: 16.0 us (50 repeats)\n")
    _plan(cli, root, campaign, baseline=campaign.config_doc()["baseline"])
    round_doc = _relative(campaign.round_doc([16.0, 37.0, 23.0]), root)
    round_doc["measurements"][0]["source"] = "runs/x/raw/bench-r1.log"
    write_json(campaign.root / "rounds" / "round-1.json", round_doc)
    recorded = cli("record", "--run", RUN, "--result", "runs/x/rounds/round-1.json", "--json")
    assert recorded.exit_code == 0, recorded.stderr
    assert recorded.json()["decision"] == "KEEP"
    assert recorded.json()["flags"] == ["source-not-samples"]
    assert recorded.json()["sources_not_samples"] == ["fp16-128x257"]
    rows = cli("show", "--run", RUN, "--round", 1, "--json").json()["measurements"]
    row = rows["measurements"][0]
    assert row["source"]["sha256"] == sha256(log)
    assert row["source"]["written_path"] == "runs/x/raw/bench-r1.log"
    assert row["source_not_samples"] == "has no Duration(us) or Task Duration(us) column"
    assert row["samples_us"] is None and row["median_us"] == 16.0
    assert "source_not_samples" not in rows["measurements"][1]
    assert "not a samples file" in cli("show", "--run", RUN, "--round", 1).stdout
    assert cli("verify").exit_code == 0


def test_plan_and_record_say_which_sources_hold_no_samples(cli, workspace):
    """The note beside the one for missing samples files: the cases whose `source` is kept
    as evidence only, in the text and as a JSON key."""
    root, campaign = workspace
    log = campaign.root / "raw" / "bench.log"
    log.parent.mkdir(parents=True)
    log.write_text("a benchmark's log: 40.0 us\n")
    doc = _relative(campaign.config_doc(), root)
    doc["baseline"][0]["source"] = "runs/x/raw/bench.log"
    write_json(campaign.root / "config.json", doc)
    planned = cli("plan", "--config", "runs/x/config.json")
    assert planned.exit_code == 0, planned.stderr
    assert planned.stdout.splitlines()[-1] == (
        "  note: the baseline names source files that hold no samples (cases "
        f"{doc['baseline'][0]['case_id']}); their digests are recorded and the decision "
        "uses the medians"
    )
    round_doc = _relative(campaign.round_doc([16.0, 37.0, 23.0]), root)
    round_doc["measurements"][1]["source"] = "runs/x/raw/bench.log"
    write_json(campaign.root / "rounds" / "round-1.json", round_doc)
    recorded = cli("record", "--run", RUN, "--result", "runs/x/rounds/round-1.json")
    assert recorded.exit_code == 0, recorded.stderr
    assert recorded.stdout.splitlines()[-1] == (
        "  note: the round 1 names source files that hold no samples (cases "
        f"{round_doc['measurements'][1]['case_id']}); their digests are recorded and the "
        "decision uses the medians"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"fp16-128x257": [16.0, 16.2]}', 'has no "samples" list'),
        ("", "is empty"),
        ("not json", "has no Duration(us) or Task Duration(us) column"),
    ],
)
def test_a_source_that_is_not_samples_needs_the_median_and_repeats(
    cli, workspace, text: str, reason: str
):
    root, campaign = workspace
    dump = campaign.root / "raw" / ("dump.json" if text.startswith("{") else "dump.txt")
    dump.parent.mkdir(parents=True)
    dump.write_text(text)
    doc = campaign.config_doc()
    written = str(dump.relative_to(root))
    doc["baseline"][0] = {"case_id": "fp16-128x257", "median_us": 18.0, "source": written}
    write_json(campaign.root / "config.json", _relative(doc, root))
    result = cli("plan", "--config", "runs/x/config.json")
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: baseline[0].repeats is required: baseline[0].source {dump} is not a samples "
        f"file ({reason})\n"
    )
    assert cli.event_count() == 0
    doc["baseline"][0]["repeats"] = 50
    write_json(campaign.root / "config.json", _relative(doc, root))
    assert cli("plan", "--config", "runs/x/config.json").exit_code == 0


def test_a_samples_file_with_bad_values_is_still_refused(cli, workspace):
    root, campaign = workspace
    raw = campaign.root / "raw" / "b.json"
    raw.parent.mkdir(parents=True)
    raw.write_text(json.dumps([39.0, -41.0, 40.0]))
    doc = campaign.config_doc()
    doc["baseline"][1]["source"] = "runs/x/raw/b.json"
    write_json(campaign.root / "config.json", _relative(doc, root))
    result = cli("plan", "--config", "runs/x/config.json")
    assert result.exit_code == 2
    assert "item 1 must be a positive time" in result.stderr
    assert cli.event_count() == 0
