"""`kernel-ledger mcp`: the campaign and audit commands as MCP tools, over stdio.

One long-lived process: the ledger is opened on the first call and kept, so a call costs the
use case, not a Python start-up. Each tool's arguments are a pydantic model whose fields are
the command's options (`run` is `--run`, `output_dir` is `--output-dir`); its input schema is
that model's JSON schema, and the arguments are validated by it before anything is opened.
The files a tool names are read and checked by the same models as on the command line.

A tool's result is exactly the object the command prints with `--json` (structured content,
and the same JSON as text). An error is a tool error: the text is the command's one-line
`Error: ...`, the structured content its `--json` error object plus `error_class`, the class
of its exit code (rejected input, check failed, conflict, store unavailable).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cli import tools
from ledger.errors import InputError, LedgerError
from ledger.inputs.jsonio import RUN_ID_RE

EXIT_CLASSES = {
    1: "check failed",
    2: "rejected input",
    3: "conflict",
    4: "store unavailable",
    70: "internal error",
}


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Run = Annotated[str, Field(description="The run id (--run).", pattern=RUN_ID_RE.pattern)]
Path_ = Annotated[str, Field(description="A file path, relative to the server's folder.")]
OptPath = Annotated[str | None, Field(description="A file path (optional).")]
Round = Annotated[int, Field(description="A round number (0: the baseline).", ge=0)]


class PlanArgs(Args):
    """Validate a run configuration and lock the run (baseline, cases, objective); with
    dry_run, only check it."""

    config: Path_
    dry_run: bool = False


class RecordArgs(Args):
    """Record one round (a round result JSON file) and return the controller's decision."""

    run: Run
    result: Path_


class ProfileArgs(Args):
    """Ingest profiler output for one kernel of a run (name exactly one of baseline, round,
    kernel) and attribute its bottleneck."""

    run: Run
    path: Path_
    baseline: bool = False
    round: int | None = Field(None, ge=0, description="Profile of round N's candidate.")
    kernel: str | None = Field(None, description="Profile of this kernel (sha256).")
    kernel_name: str | None = Field(None, description="Which kernel's rows in the profile.")
    shape: str | None = Field(
        None, description="Which input shape or ncu launch size, where there are several."
    )


class NoiseArgs(Args):
    """Record an A/A remeasure of the current best kernel (a measurements JSON file)."""

    run: Run
    measurements: Path_


class DiagnoseArgs(Args):
    """Record a new bottleneck model after repeated failures; the failure count restarts."""

    run: Run
    bottleneck: str = Field(description="The new bottleneck class.")
    evidence: str = Field(description="What supports it.")


class StatusArgs(Args):
    """Run status and best kernel; every run when run is not given."""

    run: str | None = Field(None, description="One run in detail.")


class HistoryArgs(Args):
    """Rounds across runs, oldest first, filtered; or, with like_profile, the past rounds
    that started from a similar profile, nearest first."""

    run: str | None = None
    op: str | None = None
    soc: str | None = None
    decision: str | None = Field(None, description="KEEP, DISCARD, NOISE or FAIL.")
    bottleneck: str | None = None
    mechanism: str | None = None
    like_profile: str | None = Field(None, description="A profile file or folder.")
    kernel_name: str | None = None
    search: str | None = Field(None, description="Text in hypothesis or change.")
    since: str | None = Field(None, description="Recorded at or after (UTC date or time).")
    until: str | None = Field(None, description="Recorded before (UTC date or time).")
    limit: int | None = Field(None, ge=1)


class ShowArgs(Args):
    """One round in full: inputs, validation, measurements, profiles, decision and flags."""

    run: Run
    round: Round


class CompareArgs(Args):
    """Per-case medians of two rounds and their relative change."""

    run: Run
    rounds: list[int] = Field(min_length=2, max_length=2, description="Two rounds (0: baseline).")


class AnalyzeArgs(Args):
    """Conclude the run (once) and write analysis.json, report.md and manifest.json."""

    run: Run
    output_dir: str | None = Field(
        None, description="Default: .vaws-local/ascend-triton/optimization/<run>."
    )
    force: bool = Field(False, description="Overwrite output files that hold other content.")


class VerifyArgs(Args):
    """Check hashes, chains, canonical payloads, decisions, projections and checkpoints."""

    run: str | None = None
    checkpoint: str | None = Field(None, description="A pinned checkpoint note, or its file.")
    verifier_key: str | None = None
    artifacts: bool = False
    bundle: str | None = Field(None, description="Check an exported bundle offline.")
    chain: bool = False


class CheckMergeArgs(Args):
    """The pre-merge gate: passes only if the run concluded passed, the file is its best
    kernel, the run verifies and the pinned checkpoint (if given) holds."""

    run: Run
    kernel: Path_
    checkpoint: str | None = None
    verifier_key: str | None = None
    strict_artifacts: bool = False
    markdown: bool = False


class CheckoutArgs(Args):
    """Restore the best kernel (or a round's candidate) byte for byte to a file."""

    run: Run
    out: Path_
    round: int | None = Field(None, ge=0)
    force: bool = False


@dataclass(frozen=True)
class Tool:
    args: type[Args]
    call: Callable[..., tools.Outcome]
    renamed: tuple[tuple[str, str], ...] = ()  # argument -> the use case's parameter

    def __call__(self, ledger: tools.Ledger, arguments: dict[str, Any]) -> tools.Outcome:
        values = self.args.model_validate(arguments).model_dump()
        for name, parameter in self.renamed:
            values[parameter] = values.pop(name)
        return self.call(ledger, **values)


