"""The program's entry point turns the cycle collector off for the commands declared
`one_shot` only (cli/entry.py): a server or a long verify keeps it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.declare import command_name, every_command

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import atexit, gc, sys
atexit.register(lambda: print("collector", gc.isenabled(), file=sys.stderr))
from cli.entry import main
main()
"""


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (["record", "--run", "r"], "record"),
        (["--db", "sqlite:///x", "status"], "status"),
        (["--db=sqlite:///x", "verify", "--db", "y"], "verify"),
        (["--version"], None),
        (["-h", "record"], None),
        (["--db", "sqlite:///x"], None),
        ([], None),
    ],
)
def test_command_name_is_the_first_word_after_the_programs_options(args, name):
    assert command_name(args) == name


def _collector(url: str, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--db", url, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    return done.returncode, done.stderr.strip().splitlines()[-1]


def test_one_shot_commands_run_without_the_cycle_collector(sqlite_url):
    one_shot = {command.name for command in every_command() if command.one_shot}
    assert {"record", "plan", "status"} <= one_shot
    assert one_shot.isdisjoint({"serve", "mcp", "verify", "import", "export", "db", "history"})
    config = ROOT / "examples" / "softmax-demo" / "config.json"
    assert _collector(sqlite_url, "plan", "--config", str(config)) == (0, "collector False")
    assert _collector(sqlite_url, "verify") == (0, "collector True")
    # a usage error too goes through the same entry
    assert _collector(sqlite_url, "status", "--run", "BAD!")[0] == 2
