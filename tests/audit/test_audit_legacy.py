"""import --legacy: run folders written by the JSON-file controller, replayed and re-decided.

The folders under tests/fixtures/legacy/workspace/ were written by the controller itself
(tests/fixtures/legacy/make_controller_runs.py, commands in its commands.json). Tests of
doctored or broken folders edit a copy of them; their names say "self-made"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import audit_kit
import pytest

from ledger.store.eventstore import Store

WORKSPACE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy" / "workspace"
RAN_IN = json.loads((WORKSPACE / "commands.json").read_text())["workspace"]
FOLDERS = sorted(p.name for p in (WORKSPACE / "optimization").iterdir())
event_count = audit_kit.event_count


def _load(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def _import(cli, name: str, workspace: Path = WORKSPACE, *more: str):
    folder = workspace / "optimization" / name
    return cli("import", "--legacy", folder, "--workspace", workspace, "--json", *more)


def test_the_fixtures_hold_every_shape_the_controller_writes():
    assert FOLDERS == [
        "analyzed-at-plan",
        "diagnosis",
        "exhausted",
        "in-progress",
        "inconclusive",
        "passed",
        "planned",
        "reanalyzed",
        "reopened",
    ]
    commands = _load(WORKSPACE, "commands.json")["commands"]
    refused = [c for c in commands if c["exit"] != 0]
    # the second analyze of `reanalyzed`: analysis.json rewritten, the manifest refused it
    assert [c["stdout"]["error"] for c in refused] == ["artifact name is duplicated: 'analysis'"]
    assert not (WORKSPACE / "optimization" / "in-progress" / "analysis.json").exists()
    reopened = WORKSPACE / "optimization" / "reopened"
    assert _load(reopened, "analysis.json")["round_count"] == 2
    assert len(_load(reopened, "rounds.json")["rounds"]) == 4
    state = _load(WORKSPACE / "optimization" / "passed", "state.json")
    assert isinstance(state["original_baseline"], dict)  # keyed by case id
    config = _load(WORKSPACE / "optimization" / "passed", "optimization-config.json")
    assert config["kernel"]["path"] == "kernels/passed/v0.py"  # relative to the workspace


@pytest.mark.parametrize("name", FOLDERS)
def test_every_controller_folder_imports_with_its_decisions_best_kernel_and_status(cli, name):
    folder = WORKSPACE / "optimization" / name
    result = _import(cli, name)
    assert result.exit_code == 0, result.stderr
    body = result.json()
    rounds = _load(folder, "rounds.json")["rounds"]
    state = _load(folder, "state.json")
    manifest = _load(folder, "manifest.json")
    assert body["status"] == "imported"
    assert body["decisions"] == [r["decision"] for r in rounds]
    assert body["best_kernel_sha256"] == state["current_best_sha256"]
    if manifest["status"] in ("passed", "failed", "inconclusive"):
        assert body["conclusion"] == manifest["status"]
        assert body["concluded"] is (not body["reopened_rounds"])
    else:
        assert body["conclusion"] is None and body["concluded"] is False
    assert cli("verify").exit_code == 0
    again = _import(cli, name)
    assert again.exit_code == 0 and again.json()["status"] == "unchanged"
    assert event_count(cli.db_url) == body["events"]
    history = cli("history", "--run", body["run_id"], "--json").json()["rounds"]
    assert [h["recorded_at"][:19] for h in history] == [r["recorded_at"][:19] for r in rounds]


def test_a_concluded_folder_passes_the_gate_with_its_files_in_the_workspace(cli):
    result = _import(cli, "passed")
    body = result.json()
    assert body["decisions"] == ["KEEP", "DISCARD", "NOISE", "FAIL", "KEEP"]
    assert body["conclusion"] == "passed" and body["events"] == 23
    assert set(body["legacy_files"]) == {
        "optimization-config.json",
        "state.json",
        "rounds.json",
        "manifest.json",
        "analysis.json",
    }
    assert body["notes"] == []
    kernel = WORKSPACE / "kernels" / "passed" / "r5.py"
    gate = cli("check-merge", "--run", "passed-001", "--kernel", kernel, "--strict-artifacts")
    assert gate.exit_code == 0, gate.stdout
    # the controller stored the paths under the workspace it ran in; they are found here
    submitted = cli("show", "--run", "passed-001", "--round", 1, "--json").json()["submitted"]
    assert submitted["candidate"]["path"] == str(WORKSPACE / "kernels/passed/r1.py")
    assert submitted["candidate"]["written_path"] == f"{RAN_IN}/kernels/passed/r1.py"


def test_absent_raw_sample_files_are_accepted_and_flagged(cli):
    assert _import(cli, "passed").exit_code == 0
    baseline = cli("show", "--run", "passed-001", "--round", 0, "--json").json()
    rows = baseline["measurements"]["measurements"]
    assert rows[0]["source"]["written_path"] == "raw/passed/baseline-fp16-128x257.json"
    assert rows[2]["source_not_found"]["written_path"] == "raw/passed/baseline-bf16-8x8193.json"
    history = cli("history", "--run", "passed-001", "--json").json()["rounds"]
    flags = [h["flags"] for h in history]
    # round 5 follows three failed rounds that changed the same parameter (BLOCK)
    assert flags == [["samples-file-not-found"], [], [], [], ["retried-mechanism"]]


def test_rounds_recorded_after_analyze_reopen_the_run(cli):
    body = _import(cli, "reopened").json()
    assert body["conclusion"] == "inconclusive" and body["reopened_rounds"] == [3, 4]
    assert body["concluded"] is False
    status = cli("status", "--run", "reopened-001", "--json").json()["run"]
    assert status["status"] == "active" and status["rounds_recorded"] == 4
    history = cli("history", "--run", "reopened-001", "--json").json()["rounds"]
    assert [h["flags"] for h in history] == [
        ["samples-file-not-found"],
        [],
        ["reopened"],
        ["reopened"],
    ]
    assert cli("verify").exit_code == 0


def test_an_analyze_the_manifest_refused_is_reported(cli):
    result = cli(
        "import",
        "--legacy",
        WORKSPACE / "optimization" / "reanalyzed",
        "--workspace",
        WORKSPACE,
    )
    assert result.exit_code == 0, result.stderr
    assert "concluded inconclusive, then reopened by rounds 2, 3" in result.stdout
    assert "note: analysis.json was rewritten by an analyze after round 3" in result.stdout


def test_the_working_directory_is_the_default_workspace(cli, monkeypatch, tmp_path):
    monkeypatch.chdir(WORKSPACE)
    result = cli("import", "--legacy", "optimization/in-progress", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["decisions"] == ["KEEP", "DISCARD"]
    monkeypatch.chdir(tmp_path)
    elsewhere = cli("import", "--legacy", WORKSPACE / "optimization" / "passed")
    assert elsewhere.exit_code == 2
    assert elsewhere.stderr == (
        f"Error: kernel.path {tmp_path / 'kernels/passed/v0.py'} does not exist\n"
    )


def _relocated(tmp_path: Path) -> Path:
    """A copy of the workspace whose folders name it as the place the controller ran in
    (as if it had run there): the absolute paths they store exist."""
    copy = tmp_path / "ran-here"
    shutil.copytree(WORKSPACE, copy)
    for path in (copy / "optimization").rglob("*.json"):
        path.write_text(path.read_text().replace(RAN_IN, str(copy)))
    return copy


def test_the_absolute_paths_the_controller_stored_are_the_fallback(cli, tmp_path, monkeypatch):
    copy = _relocated(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = cli("import", "--legacy", copy / "optimization" / "passed", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["conclusion"] == "passed"
    assert body["notes"] == [
        f"the config's relative paths were not under the workspace {elsewhere}; they were "
        f"read from {copy}, where the controller ran"
    ]
    planned = cli("show", "--run", "passed-001", "--round", 1, "--json").json()
    assert planned["submitted"]["candidate"]["path"] == str(copy / "kernels/passed/r1.py")
    assert "written_path" not in planned["submitted"]["candidate"]


# --- self-made: doctored and broken copies of the controller's folders -------------------


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "ws"
    shutil.copytree(WORKSPACE, target)
    return target


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2))


def test_self_made_doctored_decision_is_refused(cli, tmp_path):
    ws = _copy(tmp_path)
    _edit(
        ws / "optimization" / "passed" / "rounds.json",
        lambda d: d["rounds"][1].update(decision="KEEP"),
    )
    result = _import(cli, "passed", ws)
    assert result.exit_code == 2
    body = result.json()
    assert body["status"] == "error" and body["exit_code"] == 2
    assert body["disagreements"][0].startswith("round 2: recorded KEEP, but the rules give DISCARD")
    assert "nothing was written" in body["error"]
    assert body["error"].startswith("legacy run 'passed-001'") and result.stderr == ""
    assert event_count(cli.db_url) == 0


def test_self_made_broken_parent_chain_is_refused(cli, tmp_path):
    ws = _copy(tmp_path)
    rounds = _load(ws / "optimization" / "passed", "rounds.json")["rounds"]
    discarded = rounds[1]["candidate"]["sha256"]  # round 2's candidate was discarded
    _edit(
        ws / "optimization" / "passed" / "rounds.json",
        lambda d: d["rounds"][2].update(parent_kernel_sha256=discarded),
    )
    result = _import(cli, "passed", ws)
    assert result.exit_code == 2
    assert any(
        p.startswith("broken parent chain: round 3 names parent")
        for p in result.json()["disagreements"]
    )
    assert event_count(cli.db_url) == 0


def test_self_made_every_disagreement_is_reported(sqlite_url, tmp_path):
    from ledger.services.legacy import LegacyRejected, import_legacy

    ws = _copy(tmp_path)
    folder = ws / "optimization" / "passed"

    def doctor(doc):
        doc["rounds"][0]["relative_improvement_vs_current"] += 0.01
        doc["rounds"][2]["decision"] = "KEEP"

    _edit(folder / "rounds.json", doctor)
    _edit(folder / "state.json", lambda s: s.update(consecutive_failures=7))
    _edit(folder / "analysis.json", lambda a: a.update(status="failed"))
    store = Store(sqlite_url)
    with pytest.raises(LegacyRejected) as info:
        import_legacy(store, folder, workspace=ws)
    problems = info.value.problems
    assert any(p.startswith("round 1: recorded relative_improvement_vs_current") for p in problems)
    assert any(p.startswith("round 3: recorded KEEP, but the rules give NOISE") for p in problems)
    assert "state.json consecutive_failures is 7, replay gives 0" in problems
    assert "analysis.json status is 'failed', replay gives 'passed'" in problems
    with store.transaction() as conn:
        assert store.event_count(conn) == 0
    store.close()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing-kernel", "candidate.path"),
        ("changed-kernel", "not the recorded candidate.sha256"),
        ("missing-state", "legacy state.json"),
        ("bad-time", "recorded_at 'yesterday' is not an RFC 3339 time"),
        ("bad-round-count", "round_count must be a number of rounds from 0 to 5"),
        ("list-state", "state.json original_baseline must map each case id"),
    ],
)
def test_self_made_broken_folders_are_refused_with_one_line(cli, tmp_path, damage, message):
    ws = _copy(tmp_path)
    folder = ws / "optimization" / "passed"
    if damage == "missing-kernel":
        (ws / "kernels" / "passed" / "r3.py").unlink()
    elif damage == "changed-kernel":
        (ws / "kernels" / "passed" / "r3.py").write_text("# edited after the round\n")
    elif damage == "missing-state":
        (folder / "state.json").unlink()
    elif damage == "bad-time":
        _edit(folder / "rounds.json", lambda d: d["rounds"][1].update(recorded_at="yesterday"))
    elif damage == "bad-round-count":
        _edit(folder / "analysis.json", lambda a: a.update(round_count=9))
    elif damage == "list-state":
        _edit(
            folder / "state.json",
            lambda s: s.update(original_baseline=list(s["original_baseline"].values())),
        )
    result = _import(cli, "passed", ws)
    assert result.exit_code == 2
    error = result.json()["error"]
    assert message in error, error
    assert result.stderr == ""
    assert event_count(cli.db_url) == 0


def test_import_needs_bundles_or_folders(cli, tmp_path):
    nothing = cli("import")
    assert nothing.exit_code == 2
    assert nothing.stderr == "Error: name either a bundle FILE or --legacy DIR\n"
    folder = WORKSPACE / "optimization" / "passed"
    # with --legacy every FILE is one more run folder: a bundle among them is refused, and
    # the folder before it is not imported either
    bundle = tmp_path / "x.bundle.jsonl"
    bundle.write_text("{}\n")
    both = cli("import", bundle, "--legacy", folder, "--workspace", WORKSPACE, "--json")
    assert both.exit_code == 2
    assert both.json()["error"] == (
        f"--legacy {bundle} is a file, not a run folder (a bundle is imported without --legacy)"
    )
    assert event_count(cli.db_url) == 0
    nowhere = cli("import", "--legacy", tmp_path / "nowhere")
    assert nowhere.exit_code == 2
    assert nowhere.stderr == f"Error: --legacy {tmp_path / 'nowhere'} is not a folder\n"
    alone = cli("import", tmp_path / "x.jsonl", "--workspace", tmp_path)
    assert alone.exit_code == 2 and alone.stderr == "Error: --workspace goes with --legacy DIR\n"
    missing = cli("import", "--legacy", folder, "--workspace", tmp_path / "nowhere")
    assert missing.exit_code == 2
    assert missing.stderr == f"Error: --workspace {tmp_path / 'nowhere'} is not a folder\n"
