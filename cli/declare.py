"""How a command is declared, once: a `Command` holds its options, its help with an example,
its use case (`call`) and its text renderer (`render`). Every command is one module of this
package that names its `COMMAND`; the module is found from the command's name
(`check-merge` is cli/check_merge.py, `db copy` cli/db_copy.py, `import` cli/import_.py).

Derived from the declarations, never written again: the typer command (cli/app.py), the MCP
tool with its input schema (cli/mcpserver.py) and the option tables of docs/cli.md, the
skill's references/commands.md and docs/agents.md (cli/docs.py, `make docs`).

A rule on an option (a run id's pattern, a round's range, one of a fixed set, a list of two)
is checked here, the same way for both front ends and before anything is opened; a broken
rule is exit 2 in one sentence naming the option as its front end names it (`Invalid value
for '--round': ...` on the command line, `argument 'round': ...` over MCP).

This module imports nothing heavy (no typer, no pydantic): `status` starts without them.
"""

from __future__ import annotations

import importlib
import importlib.util
import keyword
import os
import pkgutil
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ledger.errors import InputError, LedgerError
from ledger.inputs.jsonio import RUN_ID_RE, display

REQUIRED: Any = ...
"""The default of an option that must be given."""
MAX_COUNT = 2**53 - 1
"""The largest whole number an option takes (the ledger's integers are RFC 8785-safe)."""


_WORDED = re.compile(r"\[\[(.*?)\|\|(.*?)\]\]", re.DOTALL)


def worded(text: str, *, cli: bool) -> str:
    """A declared text as one front end reads it: each `[[cli words||tool words]]` in a
    command's help or `returns`, or in an option's help, is its first half on the command
    line (`--help`, docs/cli.md, the skill) and its second in the MCP tool's description and
    schema, which speak of the result object (`status` "failed") where the command line
    speaks of exit codes and stdout.

    >>> worded("[[exit 1||`status` failed]] on failure", cli=False)
    '`status` failed on failure'
    >>> worded("[[exit 1||`status` failed]] on failure", cli=True)
    'exit 1 on failure'
    """
    return _WORDED.sub(lambda m: m.group(1 if cli else 2), text)


@dataclass(frozen=True)
class Option:
    """One option of a command. Its name is the MCP argument (`output_dir`); its flag on the
    command line is `--output-dir` unless `flag` says otherwise; a positional argument is
    written as its metavar (`PATH`)."""

    help: str
    kind: type = str  # str, int or bool; with `many`, a list of them
    default: Any = None
    metavar: str | None = None
    flag: str | None = None
    positional: bool = False
    many: bool = False  # repeatable (`--round 0 --round 5`), given as a list
    count: int | None = None  # with `many`: exactly this many
    ge: int | None = None
    le: int | None = None
    choices: tuple[str, ...] = ()  # one of these, in any case
    file: bool = False  # a file or folder path (read or written): must not be blank
    file_or_text: bool = False  # a note or key, or the file holding it
    run_id: bool = False  # a run id (RUN_ID_RE)
    tool_required: bool = False  # an MCP call must give it, though the command line need not
    tool_help: str = field(default="", init=False, repr=False, compare=False)  # the tool's

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_help", worded(self.help, cli=False))
        object.__setattr__(self, "help", worded(self.help, cli=True))

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def run_option(help: str = "The run.", *, required: bool = True) -> Option:
    return Option(help, metavar="ID", default=REQUIRED if required else None, run_id=True)


def round_option(help: str, *, required: bool = False) -> Option:
    return Option(help, int, REQUIRED if required else None, metavar="N", ge=0, le=MAX_COUNT)


def strict_option() -> Option:
    return Option(
        "Refuse the file when a key looks like a typo of a known one (otherwise a warning).",
        bool,
        False,
    )


def dry_run_option(help: str) -> Option:
    return Option(f"{help}; write nothing.", bool, False)


JSON_HELP = "Print exactly one JSON object on stdout."


