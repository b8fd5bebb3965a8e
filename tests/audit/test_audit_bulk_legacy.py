"""`import --legacy DIR...`: many run folders of the JSON-file controller in one command and
one transaction; all of them or (one refused) none, the refusal naming its folder. A
folder imported before adds the rounds recorded since.

The folders under tests/fixtures/legacy/workspace/ were written by the controller itself;
folders that go on after an import are written by it here (skipped without the reference
controller) and, self-made, by kernel-ledger's drop-in `triton-optimization`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import audit_kit
import legacy_kit as kit
import pytest
from audit_kit import event_count, stream_rows

from ledger.services import legacy
from ledger.store.eventstore import Store

from conftest import CliRunner

WORKSPACE = Path(__file__).resolve().parents[1] / "fixtures" / "legacy" / "workspace"
FOLDERS = sorted(p for p in (WORKSPACE / "optimization").iterdir())
other_url = audit_kit.other_url


def _run_ids(folders) -> list[str]:
    return [json.loads((f / "optimization-config.json").read_text())["run_id"] for f in folders]


def _seqs(url: str) -> list[tuple[int, str, str, str]]:
    store = Store(url)
    with store.transaction() as conn:
        rows = [(e.seq, e.stream_id, e.event_id, e.event_hash) for e in store.iter_events(conn)]
    store.close()
    return rows


def test_every_controller_folder_in_one_command(db_url, other_url):
    cli = CliRunner(db_url)
    result = cli("import", "--legacy", *FOLDERS, "--workspace", WORKSPACE, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    runs = body["runs"]
    assert [r["run_id"] for r in runs] == _run_ids(FOLDERS)  # in the order given
    assert all(r["status"] == "imported" for r in runs)
    assert all(r["events_imported"] == r["events"] for r in runs)
    assert body["status"] == "imported"
    assert body["events_imported"] == sum(r["events"] for r in runs) == event_count(db_url)
    assert cli("verify").exit_code == 0

    # the same events as one folder per command, in the same order
    single = CliRunner(other_url)
    for folder in FOLDERS:
        one = single("import", "--legacy", folder, "--workspace", WORKSPACE, "--json")
        assert one.exit_code == 0, one.stderr
        assert one.json() == runs[FOLDERS.index(folder)]
    for run_id in _run_ids(FOLDERS):
        assert stream_rows(other_url, run_id) == stream_rows(db_url, run_id)

    again = cli("import", "--legacy", *FOLDERS, "--workspace", WORKSPACE, "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["status"] == "unchanged" and again.json()["events_imported"] == 0
    assert {r["status"] for r in again.json()["runs"]} == {"unchanged"}
    assert event_count(db_url) == body["events_imported"]


def test_folders_as_a_shell_glob_names_them_relative_to_the_workspace(cli, monkeypatch):
    monkeypatch.chdir(WORKSPACE)
    result = cli("import", "--legacy", "optimization/passed", "optimization/reopened")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "imported legacy run passed-001: 5 rounds (KEEP, DISCARD, NOISE, FAIL, KEEP), "
        "23 events, concluded passed\n"
        "imported legacy run reopened-001: 4 rounds (KEEP, DISCARD, FAIL, KEEP), 20 events, "
        "concluded inconclusive, then reopened by rounds 3, 4 (recorded after analyze)\n"
    )
    twice = cli("import", "--legacy", "optimization/passed", "optimization/passed", "--json")
    assert twice.exit_code == 0
    assert [r["status"] for r in twice.json()["runs"]] == ["unchanged", "unchanged"]


def test_the_same_folder_twice_in_one_command_is_imported_once(cli):
    passed = WORKSPACE / "optimization" / "passed"
    result = cli("import", "--legacy", passed, passed, "--workspace", WORKSPACE, "--json")
    assert result.exit_code == 0, result.stderr
    assert [r["status"] for r in result.json()["runs"]] == ["imported", "unchanged"]
    assert event_count(cli.db_url) == 23


def _doctored(tmp_path: Path) -> Path:
    """Self-made: a copy of the workspace whose `passed` folder records round 2 as KEEP."""
    ws = tmp_path / "ws"
    shutil.copytree(WORKSPACE, ws)
    path = ws / "optimization" / "passed" / "rounds.json"
    doc = json.loads(path.read_text())
    doc["rounds"][1]["decision"] = "KEEP"
    path.write_text(json.dumps(doc, indent=2))
    return ws


@pytest.mark.parametrize("where", ["first", "last"])
def test_self_made_one_refused_folder_writes_nothing_of_any(db_url, tmp_path, where):
    ws = _doctored(tmp_path)
    good = [f for f in sorted((ws / "optimization").iterdir()) if f.name != "passed"]
    bad = ws / "optimization" / "passed"
    order = [bad, *good] if where == "first" else [*good, bad]
    cli = CliRunner(db_url)
    refused = cli("import", "--legacy", *order, "--workspace", ws)
    assert refused.exit_code == 2
    assert refused.stderr.startswith(
        f"Error: legacy run 'passed-001' in {bad} was not imported: 1 disagreement with a "
        "replay: (1) round 2: recorded KEEP, but the rules give DISCARD"
    )
    assert refused.stderr.endswith("nothing was written\n") and refused.stderr.count("\n") == 1
    assert refused.stdout == ""
    assert event_count(db_url) == 0
    as_json = cli("import", "--legacy", *order, "--workspace", ws, "--json")
    assert as_json.exit_code == 2
    body = as_json.json()
    assert body["status"] == "error" and body["run_id"] == "passed-001"
    assert body["disagreements"][0].startswith("round 2: recorded KEEP")
    assert event_count(db_url) == 0


def test_a_run_here_with_other_events_is_refused_with_the_whole_command(cli, tmp_path):
    """Self-made: the same run ids in a copy whose kernel paths differ are other events."""
    copy = tmp_path / "copy"
    shutil.copytree(WORKSPACE, copy)
    assert cli("import", "--legacy", WORKSPACE / "optimization" / "passed",
               "--workspace", WORKSPACE).exit_code == 0  # fmt: skip
    other = copy / "optimization" / "passed"
    refused = cli(
        "import", "--legacy", copy / "optimization" / "reopened", other, "--workspace", copy
    )
    assert refused.exit_code == 2
    assert refused.stderr.startswith(
        "Error: run 'passed-001' is already in this ledger with different content at version 1"
    )
    assert refused.stderr.endswith(f"in the folder {other}); nothing was imported\n")
    assert event_count(cli.db_url) == 23  # reopened-001 was not imported either


def test_a_folder_that_holds_run_folders_is_named_with_them(cli):
    parent = WORKSPACE / "optimization"
    refused = cli("import", "--legacy", parent, "--workspace", WORKSPACE)
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"Error: --legacy {parent} is not a run folder (no optimization-config.json); it "
        f"holds 9 run folders (analyzed-at-plan, diagnosis, exhausted, ...): name them, as "
        f"in --legacy {parent}/*\n"
    )
    plain = cli("import", "--legacy", WORKSPACE / "kernels")
    assert plain.stderr == (
        f"Error: --legacy {WORKSPACE / 'kernels'} is not a run folder: it has no "
        "optimization-config.json\n"
    )


def test_progress_is_told_after_each_folder_written(sqlite_url):
    told: list[tuple[int, int]] = []
    store = Store(sqlite_url)
    legacy.import_legacies(
        store, FOLDERS[:3], workspace=WORKSPACE, on_progress=lambda *a: told.append(a)
    )
    store.close()
    assert told == [(1, 3), (2, 3), (3, 3)]


# --- a folder that goes on after it was imported ------------------------------------------


def _continued(cli, other_url, folder: Path, workspace: Path, go_on) -> None:
    """Import `folder`, let the campaign go on (`go_on`), import it again: the events stored
    stay as they are, and the folder's new events follow them, decided as a fresh import of
    the folder decides them. Each round keeps the `rounds.json` it was read from: the file
    of the first import for the rounds it held, the grown file for the new ones."""
    first = cli("import", "--legacy", folder, "--workspace", workspace, "--json")
    assert first.exit_code == 0, first.stderr
    before = first.json()
    run_id = before["run_id"]
    kept = stream_rows(cli.db_url, run_id)
    go_on()
    again = cli("import", "--legacy", folder, "--workspace", workspace, "--json")
    assert again.exit_code == 0, again.stderr
    after = again.json()
    assert after["status"] == "imported" and after["rounds"] > before["rounds"]
    assert after["events_imported"] == after["events"] - before["events"] > 0
    rows = stream_rows(cli.db_url, run_id)
    assert rows[: len(kept)] == kept
    fresh = CliRunner(other_url)
    assert fresh("import", "--legacy", folder, "--workspace", workspace).exit_code == 0
    new = [row[2:6] for row in rows[len(kept) :]]  # version, type, schema, time, payload
    assert new == [row[2:6] for row in stream_rows(other_url, run_id)[len(kept) :]]
    for ledger in (cli, fresh):
        assert ledger("verify").exit_code == 0
    history = cli("history", "--run", run_id, "--json").json()["rounds"]
    assert [h["decision"] for h in history] == after["decisions"]
    status = cli("status", "--run", run_id, "--json").json()["run"]
    assert status == fresh("status", "--run", run_id, "--json").json()["run"]
    text = cli("import", "--legacy", folder, "--workspace", workspace)
    assert text.stdout == f"legacy run {run_id} is already in the ledger; nothing to import\n"
    assert len(stream_rows(cli.db_url, run_id)) == after["events"]


@pytest.mark.skipif(
    not kit.reference_available(), reason=f"no reference controller at {kit.REFERENCE}"
)
@pytest.mark.parametrize("analyzed", [False, True], ids=["running", "analyzed-then-reopened"])
def test_a_controller_folder_that_went_on_adds_its_new_rounds(cli, other_url, tmp_path, analyzed):
    ws = kit.Workspace.create(tmp_path / "ws")
    sc = kit.Scenario(
        "goes-on",
        [("a", 1.0), ("b", 2.0)],
        [20.0, 40.0],
        [kit.Round([19.0, 39.0]), kit.Round([19.5, 38.0]), kit.Round([18.0, 36.0])],
        analyze_after=[2] if analyzed else [],
    )
    kit.run_scenario(ws, sc, stop=2)
    if analyzed:
        ws.controller("analyze", "--output-dir", sc.folder)
        sc.analyze_after = []
    _continued(
        cli, other_url, ws.root / sc.folder, ws.root, lambda: kit.run_scenario(ws, sc, start=3)
    )
    history = cli("history", "--run", sc.run_id, "--json").json()["rounds"]
    assert len(history) == 3
    assert (["reopened"] in [h["flags"] for h in history]) is analyzed


def test_self_made_a_drop_in_folder_that_went_on_adds_its_new_rounds(
    cli, other_url, tmp_path, monkeypatch
):
    """The drop-in writes its folders as the controller does, from its own ledger."""
    from benchmarks.campaign_files import FileCampaign
    from cli import triton_optimization as drop_in

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{tmp_path / 'drop-in.sqlite3'}")
    campaign = FileCampaign(tmp_path / "inputs", "softmax-goes-on-001")
    folder = tmp_path / "optimization" / "softmax-goes-on-001"
    drop_in.plan(folder, config_path=campaign.config())

    def rounds(count: int) -> None:
        for _ in range(count):
            path, medians = campaign.next_round()
            campaign.recorded(drop_in.record(folder, result_path=path)["decision"], medians)

    rounds(2)
    _continued(cli, other_url, folder, tmp_path, lambda: rounds(3))


def _drop_in_run(tmp_path: Path, monkeypatch, rounds: int) -> tuple[Path, str]:
    """Self-made: a run planned and recorded by the drop-in; its folder and ledger URL."""
    from benchmarks.campaign_files import FileCampaign
    from cli import triton_optimization as drop_in

    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'drop-in.sqlite3'}"
    monkeypatch.setenv("KERNEL_LEDGER_DB", url)
    campaign = FileCampaign(tmp_path / "inputs", "softmax-drop-in-001")
    folder = tmp_path / "optimization" / "softmax-drop-in-001"
    drop_in.plan(folder, config_path=campaign.config())
    for _ in range(rounds):
        path, medians = campaign.next_round()
        campaign.recorded(drop_in.record(folder, result_path=path)["decision"], medians)
    return folder, url


def test_self_made_a_drop_in_folder_imports_into_its_own_ledger_unchanged(tmp_path, monkeypatch):
    """The drop-in's events read other files than an import would (the round's own result,
    the configuration it was given, paths as written), at the same instants: the run is the
    folder's, so importing the folder writes nothing."""
    folder, url = _drop_in_run(tmp_path, monkeypatch, rounds=3)
    before = stream_rows(url, "softmax-drop-in-001")
    result = CliRunner(url)("import", "--legacy", folder, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["status"] == "unchanged" and result.json()["events_imported"] == 0
    assert stream_rows(url, "softmax-drop-in-001") == before


@pytest.mark.parametrize("what", ["hypothesis", "median", "time"])
def test_self_made_a_drop_in_folder_rewritten_since_does_not_import(tmp_path, monkeypatch, what):
    """A round of the folder that is not the round the drop-in recorded (its text, a
    measurement, its time) is another run's history: refused, nothing written."""
    folder, url = _drop_in_run(tmp_path, monkeypatch, rounds=2)
    path = folder / "rounds.json"
    rounds = json.loads(path.read_text())
    first = rounds["rounds"][0]
    if what == "hypothesis":
        first["hypothesis"] += " (edited)"
    elif what == "median":
        first["measurements"][0]["median_us"] += 0.001
    else:
        first["recorded_at"] = "2020-01-01T00:00:00Z"
    path.write_text(json.dumps(rounds, indent=2))
    before = stream_rows(url, "softmax-drop-in-001")
    refused = CliRunner(url)("import", "--legacy", folder)
    assert refused.exit_code == 2, refused.stdout
    assert refused.stderr.count("\n") == 1 and "; nothing was " in refused.stderr
    assert stream_rows(url, "softmax-drop-in-001") == before


def test_a_bulk_import_leaves_the_schema_and_sound_indexes(tmp_path):
    import sqlite3

    fresh, path = tmp_path / "fresh.sqlite3", tmp_path / "bulk.sqlite3"
    Store(f"sqlite:///{fresh}").close()
    result = CliRunner(f"sqlite:///{path}")(
        "import", "--legacy", *FOLDERS, "--workspace", WORKSPACE
    )
    assert result.exit_code == 0, result.stderr
    with sqlite3.connect(path) as conn, sqlite3.connect(fresh) as empty:
        schema = "SELECT type, name, sql FROM sqlite_master ORDER BY 2"
        assert conn.execute(schema).fetchall() == empty.execute(schema).fetchall()
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert [row[1] for row in _seqs(f"sqlite:///{path}")][:1] == _run_ids(FOLDERS)[:1]
