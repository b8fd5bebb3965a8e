"""skill install: the kernel-ledger skill for coding agents, written into a workspace."""

from __future__ import annotations

import typer

from cli.common import JSON
from cli.output import emit_json, say

SKILL_DIR = (".agents", "skills", "kernel-ledger")
FILES = ("SKILL.md", "references/commands.md", "references/decisions.md", "mcp.json")

app = typer.Typer(
    help="The kernel-ledger skill for coding agents.", no_args_is_help=True, rich_markup_mode=None
)


def shipped(name: str) -> bytes:
    from importlib.resources import files

    return files("cli").joinpath("skilldata", *name.split("/")).read_bytes()


@app.command("install")
def install(
    folder: str = typer.Argument(".", metavar="DIR", help="The workspace (default: here)."),
    check: bool = typer.Option(
        False, "--check", help="Only tell whether the installed copy is current (exit 1 if not)."
    ),
    as_json: bool = JSON,
) -> None:
    """Write the skill to DIR/.agents/skills/kernel-ledger/: SKILL.md (workflow, entry
    points, rules), references for the commands and the decision contract, and the entry
    for the workspace's .mcp.json (mcp.json). With --check, write nothing.

    Example: kernel-ledger skill install . --check
    """
    from pathlib import Path

    from ledger.errors import InputError

    root = Path(folder)
    if not root.is_dir():
        raise InputError(f"{folder} is not a folder")
    target = root.joinpath(*SKILL_DIR)
    states = {}
    for name in FILES:
        path = target / name
        states[name] = (
            "missing"
            if not path.is_file()
            else "current"
            if path.read_bytes() == shipped(name)
            else "changed"
        )
    if check:
        current = all(s == "current" for s in states.values())
        if as_json:
            emit_json({"status": "current" if current else "stale", "path": str(target),
                       "files": states})  # fmt: skip
        elif current:
            say(f"the skill in {target} is current")
        if not current:
            stale = [f"{name} {state}" for name, state in states.items() if state != "current"]
            import sys

            sys.stderr.write(
                f"Error: the skill in {target} is not current ({', '.join(stale)}); run "
                f"kernel-ledger skill install {folder}\n"
            )
            raise typer.Exit(1)
        return
    try:
        for name in FILES:
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shipped(name))
    except OSError as exc:
        raise InputError(f"cannot write the skill to {target}: {exc.strerror or exc}") from None
    written = [name for name, state in states.items() if state != "current"]
    if as_json:
        emit_json({"status": "installed", "path": str(target), "written": written,
                   "files": list(FILES)})  # fmt: skip
        return
    say(
        f"installed the kernel-ledger skill in {target} ({len(written)} of {len(FILES)} "
        f"files written); add the server in {target / 'mcp.json'} to {root / '.mcp.json'}"
    )
