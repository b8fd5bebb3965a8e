"""plan: validate a run configuration and lock the run."""

from __future__ import annotations

from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome, strict_option
from cli.output import not_found_keys, plural, say, say_not_found, say_warnings


def plan(env: Env, config: str, dry_run: bool, strict: bool) -> Outcome:
    from ledger.core.decide import merge_rule
    from ledger.core.events import RunPlanned

    service = env.service(create=not dry_run)
    result = service.plan(Path(config), dry_run=dry_run, strict=strict)
    planned = next(e for e in result.events if isinstance(e, RunPlanned))
    rule = merge_rule(planned.objective.target_relative_improvement)
    return Outcome(
        {
            "status": "checked" if dry_run else "planned",
            "run_id": result.run_id,
            "kernel_sha256": result.kernel_sha256,
            "case_count": result.case_count,
            "warnings": list(result.warnings),
            "merge_rule": rule,
            **not_found_keys(result),
        },
        (result, rule),
    )


def say_plan(out: Outcome, args) -> None:
    result, rule = out.value
    what = "checked (nothing written)" if args.dry_run else "planned"
    say(
        f"{what} run {result.run_id}: {plural(result.case_count, 'case')}, "
        f"kernel {result.kernel_sha256[:12]}"
    )
    say(f"  {rule}")
    say_warnings(result.warnings)
    say_not_found("baseline", result)


COMMAND = Command(
    "plan",
    """Validate a run configuration and lock the run (baseline, cases, objective); with
    --dry-run, only check it.

    A key the contract does not know is kept, with a warning when it looks like a typo of
    one it does; so is an objective value that reads like a percentage.

    Example:

    \b
        kernel-ledger template config > config.json    # then fill it in
        kernel-ledger plan --config config.json --dry-run
    """,
    plan,
    say_plan,
    {
        "config": Option(
            "The run configuration (JSON, schema_version 1; `template config` "
            "[[prints||returns]] one): kernel, cases, baseline, objective, limits and the "
            "starting kernel's correctness manifest.",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
        "dry_run": Option("Only check the configuration; write nothing.", bool, False),
        "strict": strict_option(),
    },
    returns='`status` "planned" (or "checked" with --dry-run), `run_id`, `kernel_sha256`, '
    "`case_count`, `warnings`, `merge_rule` (the sentence saying what the target decides: "
    "check-merge passes only if the cumulative improvement reaches it)",
    tool=True,
    one_shot=True,
)
