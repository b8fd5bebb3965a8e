"""Output paths under attack (docs/reliability.md, "Output files"): no output replaces the
ledger or its -wal/-shm, follows a symbolic link out of its folder or to nothing, opens a
FIFO or device, or replaces an existing file without --force. Every refusal is exit 2 with
one line, and the ledger keeps every event."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest


def _one_line(result, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.stderr)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    return result.stderr


def _recorded(cli, campaign) -> None:
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    result = cli("record", "--run", campaign.run_id, "--result", campaign.round([15.0, 33.0, 20.0]))
    assert result.exit_code == 0, result.stderr
    campaign.accepted("KEEP", 1)


def _writers(run_id: str, out: Path) -> dict[str, list[str]]:
    """Every command that writes a file, with `out` as the file it writes."""
    return {
        "checkpoint": ["checkpoint", "--out", str(out)],
        "export": ["export", "--run", run_id, "--out", str(out)],
        "checkout": ["checkout", "--run", run_id, "--out", str(out)],
        "report": ["report", "--run", run_id, "--html", str(out)],
    }


WRITERS = ("checkpoint", "export", "checkout", "report")


def _ledger(cli) -> Path:
    return Path(cli.db_url.removeprefix("sqlite:///"))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
@pytest.mark.parametrize("writer", WRITERS)
def test_no_output_replaces_the_ledger(cli, campaign, writer: str, suffix: str):
    _recorded(cli, campaign)
    ledger = _ledger(cli)
    target = Path(f"{ledger}{suffix}")
    for force in ([], ["--force"]):
        stderr = _one_line(cli(*_writers(campaign.run_id, target)[writer], *force))
        assert "is the ledger or one of its files" in stderr
    assert cli("verify").exit_code == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("writer", WRITERS)
def test_no_output_through_a_link_to_the_ledger(cli, campaign, tmp_path, writer: str):
    _recorded(cli, campaign)
    ledger = _ledger(cli)
    symlink = ledger.parent / "alias.txt"
    symlink.symlink_to(ledger.name)
    stderr = _one_line(cli(*_writers(campaign.run_id, symlink)[writer], "--force"))
    assert "is the ledger or one of its files" in stderr
    assert cli("verify").exit_code == 0


@pytest.mark.parametrize("writer", WRITERS)
def test_existing_files_are_kept_without_force(cli, campaign, tmp_path, writer: str):
    _recorded(cli, campaign)
    out = tmp_path / "existing.out"
    out.write_bytes(b"precious")
    stderr = _one_line(cli(*_writers(campaign.run_id, out)[writer]))
    assert "exists with other content; pass --force to overwrite it" in stderr
    assert out.read_bytes() == b"precious"
    result = cli(*_writers(campaign.run_id, out)[writer], "--force")
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() != b"precious"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("writer", WRITERS)
def test_symlinks_out_of_the_folder_and_dangling_ones_are_refused(
    cli, campaign, tmp_path, writer: str
):
    _recorded(cli, campaign)
    victim = tmp_path / "victim" / "file.txt"
    victim.parent.mkdir()
    victim.write_bytes(b"victim")
    folder = tmp_path / "out"
    folder.mkdir()
    leaving = folder / "leaving"
    leaving.symlink_to(victim)
    dangling = folder / "dangling"
    dangling.symlink_to(tmp_path / "victim" / "new.txt")
    for link, fragment in ((leaving, "leads out of its folder"), (dangling, "leads out")):
        for force in ([], ["--force"]):
            assert fragment in _one_line(cli(*_writers(campaign.run_id, link)[writer], *force))
    inside = folder / "dangling-inside"
    inside.symlink_to("nothing-here")
    assert "symbolic link to nothing" in _one_line(
        cli(*_writers(campaign.run_id, inside)[writer], "--force")
    )
    assert victim.read_bytes() == b"victim"
    assert not (tmp_path / "victim" / "new.txt").exists()
    assert not (folder / "nothing-here").exists()


@pytest.mark.parametrize("writer", WRITERS)
def test_special_files_are_never_opened(cli, campaign, tmp_path, writer: str):
    _recorded(cli, campaign)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target in (fifo, Path("/dev/null"), Path("/dev/zero")):
        stderr = _one_line(cli(*_writers(campaign.run_id, target)[writer], "--force"))
        assert "is not a regular file" in stderr or "leads out of its folder" in stderr
    assert Path("/dev/null").is_char_device()


def test_analyze_keeps_other_files_and_rewrites_its_own(cli, campaign, tmp_path):
    _recorded(cli, campaign)
    folder = tmp_path / "analysis"
    folder.mkdir()
    (folder / "report.md").write_text("my notes")
    events = cli.event_count()
    stderr = _one_line(cli("analyze", "--run", campaign.run_id, "--output-dir", folder))
    assert "exists with other content; pass --force" in stderr
    assert "nothing was appended" in stderr
    assert cli.event_count() == events
    assert (folder / "report.md").read_text() == "my notes"
    result = cli("analyze", "--run", campaign.run_id, "--output-dir", folder, "--force")
    assert result.exit_code == 0, result.stderr
    first = {p.name: p.read_bytes() for p in folder.iterdir()}
    again = cli("analyze", "--run", campaign.run_id, "--output-dir", folder)
    assert again.exit_code == 0, again.stderr  # the same bytes again: no overwrite
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == first


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_analyze_into_the_ledger_folder_is_refused_for_its_files(cli, campaign):
    _recorded(cli, campaign)
    ledger = _ledger(cli)
    (ledger.parent / "analysis.json").symlink_to(ledger.name)
    stderr = _one_line(
        cli("analyze", "--run", campaign.run_id, "--output-dir", ledger.parent, "--force")
    )
    assert "is the ledger or one of its files" in stderr
    assert cli("verify").exit_code == 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_generated_key_never_lands_on_the_ledger(cli):
    assert cli("db", "upgrade").exit_code == 0
    ledger = _ledger(cli)
    stderr = _one_line(cli("checkpoint", "--generate-key", f"{ledger}-journal"))
    assert "is the ledger or one of its files" in stderr
    assert not Path(f"{ledger}-journal").exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_hard_linked_ledger_is_refused(cli, campaign):
    _recorded(cli, campaign)
    ledger = _ledger(cli)
    alias = ledger.with_name("alias.sqlite3")
    events = cli.event_count()
    os.link(ledger, alias)
    for url in (cli.db_url, f"sqlite:///{alias}"):
        for command in (["status"], ["checkpoint"], ["history"]):
            assert "has 2 hard links" in _one_line(cli.__class__(url)(*command), 4)
    alias.unlink()
    assert cli("status").exit_code == 0
    assert cli.event_count() == events


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_leftovers_of_a_killed_creation_are_removed(cli, tmp_path):
    ledger = _ledger(cli)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    dead = 2**22 + 12345  # above pid_max's default: no such process
    leftover = ledger.with_name(f".{ledger.name}.new-{dead}-0badc0de")
    with sqlite3.connect(leftover) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    Path(f"{leftover}-journal").write_bytes(b"")
    assert cli("db", "upgrade").exit_code == 0
    assert sorted(p.name for p in ledger.parent.iterdir() if ".new-" in p.name) == []
    # a ledger still linked under the name of a creation that was killed is kept and usable
    os.link(ledger, leftover)
    assert cli("status").exit_code == 0
    assert not leftover.exists()


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("sqlite://", "is not a ledger file"),
        ("sqlite:///:memory:", "is not a ledger file"),
        ("sqlite:///%00", "holds a NUL character"),
        ("sqlite:///l.sqlite3?timeout=abc", "timeout must be 0 to 3600 seconds"),
        ("sqlite:///l.sqlite3?mode=ro", "the SQLite URL option 'mode' is not supported"),
        ("postgresql+psycopg://u@[::1:bad/x", "is not a database URL"),
    ],
)
@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_unusable_database_urls_are_one_line(cli, tmp_path, monkeypatch, url, fragment):
    monkeypatch.chdir(tmp_path)
    for command in (["status"], ["db", "upgrade"], ["verify"]):
        result = cli.__class__(url)(*command)
        assert fragment in _one_line(result)
    assert list(tmp_path.iterdir()) == [] or all(
        not p.name.startswith("l.sqlite3") for p in tmp_path.iterdir()
    )


def test_ledger_text_is_escaped_on_a_terminal(cli, campaign):
    title = "softmax\u001b]0;pwned\u0007"
    assert cli("plan", "--config", campaign.config(op_name=title)).exit_code == 0
    round_1 = campaign.round(
        [15.0, 33.0, 20.0], hypothesis="evil \u202egnp.exe\u2066 \r\x9b", mechanism="bidi\u202e"
    )
    assert cli("record", "--run", campaign.run_id, "--result", round_1).exit_code == 0
    shown = [
        cli("status").stdout,
        cli("status", "--run", campaign.run_id).stdout,
        cli("show", "--run", campaign.run_id, "--round", "1").stdout,
        cli("history").stdout,
    ]
    for text in shown:
        assert not set(text) & {"\u001b", "\u0007", "\u202e", "\u2066", "\r", "\x9b"}, text
    assert "softmax\\x1b]0;pwned\\x07" in shown[1]
    assert "\\u202egnp.exe" in shown[2]
    as_json = cli("status", "--run", campaign.run_id, "--json").json()
    assert as_json["run"]["op_name"] == title  # data stays data
