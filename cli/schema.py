"""schema: the JSON Schema of one kind of input file, derived from its model."""

from __future__ import annotations

import json

from cli.declare import REQUIRED, Command, Env, Option, Outcome
from cli.output import say

INPUT_KINDS = ("config", "round", "manifest", "case-matrix", "measurements", "decide")
"""The kinds of input file (ledger/inputs/schemas.py's KINDS, named here so that the
declaration imports no model)."""


def kind_option(what: str) -> Option:
    return Option(
        f"Which input file: {', '.join(INPUT_KINDS)}; {what}.",
        default=REQUIRED,
        metavar="KIND",
        positional=True,
        choices=INPUT_KINDS,
    )


def schema(env: Env, kind: str) -> Outcome:
    from ledger.inputs.schemas import json_schema

    document = json_schema(kind)
    return Outcome({"status": "ok", "kind": kind, "schema": document}, document)


def say_schema(out: Outcome, args) -> None:
    say(json.dumps(out.value, indent=2, ensure_ascii=False))


COMMAND = Command(
    "schema",
    """[[Print||Return]] the JSON Schema of one kind of input file: every field with its type,
    default, unit and meaning, derived from the models the commands validate with.

    Example: kernel-ledger schema round
    """,
    schema,
    say_schema,
    {"kind": kind_option("`template KIND` [[prints||returns]] a ready example")},
    returns='`status` "ok", `kind`, `schema` (the JSON Schema)',
    tool=True,
    one_shot=True,
)
