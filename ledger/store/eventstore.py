"""The event store: one append-only table of hash-chained events, with the
content-addressed blobs and the projection rows beside it, behind one narrow interface,
`Store`. What opening the database takes (the SQLite file, the engine, the schema gate,
transactions) is `ledger/store/engine.py`; the projection rows are
`ledger/store/projection_rows.py`; the use cases' own lookups are `ledger/store/readmodel.py`.

Every event enters the log through `Store.write`, and every read of events builds
`StoredEvent`s from rows of `EVENT_COLUMNS`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, func, literal_column, select

from ledger.core.actors import actor_text, printable
from ledger.errors import CheckFailed, ConflictError, InputError
from ledger.integrity.hashing import ZERO_HASH, canonical, event_hash, sha256_hex
from ledger.store import projection_rows
from ledger.store.driver import driver_rows, fetch
from ledger.store.engine import Database
from ledger.store.principal import actor_label, local_user
from ledger.store.tables import blobs, events, ledger_info

if TYPE_CHECKING:  # the event models are imported when an event is read, not at start-up
    from ledger.core.events import Event


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event ready to append: the store assigns seq, version and hashes."""

    event_id: str
    event: Event
    recorded_at: str


@dataclass(frozen=True, slots=True)
class StoredEvent:
    seq: int
    event_id: str
    stream_id: str
    stream_version: int
    event_type: str
    schema_version: int
    recorded_at: str
    payload: bytes
    parent_hash: str
    event_hash: str
    actor: str | None = None  # the actor's RFC 8785 text (ledger/core/actors.py); None before

    def payload_value(self) -> Any:
        return json.loads(self.payload)

    def event(self) -> Event:
        from ledger.core.events import load_event

        return load_event(self.event_type, self.schema_version, self.payload_value())

    def computed_hash(self) -> str:
        return event_hash(
            stream_id=self.stream_id,
            stream_version=self.stream_version,
            event_id=self.event_id,
            event_type=self.event_type,
            schema_version=self.schema_version,
            recorded_at=self.recorded_at,
            parent_hash=self.parent_hash,
            payload=self.payload,
            actor=self.actor,
        )


EVENT_COLUMNS = (
    events.c.seq,
    events.c.event_id,
    events.c.stream_id,
    events.c.stream_version,
    events.c.event_type,
    events.c.schema_version,
    events.c.recorded_at,
    events.c.payload,
    events.c.parent_hash,
    events.c.event_hash,
    events.c.actor,
)


# a StoredEvent as an events row (`EVENT_COLUMNS` order)
event_row = attrgetter(*(column.name for column in EVENT_COLUMNS))
PAYLOAD_AT = [column.name for column in EVENT_COLUMNS].index("payload")  # in such a row


def _stored(row: Any) -> StoredEvent:
    """A stored event from a row of EVENT_COLUMNS (positional: this runs once per event
    read, millions of times in a verify)."""
    payload = row[7]
    if type(payload) is not bytes:
        payload = bytes(payload)
    return StoredEvent(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], payload, row[8], row[9], row[10]
    )


def sealed_row(
    seq: int,
    event_id: str,
    stream_id: str,
    version: int,
    event_type: str,
    schema_version: int,
    recorded_at: str,
    payload: bytes,
    parent: str,
    actor: str | None = None,
) -> tuple[Any, ...]:
    """The events row (`EVENT_COLUMNS` order) of a new event whose canonical payload bytes
    are `payload`, appended by `actor` (its stored text): its envelope hashed after
    `parent`. The one way a new event is sealed."""
    digest = event_hash(
        stream_id=stream_id,
        stream_version=version,
        event_id=event_id,
        event_type=event_type,
        schema_version=schema_version,
        recorded_at=recorded_at,
        parent_hash=parent,
        payload=payload,
        actor=actor,
    )
    return (
        seq,
        event_id,
        stream_id,
        version,
        event_type,
        schema_version,
        recorded_at,
        payload,
        parent,
        digest,
        actor,
    )


def _sealed_row(
    e: StoredEvent, seq: int, stream_id: str, version: int, parent: str, hashes_checked: bool
) -> tuple[Any, ...]:
    """The events row of an already stored event, written at `seq`: refused unless it is
    the stream's event at `version` after `parent`, and (unless checked) its hash holds."""
    if e.stream_id != stream_id or e.stream_version != version or e.parent_hash != parent:
        raise InputError(
            f"event {e.event_id} ({e.stream_id} v{e.stream_version}) does not continue run "
            f"{stream_id!r} at version {version}; nothing was written"
        )
    if not hashes_checked and e.computed_hash() != e.event_hash:
        raise InputError(
            f"event {e.event_id} ({e.stream_id} v{e.stream_version}): event_hash does not "
            "match its content; nothing was written"
        )
    return (
        seq,
        e.event_id,
        stream_id,
        version,
        e.event_type,
        e.schema_version,
        e.recorded_at,
        e.payload,
        parent,
        e.event_hash,
        e.actor,
    )


