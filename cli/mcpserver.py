"""`kernel-ledger mcp`: the campaign and audit commands as MCP tools, over stdio.

One long-lived process: the ledger is opened on the first call and kept. The tools are the
commands declared `tool=True` (cli/declare.py), their arguments the command's options by
name, their input schema derived from those declarations and checked by the same rules as
the command line. docs/agents.md says what a client sees: the confinement of every path an
argument names (`Confinement`: the served folder, the client's roots, `--allow-path`), the
refusal of an argument over `MAX_ARGUMENT_CHARS`, results (the command's `--json` object)
and errors (its `Error: ...` line with options named as arguments, and `error_class`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from cli.declare import MCP, Command, Env, Option, every_command, flag_of
from ledger.errors import InputError, LedgerError
from ledger.text import display

EXIT_CLASSES = {
    1: "check failed",
    2: "rejected input",
    3: "conflict",
    4: "store unavailable",
    70: "internal error",
}
TYPES = {str: "string", int: "integer", bool: "boolean"}
MAX_ARGUMENT_CHARS = 64 * 1024
"""The longest text (or list of texts, together) one argument may hold."""


class Confinement:
    """Where a tool's paths may lead: the folder the server serves, the roots its client
    declared, and each `--allow-path`."""

    def __init__(self, served: Path, allowed: Iterable[Path] = ()) -> None:
        self.fixed = [_real(served), *(_real(Path(a)) for a in allowed)]
        self.client_roots: list[Path] = []

    def roots(self) -> list[Path]:
        return [*self.fixed, *self.client_roots]

    def declare(self, uris: Iterable[str]) -> None:
        """The client's roots (`file://` URIs; others name no folder here)."""
        roots = []
        for uri in uris:
            parsed = urlparse(str(uri))
            if parsed.scheme == "file" and parsed.path:
                roots.append(_real(Path(unquote(parsed.path))))
        self.client_roots = roots

    def check(self, command: Command, arguments: dict[str, Any]) -> None:
        """InputError naming the first argument whose path leads outside every root."""
        for name, option in command.options.items():
            if not (option.file or option.file_or_text) or arguments.get(name) is None:
                continue
            values = arguments[name] if option.many else [arguments[name]]
            for value in values:
                if option.file_or_text and ("\n" in value.strip() or not os.path.lexists(value)):
                    continue  # the note or key itself, not a file
                real = _real(Path(value))
                if not any(real == root or real.is_relative_to(root) for root in self.roots()):
                    raise InputError(
                        f"argument '{name}': {display(value)} is outside the folders this "
                        f"server may use ({', '.join(display(str(r)) for r in self.roots())}); "
                        "nothing was read or written (start it with --allow-path DIR to add one)"
                    )


def _real(path: Path) -> Path:
    try:
        return Path(os.path.realpath(path.expanduser()))
    except (OSError, RuntimeError, ValueError):
        return Path(os.path.abspath(path))


def refuse_oversized(arguments: dict[str, Any]) -> None:
    """An argument too long to be one is refused, naming only its name and size."""
    for name, value in arguments.items():
        if isinstance(value, str):
            size = len(value)
        elif isinstance(value, list):
            size = sum(len(v) if isinstance(v, str) else len(str(v)) for v in value[:10_000])
            size = max(size, len(value))
        else:
            size = 0  # a number or flag: its range is checked by its declaration
        shown = name if len(name) <= 64 else name[:64] + "…"
        if size > MAX_ARGUMENT_CHARS or len(name) > 64:
            raise InputError(
                f"argument '{display(shown)}' is {size} characters long, over the "
                f"{MAX_ARGUMENT_CHARS}-character limit of an argument"
            )


def tools() -> dict[str, Command]:
    """Every command that is also a tool, by name."""
    return {command.tool_name: command for command in every_command() if command.tool}


def input_schema(command: Command) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, from its options' declarations."""
    properties = {name: _schema(option, command) for name, option in command.options.items()}
    required = [n for n, o in command.options.items() if o.required or o.tool_required]
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}  # fmt: skip


def _schema(option: Option, command: Command | None = None) -> dict[str, Any]:
    one: dict[str, Any] = {"type": TYPES[option.kind]}
    if option.ge is not None:
        one["minimum"] = option.ge
    if option.le is not None:
        one["maximum"] = option.le
    if option.choices:
        one["enum"] = list(option.choices)
    if option.run_id:
        from ledger.inputs.jsonio import RUN_ID_RE

        one["pattern"] = RUN_ID_RE.pattern
    if option.many:
        one = {"type": "array", "items": one}
        if option.count is not None:
            one["minItems"] = one["maxItems"] = option.count
    help = option.tool_help if command is None else as_arguments(option.tool_help, command)
    if option.file:
        help += " A path on the server's machine, relative to the folder it runs in."
    one["description"] = help
    if not option.required and option.default is not None:
        one["default"] = option.default
    return one


