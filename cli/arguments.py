"""The arguments of the campaign and audit use cases, one pydantic model each: the command
line and the MCP server (`kernel-ledger mcp`) both validate a call with these models before
anything is opened, so a rule on an argument (a run id's pattern, a round's range, two
rounds to compare) is written once, here.

A model's fields are the command's options: `run` is `--run`, `output_dir` is
`--output-dir`; the MCP tool's input schema is the model's JSON schema. The command line
hands over the options typer parsed (`Tool.options`, through `cli.common.run_use_case`), the
server the arguments a client sent (`Tool.__call__`). A rule that fails is one sentence
naming the argument as each front end names it (`Invalid value for '--round': ...` on the
command line, `argument 'round': ...` over MCP), exit code 2, and nothing is written.

Imported only by the commands that run a use case: `cli/tools.py` stays free of pydantic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, create_model

from cli import tools
from cli.common import MAX_COUNT, not_a_run_id
from ledger.errors import InputError
from ledger.inputs.jsonio import RUN_ID_RE


def _run_id(value: str) -> str:
    problem = not_a_run_id(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _two(rounds: list[int]) -> list[int]:
    if len(rounds) != 2:
        raise ValueError(f"compare needs exactly two rounds, not {len(rounds)}")
    return rounds


class Args(BaseModel):
    # built on first use: a command validates with its own model only
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)
    # arguments a tool's caller must give, though the command line may leave them out
    # (`checkout` prints the kernel without --out; a tool's result cannot carry it)
    tool_requires: ClassVar[tuple[str, ...]] = ()


Run = Annotated[
    str,
    AfterValidator(_run_id),
    Field(description="The run id (--run).", json_schema_extra={"pattern": RUN_ID_RE.pattern}),
]
OptRun = Annotated[
    str | None,
    AfterValidator(lambda v: v if v is None else _run_id(v)),
    Field(json_schema_extra={"pattern": RUN_ID_RE.pattern}),
]
Path_ = Annotated[str, Field(description="A file path, relative to the server's folder.")]
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Round = Annotated[int, Field(description="A round number (0: the baseline).", ge=0, le=MAX_COUNT)]


Opt = str | None

# use case -> (what it does, its arguments as (type, default); ... is required). Each model
# is made on first use (`model`): a command makes and builds its own only.
ARGUMENTS: dict[str, tuple[str, dict[str, Any]]] = {
    "plan": (
        """Validate a run configuration and lock the run (baseline, cases, objective); with
    dry_run, only check it.""",
        {"config": (Path_, ...), "dry_run": (bool, False)},
    ),
    "record": (
        "Record one round (a round result JSON file) and return the controller's decision.",
        {"run": (Run, ...), "result": (Path_, ...)},
    ),
    "profile": (
        """Ingest profiler output for one kernel of a run (name exactly one of baseline, round,
    kernel) and attribute its bottleneck.""",
        {
            "run": (Run, ...),
            "path": (Path_, ...),
            "baseline": (bool, False),
            "round": (Count | None, Field(None, description="Profile of round N's candidate.")),
            "kernel": (str | None, Field(None, description="Profile of this kernel (sha256).")),
            "kernel_name": (
                str | None,
                Field(None, description="Which kernel's rows in the profile."),
            ),
            "shape": (
                str | None,
                Field(
                    None,
                    description="Which input shape or ncu launch size, where there are several.",
                ),
            ),
        },
    ),
    "noise": (
        "Record an A/A remeasure of the current best kernel (a measurements JSON file).",
        {"run": (Run, ...), "measurements": (Path_, ...)},
    ),
    "diagnose": (
        "Record a new bottleneck model after repeated failures; the failure count restarts.",
        {
            "run": (Run, ...),
            "bottleneck": (str, Field(description="The new bottleneck class.")),
            "evidence": (str, Field(description="What supports it.")),
        },
    ),
    "status": (
        "Run status and best kernel; every run when run is not given.",
        {"run": (OptRun, Field(None, description="One run in detail."))},
    ),
    "history": (
        """Rounds across runs, oldest first, filtered; or, with like_profile, the past rounds
    that started from a similar profile, nearest first.""",
        {
            "run": (OptRun, None),
            "op": (Opt, None),
            "soc": (Opt, None),
            "decision": (str | None, Field(None, description="KEEP, DISCARD, NOISE or FAIL.")),
            "bottleneck": (Opt, None),
            "mechanism": (Opt, None),
            "like_profile": (str | None, Field(None, description="A profile file or folder.")),
            "kernel_name": (Opt, None),
            "search": (str | None, Field(None, description="Text in hypothesis or change.")),
            "since": (
                str | None,
                Field(None, description="Recorded at or after (UTC date or time)."),
            ),
            "until": (str | None, Field(None, description="Recorded before (UTC date or time).")),
            "limit": (int | None, Field(None, ge=1, le=MAX_COUNT)),
        },
    ),
    "show": (
        "One round in full: inputs, validation, measurements, profiles, decision and flags.",
        {"run": (Run, ...), "round": (Round, ...)},
    ),
    "compare": (
        "Per-case medians of two rounds and their relative change.",
        {
            "run": (Run, ...),
            "rounds": (
                Annotated[list[Count], AfterValidator(_two)],
                Field(
                    description="Two rounds (0: baseline).",
                    json_schema_extra={"minItems": 2, "maxItems": 2},
                ),
            ),
        },
    ),
    "analyze": (
        "Conclude the run (once) and write analysis.json, report.md and manifest.json.",
        {
            "run": (Run, ...),
            "output_dir": (
                str | None,
                Field(None, description="Default: .vaws-local/ascend-triton/optimization/<run>."),
            ),
            "force": (
                bool,
                Field(False, description="Overwrite output files that hold other content."),
            ),
        },
    ),
    "verify": (
        "Check hashes, chains, canonical payloads, decisions, projections and checkpoints.",
        {
            "run": (OptRun, None),
            "checkpoint": (
                str | None,
                Field(None, description="A pinned checkpoint note, or its file."),
            ),
            "verifier_key": (Opt, None),
            "artifacts": (bool, False),
            "bundle": (str | None, Field(None, description="Check an exported bundle offline.")),
            "chain": (bool, False),
        },
    ),
    "check-merge": (
        """The pre-merge gate: passes only if the run concluded passed, the file is its best
    kernel, the run verifies and the pinned checkpoint (if given) holds.""",
        {
            "run": (Run, ...),
            "kernel": (Path_, ...),
            "checkpoint": (Opt, None),
            "verifier_key": (Opt, None),
            "strict_artifacts": (bool, False),
            "markdown": (bool, False),
        },
    ),
    "checkout": (
        "Restore the best kernel (or a round's candidate) byte for byte to a file.",
        {
            "run": (Run, ...),
            "out": (
                str | None,
                Field(None, description="The file to write the kernel to (required)."),
            ),
            "round": (Count | None, None),
            "force": (bool, False),
        },
    ),
}


@functools.cache
def model(use_case: str) -> type[Args]:
    """The arguments of `use_case` as a pydantic model (`record` -> `RecordArgs`)."""
    doc, fields = ARGUMENTS[use_case]
    name = "".join(part.title() for part in use_case.split("-")) + "Args"
    made = create_model(name, __base__=Args, __doc__=doc, __module__=__name__, **fields)
    made.tool_requires = TOOL_REQUIRES.get(use_case, ())
    return made


TOOL_REQUIRES = {"checkout": ("out",)}


def problem(error: Mapping[str, Any]) -> str:
    """One failed rule as a sentence (without the argument's name)."""
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "greater_than_equal":
        return f"{value} is not in the range x>={ctx['ge']}"
    if kind == "less_than_equal":
        return f"{value} is not in the range x<={ctx['le']}"
    return str(error["msg"])


def argument_error(exc: ValidationError, named: Callable[[str], str] = repr) -> InputError:
    """The first problem with a call's arguments, as one sentence; `named` gives the name
    the front end knows an argument by (`'run'` over MCP, `'--run'` on the command line)."""
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else "arguments"
    if first["type"] == "missing":
        return InputError(f"missing argument {named(field)}")
    if first["type"] == "extra_forbidden":
        return InputError(f"unknown argument {named(field)}")
    return InputError(f"argument {named(field)}: {problem(first)}")


@dataclass(frozen=True)
class Tool:
    name: str
    call: Callable[..., tools.Outcome]
    renamed: tuple[tuple[str, str], ...] = ()  # argument -> the use case's parameter

    @property
    def args(self) -> type[Args]:
        return model(self.name)

    def __call__(self, ledger: tools.Ledger, arguments: dict[str, Any]) -> tools.Outcome:
        """A call with a client's arguments (MCP): refused with `argument 'name': ...`."""
        try:
            values = self.args.model_validate(arguments).model_dump()
        except ValidationError as exc:
            raise argument_error(exc) from None
        for name, parameter in self.renamed:
            values[parameter] = values.pop(name)
        return self.call(ledger, **values)

    def options(self, options: Mapping[str, Any], flags: Mapping[str, str]) -> dict[str, Any]:
        """The options typer parsed (every one but --json), keyed by the command function's
        parameter names, checked by the model and keyed again by those names; a failed rule
        is `Invalid value for '--round': ...`, with the option as `flags` names it."""
        to_field = {parameter: name for name, parameter in self.renamed}
        values = {
            to_field.get(key, key): list(value) if isinstance(value, tuple) else value
            for key, value in options.items()
            if key != "as_json"
        }
        try:
            checked = self.args.model_validate(values).model_dump()
        except ValidationError as exc:
            first = exc.errors()[0]
            field = str(first["loc"][0]) if first["loc"] else ""
            flag = flags.get(dict(self.renamed).get(field, field), field)
            if first["type"] in ("missing", "extra_forbidden"):  # a bug: options are the fields
                raise argument_error(exc, lambda _: repr(flag)) from None
            raise InputError(f"Invalid value for '{flag}': {problem(first)}") from None
        for name, parameter in self.renamed:
            checked[parameter] = checked.pop(name)
        return checked


ROUND = (("round", "round_no"),)
TOOLS: dict[str, Tool] = {
    "plan": Tool("plan", tools.plan),
    "record": Tool("record", tools.record),
    "profile": Tool("profile", tools.profile, ROUND),
    "noise": Tool("noise", tools.noise),
    "diagnose": Tool("diagnose", tools.diagnose),
    "status": Tool("status", tools.status),
    "history": Tool("history", tools.history),
    "show": Tool("show", tools.show, ROUND),
    "compare": Tool("compare", tools.compare),
    "analyze": Tool("analyze", tools.analyze),
    "verify": Tool("verify", tools.verify),
    "check-merge": Tool("check-merge", tools.check_merge),
    "checkout": Tool("checkout", tools.checkout, ROUND),
}
