"""history: decided rounds across runs, or the past rounds that started from a similar
profile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cli.declare import MAX_COUNT, Command, Env, Option, Outcome, run_option
from cli.output import pct, say, table
from ledger.core.bottleneck import Bottleneck

DECISIONS = ("KEEP", "DISCARD", "NOISE", "FAIL")


def history(
    env: Env,
    run: str | None,
    op: str | None,
    soc: str | None,
    decision: str | None,
    bottleneck: str | None,
    mechanism: str | None,
    like_profile: str | None,
    kernel_name: str | None,
    search: str | None,
    actor: str | None,
    session: str | None,
    since: str | None,
    until: str | None,
    limit: int | None,
) -> Outcome:
    from ledger.store.history import RoundFilter, decision_actors, list_runs, query_rounds

    if like_profile is not None:
        return _like_profile(env, like_profile, kernel_name, limit or 10)
    from ledger.core.mechanisms import BY_ID

    # a vocabulary entry's id selects the rounds classified as it, whatever their free text
    entry = mechanism if mechanism in BY_ID else None
    f = RoundFilter(
        run_id=run,
        bottleneck=bottleneck,
        op_name=op,
        soc=soc,
        decision=decision,
        mechanism=None if entry else mechanism,
        search=search,
        actor=actor,
        session=session,
        since=_date(since, "--since"),
        until=_date(until, "--until"),
        limit=None if entry else limit,
    )
    service = env.service()
    if run is not None:
        service.view(run)  # an unknown run is an error, not an empty list
    with service.store.transaction() as conn:
        rows = query_rounds(conn, f)
        if entry is not None:
            from ledger.core.suggest import entry_of

            rows = [r for r in rows if entry_of(r) == entry][:limit]
        runs = {r.run_id: r for r in list_runs(conn)} if rows else {}
        actors = decision_actors(conn, rows) if rows else {}
    # the text says why, from the stored decisions; JSON gives each round's `reason`
    why = (
        {}
        if env.as_json or not rows
        else service.explain_rounds([(r.run_id, r.round) for r in rows])
    )
    return Outcome(
        {
            "status": "ok",
            "count": len(rows),
            "rounds": [
                round_document(r, runs.get(r.run_id), actors.get((r.run_id, r.round))) for r in rows
            ],
        },
        (rows, why, actors),
    )


def _date(value: str | None, flag: str) -> str | None:
    from ledger.store.history import utc_bound

    return None if value is None else utc_bound(value, flag)


def round_document(row, run, actor: str | None = None) -> dict[str, Any]:
    """A decided round as history --json gives it: the projection row with `flags` a list,
    `start_signals` an object, `reason`, the decision's grounds in one sentence, and
    `actor`, who recorded the decision (null before actors were recorded)."""
    import json

    from ledger.core.actors import parsed
    from ledger.core.projections import as_dict

    doc = as_dict(row)
    doc["flags"] = [f for f in (row.flags or "").split(",") if f]
    doc["start_signals"] = json.loads(row.start_signals) if row.start_signals else None
    doc["reason"] = decision_reason(row, run)
    doc["actor"] = parsed(actor)
    return doc


def decision_reason(row, run) -> str:
    """Why the round got its decision, in the contract's words (ledger/core/decide.py)."""
    from ledger.core.decide import Objective, reason

    return reason(
        row.decision,
        validation_status=row.validation_status,
        improvement=row.relative_improvement,
        regression=row.worst_case_regression,
        objective=None if run is None else Objective.of(run),
    )


def _like_profile(env: Env, path: str, kernel_name: str | None, limit: int) -> Outcome:
    from ledger.core.bottleneck import classify
    from ledger.core.similar import rank
    from ledger.inputs.profiles import load_profile
    from ledger.store.history import decision_actors, list_runs, rounds_with_bottleneck

    parsed = load_profile(Path(path), kernel_name=kernel_name)
    attribution = classify(parsed.signals, attributes=parsed.attributes)
    store = env.store()
    with store.transaction() as conn:
        candidates = rounds_with_bottleneck(conn, str(attribution.bottleneck), 500)
        runs = {r.run_id: r for r in list_runs(conn)} if candidates else {}
        similar = rank(parsed.signals, candidates, limit)
        actors = decision_actors(conn, [s.row for s in similar]) if similar else {}
    return Outcome(
        {
            "status": "ok",
            "bottleneck": str(attribution.bottleneck),
            "first_experiment": attribution.first_experiment,
            "count": len(similar),
            "rounds": [
                {
                    **round_document(
                        s.row, runs.get(s.row.run_id), actors.get((s.row.run_id, s.row.round))
                    ),
                    "distance": s.distance,
                    "shared_signals": s.shared_signals,
                }
                for s in similar
            ],
        },
        (attribution, similar),
    )


