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
    if view is None:
        from ledger.errors import InputError

        raise InputError(f"run {run!r} is not in the ledger")
    r = view.run
    return Outcome(
        {
            "status": "ok",
            "run": as_dict(r),
            "best_kernel": {
                "sha256": r.best_kernel_sha256,
                "path": r.best_kernel_path,
                "round": r.best_round,
            },
            "cases": [as_dict(c) for c in view.cases],
        },
        view,
    )


def say_status(out: Outcome, args) -> None:
    if args.run is None:
        say_runs(out.value)
        return
    view = out.value
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
    say(f"  best kernel {r.best_kernel_sha256} from round {r.best_round}: {r.best_kernel_path}")
    say(
        table(
            ["case", "weight", "baseline µs", "best µs"],
            [(c.case_id, c.weight, c.baseline_median_us, c.best_median_us) for c in view.cases],
        )
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
    "path, round}, `cases`",
    tool=True,
    one_shot=True,
)