class Store(Database):
    """An opened ledger (`Database`: the file, the engine, the schema gate, transactions)
    and the one interface the other layers use to it: the event log's writer and reader,
    the content-addressed blobs and the projection rows (`projection_rows`)."""

    client: str | None = None  # the MCP client's declared name (`declare_client`)
    _actor: str | None = None

    # --- events --------------------------------------------------------------------------

    def declare_client(self, name: str | None) -> None:
        """The name an MCP client declared: recorded in the actor of what it appends."""
        client = printable(name) if name else None
        if client != self.client:
            self.client, self._actor = client, None

    def actor(self, conn: Connection) -> str:
        """The stored text of the actor of the events this store appends: on PostgreSQL the
        role the database says this connection is (`current_user`; migration 0009's trigger
        refuses any other), on SQLite the process's user and host; the MCP client and the
        KERNEL_LEDGER_ACTOR label beside it (ledger/core/actors.py)."""
        if self._actor is None:
            fields = {"client": self.client, "label": actor_label()}
            if self.dialect == "postgresql":
                fields["db_role"] = conn.exec_driver_sql("SELECT current_user").scalar_one()
            else:
                fields.update(local_user())
            self._actor = actor_text(fields)
        return self._actor

    def stream_head(self, conn: Connection, stream_id: str) -> tuple[int, str]:
        row = conn.execute(_STREAM_HEAD, {"stream": stream_id}).first()
        return (row[0], row[1]) if row else (0, ZERO_HASH)

    def append(
        self, conn: Connection, stream_id: str, expected_version: int, batch: Sequence[NewEvent]
    ) -> list[StoredEvent]:
        """Append `batch` to a stream whose current version must be `expected_version`.

        A batch whose event ids are all stored already, with identical content, is a
        retry of an append that succeeded: it returns the stored events and writes nothing.
        """
        return self.append_or_find(conn, stream_id, expected_version, batch)[0]

    def append_or_find(
        self, conn: Connection, stream_id: str, expected_version: int, batch: Sequence[NewEvent]
    ) -> tuple[list[StoredEvent], bool]:
        """`append`, and whether the events were written now (False: the batch is a retry of
        an append that succeeded, and the events returned are the stored ones)."""
        version, parent = self.stream_head(conn, stream_id)
        if version != expected_version:
            existing = self._already_appended(conn, stream_id, batch)
            if existing is not None:
                return existing, False
            raise ConflictError(
                f"run {stream_id} is at version {version}, not {expected_version}: another "
                "writer recorded first; nothing was written, retry with fresh state"
            )
        return self.write(conn, stream_id, (version, parent), batch), True

    def write(
        self,
        conn: Connection,
        stream_id: str,
        head: tuple[int, str],
        batch: Sequence[NewEvent | StoredEvent],
        *,
        after_seq: int | None = None,
        hashes_checked: bool = False,
    ) -> list[StoredEvent]:
        """The one way events enter the log: `batch` continues the stream from `head` (its
        version and event hash), each event gets the next `seq` after `after_seq` (default:
        the log's last) and the next stream version, and the rows go to the driver in one
        executemany.

        A `NewEvent` is canonicalized and hashed here. A `StoredEvent` is an event as another
        ledger or a bundle stored it (its payload bytes, id, time and hashes are kept): it
        must carry the version and parent hash it gets here, and its event hash is
        recomputed from its envelope unless the caller's own checks did so
        (`hashes_checked`). Either refusal raises `InputError`, and the caller's transaction
        writes nothing."""
        version, parent = head
        seq = self.last_seq(conn) if after_seq is None else after_seq
        rows = []
        actor = None
        for item in batch:
            seq += 1
            version += 1
            if type(item) is NewEvent:
                if actor is None:
                    actor = self.actor(conn)
                event = item.event
                event_type, schema_version = event.event_type, event.schema_version
                # = event.canonical_payload()
                payload = canonical(event.payload(), string_keys=True)
                row = sealed_row(
                    seq,
                    item.event_id,
                    stream_id,
                    version,
                    event_type,
                    schema_version,
                    item.recorded_at,
                    payload,
                    parent,
                    actor,
                )
            else:
                row = _sealed_row(item, seq, stream_id, version, parent, hashes_checked)
            rows.append(row)
            parent = row[9]
        # The driver's executemany, without a per-row pass through SQLAlchemy's parameter
        # processing: the rows are plain str, int and bytes already.
        if rows:
            conn.exec_driver_sql(insert_events_sql(conn), rows)
        return [StoredEvent(*row) for row in rows]

    def _already_appended(
        self, conn: Connection, stream_id: str, batch: Sequence[NewEvent]
    ) -> list[StoredEvent] | None:
        if not batch:
            return None
        ids = [item.event_id for item in batch]
        found = {
            e.event_id: e
            for e in map(
                _stored, conn.execute(select(*EVENT_COLUMNS).where(events.c.event_id.in_(ids)))
            )
        }
        if len(found) != len(ids):
            return None
        out = [found[i] for i in ids]
        for item, stored in zip(batch, out, strict=True):
            if (
                stored.stream_id != stream_id
                or stored.payload != item.event.canonical_payload()
                or stored.event_type != item.event.event_type
            ):
                return None
        return out

    def read_stream(
        self, conn: Connection, stream_id: str, *, types: Sequence[str] | None = None
    ) -> list[StoredEvent]:
        """A run's events in version order; only those of `types` when given."""
        query = select(*EVENT_COLUMNS).where(events.c.stream_id == stream_id)
        if types is not None:
            query = query.where(events.c.event_type.in_(list(types)))
        result = conn.execute(query.order_by(events.c.stream_version))
        return [_stored(r) for r in result]

    def read_version(self, conn: Connection, stream_id: str, version: int) -> StoredEvent | None:
        row = conn.execute(_READ_VERSION, {"stream": stream_id, "version": version}).first()
        return _stored(row) if row else None

    def iter_events(self, conn: Connection, *, batch: int = 2000, stream_id: str | None = None):
        """Every event in seq order, read in keyset-paged batches (bounded memory)."""
        for page in self.iter_event_pages(conn, batch=batch, stream_id=stream_id):
            for row in page:
                yield _stored(row)

    def iter_event_pages(
        self,
        conn: Connection,
        *,
        batch: int = 2000,
        stream_id: str | None = None,
        after_seq: int = 0,
    ):
        """The events table's rows after `after_seq` as plain tuples (`EVENT_COLUMNS` order)
        in seq order, one keyset-paged batch at a time, read with the driver's cursor
        (`driver.fetch`; the columns are int, str and bytes, which need no type processing):
        for a check that needs no event objects, and for `iter_events`."""
        last = after_seq
        query, values = (
            (_EVENTS_PAGE, {}) if stream_id is None else (_STREAM_PAGE, {"stream": stream_id})
        )
        while True:
            page = fetch(conn, query, {**values, "last": last, "n": batch}, ())
            if not page:
                return
            yield page
            last = page[-1][0]

    def runs_after(self, conn: Connection, seq: int) -> list[str]:
        """The runs that have an event after `seq`, in the order of their first such event."""
        rows = fetch(conn, _STREAMS_AFTER, {"seq": seq}, ())
        return list(dict.fromkeys(stream_id for (stream_id,) in rows))

    def event_hash_pages(self, conn: Connection, *, batch: int = 65_536):
        """The event hashes in seq order, as one hex string per `batch` seqs (the Merkle
        tree's leaves): the database joins them, one string a page instead of a row and a
        string an event. A page of seqs with no event is left out."""
        query = _HASH_PAGE_PG if self.dialect == "postgresql" else _HASH_PAGE
        for low in range(0, self.last_seq(conn), batch):
            (joined,) = fetch(conn, query, {"low": low, "high": low + batch}, ())[0]
            if joined:
                yield joined

    def last_seq(self, conn: Connection) -> int:
        return conn.execute(_LAST_SEQ).scalar_one()

    def event_count(self, conn: Connection) -> int:
        return conn.execute(select(func.count()).select_from(events)).scalar_one()

    def ledger_id(self, conn: Connection) -> str:
        found = conn.execute(
            select(ledger_info.c.value).where(ledger_info.c.key == "ledger_id")
        ).scalar_one_or_none()
        if not isinstance(found, str) or not found:
            raise CheckFailed(
                "the ledger has no identity (ledger_info.ledger_id is missing): the table was "
                "emptied or damaged outside kernel-ledger; nothing was done"
            )
        return found

    # --- projection rows (ledger/store/projection_rows.py) --------------------------------

    load_view = staticmethod(projection_rows.load_view)
    save_view = staticmethod(projection_rows.save_view)
    stored_projection = staticmethod(projection_rows.stored_projection)
    all_run_ids = staticmethod(projection_rows.all_run_ids)
    unknown_run = staticmethod(projection_rows.unknown_run)
    clear_projections = staticmethod(projection_rows.clear_projections)

    # --- blobs ---------------------------------------------------------------------------

    def put_blob(self, conn: Connection, data: bytes) -> str:
        return self.put_blobs(conn, [data])[0]

    def put_blobs(self, conn: Connection, contents: Sequence[bytes]) -> list[str]:
        """Store each content under its sha256 unless it is stored already (one query to
        find the new ones, one executemany to insert them); returns the digests in order."""
        digests = [sha256_hex(data) for data in contents]
        new = dict(zip(digests, contents, strict=True))
        for digest in self.stored_digests(conn, list(new)):
            del new[digest]
        if new:
            mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
            conn.exec_driver_sql(
                f"INSERT INTO blobs (sha256, size, content) VALUES ({mark}, {mark}, {mark})",
                [(d, len(data), data) for d, data in new.items()],
            )
        return digests

    def stored_digests(self, conn: Connection, digests: Sequence[str]) -> set[str]:
        """Which of these blob digests are stored (one plain query per 500, read with the
        driver's cursor: a statement SQLAlchemy would compile again for every length of the
        list, and whose result it would set up for every call; `verify` asks once per run)."""
        mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
        found: set[str] = set()
        for start in range(0, len(digests), 500):
            chunk = tuple(digests[start : start + 500])
            rows = driver_rows(
                conn,
                f"SELECT sha256 FROM blobs WHERE sha256 IN ({', '.join([mark] * len(chunk))})",
                chunk,
            )
            found.update(digest for (digest,) in rows)
        return found

    def get_blob(self, conn: Connection, digest: str) -> bytes | None:
        row = conn.execute(select(blobs.c.content).where(blobs.c.sha256 == digest)).first()
        return bytes(row[0]) if row else None

    def iter_blobs(self, conn: Connection, *, batch: int = 32):
        """Every stored blob in sha256 order, in keyset pages: a driver that buffers a whole
        result (psycopg) would otherwise hold every kernel source at once."""
        last = ""
        while True:
            page = conn.execute(_BLOB_PAGE, {"last": last, "n": batch}).all()
            if not page:
                return
            for digest, content in page:
                yield digest, bytes(content)
            last = page[-1][0]


