"""Bad input is never an internal error (issue 31, point 4): absurd integers, limits, depths
and patterns are exit 2 naming what is wrong, never exit 70 or a traceback. A property test
feeds absurd values to every option of every command, taken from the declarations in cli/
(a command that serves until stopped, `serve` and `mcp`, is given only values it refuses)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_triton_optimization_ledger import cli as dropin

from cli.declare import every_command, flag_of

from campaign import Campaign
from campaign import record_round as record
from conftest import CliRunner

HUGE = "99999999999999999999"
ABSURD_INTS = [HUGE, f"-{HUGE}", "1e400", "nan", "0x10", "", "9" * 5000]
ABSURD_TEXTS = [
    HUGE,
    "",
    " ",
    "\x00",
    "a" * 70_000,
    "%s%n{0}$(x)`x`",
    "no/such/folder/x",
    "a/../b/../out",
    "-",
    "\udcff",
    "ümlaut-ß-\u202e",
    "sqlite:///" + "x" * 5000,
    "[" * 5000,
]
LONG_RUNNING = {"serve", "mcp"}


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    cli = CliRunner(url)
    c = Campaign(tmp_path / "campaign")
    assert cli("plan", "--config", c.config()).exit_code == 0
    assert record(cli, c, [15.0, 33.0, 20.0]) == "KEEP"
    return cli, c


def _base(c: Campaign) -> dict[str, str]:
    """A plausible value for each required option, so that the absurd one is reached."""
    return {
        "run": c.run_id,
        "kernel": str(c.best_kernel),
        "rounds": "0",
        "to": "sqlite:///copy.sqlite3",
        "role": "reader",
        "input": str(c.config()),
        "bottleneck": "memory-bound",
        "evidence": "profile",
        "out": "out.file",
        "measurements": str(c.config()),
        "config": str(c.config()),
        "path": str(c.config()),
        "result": str(c.config()),
        "html": "report.html",
        "round": "1",
    }


def _cases() -> list[tuple[str, str, str]]:
    cases = []
    for command in every_command():
        for name, option in command.options.items():
            if option.kind is bool:
                continue
            values = ABSURD_INTS if option.kind is int else ABSURD_TEXTS
            for value in values:
                if command.name in LONG_RUNNING and option.kind is not int:
                    continue  # a text it accepts would start serving
                cases.append((command.name, name, value))
    return cases


CASES = _cases()


def _argv(command_name: str, absurd: str, value: str, c: Campaign) -> list[str]:
    command = next(cmd for cmd in every_command() if cmd.name == command_name)
    base = _base(c)
    argv = command.name.split()
    for name, option in command.options.items():
        given = value if name == absurd else base.get(name) if option.required else None
        if given is None:
            continue
        if option.positional:
            argv.append(given)
        else:
            argv += [flag_of(name, option), given]
    return argv


def _no_internal_error(result, argv) -> None:
    shown = [a[:40] for a in argv]
    assert result.exit_code != 70, (shown, result.stderr[-300:])
    assert "Traceback" not in result.stderr + result.stdout, shown
    assert "internal error" not in result.stderr, (shown, result.stderr[-300:])


@settings(
    max_examples=min(len(CASES), 250),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=st.sampled_from(CASES))
def test_absurd_values_for_every_option_of_every_command(workspace, case) -> None:
    cli, c = workspace
    argv = _argv(*case, c)
    _no_internal_error(cli(*argv), argv)


@given(text=st.text(max_size=200))
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_any_text_as_a_search_or_date(workspace, text) -> None:
    cli, _ = workspace
    for option in ("--search", "--since", "--until", "--op", "--mechanism"):
        argv = ["history", option, text]
        if "\x00" in text:
            continue  # no command line carries a NUL
        _no_internal_error(cli(*argv), argv)


def test_an_absurd_size_limit_names_the_limit(workspace, monkeypatch) -> None:
    cli, c = workspace
    for value in (HUGE, "-1", "0", "lots", "1e9"):
        monkeypatch.setenv("KERNEL_LEDGER_MAX_INPUT_BYTES", value)
        result = cli("plan", "--config", c.config(), "--dry-run")
        assert result.exit_code == 2, (value, result.stderr)
        assert "KERNEL_LEDGER_MAX_INPUT_BYTES must be a whole number of bytes from 1 to" in (
            result.stderr
        )


def test_a_pattern_sqlite_finds_too_complex_is_bad_input(workspace) -> None:
    cli, _ = workspace
    result = cli("history", "--search", "%_" * 30_000, "--json")
    assert result.exit_code == 2, result.stderr
    assert "the search pattern is too complex" in result.json()["error"]
    assert "unavailable" not in result.stderr


@pytest.mark.parametrize("depth", [100, 50_000, 100_000])
@pytest.mark.parametrize("name", ["state.json", "manifest.json"])
def test_a_run_folder_file_nested_deep_is_refused(tmp_path, monkeypatch, depth, name) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    c = Campaign(tmp_path / "campaign")
    folder = tmp_path / "runs" / "softmax"
    assert dropin("plan", "--output-dir", folder, "--config", c.config())[0] == 0
    doc = json.loads((folder / name).read_text())
    doc["extra"] = json.loads("[" * min(depth, 500) + "]" * min(depth, 500))
    text = json.dumps(doc)
    if depth > 500:  # deeper than json.dumps can write: spliced in as text
        text = text.replace("[" * 500 + "]" * 500, "[" * depth + "]" * depth)
    (folder / name).write_text(text)
    result = c.round([15.0, 33.0, 20.0])
    code, out = dropin("record", "--output-dir", folder, "--result", result)
    assert code == 1, out
    assert "nested deeper than 64 levels" in out["error"]
    assert os.path.exists(folder.parent / "ledger.sqlite3")
