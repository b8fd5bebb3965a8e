"""triton-optimization on its own (no controller needed): the module API and command line,
the run folder it keeps, and what each step leaves in the ledger."""

from __future__ import annotations

import errno
import io
import json
import os
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from cli import triton_optimization as dropin
from ledger.core.events import RoundDecided, RunPlanned, RunReopened
from ledger.core.stats import MEDIANS_ONLY
from ledger.integrity.verify import verify_ledger
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

from campaign import Campaign, write_json

NOW = "2026-11-02T12:00:00Z"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch) -> tuple[Campaign, Path]:
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    return Campaign(tmp_path / "campaign"), tmp_path / "runs" / "softmax"


def events(db: Path, run_id: str = "softmax-t-001") -> list:
    store = Store(f"sqlite:///{db}")
    try:
        return [e.event() for e in LedgerService(store).stream(run_id)]
    finally:
        store.close()


def read(folder: Path, name: str):
    return json.loads((folder / name).read_text())


def cli(*args: str) -> tuple[int, dict]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = dropin.main([str(a) for a in args])
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, out.getvalue()
    return code, json.loads(lines[0])


def test_the_lifecycle_through_the_module_api(setup) -> None:
    campaign, folder = setup
    planned = dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    assert planned == {
        "status": "planned",
        "run_id": campaign.run_id,
        "kernel_sha256": planned["kernel_sha256"],
        "case_count": 3,
    }
    assert sorted(p.name for p in folder.iterdir()) == [
        "manifest.json",
        "optimization-config.json",
        "round-artifacts",
        "rounds.json",
        "state.json",
    ]
    assert read(folder, "manifest.json")["status"] == "planned"
    recorded = dropin.record(
        folder, result_path=campaign.round([15.0, 35.0, 22.0]), recorded_at=NOW
    )
    assert recorded == {
        "status": "recorded",
        "round": 1,
        "decision": "KEEP",
        "target_met": True,
        "needs_diagnosis": False,
        "remaining_rounds": 9,
    }
    state = read(folder, "state.json")
    assert state["next_round"] == 2 and state["kept_rounds"] == [1]
    assert read(folder, "manifest.json")["status"] == "running"
    analyzed = dropin.analyze(folder, updated_at=NOW)
    assert analyzed["status"] == "passed"
    assert analyzed["analysis"] == str((folder / "analysis.json").resolve())
    manifest = read(folder, "manifest.json")
    assert manifest["status"] == "passed"
    assert [a["name"] for a in manifest["artifacts"]][-2:] == ["analysis", "report"]
    assert "- Status: **passed**" in (folder / "report.md").read_text()
    # every step is in the ledger beside the folder, at the step's time
    db = folder.parent / "ledger.sqlite3"
    kinds = [type(e).__name__ for e in events(db)]
    assert kinds[0] == "RunPlanned" and kinds[-1] == "RunConcluded"


def test_a_rejection_raises_optimization_error_and_writes_nothing(setup) -> None:
    campaign, folder = setup
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    stale = campaign.round([15.0, 35.0, 22.0], parent_sha="0" * 64)
    with pytest.raises(dropin.OptimizationError, match="current best"):
        dropin.record(folder, result_path=stale, recorded_at=NOW)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert len(events(folder.parent / "ledger.sqlite3")) == 3  # the plan's


def test_the_command_line_prints_one_json_line(setup) -> None:
    campaign, folder = setup
    code, out = cli("plan", "--output-dir", folder, "--config", campaign.config())
    assert code == 0 and out["status"] == "planned"
    code, out = cli("plan", "--output-dir", folder, "--config", campaign.config())
    assert code == 1 and out["status"] == "failed" and "not empty" in out["error"]
    code, out = cli("record", "--output-dir", folder, "--result", "nowhere.json")
    assert code == 1 and set(out) == {"status", "error"} and "nowhere.json" in out["error"]
    with pytest.raises(SystemExit) as usage:
        dropin.main(["record", "--output-dir", str(folder)])
    assert usage.value.code == 2  # argparse, as the controller's


