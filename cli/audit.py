"""verify, checkpoint, export, import, check-merge, checkout: prove the history is intact,
carry a run to another ledger, and gate a merge on it."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from cli import tools
from cli.common import (
    JSON,
    checked_options,
    checked_run_id,
    input_path,
    ledger,
    open_store,
    run_use_case,
)
from cli.output import emit_json, error, plural, progress, say, terminal_safe

if TYPE_CHECKING:
    from ledger.services.legacy import LegacyResult

CHECKPOINT = typer.Option(
    None,
    "--checkpoint",
    metavar="NOTE_OR_FILE",
    help="A pinned checkpoint note, or a file holding one.",
)
VERIFIER_KEY = typer.Option(
    None,
    "--verifier-key",
    metavar="KEY_OR_FILE",
    help="Require a valid signature on the pinned checkpoint by this verifier key.",
)
PROGRESS_MIN_EVENTS = 5000
BAR_WIDTH = 30


def register(app: typer.Typer) -> None:
    app.command("verify")(verify)
    app.command("checkpoint")(checkpoint)
    app.command("export")(export)
    app.command("import")(import_)
    app.command("check-merge")(check_merge)
    app.command("checkout")(checkout)


def progress_bar(done: int, total: int, what: str = "verifying") -> str:
    """One line of a progress bar, drawn over itself with a carriage return.

    >>> progress_bar(50, 200)
    '\\rverifying [#######.......................]  25% 50/200 events'
    """
    total = max(total, done, 1)
    filled = BAR_WIDTH * done // total
    percent = 100 * done // total
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    return f"\r{what} [{bar}] {percent:3d}% {done}/{total} events"


def _progress(as_json: bool, what: str = "verifying"):
    """A progress callback drawing on stderr for large ledgers (never with --json, never
    when stderr is not a terminal), and a function that ends its line."""
    shown = {"any": False}
    if as_json or not sys.stderr.isatty():
        return None, lambda: None

    def on_progress(done: int, total: int) -> None:
        if total >= PROGRESS_MIN_EVENTS:
            shown["any"] = True
            progress(progress_bar(done, total, what))

    def finish() -> None:
        if shown["any"]:
            progress("\n")

    return on_progress, finish


# --- verify --------------------------------------------------------------------------------


def verify(
    ctx: typer.Context,
    run: str = typer.Option(None, "--run", metavar="ID", help="Only this run's events."),
    checkpoint: str = CHECKPOINT,
    verifier_key: str = VERIFIER_KEY,
    artifacts: bool = typer.Option(
        False, "--artifacts", help="Also hash the files the events name (reported apart)."
    ),
    bundle: str = typer.Option(
        None, "--bundle", metavar="FILE", help="Check an exported bundle offline (no database)."
    ),
    chain: bool = typer.Option(
        False, "--chain", help="Only the fast seq, hash and chain checks over the stored rows."
    ),
    as_json: bool = JSON,
) -> None:
    """Check hashes, chains, canonical payloads, decisions, projections and checkpoints;
    exit 1 on failure.

    With --checkpoint, the root of the first N events must equal the pinned one. With
    --bundle, a bundle file is checked on its own, without opening any ledger. With --chain,
    only seq, hash and chain are checked (no replay), near the speed of reading the rows.

    Example: kernel-ledger verify --checkpoint checkpoint.txt --artifacts
    """
    on_progress, finish = _progress(as_json)
    try:
        out = run_use_case(ctx, "verify", on_progress=on_progress)
    finally:
        finish()
    kind, report = out.value
    if as_json:
        emit_json(out.document)
    elif kind == "chain" and report.ok:
        say(
            f"chain verified: {plural(report.events_checked, 'event')} in "
            f"{plural(report.runs_checked, 'run')}; "
            f"checks {', '.join(report.checks)} all ok"
        )
    elif kind == "bundle" and report.ok:
        say(
            f"bundle verified: run {report.run_id}, {plural(report.events_checked, 'event')} and "
            f"{plural(report.blobs_checked, 'file')}, all in the tree of "
            f"{plural(report.tree_size, 'event')} of "
            f"{report.origin} ({report.root})"
        )
        if report.pinned is not None:
            say(f"pinned checkpoint of {plural(report.pinned['size'], 'event')} holds")
    elif kind == "ledger":
        _say_verified(report)
    if out.failure is not None:
        sys.stderr.write(f"Error: {out.failure}\n")
        raise typer.Exit(1)


def _say_verified(report) -> None:
    if report.chain_ok and report.first_failure is None:
        checks = report.checks()
        say(
            f"verified: {plural(report.ledger.events_checked, 'event')} in "
            f"{plural(report.ledger.runs_checked, 'run')}; checks {', '.join(checks)} all ok"
        )
    if report.pinned is not None and report.pinned.status == "ok":
        say(f"checkpoint of {plural(report.pinned.size, 'event')} holds ({report.pinned.root})")
    for warning in report.ledger.warnings:
        say(f"warning: {warning}")
    if report.artifacts is not None:
        art = report.artifacts
        say(
            f"evidence files: {art.checked} checked, {len(art.changed)} changed, "
            f"{len(art.missing)} missing"
        )
        for sentence in art.sentences():
            say(f"  {sentence}")


# --- checkpoint ----------------------------------------------------------------------------


def checkpoint(
    ctx: typer.Context,
    sign: str = typer.Option(
        None, "--sign", metavar="KEYFILE", help="Sign the note with this Ed25519 signer key."
    ),
    out: str = typer.Option(None, "--out", metavar="FILE", help="Also write the note to FILE."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out file."),
    generate_key: str = typer.Option(
        None,
        "--generate-key",
        metavar="KEYFILE",
        help="Write a new signer key to KEYFILE, print its verifier key, and stop.",
    ),
    as_json: bool = JSON,
) -> None:
    """Verify the whole ledger, then print and store its checkpoint note (C2SP
    tlog-checkpoint: origin, size, base64 RFC 6962 root).

    Pin the note outside the database (a pull request, a git tag, CI configuration); verify
    --checkpoint then detects any rewrite of the history it covers.

    Example: kernel-ledger checkpoint --out checkpoint.txt
    """
    from ledger import files
    from ledger.errors import InputError
    from ledger.integrity import audit
    from ledger.services.session import utc_now

    if generate_key is not None:
        if sign is not None or out is not None:
            raise InputError("--generate-key makes a key and stops; it takes no --sign or --out")
        store = open_store(ctx)
        path = input_path(generate_key, "--generate-key")
        verifier = audit.generate_key(path, audit.ledger_origin(store), store.ledger_files())
        if as_json:
            emit_json({"status": "ok", "signer_key_file": str(path), "verifier_key": verifier})
        else:
            say(f"signer key written to {path} (keep it secret); verifier key:\n{verifier}")
        return
    signer = tools.key_arg(sign, "--sign")
    out_path = input_path(out, "--out") if out is not None else None
    store = open_store(ctx)
    if out_path is not None:  # refused before the ledger is verified and the note stored
        files.check_output(out_path, force=force, protected=store.ledger_files())
    on_progress, finish = _progress(as_json)
    made = audit.make_checkpoint(store, signer_key=signer, clock=utc_now, on_progress=on_progress)
    finish()
    if out_path is not None:
        files.write_output(
            out_path, made.note.encode("utf-8"), force=force, protected=store.ledger_files()
        )
    if as_json:
        emit_json(
            {
                "status": "ok",
                "origin": made.checkpoint.origin,
                "size": made.checkpoint.size,
                "root": audit.b64(made.checkpoint.root),
                "note": made.note,
                "signed": made.signed,
                "verifier_key": made.verifier_key,
                "checkpoint_id": made.checkpoint_id,
                "stored": made.stored,
                "out": str(out_path) if out_path is not None else None,
            }
        )
    else:
        sys.stdout.write(made.note)


# --- export / import -----------------------------------------------------------------------


def export(
    ctx: typer.Context,
    run: str = typer.Option(
        ..., "--run", metavar="ID", callback=checked_run_id, help="The run to export."
    ),
    out: str = typer.Option(..., "--out", metavar="FILE", help="The bundle file to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --out file."),
    checkpoint: list[str] = typer.Option(
        None,
        "--checkpoint",
        metavar="NOTE_OR_FILE",
        help="Also prove consistency with this pinned checkpoint (repeatable).",
    ),
    as_json: bool = JSON,
) -> None:
    """Write one run as a verifiable bundle (JSON Lines): its events with inclusion proofs
    in the ledger's checkpoint, and its kernel sources.

    Example:

    \b
        kernel-ledger export --run softmax-demo-001 --out softmax-demo-001.bundle.jsonl
    """
    from ledger.integrity.bundle import export_run

    notes = [n for n in (tools.pinned_note(c) for c in checkpoint or []) if n is not None]
    out_path = input_path(out, "--out")
    result = export_run(open_store(ctx), run, out_path, pinned_notes=notes, force=force)
    if as_json:
        emit_json(
            {
                "status": "exported",
                "run_id": result.run_id,
                "path": str(result.path),
                "events": result.events,
                "blobs": result.blobs,
                "tree_size": result.tree_size,
                "root": result.root,
                "consistency_sizes": result.consistency_sizes,
                "bytes": result.bytes,
            }
        )
    else:
        say(
            f"exported run {result.run_id}: {plural(result.events, 'event')} and "
            f"{plural(result.blobs, 'file')} to "
            f"{result.path}, proven in the tree of {plural(result.tree_size, 'event')} "
            f"({result.root})"
        )


def import_(
    ctx: typer.Context,
    files: list[str] = typer.Argument(
        None,
        metavar="FILE...",
        help="Bundles written by export (with --legacy: more run folders), imported in this order.",
    ),
    legacy: list[str] = typer.Option(
        None,
        "--legacy",
        metavar="DIR",
        help="A run folder of the JSON-file controller; with --legacy, each FILE is another "
        "run folder (--legacy optimization/*).",
    ),
    workspace: str = typer.Option(
        None,
        "--workspace",
        metavar="DIR",
        help="With --legacy: the folder the controller ran in, which relative paths in the run "
        "folder's files resolve against (default: the working directory).",
    ),
    checkpoint: str = CHECKPOINT,
    verifier_key: str = VERIFIER_KEY,
    as_json: bool = JSON,
) -> None:
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
    """
    from ledger.errors import InputError

    files = files or []
    if not legacy and not files:
        raise InputError("name either a bundle FILE or --legacy DIR")
    if workspace is not None and not legacy:
        raise InputError("--workspace goes with --legacy DIR")
    if legacy:
        if checkpoint is not None or verifier_key is not None:
            raise InputError("--checkpoint and --verifier-key pin a bundle, not --legacy")
        _import_legacy(ctx, [*legacy, *files], workspace, as_json)
        return
    from ledger.integrity.bundle import import_bundles

    note = tools.pinned_note(checkpoint)
    key = tools.key_arg(verifier_key, "--verifier-key")
    if key is not None and note is None:
        raise InputError("--verifier-key checks the signature of a --checkpoint; name one")
    paths = [input_path(file, "FILE") for file in files]
    show = len(paths) > 1 and not as_json and sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if show:
            progress(f"\rimporting {done}/{total} bundles")

    results = import_bundles(
        open_store(ctx, create=True),
        paths,
        pinned_note=note,
        verifier_key=key,
        on_progress=on_progress,
    )
    if show:
        progress("\n")
    bodies = [
        {
            "status": "imported" if result.events_imported else "unchanged",
            "run_id": result.run_id,
            "origin": result.origin,
            "events_in_bundle": result.events_in_bundle,
            "events_imported": result.events_imported,
            "first_seq": result.first_seq,
            "last_seq": result.last_seq,
        }
        for result in results
    ]
    if as_json:
        _emit_imports(bodies, "bundles")
        return
    for result in results:
        if result.events_imported:
            say(
                f"imported run {result.run_id} from {result.origin}: "
                f"{plural(result.events_imported, 'event')} "
                f"(seq {result.first_seq}-{result.last_seq})"
            )
        else:
            say(
                f"run {result.run_id} is already in the ledger with these events; nothing to import"
            )


