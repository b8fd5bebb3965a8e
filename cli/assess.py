"""assess: what `record` would decide for a round result now; nothing is written."""

from __future__ import annotations

from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import pct, say


def assess(env: Env, run: str, result: str) -> Outcome:
    answer = env.service().assess(run, Path(result))
    return Outcome({"status": "ok", **answer}, answer)


def say_assess(out: Outcome, args) -> None:
    a = out.value
    line = (
        f"round {a['round']}: {a['decision']}  I {pct(a['relative_improvement'])}  "
        f"R {pct(a['worst_case_regression'])}  ({a['evidence']})"
    )
    if "settled" in a:
        line += (
            f"  settled at {a['repeats_used']} repeats"
            if a["settled"]
            else f"  not settled at {a['repeats_used']} repeats: measure "
            f"{a['more_repeats']} more per case"
        )
    if a["flags"]:
        line += f"  flags: {', '.join(a['flags'])}"
    say(line + "  (nothing was written)")
    say(f"  why: {a['why']['sentence']}")


COMMAND = Command(
    "assess",
    """What `record` would decide for a round result now, under the run's locked policy, its
    current best kernel and the result's `reference`; writes nothing. With the run's
    statistics.sequential (its keys: `template config`) it says whether the round is
    `settled` and, if not, how many `more_repeats` per case the next look needs: measure
    them, append them, assess again.

    Example:

    \b
        kernel-ledger assess --run softmax-demo-001 \\
          --result examples/softmax-demo/rounds/round-1.json
    """,
    assess,
    say_assess,
    {
        "run": run_option("The run whose policy and best kernel decide."),
        "result": Option(
            "The round result (JSON), as `record` takes it.",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
    },
    returns='`status` "ok", `run_id`, `round`, `decision`, `relative_improvement`, '
    "`worst_case_regression`, `evidence`, `flags`, `why` {rule, sentence, worst_case, flags "
    "{flag: meaning}} (the sentence `show` would give once it is recorded); `sides` with a "
    "reference or sessions; "
    "with statistics.sequential `settled`, `repeats_used`, `more_repeats` (when not settled)",
    tool=True,
)
