"""check-merge: the pre-merge reproducibility gate."""

from __future__ import annotations

import sys
from pathlib import Path

from cli.audit import CHECKPOINT, SINCE, VERIFIER_KEY, key_arg, pinned_note
from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import say, terminal_safe


def check_merge(
    env: Env,
    run: str,
    kernel: str,
    checkpoint: str | None,
    verifier_key: str | None,
    strict_artifacts: bool,
    markdown: bool,
    since: str | None,
) -> Outcome:
    from ledger.errors import InputError
    from ledger.integrity.audit import read_note_arg
    from ledger.integrity.gate import check_merge as gate

    key = key_arg(verifier_key, "--verifier-key")
    note = pinned_note(checkpoint)
    if since is not None and note is not None:
        raise InputError("--since and --checkpoint are two starting points; give one")
    since_note = read_note_arg(since, "--since") if since is not None else None
    if key is not None and note is None and since_note is None:
        raise InputError("--verifier-key needs --checkpoint or --since")
    result = gate(
        env.store(),
        run,
        Path(kernel),
        pinned_note=note,
        verifier_key=key,
        strict_artifacts=strict_artifacts,
        since_note=since_note,
    )
    body = result.as_dict()
    if markdown:
        body["markdown"] = result.markdown()
    failure = None
    if not result.ok:
        more = f" (and {len(result.reasons) - 1} more)" if len(result.reasons) > 1 else ""
        failure = f"check-merge failed: {result.reasons[0]}{more}"
    return Outcome(body, result, failure)


def say_check_merge(out: Outcome, args) -> None:
    result = out.value
    if args.markdown:
        sys.stdout.write(terminal_safe(result.markdown()))
        return
    verdict = "passed" if result.ok else "FAILED"
    say(f"check-merge {verdict}: run {result.run_id}, kernel {result.kernel_path}")
    for name, status in result.checks.items():
        say(f"  {name:<11} {status}")
    for reason in result.reasons:
        say(f"  - {reason}")
    for note_text in result.notes:
        say(f"  note: {note_text}")
    for line in result.recorded_by():
        say(f"  {line}")


COMMAND = Command(
    "check-merge",
    """The pre-merge gate: [[exit 0||`status` "ok"]] only if the run concluded passed, the file
    is its best kernel, the run verifies and the pinned checkpoint (if given) holds[[||;
    otherwise an error result, `status` "failed", with its `reasons`]].

    Example:

    \b
        kernel-ledger check-merge --run softmax-demo-001 \\
          --kernel kernels/softmax_r5.py
    """,
    check_merge,
    say_check_merge,
    {
        "run": run_option("The run the kernel comes from."),
        "kernel": Option("The kernel file to merge.", default=REQUIRED, metavar="PATH", file=True),
        "checkpoint": CHECKPOINT,
        "verifier_key": VERIFIER_KEY,
        "strict_artifacts": Option("Changed or missing evidence files fail the gate.", bool, False),
        "markdown": Option(
            "[[Print||Return]] a summary fit for a pull-request comment[[||, as `markdown`]].",
            bool,
            False,
        ),
        "since": SINCE,
    },
    returns="`status` (ok or failed), `run_id`, `kernel` {path, sha256}, `best_kernel_sha256`, "
    "`best_round`, `conclusion`, `checks` {concluded, kernel, verify, checkpoint, artifacts}, "
    "`reasons`, `notes`, `verification`, `artifacts`, `decisions` [{round, decision, actor}] "
    "and `concluded_by` (who recorded each; an actor is null before actors were recorded); "
    "with --markdown also `markdown`",
    tool=True,
)
