"""What the audit commands share (verify, checkpoint, export, import, check-merge): the
pinned checkpoint and verifier key options, and the progress bar of a long check."""

from __future__ import annotations

from cli.declare import Option
from cli.output import progress_line

CHECKPOINT = Option(
    "A pinned checkpoint note (C2SP tlog-checkpoint: origin, size, root), or a file holding one.",
    metavar="NOTE_OR_FILE",
    file_or_text=True,
)
VERIFIER_KEY = Option(
    "Require a valid signature on the pinned checkpoint by this Ed25519 verifier key (the "
    "key, or a file holding it).",
    metavar="KEY_OR_FILE",
    file_or_text=True,
)
SINCE = Option(
    "Verify from this checkpoint note on (the note, or a file holding it): the events it "
    "covers by Merkle consistency, the runs touched after it by replay.",
    metavar="NOTE_OR_FILE",
    file_or_text=True,
)
PROGRESS_MIN_EVENTS = 5000
BAR_WIDTH = 30


def pinned_note(value: str | None) -> str | None:
    """The note of a --checkpoint (its text, or read from its file), checked well-formed:
    a malformed note is rejected (exit 2) before the ledger is opened."""
    from ledger.integrity.audit import parse_pinned, read_note_arg

    if value is None:
        return None
    note = read_note_arg(value)
    parse_pinned(note)
    return note


def key_arg(value: str | None, flag: str) -> str | None:
    from ledger.integrity.audit import read_key_arg

    return read_key_arg(value, flag) if value is not None else None


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
    """A progress bar on stderr for large ledgers (`progress_line`), and its end."""
    return progress_line(
        as_json,
        lambda done, total: (
            progress_bar(done, total, what) if total >= PROGRESS_MIN_EVENTS else None
        ),
    )


def failed_at(f, of: str = "ledger") -> str:
    """The one-line failure of a verification, at its first bad event."""
    where = f"seq {f.seq} ({f.stream_id} v{f.stream_version})" if f.seq else of
    what = "verification" if of == "ledger" else f"{of} verification"
    return f"{what} failed at {where}: {f.check}: {f.reason}"