def test_record_after_analyze_reopens_the_run(setup) -> None:
    campaign, folder = setup
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    first = dropin.record(folder, result_path=campaign.round([18.1, 40.0, 25.0]), recorded_at=NOW)
    campaign.accepted(first["decision"], 1)
    assert dropin.analyze(folder, updated_at=NOW)["status"] == "inconclusive"
    again = dropin.record(folder, result_path=campaign.round([15.0, 35.0, 22.0]), recorded_at=NOW)
    assert again["decision"] == "KEEP" and again["round"] == 2
    db = folder.parent / "ledger.sqlite3"
    stream = events(db)
    reopened = [e for e in stream if isinstance(e, RunReopened)]
    assert reopened == [
        RunReopened(conclusion="inconclusive", round=2, reason=dropin.REOPEN_REASON)
    ]
    assert isinstance(stream[-1], RoundDecided) and stream[-1].round == 2
    # the manifest stays terminal, as the controller leaves it; a second analyze is refused
    assert read(folder, "manifest.json")["status"] == "inconclusive"
    with pytest.raises(dropin.RunManifestError, match="analysis"):
        dropin.analyze(folder, updated_at=NOW)
    assert read(folder, "analysis.json")["status"] == "passed"  # rewritten before the refusal
    store = Store(f"sqlite:///{db}")
    try:
        assert verify_ledger(store).ok
        view = LedgerService(store).view(campaign.run_id)
        assert (view.run.status, view.run.conclusion) == ("active", None)
    finally:
        store.close()


def test_decisions_are_on_the_medians_whatever_the_samples(setup) -> None:
    campaign, folder = setup
    doc = campaign.config_doc()
    for row in doc["baseline"]:
        row["samples_us"] = [row["median_us"]] * 30
    dropin.plan(folder, config_path=write_json(campaign.root / "c.json", doc), created_at=NOW)
    result = campaign.round_doc([15.0, 35.0, 22.0])
    for row in result["measurements"]:
        row["samples_us"] = [row["median_us"]] * 30
    path = write_json(campaign.root / "r1.json", result)
    assert dropin.record(folder, result_path=path, recorded_at=NOW)["decision"] == "KEEP"
    stream = events(folder.parent / "ledger.sqlite3")
    assert isinstance(stream[0], RunPlanned)
    assert stream[0].statistics["min_samples"] == MEDIANS_ONLY["min_samples"]
    assert stream[-1].evidence == "medians" and stream[-1].statistics is None
    # the samples are kept, raw
    assert read(folder, "rounds.json")["rounds"][0]["measurements"][0]["samples_us"] == [15.0] * 30


def test_the_ledger_is_kernel_ledger_db_when_set(setup, monkeypatch, tmp_path) -> None:
    campaign, folder = setup
    db = tmp_path / "shared.sqlite3"
    monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{db}")
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    assert db.exists() and not (folder.parent / "ledger.sqlite3").exists()
    # a folder whose run another ledger does not hold yet is imported into it first
    other = tmp_path / "other.sqlite3"
    monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{other}")
    dropin.record(folder, result_path=campaign.round([15.0, 35.0, 22.0]), recorded_at=NOW)
    assert isinstance(events(other)[0], RunPlanned)
    assert len(events(other)) == len(events(db)) + 4


def test_a_folder_that_does_not_import_is_refused(setup, monkeypatch, tmp_path) -> None:
    campaign, folder = setup
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    (folder / "manifest.json").unlink()
    monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{tmp_path / 'other.sqlite3'}")
    with pytest.raises(dropin.OptimizationError, match=r"not in the ledger.*does not import"):
        dropin.analyze(folder, updated_at=NOW)


def test_a_folder_that_disagrees_with_the_ledger_is_refused(setup) -> None:
    campaign, folder = setup
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    state = read(folder, "state.json")
    write_json(folder / "state.json", {**state, "next_round": 4})
    with pytest.raises(dropin.OptimizationError, match="disagree"):
        dropin.record(folder, result_path=campaign.round([15.0, 35.0, 22.0]), recorded_at=NOW)


def test_a_run_id_a_manifest_cannot_carry_is_refused_before_the_ledger(setup) -> None:
    campaign, folder = setup
    # refused by the run id pattern of the configuration, which is the manifest's
    with pytest.raises((dropin.RunManifestError, dropin.OptimizationError), match="run_id"):
        dropin.plan(folder, config_path=campaign.config(run_id="Softmax_T"), created_at=NOW)
    assert not folder.exists()
    store = Store(f"sqlite:///{folder.parent / 'ledger.sqlite3'}")
    try:
        with store.transaction() as conn:
            assert store.event_count(conn) == 0
    finally:
        store.close()