def _emit_imports(bodies: list[dict], key: str) -> None:
    """The JSON of an import: one body as it is, several under `key` with the total."""
    if len(bodies) == 1:
        emit_json(bodies[0])
        return
    imported = sum(body["events_imported"] for body in bodies)
    emit_json(
        {
            "status": "imported" if imported else "unchanged",
            key: bodies,
            "events_imported": imported,
        }
    )


def _import_legacy(
    ctx: typer.Context, folders: list[str], workspace: str | None, as_json: bool
) -> None:
    from ledger.errors import InputError
    from ledger.inputs.jsonio import display
    from ledger.services.legacy import LegacyRejected, import_legacies

    base = None
    if workspace is not None:
        base = input_path(workspace, "--workspace")
        if not base.is_dir():
            raise InputError(f"--workspace {display(base)} is not a folder")
    paths = [input_path(folder, "--legacy") for folder in folders]
    show = len(paths) > 1 and not as_json and sys.stderr.isatty()

    def on_progress(done: int, total: int) -> None:
        if show:
            progress(f"\rimporting {done}/{total} run folders")

    try:
        results = import_legacies(
            open_store(ctx, create=True), paths, workspace=base, on_progress=on_progress
        )
    except LegacyRejected as exc:
        if show:
            progress("\n")
        if not as_json:
            raise
        error(exc.message, exc.exit_code, as_json=False)
        emit_json(
            {
                "status": "error",
                "error": exc.message,
                "exit_code": exc.exit_code,
                "run_id": exc.run_id,
                "disagreements": exc.problems,
            }
        )
        raise typer.Exit(exc.exit_code) from None
    if show:
        progress("\n")
    if as_json:
        bodies = [
            {
                "status": result.status,
                "run_id": result.run_id,
                "rounds": result.rounds,
                "events": result.events,
                "events_imported": result.events_imported,
                "decisions": result.decisions,
                "concluded": result.concluded,
                "conclusion": result.conclusion,
                "best_kernel_sha256": result.best_kernel_sha256,
                "legacy_files": result.legacy_files,
                "reopened_rounds": result.reopened_rounds,
                "notes": result.notes,
            }
            for result in results
        ]
        _emit_imports(bodies, "runs")
        return
    for result in results:
        _say_legacy(result)


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


