"""template: a minimal valid example of one kind of input file, derived from its model."""

from __future__ import annotations

import sys

from cli.declare import Command, Env, Outcome
from cli.schema import kind_option


def template(env: Env, kind: str) -> Outcome:
    from ledger.inputs.schemas import template as example

    text = example(kind)
    return Outcome({"status": "ok", "kind": kind, "template": text}, text)


def say_template(out: Outcome, args) -> None:
    sys.stdout.write(out.value)


COMMAND = Command(
    "template",
    """[[Print||Return]] a minimal valid example of one kind of input file: the fields it needs with
    example values, and every optional field beside them as a `//` line (its type, unit,
    default and meaning). Drop the `//` lines and replace the values: the rest is the JSON
    the command accepts.

    Example: kernel-ledger template config > config.json
    """,
    template,
    say_template,
    {"kind": kind_option("`schema KIND` [[prints||returns]] its JSON Schema")},
    returns='`status` "ok", `kind`, `template` (the text)',
    tool=True,
    one_shot=True,
)
