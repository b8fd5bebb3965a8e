"""compare: per-case medians of two rounds and their relative change."""

from __future__ import annotations

from cli.declare import MAX_COUNT, REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import pct, say, table


def compare(env: Env, run: str, rounds: list[int]) -> Outcome:
    result = env.service().compare(run, rounds[0], rounds[1])
    result["notes"] = _notes(result)
    return Outcome({"status": "ok", **result}, result)


def _notes(result) -> list[str]:
    """What the medians compared are not: one session, the sides a decision compared."""
    notes = []
    sa, sb = result["sessions"]
    if sa and sb and sa != sb:
        notes.append(
            f"these are the medians each round recorded, in two sessions ({sa}, {sb}); "
            "no drift between them is accounted for"
        )
    for n in result["decided_on_reference"]:
        notes.append(
            f"round {n} was decided against its parent measured in its own session "
            f"(kernel-ledger show --run {result['run_id']} --round {n})"
        )
    return notes


def say_compare(out: Outcome, args) -> None:
    result, (a, b) = out.value, args.rounds
    say(
        table(
            ["case", "weight", f"round {a} µs", f"round {b} µs", "change"],
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
    say(f"weighted improvement of round {b} over round {a}: {pct(result['relative_improvement'])}")
    for note in result["notes"]:
        say(f"note: {note}")


COMMAND = Command(
    "compare",
    """Per-case medians of two rounds and their relative change.

    Example: kernel-ledger compare --run softmax-demo-001 --round 0 --round 5
    """,
    compare,
    say_compare,
    {
        "run": run_option(),
        "rounds": Option(
            "Two rounds (0: baseline); the change is of the second over the first.",
            int,
            REQUIRED,
            metavar="N",
            flag="--round",
            many=True,
            count=2,
            ge=0,
            le=MAX_COUNT,
        ),
    },
    returns="`status`, `run_id`, `round_a`, `round_b`, `sessions` (each side's session id, "
    "null where not named), `decided_on_reference` (the rounds decided on a same-session "
    "reference, not on these medians), `cases` (each case's `weight`, `a_median_us`, "
    "`b_median_us` and `relative_change`), `relative_improvement`, `notes` (why these medians "
    "may not compare like for like: two sessions, a round decided on a reference)",
    tool=True,
)
