"""decide: the decision for given measurements, as a dry run with no ledger."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome
from cli.output import pct, say


def decide(env: Env, input: str, jsonl: bool) -> Outcome:
    from ledger.errors import InputError
    from ledger.inputs.jsonio import (
        display,
        note_lines,
        notes_refusal,
        parse_json_bytes,
        read_bytes,
    )
    from ledger.services.dryrun import decide_one, parse_input

    path = Path(input)
    data = read_bytes(path, "decide input")
    shown = display(path)
    if not jsonl:
        item = parse_input(parse_json_bytes(data, "decide input", shown), shown)
        result = decide_one(item, shown)
        return Outcome({"status": "ok", **result}, result)
    lines = data.splitlines()
    notes = note_lines([line.decode("utf-8", "replace") for line in lines])
    if notes:
        raise notes_refusal("decide input", shown, notes)
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{shown} line {number}"
        value = parse_json_bytes(line, "decide input", where)
        if not isinstance(value, dict):
            raise InputError(f"{where} must hold a JSON object")
        items.append((where, parse_input(value, where)))
    if not items:
        raise InputError(f"decide input {shown} has no lines")
    results = [decide_one(item, where) for where, item in items]  # all checked before output
    return Outcome({"status": "ok", "count": len(results), "results": results}, results)


def say_decide(out: Outcome, args) -> None:
    if args.jsonl:  # one JSON object per input line; with --json, one object listing them
        for result in out.value:
            sys.stdout.write(json.dumps(result, allow_nan=False) + "\n")
        return
    result = out.value
    line = (
        f"{result['decision']}  I {pct(result['relative_improvement'])}  "
        f"R {pct(result['worst_case_regression'])}  ({result['evidence']})"
    )
    if "settled" in result:
        line += (
            f"  settled at {result['repeats_used']} repeats"
            if result["settled"]
            else f"  not settled at {result['repeats_used']} repeats: "
            f"{result['more_repeats']} more per case"
        )
    if result.get("advice"):
        line += f"  ({', '.join(result['flags'])}: {result['advice']})"
    say(line)
    if result.get("note"):
        say(f"  note: {result['note']}")


COMMAND = Command(
    "decide",
    """Dry run: the decision for given measurements; needs no ledger and writes nothing.

    Each input is {"objective", "cases", "best", "candidate", "statistics"?, "drift_sigma"?,
    "reference"?, "session"?, "best_session"?}; a measurement is {"case_id", "median_us",
    "repeats"} or {"case_id", "samples_us"}. `reference` (the best kernel measured interleaved
    with the candidate, in its session) replaces `best`; without it, a `session` and
    `best_session` that differ make a KEEP clear the drift. With `statistics.sequential` the
    result says whether the round is `settled`, at `repeats_used` samples per case, or how
    many `more_repeats` per case the next look needs.

    Its bootstrap's seed comes from its input (record's from the run id, round and samples),
    so bootstrap bounds can differ slightly from record's; `assess` reproduces record exactly.

    Example:

    \b
        kernel-ledger template decide > one.json    # then fill it in
        kernel-ledger decide --input one.json
    """,
    decide,
    say_decide,
    {
        "input": Option(
            "Decision inputs (JSON; `template decide` prints one).",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
        "jsonl": Option(
            "FILE is JSON Lines: one result per line (with --json, one object listing them).",
            bool,
            False,
        ),
    },
    returns='`status` "ok", `decision`, `contract_decision`, `relative_improvement`, '
    "`worst_case_regression`, `evidence`, `statistics`; `note` where a bootstrap decided (its "
    "seed comes from the input, so its bounds can differ slightly from record's; `assess` "
    "reproduces record); with sessions or a reference: `sides`, "
    "and across sessions `drift_sigma`, `flags`, `advice`; with statistics.sequential: "
    "`settled`, `repeats_used`, `more_repeats` (when not settled); with --jsonl: `count`, "
    "`results`",
)