# --- check-merge ---------------------------------------------------------------------------


def check_merge(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run the kernel comes from."),
    kernel: str = typer.Option(..., "--kernel", metavar="PATH", help="The kernel file to merge."),
    checkpoint: str = CHECKPOINT,
    verifier_key: str = VERIFIER_KEY,
    strict_artifacts: bool = typer.Option(
        False, "--strict-artifacts", help="Changed or missing evidence files fail the gate."
    ),
    markdown: bool = typer.Option(
        False, "--markdown", help="Print a summary fit for a pull-request comment."
    ),
    as_json: bool = JSON,
) -> None:
    """The pre-merge gate: exit 0 only if the run concluded passed, the file is its best
    kernel, the run verifies and the pinned checkpoint (if given) holds.

    Example:

    \b
        kernel-ledger check-merge --run softmax-demo-001 \\
          --kernel examples/softmax-demo/kernels/softmax_r5_gridstride.py
    """
    out = run_use_case(ctx, "check-merge")
    result = out.value
    if as_json:
        emit_json(out.document)
    elif markdown:
        sys.stdout.write(terminal_safe(result.markdown()))
    else:
        verdict = "passed" if result.ok else "FAILED"
        say(f"check-merge {verdict}: run {result.run_id}, kernel {result.kernel_path}")
        for name, status in result.checks.items():
            say(f"  {name:<11} {status}")
        for reason in result.reasons:
            say(f"  - {reason}")
        for note_text in result.notes:
            say(f"  note: {note_text}")
    if out.failure is not None:
        sys.stderr.write(f"Error: {out.failure}\n")
        raise typer.Exit(1)