@dataclass
class Outcome:
    """A use case's result: the object `--json` prints (and the MCP tool returns), the result
    itself for the text renderer, and, for a check that ran and failed (exit 1), its reason."""

    document: dict[str, Any]
    value: Any = None
    failure: str | None = None


class Env:
    """What a use case gets from the front end that runs it: the ledger (`store`, `service`,
    `url`) and whether its result is shown as JSON (always, over MCP). The command line opens
    a store per use; the MCP server keeps the one it opened (cli/mcpserver.py)."""

    def __init__(self, db: str | None = None, *, as_json: bool = False) -> None:
        self.db = db
        self.as_json = as_json

    @property
    def url(self) -> str:
        """--db, else $KERNEL_LEDGER_DB, else the default."""
        from ledger.store.urls import resolve_url

        return resolve_url(self.db)

    def store(self, *, create: bool = False, check_schema: bool = True):
        """The store. Only commands whose job is to create a ledger (plan, import, db upgrade)
        pass `create`; every other one refuses a missing SQLite ledger (exit 4) instead of
        silently starting an empty one where the history was."""
        from ledger.store.eventstore import Store

        return Store(self.url, create=create, check_schema=check_schema)

    def service(self, *, create: bool = False):
        """The service; its store is opened on first use, after the input files were
        checked, so a bad file is rejected before a ledger is opened or created."""
        from ledger.services.service import LedgerService

        self._name_ledger()
        return LedgerService.opening(lambda: self.store(create=create))

    def _name_ledger(self) -> None:
        """The SQLite file of the ledger, made known before it is opened: an input file
        that is the ledger is then refused as such (ledger/files.py), and no output may be
        it. A URL that names no file is left to the store to refuse."""
        from ledger.errors import LedgerError
        from ledger.files import guard_ledger
        from ledger.store.sqlitefile import ledger_file
        from ledger.store.urls import parse_url

        try:
            parsed = parse_url(self.url)
        except LedgerError:
            return
        path = ledger_file(parsed) if parsed.get_backend_name() == "sqlite" else None
        if path is not None:
            guard_ledger(path)


class WithDetails(LedgerError):
    """A refusal whose `--json` error object carries more than the message (`details`)."""

    def __init__(self, error: LedgerError, **details: Any) -> None:
        super().__init__(error.message)
        self.exit_code = error.exit_code
        self.details = details


@dataclass(frozen=True)
class Naming:
    """How a front end names an option in its errors."""

    cli: bool

    def __call__(self, name: str, option: Option) -> str:
        if not self.cli:
            return f"argument '{name}'"
        if option.positional:
            return (option.metavar or name.upper()).removesuffix("...")
        return flag_of(name, option)

    def invalid(self, name: str, option: Option, sentence: str) -> str:
        if self.cli:
            return f"Invalid value for '{self(name, option)}': {sentence}"
        return f"{self(name, option)}: {sentence}"


CLI, MCP = Naming(cli=True), Naming(cli=False)


