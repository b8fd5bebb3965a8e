"""import: runs from bundles, or from the JSON-file controller's run folders."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from cli.audit import CHECKPOINT, VERIFIER_KEY, key_arg, pinned_note
from cli.declare import Command, Env, Option, Outcome, WithDetails
from cli.output import plural, progress_line, say

if TYPE_CHECKING:
    from ledger.services.legacy import LegacyResult


def import_(
    env: Env,
    files: list[str],
    legacy: list[str],
    workspace: str | None,
    checkpoint: str | None,
    verifier_key: str | None,
) -> Outcome:
    from ledger.errors import InputError

    if not legacy and not files:
        raise InputError("name either a bundle FILE or --legacy DIR")
    if workspace is not None and not legacy:
        raise InputError("--workspace goes with --legacy DIR")
    if legacy:
        if checkpoint is not None or verifier_key is not None:
            raise InputError("--checkpoint and --verifier-key pin a bundle, not --legacy")
        return _import_legacy(env, [*legacy, *files], workspace)
    from ledger.integrity.bundle import import_bundles

    note = pinned_note(checkpoint)
    key = key_arg(verifier_key, "--verifier-key")
    if key is not None and note is None:
        raise InputError("--verifier-key checks the signature of a --checkpoint; name one")
    paths = [Path(file) for file in files]
    on_progress, finish = _counting(env, "bundles")
    results = import_bundles(
        env.store(create=True), paths, pinned_note=note, verifier_key=key, on_progress=on_progress
    )
    finish()
    bodies = [
        {"status": "imported" if result.events_imported else "unchanged", **asdict(result)}
        for result in results
    ]
    return Outcome(_imports(bodies, "bundles"), ("bundles", results))


def _counting(env: Env, what: str):
    """A progress line on stderr for an import of several (`progress_line`), and its end."""
    return progress_line(
        env.as_json, lambda done, total: f"\rimporting {done}/{total} {what}" if total > 1 else None
    )


def _imports(bodies: list[dict], key: str) -> dict:
    """The JSON of an import: one body as it is, several under `key` with the total."""
    if len(bodies) == 1:
        return bodies[0]
    imported = sum(body["events_imported"] for body in bodies)
    return {"status": "imported" if imported else "unchanged", key: bodies,
            "events_imported": imported}  # fmt: skip


def _import_legacy(env: Env, folders: list[str], workspace: str | None) -> Outcome:
    from ledger.errors import InputError
    from ledger.inputs.jsonio import display
    from ledger.services.legacy import LegacyRejected, import_legacies

    base = None
    if workspace is not None:
        base = Path(workspace)
        if not base.is_dir():
            raise InputError(f"--workspace {display(base)} is not a folder")
    paths = [Path(folder) for folder in folders]
    on_progress, finish = _counting(env, "run folders")
    try:
        results = import_legacies(
            env.store(create=True), paths, workspace=base, on_progress=on_progress
        )
    except LegacyRejected as exc:
        raise WithDetails(exc, run_id=exc.run_id, disagreements=exc.problems) from None
    finally:
        finish()
    bodies = [asdict(result) for result in results]
    return Outcome(_imports(bodies, "runs"), ("runs", results))


def say_import(out: Outcome, args) -> None:
    kind, results = out.value
    for result in results:
        if kind == "runs":
            _say_legacy(result)
        elif result.events_imported:
            say(
                f"imported run {result.run_id} from {result.origin}: "
                f"{plural(result.events_imported, 'event')} "
                f"(seq {result.first_seq}-{result.last_seq})"
            )
        else:
            say(
                f"run {result.run_id} is already in the ledger with these events; nothing to import"
            )


def _say_legacy(result: LegacyResult) -> None:
    if result.status == "unchanged":
        say(f"legacy run {result.run_id} is already in the ledger; nothing to import")
    elif result.events_imported < result.events:
        say(
            f"legacy run {result.run_id} was in the ledger up to event "
            f"{result.events - result.events_imported}; imported the "
            f"{plural(result.events_imported, 'event')} its folder has gained since, now "
            f"{plural(result.rounds, 'round')} ({', '.join(result.decisions) or 'none'})"
        )
    else:
        concluded = ""
        if result.reopened_rounds:
            concluded = (
                f", concluded {result.conclusion}, then reopened by rounds "
                f"{', '.join(map(str, result.reopened_rounds))} (recorded after analyze)"
            )
        elif result.concluded:
            concluded = f", concluded {result.conclusion}"
        say(
            f"imported legacy run {result.run_id}: {plural(result.rounds, 'round')} "
            f"({', '.join(result.decisions) or 'none'}), {plural(result.events, 'event')}"
            + concluded
        )
    for note in result.notes:
        say(f"  note: {note}")


COMMAND = Command(
    "import",
    """Import runs: bundles (same event hashes; importing again changes nothing) or, with
    --legacy, JSON-file controller run folders replayed and re-decided (importing a folder
    again adds only the rounds recorded since).

    Anything that does not verify or disagrees with a replay is refused (exit 2) and nothing
    is written: several bundles or folders are imported together or not at all, and the
    ones after the one being written are checked meanwhile in other processes. --checkpoint
    pins each bundle to a checkpoint of the ledger it came from (as verify --bundle
    --checkpoint does), --verifier-key also requires its signature.

    Example:

    \b
        kernel-ledger import softmax-demo-001.bundle.jsonl
        kernel-ledger import --legacy optimization/* --workspace .
    """,
    import_,
    say_import,
    {
        "files": Option(
            "Bundles written by export (with --legacy: more run folders), imported in this order.",
            metavar="FILE...",
            positional=True,
            many=True,
            file=True,
        ),
        "legacy": Option(
            "A run folder of the JSON-file controller; with --legacy, each FILE is another "
            "run folder (--legacy optimization/*).",
            metavar="DIR",
            many=True,
            file=True,
        ),
        "workspace": Option(
            "With --legacy: the folder the controller ran in, which relative paths in the run "
            "folder's files resolve against (default: the working directory).",
            metavar="DIR",
            file=True,
        ),
        "checkpoint": CHECKPOINT,
        "verifier_key": VERIFIER_KEY,
    },
    returns="one run's `status` (imported or unchanged), `run_id`, `events_imported` and "
    "more; several under `bundles` or `runs` with the total `events_imported`",
)
