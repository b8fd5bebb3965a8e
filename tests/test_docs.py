"""Every command is documented in docs/cli.md and carries an example in its help."""

from __future__ import annotations

from pathlib import Path

from cli.app import app

ROOT = Path(__file__).resolve().parents[1]


def _commands():
    for info in app.registered_commands:
        yield info.name, info.callback
    for group in app.registered_groups:
        for info in group.typer_instance.registered_commands:
            yield f"{group.name} {info.name}", info.callback


def test_every_command_is_documented_with_an_example():
    text = (ROOT / "docs" / "cli.md").read_text()
    names = list(_commands())
    assert len(names) >= 8
    for name, callback in names:
        assert f"## {name}\n" in text, f"docs/cli.md has no section for {name}"
        assert "Example:" in (callback.__doc__ or ""), f"{name} help has no example"


def test_readme_opens_with_the_two_commands():
    head = (ROOT / "README.md").read_text().split("##")[0]
    assert "make demo" in head and "make test" in head
