"""checkout: restore the best kernel (or a round's candidate) byte for byte."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from cli.declare import Command, Env, Option, Outcome, round_option, run_option
from cli.output import say


def checkout(env: Env, run: str, round: int | None, out: str | None, force: bool) -> Outcome:
    from ledger.errors import InputError
    from ledger.integrity.gate import restore_kernel, write_kernel

    if out is None and env.as_json:
        raise InputError(
            "a JSON result does not carry the kernel's source; name the kernel file with --out"
        )
    store = env.store()
    if out is None:  # the source itself goes to stdout
        return Outcome({}, (restore_kernel(store, run, round), None))
    restored = restore_kernel(store, run, round)
    written = write_kernel(Path(out), restored.content, force=force, protected=store.ledger_files())
    kernel = {k: v for k, v in asdict(restored).items() if k != "content"}
    document = {"status": "ok", **kernel, "path": str(written), "bytes": len(restored.content)}
    return Outcome(document, (restored, written))


def say_checkout(out: Outcome, args) -> None:
    restored, written = out.value
    if written is not None:
        say(
            f"restored round {restored.round}'s kernel {restored.sha256[:12]} of run "
            f"{restored.run_id} to {written} ({len(restored.content)} bytes)"
        )
        return
    sys.stdout.flush()
    if hasattr(sys.stdout, "buffer"):
        sys.stdout.buffer.write(restored.content)
        sys.stdout.buffer.flush()
    else:  # a text-only stream (tests): the source as text
        sys.stdout.write(restored.content.decode("utf-8", errors="replace"))


COMMAND = Command(
    "checkout",
    """Restore the best kernel (or a round's candidate) byte for byte from the ledger.

    Example: kernel-ledger checkout --run softmax-demo-001 --out softmax.py
    """,
    checkout,
    say_checkout,
    {
        "run": run_option("The run to restore from."),
        "round": round_option("Round N's candidate (0: the starting kernel)."),
        "out": Option(
            "The file to write the kernel to [[(default: stdout, which a JSON result cannot carry)"
            "||(a result cannot carry the kernel's source)]].",
            metavar="PATH",
            tool_required=True,
            file=True,
        ),
        "force": Option("Overwrite a different existing file.", bool, False),
    },
    returns='`status` "ok", `run_id`, `round`, `sha256`, `recorded_path`, `path`, `bytes`',
    tool=True,
)
