"""The event store: one append-only table, content-addressed blobs and the projections.

SQLite (WAL, synchronous=FULL) is the embedded default; PostgreSQL is the shared one. All
transactions go through `Store.transaction`, which commits, rolls back and translates
driver errors into the ledger's own (conflict: exit 3; store unavailable: exit 4).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import stat
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Connection,
    Engine,
    bindparam,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy import exc as sa_exc

from ledger.core.projections import CaseRow, ProfileRow, RoundRow, RunRow, RunView, row_fields
from ledger.errors import (
    CheckFailed,
    ConflictError,
    InputError,
    LedgerMissing,
    SchemaOutOfDate,
    StoreUnavailable,
)
from ledger.integrity.hashing import ZERO_HASH, canonical, event_hash, sha256_hex
from ledger.store import schema
from ledger.store.driver import driver_rows, fetch
from ledger.store.history import ROUND_BOOLEANS, ROUND_COLUMNS
from ledger.store.sqlitefile import (
    companions,
    creation_prefix,
    file_identity,
    free_bytes,
    ledger_file,
    other_links,
    read_only_fs,
    remove_dead_creations,
)
from ledger.store.tables import blobs, events, ledger_info, profiles, rounds, run_cases, runs
from ledger.store.urls import busy_timeout_s, parse_url
from ledger.text import display

if TYPE_CHECKING:  # the event models are imported when an event is read, not at start-up
    from ledger.core.events import Event

PG_APPEND_LOCK = 0x6B6C6564  # "kled": the advisory lock that serializes appends
LOW_DISK_BYTES = 1024 * 1024  # an I/O error with less free space than this is a full disk


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
        row[0], row[1], row[2], row[3], row[4], row[5], row[6], payload, row[8], row[9]
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
) -> tuple[Any, ...]:
    """The events row (`EVENT_COLUMNS` order) of a new event whose canonical payload bytes
    are `payload`: its envelope hashed after `parent`. The one way a new event is sealed."""
    digest = event_hash(
        stream_id=stream_id,
        stream_version=version,
        event_id=event_id,
        event_type=event_type,
        schema_version=schema_version,
        recorded_at=recorded_at,
        parent_hash=parent,
        payload=payload,
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
    )


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split()) or type(orig).__name__


class Store:
    """An opened ledger database."""

    def __init__(
        self, url: str, *, create: bool = True, check_schema: bool = True, read_only: bool = False
    ) -> None:
        """`read_only` opens a connection that cannot write: SQLite through a `mode=ro` URI
        with `query_only`, PostgreSQL with `default_transaction_read_only` (so even a
        transaction opened for writing is refused by the server). It never creates."""
        self.url = url
        self.read_only = read_only
        if read_only:
            create = False
        parsed = parse_url(url)
        self.dialect = parsed.get_backend_name()
        self.shown_url = parsed.render_as_string(hide_password=True)
        self.timeout = busy_timeout_s()
        self.path = ledger_file(parsed) if self.dialect == "sqlite" else None
        if self.path is not None:
            parsed = parsed.set(database=str(self.path))  # exactly the file inspected here
            if self._inspect_file(create=create):
                self._create_sqlite_ledger(parsed, self.path)
        self.engine = self._engine(parsed)
        if check_schema:
            self._check_schema(create=create)

    # --- opening -------------------------------------------------------------------------

    def _inspect_file(self, *, create: bool) -> bool:
        """Check a SQLite ledger file before opening it; True when a new one must be made.

        A file that SQLite would silently treat as a new, empty database is refused instead:
        an empty (0-byte) file is a truncated ledger or an interrupted creation, and a
        missing file whose write-ahead log is still there was deleted while in use. Either
        way a new ledger in its place would hide the loss.
        """
        path = self.path
        assert path is not None
        try:
            info = path.stat()
        except FileNotFoundError:
            leftovers = [p for p in companions(path) if os.path.lexists(p)]
            if leftovers:
                raise StoreUnavailable(
                    f"the ledger file {display(path)} is missing but {display(leftovers[0])} "
                    "is still there: the ledger was deleted or moved while in use; nothing "
                    "was created. Restore the file, or delete its -wal and -shm files to "
                    "start a new ledger"
                ) from None
            if not create:
                raise LedgerMissing(
                    f"there is no ledger at {display(path)}; nothing was created (only plan, "
                    "import and db upgrade create a ledger): check --db or KERNEL_LEDGER_DB"
                ) from None
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreUnavailable(
                    f"cannot create the ledger folder {display(path.parent)}: {exc.strerror or exc}"
                ) from None
            return True
        except OSError as exc:
            raise StoreUnavailable(
                f"cannot open the ledger at {self.shown_url}: {exc.strerror or exc}"
            ) from None
        if not stat.S_ISREG(info.st_mode):
            raise StoreUnavailable(f"the ledger path {display(path)} is not a regular file")
        if info.st_nlink > 1 and other_links(path, info) > 0:
            raise StoreUnavailable(
                f"the ledger file {display(path)} has {info.st_nlink} hard links: SQLite keeps "
                "a write-ahead log per name, so appends made under one name can be lost "
                "through another; nothing was read or written. Keep one name (delete the "
                "other links) or copy the file"
            )
        wal = Path(f"{path}-wal")
        if info.st_size == 0 and not (wal.exists() and wal.stat().st_size > 0):
            raise StoreUnavailable(
                f"the ledger file {display(path)} is empty (0 bytes): it was truncated, or "
                "its creation was interrupted; nothing was read or written. Restore it from "
                "a backup, or delete it if it never held events"
            )
        return False

    def _create_sqlite_ledger(self, parsed, path: Path) -> None:
        """Make a new ledger at head beside `path`, then link it into place: no process ever
        sees a half-made ledger (or an empty file) at `path`."""
        remove_dead_creations(path)
        temp = path.with_name(f"{creation_prefix(path)}{os.getpid()}-{uuid.uuid4().hex[:8]}")
        self.engine = self._engine(parsed.set(database=str(temp)))
        try:
            with self.transaction(write=True) as conn:
                schema.upgrade(conn)
            self.engine.dispose()
            try:
                os.link(temp, path)
            except FileExistsError:
                pass  # another process made it first: use theirs
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                    raise StoreUnavailable(
                        f"cannot create the ledger at {display(path)}: {exc.strerror or exc}"
                    ) from None
                if not path.exists():  # no hard links on this file system
                    os.replace(temp, path)
        finally:
            self.engine.dispose()
            for leftover in (temp, *companions(temp)):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _engine(self, parsed) -> Engine:
        if self.dialect == "sqlite":
            if self.read_only and self.path is not None:
                import sqlite3
                from urllib.parse import quote

                target = f"file:{quote(str(self.path.absolute()))}?mode=ro"
                engine = create_engine(
                    parsed,
                    creator=lambda: sqlite3.connect(
                        target, uri=True, timeout=self.timeout, check_same_thread=False
                    ),
                )
            else:
                engine = create_engine(parsed, connect_args={"timeout": self.timeout})
            timeout_ms = int(self.timeout * 1000)
            database = parsed.database
            read_only = self.read_only

            @event.listens_for(engine, "connect")
            def _connect(dbapi_connection, record) -> None:
                dbapi_connection.isolation_level = None
                cursor = dbapi_connection.cursor()
                cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
                if read_only:
                    cursor.execute("PRAGMA query_only = ON")
                else:
                    cursor.execute("PRAGMA journal_mode = WAL")
                    cursor.execute("PRAGMA synchronous = FULL")
                cursor.execute("PRAGMA foreign_keys = ON")
                cursor.close()
                if self.path is not None:  # which file this connection has open
                    record.info["ledger_file"] = (database, file_identity(Path(database)))

            @event.listens_for(engine, "begin")
            def _begin(conn: Connection) -> None:
                mode = "IMMEDIATE" if conn.get_execution_options().get("ledger_write") else ""
                conn.exec_driver_sql(f"BEGIN {mode}".strip())

            return engine
        try:
            if self.read_only:
                return create_engine(
                    parsed,
                    pool_pre_ping=True,
                    connect_args={"options": "-c default_transaction_read_only=on"},
                )
            return create_engine(parsed, pool_pre_ping=True)
        except ModuleNotFoundError:
            raise StoreUnavailable(
                "PostgreSQL needs the optional 'postgres' extra: pip install "
                "'kernel-ledger[postgres]'"
            ) from None

    def _check_schema(self, *, create: bool) -> None:
        with self.transaction() as conn:
            revision = schema.current_revision(conn)
        if revision is None and create and self.dialect == "sqlite":
            with self.transaction(write=True) as conn:  # a new ledger: create it at head
                if schema.current_revision(conn) is None:
                    schema.upgrade(conn)
                revision = schema.current_revision(conn)
        self._refuse_unless_current(revision)

    def _refuse_unless_current(self, revision: str | None) -> None:
        if revision == schema.HEAD_REVISION:
            return
        command = f"kernel-ledger --db '{self.shown_url}' db upgrade"
        if revision is None:
            raise SchemaOutOfDate(
                f"the ledger at {self.shown_url} has no schema yet; run: {command}"
            )
        if revision == "unstamped" or revision not in schema.KNOWN_REVISIONS:
            raise StoreUnavailable(
                f"the ledger at {self.shown_url} has schema revision {revision!r}, which this "
                f"kernel-ledger does not know (it needs {schema.HEAD_REVISION}); upgrade "
                "kernel-ledger"
            )
        raise SchemaOutOfDate(
            f"the ledger at {self.shown_url} is at schema revision {revision}, this kernel-ledger "
            f"needs {schema.HEAD_REVISION}; run: {command}"
        )

    def upgrade(self) -> tuple[str | None, str]:
        """Migrate to head; returns (revision before, revision after)."""
        with self.transaction(write=True) as conn:
            before = schema.current_revision(conn)
            if before == "unstamped":
                self._refuse_unless_current(before)
            schema.upgrade(conn)
        return before, schema.HEAD_REVISION

    def revision(self) -> str | None:
        with self.transaction() as conn:
            return schema.current_revision(conn)

    def close(self) -> None:
        self.engine.dispose()

    def ledger_files(self) -> tuple[Path, ...]:
        """The files of a SQLite ledger (the database and the files SQLite keeps beside
        it), which no output may overwrite; none for PostgreSQL."""
        from ledger.files import ledger_companions

        return ledger_companions(self.path) if self.path is not None else ()

    # --- transactions --------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Connection]:
        """The one way to open a transaction: commit, roll back, close, translate errors."""
        try:
            with self.engine.connect() as base:
                options: dict[str, Any] = {"ledger_write": write}
                if not write and self.dialect == "postgresql":
                    # one snapshot for every statement of a read: `verify` and the service's
                    # reads must not see a writer's commit halfway (SQLite's WAL already does)
                    options["isolation_level"] = "REPEATABLE READ"
                conn = base.execution_options(**options)
                with conn.begin():
                    if write and self.dialect == "postgresql":
                        conn.exec_driver_sql(
                            f"SET LOCAL lock_timeout = '{int(self.timeout * 1000)}ms'"
                        )
                        conn.execute(
                            text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_APPEND_LOCK}
                        )
                    yield conn
                    if write and self.path is not None:
                        self._refuse_if_replaced(conn)
        except (ConflictError, InputError, StoreUnavailable):
            raise
        except sa_exc.IntegrityError as exc:
            raise ConflictError(
                f"another writer appended first ({_describe(exc)}); nothing was written, retry "
                "with fresh state"
            ) from None
        except sa_exc.OperationalError as exc:
            raise self._operational(exc) from None
        except sa_exc.DBAPIError as exc:
            raise self._sqlite_fault(exc) or StoreUnavailable(
                f"the ledger at {self.shown_url} failed: {_describe(exc)}"
            ) from None

    def _refuse_if_replaced(self, conn: Connection) -> None:
        """Before a commit: the file this connection writes must still be the ledger file.
        A ledger deleted or replaced while in use would take the append with it."""
        opened = conn.info.get("ledger_file")
        if opened is not None and file_identity(Path(opened[0])) != opened[1]:
            raise StoreUnavailable(
                f"the ledger file {display(opened[0])} was deleted or replaced while this "
                "command was using it; nothing was written"
            )

    def _operational(self, exc: sa_exc.OperationalError) -> Exception:
        text_ = _describe(exc)
        lowered = text_.lower()
        if "locked" in lowered or "busy" in lowered or "lock timeout" in lowered:
            return ConflictError(
                f"the ledger is busy: another writer held it for more than {self.timeout:g} s; "
                "nothing was written, retry"
            )
        fault = self._sqlite_fault(exc)
        if fault is not None:
            return fault
        return StoreUnavailable(f"the ledger at {self.shown_url} is unavailable: {text_}")

    def _sqlite_fault(self, exc: sa_exc.DBAPIError) -> StoreUnavailable | None:
        """A clear sentence for what SQLite reports about the file it stores the ledger in:
        read-only, cannot be opened, disk full, not a database, damaged."""
        if self.path is None:
            return None
        name = getattr(exc.orig, "sqlite_errorname", "") or ""
        text_ = _describe(exc)
        where = f"the ledger at {self.shown_url}"
        folder = self.path.parent
        free = free_bytes(folder)
        if name.startswith("SQLITE_FULL") or (
            name.startswith("SQLITE_IOERR") and free is not None and free < LOW_DISK_BYTES
        ):
            return StoreUnavailable(
                f"the disk holding {where} is full ({free} bytes free; SQLite said: {text_}); "
                "nothing was written, free some space and retry"
            )
        if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN")):
            if read_only_fs(folder):
                why = f"the file system holding {display(folder)} is mounted read-only"
            elif not os.access(folder, os.W_OK):
                why = f"the folder {display(folder)} is not writable"
            elif self.path.exists() and not os.access(self.path, os.W_OK):
                why = f"the file {display(self.path)} is not writable"
            else:
                why = text_
            verb = "cannot write" if name.startswith("SQLITE_READONLY") else "cannot open"
            return StoreUnavailable(
                f"{verb} {where}: {why} (SQLite keeps {self.path.name}-wal and "
                f"{self.path.name}-shm beside the ledger and must be able to write all three); "
                "nothing was written"
            )
        if name.startswith("SQLITE_NOTADB"):
            return StoreUnavailable(
                f"{display(self.path)} is not a SQLite database ({text_}): the ledger file was "
                "overwritten or damaged; nothing was written. Restore it from a backup"
            )
        if name.startswith("SQLITE_CORRUPT"):
            return StoreUnavailable(
                f"the ledger file {display(self.path)} is damaged ({text_}); nothing was "
                "written. Restore it from a backup"
            )
        if name.startswith("SQLITE_IOERR"):
            return StoreUnavailable(f"{where} had a disk I/O error ({text_}); nothing was written")
        return None

    # --- events --------------------------------------------------------------------------

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
        seq = conn.execute(_LAST_SEQ).scalar_one() if after_seq is None else after_seq
        rows = []
        for item in batch:
            seq += 1
            version += 1
            if type(item) is NewEvent:
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

    # --- a run's events by type (index (stream_id, event_type, stream_version)) -----------

    def type_versions(
        self, conn: Connection, stream_id: str, event_types: Sequence[str]
    ) -> list[tuple[int, str]]:
        """(stream_version, event_type) of the run's events of these types, in order."""
        # one equality lookup per type: with `IN (...)` SQLite walks the run's whole
        # (stream_id, stream_version) index instead, to return the rows in order
        found = [
            (version, kind)
            for kind in event_types
            for version in conn.execute(_TYPE_VERSIONS, {"stream": stream_id, "type": kind})
            .scalars()
            .all()
        ]
        return sorted(found)

    def nth_version(self, conn: Connection, stream_id: str, event_type: str, n: int) -> int | None:
        """The stream version of the run's `n`-th event (1-based) of this type."""
        found = {"stream": stream_id, "type": event_type, "skip": n - 1}
        return conn.execute(_NTH_VERSION, found).scalar()

    def last_version_before(
        self, conn: Connection, stream_id: str, event_type: str, before: int
    ) -> int | None:
        """The stream version of the run's last event of this type before version `before`."""
        found = {"stream": stream_id, "type": event_type, "before": before}
        return conn.execute(_LAST_VERSION_BEFORE, found).scalar()

    def versions_after(
        self, conn: Connection, stream_id: str, event_type: str, after: int
    ) -> list[int]:
        """The stream versions of the run's events of this type after version `after`."""
        found = {"stream": stream_id, "type": event_type, "after": after}
        return list(conn.execute(_VERSIONS_AFTER, found).scalars())

    def failed_rounds(self, conn: Connection, run_id: str, first: int) -> set[int]:
        """The run's rounds from `first` on that were not kept and named a mechanism
        (`rounds` rows)."""
        return set(conn.execute(_FAILED_ROUNDS, {"run": run_id, "first": first}).scalars())

    def read_versions(
        self, conn: Connection, stream_id: str, versions: Iterable[int]
    ) -> list[StoredEvent]:
        """The run's events at these stream versions, in version order."""
        wanted = sorted(set(versions))
        rows = conn.execute(_READ_VERSIONS, {"stream": stream_id, "versions": wanted})
        return [_stored(r) for r in rows]

    def latest_profile_version(self, conn: Connection, run_id: str, kernel: str) -> int | None:
        """The stream version of the run's latest profile of this kernel (`profiles` rows)."""
        return conn.execute(_LATEST_PROFILE, {"run": run_id, "kernel": kernel}).scalar()

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

    def seq_bounds(self, conn: Connection) -> tuple[int, int, int]:
        """(number of events, lowest seq, highest seq); (0, 0, 0) for an empty log. seq is
        unique, so a count equal to the highest seq with the lowest at 1 means no gap."""
        count, low, high = conn.execute(_SEQ_BOUNDS).one()
        return count, low or 0, high or 0

    def run_spans(self, conn: Connection) -> list[tuple[str, int, int]]:
        """(stream id, seq of its first event, seq of its last) of every run in the log."""
        return [tuple(row) for row in conn.execute(_RUN_SPANS)]  # type: ignore[misc]

    def event_count(self, conn: Connection) -> int:
        return conn.execute(select(func.count()).select_from(events)).scalar_one()

    def last_seq(self, conn: Connection) -> int:
        """The highest seq stored (0 for an empty log)."""
        return conn.execute(_LAST_SEQ).scalar_one()

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

    # --- projections ---------------------------------------------------------------------

    def load_view(self, conn: Connection, run_id: str) -> RunView | None:
        # read with the driver's cursor (`fetch`): `verify` reads every run's rows back
        found = fetch(conn, _RUN_ROW, {"run": run_id}, _RUN_BOOLEANS)
        if not found:
            return None
        cases = fetch(conn, _CASE_ROWS, {"run": run_id}, ())
        return RunView(run=RunRow(*found[0]), cases=tuple(CaseRow(*c) for c in cases))

    def save_view(self, conn: Connection, before: RunView | None, after: RunView) -> None:
        # Rows go to the driver as plain tuples in column order, through statements written
        # once per dialect: no per-row dict and no SQLAlchemy parameter processing (the
        # values are str, int, float, bool and None, which both drivers take as they are).
        run_id = after.run.run_id
        if before is None:
            _write(conn, "insert", runs, [_RUN_VALUES(after.run)])
            _write(conn, "insert", run_cases, [_CASE_VALUES(c) for c in after.cases])
        else:
            _write(conn, "update", runs, [(*_RUN_VALUES(after.run), run_id)])
            changed = [
                (*_CASE_VALUES(new), run_id, new.position)
                for old, new in zip(before.cases, after.cases, strict=True)
                if old != new
            ]
            _write(conn, "update", run_cases, changed)
        added = after.rounds[len(before.rounds) if before else 0 :]
        _write(conn, "insert", rounds, list(added))  # a RoundRow is a tuple of its columns
        new_profiles = after.profiles[len(before.profiles) if before else 0 :]
        _write(conn, "insert", profiles, [_PROFILE_VALUES(p) for p in new_profiles])

    def all_run_ids(self, conn: Connection) -> list[str]:
        return list(conn.execute(select(runs.c.run_id).order_by(runs.c.run_id)).scalars())

    def stored_projection(self, conn: Connection, run_id: str) -> RunView | None:
        view = self.load_view(conn, run_id)
        if view is None:
            return None
        rows = fetch(conn, _RUN_ROUNDS, {"run": run_id}, ROUND_BOOLEANS)
        found = fetch(conn, _RUN_PROFILES, {"run": run_id}, ())
        return RunView(
            run=view.run,
            cases=view.cases,
            rounds=tuple(map(RoundRow._make, rows)),
            profiles=tuple(ProfileRow(*p) for p in found),
        )

    def clear_projections(self, conn: Connection) -> None:
        for table in (profiles, rounds, run_cases, runs):
            conn.execute(table.delete())


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
_SEQ_BOUNDS = select(func.count(), func.min(events.c.seq), func.max(events.c.seq))
_RUN_SPANS = select(events.c.stream_id, func.min(events.c.seq), func.max(events.c.seq)).group_by(
    events.c.stream_id
)
_READ_VERSION = select(*EVENT_COLUMNS).where(
    events.c.stream_id == bindparam("stream"), events.c.stream_version == bindparam("version")
)
_OF_TYPE = (events.c.stream_id == bindparam("stream"), events.c.event_type == bindparam("type"))

