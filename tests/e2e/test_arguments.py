"""The command line and the MCP server check a command's options with one declaration
(cli/declare.py): a rule written there holds on both front ends, in the same words, before
anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.declare import Env
from cli.mcpserver import call_tool, tools

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"

# a call per tool, its arguments well-formed but for a run id no ledger can hold
CALLS = {
    "plan": None,
    "schema": None,
    "template": None,
    "knowledge_export": None,
    "record": {"result": "x.json"},
    "assess": {"result": "x.json"},
    "profile": {"path": "p", "round": 2, "kernel_name": "k"},
    "noise": {"measurements": "m.json"},
    "diagnose": {"bottleneck": "unknown", "evidence": "e"},
    "status": {},
    "history": {"limit": 3},
    "suggest": {"limit": 3},
    "show": {"round": 1},
    "compare": {"rounds": [0, 1]},
    "analyze": {"force": True},
    "verify": {"chain": True},
    "check-merge": {"kernel": "k.py", "markdown": True},
    "checkout": {"out": "k.py"},
}
SENTENCE = "'BAD!' is not a run id (ids match ^[a-z0-9][a-z0-9._-]{0,127}$)"


class NeverOpened(Env):
    def store(self, **_):
        raise AssertionError("the ledger was opened for rejected arguments")


def test_every_tool_checks_its_options_before_the_ledger_is_opened(tmp_path):
    """On a ledger that does not exist (which would be exit 4), a bad run id is exit 2 on
    both front ends, naming the option as each names it."""
    assert set(CALLS) == set(tools())
    cli = CliRunner(f"sqlite:///{tmp_path / 'absent.sqlite3'}")
    for name, arguments in CALLS.items():
        if arguments is None:  # plan, schema, template and knowledge_export take no run
            continue
        argv = [name, "--run", "BAD!"]
        for key, value in arguments.items():
            option = tools()[name].options[key]
            flag = option.flag or "--" + key.replace("_", "-")
            for one in value if isinstance(value, list) else [value]:
                argv += (
                    [str(one)] if option.positional else [flag] if one is True else [flag, str(one)]
                )
        result = cli(*argv, "--json")
        assert (result.exit_code, result.stderr, result.json()["error"]) == (
            2,
            "",
            f"Invalid value for '--run': {SENTENCE}",
        ), name
        is_error, doc, text = call_tool(NeverOpened(), name, {"run": "BAD!", **arguments})
        assert is_error and doc["exit_code"] == 2, name
        assert text == f"Error: argument 'run': {SENTENCE}", name
    assert not (tmp_path / "absent.sqlite3").exists()


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
    assert result.stderr == ""  # with --json, the JSON object alone
    assert result.json() == {
        "status": "error",
        "error": f"Invalid value for '{flag}': {sentence}",
        "exit_code": 2,
    }
    is_error, doc, text = call_tool(NeverOpened(), name, arguments)
    assert is_error and doc["exit_code"] == 2 and doc["error_class"] == "rejected input"
    assert text == f"Error: argument '{field}': {sentence}"


def test_tool_errors_name_arguments_where_the_command_line_names_flags(cli, db_url, tmp_path):
    """A refusal from deeper in the ledger names the command's options as its front end
    knows them: `--out`, `pass --force` on the command line; `argument 'out'`,
    `pass argument 'force'` over MCP."""
    from cli.mcpserver import OpenedOnce

    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    folder, taken = tmp_path / "folder", tmp_path / "taken.py"
    folder.mkdir()
    taken.write_text("other content\n")
    env = OpenedOnce(db_url)
    try:
        for out, flag_words, argument_words in [
            (folder, f"--out {folder} is a folder", f"argument 'out' {folder} is a folder"),
            (taken, "pass --force to overwrite it", "pass argument 'force' to overwrite it"),
        ]:
            on_cli = cli("checkout", "--run", RUN, "--out", out)
            assert on_cli.exit_code == 2 and flag_words in on_cli.stderr, on_cli.stderr
            is_error, doc, text = call_tool(env, "checkout", {"run": RUN, "out": str(out)})
            assert is_error and doc["exit_code"] == 2 and argument_words in text, text
            assert "--" not in text
    finally:
        env.close()


def test_a_blank_text_is_refused_on_both_front_ends(cli):
    """`history --actor ""` matched nothing, silently; a blank text names nothing, so every
    text option refuses it, on the command line and over MCP alike."""
    for flag, field, metavar in [("--actor", "actor", "NAME"), ("--search", "search", "TEXT")]:
        result = cli("history", flag, "  ", "--json")
        assert result.exit_code == 2
        assert result.json()["error"] == f"{flag} needs a {metavar}, not a blank"
        is_error, doc, text = call_tool(NeverOpened(), "history", {field: ""})
        assert is_error and doc["exit_code"] == 2
        assert text == f"Error: argument '{field}' needs a {metavar}, not a blank"


def test_an_unknown_option_like_none_lists_the_commands_options(cli):
    """click suggests an option only when one resembles the typo; otherwise the answer names
    the command's options, so an agent need not guess (`--output` for `--html`)."""
    far = cli("report", "--output", "x.html")
    assert far.exit_code == 2
    assert far.stderr.strip() == (
        "Error: No such option: --output (the options of kernel-ledger report: "
        "--run, --html, --force, --json; see --help)"
    )
    near = cli("report", "--rn", "x", "--json")
    assert (near.exit_code, near.json()["error"]) == (
        2,
        "No such option: --rn (Possible options: --json, --run)",
    )
