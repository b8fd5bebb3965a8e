"""export: one run as a verifiable bundle."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from cli.audit import pinned_note
from cli.declare import REQUIRED, Command, Env, Option, Outcome, run_option
from cli.output import plural, say


def export(env: Env, run: str, out: str, force: bool, checkpoint: list[str]) -> Outcome:
    from ledger.integrity.bundle import export_run

    notes = [note for note in map(pinned_note, checkpoint) if note is not None]
    result = export_run(env.store(), run, Path(out), pinned_notes=notes, force=force)
    return Outcome({"status": "exported", **asdict(result), "path": str(result.path)}, result)


def say_export(out: Outcome, args) -> None:
    result = out.value
    say(
        f"exported run {result.run_id}: {plural(result.events, 'event')} and "
        f"{plural(result.blobs, 'file')} to "
        f"{result.path}, proven in the tree of {plural(result.tree_size, 'event')} "
        f"({result.root})"
    )


COMMAND = Command(
    "export",
    """Write one run as a verifiable bundle (JSON Lines): its events with inclusion proofs
    in the ledger's checkpoint, and its kernel sources.

    Example:

    \b
        kernel-ledger export --run softmax-demo-001 --out softmax-demo-001.bundle.jsonl
    """,
    export,
    say_export,
    {
        "run": run_option("The run to export."),
        "out": Option("The bundle file to write.", default=REQUIRED, metavar="FILE", file=True),
        "force": Option("Overwrite an existing --out file.", bool, False),
        "checkpoint": Option(
            "Also prove consistency with this pinned checkpoint (repeatable).",
            metavar="NOTE_OR_FILE",
            many=True,
            file_or_text=True,
        ),
    },
    returns='`status` "exported", `run_id`, `path`, `events`, `blobs`, `tree_size`, `root`, '
    "`consistency_sizes`, `bytes`",
)