def tool_description(command: Command) -> str:
    summary, returns = command.tool_summary, command.tool_returns
    text = f"{summary} Returns {returns}." if returns else summary
    return as_arguments(text, command)


def as_arguments(text: str, command: Command) -> str:
    """A description with the command's own flags (`--dry-run`, `--like-profile`) named as
    the tool's arguments (`dry_run`, `like_profile`), as its caller passes them."""
    options = sorted(command.options.items(), key=lambda item: -len(flag_of(*item)))
    for name, option in options:
        if option.positional:
            continue
        flag = re.escape(flag_of(name, option))
        text = re.sub(rf"(?<![\w`-]){flag}(?![\w-])", f"`{name}`", text)
    return text


def in_arguments(message: str, command: Command) -> str:
    """An error message with the command's own flags (`--force`, `--round N`) named as its
    arguments (`argument 'force'`), as a tool's caller knows them. A command line the
    message quotes (in backticks, or from `kernel-ledger` to the end of its clause) is
    another command's and is left as it is, as is every flag the command does not declare."""
    options = sorted(command.options.items(), key=lambda item: -len(flag_of(*item)))
    flags = [
        (re.compile(rf"(?<![\w-]){re.escape(flag_of(name, option))}{_metavar(option)}(?![\w-])"),
         f"argument '{name}'")
        for name, option in options
        if not option.positional
    ]  # fmt: skip
    pieces = _QUOTED.split(message)
    for at in range(0, len(pieces), 2):  # the odd pieces are the quoted command lines
        for pattern, argument in flags:
            pieces[at] = pattern.sub(argument, pieces[at])
    return "".join(pieces)


def _metavar(option: Option) -> str:
    return f"(?: {re.escape(option.metavar)})?" if option.metavar else ""


_QUOTED = re.compile(r"(`[^`]*`|(?<![^\s(])kernel-ledger [^;`)\n]*?(?=[;`)\n]|[.,](?:\s|$)|$))")
"""A command line a message quotes: a backticked span, or `kernel-ledger ...` up to the end
of its clause."""

MESSAGE_KEYS = frozenset({"error", "warnings", "notes", "reasons", "hint", "problems"})
"""The keys of a result whose texts are the ledger's own words to its caller (errors,
warnings, notes, reasons, hints), at any depth: only they name the command's flags. Every
other text is data (paths, hypotheses, stored payloads) and is returned as stored."""


def for_caller(document: Any, command: Command | None, key: str | None = None) -> Any:
    """A result or error object as a tool's caller reads it: every text under a
    `MESSAGE_KEYS` key with the command's flags named as its arguments (`in_arguments`)."""
    if command is None:
        return document
    if isinstance(document, dict):
        return {k: for_caller(v, command, k) for k, v in document.items()}
    if isinstance(document, list):
        return [for_caller(v, command, key) for v in document]
    if isinstance(document, str) and key in MESSAGE_KEYS:
        return in_arguments(document, command)
    return document


def error_document(message: str, exit_code: int) -> dict[str, Any]:
    line = " ".join(str(message).split())
    return {
        "status": "error",
        "error": line,
        "exit_code": exit_code,
        "error_class": EXIT_CLASSES.get(exit_code, "internal error"),
    }


class OpenedOnce(Env):
    """The server's ledger: its store opened on first use and kept for the process. A call
    that must not create a ledger (all but plan) is refused while none exists (exit 4)."""

    def __init__(self, url: str | None) -> None:
        super().__init__(url, as_json=True)
        self._store = None
        self.client: str | None = None

    def store(self, *, create: bool = False, check_schema: bool = True):
        if self._store is None:
            self._store = super().store(create=create, check_schema=check_schema)
            self._store.declare_client(self.client)
        return self._store

    def declare_client(self, name: str | None) -> None:
        """The name the client declared (initialize's clientInfo): the actor of every event
        appended for it records it (ledger/core/actors.py)."""
        self.client = name
        if self._store is not None:
            self._store.declare_client(name)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def call_tool(
    env: Env,
    name: str,
    arguments: dict[str, Any] | None,
    listed=None,
    confinement: Confinement | None = None,
):
    """(is_error, document, text) of one tool call; never raises. With `confinement`, a
    path outside its roots is refused before anything is opened."""
    listed = tools() if listed is None else listed
    command = listed.get(name)
    try:
        if command is None:
            shown = display(name[:64] + ("…" if len(name) > 64 else ""))
            raise InputError(f"no tool {shown!r}; the tools are {', '.join(listed)}")
        refuse_oversized(arguments or {})
        checked = command.checked(arguments or {}, MCP)
        if confinement is not None:
            confinement.check(command, checked)
        outcome = command.call(env, **checked)
    except LedgerError as exc:
        doc = {**error_document(exc.message, exc.exit_code), **getattr(exc, "details", {})}
        return _answer(True, doc, command)
    except Exception as exc:  # a bug: still one line, never a traceback
        doc = error_document(
            f"internal error ({type(exc).__name__}: {exc}); this is a bug in kernel-ledger", 70
        )
        return _answer(True, doc, None)
    if outcome.failure is not None:
        doc = {**outcome.document, **error_document(outcome.failure, 1)}
        doc["status"] = outcome.document.get("status", "error")
        return _answer(True, doc, command)
    return _answer(False, outcome.document, command)


