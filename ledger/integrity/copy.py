"""Moving a ledger: copy every event, blob and the ledger's identity into an empty ledger.

The events are copied verbatim (same seq, ids, versions, times, payload bytes, parent and
event hashes), never re-appended, so every hash, every run's chain and the Merkle tree head
survive the move between SQLite and PostgreSQL in either direction. Each event passes the
per-event checks of `verify` on the way (`eventchecks.LedgerCheck`: seq, hash, chain, canonical
payload, payload validates), so a damaged source is refused, not copied; nothing is
canonicalized or hashed anew. So is every other table
of recorded facts (blobs, ledger_info with the ledger's id, stored checkpoints, and any
table a later revision adds), row for row. The projection tables (`PROJECTION_TABLES`) are
not copied: they are folded again from the copied events, as a rebuild would.

Everything is written in one transaction on the target, which is read back and compared
with the source before it commits; a copy that fails leaves the target empty.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter
from typing import Any

from ledger.core import projections
from ledger.core.events import Event
from ledger.errors import CheckFailed, InputError, LedgerError
from ledger.inputs.jsonio import plural
from ledger.integrity import merkle
from ledger.integrity.eventchecks import LedgerCheck, ReplayStop
from ledger.integrity.hashing import ZERO_HASH
from ledger.store.eventstore import PAYLOAD_AT, Store, StoredEvent, event_row
from ledger.store.transfer import copy_recorded_facts, held_rows, insert_blobs, sqlite_file
from ledger.store.urls import parse_url

BATCH = 1000


@dataclass(frozen=True)
class CopyResult:
    ledger_id: str
    events: int
    blobs: int
    runs: int
    other_rows: dict[str, int]  # rows copied from the other recorded tables
    tree_size: int
    tree_root: str  # base64, as in a checkpoint note


def open_target(source: Store, url: str) -> Store:
    """Open the ledger to copy into, creating or migrating an empty database to head.

    A target at an older revision is refused with the upgrade command (nothing is copied
    into a schema this kernel-ledger does not write)."""
    parse_url(url, flag="--to")
    mine = sqlite_file(source.url)
    if mine is not None and mine == sqlite_file(url):
        raise InputError(f"--to names the ledger being copied ({mine}); give another ledger")
    target = Store(url, check_schema=False)
    try:
        if target.revision() is None:
            target.upgrade()
    finally:
        target.close()
    return Store(url)


def copy_ledger(
    source: Store,
    target: Store,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> CopyResult:
    """Copy `source` into the empty ledger `target` (see the module docstring)."""
    with source.transaction() as src, target.transaction(write=True) as dst:
        _refuse_unless_empty(target, dst)
        ledger_id = source.ledger_id(src)
        other_rows = copy_recorded_facts(src, dst, target.shown_url)
        runs, size, root = _copy_events(source, src, target, dst, on_progress)
        blob_count, blob_digest = _copy_blobs(source.iter_blobs(src), dst)
        _check_read_back(target, dst, size, blob_count, blob_digest)
    if on_progress is not None:
        on_progress(size, size)
    return CopyResult(
        ledger_id=ledger_id,
        events=size,
        blobs=blob_count,
        runs=runs,
        other_rows=other_rows,
        tree_size=size,
        tree_root=base64.b64encode(root).decode("ascii"),
    )


def _copy_events(
    source: Store,
    src: Any,
    target: Store,
    dst: Any,
    on_progress: Callable[[int, int], None] | None,
) -> tuple[int, int, bytes]:
    """Check, fold and write every event, a page at a time, each page read back as it is
    written; (runs, events, Merkle root of the events' hashes)."""
    total = source.event_count(src) if on_progress else 0
    writer, tree, check = _Writer(target, dst), merkle.TreeBuilder(), LedgerCheck()

    def save_view(run_id: str, view: projections.RunView, again: bool) -> None:
        before = target.stored_projection(dst, run_id) if again else None  # rows it holds
        target.save_view(dst, before, view)

    def write(page: list[StoredEvent]) -> None:
        writer.write(page)
        _check_page_read_back(target, dst, page)
        if on_progress is not None:
            on_progress(writer.seq, total)

    folds = _Folds(source, src, save_view)
    page: list[StoredEvent] = []
    for e in source.iter_events(src, batch=BATCH):
        event = _checked(check, e)
        page.append(e)
        tree.append(bytes.fromhex(e.event_hash))
        if len(page) == BATCH:
            write(page)
            page = []
        folds.add(e, event)
    if page:
        write(page)
    folds.finish()
    return folds.runs, tree.size, tree.root()


class _Writer:
    """The copied events go through the target store's one writer (`Store.write`), a run of
    consecutive events of one stream per call, each at the seq after the last one written:
    the source's own, since its seq is gapless from 1 (`LedgerCheck` checked it, and each
    event's hash, on the way). The writer checks that each event continues its run's chain;
    a source that does not is refused and nothing is written."""

    def __init__(self, target: Store, dst: Any) -> None:
        self.target = target
        self.dst = dst
        self.heads: dict[str, tuple[int, str]] = {}
        self.seq = 0

    def write(self, page: list[StoredEvent]) -> None:
        for stream_id, events in groupby(page, key=attrgetter("stream_id")):
            batch = list(events)
            first = batch[0]
            if first.seq != self.seq + 1:
                raise CheckFailed(
                    f"the source ledger's event seq {first.seq} follows seq {self.seq}: its log "
                    "has a gap; run verify on it. Nothing was written"
                )
            head = self.heads.get(stream_id, (0, ZERO_HASH))
            try:
                written = self.target.write(
                    self.dst, stream_id, head, batch, after_seq=self.seq, hashes_checked=True
                )
            except InputError as exc:
                raise CheckFailed(f"the source ledger's {exc}; run verify on it") from None
            last = written[-1]
            self.heads[stream_id] = (last.stream_version, last.event_hash)
            self.seq = last.seq


def _checked(check: LedgerCheck, e: StoredEvent) -> Event:
    try:
        return check.check(e)
    except ReplayStop as stop:
        f = stop.failure
        raise CheckFailed(
            f"the source ledger's event seq {e.seq} ({e.stream_id} v{e.stream_version}) does "
            f"not verify ({f.check}: {f.reason}); run verify on it. Nothing was written"
        ) from None


def _refuse_unless_empty(target: Store, conn: Any) -> None:
    """Only ledger_info may hold rows (the new ledger's id, replaced by the source's)."""
    found = held_rows(conn)
    if found:
        held = ", ".join(f"{plural(n, 'row')} in {name}" for name, n in found.items())
        raise InputError(
            f"the ledger at {target.shown_url} is not empty ({held}); db copy only writes "
            "into an empty ledger, and nothing was written"
        )


class _Folds:
    """The projection rows of the copied runs, each run folded one event at a time as its
    events are checked (`projections.RunFold`: one working copy per run, no view per
    event), so no parsed event outlives its fold. A run's rows are handed to `save` (run
    id, view, whether its rows were handed over before) as soon as it concludes, and its
    fold let go, so memory holds the runs still open; an event after a run's conclusion
    folds the run again from the source's events before it (each passed its checks
    already), and its rows are handed over again when it concludes anew or at the end."""

    def __init__(
        self, source: Store, src: Any, save: Callable[[str, projections.RunView, bool], None]
    ) -> None:
        self.source = source
        self.src = src
        self.save = save
        self.open: dict[str, projections.RunFold] = {}
        self.saved: set[str] = set()  # runs whose rows were handed over

    @property
    def runs(self) -> int:
        return len(self.saved | self.open.keys())

    def add(self, e: StoredEvent, event: Event) -> None:
        run_id = e.stream_id
        fold = self.open.get(run_id)
        if fold is None:
            fold = self.open[run_id] = projections.RunFold()
            if run_id in self.saved:  # an event after the run concluded
                for past in self.source.iter_events(self.src, stream_id=run_id):
                    if past.seq >= e.seq:
                        break
                    fold.apply(past.stream_version, past.recorded_at, past.event())
        _fold(fold, e, event)
        if event.event_type == "RunConcluded":
            view = fold.view
            assert view is not None
            if view.concluded:
                self._save(run_id, view)
                del self.open[run_id]

    def finish(self) -> None:
        for run_id, fold in self.open.items():
            assert fold.view is not None
            self._save(run_id, fold.view)

    def _save(self, run_id: str, view: projections.RunView) -> None:
        self.save(run_id, view, run_id in self.saved)
        self.saved.add(run_id)


def _fold(fold: projections.RunFold, e: StoredEvent, event: Event) -> None:
    try:
        fold.apply(e.stream_version, e.recorded_at, event)
    except (LedgerError, ValueError) as exc:
        raise CheckFailed(
            f"the source ledger's event seq {e.seq} ({e.stream_id} v{e.stream_version}) "
            f"does not fold into its run ({' '.join(str(exc).split())[:200]}); run verify "
            "on it. Nothing was written"
        ) from None


def _copy_blobs(rows: Iterable[tuple[str, bytes]], dst: Any) -> tuple[int, bytes]:
    count = 0
    digest = hashlib.sha256()
    page: list[tuple[str, bytes]] = []
    for sha, content in rows:
        page.append((sha, content))
        _digest_fields(digest, (sha, content))
        count += 1
        if len(page) == BATCH:
            insert_blobs(dst, page)
            page = []
    insert_blobs(dst, page)
    return count, digest.digest()


def _check_page_read_back(target: Store, dst: Any, page: list[StoredEvent]) -> None:
    """Read a page of copied events back inside the copy's transaction, right after it was
    written: the rows must be the source's, byte for byte (the same seq included)."""
    back = next(target.iter_event_pages(dst, batch=len(page), after_seq=page[0].seq - 1), [])
    rows = [
        row if type(row[PAYLOAD_AT]) is bytes else _with_bytes_payload(row)  # a buffer type
        for row in back
    ]
    if rows != [tuple(event_row(e)) for e in page]:
        raise CheckFailed(
            f"the copy in {target.shown_url} reads back differently from the source; nothing "
            "was written"
        )


def _with_bytes_payload(row: Any) -> tuple[Any, ...]:
    return (*row[:PAYLOAD_AT], bytes(row[PAYLOAD_AT]), *row[PAYLOAD_AT + 1 :])


def _check_read_back(
    target: Store, dst: Any, count: int, blob_count: int, blob_digest: bytes
) -> None:
    """Once every page was read back: the copy holds no more events than the source, and
    its blobs read back as the source's."""
    copied_blobs, copied_digest = 0, hashlib.sha256()
    for sha, content in target.iter_blobs(dst):
        _digest_fields(copied_digest, (sha, content))
        copied_blobs += 1
    events_differ = target.event_count(dst) != count
    blobs_differ = (copied_blobs, copied_digest.digest()) != (blob_count, blob_digest)
    if events_differ or blobs_differ:
        raise CheckFailed(
            f"the copy in {target.shown_url} reads back differently from the source; nothing "
            "was written"
        )


def _digest_fields(digest, values: Iterable[object]) -> None:
    """Length-prefixed, typed encoding, so that no two different rows feed the same bytes."""
    for value in values:
        if isinstance(value, bytes):
            tag, data = b"b", value
        elif isinstance(value, int):
            tag, data = b"i", str(value).encode()
        else:
            tag, data = b"s", str(value).encode("utf-8")
        digest.update(tag + len(data).to_bytes(8, "big") + data)
