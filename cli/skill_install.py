"""skill install: the kernel-ledger skill for coding agents, written into a workspace."""

from __future__ import annotations

from pathlib import Path

from cli.declare import Command, Env, Option, Outcome
from cli.output import say

SKILL_DIR = (".agents", "skills", "kernel-ledger")
FILES = (
    "SKILL.md",
    "references/commands.md",
    "references/decisions.md",
    "references/inputs.md",
    "references/measuring.md",
    "references/mechanisms.md",
    "mcp.json",
    "scripts/measure.py",
)
FROM_MODULES = {"scripts/measure.py": ("ledger.harness", "measure.py")}
"""Files installed from a package module itself, not from a copy in skilldata/: the
measuring harness is the same file the tests run."""


def shipped(name: str) -> bytes:
    from importlib.resources import files

    if name in FROM_MODULES:
        package, file = FROM_MODULES[name]
        return files(package).joinpath(file).read_bytes()
    data = files("cli").joinpath("skilldata", *name.split("/")).read_bytes()
    return _with_this_executable(data) if name == "mcp.json" else data


def _with_this_executable(data: bytes) -> bytes:
    """mcp.json naming the kernel-ledger this skill was installed by, by its absolute path
    where it lies beside the running interpreter (a venv's bin/): an MCP client starts the
    server without the venv on its PATH."""
    import sys

    script = Path(sys.executable).with_name("kernel-ledger")
    if not script.is_file():
        return data
    import json

    named = f'"command": {json.dumps(str(script), ensure_ascii=False)}'
    return data.replace(b'"command": "kernel-ledger"', named.encode())


def install(env: Env, folder: str, check: bool) -> Outcome:
    from ledger.errors import InputError
    from ledger.text import display

    root = Path(folder)
    try:
        is_folder = root.is_dir()
    except (OSError, ValueError):  # a name too long, a NUL
        is_folder = False
    if not is_folder:
        raise InputError(f"{display(folder)} is not a folder")
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
        stale = [f"{name} {state}" for name, state in states.items() if state != "current"]
        failure = None if current else (
            f"the skill in {target} is not current ({', '.join(stale)}); run "
            f"kernel-ledger skill install {folder}"
        )  # fmt: skip
        document = {"status": "current" if current else "stale", "path": str(target),
                    "files": states}  # fmt: skip
        return Outcome(document, (target, None), failure)
    from ledger.files import write_output

    try:
        for name in FILES:
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            write_output(path, shipped(name), what="skill file", force=True)
    except OSError as exc:
        raise InputError(f"cannot write the skill to {target}: {exc.strerror or exc}") from None
    written = [name for name, state in states.items() if state != "current"]
    document = {"status": "installed", "path": str(target), "written": written,
                "files": list(FILES)}  # fmt: skip
    return Outcome(document, (target, written))


def say_install(out: Outcome, args) -> None:
    target, written = out.value
    if written is None:
        if out.failure is None:
            say(f"the skill in {target} is current")
        return
    say(
        f"installed the kernel-ledger skill in {target} ({len(written)} of {len(FILES)} "
        f"files written); add the server in {target / 'mcp.json'} to "
        f"{Path(args.folder) / '.mcp.json'}"
    )


COMMAND = Command(
    "skill install",
    """Write the skill to DIR/.agents/skills/kernel-ledger/: SKILL.md (the campaign loop,
    decisions, entry points, rules), references for the commands and the decision contract,
    the measuring harness (scripts/measure.py) and the entry for the workspace's .mcp.json
    (mcp.json). With --check, write nothing.

    Example: kernel-ledger skill install . --check
    """,
    install,
    say_install,
    {
        "folder": Option(
            "The workspace (default: here).", default=".", metavar="DIR", positional=True
        ),
        "check": Option(
            "Only tell whether the installed copy is current (exit 1 if not).", bool, False
        ),
    },
    returns="`status` (installed, current or stale), `path`, `written` or `files`",
)
