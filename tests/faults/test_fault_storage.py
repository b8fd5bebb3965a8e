"""Storage faults: a read-only ledger, a ledger file deleted, truncated or overwritten with
random bytes, a full disk. Every command answers with exit 4 and one clear line (or, where
the fault does not touch what it reads, works), nothing is half-written, and once the fault
is repaired the ledger verifies and takes appends again."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path

import pytest
from faultkit import (
    Files,
    cli,
    event_rows,
    file_digest,
    mount_unavailable,
    one_line_error,
    read_only_file,
    record_figures,
    remount,
    tmpfs,
    write_json,
)
from sqlalchemy import event

from ledger.errors import StoreUnavailable
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

RUN = "storage-001"


def needs_mount() -> None:
    reason = mount_unavailable()
    if reason is not None:
        pytest.skip(reason)


class Ledger:
    """A SQLite ledger with one planned run, and the files for its next rounds."""

    def __init__(self, path: Path, work: Path) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self.work = work
        self.files = Files(work / "files")
        self.recorded = 0
        result = cli("plan", "--config", self.files.config(RUN, work), db=self.url)
        assert result.code == 0, result.stderr

    def round_file(self, number: int | None = None, *, pad: int = 0) -> Path:
        number = number or self.recorded + 1
        doc = self.files.round_doc(number, self.files.kernel_sha, candidate=0)
        if pad:
            doc["notes"] = "x" * pad
        return write_json(self.work / "rounds" / f"round-{number}.json", doc)

    def record(self) -> None:
        result = cli("record", "--run", RUN, "--result", self.round_file(), db=self.url)
        assert result.code == 0, result.stderr
        self.recorded += 1

    def commands(self) -> dict[str, list]:
        """One of each kind of command, all with --json."""
        other = self.files.config("storage-002", self.work)
        return {
            "status": ["status", "--json"],
            "history": ["history", "--json"],
            "verify": ["verify", "--json"],
            "record": ["record", "--run", RUN, "--result", self.round_file(), "--json"],
            "plan": ["plan", "--config", other, "--json"],
            "analyze": ["analyze", "--run", RUN, "--output-dir", self.work / "out", "--json"],
        }


def refused(result, *fragments: str) -> None:
    """Exit 4, one `Error:` line that says what is wrong, and the JSON error object."""
    assert result.code == 4, (result.code, result.stdout, result.stderr)
    assert one_line_error(result.stderr, result.stdout), result.stderr
    assert json.loads(result.stdout)["exit_code"] == 4
    for fragment in fragments:
        assert fragment in result.said, result.stderr


# --- read-only ---------------------------------------------------------------------------


def test_read_only_file_system(tmp_path: Path):
    needs_mount()
    with tmpfs(tmp_path / "mnt", "8m") as mnt:
        ledger = Ledger(mnt / "ledger.sqlite3", tmp_path)
        ledger.record()
        commands = ledger.commands()
        before = file_digest(ledger.path)
        remount(mnt, "ro")
        try:
            for args in commands.values():
                refused(cli(*args, db=ledger.url), "mounted read-only", "nothing was written")
        finally:
            remount(mnt, "rw")
        assert file_digest(ledger.path) == before
        assert cli("verify", db=ledger.url).code == 0
        ledger.record()  # works again once the file system is writable
    record_figures("storage[read-only file system]", commands=len(commands), exit_4=len(commands))


def test_read_only_ledger_file(tmp_path: Path):
    if os.geteuid() == 0:
        needs_mount()
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    ledger.record()
    commands = ledger.commands()
    rows = event_rows(ledger.url)
    with read_only_file(ledger.path):
        for name in ("status", "history", "verify"):  # readers still read
            result = cli(*commands[name], db=ledger.url)
            assert result.code == 0, result.stderr
        for name in ("record", "plan", "analyze"):
            refused(cli(*commands[name], db=ledger.url), "is not writable", "nothing was written")
    assert event_rows(ledger.url) == rows
    assert cli("verify", db=ledger.url).code == 0
    ledger.record()
    record_figures("storage[read-only ledger file]", readers_ok=3, writers_exit_4=3)


# --- deleted, truncated, overwritten -----------------------------------------------------


def _damage(path: Path, kind: str) -> None:
    size = path.stat().st_size
    if kind == "emptied":
        path.write_bytes(b"")
    elif kind == "header-cut":
        os.truncate(path, 50)
    elif kind == "half-cut":
        os.truncate(path, size // 2)
    elif kind == "last-page-cut":
        os.truncate(path, size - 4096)
    elif kind == "random-bytes":
        path.write_bytes(random.Random(1).randbytes(size))
    else:
        raise AssertionError(kind)


DAMAGE = {
    "emptied": "is empty (0 bytes)",
    "header-cut": "",
    "half-cut": "",
    "last-page-cut": "",
    "random-bytes": "is not a SQLite database",
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damaged_ledger_file(tmp_path: Path, kind: str):
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    for _ in range(3):
        ledger.record()
    commands = ledger.commands()
    _damage(ledger.path, kind)
    damaged = file_digest(ledger.path)
    outcomes = {}
    for name, args in commands.items():
        result = cli(*args, db=ledger.url)
        outcomes[name] = result.code
        if result.code == 0:
            assert name in ("status", "history"), (name, result.stdout)
            continue
        refused(result, DAMAGE[kind])
        assert (
            "damaged" in result.said
            or "not a SQLite database" in result.said
            or ("empty" in result.said)
        ), result.stderr
    assert outcomes["verify"] == 4 and outcomes["record"] == 4 and outcomes["plan"] == 4
    assert file_digest(ledger.path) == damaged, "a command wrote into a damaged ledger"
    record_figures(f"storage[{kind}]", outcomes=outcomes)


def test_random_pages_never_pass_as_intact(tmp_path: Path):
    """Random bytes over one page at a time: `verify` either fails (exit 1 or 4) or every
    event is still there with its hash; no command ever crashes or prints a traceback."""
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    for _ in range(6):
        ledger.record()
    commands = ledger.commands()
    good = ledger.path.read_bytes()
    rows = event_rows(ledger.url)
    pages = len(good) // 4096
    rng = random.Random(8)
    detected = intact = 0
    for page in range(1, pages):
        damaged = bytearray(good)
        damaged[page * 4096 : (page + 1) * 4096] = rng.randbytes(4096)
        ledger.path.write_bytes(bytes(damaged))
        verify = cli("verify", "--json", db=ledger.url)
        assert verify.code in (0, 1, 4), verify.stderr
        if verify.code == 0:
            assert event_rows(ledger.url) == rows
            intact += 1
        else:
            assert one_line_error(verify.stderr, verify.stdout), verify.stderr
            detected += 1
        for name in ("status", "history", "record"):
            result = cli(*commands[name], db=ledger.url)
            assert result.code in (0, 1, 2, 4), (name, result.stderr)
            assert result.code == 0 or one_line_error(result.stderr, result.stdout), result.stderr
            # A record may succeed when the damaged page is not on its way (SQLite checks
            # the pages it reads; only `verify` reads them all): its append is whole.
    assert detected > 0
    record_figures(
        "storage[random page]", pages_damaged=pages - 1, detected=detected, intact=intact
    )


def test_deleted_while_in_use(tmp_path: Path):
    """The file is deleted while a writer has it open: its next append is refused, and
    nobody silently starts a new, empty ledger while the old write-ahead log is there."""
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    store = Store(ledger.url)
    service = LedgerService(store)
    service.view(RUN)  # the writer has the ledger open
    ledger.path.unlink()
    with pytest.raises(StoreUnavailable, match="was deleted or replaced") as info:
        service.record(RUN, ledger.round_file())
    assert info.value.exit_code == 4
    result = cli("status", "--json", db=ledger.url)
    refused(result, "is missing but", "nothing was created")
    assert not ledger.path.exists()
    store.close()


def test_opening_without_creating(tmp_path: Path):
    """`Store(create=False)` on a missing file: exit 4 and no file made (what every command
    but plan should use; see docs/reliability.md)."""
    path = tmp_path / "none" / "ledger.sqlite3"
    with pytest.raises(StoreUnavailable, match="there is no ledger at") as info:
        Store(f"sqlite:///{path}", create=False)
    assert info.value.exit_code == 4
    assert not path.exists()


def test_a_cleanly_deleted_ledger_is_not_recreated(tmp_path: Path):
    """The ledger file (and its folder) deleted cleanly, no -wal left: every command but
    those whose job is to create a ledger (plan, import, db upgrade) answers exit 4 with
    one line, and creates nothing: no empty file, no fresh schema where the history was.
    A bad input file is still rejected first (exit 2)."""
    folder = tmp_path / "ledgers"
    ledger = Ledger(folder / "ledger.sqlite3", tmp_path)
    ledger.record()
    work = ledger.work
    bundle = work / "run.bundle.jsonl"
    assert cli("export", "--run", RUN, "--out", bundle, db=ledger.url).code == 0
    profile = write_json(work / "profile.json", {"aiv_vec_ratio": 0.5, "aiv_scalar_ratio": 0.1})
    round_doc = json.loads(ledger.round_file().read_bytes())
    noise = write_json(
        work / "noise.json",
        {"kernel_sha256": ledger.files.kernel_sha, "measurements": round_doc["measurements"]},
    )
    for leftover in folder.iterdir():
        leftover.unlink()
    folder.rmdir()
    out = work / "deleted-out"
    commands = {
        **ledger.commands(),
        "status --run": ["status", "--run", RUN, "--json"],
        "history --run": ["history", "--run", RUN, "--json"],
        "history --like-profile": ["history", "--like-profile", profile, "--json"],
        "show": ["show", "--run", RUN, "--round", "1", "--json"],
        "compare": ["compare", "--run", RUN, "--round", "0", "--round", "1", "--json"],
        "report": ["report", "--run", RUN, "--html", out / "r.html", "--json"],
        "profile": ["profile", "--run", RUN, "--baseline", profile, "--json"],
        "diagnose": [
            *("diagnose", "--run", RUN, "--bottleneck", "vector-compute"),
            *("--evidence", "x", "--json"),
        ],
        "noise": ["noise", "--run", RUN, "--measurements", noise, "--json"],
        "checkpoint": ["checkpoint", "--json"],
        "export": ["export", "--run", RUN, "--out", out / "b.jsonl", "--json"],
        "checkout": ["checkout", "--run", RUN, "--out", out / "k.py", "--json"],
        "check-merge": ["check-merge", "--run", RUN, "--kernel", ledger.files.kernel, "--json"],
        "db current": ["db", "current", "--json"],
    }
    del commands["plan"]
    for name, args in commands.items():
        result = cli(*args, db=ledger.url)
        refused(result, "there is no ledger at", "nothing was created")
        assert not folder.exists(), f"{name} created {folder}"
    assert not out.exists()
    # a bad input file is rejected before the ledger is opened
    bad = work / "bad-round.json"
    bad.write_bytes(b"{")
    result = cli("record", "--run", RUN, "--result", bad, db=ledger.url)
    assert result.code == 2 and "is not valid JSON" in result.said, result.stderr
    assert not folder.exists()
    # the commands whose job is to create a ledger do
    assert cli("import", bundle, db=ledger.url).code == 0
    assert cli("verify", db=ledger.url).code == 0
    for leftover in folder.iterdir():
        leftover.unlink()
    assert cli("db", "upgrade", db=ledger.url).code == 0 and ledger.path.exists()
    ledger.path.unlink()
    assert cli("plan", "--config", ledger.files.config(RUN, work), db=ledger.url).code == 0


def test_replaced_while_in_use(tmp_path: Path):
    """A backup is restored over the file while a writer has it open: the writer's append
    must not go into the file that was replaced."""
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    backup = tmp_path / "backup.sqlite3"
    with sqlite3.connect(ledger.path) as source, sqlite3.connect(backup) as target:
        source.backup(target)
    source.close()
    target.close()
    store = Store(ledger.url)
    service = LedgerService(store)
    service.view(RUN)
    os.replace(backup, ledger.path)
    with pytest.raises(StoreUnavailable, match="was deleted or replaced"):
        service.record(RUN, ledger.round_file())
    store.close()
    assert cli("verify", db=ledger.url).code == 0
    ledger.record()  # a fresh writer uses the restored file


# --- full disk ---------------------------------------------------------------------------


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    with filler.open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    return filler


def test_full_disk(tmp_path: Path):
    needs_mount()
    with tmpfs(tmp_path / "mnt", "2m") as mnt:
        ledger = Ledger(mnt / "ledger.sqlite3", tmp_path)
        ledger.record()
        rows = event_rows(ledger.url)
        filler = _fill(mnt)
        commands = ledger.commands()
        outcomes = {}
        for name in ("record", "plan", "analyze", "status", "history", "verify"):
            result = cli(*commands[name], db=ledger.url)
            outcomes[name] = result.code
            if result.code == 0:
                assert name in ("status", "history", "verify"), name
            else:
                refused(result, "is full", "nothing was written")
        assert outcomes["record"] == 4 and outcomes["plan"] == 4
        filler.unlink()
        assert event_rows(ledger.url) == rows
        assert cli("verify", db=ledger.url).code == 0
        ledger.record()  # and appends work again
    record_figures("storage[full disk, 2 MiB tmpfs]", outcomes=outcomes)


def test_full_disk_simulated(tmp_path: Path):
    """Where no small file system can be mounted, SQLite's own limit makes the same
    SQLITE_FULL error: the database may not grow by a single page."""
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    store = Store(ledger.url)
    store.engine.dispose()

    @event.listens_for(store.engine, "connect")
    def _no_growth(dbapi_connection, _record) -> None:
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    rows = event_rows(ledger.url)
    with pytest.raises(StoreUnavailable, match="is full") as info:
        LedgerService(store).record(RUN, ledger.round_file(pad=200_000))
    assert info.value.exit_code == 4 and "nothing was written" in str(info.value)
    store.close()
    assert event_rows(ledger.url) == rows
    assert cli("verify", db=ledger.url).code == 0


def test_analyze_into_a_full_output_folder(tmp_path: Path):
    needs_mount()
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    ledger.record()
    rows = event_rows(ledger.url)
    with tmpfs(tmp_path / "out", "64k") as out:
        filler = _fill(out)
        report = out / "report"
        result = cli("analyze", "--run", RUN, "--output-dir", report, db=ledger.url)
        assert result.code == 4 and one_line_error(result.stderr, result.stdout), result.stderr
        assert "No space left on device; nothing was appended" in result.said
        assert event_rows(ledger.url) == rows  # the run is not concluded
        assert sorted(p.name for p in report.iterdir()) == []  # no staged file left behind
        # read-only: refused the same way
        filler.unlink()
        remount(out, "ro")
        try:
            result = cli("analyze", "--run", RUN, "--output-dir", report, db=ledger.url)
        finally:
            remount(out, "rw")
        assert result.code == 4 and one_line_error(result.stderr, result.stdout), result.stderr
        assert "nothing was appended" in result.said
        assert event_rows(ledger.url) == rows
        # with room again, analyze concludes the run and writes its three files
        result = cli("analyze", "--run", RUN, "--output-dir", report, "--json", db=ledger.url)
        assert result.code == 0, result.stderr
        assert sorted(p.name for p in report.iterdir()) == [
            "analysis.json",
            "manifest.json",
            "report.md",
        ]
        analysis = json.loads((report / "analysis.json").read_bytes())
    assert len(event_rows(ledger.url)) == len(rows) + 1  # RunConcluded, once
    assert analysis["status"] == json.loads(result.stdout)["status"]
    assert cli("verify", db=ledger.url).code == 0


def test_analyze_into_a_path_that_is_a_file(tmp_path: Path):
    ledger = Ledger(tmp_path / "ledger.sqlite3", tmp_path)
    rows = event_rows(ledger.url)
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("x")
    result = cli("analyze", "--run", RUN, "--output-dir", not_a_folder / "out", db=ledger.url)
    assert result.code == 2 and one_line_error(result.stderr, result.stdout), result.stderr
    assert "cannot write to the output folder" in result.said
    assert event_rows(ledger.url) == rows
