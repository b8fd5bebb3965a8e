"""profile: ingest profiler output for one kernel of a run and attribute its bottleneck."""

from __future__ import annotations

from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome, round_option, run_option
from cli.output import plural, say, say_profile_notes


def profile(
    env: Env,
    path: str,
    run: str,
    baseline: bool,
    round: int | None,
    kernel: str | None,
    kernel_name: str | None,
    shape: str | None,
    dry_run: bool,
) -> Outcome:
    event = env.service().profile(
        run,
        Path(path),
        baseline=baseline,
        round_no=round,
        kernel_sha256=kernel,
        kernel_name=kernel_name,
        shape=shape,
        dry_run=dry_run,
    )
    attribution = event.attribution or {}
    return Outcome(
        {
            "status": "checked" if dry_run else "recorded",
            "run_id": run,
            "kernel_sha256": event.kernel_sha256,
            "format": event.format,
            "signals": event.signals,
            "attribution": attribution,
            "notes": attribution.get("notes", []),
        },
        event,
    )


def say_profile(out: Outcome, args) -> None:
    event, attribution = out.value, out.document["attribution"]
    signals = plural(len(event.signals), "signal")
    what = "checked (nothing written): profile" if args.dry_run else "profile"
    say(f"{what} of {event.kernel_sha256[:12]} ({event.format}): {signals}")
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
    --kernel), and attribute its bottleneck.

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
        "kernel_name": Option(
            "Which kernel's rows, where the profile holds several kernels.", metavar="NAME"
        ),
        "shape": Option(
            "Which input shape (Input Shapes) or ncu launch size (grid ... block ...) to "
            "attribute where the kernel ran with several.",
            metavar="SHAPE",
        ),
        "dry_run": Option(
            "Read and attribute the profile against the run; write nothing.", bool, False
        ),
    },
    returns='`status` "recorded" (or "checked" with --dry-run), '
    "`run_id`, `kernel_sha256`, `format`, `signals`, "
    "`attribution` {bottleneck, evidence, first_experiment, headroom, flags, rules, core, "
    "notes, and shapes where there were several}, `notes`",
    tool=True,
)