def _answer(is_error: bool, document: dict[str, Any], command: Command | None):
    """(is_error, document, text) of a call, its words as its caller reads them: the one
    place a result, a failed check or an error is worded for a tool's caller."""
    document = for_caller(document, command)
    if is_error:
        return True, document, f"Error: {document['error']}"
    return False, document, json.dumps(document, ensure_ascii=False)


STATUS_URI = "kernel-ledger://runs/{run_id}/status"
REPORT_URI = "kernel-ledger://runs/{run_id}/report"
INPUT_URI = "kernel-ledger://inputs/{kind}/{what}"
"""Each input file's JSON Schema (`what` schema) and template (`what` template)."""


def input_uris() -> list[tuple[str, str]]:
    """(uri, mime type) of every input file's schema and template."""
    from cli.schema import INPUT_KINDS

    return [
        (INPUT_URI.format(kind=kind, what=what), mime)
        for kind in INPUT_KINDS
        for what, mime in (("schema", "application/schema+json"), ("template", "text/plain"))
    ]


def read_resource(env: Env, uri: str, listed: dict[str, Command]) -> tuple[str, str]:
    """(mime type, text) of a run's status (JSON) or report (Markdown, as analyze writes it,
    with the conclusion the run has or would have now)."""
    if uri.startswith("kernel-ledger://inputs/"):
        kind, _, what = uri.removeprefix("kernel-ledger://inputs/").partition("/")
        if what in ("schema", "template"):
            command = listed[what]
            document = command.call(env, **command.checked({"kind": kind}, MCP)).document
            if what == "template":
                return "text/plain", document["template"]
            return "application/schema+json", json.dumps(document["schema"], indent=2)
    prefix, _, rest = uri.partition("kernel-ledger://runs/")
    run_id, _, what = rest.rpartition("/")
    if prefix or not run_id or what not in ("status", "report"):
        raise InputError(f"no resource {uri!r}; try {STATUS_URI}, {REPORT_URI} or {INPUT_URI}")
    if what == "status":
        status = listed["status"]
        return "application/json", json.dumps(
            status.call(env, **status.checked({"run": run_id}, MCP)).document
        )
    from ledger.services import analysis

    service = env.service()
    view = service.conclusion_preview(service.full_view(run_id))
    document = analysis.analysis_document(
        view, service.planned_event(run_id), last_event_hash=service.head_hash(run_id)
    )
    return "text/markdown", analysis.report_markdown(document)


async def client_roots(ctx: Any, confinement: Confinement, state: dict[str, bool]) -> None:
    """Ask the client for its roots when it declares the capability, once and again after
    it says they changed; a client that does not answer within 5 s has declared none."""
    import warnings

    import anyio

    if state.get("asked"):
        return
    state["asked"] = True
    capabilities = getattr(ctx.session, "client_capabilities", None)
    if capabilities is None or getattr(capabilities, "roots", None) is None:
        return
    try:
        with anyio.fail_after(5), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            listed = await ctx.session.list_roots()
    except Exception:  # no answer, or no back channel: no client roots
        confinement.declare([])
        return
    confinement.declare(str(root.uri) for root in listed.roots)


def client_name(ctx: Any) -> str | None:
    """The name the client declared in `initialize` (clientInfo.name), if any."""
    for holder in (getattr(ctx, "connection", None), getattr(ctx, "session", None)):
        params = getattr(holder, "client_params", None)
        name = getattr(getattr(params, "client_info", None), "name", None)
        if isinstance(name, str) and name:
            return name
    return None


