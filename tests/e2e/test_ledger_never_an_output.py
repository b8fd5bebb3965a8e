"""The ledger's files are never an output (issue 31, point 1): every write the product
makes goes through one guard (`ledger.files.refuse_ledger`) that knows every SQLite ledger
the process opened, so no caller can forget to pass it. The reproductions: the drop-in's
run folder beside (or around) its ledger, a folder file that links to the ledger, and a
link made after an output was staged."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from test_triton_optimization_ledger import cli as _main

from ledger import files
from ledger.errors import InputError
from ledger.integrity.verify import verify_ledger
from ledger.store.eventstore import Store

from campaign import Campaign


def _event_count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT count(*) FROM events").fetchone()
    conn.close()
    return count


def _verifies(db: Path) -> bool:
    store = Store(f"sqlite:///{db}")
    try:
        return verify_ledger(store).ok
    finally:
        store.close()


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch) -> tuple[Campaign, Path]:
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    return Campaign(tmp_path / "campaign"), tmp_path / "runs" / "softmax"


@pytest.mark.parametrize("name", ["state.json", "ledger.sqlite3", "round-artifacts/l.sqlite3"])
def test_plan_refuses_a_ledger_inside_its_run_folder(workspace, monkeypatch, name) -> None:
    campaign, folder = workspace
    monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{folder / name}")
    code, out = _main("plan", "--output-dir", folder, "--config", campaign.config())
    assert code == 1
    assert out["status"] == "failed"
    assert "is inside the run folder" in out["error"]
    assert not folder.exists()  # nothing created: no ledger, no folder


def test_plan_beside_the_folder_still_works(workspace) -> None:
    campaign, folder = workspace
    code, out = _main("plan", "--output-dir", folder, "--config", campaign.config())
    assert (code, out["status"]) == (0, "planned")
    assert (folder.parent / "ledger.sqlite3").is_file()


def _ledger_in_folder(workspace, monkeypatch) -> tuple[Campaign, Path, Path]:
    """A run planned and recorded, then its ledger moved into the run folder (as a legacy
    folder imported into a ledger kept there would have it)."""
    campaign, folder = workspace
    assert _main("plan", "--output-dir", folder, "--config", campaign.config())[0] == 0
    result = campaign.round([15.0, 35.0, 22.0])
    assert _main("record", "--output-dir", folder, "--result", result)[0] == 0
    db = folder / "ledger.sqlite3"
    os.replace(folder.parent / "ledger.sqlite3", db)
    monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{db}")
    return campaign, folder, db


@pytest.mark.parametrize("suffix", ["", "-wal"])
@pytest.mark.parametrize("name", ["report.md"])
def test_analyze_never_writes_a_folder_file_through_a_link_to_the_ledger(
    workspace, monkeypatch, name, suffix
) -> None:
    _, folder, db = _ledger_in_folder(workspace, monkeypatch)
    events = _event_count(db)
    before = db.read_bytes()
    (folder / name).symlink_to(f"ledger.sqlite3{suffix}")
    code, out = _main("analyze", "--output-dir", folder)
    assert code == 1, out
    assert "is the ledger or one of its files" in out["error"]
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"
    assert _event_count(db) == events and _verifies(db)
    assert db.read_bytes() == before  # the run was not concluded either


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
@pytest.mark.parametrize("link", ["symbolic", "hard", "name"])
def test_every_write_refuses_a_ledger_this_process_opened(tmp_path, link, suffix) -> None:
    db = tmp_path / "ledger.sqlite3"
    store = Store(f"sqlite:///{db}", create=True)
    try:
        with store.transaction(write=True) as conn:
            conn.exec_driver_sql("SELECT 1")
        target_file = Path(f"{db}{suffix}")
        if not target_file.exists():
            target_file.write_bytes(b"")
        before = target_file.read_bytes()
        out = tmp_path / "out.txt"
        if link == "symbolic":
            out.symlink_to(target_file.name)
        elif link == "hard":
            os.link(target_file, out)
        else:
            out = target_file
        with pytest.raises(InputError, match="is the ledger or one of its files"):
            files.write_output(out, b"overwritten", force=True)  # no `protected` given
        with pytest.raises(InputError, match="is the ledger or one of its files"):
            files.StagedOutput(out, b"overwritten", force=True)
        assert target_file.read_bytes() == before
    finally:
        store.close()


def test_a_link_made_after_staging_is_refused_at_the_rename(tmp_path) -> None:
    db = tmp_path / "ledger.sqlite3"
    Store(f"sqlite:///{db}", create=True).close()
    before = db.read_bytes()
    out = tmp_path / "report.md"
    with files.StagedOutput(out, b"report text", force=True) as staged:
        out.symlink_to(db.name)  # made between the check and the write
        with pytest.raises(InputError, match="is the ledger or one of its files"):
            staged.commit()
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []


# --- the smaller items of issue 31, point 6 ------------------------------------------------


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_checkpoint_out_onto_another_file_stores_nothing(cli, campaign, tmp_path) -> None:
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    out = tmp_path / "pinned.note"
    out.write_bytes(b"another note\n")
    before = cli("checkpoint", "--json").json()["checkpoint_id"]
    assert cli("record", "--run", campaign.run_id, "--result", campaign.round([15.0, 33.0, 20.0]))
    result = cli("checkpoint", "--out", out, "--json")
    assert result.exit_code == 2
    assert result.json()["error"].endswith("no checkpoint was stored")
    assert out.read_bytes() == b"another note\n"
    again = cli("checkpoint", "--out", out, "--force", "--json").json()
    assert again["checkpoint_id"] == before + 1  # the refused one was never stored
    assert cli("checkpoint", "--out", out, "--json").exit_code == 0  # the same note again


def test_an_output_dir_through_missing_folders_makes_none_of_them(
    cli, campaign, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    result = cli("analyze", "--run", campaign.run_id, "--output-dir", "a/../b/../out")
    assert result.exit_code == 0, result.stderr
    assert (Path("out") / "analysis.json").is_file()
    assert not Path("a").exists() and not Path("b").exists()


def test_a_run_folder_through_missing_folders_makes_none_of_them(workspace) -> None:
    c, _ = workspace
    code, out = _main("plan", "--output-dir", "x/../y/../run", "--config", c.config())
    assert code == 0, out
    assert Path("run/state.json").is_file() and not Path("x").exists() and not Path("y").exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_killed_creation_is_cleaned_by_the_next_command(cli) -> None:
    assert cli("db", "upgrade").exit_code == 0
    ledger = Path(cli.db_url.removeprefix("sqlite:///"))
    dead = 2**22 + 4242  # above pid_max's default: no such process
    leftover = ledger.with_name(f".{ledger.name}.new-{dead}-0badc0de")
    leftover.write_bytes(b"half a ledger")
    Path(f"{leftover}-journal").write_bytes(b"")
    assert cli("status").exit_code == 0
    assert sorted(p.name for p in ledger.parent.iterdir() if ".new-" in p.name) == []
