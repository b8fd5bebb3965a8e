"""Every command is documented in docs/cli.md and carries an example in its help, and every
part of the docs derived from the commands' declarations (`make docs`) is current."""

from __future__ import annotations

from pathlib import Path

from cli.declare import every_command
from cli.docs import generated

ROOT = Path(__file__).resolve().parents[1]


def test_every_command_is_documented_with_an_example():
    text = (ROOT / "docs" / "cli.md").read_text()
    commands = list(every_command())
    assert len(commands) >= 20
    for command in commands:
        assert f"## {command.name}\n" in text, f"docs/cli.md has no section for {command.name}"
        assert "Example:" in command.doc, f"{command.name} help has no example"


def test_the_derived_docs_are_current():
    stale = [
        str(path.relative_to(ROOT))
        for path, text in generated().items()
        if path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], f"run `make docs`: {', '.join(stale)} do not match the declarations"


def test_readme_opens_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("##")[0]
    assert "make demo" in head and "make test" in head
