"""The command line as a new user meets it: help, --version, completion, --db after the
command, history --json, plan warnings and --dry-run, retried and repeated rounds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"


def demo_rounds(cli, last: int = 5) -> list[dict]:
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    out = []
    for n in range(1, last + 1):
        done = cli(
            "record", "--run", RUN, "--result", DEMO / "rounds" / f"round-{n}.json", "--json"
        )
        assert done.exit_code == 0, done.stderr
        out.append(done.json())
    return out


def test_bare_commands_print_their_help_once(sqlite_url):
    cli = CliRunner(sqlite_url)
    for args in ([], ["db"], ["skill"]):
        shown = cli(*args, db=False)
        assert shown.exit_code == 2 and shown.stdout.count("Usage: kernel-ledger") == 1, args
    top = cli("--help", db=False).stdout
    assert "<bool>" not in top and "{" not in top and "[[" not in top
    assert "sqlite:///.vaws-local/ascend-triton/optimization/ledger.sqlite3\n" in top
    from cli.app import DEFAULT_DB
    from ledger.store.urls import DEFAULT_DB as STORE_DEFAULT

    assert DEFAULT_DB == STORE_DEFAULT
    assert cli("profile", "--help", db=False).stdout.startswith(
        "Usage: kernel-ledger profile [OPTIONS] PATH\n"
    )
    assert cli("import", "--help", db=False).stdout.startswith(
        "Usage: kernel-ledger import [OPTIONS] [FILE...]\n"
    )
    verify = cli("verify", "--help", db=False).stdout
    assert "<bool>" not in verify and "  --chain  " in verify.replace("   ", "  ")


def test_every_help_reads_cleanly():
    """No `<str>`-style type after an argument's name, and no example command line broken
    across two lines by the help's wrapping."""
    import re

    import typer.main

    from cli.app import app

    cli = CliRunner("sqlite:///unused")
    group = typer.main.get_command(app)
    names = [[name] for name in group.commands]
    names += [[name, sub] for name in group.commands for sub in getattr(group.commands[name], "commands", {})]  # fmt: skip
    assert len(names) > 20
    for words in names:
        text = cli(*words, "--help", db=False).stdout
        lines = text.splitlines()
        assert not [line for line in lines if re.match(r"\s+[A-Z_]+ <\w+>", line)], words
        for at, line in enumerate(lines):
            if line.strip().startswith("Example:") and line.strip() != "Example:":
                assert line.strip().startswith("Example: kernel-ledger") or line.endswith(")")
                assert not lines[at + 1].strip(), (words, line, lines[at + 1])
    assert "  PATH  Profile file or folder." in cli("profile", "--help", db=False).stdout


def test_the_programs_help_lists_every_command_once_in_the_order_of_a_campaign():
    import typer.main

    from cli.app import app

    text = CliRunner("sqlite:///unused")("--help", db=False).stdout
    headings = [line for line in text.splitlines() if line.endswith(":") and line[0] != " "]
    assert headings == [
        "Options:",
        "A campaign, in order:",
        "Before a merge:",
        "Looking back:",
        "Moving runs:",
        "For agents:",
    ]
    after_options = text.split("A campaign, in order:")[1]
    lines = after_options.splitlines()
    listed = [line.split()[0] for line in lines if line.startswith("  ") and line[2] != " "]
    assert sorted(listed) == sorted(typer.main.get_command(app).commands)
    campaign = [
        name for name in listed if name in ("plan", "profile", "record", "noise", "analyze")
    ]
    assert campaign == ["plan", "profile", "record", "noise", "analyze"]


def test_no_doubled_word_in_any_message_template_or_document():
    """'at at' and its kind: every message, template and document the user reads."""
    import re

    doubled = re.compile(r"\b(at|the|a|an|of|to|is|in|and|on|for|with|from) \1\b", re.I)
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("cli", "ledger"):
        for suffix in ("*.py", "*.html"):
            files += sorted((ROOT / folder).rglob(suffix))
    found = [
        f"{path.relative_to(ROOT)}: {match.group()}"
        for path in files
        for match in doubled.finditer(path.read_text(encoding="utf-8"))
    ]
    assert len(files) > 50 and found == []


def test_version_and_completion():
    from importlib.metadata import version

    cli = CliRunner("sqlite:///unused")
    shown = cli("--version", db=False)
    assert (shown.exit_code, shown.stdout) == (0, f"kernel-ledger {version('kernel-ledger')}\n")
    env = {**os.environ, "_KERNEL_LEDGER_COMPLETE": "complete_bash",
           "COMP_WORDS": "kernel-ledger check-m", "COMP_CWORD": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "cli"], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["check-merge"]


