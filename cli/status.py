"""status: the run status and best-kernel projections."""

from __future__ import annotations

from cli.declare import Command, Env, Outcome, run_option
from cli.output import diagnose_hint, failures, pct, say, table


def status(env: Env, run: str | None) -> Outcome:
    from ledger.core.projections import as_dict
    from ledger.store.history import list_runs

    # A read of the projection rows: the store alone, so start-up does not import the
    # service's input models and controller (see docs/benchmarks.md, start-up).
    store = env.store()
    if run is None:
        with store.transaction() as conn:
            rows = list_runs(conn)
        return Outcome({"status": "ok", "runs": [as_dict(r) for r in rows]}, rows)
    with store.transaction() as conn:
        view = store.load_view(conn, run)
        profiles = store.read_stream(conn, run, types=("ProfileRecorded",)) if view else []
        if view is None:
            raise store.unknown_run(conn, run)
        beside = baseline_comparison(conn, run, view.run.stream_version)
        again = best_resubmitted(conn, view.run)
    r = view.run
    by_case = attribution_by_case(
        [p.payload_value() for p in profiles], r.best_kernel_sha256, [c.case_id for c in view.cases]
    )
    return Outcome(
        {
            "status": "ok",
            "run": as_dict(r),
            "best_kernel": {
                "sha256": r.best_kernel_sha256,
                "path": r.best_kernel_path,
                "round": r.best_round,
                **({"resubmission": again} if again else {}),
            },
            "cases": [as_dict(c) for c in view.cases],
            "attribution_by_case": by_case,
            "headroom_case": headroom_case(by_case),
            "baseline_comparison": beside,
        },
        (view, by_case, beside, again),
    )


def best_resubmitted(conn, run) -> dict | None:
    """Where the best kernel (the same sha256) was the candidate of rounds before the one
    that kept it: those rounds, their decisions and the sentence
    (`projections.resubmission`); None otherwise. One read of the run's `rounds` rows of
    that candidate."""
    from ledger.core.projections import resubmission, resubmissions
    from ledger.store import readmodel

    if run.best_round < 1:
        return None
    rows = readmodel.candidate_rounds(conn, run.run_id, run.best_kernel_sha256)
    earlier = resubmissions(rows).get(run.best_round)
    if not earlier:
        return None
    return resubmission(f"the best kernel (round {run.best_round})", "KEEP", earlier)


def baseline_comparison(conn, run: str, head: int) -> dict | None:
    """Beside a chained cumulative improvement (contract 2: a kept round was decided on a
    same-session reference), the latest decision's plain comparison of the best kernel's
    medians with the original baseline, and whether its sides come from different sessions;
    None where the cumulative improvement is that comparison. One indexed read."""
    from ledger.store import readmodel

    last = readmodel.last_version_before(conn, run, "RoundDecided", head + 1)
    if last is None:
        return None
    payload = readmodel.read_versions(conn, run, [last])[0].payload_value()
    if payload.get("baseline_improvement") is None:
        return None
    return {
        "improvement": payload["baseline_improvement"],
        "across_sessions": bool(payload.get("baseline_across_sessions")),
    }


def attribution_by_case(
    profiles: list[dict], kernel_sha256: str, case_ids: list[str]
) -> list[dict]:
    """The best kernel's latest profile of each planned case (profiles that named their
    case), in plan order: its bottleneck, headroom and first experiment. A case profiled
    on its own is attributed on its own, never merged with another case."""
    latest: dict[str, dict] = {}
    for p in profiles:
        if p.get("kernel_sha256") == kernel_sha256 and p.get("case_id") in case_ids:
            latest[p["case_id"]] = p
    out = []
    for case in case_ids:
        if case in latest:
            attribution = latest[case].get("attribution") or {}
            why = headroom_unknown(attribution)
            out.append(
                {
                    "case_id": case,
                    "bottleneck": attribution.get("bottleneck"),
                    "headroom": attribution.get("headroom"),
                    "first_experiment": attribution.get("first_experiment"),
                    "format": latest[case].get("format"),
                    **({} if why is None else {"headroom_unknown": why}),
                }
            )
    return out


NO_FLOOR = (
    "no cost floor: set the config's `floors` (effective_bandwidth_gbps in GB/s, with "
    "bytes_moved or the profile's bytes; or elements with vector_throughput_elems_per_us; or "
    "empty_kernel_us); target.sm_count and peak_bandwidth_gbps make no floor"
)
NO_DURATION = "the profile gives no duration to compare the floor with"


