"""analyze: conclude a run and write its analysis, report and manifest."""

from __future__ import annotations

from pathlib import Path

from cli.declare import Command, Env, Option, Outcome, run_option
from cli.output import say

DEFAULT_OUTPUT_ROOT = Path(".vaws-local/ascend-triton/optimization")


def analyze(env: Env, run: str, output_dir: str | None, force: bool) -> Outcome:
    from ledger.services.analysis import analyze as conclude

    folder = Path(output_dir) if output_dir else DEFAULT_OUTPUT_ROOT / run
    r = conclude(env.service(), run, folder, force=force)
    return Outcome(
        {
            "status": r.status,
            "run_id": r.run_id,
            "target_met": r.target_met,
            "best_kernel_sha256": r.best_kernel_sha256,
            "analysis": str(r.analysis_path),
        },
        r,
    )


def say_analyze(out: Outcome, args) -> None:
    r = out.value
    say(
        f"run {r.run_id} concluded {r.status}; best kernel {r.best_kernel_sha256[:12]}; "
        f"wrote {r.output_dir}/analysis.json, report.md, manifest.json"
    )


COMMAND = Command(
    "analyze",
    """Conclude the run (once) and write analysis.json, report.md and manifest.json.

    Example:

    \b
        kernel-ledger analyze --run softmax-demo-001 --output-dir out/softmax
    """,
    analyze,
    say_analyze,
    {
        "run": run_option("The run to conclude."),
        "output_dir": Option(
            "The folder to write analysis.json, report.md and manifest.json to "
            "(default: .vaws-local/ascend-triton/optimization/<run>).",
            metavar="DIR",
            file=True,
        ),
        "force": Option("Overwrite output files that hold other content.", bool, False),
    },
    returns="`status` (passed, failed or inconclusive), `run_id`, `target_met`, "
    "`best_kernel_sha256`, `analysis` (the path of analysis.json)",
    tool=True,
)
