"""verify's command line: the JSON contract, the progress bar, and flag combinations."""

from __future__ import annotations

import io
import json

import audit_kit
from audit_kit import copy_ledger

from cli import audit as cli_audit

from conftest import CliRunner

built = audit_kit.built
KEYS = {
    "status",
    "events_checked",
    "runs_checked",
    "events_without_actor",
    "checks",
    "first_failure",
    "warnings",
    "origin",
    "checkpoints_checked",
}


def test_json_is_one_object_with_the_documented_keys(built, tmp_path):
    cli = CliRunner(copy_ledger(built.path, tmp_path / "copy.sqlite3", drop_guards=False))
    result = cli("verify", "--json")
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.count("\n") == 1
    body = json.loads(result.stdout)
    assert set(body) == KEYS
    assert (body["status"], body["events_checked"], body["runs_checked"]) == ("ok", 41, 2)
    assert list(body["checks"]) == [
        "seq",
        "hash",
        "chain",
        "canonical",
        "payload",
        "replay",
        "projection",
        "blobs",
        "checkpoints",
    ]
    one = cli("verify", "--run", "softmax-b-001", "--json").json()
    assert (one["events_checked"], one["runs_checked"]) == (
        17,
        1,
    )  # plan 3, four rounds 13, the diagnosis 1
    text = cli("verify")
    assert text.exit_code == 0 and text.stdout.startswith("verified: 41 events in 2 runs")


def test_bundle_takes_no_run_or_artifacts(built, tmp_path):
    cli = CliRunner(copy_ledger(built.path, tmp_path / "copy.sqlite3", drop_guards=False))
    bundle = tmp_path / "b.jsonl"
    assert cli("export", "--run", "softmax-b-001", "--out", bundle).exit_code == 0
    for extra in (("--run", "softmax-b-001"), ("--artifacts",)):
        result = cli("verify", "--bundle", bundle, *extra, "--json")
        assert result.exit_code == 2 and "takes no --run or --artifacts" in result.json()["error"]


def test_progress_bar_lines():
    assert cli_audit.progress_bar(0, 10) == "\rverifying [" + "." * 30 + "]   0% 0/10 events"
    assert cli_audit.progress_bar(10, 10).endswith("] 100% 10/10 events")
    assert cli_audit.progress_bar(5, 10).count("#") == 15


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_for_large_ledgers_only(monkeypatch):
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    on_progress, finish = cli_audit._progress(as_json=False)
    on_progress(10, 10)  # a small ledger: no bar
    finish()
    assert terminal.getvalue() == ""
    on_progress(5000, 20000)
    on_progress(20000, 20000)
    finish()
    drawn = terminal.getvalue()
    assert drawn.count("\r") == 2 and drawn.endswith("100% 20000/20000 events\n")
    quiet, _ = cli_audit._progress(as_json=True)
    assert quiet is None  # never with --json
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert cli_audit._progress(as_json=False)[0] is None  # never when stderr is not a terminal