def headroom_unknown(attribution: dict) -> str | None:
    """Why a profile's headroom is unknown (None where it is known): it needs a floor from
    the config's `floors` and a duration in the profile; the evidence lists the floors."""
    if attribution.get("headroom") is not None:
        return None
    floored = any(str(e).startswith("floors (us): ") for e in attribution.get("evidence") or ())
    return NO_DURATION if floored else NO_FLOOR


def headroom_case(by_case: list[dict]) -> str | None:
    """The case with the most headroom to its floor, where any case's headroom is known."""
    known = [c for c in by_case if c["headroom"] is not None]
    return max(known, key=lambda c: c["headroom"])["case_id"] if known else None


def say_status(out: Outcome, args) -> None:
    if args.run is None:
        say_runs(out.value)
        return
    view, by_case, beside, again = out.value
    r = view.run
    say(f"run {r.run_id} ({r.op_name} on {r.soc}): {r.conclusion or r.status}")
    say(
        f"  rounds {r.rounds_recorded}/{r.max_rounds}, kept {r.kept_rounds}, consecutive "
        f"failures {failures(r.consecutive_failures, r.max_consecutive_failures)}"
    )
    if r.needs_diagnosis and not r.conclusion:
        say(f"  {diagnose_hint(r.run_id)}")
    say(
        f"  cumulative improvement {pct(r.cumulative_improvement)} (target "
        f"{pct(r.target_relative_improvement)}, {'met' if r.target_met else 'not met'})"
    )
    if beside is not None:
        across = ", sides from different sessions" if beside["across_sessions"] else ""
        say(
            "    chained over the kept rounds' same-session references; the best kernel's "
            f"medians against the original baseline: {pct(beside['improvement'])}{across}"
        )
    say(f"  best kernel {r.best_kernel_sha256} from round {r.best_round}: {r.best_kernel_path}")
    if again:
        say(f"    {again['sentence']}")
    say(
        table(
            ["case", "weight", "baseline µs", "best µs"],
            [(c.case_id, c.weight, c.baseline_median_us, c.best_median_us) for c in view.cases],
        )
    )
    if by_case:
        say("  the best kernel's profile by case:")
        say(
            table(
                ["case", "bottleneck", "headroom"],
                [
                    (
                        c["case_id"],
                        c["bottleneck"],
                        f"{c['headroom'] * 100:.1f}%" if c["headroom"] is not None else "—",
                    )
                    for c in by_case
                ],
            )
        )
        unknown = sorted({c["headroom_unknown"] for c in by_case if "headroom_unknown" in c})
        for why in unknown:
            say(f"  headroom —: {why}")
        where = out.document["headroom_case"]
        if where is not None:
            best = next(c for c in by_case if c["case_id"] == where)
            say(
                f"  the headroom is in case {where} ({best['headroom'] * 100:.1f}%, "
                f"{best['bottleneck']}): {best['first_experiment']}"
            )


def say_runs(rows) -> None:
    if not rows:
        say("the ledger holds no runs yet")
        return
    say(
        table(
            ["run", "op", "status", "rounds", "kept", "cumulative", "target", "best kernel"],
            [
                (
                    r.run_id,
                    r.op_name,
                    r.conclusion or r.status,
                    r.rounds_recorded,
                    r.kept_rounds,
                    pct(r.cumulative_improvement),
                    "met" if r.target_met else "not met",
                    r.best_kernel_sha256[:12],
                )
                for r in rows
            ],
        )
    )


COMMAND = Command(
    "status",
    """Run status and best kernel; every run when --run is not given.

    Example: kernel-ledger status --run softmax-demo-001
    """,
    status,
    say_status,
    {"run": run_option("One run in detail (default: every run).", required=False)},
    returns="`status`, `runs` (every run's row); with a run: `run`, `best_kernel` {sha256, "
    "path, round, and `resubmission` {rounds, decisions, sentence} where the same file was "
    "the candidate of earlier rounds}, `cases`, `attribution_by_case` (the best kernel's "
    "latest profile of each "
    "case profiled with its case: case_id, bottleneck, headroom, first_experiment, format, "
    "and headroom_unknown saying why where headroom is null), "
    "`headroom_case` (the case with the most headroom, or null), `baseline_comparison` "
    "(null, or where the cumulative improvement chains same-session references: "
    "{improvement, across_sessions}, the best kernel's medians against the original baseline)",
    tool=True,
    one_shot=True,
)