_TYPE_VERSIONS = select(events.c.stream_version).where(*_OF_TYPE).order_by(events.c.stream_version)
_NTH_VERSION = (
    select(events.c.stream_version)
    .where(*_OF_TYPE)
    .order_by(events.c.stream_version)
    .limit(1)
    .offset(bindparam("skip"))
)
_LAST_VERSION_BEFORE = (
    select(events.c.stream_version)
    .where(*_OF_TYPE, events.c.stream_version < bindparam("before"))
    .order_by(events.c.stream_version.desc())
    .limit(1)
)
_VERSIONS_AFTER = (
    select(events.c.stream_version)
    .where(*_OF_TYPE, events.c.stream_version > bindparam("after"))
    .order_by(events.c.stream_version)
)
_FAILED_ROUNDS = select(rounds.c.round).where(
    rounds.c.run_id == bindparam("run"),
    rounds.c.round >= bindparam("first"),
    rounds.c.decision != "KEEP",
    rounds.c.mechanism.is_not(None),
)
_READ_VERSIONS = (
    select(*EVENT_COLUMNS)
    .where(
        events.c.stream_id == bindparam("stream"),
        events.c.stream_version.in_(bindparam("versions", expanding=True)),
    )
    .order_by(events.c.stream_version)
)
_LATEST_PROFILE = (
    select(profiles.c.stream_version)
    .where(profiles.c.run_id == bindparam("run"), profiles.c.kernel_sha256 == bindparam("kernel"))
    .order_by(profiles.c.stream_version.desc())
    .limit(1)
)
_RUN_ROW = select(*(runs.c[name] for name in RunRow.__slots__)).where(
    runs.c.run_id == bindparam("run")
)
_RUN_BOOLEANS = tuple(
    i for i, name in enumerate(RunRow.__slots__) if runs.c[name].type.python_type is bool
)
_CASE_ROWS = (
    select(*(run_cases.c[name] for name in CaseRow.__slots__))
    .where(run_cases.c.run_id == bindparam("run"))
    .order_by(run_cases.c.position)
)
_RUN_ROUNDS = (
    select(*ROUND_COLUMNS).where(rounds.c.run_id == bindparam("run")).order_by(rounds.c.round)
)
_RUN_PROFILES = (
    select(*(profiles.c[name] for name in ProfileRow.__slots__))
    .where(profiles.c.run_id == bindparam("run"))
    .order_by(profiles.c.stream_version)
)
_RUN_VALUES = attrgetter(*RunRow.__slots__)
_CASE_VALUES = attrgetter(*CaseRow.__slots__)
_PROFILE_VALUES = attrgetter(*ProfileRow.__slots__)
_ROW_CLASSES = {"runs": RunRow, "run_cases": CaseRow, "rounds": RoundRow, "profiles": ProfileRow}
_ROW_KEYS = {"runs": ("run_id",), "run_cases": ("run_id", "position")}


def _write(conn: Connection, kind: str, table: Any, rows: list[tuple[Any, ...]]) -> None:
    """Insert (or update by key) projection rows given as tuples of their row class's
    fields in order (an update's tuples end with the key's values)."""
    if rows:
        conn.exec_driver_sql(_projection_sql(conn.dialect.paramstyle, kind, table.name), rows)


@functools.cache
def _projection_sql(paramstyle: str, kind: str, table: str) -> str:
    mark = "?" if paramstyle == "qmark" else "%s"
    names = row_fields(_ROW_CLASSES[table])
    if kind == "insert":
        return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
    sets = ", ".join(f"{name} = {mark}" for name in names)
    keys = " AND ".join(f"{name} = {mark}" for name in _ROW_KEYS[table])
    return f"UPDATE {table} SET {sets} WHERE {keys}"


def insert_events_sql(conn: Connection) -> str:
    """INSERT for one events row, in the driver's own parameter style."""
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    marks = ", ".join([mark] * len(EVENT_COLUMNS))
    return f"INSERT INTO events ({_EVENT_COLUMN_NAMES}) VALUES ({marks})"
