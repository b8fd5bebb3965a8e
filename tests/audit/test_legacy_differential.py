"""Differential: the JSON-file controller itself against kernel-ledger, on generated
campaigns laid out as an agent's workspace (relative paths, run from the workspace root).

For each scenario the controller plans, records and analyzes (sometimes recording after
analyze); then (a) `import --legacy` of its folder must give its decisions, best kernel and
final status, and (b) kernel-ledger's own plan/record/analyze on the same files, from the
same workspace, must decide every round as the controller did. Skips only where the
reference controller (../shared/reference/vllm-ascend-workspace) is absent."""

from __future__ import annotations

import json
from pathlib import Path

import legacy_kit as kit
import pytest

from ledger.core.stats import MEDIANS_ONLY
from ledger.services.legacy import import_legacy
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

pytestmark = pytest.mark.skipif(
    not kit.reference_available(), reason=f"no reference controller at {kit.REFERENCE}"
)
SEEDS = range(16)


SPREAD = kit.Scenario(  # raw samples so spread that the noise-aware rule would not KEEP
    "spread",
    [("a", 1.0), ("b", 2.0)],
    [20.0, 40.0],
    [kit.Round([18.0, 36.0], samples=True)],
    baseline_samples=True,
)


LOGS = kit.Scenario(  # sources that are benchmark logs, not samples: kept, never read
    "logs",
    [("a", 1.0), ("b", 2.0)],
    [20.0, 40.0],
    [kit.Round([18.0, 36.0], sources=[0, 1], logs=[0]), kit.Round([17.5, 35.0], [1], logs=[1])],
    baseline_sources=[1],
    baseline_logs=[1],
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> tuple[kit.Workspace, list[kit.Scenario]]:
    ws = kit.Workspace.create(tmp_path_factory.mktemp("controller-ws"))
    scenarios = [kit.random_scenario(seed) for seed in SEEDS] + [SPREAD, LOGS]
    for scenario in scenarios:
        kit.run_scenario(ws, scenario)
    return ws, scenarios


def _load(folder: Path, name: str) -> dict:
    return json.loads((folder / name).read_text())


def test_the_scenarios_cover_every_shape(workspace):
    ws, scenarios = workspace
    decisions = set()
    reopened = analyzed = absent = spread = 0
    for sc in scenarios:
        folder = ws.root / sc.folder
        rounds = _load(folder, "rounds.json")["rounds"]
        decisions |= {r["decision"] for r in rounds}
        if (folder / "analysis.json").exists():
            analyzed += 1
            reopened += _load(folder, "analysis.json")["round_count"] < len(rounds)
        absent += any(r.absent for r in sc.rounds) or bool(sc.baseline_absent)
        spread += sc.baseline_samples and any(r.samples for r in sc.rounds)
    assert decisions == {"KEEP", "DISCARD", "NOISE", "FAIL"}
    assert reopened and analyzed < len(scenarios) and absent and spread


@pytest.mark.parametrize("seed", [*SEEDS, len(SEEDS)])
def test_import_agrees_with_the_controller(workspace, sqlite_url, seed):
    ws, scenarios = workspace
    sc = scenarios[seed]
    folder = ws.root / sc.folder
    store = Store(sqlite_url, create=True)
    try:
        result = import_legacy(store, folder, workspace=ws.root)
    finally:
        store.close()
    rounds = _load(folder, "rounds.json")["rounds"]
    state = _load(folder, "state.json")
    manifest = _load(folder, "manifest.json")
    assert result.decisions == [r["decision"] for r in rounds]
    assert result.best_kernel_sha256 == state["current_best_sha256"]
    terminal = manifest["status"] in ("passed", "failed", "inconclusive")
    assert result.conclusion == (manifest["status"] if terminal else None)
    assert result.concluded == (terminal and not result.reopened_rounds)
    if (folder / "analysis.json").exists() and not result.reopened_rounds:
        analysis = _load(folder, "analysis.json")
        assert analysis["status"] == result.conclusion
        assert analysis["best_kernel"]["sha256"] == result.best_kernel_sha256


@pytest.mark.parametrize("seed", [*SEEDS, len(SEEDS)])
def test_plan_and_record_from_the_workspace_agree_with_the_controller(
    workspace, sqlite_url, seed, monkeypatch
):
    ws, scenarios = workspace
    sc = scenarios[seed]
    monkeypatch.chdir(ws.root)  # as agents run it: from the workspace root, relative paths
    steps = [c for c in ws.log if c["command"][5] == sc.folder]
    store = Store(sqlite_url, create=True)
    service = LedgerService(store)
    try:
        for step in steps:
            action, out = step["command"][3], step["stdout"]
            if action == "plan":
                # on the medians, as the controller decides (it never reads raw samples)
                planned = service.plan(Path(step["command"][7]), statistics=MEDIANS_ONLY)
                assert planned.kernel_sha256 == out["kernel_sha256"]
            elif action == "record":
                if service.view(sc.run_id).concluded:
                    break  # kernel-ledger's own record refuses a concluded run
                recorded = service.record(sc.run_id, Path(step["command"][7]))
                assert (recorded.round, recorded.decision) == (out["round"], out["decision"])
                assert recorded.target_met == out["target_met"]
                assert recorded.needs_diagnosis == out["needs_diagnosis"]
                assert recorded.remaining_rounds == out["remaining_rounds"]
            elif step["exit"] == 0:
                view = service.conclude(sc.run_id)
                assert view.run.conclusion == out["status"]
                assert view.run.best_kernel_sha256 == out["best_kernel_sha256"]
    finally:
        store.close()


REANALYZED = kit.Scenario(  # analyze, one more round (target met), analyze again (refused)
    "reanalyzed-late",
    [("a", 1.0), ("b", 2.0)],
    [20.0, 40.0],
    [kit.Round([19.0, 39.0]), kit.Round([19.5, 38.0]), kit.Round([18.0, 36.0])],
    analyze_after=[2, 3],
)
REWRITTEN = (
    "analysis.json was rewritten by an analyze after round 3 that the controller refused "
    "(manifest.json stayed inconclusive from an earlier analyze); the run concluded at that "
    "earlier analyze and was reopened"
)


def _reanalyzed(tmp_path: Path) -> tuple[kit.Workspace, Path]:
    ws = kit.Workspace.create(tmp_path / "ws")
    steps = kit.run_scenario(ws, REANALYZED)
    assert [s["status"] for s in steps[-3:]] == ["inconclusive", "recorded", "failed"]
    folder = ws.root / REANALYZED.folder
    assert _load(folder, "analysis.json")["status"] == "passed"
    return ws, folder


def _imported(url: str, folder: Path, ws: kit.Workspace):
    store = Store(url, create=True)
    try:
        return import_legacy(store, folder, workspace=ws.root)
    finally:
        store.close()


def test_a_refused_second_analyze_imports_at_the_manifests_conclusion(tmp_path, sqlite_url):
    """Whichever seconds the controller's clock gave the steps, the run concluded where the
    manifest says (inconclusive) and the last round reopened it."""
    ws, folder = _reanalyzed(tmp_path)
    result = _imported(sqlite_url, folder, ws)
    assert result.decisions == [r["decision"] for r in _load(folder, "rounds.json")["rounds"]]
    assert result.conclusion == "inconclusive" and 3 in result.reopened_rounds
    assert result.notes == [REWRITTEN]


def test_self_made_rounds_in_the_second_of_the_refused_analyze_import(tmp_path, sqlite_url):
    """The same folder with its last two rounds recorded in the second the manifest was
    concluded (the controller's times have whole seconds): the analyze may have come
    before either of them, and the import finds where the folder agrees."""
    ws, folder = _reanalyzed(tmp_path)
    until = _load(folder, "manifest.json")["updated_at"]
    doc = _load(folder, "rounds.json")
    for entry in doc["rounds"][1:]:
        entry["recorded_at"] = until
    (folder / "rounds.json").write_text(json.dumps(doc, indent=2))
    result = _imported(sqlite_url, folder, ws)
    assert result.conclusion == "inconclusive" and result.reopened_rounds[-1] == 3
    assert result.notes == [REWRITTEN]


def _rounds_done(sc: kit.Scenario) -> int:
    return min(len(sc.rounds), sc.max_rounds)


# the first generated campaigns of two rounds or more: one can go on after an import
GOING_ON = [s for s in range(100) if _rounds_done(kit.random_scenario(s)) >= 2][:8]


@pytest.mark.parametrize("seed", GOING_ON)
def test_a_folder_imported_while_the_controller_went_on_imports_again(tmp_path, sqlite_url, seed):
    """Import the folder part-way (a random round), let the controller record the rest
    (and analyze, as the scenario says), import again: the ledger's run then decides,
    concludes and counts as a fresh import of the whole folder, and verifies."""
    import random

    from ledger.integrity.verify import verify_ledger

    sc = kit.random_scenario(seed)
    part = random.Random(seed).randint(1, _rounds_done(sc) - 1)
    ws = kit.Workspace.create(tmp_path / "ws")
    kit.run_scenario(ws, sc, stop=part)
    folder = ws.root / sc.folder
    first = _imported(sqlite_url, folder, ws)
    kit.run_scenario(ws, sc, start=part + 1)
    again = _imported(sqlite_url, folder, ws)
    fresh = _imported(f"sqlite:///{tmp_path / 'fresh.sqlite3'}", folder, ws)
    assert again.events_imported == again.events - first.events > 0
    assert (again.decisions, again.conclusion, again.reopened_rounds, again.events) == (
        fresh.decisions,
        fresh.conclusion,
        fresh.reopened_rounds,
        fresh.events,
    )
    store = Store(sqlite_url)
    try:
        assert verify_ledger(store).ok
    finally:
        store.close()
