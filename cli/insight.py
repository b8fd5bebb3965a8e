"""profile, diagnose, show, compare: the evidence behind the next hypothesis."""

from __future__ import annotations

import typer

from cli.common import JSON, run_use_case
from cli.output import emit_json, pct, plural, say, table


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
    app.command("diagnose")(diagnose)
    app.command("show")(show)
    app.command("compare")(compare)


def profile(
    ctx: typer.Context,
    path: str = typer.Argument(..., metavar="PATH", help="Profile file or folder."),
    run: str = typer.Option(..., "--run", metavar="ID", help="The run the kernel belongs to."),
    baseline: bool = typer.Option(False, "--baseline", help="Profile of the starting kernel."),
    round_no: int = typer.Option(
        None, "--round", metavar="N", help="Profile of round N's candidate."
    ),
    kernel: str = typer.Option(None, "--kernel", metavar="SHA256", help="Profile of this kernel."),
    kernel_name: str = typer.Option(
        None, "--kernel-name", metavar="NAME", help="Which kernel's rows."
    ),
    shape: str = typer.Option(
        None,
        "--shape",
        metavar="SHAPE",
        help="Which input shape (Input Shapes) or ncu launch size (grid ... block ...) to "
        "attribute where the kernel ran with several.",
    ),
    as_json: bool = JSON,
) -> None:
    """Ingest profiler output (msprof op folder, op_summary, kernel_details, ncu CSV or a
    JSON signal map) for one kernel of a run, and attribute its bottleneck.

    Example:

    \b
        kernel-ledger profile --run softmax-demo-001 \\
          --baseline tests/fixtures/profiles/msprof-op/single
    """
    out = run_use_case(ctx, "profile")
    if as_json:
        emit_json(out.document)
        return
    event, attribution = out.value, out.document["attribution"]
    signals = plural(len(event.signals), "signal")
    say(f"profile of {event.kernel_sha256[:12]} ({event.format}): {signals}")
    say(f"bottleneck: {attribution.get('bottleneck')}")
    for line in attribution.get("evidence", []):
        say(f"  - {line}")
    say(f"first experiment: {attribution.get('first_experiment')}")
    if attribution.get("headroom") is not None:
        say(f"headroom to the nearest floor: {attribution['headroom'] * 100:.1f}%")
    _say_profile_notes(attribution, "")


def _say_profile_notes(attribution: dict, indent: str) -> None:
    """The reader's notes and each shape's own attribution, as stored in the event."""
    for shape in attribution.get("shapes", []):
        say(
            f"{indent}shape {shape['shape'] or '(none)'}: {shape['bottleneck']} "
            f"({shape['launches']} launch(es), {shape['total_us']:.1f} us) — {shape['evidence']}"
        )
    for note in attribution.get("notes", []):
        say(f"{indent}note: {note}")


def diagnose(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run."),
    bottleneck: str = typer.Option(..., "--bottleneck", metavar="CLASS", help="The new model."),
    evidence: str = typer.Option(..., "--evidence", metavar="TEXT", help="What supports it."),
    as_json: bool = JSON,
) -> None:
    """Record a new bottleneck model after repeated failures; the failure count restarts.

    Example:

    \b
        kernel-ledger diagnose --run softmax-demo-001 \\
          --bottleneck memory-transfer --evidence "MTE2 ratio 0.57"
    """
    out = run_use_case(ctx, "diagnose")
    if as_json:
        emit_json(out.document)
        return
    event = out.value
    say(
        f"run {run}: bottleneck model now {event.bottleneck} (after round "
        f"{event.after_round}); consecutive failures restart from 0"
    )


def show(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run."),
    round_no: int = typer.Option(..., "--round", metavar="N", help="The round (0: baseline)."),
    as_json: bool = JSON,
) -> None:
    """One round in full: inputs, validation, measurements, profiles, decision and flags.

    Example: kernel-ledger show --run softmax-demo-001 --round 2
    """
    out = run_use_case(ctx, "show")
    if as_json:
        emit_json(out.document)
        return
    detail = out.value
    submitted = detail.get("submitted", {})
    decision = detail.get("decision", {})
    say(f"run {run}, round {round_no}")
    if submitted:
        say(f"  hypothesis: {submitted['hypothesis']}")
        say(f"  change:     {submitted['change']}")
        say(f"  candidate:  {submitted['candidate']['sha256']}  {submitted['candidate']['path']}")
    if "validation" in detail:
        validation = detail["validation"]
        say(f"  validation: {validation['status']} ({validation['manifest']['path']})")
    if "measurements" in detail:
        say(
            table(
                ["case", "median µs", "repeats", "samples"],
                [
                    (
                        m["case_id"],
                        m["median_us"],
                        m["repeats"],
                        "file not found"
                        if m.get("source_not_found")
                        else "not a samples file"
                        if m.get("source_not_samples")
                        else len(m.get("samples_us") or []),
                    )
                    for m in detail["measurements"]["measurements"]
                ],
            )
        )
    for p in detail["profiles"]:
        attribution = p.get("attribution") or {}
        say(f"  profile ({p['format']}): bottleneck {attribution.get('bottleneck')}")
        _say_profile_notes(attribution, "    ")
    if decision:
        say(
            f"  decision: {decision['decision']}  I {pct(decision['relative_improvement'])}  "
            f"R {pct(decision['worst_case_regression'])}"
        )
        check = decision.get("mechanism_check")
        if check:
            verdict = {True: "confirmed", False: "refuted", None: "unknown"}[check["confirmed"]]
            say(f"  mechanism check: {check['metric']} {check['direction']} — {verdict}")
        if decision.get("flags"):
            say(f"  flags: {', '.join(decision['flags'])}")
        if decision.get("retried_rounds"):
            say(f"  retries the mechanism of failed rounds {decision['retried_rounds']}")
    why = detail.get("explanation")
    if why:
        say(f"  why: {why['sentence']}")
        for flag, meaning in why["flags"].items():
            say(f"  flag {flag}: {meaning}")


def compare(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run."),
    rounds: list[int] = typer.Option(..., "--round", metavar="N", help="Two rounds (0: baseline)."),
    as_json: bool = JSON,
) -> None:
    """Per-case medians of two rounds and their relative change.

    Example: kernel-ledger compare --run softmax-demo-001 --round 0 --round 5
    """
    out = run_use_case(ctx, "compare")
    if as_json:
        emit_json(out.document)
        return
    result = out.value
    say(
        table(
            ["case", "weight", f"round {rounds[0]} µs", f"round {rounds[1]} µs", "change"],
            [
                (
                    c["case_id"],
                    c["weight"],
                    c["a_median_us"],
                    c["b_median_us"],
                    pct(c["relative_change"]),
                )
                for c in result["cases"]
            ],
        )
    )
    improvement = pct(result["relative_improvement"])
    say(f"weighted improvement of round {rounds[1]} over round {rounds[0]}: {improvement}")
