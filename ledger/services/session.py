"""What every use case works with: the store (opened on first use), the clock, the source
of event ids, the run's projection as the use case reads it, and `Session.append`, the one
way a use case writes (events and projection rows in one transaction)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Self

from ledger.core import projections
from ledger.core.events import Event
from ledger.core.evidence import EVIDENCE_EVENT_TYPES
from ledger.core.projections import RunView
from ledger.store.eventstore import NewEvent, Store, StoredEvent


def utc_now() -> str:
    """RFC 3339 UTC with microseconds, ending in Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_event_id() -> str:
    return str(uuid.uuid4())


class Session:
    """A store, a clock and an id source; the use cases take one as their first argument
    (`LedgerService` offers each as a method)."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = new_event_id,
    ) -> None:
        self._store: Store | None = store
        self._open_store: Callable[[], Store] | None = None
        self.clock = clock
        self.new_id = new_id

    @classmethod
    def opening(
        cls,
        open_store: Callable[[], Store],
        *,
        clock: Callable[[], str] = utc_now,
        new_id: Callable[[], str] = new_event_id,
    ) -> Self:
        """A session that opens its store on first use: a use case checks its input files
        first, so a bad file is rejected (exit 2) before the ledger is opened, or created."""
        session = cls(None, clock=clock, new_id=new_id)  # type: ignore[arg-type]
        session._open_store = open_store
        return session

    def close(self) -> None:
        """Close the store, if it was opened."""
        if self._store is not None:
            self._store.close()

    @property
    def store(self) -> Store:
        if self._store is None:
            assert self._open_store is not None
            self._store = self._open_store()
        return self._store

    def append(
        self,
        run_id: str,
        before: RunView | None,
        items: Sequence[Event],
        blobs: Sequence[bytes],
        *,
        at: str | None = None,
    ) -> tuple[RunView, list[StoredEvent]]:
        """Append events and update the run's projection rows, in one transaction.

        `before` is the run's view the events were decided on; its stream version is the
        optimistic-concurrency expectation. `at` overrides the clock (imports keep the
        original times)."""
        at = at or self.clock()
        batch = [NewEvent(self.new_id(), item, at) for item in items]
        expected = before.run.stream_version if before else 0
        with self.store.transaction(write=True) as conn:
            stored, written = self.store.append_or_find(conn, run_id, expected, batch)
            if not written:
                # a retry of an append that succeeded (same event ids, same content): answer
                # as that append did, write nothing
                return _replayed(before, stored, items), stored
            self.store.put_blobs(conn, list(blobs))
            after = _replayed(before, stored, items)
            self.store.save_view(conn, before, after)
        return after, stored

    def view(self, run_id: str) -> RunView:
        """The run's projection (its row and cases), refused when the run is unknown."""
        with self.store.transaction() as conn:
            view = self.store.load_view(conn, run_id)
            if view is None:
                raise self.store.unknown_run(conn, run_id)
        return view

    def state(
        self, run_id: str, *, evidence_only: bool = False
    ) -> tuple[RunView, list[StoredEvent]]:
        """The run's projection and its events, read in one transaction; with `evidence_only`,
        just the events the evidence fold (and the plan) uses."""
        types = EVIDENCE_EVENT_TYPES if evidence_only else None
        with self.store.transaction() as conn:
            view = self.store.load_view(conn, run_id)
            if view is None:
                raise self.store.unknown_run(conn, run_id)
            stream = self.store.read_stream(conn, run_id, types=types)
        return view, stream

    def full_view(self, run_id: str) -> RunView:
        """The run's whole stored projection, its rounds and profiles too."""
        with self.store.transaction() as conn:
            view = self.store.stored_projection(conn, run_id)
            if view is None:
                raise self.store.unknown_run(conn, run_id)
        return view


def _replayed(
    before: RunView | None, stored: Sequence[StoredEvent], items: Sequence[Event]
) -> RunView:
    """The view right after `stored`: the append's events folded in one call."""
    return projections.fold_into(
        before,
        (
            (record.stream_version, record.recorded_at, item)
            for record, item in zip(stored, items, strict=True)
        ),
    )
