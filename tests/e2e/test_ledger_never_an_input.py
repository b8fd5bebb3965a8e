"""The ledger is never an input: a path where an input file was meant that is the ledger
itself (by name, a symbolic link or a hard link) is refused as the ledger, and any other
SQLite database by its header, by the one reader every input goes through
(`ledger.files.open_input`), not as "not UTF-8 text" or "not valid JSON"; exit 2 and
nothing written, on the command line and over MCP."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def test_the_ledger_named_as_an_input_is_refused_as_the_ledger(sqlite_url, tmp_path):
    ledger = tmp_path / "ledger.sqlite3"
    cli = CliRunner(sqlite_url)
    assert cli("db", "upgrade").exit_code == 0
    first = cli("plan", "--config", ledger)
    assert (first.exit_code, first.stdout) == (2, "")
    assert first.stderr == (
        f"Error: config file {ledger} is the ledger (--db), not a run configuration: pass the "
        "JSON file `template config` prints\n"
    )
    assert cli.event_count() == 0
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    link = tmp_path / "link.json"
    link.symlink_to(ledger)
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    before, listed = cli.event_count(), _files(tmp_path)
    calls = [
        (["record", "--run", RUN, "--result", link], f"round result {link} is the ledger "
         "(--db), not a round result: pass the JSON file `template round` prints"),
        (["profile", "--run", RUN, "--baseline", link], f"profile file {link} is the ledger "
         "(--db), not profiler output"),
        (["noise", "--run", RUN, "--measurements", ledger], f"measurements file {ledger} is "
         "the ledger (--db), not an A/A remeasure: pass the JSON file `template measurements` "
         "prints"),
        (["import", ledger], f"bundle {ledger} is the ledger (--db), not a bundle (`export` "
         "writes one)"),
        (["check-merge", "--run", RUN, "--kernel", link], f"--kernel {link} is the ledger "
         "(--db), not a kernel source file"),
        (["record", "--run", RUN, "--result", other], f"round result {other} is a SQLite "
         "database, not a round result: pass the JSON file `template round` prints"),
        (["decide", "--input", other], f"decide input {other} is a SQLite database, not a "
         "decide input: pass the JSON file `template decide` prints"),
    ]  # fmt: skip
    for args, expected in calls:
        result = cli(*args)
        assert (result.exit_code, result.stderr) == (2, f"Error: {expected}\n"), args
        assert cli(*args, "--json").json()["error"] == expected, args
    assert cli.event_count() == before
    assert _files(tmp_path) == listed


def test_a_hard_link_to_the_ledger_is_the_ledger_over_mcp(sqlite_url, tmp_path):
    """The MCP server keeps its ledger open: a hard link to it (made after it was opened)
    is the same file, refused as the ledger and nothing appended."""
    from cli.mcpserver import OpenedOnce, call_tool

    ledger = tmp_path / "ledger.sqlite3"
    env = OpenedOnce(sqlite_url)
    try:
        assert not call_tool(env, "plan", {"config": str(DEMO / "config.json")})[0]
        before = CliRunner(sqlite_url).event_count()
        hard = tmp_path / "round.json"
        os.link(ledger, hard)
        try:
            is_error, doc, _ = call_tool(env, "record", {"run": RUN, "result": str(hard)})
        finally:
            hard.unlink()
        assert is_error and doc["exit_code"] == 2, doc
        assert doc["error"] == (
            f"round result {hard} is the ledger (--db), not a round result: pass the JSON file "
            "`template round` prints"
        )
        assert CliRunner(sqlite_url).event_count() == before
    finally:
        env.close()
