"""Store operations of the audit commands: stored checkpoints, and verbatim imports of a
run's events as a bundle or a legacy folder's replay sealed them.

Every function works inside a transaction the caller opened with `Store.transaction`, so an
import is one transaction: all of it is written, or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, bindparam, func, select

from ledger.core import projections
from ledger.core.projections import RunView
from ledger.errors import InputError
from ledger.store.eventstore import Store, StoredEvent
from ledger.store.tables import checkpoints, events


@dataclass(frozen=True)
class StoredCheckpoint:
    """A row of `checkpoints`, its fields in the order the web view's JSON gives them."""

    checkpoint_id: int
    origin: str
    tree_size: int
    root_hash: str  # base64, as in the note
    signed: bool
    created_at: str
    note: str


def save_checkpoint(
    conn: Connection,
    *,
    origin: str,
    tree_size: int,
    root_hash: str,
    note: str,
    signed: bool,
    created_at: str,
) -> tuple[StoredCheckpoint, bool]:
    """Store a checkpoint note unless the very same note is stored already.

    Returns the stored row and whether it is new."""
    for row in list_checkpoints(conn, tree_size=tree_size):
        if row.note == note:
            return row, False
    next_id = conn.execute(
        select(func.coalesce(func.max(checkpoints.c.checkpoint_id), 0))
    ).scalar_one()
    row = StoredCheckpoint(
        checkpoint_id=next_id + 1,
        origin=origin,
        tree_size=tree_size,
        root_hash=root_hash,
        note=note,
        signed=signed,
        created_at=created_at,
    )
    conn.execute(checkpoints.insert().values(**row.__dict__))
    return row, True


def list_checkpoints(conn: Connection, *, tree_size: int | None = None) -> list[StoredCheckpoint]:
    """Stored checkpoints, oldest first (optionally only those of one tree size)."""
    query = select(checkpoints).order_by(checkpoints.c.checkpoint_id)
    if tree_size is not None:
        query = query.where(checkpoints.c.tree_size == tree_size)
    return [StoredCheckpoint(**row) for row in conn.execute(query).mappings()]


# --- imports ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportOutcome:
    run_id: str
    imported: list[StoredEvent]  # the events written now, with the seq they got here


def import_run_verbatim(
    store: Store,
    conn: Connection,
    run_id: str,
    records: Sequence[StoredEvent],
    blobs: Sequence[bytes],
    view: RunView | None = None,
    *,
    source: str = "the bundle",
) -> ImportOutcome:
    """Append one run's events exactly as they were sealed elsewhere (same event ids,
    versions, times, payload bytes, parent and event hashes): by another ledger (a bundle)
    or by a legacy folder's replay. Only `seq` is assigned here, at the end of this ledger.

    `records` must be the run's chain from version 1 (the caller verified or sealed it), and
    `view`, when given, the projection folded from all of them (the caller's replay did):
    then the events are not parsed again here. Versions this ledger already holds must be
    the very same events: then they are skipped, so importing again writes nothing, and a
    source that has gone on since adds the events after them. Any difference is refused
    and nothing is written; `source` names where the events came from in that refusal.
    """
    if not records:
        raise InputError(f"{source} holds no events")
    present = store.read_stream(conn, run_id)
    for mine, theirs in zip(present, records, strict=False):
        if mine.event_hash != theirs.event_hash or mine.event_id != theirs.event_id:
            raise InputError(
                f"run {run_id!r} is already in this ledger with different content at version "
                f"{mine.stream_version} (event {mine.event_hash[:16]}… here, "
                f"{theirs.event_hash[:16]}… in {source}); nothing was imported"
            )
    new = list(records[len(present) :])
    if not new:
        return ImportOutcome(run_id, [])
    head_version, head_hash = (
        (present[-1].stream_version, present[-1].event_hash) if present else (0, "0" * 64)
    )
    if new[0].stream_version != head_version + 1 or new[0].parent_hash != head_hash:
        raise InputError(
            f"{source}'s events of run {run_id!r} do not continue this ledger's chain at "
            f"version {head_version + 1}; nothing was imported"
        )
    clash = conn.execute(
        select(events.c.event_id, events.c.stream_id, events.c.stream_version).where(
            events.c.event_id.in_(bindparam("ids", expanding=True))
        ),
        {"ids": [e.event_id for e in new]},
    ).first()
    if clash is not None:
        raise InputError(
            f"event id {clash[0]} of {source} is already used by run {clash[1]!r} version "
            f"{clash[2]} in this ledger; nothing was imported"
        )
    # the caller verified the bundle's hashes; the writer checks versions and parents
    rows = store.write(conn, run_id, (head_version, head_hash), new, hashes_checked=True)
    store.put_blobs(conn, list(blobs))
    if view is None:
        _refold(store, conn, run_id, [*present, *rows])
    else:
        before = store.stored_projection(conn, run_id) if present else None
        store.save_view(conn, before, view)
    return ImportOutcome(run_id, rows)


def _refold(store: Store, conn: Connection, run_id: str, stream: Sequence[StoredEvent]) -> None:
    """Fold the run's whole stream and bring its projection rows up to date."""
    view: RunView | None = None
    for e in stream:
        view = projections.apply(view, e.stream_version, e.recorded_at, e.event())
    assert view is not None
    before = store.stored_projection(conn, run_id)
    store.save_view(conn, before, view)
