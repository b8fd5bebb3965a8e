"""record: record one round and return the controller's decision."""

from __future__ import annotations

from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import diagnose_hint, not_found_keys, pct, plural, say, say_not_found


def record(env: Env, run: str, result: str) -> Outcome:
    r = env.service().record(run, Path(result))
    return Outcome(
        {
            "status": "recorded",
            "run_id": r.run_id,
            "round": r.round,
            "decision": r.decision,
            "relative_improvement": r.relative_improvement,
            "worst_case_regression": r.worst_case_regression,
            "cumulative_improvement": r.cumulative_improvement,
            "target_met": r.target_met,
            "needs_diagnosis": r.needs_diagnosis,
            "remaining_rounds": r.remaining_rounds,
            "best_kernel_sha256": r.best_kernel_sha256,
            **({"flags": list(r.flags)} if r.flags else {}),
            **({"failed_cases": list(r.failed_cases)} if r.failed_cases else {}),
            **not_found_keys(r),
            "already_recorded": r.already_recorded,
        },
        r,
    )


def say_record(out: Outcome, args) -> None:
    r = out.value
    if r.already_recorded:
        say(f"round {r.round} is already recorded from this file; nothing was written")
    say(
        f"round {r.round}: {r.decision}  I {pct(r.relative_improvement)}  "
        f"R {pct(r.worst_case_regression)}  cumulative {pct(r.cumulative_improvement)}  "
        f"target {'met' if r.target_met else 'not met'}  "
        f"{plural(r.remaining_rounds, 'round')} left"
    )
    if r.failed_cases:
        say(f"  correctness gate failed on: {', '.join(r.failed_cases)}")
    if r.needs_diagnosis:
        say(diagnose_hint(r.run_id))
    say_not_found(f"round {r.round}", r)


COMMAND = Command(
    "record",
    """Record one round (a round result file) and print the controller's decision.

    Example:

    \b
        kernel-ledger record --run softmax-demo-001 \\
          --result examples/softmax-demo/rounds/round-1.json
    """,
    record,
    say_record,
    {
        "run": run_option("The run to record into."),
        "result": Option(
            "The round result (JSON, schema_version 1): round, parent_kernel_sha256, "
            "candidate, hypothesis, change, verification and measurements.",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
    },
    returns='`status` "recorded", `run_id`, `round`, `decision`, `relative_improvement`, '
    "`worst_case_regression`, `cumulative_improvement`, `target_met`, `needs_diagnosis`, "
    "`remaining_rounds`, `best_kernel_sha256`, `already_recorded` (and `flags` when any, "
    "`failed_cases` when its correctness gate failed)",
    tool=True,
    one_shot=True,
)
