"""The typer application, derived from the commands' declarations (cli/declare.py), and
the one place where errors become exit codes."""

from __future__ import annotations

import inspect
import sys
from types import SimpleNamespace

import typer
import typer.core
import typer.main

from cli.declare import (
    CLI,
    GROUPS,
    JSON_HELP,
    SECTIONS,
    Command,
    Env,
    Option,
    every_command,
    find,
    flag_of,
    named_command,
)
from cli.output import EXIT_INTERNAL, emit_json, error

HELP_NAMES = ["-h", "--help"]
DEFAULT_DB = "sqlite:///.vaws-local/ascend-triton/optimization/ledger.sqlite3"  # as the store's
UsageError = typer.BadParameter.__mro__[1]
"""click's UsageError, of the click typer parses with (typer names its subclasses only)."""


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


class SectionedGroup(typer.core.TyperGroup):
    """The program's group: its help lists the commands in the sections of SECTIONS."""

    def format_commands(self, ctx, formatter) -> None:
        shown = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        shown = {name: cmd for name, cmd in shown.items() if cmd is not None and not cmd.hidden}
        width = formatter.width - 6 - max((len(name) for name in shown), default=0)
        sections = [
            (title, [n for n in names.split() if n in shown]) for title, names in SECTIONS.items()
        ]
        named = {n for _, names in sections for n in names}
        sections.append(("Other commands", [n for n in shown if n not in named]))
        for title, names in sections:
            if names:
                with formatter.section(title):
                    formatter.write_dl([(n, shown[n].get_short_help_str(width)) for n in names])


class DeclaredCommand(typer.core.TyperCommand):
    """A command's usage line as people write it: `profile [OPTIONS] PATH`,
    `import [OPTIONS] [FILE...]` (some typer releases write `{PATH}`)."""

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, typer.core.TyperArgument):
                name = param.metavar or (param.name or "ARG").upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces


def parameter(name: str, option: Option) -> inspect.Parameter:
    """The typer parameter of one declared option."""
    default = ... if option.required else [] if option.many else option.default
    if option.positional:
        declared = typer.Argument(default, metavar=option.metavar, help=option.help)
    else:
        declared = typer.Option(
            default, flag_of(name, option), metavar=option.metavar, help=option.help
        )
    kind = list[option.kind] if option.many else option.kind
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=declared, annotation=kind
    )


def callback(command: Command):
    """The typer callback of a command: its options, checked by the declaration, to its use
    case, and the outcome printed (`--json`: the document; else the renderer)."""

    def run(ctx: typer.Context, **values) -> None:
        as_json = values.pop("as_json", False)
        for name, value in values.items():  # typer hands repeated options as tuples
            if isinstance(value, tuple):
                values[name] = list(value)
        env = Env((ctx.obj or {}).get("db"), as_json=as_json)
        args = command.checked(values, CLI)
        out = command.call(env, **args)
        if out is None:
            return
        if as_json:  # one channel: a failed check's reason is in the document too
            failed = {"error": out.failure} if out.failure and "error" not in out.document else {}
            emit_json({**out.document, **failed})
        elif command.render is not None:
            command.render(out, SimpleNamespace(**args))
        if out.failure is not None:
            if not as_json:
                sys.stdout.flush()  # the output before the reason, also through a pipe
                sys.stderr.write(f"Error: {out.failure}\n")
            raise typer.Exit(1)

    params = [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    ]
    params += [parameter(name, option) for name, option in command.options.items()]
    if command.takes_json:
        json_flag = typer.Option(False, "--json", help=JSON_HELP)
        params.append(
            inspect.Parameter(
                "as_json", inspect.Parameter.KEYWORD_ONLY, default=json_flag, annotation=bool
            )
        )
    run.__signature__ = inspect.Signature(params)
    run.__annotations__ = {}
    run.__doc__ = command.doc
    run.__name__ = command.name.replace(" ", "_").replace("-", "_")
    return run


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
        cls=SectionedGroup,
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": HELP_NAMES},
    )
    target.callback()(_global)
    if only is not None and only not in GROUPS:
        commands = [find(only)]
    else:
        commands = list(every_command(only))
    groups: dict[str, typer.Typer] = {}
    for command in commands:
        group, _, name = command.name.rpartition(" ")
        if group and group not in groups:
            groups[group] = typer.Typer(
                help=GROUPS[group], no_args_is_help=True, rich_markup_mode=None
            )
            target.add_typer(groups[group], name=group)
        (groups[group] if group else target).command(name, cls=DeclaredCommand)(callback(command))
    return target


def __getattr__(name: str) -> typer.Typer:
    """`cli.app.app`: the whole application, built on first use."""
    if name == "app":
        whole = globals()["app"] = application()
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


def _options_hint(exc: Exception) -> str:
    """For an unknown option that resembles none of the command's: the options it has."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ != "NoSuchOption" or getattr(exc, "possibilities", None) or ctx is None:
        return ""
    names = [n for p in ctx.command.params for n in p.opts if n.startswith("--")]
    return f" (the options of {ctx.command_path}: {', '.join(names)}; see --help)" if names else ""


def _argument_hint(exc: Exception) -> str:
    """For a missing positional argument: what it is (its help, which names the values a
    KIND takes), so that the next call need not be `--help`."""
    param = getattr(exc, "param", None)
    if type(exc).__name__ != "MissingParameter" or param is None:
        return ""
    help_text = " ".join((getattr(param, "help", None) or "").split())
    positional = getattr(param, "param_type_name", "") == "argument"
    return f" {help_text}" if positional and help_text else ""


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; never let a traceback reach the user."""
    from ledger.errors import LedgerError

    args = global_options_first(sys.argv[1:] if argv is None else list(argv))
    as_json = "--json" in args
    try:
        group = typer.main.get_command(application(named_command(args)))
        result = group(args=args, prog_name="kernel-ledger", standalone_mode=False)
    except UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            sys.stdout.write(exc.ctx.get_help() + "\n")
            sys.exit(2)
        error(exc.format_message() + _options_hint(exc) + _argument_hint(exc), 2, as_json=as_json)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        error("interrupted", 130, as_json=as_json)
        sys.exit(130)
    except LedgerError as exc:
        error(
            exc.message,
            exc.exit_code,
            as_json=as_json,
            details=getattr(exc, "details", None),
            summary=getattr(exc, "summary", None),
        )
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
