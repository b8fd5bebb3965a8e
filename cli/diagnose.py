"""diagnose: record a new bottleneck model after repeated failures."""

from __future__ import annotations

from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import say
from ledger.core.bottleneck import Bottleneck


def diagnose(env: Env, run: str, bottleneck: str, evidence: str, dry_run: bool) -> Outcome:
    event = env.service().diagnose(run, bottleneck, evidence, dry_run=dry_run)
    return Outcome(
        {
            "status": "checked" if dry_run else "recorded",
            "run_id": run,
            "bottleneck": event.bottleneck,
            "after_round": event.after_round,
            "consecutive_failures_before": event.consecutive_failures_before,
        },
        event,
    )


def say_diagnose(out: Outcome, args) -> None:
    event = out.value
    say(
        ("checked (nothing written): " if args.dry_run else "")
        + f"run {args.run}: bottleneck model now {event.bottleneck} (after round "
        f"{event.after_round}); consecutive failures restart from 0"
    )


COMMAND = Command(
    "diagnose",
    """Record a new bottleneck model after repeated failures; the failure count restarts.

    Example:

    \b
        kernel-ledger diagnose --run softmax-demo-001 \\
          --bottleneck memory-transfer --evidence "MTE2 ratio 0.57"
    """,
    diagnose,
    say_diagnose,
    {
        "run": run_option(),
        "bottleneck": Option(
            "The new bottleneck model: the class the next rounds work on.",
            default=REQUIRED,
            metavar="CLASS",
            choices=tuple(b.value for b in Bottleneck),
        ),
        "evidence": Option(
            "What supports it (profile signals, timings), in words.",
            default=REQUIRED,
            metavar="TEXT",
        ),
        "dry_run": Option("Check the diagnosis against the run; write nothing.", bool, False),
    },
    returns='`status` "recorded" (or "checked" with --dry-run), '
    "`run_id`, `bottleneck`, `after_round`, "
    "`consecutive_failures_before`",
    tool=True,
    one_shot=True,
)