_EVENT_COLUMN_NAMES = ", ".join(c.name for c in EVENT_COLUMNS)
_STREAM_HEAD = (
    select(events.c.stream_version, events.c.event_hash)
    .where(events.c.stream_id == bindparam("stream"))
    .order_by(events.c.stream_version.desc())
    .limit(1)
)
_EVENTS_PAGE = (
    select(*EVENT_COLUMNS)
    .where(events.c.seq > bindparam("last"))
    .order_by(events.c.seq)
    .limit(bindparam("n"))
)
_STREAM_PAGE = (
    select(*EVENT_COLUMNS)
    .where(events.c.seq > bindparam("last"), events.c.stream_id == bindparam("stream"))
    .order_by(events.c.seq)
    .limit(bindparam("n"))
)
_BLOB_PAGE = (
    select(blobs.c.sha256, blobs.c.content)
    .where(blobs.c.sha256 > bindparam("last"))
    .order_by(blobs.c.sha256)
    .limit(bindparam("n"))
)
_LAST_SEQ = select(func.coalesce(func.max(events.c.seq), 0))
# one row an event after `seq` (the new work), not a GROUP BY over every run's index entries
_STREAMS_AFTER = (
    select(events.c.stream_id).where(events.c.seq > bindparam("seq")).order_by(events.c.seq)
)
_HASHES = func.aggregate_strings(events.c.event_hash, literal_column("''"))
_HASH_RANGE = (events.c.seq > bindparam("low"), events.c.seq <= bindparam("high"))
# SQLite before 3.44 has no ORDER BY inside an aggregate: group_concat joins the rows in the
# order the range scan of the primary key meets them, ascending seq. PostgreSQL is told.
_HASH_PAGE = select(_HASHES).where(*_HASH_RANGE)
_HASH_PAGE_PG = select(_HASHES.aggregate_order_by(events.c.seq)).where(*_HASH_RANGE)
_READ_VERSION = select(*EVENT_COLUMNS).where(
    events.c.stream_id == bindparam("stream"), events.c.stream_version == bindparam("version")
)


def insert_events_sql(conn: Connection) -> str:
    """INSERT for one events row, in the driver's own parameter style."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    marks = ", ".join([mark] * len(EVENT_COLUMNS))
    return f"INSERT INTO events ({_EVENT_COLUMN_NAMES}) VALUES ({marks})"
