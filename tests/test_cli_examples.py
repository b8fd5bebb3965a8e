"""docs/cli.md matches behaviour: every `console` block's commands run, in order, as one
session in a fresh working directory (the repository's examples and fixtures beside it),
with the exit code and the output the document shows (`…` stands for text left out)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli.md"


def sessions(text: str) -> list[tuple[str, list[str]]]:
    """(command line, expected output lines) of every `$ ` line in console blocks."""
    out: list[tuple[str, list[str]]] = []
    block = False
    pending = ""
    for line in text.splitlines():
        if line.startswith("```"):
            block = line.strip() == "```console"
            continue
        if not block:
            continue
        if pending:
            pending += " " + line.strip()
        elif line.startswith("$ "):
            pending = line[2:].strip()
        else:
            out[-1][1].append(line)
            continue
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
        else:
            out.append((pending, []))
            pending = ""
    return out


def pattern(lines: list[str]) -> re.Pattern[str]:
    text = " ".join(" ".join(lines).split())
    return re.compile(".*?".join(re.escape(part) for part in text.split("…")), re.DOTALL)


def test_every_console_example_runs_as_documented(tmp_path, monkeypatch):
    steps = sessions(DOC.read_text())
    assert len(steps) >= 40
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "tests"):
        (work / name).symlink_to(ROOT / name)
    monkeypatch.chdir(work)
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    run = CliRunner("unused")
    for line, expected in steps:
        argv = shlex.split(line)
        assert argv[0] == "kernel-ledger", line
        for arg in argv:
            if arg.startswith(("examples/", "tests/")):
                assert (ROOT / arg).exists(), f"docs/cli.md names {arg}, which the repo lacks"
        done = run(*argv[1:], db=False)
        shown = " ".join((done.stdout + done.stderr).split())
        failed = any(e.startswith("Error:") for e in expected)
        assert (done.exit_code != 0) == failed, (line, done.exit_code, done.stderr)
        if expected:
            assert pattern(expected).fullmatch(shown), (line, shown)


@pytest.mark.parametrize("flag", ["--json", "--jsonl --json"])
def test_decide_json_is_one_object(flag):
    import json

    run = CliRunner("unused")
    done = run("decide", "--input", ROOT / "examples/decide/rounds.jsonl", *flag.split(), db=False)
    if flag == "--json":
        assert done.exit_code == 2  # a JSON Lines file is not one JSON object
        return
    assert done.exit_code == 0 and done.stdout.count("\n") == 1
    assert [r["decision"] for r in json.loads(done.stdout)["results"]] == [
        "KEEP",
        "NOISE",
        "DISCARD",
    ]
