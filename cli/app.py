"""The typer application and the one place where errors become exit codes."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from types import MethodType, SimpleNamespace

import typer
import typer.core
import typer.main

try:  # newer typer ships its own copy of click
    from typer._click import exceptions as click_exceptions
except ImportError:  # pragma: no cover - typer releases that depend on click
    from click import exceptions as click_exceptions

from cli.entry import command_name
from cli.output import EXIT_INTERNAL, error

HELP_NAMES = ["-h", "--help"]
DEFAULT_DB = "sqlite:///.vaws-local/ascend-triton/optimization/ledger.sqlite3"  # as the store's

# Every command, in the order of the help, with the module that registers it (`register(app)`
# for commands, `app` for the groups). A command line names one command: only its module is
# imported and only its click command is built (`application`), so `record` does not pay for
# the other twenty-odd commands' modules and signatures.
COMMANDS: dict[str, str] = {
    "plan": "cli.rounds",
    "record": "cli.rounds",
    "analyze": "cli.rounds",
    "status": "cli.query",
    "history": "cli.query",
    "profile": "cli.insight",
    "diagnose": "cli.insight",
    "show": "cli.insight",
    "compare": "cli.insight",
    "noise": "cli.stats",
    "decide": "cli.stats",
    "report": "cli.report",
    "serve": "cli.serve",
    "verify": "cli.audit",
    "checkpoint": "cli.audit",
    "export": "cli.audit",
    "import": "cli.audit",
    "check-merge": "cli.audit",
    "checkout": "cli.audit",
    "mcp": "cli.app",
}
GROUPS: dict[str, str] = {"db": "cli.db", "skill": "cli.skill"}


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        sys.stdout.write(f"kernel-ledger {version('kernel-ledger')}\n")
        raise typer.Exit(0)


def _global(
    ctx: typer.Context,
    db_url: str = typer.Option(
        None,
        "--db",
        metavar="URL",
        help="SQLAlchemy URL of the ledger (default: see above).",
    ),
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        expose_value=False,
        callback=_print_version,
        help="Print the version and exit.",
    ),
) -> None:
    ctx.obj = {"db": db_url}


def mcp_server(ctx: typer.Context) -> None:
    """Serve the campaign and audit commands as MCP tools on stdin/stdout, for coding
    agents: one process, the ledger opened once. Results are the objects --json prints.

    Example: kernel-ledger --db sqlite:///ledger.sqlite3 mcp
    """
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        from ledger.errors import InputError

        raise InputError("kernel-ledger mcp needs the MCP SDK: pip install 'kernel-ledger[mcp]'")
    from cli.mcpserver import serve

    serve((ctx.obj or {}).get("db"))


def register(target: typer.Typer) -> None:
    target.command("mcp")(mcp_server)


def application(only: str | None = None) -> typer.Typer:
    """The typer application: every command, or with `only` just that command or group
    (its help, usage lines and errors are the same either way)."""
    target = typer.Typer(
        name="kernel-ledger",
        help="An event-sourced, hash-chained ledger for kernel optimization rounds.\n\n"
        "\b\nThe ledger is --db URL, else $KERNEL_LEDGER_DB, else\n"
        f"{DEFAULT_DB}\n"
        "(relative to the working directory). Options of the whole program, such as --db,\n"
        "go before or after the command: kernel-ledger status --db URL.",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": HELP_NAMES},
    )
    target.callback()(_global)
    modules = [COMMANDS[only]] if only in COMMANDS else [] if only else list(COMMANDS.values())
    for name in dict.fromkeys(modules):
        importlib.import_module(name).register(target)
    if only is not None:
        target.registered_commands = [c for c in target.registered_commands if c.name == only]
    for name, module in GROUPS.items():
        if only is None or only == name:
            target.add_typer(importlib.import_module(module).app, name=name)
    return target


def __getattr__(name: str) -> typer.Typer:
    """`cli.app.app`: the whole application, built on first use."""
    if name == "app":
        whole = globals()["app"] = application()
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def usage_pieces(cmd: typer.core.TyperCommand, ctx) -> list[str]:
    """A usage line as people write it: `profile [OPTIONS] PATH`, `import [OPTIONS] [FILE]`
    (typer 0.2x writes a required argument as `{PATH}`)."""
    pieces = [cmd.options_metavar] if cmd.options_metavar else []
    for param in cmd.get_params(ctx):
        if isinstance(param, typer.core.TyperArgument):
            name = param.metavar or (param.name or "ARG").upper()
            pieces.append(name if param.required else f"[{name}]")
    return pieces


def command(args: list[str] | None = None) -> typer.core.TyperGroup:
    """The click command of the app, with text options and flags coerced without pydantic;
    for a command line that names a command (`args`), of that command alone.

    typer (0.2x) coerces each option's value through a pydantic TypeAdapter that it builds
    the first time the option is parsed, even when no value was given. Importing pydantic's
    validation machinery for that costs ~50 ms, a tenth of the start-up of a command that
    needs no pydantic otherwise (`status`). The parser already hands a text option a `str`
    and a flag (the help flag included) a `bool`, so those get typer's own pass-through
    coercion, the one it uses where no adapter applies; options read from the environment
    (which hands over text) and options of other types keep their adapters. This reaches
    into typer's private `_coercion`, so pyproject.toml pins typer to the 0.29 series it was
    tested with; with a typer built differently nothing is changed.
    tests/e2e/test_status_startup.py checks the effect with the installed typer.

    It also gives every command the usage line of `usage_pieces`, and its arguments their
    metavar alone in the help (`PATH`, not `PATH <str>`).
    """
    group = typer.main.get_command(application(named_command(args or [])))
    try:
        from typer._coercion import PassThroughRuntimeParam
    except ImportError:  # pragma: no cover - typer releases without runtime coercion
        return group

    def untyped(ctx=None) -> None:
        return None

    def plain(param) -> None:
        described = getattr(param, "type_descriptor", None)
        if (
            described is not None
            and getattr(param, "_runtime_param", False) is None
            and described.annotation in (str, bool)
            and described.parameter_info.parser is None
            and not param.envvar
        ):
            param._runtime_param = PassThroughRuntimeParam(
                parameter_info=described.parameter_info, annotation=described.annotation
            )

    # the help option is made on first use from the context's names; make it now
    names = SimpleNamespace(help_option_names=HELP_NAMES)
    pending = [group]
    while pending:
        cmd = pending.pop()
        if isinstance(cmd, typer.core.TyperCommand):
            cmd.collect_usage_pieces = MethodType(usage_pieces, cmd)
        for param in cmd.params:
            plain(param)
            if isinstance(param, typer.core.TyperArgument) and param.metavar:
                param.display_type_rich = untyped  # `PATH`, as options show theirs
        with contextlib.suppress(AttributeError, TypeError):
            help_option = cmd.get_help_option(names)
            if help_option is not None:
                plain(help_option)
        pending.extend(getattr(cmd, "commands", {}).values())
    return group


def named_command(args: list[str]) -> str | None:
    """The command (or group) a command line names after the program's options, when it is
    one of ours and nothing asks for the whole program (completion, --version, help).

    >>> named_command(["--db", "sqlite:///l", "record", "--run", "r"])
    'record'
    >>> named_command(["--help"]) is None and named_command(["recrod"]) is None
    True
    """
    if "_KERNEL_LEDGER_COMPLETE" in os.environ:
        return None
    name = command_name(args)
    return name if name in COMMANDS or name in GROUPS else None


def global_options_first(args: list[str]) -> list[str]:
    """The arguments with `--db URL` (or `--db=URL`) given after the command moved before
    it, where the program's options are parsed: `status --db URL` is `--db URL status`.

    >>> global_options_first(["db", "copy", "--to", "B", "--db", "A"])
    ['--db', 'A', 'db', 'copy', '--to', 'B']
    """
    start = 0
    while start < len(args) and args[start].startswith("-") and args[start] != "--":
        start += 2 if args[start] == "--db" else 1
    moved: list[str] = []
    kept: list[str] = []
    rest = args[start:]
    at = 0
    while at < len(rest):
        arg = rest[at]
        if arg == "--":
            kept += rest[at:]
            break
        if arg == "--db" and at + 1 < len(rest):
            moved += rest[at : at + 2]
            at += 2
            continue
        (moved if arg.startswith("--db=") else kept).append(arg)
        at += 1
    return args[:start] + moved + kept


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; never let a traceback reach the user."""
    from ledger.errors import LedgerError

    args = global_options_first(sys.argv[1:] if argv is None else list(argv))
    as_json = "--json" in args
    try:
        result = command(args)(args=args, prog_name="kernel-ledger", standalone_mode=False)
    except click_exceptions.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            sys.stdout.write(exc.ctx.get_help() + "\n")
            sys.exit(2)
        error(exc.format_message(), 2, as_json=as_json)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        error("interrupted", 130, as_json=as_json)
        sys.exit(130)
    except LedgerError as exc:
        error(exc.message, exc.exit_code, as_json=as_json)
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as exc:  # a bug: still one line, never a traceback
        error(
            f"internal error ({type(exc).__name__}: {exc}); this is a bug in kernel-ledger",
            EXIT_INTERNAL,
            as_json=as_json,
        )
        sys.exit(EXIT_INTERNAL)
    sys.exit(result if isinstance(result, int) else 0)


if __name__ == "__main__":
    main()