def say_history(out: Outcome, args) -> None:
    if args.like_profile is not None:
        _say_like_profile(*out.value)
        return
    rows, why, actors = out.value
    if not rows:
        say("no rounds match")
        return
    from ledger.core.actors import describe, parsed

    sessions = any(r.session_id for r in rows)  # a column only where a round names one
    say(
        table(
            ["run", "round", "decision", "I", "R", "cumulative", "change", "recorded", "by",
             *(["session"] if sessions else [])],
            [
                (
                    r.run_id,
                    r.round,
                    r.decision,
                    pct(r.relative_improvement),
                    pct(r.worst_case_regression),
                    pct(r.cumulative_improvement),
                    r.change,
                    r.recorded_at[:19] + "Z",
                    describe(parsed(actors.get((r.run_id, r.round)))),
                    *([r.session_id or "-"] if sessions else []),
                )
                for r in rows
            ],
        )
    )  # fmt: skip
    say("why:")
    for r in rows:
        found = why.get((r.run_id, r.round))
        if found is not None:
            say(f"  {r.run_id} round {r.round}: {found.text}")


def _say_like_profile(attribution, similar) -> None:
    say(f"profile bottleneck: {attribution.bottleneck}")
    say(f"first experiment: {attribution.first_experiment}")
    if not similar:
        say("no past round started from a profile with this bottleneck")
        return
    say(
        table(
            ["run", "round", "distance", "decision", "I", "mechanism", "change"],
            [
                (
                    s.row.run_id,
                    s.row.round,
                    s.distance,
                    s.row.decision,
                    pct(s.row.relative_improvement),
                    s.row.mechanism,
                    s.row.change,
                )
                for s in similar
            ],
        )
    )


COMMAND = Command(
    "history",
    """Rounds across runs, oldest first, filtered; or, with --like-profile, the past rounds
    that started from a similar profile, nearest first.

    Example: kernel-ledger history --op softmax --decision KEEP
    """,
    history,
    say_history,
    {
        "run": run_option("Only this run.", required=False),
        "op": Option("Only runs of this op (the config's op_name).", metavar="NAME"),
        "soc": Option("Only runs on this target (the config's target.soc).", metavar="SOC"),
        "decision": Option("Only rounds so decided.", metavar="D", choices=DECISIONS),
        "bottleneck": Option(
            "Only rounds whose starting profile had this bottleneck class.",
            metavar="CLASS",
            choices=tuple(b.value for b in Bottleneck),
        ),
        "mechanism": Option(
            "Only rounds that changed this mechanism: an entry of the mechanism vocabulary "
            "(the skill's references/mechanisms.md lists them; every round it classifies so), else "
            "the mechanism's exact name.",
            metavar="NAME",
        ),
        "like_profile": Option(
            "A profile file or folder: the past rounds whose starting profile had the same "
            "bottleneck and nearby signals.",
            metavar="PATH",
        ),
        "kernel_name": Option("With --like-profile: which kernel's rows.", metavar="NAME"),
        "search": Option(
            "Only rounds with this text in their hypothesis or change.", metavar="TEXT"
        ),
        "actor": Option(
            "Only rounds whose decision was recorded by this actor: its database role, OS "
            "user or KERNEL_LEDGER_ACTOR label (the whole name, letter case aside).",
            metavar="NAME",
        ),
        "session": Option(
            "Only rounds whose candidate was measured in this session (the `session.id` of "
            "its measurements).",
            metavar="ID",
        ),
        "since": Option("Only rounds recorded at or after this UTC date or time.", metavar="WHEN"),
        "until": Option("Only rounds recorded before this UTC date or time.", metavar="WHEN"),
        "limit": Option("At most N rounds.", int, metavar="N", ge=1, le=MAX_COUNT),
    },
    returns="`status`, `count`, `rounds` (each round's row, `session_id` the candidate's "
    "session or null, with `flags`, `start_signals`, "
    "`reason` and `actor`, who recorded the decision or null); with --like-profile also "
    "`bottleneck`, `first_experiment` and each round's `distance` and `shared_signals`",
    tool=True,
)
