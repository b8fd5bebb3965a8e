"""noise and decide: A/A remeasures, and dry-run decisions with no ledger."""

from __future__ import annotations

import json
import sys

import typer

from cli.common import JSON, input_path, run_use_case
from cli.output import emit_json, pct, plural, say


def register(app: typer.Typer) -> None:
    app.command("noise")(noise)
    app.command("decide")(decide)


def noise(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run."),
    measurements: str = typer.Option(
        ..., "--measurements", metavar="FILE", help="A/A remeasure of the current best kernel."
    ),
    as_json: bool = JSON,
) -> None:
    """Record an A/A remeasure of the current best kernel; session drift is estimated from
    pairs of measurements of the same kernel once five pairs exist.

    Example:

    \b
        kernel-ledger noise --run softmax-demo-001 \\
          --measurements examples/softmax-demo/remeasures/aa-1.json
    """
    out = run_use_case(ctx, "noise")
    if as_json:
        emit_json(out.document)
        return
    result = out.value
    state = (
        f"drift sigma {result['drift_sigma']:.4g} from {plural(result['drift_pairs'], 'pair')}"
        if result["drift_estimated"]
        else f"drift unestimated ({result['drift_pairs']} usable pairs; 5 needed)"
    )
    say(f"recorded A/A remeasure of {result['kernel_sha256'][:12]}: {state}")


def decide(
    input_file: str = typer.Option(..., "--input", metavar="FILE", help="Decision inputs."),
    jsonl: bool = typer.Option(
        False,
        "--jsonl",
        help="FILE is JSON Lines: one result per line (with --json, one object listing them).",
    ),
    as_json: bool = JSON,
) -> None:
    """Dry run: the decision for given measurements; needs no ledger and writes nothing.

    Each input is {"objective", "cases", "best", "candidate", "statistics"?, "drift_sigma"?};
    a measurement is {"case_id", "median_us", "repeats"} or {"case_id", "samples_us"}.

    Example: kernel-ledger decide --input examples/decide/rounds.jsonl --jsonl
    """
    from ledger.errors import InputError
    from ledger.inputs.jsonio import display, parse_json_bytes, read_bytes
    from ledger.services.dryrun import decide_one, parse_input

    path = input_path(input_file, "--input")
    data = read_bytes(path, "decide input")
    shown = display(path)
    if not jsonl:
        item = parse_input(parse_json_bytes(data, "decide input", shown), shown)
        result = decide_one(item, shown)
        if as_json:
            emit_json({"status": "ok", **result})
        else:
            say(
                f"{result['decision']}  I {pct(result['relative_improvement'])}  "
                f"R {pct(result['worst_case_regression'])}  ({result['evidence']})"
            )
        return
    items = []
    for number, line in enumerate(data.splitlines(), start=1):
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
    if as_json:  # --json promises exactly one object
        emit_json({"status": "ok", "count": len(results), "results": results})
        return
    out = sys.stdout
    for result in results:
        out.write(json.dumps(result, allow_nan=False) + "\n")