def _full_disk(monkeypatch, name: str) -> None:
    """Staging `name` fails as on a full disk."""
    stage = dropin._Staged.json

    def json(self, staged: str, value) -> None:
        if staged == name:
            raise OSError(errno.ENOSPC, "No space left on device")
        stage(self, staged, value)

    monkeypatch.setattr(dropin._Staged, "json", json)


def test_a_folder_that_cannot_take_the_files_refuses_the_step(setup, monkeypatch) -> None:
    campaign, folder = setup
    db = folder.parent / "ledger.sqlite3"
    with monkeypatch.context() as patched:
        _full_disk(patched, "manifest.json")
        code, out = cli("plan", "--output-dir", folder, "--config", campaign.config())
    assert code == 1 and "No space left" in out["error"]
    assert not folder.exists()  # nothing left behind: a new plan may use the folder
    assert events(db) == []
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    with monkeypatch.context() as patched:
        _full_disk(patched, "state.json")
        code, out = cli("record", "--output-dir", folder, "--result", campaign.round([15, 35, 22]))
    assert code == 1 and "No space left" in out["error"]
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert len(events(db)) == 3  # the plan's; the round can be recorded again
    assert dropin.record(folder, result_path=campaign.round([15, 35, 22]))["decision"] == "KEEP"


def test_a_folder_file_that_is_a_fifo_is_refused_without_blocking(setup) -> None:
    """A FIFO in place of state.json or manifest.json is refused at once (exit 1, the
    controller's failed JSON), never read until a writer appears; nothing is appended."""
    campaign, folder = setup
    db = folder.parent / "ledger.sqlite3"
    dropin.plan(folder, config_path=campaign.config(), created_at=NOW)
    for name in ("state.json", "manifest.json"):
        saved = (folder / name).read_bytes()
        (folder / name).unlink()
        os.mkfifo(folder / name)
        code, out = cli("record", "--output-dir", folder, "--result", campaign.round([15, 35, 22]))
        assert code == 1 and "not a regular file" in out["error"], out
        assert len(events(db)) == 3
        (folder / name).unlink()
        (folder / name).write_bytes(saved)


def test_run_folder_files_are_the_owners_alone_as_the_controllers(setup) -> None:
    campaign, folder = setup
    assert cli("plan", "--output-dir", folder, "--config", campaign.config())[0] == 0
    assert cli("record", "--output-dir", folder, "--result", campaign.round([16, 37, 23]))[0] == 0
    assert cli("analyze", "--output-dir", folder)[0] == 0
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir() if p.is_file()}
    assert set(modes) >= {
        "optimization-config.json",
        "state.json",
        "rounds.json",
        "manifest.json",
        "analysis.json",
        "report.md",
    }
    assert set(modes.values()) == {0o600}, modes


def _python(tmp_path: Path, *args: str, isolated: bool = False) -> tuple[int, str, str]:
    import subprocess
    import sys

    flags = ["-I", "-S"] if isolated else []
    done = subprocess.run(
        [sys.executable, *flags, *args], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def test_the_wrapper_in_a_python_without_kernel_ledger_answers_json(tmp_path: Path) -> None:
    from controller_kit import WRAPPER

    script = tmp_path / "triton_optimization.py"
    script.write_text(WRAPPER)
    code, out, err = _python(tmp_path, str(script), "analyze", "--output-dir", "x", isolated=True)
    assert (code, err) == (1, "")
    assert json.loads(out) == {
        "status": "failed",
        "error": "kernel-ledger is not installed: No module named 'cli'",
    }


def test_a_missing_dependency_answers_the_controllers_json_not_a_traceback(tmp_path) -> None:
    program = (
        "import sys; sys.modules['sqlalchemy'] = None\n"
        "from cli.triton_optimization import main\n"
        "sys.exit(main(['plan', '--output-dir', 'runs/x', '--config', 'c.json']))\n"
    )
    code, out, err = _python(tmp_path, "-c", program)
    assert (code, err) == (1, "")
    doc = json.loads(out)
    assert doc["status"] == "failed"
    assert doc["error"].startswith("kernel-ledger is not installed in this Python (")
    assert doc["error"].endswith(
        "): module 'sqlalchemy' is missing; install it (pip install kernel-ledger's folder, "
        "or activate its .venv) and retry"
    )