def flag_of(name: str, option: Option) -> str:
    return option.flag or "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Command:
    """One command: `call(env, **options)` is its use case, returning an `Outcome` (or None
    for a command that prints as it goes, such as a server); `render(outcome, args)` prints
    the outcome as text, `args` being the checked options by name."""

    name: str
    doc: str  # what it does, then `Example: ...`
    call: Callable[..., Outcome | None]
    render: Callable[[Outcome, SimpleNamespace], None] | None = None
    options: Mapping[str, Option] = field(default_factory=dict)
    returns: str = ""  # the keys of its JSON object, in words (docs and the MCP tool)
    tool: bool = False  # also an MCP tool of the same name
    takes_json: bool = True  # takes --json
    one_shot: bool = False  # short and bounded: runs without the cycle collector (cli/entry.py)
    tool_doc: str = field(default="", init=False, repr=False, compare=False)  # the tool's
    tool_returns: str = field(default="", init=False, repr=False, compare=False)  # wording

    def __post_init__(self) -> None:
        """`doc`, `returns` as the command line words them; `tool_doc`, `tool_returns` as
        the MCP tool does (`worded`)."""
        for name in ("doc", "returns"):
            text = getattr(self, name)
            object.__setattr__(self, f"tool_{name}", worded(text, cli=False))
            object.__setattr__(self, name, worded(text, cli=True))

    @property
    def tool_name(self) -> str:
        """Its MCP tool's name: the command's, a group's space as `_` (`knowledge_export`)."""
        return self.name.replace(" ", "_")

    @property
    def summary(self) -> str:
        """The first paragraph of the help, on one line."""
        return _first_paragraph(self.doc)

    @property
    def tool_summary(self) -> str:
        """The summary as the MCP tool's description words it."""
        return _first_paragraph(self.tool_doc)

    def checked(self, values: Mapping[str, Any], naming: Naming) -> dict[str, Any]:
        """The options, every rule checked: each declared option by name (defaults filled
        in), or InputError with the first problem, as `naming` names the option."""
        unknown = [name for name in values if name not in self.options]
        if unknown:  # first: a misspelt name would otherwise read as a missing argument
            raise InputError(self._unknown(str(unknown[0])))
        out: dict[str, Any] = {}
        for name, option in self.options.items():
            value = values.get(name)
            if value is None or (option.many and value == [] and not option.required):
                if option.required or (option.tool_required and not naming.cli):
                    raise InputError(f"missing {naming(name, option)}")
                out[name] = [] if option.many else option.default
                continue
            problem, after_name = _problem(option, value)
            if problem is None and option.count is not None and len(value) != option.count:
                many = _WORDS[option.count] if option.count < len(_WORDS) else option.count
                problem = f"{self.name} needs exactly {many} {name}, not {len(value)}"
            if problem is not None:
                if after_name:
                    raise InputError(f"{naming(name, option)} {problem}")
                raise InputError(naming.invalid(name, option, problem))
            out[name] = _canonical(option, value)
        return out

    def _unknown(self, name: str) -> str:
        """`unknown argument 'X'`, the nearest known name if one is close, and every
        argument the command takes (only a tool's caller can name an undeclared one)."""
        from difflib import get_close_matches

        shown = display(name[:64] + ("…" if len(name) > 64 else ""))
        known = list(self.options)
        near = get_close_matches(name.lower().replace("-", "_"), known, n=1, cutoff=0.6)
        if not near:  # run_id for run, like for like_profile
            near = [k for k in known if name.startswith(k) or k.startswith(name)][:1]
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        takes = ", ".join(known) if known else "no arguments"
        return f"unknown argument '{shown}'{hint}; {self.tool_name} takes {takes}"


_WORDS = ("no", "one", "two", "three")


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.strip().split("\n\n")[0].split())


def _problem(option: Option, value: Any) -> tuple[str | None, bool]:
    """Why `value` breaks a rule of `option` (None if it does not), and whether the sentence
    follows the option's name (`--decision must be one of ...`) rather than saying what is
    wrong with its value (`-1 is not in the range x>=0`)."""
    if option.many and not isinstance(value, list):
        return f"{_as_json(value)} is not a list", False
    for item in value if option.many else [value]:
        wrong = _wrong_type(option.kind, item)
        if wrong is not None:
            return wrong, False
        if option.ge is not None and item < option.ge:
            return f"{_as_json(item)} is not in the range x>={option.ge}", False
        if option.le is not None and item > option.le:
            return f"{_as_json(item)} is not in the range x<={option.le}", False
        if option.choices and _canonical(option, item) not in option.choices:
            return f"must be one of {', '.join(option.choices)}, not {item!r}", True
        if isinstance(item, str) and not item.strip():
            # a blank text matches nothing and names nothing: a mistake, never a filter
            if option.file:
                return "needs a file path", True
            what = option.metavar or "value"
            return f"needs {'an' if what[0] in 'AEIOUaeiou' else 'a'} {what}, not a blank", True
        if isinstance(item, str) and "\x00" in item:
            return "holds a NUL character, which no file name or text here may hold", True
        if option.file and isinstance(item, str) and _utf8(item) and _too_long(item):
            return (
                f"names a path longer than the file system takes ({NAME_MAX} bytes a name, "
                f"{PATH_MAX} in all)",
                True,
            )
        if isinstance(item, str) and not _utf8(item):
            # the ledger keeps every text, paths included, as UTF-8 (RFC 8785)
            return "is not UTF-8 text (a byte that does not decode as UTF-8)", True
        if option.run_id and not RUN_ID_RE.fullmatch(item):
            return f"'{display(item)}' is not a run id (ids match {RUN_ID_RE.pattern})", False
    return None, False


