"""import --legacy: run folders of the JSON-file controller, replayed and re-decided.

The fixtures under tests/fixtures/legacy/ are written by generate.py there, which models the
existing controller on its own (it does not use kernel-ledger)."""

from __future__ import annotations

import filecmp
import json
import shutil
import sys
from pathlib import Path

import audit_kit
import pytest

from ledger.store.eventstore import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "legacy"
RUN_ID = "legacy-softmax-001"
event_count = audit_kit.event_count


def _generator():
    sys.path.insert(0, str(FIXTURES))
    try:
        import generate
    finally:
        sys.path.remove(str(FIXTURES))
    return generate


def _same_tree(left: Path, right: Path) -> list[str]:
    compared = filecmp.dircmp(left, right)
    problems = [
        *compared.left_only,
        *compared.right_only,
        *compared.diff_files,
        *compared.funny_files,
    ]
    for name in compared.common_dirs:
        problems += _same_tree(left / name, right / name)
    return problems


def test_the_committed_fixtures_are_what_the_generator_writes(tmp_path):
    folders = _generator().generate(tmp_path)
    for folder in folders:
        committed = FIXTURES / folder.name
        assert committed.is_dir(), f"run python {FIXTURES / 'generate.py'}"
        _, mismatch, errors = filecmp.cmpfiles(
            folder, committed, ["optimization-config.json", "state.json", "rounds.json"]
        )
        assert mismatch == [] and errors == []
        assert _same_tree(folder, committed) == []


def test_a_good_folder_imports_verifies_and_passes_the_gate(cli):
    result = cli(
        "import", "--legacy", FIXTURES / "good", "--workspace", FIXTURES / "good", "--json"
    )
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["status"] == "imported" and body["run_id"] == RUN_ID
    assert body["decisions"] == ["KEEP", "DISCARD", "NOISE", "FAIL", "KEEP"]
    assert body["concluded"] is True and body["conclusion"] == "passed"
    state = json.loads((FIXTURES / "good" / "state.json").read_text())
    assert body["best_kernel_sha256"] == state["current_best_sha256"]
    assert set(body["legacy_files"]) == {
        "optimization-config.json",
        "state.json",
        "rounds.json",
        "manifest.json",
        "analysis.json",
    }
    assert cli("verify").exit_code == 0
    again = cli("import", "--legacy", FIXTURES / "good", "--workspace", FIXTURES / "good", "--json")
    assert again.exit_code == 0 and again.json()["status"] == "unchanged"
    assert event_count(cli.db_url) == body["events"] == 24
    status = cli("status", "--run", RUN_ID, "--json").json()["run"]
    assert status["conclusion"] == "passed" and status["kept_rounds"] == 2
    history = cli("history", "--run", RUN_ID, "--json").json()["rounds"]
    assert [r["recorded_at"][:16] for r in history] == [
        f"2026-10-01T{hour:02d}:30" for hour in range(9, 14)
    ]
    kernel = FIXTURES / "good" / state["current_best_path"]
    gate = cli("check-merge", "--run", RUN_ID, "--kernel", kernel, "--strict-artifacts", "--json")
    assert gate.exit_code == 0, gate.stdout


def test_an_unfinished_folder_imports_without_a_conclusion(cli):
    result = cli(
        "import",
        "--legacy",
        FIXTURES / "in-progress",
        "--workspace",
        FIXTURES / "in-progress",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["concluded"] is False and body["decisions"] == ["KEEP", "DISCARD"]
    assert cli("verify").exit_code == 0
    status = cli("status", "--run", RUN_ID, "--json").json()["run"]
    assert status["status"] == "active" and status["rounds_recorded"] == 2


@pytest.mark.parametrize(
    ("folder", "disagreement"),
    [
        ("doctored", "round 2: recorded KEEP, but the rules give DISCARD"),
        ("broken-parent", "broken parent chain: round 3 names parent"),
    ],
)
def test_a_folder_that_disagrees_with_the_replay_is_refused(cli, folder, disagreement):
    result = cli(
        "import", "--legacy", FIXTURES / folder, "--workspace", FIXTURES / folder, "--json"
    )
    assert result.exit_code == 2
    body = result.json()
    assert body["status"] == "error" and body["exit_code"] == 2
    assert len(body["disagreements"]) == 1
    assert body["disagreements"][0].startswith(disagreement)
    assert "nothing was written" in body["error"]
    assert result.stderr.startswith(f"Error: legacy run '{RUN_ID}'")
    assert len(result.stderr.splitlines()) == 1
    assert event_count(cli.db_url) == 0
    plain = cli("import", "--legacy", FIXTURES / folder, "--workspace", FIXTURES / folder)
    assert plain.exit_code == 2 and disagreement in plain.stderr


def _copy(tmp_path: Path, name: str = "good") -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def _edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=2))


def test_every_disagreement_is_reported(sqlite_url, tmp_path):
    from ledger.legacy import LegacyRejected, import_legacy

    folder = _copy(tmp_path)

    def doctor(doc):
        doc["rounds"][0]["relative_improvement_vs_current"] += 0.01
        doc["rounds"][2]["decision"] = "KEEP"

    _edit(folder / "rounds.json", doctor)
    _edit(folder / "state.json", lambda s: s.update(consecutive_failures=7))
    _edit(folder / "analysis.json", lambda a: a.update(status="failed"))
    store = Store(sqlite_url)
    with pytest.raises(LegacyRejected) as info:
        import_legacy(store, folder, workspace=folder)
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
    ],
)
def test_broken_folders_are_refused_with_one_line(cli, tmp_path, damage, message):
    folder = _copy(tmp_path)
    if damage == "missing-kernel":
        (folder / "kernels" / "r3.py").unlink()
    elif damage == "changed-kernel":
        (folder / "kernels" / "r3.py").write_text("# edited after the round\n")
    elif damage == "missing-state":
        (folder / "state.json").unlink()
    elif damage == "bad-time":
        _edit(folder / "rounds.json", lambda d: d["rounds"][1].update(recorded_at="yesterday"))
    result = cli("import", "--legacy", folder, "--workspace", folder, "--json")
    assert result.exit_code == 2
    assert message in result.json()["error"]
    assert event_count(cli.db_url) == 0


def test_import_needs_exactly_one_source(cli, tmp_path):
    assert cli("import").exit_code == 2
    both = cli("import", tmp_path / "x.jsonl", "--legacy", FIXTURES / "good", "--json")
    assert both.exit_code == 2 and "either a bundle FILE or --legacy DIR" in both.json()["error"]
    assert cli("import", "--legacy", tmp_path / "nowhere").exit_code == 2