# --- checkout ------------------------------------------------------------------------------


def checkout(
    ctx: typer.Context,
    run: str = typer.Option(..., "--run", metavar="ID", help="The run to restore from."),
    round_no: int = typer.Option(
        None,
        "--round",
        metavar="N",
        help="Round N's candidate (0: the starting kernel).",
    ),
    out: str = typer.Option(
        None, "--out", metavar="PATH", help="Write the kernel here (default: stdout)."
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite a different existing file."),
    as_json: bool = JSON,
) -> None:
    """Restore the best kernel (or a round's candidate) byte for byte from the ledger.

    Example: kernel-ledger checkout --run softmax-demo-001 --out softmax.py
    """
    if out is not None or as_json:
        done = run_use_case(ctx, "checkout")
        if as_json:
            emit_json(done.document)
            return
        restored, written = done.value
        say(
            f"restored round {restored.round}'s kernel {restored.sha256[:12]} of run "
            f"{restored.run_id} to {written} ({len(restored.content)} bytes)"
        )
        return
    options = checked_options(ctx, "checkout")
    restored = tools.restore(ledger(ctx), options["run"], options["round_no"])
    sys.stdout.flush()
    if hasattr(sys.stdout, "buffer"):
        sys.stdout.buffer.write(restored.content)
        sys.stdout.buffer.flush()
    else:  # a text-only stream (tests): the source as text
        sys.stdout.write(restored.content.decode("utf-8", errors="replace"))