NAME_MAX, PATH_MAX = 255, 4096
"""The longest file name and path Linux file systems take, in bytes."""


def _too_long(path: str) -> bool:
    data = path.encode("utf-8")
    return len(data) >= PATH_MAX or any(len(part) > NAME_MAX for part in data.split(b"/"))


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _canonical(option: Option, value: Any) -> Any:
    """A value as declared: the choice it names in any case (`keep` is `KEEP`)."""
    if option.choices and isinstance(value, str):
        return next((c for c in option.choices if c.lower() == value.lower()), value)
    return value


def _wrong_type(kind: type, value: Any) -> str | None:
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{_as_json(value)} is not a whole number"
    if not isinstance(value, kind):
        return f"{_as_json(value)} is not {'true or false' if kind is bool else 'a text'}"
    return None


def _as_json(value: Any) -> str:
    """A wrong value as its sender wrote it (`true`, `"3"`, `[1]`), not as Python shows it."""
    import json

    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**80:
        return f"a {'negative ' if value < 0 else ''}number over 80 digits long"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return display(text if len(text) <= 80 else text[:80] + "…")


# --- finding the commands ----------------------------------------------------------------

GROUPS = {
    "db": "Schema migrations, moving a ledger, database roles.",
    "skill": "The kernel-ledger skill for coding agents.",
    "knowledge": "The ledger's history for the workspace's knowledge store.",
}
"""The groups of commands (`db copy`), with their help; a group's commands are its modules
(cli/db_*.py)."""


SECTIONS = {
    "A campaign, in order": "template schema plan profile suggest assess decide record noise "
    "diagnose analyze",
    "Before a merge": "verify checkpoint check-merge checkout",
    "Looking back": "status show history compare report serve",
    "Moving runs": "export import knowledge db",
    "For agents": "mcp skill",
}
"""How `kernel-ledger --help` lists the commands: by the order an agent works in. A command
not named here is listed last, under "Other commands"."""


def module_name(name: str) -> str:
    """The module of a command: `check-merge` -> `cli.check_merge`, `import` -> `cli.import_`."""
    base = name.replace("-", "_").replace(" ", "_")
    return f"cli.{base}_" if keyword.iskeyword(base) else f"cli.{base}"


def find(name: str) -> Command | None:
    """The command named `name` (`record`, `db copy`), or None."""
    if name.startswith("_") or not name.replace("-", "").replace(" ", "").isalnum():
        return None
    module = module_name(name)
    if importlib.util.find_spec(module) is None:
        return None
    command = getattr(importlib.import_module(module), "COMMAND", None)
    return command if isinstance(command, Command) and command.name == name else None


def every_command(group: str | None = None) -> Iterator[Command]:
    """Every command (or every command of `group`), by name."""
    import cli

    names = sorted(m.name for m in pkgutil.iter_modules(cli.__path__) if not m.ispkg)
    prefix = f"{group}_" if group else ""
    for module in names:
        if module.startswith("_") or not module.startswith(prefix):
            continue
        command = getattr(importlib.import_module(f"cli.{module}"), "COMMAND", None)
        if isinstance(command, Command):
            yield command


def command_name(args: list[str]) -> str | None:
    """The first word after the program's options (`--db URL` before or after it)."""
    at = 0
    while at < len(args):
        if args[at] == "--db":
            at += 2
        elif args[at].startswith("--db="):
            at += 1
        elif args[at].startswith("-"):
            return None
        else:
            return args[at]
    return None


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
    if name is None:
        return None
    return name if name in GROUPS or find(name) is not None else None