def test_db_after_the_command(sqlite_url):
    cli = CliRunner(sqlite_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    after = cli("status", "--db", sqlite_url, "--json", db=False)
    assert after.exit_code == 0 and after.json()["runs"][0]["run_id"] == RUN
    equals = cli("status", "--json", f"--db={sqlite_url}", db=False)
    assert equals.json() == after.json()


def test_history_json_lists_flags_objects_and_one_reason(sqlite_url):
    cli = CliRunner(sqlite_url)
    demo_rounds(cli)
    rounds = cli("history", "--run", RUN, "--json").json()["rounds"]
    assert [r["decision"] for r in rounds] == ["KEEP", "DISCARD", "NOISE", "FAIL", "KEEP"]
    assert all(isinstance(r["flags"], list) for r in rounds)
    assert [r["reason"] for r in rounds] == [
        "I +8.27% reaches 1.00% and R -3.47% stays within 2.00%",
        "I +0.57% is below the minimum improvement 1.00%",
        "|I| 0.15% is below the noise floor 0.50%",
        "validation failed: the candidate was not measured",
        "I +6.55% reaches 1.00% and R -4.88% stays within 2.00%",
    ]
    golden = ROOT / "tests" / "fixtures" / "golden" / "ledger.sqlite3"
    copy = Path(sqlite_url.removeprefix("sqlite:///")).with_name("golden.sqlite3")
    copy.write_bytes(golden.read_bytes())
    golden_cli = CliRunner(f"sqlite:///{copy}")
    assert golden_cli("db", "upgrade").exit_code == 0  # kept at the revision it was made at
    gpu = golden_cli("history", "--run", "gpu-softmax-001", "--json")
    first = gpu.json()["rounds"][0]
    assert first["flags"] == ["drift_unestimated", "mechanism-refuted"]
    assert isinstance(first["start_signals"], dict) and first["start_signals"]["grid_size"] == 4096


def test_plan_warns_of_likely_typos_and_dry_run_writes_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    cli = CliRunner(url)
    config = json.loads((DEMO / "config.json").read_text())
    config["measurement_polcy"] = config.pop("measurement_policy", {})
    config["objective"]["target_relative_improvement"] = 10
    config["kernel"]["path"] = str((ROOT / config["kernel"]["path"]).resolve())
    config["validation_manifest"] = str((ROOT / config["validation_manifest"]).resolve())
    for item in config["baseline"]:
        if "source" in item:
            item["source"] = str((ROOT / item["source"]).resolve())
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    expected = [
        "config key measurement_polcy is not one the contract knows (kept as evidence); "
        "did you mean measurement_policy?",
        "objective.target_relative_improvement is 10, that is 1000%: objective values are "
        "fractions (0.1 is 10%)",
    ]
    checked = cli("plan", "--config", path, "--dry-run", "--json")
    assert checked.exit_code == 0, checked.stderr
    assert checked.json()["status"] == "checked" and checked.json()["warnings"] == expected
    assert not (tmp_path / "ledger.sqlite3").exists()  # nothing created, nothing written
    text = cli("plan", "--config", path, "--dry-run")
    assert text.stdout.startswith("checked (nothing written) run softmax-demo-001")
    assert f"warning: {expected[0]}\n" in text.stderr
    planned = cli("plan", "--config", path, "--json")
    assert planned.json()["status"] == "planned" and planned.json()["warnings"] == expected
    again = cli("plan", "--config", path, "--dry-run")
    assert again.exit_code == 2 and "already in the ledger" in again.stderr
    from ledger.store.eventstore import Store

    store = Store(url)
    with store.transaction() as conn:
        event = store.read_version(conn, RUN, 1)
    store.close()
    assert json.loads(event.payload)["warnings"] == expected
    assert cli("verify").exit_code == 0


def test_a_retried_record_answers_as_before_and_a_repeated_round_names_its_decision(sqlite_url):
    cli = CliRunner(sqlite_url)
    first = demo_rounds(cli, last=2)
    count = cli.event_count()
    retry = cli("record", "--run", RUN, "--result", DEMO / "rounds" / "round-2.json", "--json")
    assert retry.exit_code == 0
    read = ("mechanism_entry", "profiles", "mechanism_check")  # said when read: the first time
    assert retry.json() == {
        **{k: v for k, v in first[1].items() if k not in read},
        "already_recorded": True,
    }
    assert first[1]["already_recorded"] is False
    stale = DEMO / "rounds" / "round-2-stale-parent.json"
    other = cli("record", "--run", RUN, "--result", stale)
    assert other.exit_code == 2
    assert other.stderr == (
        "Error: round 2 is out of order: run 'softmax-demo-001' already recorded it (decided "
        "DISCARD, from another result file); the next round is 3\n"
    )
    assert cli.event_count() == count


def test_needs_diagnosis_names_the_command_and_counts_read_right(sqlite_url):
    cli = CliRunner(sqlite_url)
    demo_rounds(cli, last=3)
    fourth = cli("record", "--run", RUN, "--result", DEMO / "rounds" / "round-4.json")
    hint = (
        "NEEDS DIAGNOSIS: profile again, then record a new bottleneck model with "
        "kernel-ledger diagnose --run softmax-demo-001 --bottleneck CLASS --evidence TEXT\n"
    )
    assert fourth.stdout.endswith(hint) and "4 rounds left" in fourth.stdout
    assert hint in cli("status", "--run", RUN).stdout