def build_server(env: Env, confinement: Confinement | None = None):
    import mcp_types as types
    from mcp.server.lowlevel import Server

    confinement = confinement or Confinement(Path.cwd())
    roots_state: dict[str, bool] = {}
    listed = tools()
    listing = [
        types.Tool(
            name=name,
            description=tool_description(command),
            input_schema=input_schema(command),
        )
        for name, command in listed.items()
    ]

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def on_call_tool(ctx, params) -> types.CallToolResult:
        await client_roots(ctx, confinement, roots_state)
        if isinstance(env, OpenedOnce):
            env.declare_client(client_name(ctx))
        is_error, document, text = call_tool(
            env, params.name, params.arguments, listed, confinement
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=document,
            is_error=is_error,
        )

    async def on_list_resources(ctx, params) -> types.ListResourcesResult:
        is_error, document, _ = call_tool(env, "status", {}, listed)
        runs = [] if is_error else [r["run_id"] for r in document["runs"]]
        inputs = [
            types.Resource(name=uri.removeprefix("kernel-ledger://"), uri=uri, mime_type=mime)
            for uri, mime in input_uris()
        ]
        return types.ListResourcesResult(
            resources=inputs
            + [
                types.Resource(
                    name=f"{run} status",
                    uri=STATUS_URI.format(run_id=run),
                    mime_type="application/json",
                )
                for run in runs
            ]
        )

    async def on_list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name="run status", uri_template=STATUS_URI, mime_type="application/json"
                ),
                types.ResourceTemplate(
                    name="run report", uri_template=REPORT_URI, mime_type="text/markdown"
                ),
                types.ResourceTemplate(
                    name="input file schema or template (kind: config, round, manifest, "
                    "case-matrix, measurements, decide; what: schema, template)",
                    uri_template=INPUT_URI,
                    mime_type="text/plain",
                ),
            ]
        )

    async def on_read_resource(ctx, params) -> types.ReadResourceResult:
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        try:
            mime, text = read_resource(env, uri, listed)
        except LedgerError as exc:
            raise MCPError(code=-32602, message=exc.message) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    async def on_roots_list_changed(ctx, params) -> None:
        roots_state.clear()  # asked again on the next call

    import warnings
    from importlib.metadata import version

    with warnings.catch_warnings():  # MCP roots are deprecated in newer protocol versions
        warnings.simplefilter("ignore")
        return Server(
            "kernel-ledger",
            version=version("kernel-ledger"),
            instructions=(
                "An event-sourced ledger for kernel optimization campaigns: plan a run, record "
                "each round, analyze once, verify and check-merge before merging. Results are "
                "the objects `kernel-ledger ... --json` prints."
            ),
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            on_list_resources=on_list_resources,
            on_list_resource_templates=on_list_resource_templates,
            on_read_resource=on_read_resource,
            on_roots_list_changed=on_roots_list_changed,
        )


def unreadable_reply(exc: Exception):
    """The JSON-RPC error answering a line the transport could not read as a message (not
    JSON, a number too long to read, no method): the SDK drops such a line unanswered and
    its sender would wait forever. Its id where the line is JSON with one, else null."""
    import mcp_types as types

    errors = exc.errors() if hasattr(exc, "errors") else []
    raw = errors[0].get("input") if errors else None
    reason = str(errors[0].get("msg", "")) if errors else str(exc)
    message, code = (raw if isinstance(raw, dict) else None), types.PARSE_ERROR
    if isinstance(raw, str):
        try:  # a number literal too long to read stands in as 0: only the id is wanted
            message = json.loads(raw, parse_int=lambda t: int(t) if len(t) <= 4000 else 0)
        except (ValueError, RecursionError):
            message = None
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        request_id = None
    if "number out of range" in reason:
        reason = "a number in it is too long to read (at most 4300 digits)"
    elif message is not None and "Invalid JSON" not in reason:
        code = types.INVALID_REQUEST
        reason = "it is JSON but not a JSON-RPC 2.0 request, notification or response"
    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(
            code=code, message=display(f"unreadable message: {reason}; nothing was done")[:300]
        ),
    )


def serve(url: str | None, allow_paths: Iterable[str] = ()) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin, confined to the working
    folder, the client's roots and `allow_paths`. A line that is no message is answered
    (`unreadable_reply`), never left unanswered."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    env = OpenedOnce(url)
    server = build_server(env, Confinement(Path.cwd(), [Path(p) for p in allow_paths]))

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def forward() -> None:
                async with send:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            await write_stream.send(SessionMessage(unreadable_reply(item)))
                        else:
                            await send.send(item)

            async with anyio.create_task_group() as group:
                group.start_soon(forward)
                await server.run(receive, write_stream, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        env.close()