ROUND = (("round", "round_no"),)
TOOLS: dict[str, Tool] = {
    "plan": Tool(PlanArgs, tools.plan),
    "record": Tool(RecordArgs, tools.record),
    "profile": Tool(ProfileArgs, tools.profile, ROUND),
    "noise": Tool(NoiseArgs, tools.noise),
    "diagnose": Tool(DiagnoseArgs, tools.diagnose),
    "status": Tool(StatusArgs, tools.status),
    "history": Tool(HistoryArgs, tools.history),
    "show": Tool(ShowArgs, tools.show, ROUND),
    "compare": Tool(CompareArgs, tools.compare),
    "analyze": Tool(AnalyzeArgs, tools.analyze),
    "verify": Tool(VerifyArgs, tools.verify),
    "check-merge": Tool(CheckMergeArgs, tools.check_merge),
    "checkout": Tool(CheckoutArgs, tools.checkout, ROUND),
}


def input_schema(args: type[Args]) -> dict[str, Any]:
    schema = args.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


def argument_error(exc: ValidationError) -> InputError:
    """The first problem with a tool's arguments, as one sentence."""
    first = exc.errors()[0]
    name = ".".join(str(part) for part in first["loc"]) or "arguments"
    if first["type"] == "missing":
        return InputError(f"missing argument {name!r}")
    if first["type"] == "extra_forbidden":
        return InputError(f"unknown argument {name!r}")
    return InputError(f"argument {name!r}: {first['msg']}")


def error_document(message: str, exit_code: int) -> dict[str, Any]:
    line = " ".join(str(message).split())
    return {
        "status": "error",
        "error": line,
        "exit_code": exit_code,
        "error_class": EXIT_CLASSES.get(exit_code, "internal error"),
    }


class OpenedOnce(tools.Ledger):
    """The server's ledger: its store opened on first use and kept for the process. A call
    that must not create a ledger (all but plan) is refused while none exists (exit 4)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self._store = None
        super().__init__(self._open)

    def _open(self, *, create: bool = False):
        if self._store is None:
            from ledger.store.eventstore import Store
            from ledger.store.urls import resolve_url

            self._store = Store(resolve_url(self.url), create=create)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def call_tool(ledger: tools.Ledger, name: str, arguments: dict[str, Any] | None):
    """(is_error, document, text) of one tool call; never raises."""
    tool = TOOLS.get(name)
    try:
        if tool is None:
            raise InputError(f"no tool {name!r}; the tools are {', '.join(TOOLS)}")
        try:
            outcome = tool(ledger, arguments or {})
        except ValidationError as exc:
            raise argument_error(exc) from None
    except LedgerError as exc:
        doc = error_document(exc.message, exc.exit_code)
        return True, doc, f"Error: {doc['error']}"
    except Exception as exc:  # a bug: still one line, never a traceback
        doc = error_document(
            f"internal error ({type(exc).__name__}: {exc}); this is a bug in kernel-ledger", 70
        )
        return True, doc, f"Error: {doc['error']}"
    if outcome.failure is not None:
        doc = {**outcome.document, **error_document(outcome.failure, 1)}
        doc["status"] = outcome.document.get("status", "error")
        return True, doc, f"Error: {doc['error']}"
    return False, outcome.document, json.dumps(outcome.document, ensure_ascii=False)


STATUS_URI = "kernel-ledger://runs/{run_id}/status"
REPORT_URI = "kernel-ledger://runs/{run_id}/report"


def read_resource(ledger: tools.Ledger, uri: str) -> tuple[str, str]:
    """(mime type, text) of a run's status (JSON) or report (Markdown, as analyze writes it,
    with the conclusion the run has or would have now)."""
    prefix, _, rest = uri.partition("kernel-ledger://runs/")
    run_id, _, what = rest.rpartition("/")
    if prefix or not run_id or what not in ("status", "report"):
        raise InputError(f"no resource {uri!r}; try {STATUS_URI} or {REPORT_URI}")
    if what == "status":
        return "application/json", json.dumps(tools.status(ledger, run_id).document)
    from ledger.services import analysis

    service = ledger.service()
    view = service.conclusion_preview(service.full_view(run_id))
    document = analysis.analysis_document(
        view, service.planned_event(run_id), last_event_hash=service.head_hash(run_id)
    )
    return "text/markdown", analysis.report_markdown(document)


def build_server(ledger: tools.Ledger):
    import mcp_types as types
    from mcp.server.lowlevel import Server

    listing = [
        types.Tool(
            name=name,
            description=(tool.args.__doc__ or "").strip(),
            input_schema=input_schema(tool.args),
        )
        for name, tool in TOOLS.items()
    ]

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listing)

    async def on_call_tool(ctx, params) -> types.CallToolResult:
        is_error, document, text = call_tool(ledger, params.name, params.arguments)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=document,
            is_error=is_error,
        )

    async def on_list_resources(ctx, params) -> types.ListResourcesResult:
        is_error, document, _ = call_tool(ledger, "status", {})
        runs = [] if is_error else [r["run_id"] for r in document["runs"]]
        return types.ListResourcesResult(
            resources=[
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
            ]
        )

    async def on_read_resource(ctx, params) -> types.ReadResourceResult:
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        try:
            mime, text = read_resource(ledger, uri)
        except LedgerError as exc:
            raise MCPError(code=-32602, message=exc.message) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    from importlib.metadata import version

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
    )


def serve(url: str | None) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    import anyio
    from mcp.server.stdio import stdio_server

    ledger = OpenedOnce(url)
    server = build_server(ledger)

    async def run() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        ledger.close()
