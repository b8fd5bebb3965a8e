"""noise: record an A/A remeasure of the current best kernel."""

from __future__ import annotations

from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import plural, say
from ledger.core.aa import DRIFT_PAIRS_RULE


def noise(env: Env, run: str, measurements: str) -> Outcome:
    result = env.service().noise(run, Path(measurements))
    return Outcome({"status": "recorded", **result}, result)


def say_noise(out: Outcome, args) -> None:
    result = out.value
    state = (
        f"drift sigma {result['drift_sigma']:.4g} from {plural(result['drift_pairs'], 'pair')}"
        if result["drift_estimated"]
        else (
            f"drift unestimated ({plural(result['drift_pairs'], 'usable pair')}; "
            f"{DRIFT_PAIRS_RULE})"
        )
    )
    say(f"recorded A/A remeasure of {result['kernel_sha256'][:12]}: {state}")


COMMAND = Command(
    "noise",
    f"""Record an A/A remeasure of the current best kernel; session drift is estimated from
    the run's pairs of measurements of the same kernel: {DRIFT_PAIRS_RULE}.

    Example:

    \b
        kernel-ledger noise --run softmax-demo-001 \\
          --measurements examples/softmax-demo/remeasures/aa-1.json
    """,
    noise,
    say_noise,
    {
        "run": run_option(),
        "measurements": Option(
            "An A/A remeasure of the current best kernel (JSON): the kernel's sha256 and one "
            "measurement per planned case.",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
    },
    returns='`status` "recorded", `run_id`, `kernel_sha256`, `pairs`, `drift_sigma`, '
    "`drift_estimated`, `drift_pairs`, `drift_flags`",
    tool=True,
    one_shot=True,
)
