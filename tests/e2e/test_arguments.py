"""The command line and the MCP server check a use case's arguments with one model each
(cli/arguments.py): the command hands every option it parsed to the model, so a rule written
there holds on both front ends, in the same words."""

from __future__ import annotations

import pytest

from cli.arguments import TOOLS
from cli.mcpserver import call_tool
from cli.tools import Ledger
from ledger.errors import InputError

# a command line per use case, its options well-formed (the files need not exist)
CALLS = {
    "plan": ["plan", "--config", "c.json", "--dry-run"],
    "record": ["record", "--run", "r", "--result", "x.json"],
    "profile": ["profile", "p", "--run", "r", "--round", "2", "--kernel-name", "k"],
    "noise": ["noise", "--run", "r", "--measurements", "m.json"],
    "diagnose": ["diagnose", "--run", "r", "--bottleneck", "b", "--evidence", "e"],
    "status": ["status", "--run", "r"],
    "history": ["history", "--op", "softmax", "--limit", "3"],
    "show": ["show", "--run", "r", "--round", "1"],
    "compare": ["compare", "--run", "r", "--round", "0", "--round", "1"],
    "analyze": ["analyze", "--run", "r", "--force"],
    "verify": ["verify", "--chain"],
    "check-merge": ["check-merge", "--run", "r", "--kernel", "k.py", "--markdown"],
    "checkout": ["checkout", "--run", "r", "--out", "k.py"],
}


def _never_opened() -> Ledger:
    def open_store(**_):
        raise AssertionError("the ledger was opened for rejected arguments")

    return Ledger(open_store)


def test_every_use_case_command_is_checked_by_its_tool_model(cli, monkeypatch):
    assert set(CALLS) == set(TOOLS)
    seen: dict[str, dict] = {}
    for name, tool in TOOLS.items():

        def refuse(values, *, _name=name, **_):
            seen[_name] = dict(values)
            raise InputError(f"checked by the {_name} model")

        monkeypatch.setattr(tool.args, "model_validate", refuse)
    for name, argv in CALLS.items():
        result = cli(*argv, "--json")
        assert (result.exit_code, result.stderr) == (2, f"Error: checked by the {name} model\n")
        # every option reached the model, by its argument's name, with the value typer parsed
        assert set(seen[name]) == set(TOOLS[name].args.model_fields), name
    assert seen["compare"]["rounds"] == [0, 1] and seen["show"]["round"] == 1
    assert seen["plan"] == {"config": "c.json", "dry_run": True}


@pytest.mark.parametrize(
    ("name", "argv", "arguments", "field", "sentence"),
    [
        (
            "status",
            ["status", "--run", "BAD!"],
            {"run": "BAD!"},
            "run",
            "'BAD!' is not a run id (ids match ^[a-z0-9][a-z0-9._-]{0,127}$)",
        ),
        (
            "show",
            ["show", "--run", "r", "--round", "-1"],
            {"run": "r", "round": -1},
            "round",
            "-1 is not in the range x>=0",
        ),
        (
            "checkout",
            ["checkout", "--run", "r", "--round", str(2**53), "--out", "k.py"],
            {"run": "r", "round": 2**53, "out": "k.py"},
            "round",
            f"{2**53} is not in the range x<={2**53 - 1}",
        ),
        (
            "compare",
            ["compare", "--run", "r", "--round", "0"],
            {"run": "r", "rounds": [0]},
            "rounds",
            "compare needs exactly two rounds, not 1",
        ),
        (
            "history",
            ["history", "--limit", "0"],
            {"limit": 0},
            "limit",
            "0 is not in the range x>=1",
        ),
    ],
)
def test_a_broken_rule_reads_the_same_on_both_front_ends(
    cli, name, argv, arguments, field, sentence
):
    flag = "--round" if field == "rounds" else f"--{field}"
    result = cli(*argv, "--json")
    assert result.exit_code == 2
    assert result.stderr == f"Error: Invalid value for '{flag}': {sentence}\n"
    assert result.json() == {
        "status": "error",
        "error": f"Invalid value for '{flag}': {sentence}",
        "exit_code": 2,
    }
    is_error, doc, text = call_tool(_never_opened(), name, arguments)
    assert is_error and doc["exit_code"] == 2 and doc["error_class"] == "rejected input"
    assert text == f"Error: argument '{field}': {sentence}"
