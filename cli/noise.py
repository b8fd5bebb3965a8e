"""noise: record an A/A remeasure of the current best kernel."""

from __future__ import annotations

from pathlib import Path

from cli.declare import (
    REQUIRED,
    Command,
    Env,
    Option,
    Outcome,
    dry_run_option,
    run_option,
    strict_option,
)
from cli.output import plural, say, say_warnings
from ledger.core.aa import DRIFT_PAIRS_RULE, MIN_DRIFT_PAIRS


def noise(env: Env, run: str, measurements: str, dry_run: bool, strict: bool) -> Outcome:
    result = env.service().noise(run, Path(measurements), dry_run=dry_run, strict=strict)
    return Outcome({"status": "checked" if dry_run else "recorded", **result}, result)


def say_noise(out: Outcome, args) -> None:
    result = out.value
    state = (
        f"drift sigma {result['drift_sigma']:.4g} from {plural(result['drift_pairs'], 'pair')}"
        if result["drift_estimated"]
        else (
            f"drift unestimated ({plural(result['drift_pairs'], 'usable pair')}, "
            f"{plural(MIN_DRIFT_PAIRS - result['drift_pairs'], 'more `noise` call')} of this "
            f"kernel to go; {DRIFT_PAIRS_RULE})"
        )
    )
    say_warnings(result.get("warnings", ()))
    what = "checked (nothing written)" if args.dry_run else "recorded"
    say(f"{what} A/A remeasure of {result['kernel_sha256'][:12]}: {state}")


COMMAND = Command(
    "noise",
    f"""Record an A/A remeasure of the current best kernel; session drift is estimated from
    the run's pairs of measurements of the same kernel: {DRIFT_PAIRS_RULE}.

    Example:

    \b
        kernel-ledger template measurements > aa-1.json    # then fill it in
        kernel-ledger noise --run softmax-001 --measurements aa-1.json
    """,
    noise,
    say_noise,
    {
        "run": run_option(),
        "measurements": Option(
            "An A/A remeasure of the current best kernel (JSON; `template measurements` "
            "[[prints||returns]] one): the kernel's sha256 and one measurement per planned case.",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
        "dry_run": dry_run_option(
            "Check the file against the run and give the drift estimate it would make"
        ),
        "strict": strict_option(),
    },
    returns='`status` "recorded" (or "checked" with --dry-run), '
    "`run_id`, `kernel_sha256`, `pairs`, `drift_sigma`, "
    "`drift_estimated`, `drift_pairs`, `drift_flags` (and `warnings` when a key looks like a "
    "typo)",
    tool=True,
    one_shot=True,
)
