"""profile: ingest profiler output for one kernel of a run and attribute its bottleneck."""

from __future__ import annotations

from pathlib import Path

from cli.declare import (
    REQUIRED,
    Command,
    Env,
    Option,
    Outcome,
    dry_run_option,
    round_option,
    run_option,
)
from cli.output import plural, say, say_profile_notes


def profile(
    env: Env,
    path: str,
    run: str,
    baseline: bool,
    round: int | None,
    kernel: str | None,
    candidate: str | None,
    kernel_name: str | None,
    shape: str | None,
    case: str | None,
    dry_run: bool,
) -> Outcome:
    result = env.service().profile(
        run,
        Path(path),
        baseline=baseline,
        round_no=round,
        kernel_sha256=kernel,
        candidate=Path(candidate) if candidate is not None else None,
        kernel_name=kernel_name,
        shape=shape,
        case_id=case,
        dry_run=dry_run,
    )
    event = result.event
    attribution = event.attribution or {}
    return Outcome(
        {
            "status": "checked" if dry_run else "recorded",
            "run_id": run,
            "kernel_sha256": event.kernel_sha256,
            "subject": event.subject,
            "case_id": event.case_id,
            "format": event.format,
            "signals": event.signals,
            "attribution": attribution,
            "notes": attribution.get("notes", []),
            "already_recorded": result.already_recorded,
        },
        result,
    )


def say_profile(out: Outcome, args) -> None:
    event, attribution = out.value.event, out.document["attribution"]
    signals = plural(len(event.signals), "signal")
    case = f", case {event.case_id}" if event.case_id else ""
    what = "checked (nothing written): profile" if args.dry_run else "profile"
    say(f"{what} of {event.kernel_sha256[:12]}{case} ({event.format}): {signals}")
    if out.value.already_recorded:
        say("already recorded: these profile files were recorded for this kernel before")
    if event.subject == "candidate":
        say("kept for the round whose candidate this is: record reads it for the check")
    say(f"bottleneck: {attribution.get('bottleneck')}")
    for line in attribution.get("evidence", []):
        say(f"  - {line}")
    say(f"first experiment: {attribution.get('first_experiment')}")
    if attribution.get("headroom") is not None:
        say(f"headroom to the nearest floor: {attribution['headroom'] * 100:.1f}%")
    say_profile_notes(attribution, "")


COMMAND = Command(
    "profile",
    """Ingest profiler output (msprof op folder, op_summary, kernel_details, ncu CSV or a
    JSON signal map) for one kernel of a run (name exactly one of --baseline, --round,
    --kernel, --candidate), and attribute its bottleneck. The same files for the same
    kernel are recorded once. The signal names each format gives: Profiles, in the
    skill's references/inputs.md.

    Example:

    \b
        kernel-ledger profile --run softmax-001 --baseline PROF_DIR/op_summary.csv
        kernel-ledger profile --run softmax-001 --round 3 ncu-report.csv --dry-run
    """,
    profile,
    say_profile,
    {
        "path": Option(
            "Profile file or folder.", default=REQUIRED, metavar="PATH", positional=True, file=True
        ),
        "run": run_option("The run the kernel belongs to."),
        "baseline": Option("Profile of the starting kernel.", bool, False),
        "round": round_option("Profile of round N's candidate."),
        "kernel": Option("Profile of this kernel of the run (its sha256).", metavar="SHA256"),
        "candidate": Option(
            "Profile of a candidate before its round is recorded (its source file); the "
            "round whose candidate it is reads it.",
            metavar="FILE",
            file=True,
        ),
        "kernel_name": Option(
            "Which kernel's rows, where the profile holds several kernels.", metavar="NAME"
        ),
        "shape": Option(
            "Which input shape (Input Shapes) or ncu launch size (grid ... block ...) to "
            "attribute where the kernel ran with several.",
            metavar="SHAPE",
        ),
        "case": Option(
            "The planned case the profile ran; the mechanism check compares a case only "
            "with the same case.",
            metavar="CASE_ID",
        ),
        "dry_run": dry_run_option("Read and attribute the profile against the run"),
    },
    returns='`status` "recorded" (or "checked" with --dry-run), `run_id`, `kernel_sha256`, '
    "`subject`, `case_id`, `format`, `signals`, `attribution` {bottleneck, evidence, "
    "first_experiment, headroom, flags, rules, core, notes, and shapes where there were "
    "several}, `notes`, `already_recorded`",
    tool=True,
)
