"""The event store: one append-only table, content-addressed blobs and the projections.

SQLite (WAL, synchronous=FULL) is the embedded default; PostgreSQL is the shared one. All
transactions go through `Store.transaction`, which commits, rolls back and translates
driver errors into the ledger's own (conflict: exit 3; store unavailable: exit 4).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, func, select, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from ledger.errors import ConflictError, InputError, SchemaOutOfDate, StoreUnavailable
from ledger.events import Event, load_event
from ledger.hashing import ZERO_HASH, event_hash, sha256_hex
from ledger.projections import CaseRow, ProfileRow, RoundRow, RunRow, RunView, as_dict
from ledger.store import schema
from ledger.store.tables import blobs, events, ledger_info, profiles, rounds, run_cases, runs

DEFAULT_DB = "sqlite:///.vaws-local/ascend-triton/optimization/ledger.sqlite3"
DEFAULT_BUSY_TIMEOUT_S = 5.0
PG_APPEND_LOCK = 0x6B6C6564  # "kled": the advisory lock that serializes appends


def resolve_url(db: str | None) -> str:
    """--db, else KERNEL_LEDGER_DB, else the default SQLite file under the working directory."""
    return db or os.environ.get("KERNEL_LEDGER_DB") or DEFAULT_DB


def busy_timeout_s() -> float:
    raw = os.environ.get("KERNEL_LEDGER_BUSY_TIMEOUT")
    if raw is None:
        return DEFAULT_BUSY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise InputError("KERNEL_LEDGER_BUSY_TIMEOUT must be a number of seconds") from None
    if not 0 <= value <= 3600:
        raise InputError("KERNEL_LEDGER_BUSY_TIMEOUT must be between 0 and 3600 seconds")
    return value


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


def _stored(row: Any) -> StoredEvent:
    return StoredEvent(
        seq=row[0],
        event_id=row[1],
        stream_id=row[2],
        stream_version=row[3],
        event_type=row[4],
        schema_version=row[5],
        recorded_at=row[6],
        payload=bytes(row[7]),
        parent_hash=row[8],
        event_hash=row[9],
    )


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split()) or type(orig).__name__


class Store:
    """An opened ledger database."""

    def __init__(self, url: str, *, create: bool = True, check_schema: bool = True) -> None:
        self.url = url
        try:
            parsed = make_url(url)
        except sa_exc.ArgumentError:
            raise InputError(f"--db {url!r} is not a database URL") from None
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise InputError(f"--db must be a sqlite:// or postgresql+psycopg:// URL, not {url!r}")
        self.shown_url = parsed.render_as_string(hide_password=True)
        self.timeout = busy_timeout_s()
        self.engine = self._engine(parsed)
        if check_schema:
            self._check_schema(create=create)

    # --- opening -------------------------------------------------------------------------

    def _engine(self, parsed) -> Engine:
        if self.dialect == "sqlite":
            database = parsed.database or ""
            if database and database != ":memory:" and not database.startswith("file:"):
                folder = Path(database).expanduser().parent
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreUnavailable(
                        f"cannot create the ledger folder {folder}: {exc.strerror or exc}"
                    ) from None
            engine = create_engine(parsed, connect_args={"timeout": self.timeout})
            timeout_ms = int(self.timeout * 1000)

            @event.listens_for(engine, "connect")
            def _connect(dbapi_connection, _record) -> None:
                dbapi_connection.isolation_level = None
                cursor = dbapi_connection.cursor()
                cursor.execute(f"PRAGMA busy_timeout = {timeout_ms}")
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = FULL")
                cursor.execute("PRAGMA foreign_keys = ON")
                cursor.close()

            @event.listens_for(engine, "begin")
            def _begin(conn: Connection) -> None:
                mode = "IMMEDIATE" if conn.get_execution_options().get("ledger_write") else ""
                conn.exec_driver_sql(f"BEGIN {mode}".strip())

            return engine
        try:
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

    # --- transactions --------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, write: bool = False) -> Iterator[Connection]:
        """The one way to open a transaction: commit, roll back, close, translate errors."""
        try:
            with self.engine.connect() as base:
                conn = base.execution_options(ledger_write=write)
                with conn.begin():
                    if write and self.dialect == "postgresql":
                        conn.exec_driver_sql(
                            f"SET LOCAL lock_timeout = '{int(self.timeout * 1000)}ms'"
                        )
                        conn.execute(
                            text("SELECT pg_advisory_xact_lock(:k)"), {"k": PG_APPEND_LOCK}
                        )
                    yield conn
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
            raise StoreUnavailable(
                f"the ledger at {self.shown_url} failed: {_describe(exc)}"
            ) from None

    def _operational(self, exc: sa_exc.OperationalError) -> Exception:
        text_ = _describe(exc)
        lowered = text_.lower()
        if "locked" in lowered or "busy" in lowered or "lock timeout" in lowered:
            return ConflictError(
                f"the ledger is busy: another writer held it for more than {self.timeout:g} s; "
                "nothing was written, retry"
            )
        return StoreUnavailable(f"the ledger at {self.shown_url} is unavailable: {text_}")

    # --- events --------------------------------------------------------------------------

    def stream_head(self, conn: Connection, stream_id: str) -> tuple[int, str]:
        row = conn.execute(
            select(events.c.stream_version, events.c.event_hash)
            .where(events.c.stream_id == stream_id)
            .order_by(events.c.stream_version.desc())
            .limit(1)
        ).first()
        return (row[0], row[1]) if row else (0, ZERO_HASH)

    def append(
        self, conn: Connection, stream_id: str, expected_version: int, batch: Sequence[NewEvent]
    ) -> list[StoredEvent]:
        """Append `batch` to a stream whose current version must be `expected_version`.

        A batch whose event ids are all stored already, with identical content, is a
        retry of an append that succeeded: it returns the stored events and writes nothing.
        """
        version, parent = self.stream_head(conn, stream_id)
        if version != expected_version:
            existing = self._already_appended(conn, stream_id, batch)
            if existing is not None:
                return existing
            raise ConflictError(
                f"run {stream_id} is at version {version}, not {expected_version}: another "
                "writer recorded first; nothing was written, retry with fresh state"
            )
        seq = conn.execute(select(func.coalesce(func.max(events.c.seq), 0))).scalar_one()
        rows = []
        stored = []
        for item in batch:
            seq += 1
            version += 1
            payload = item.event.canonical_payload()
            record = StoredEvent(
                seq=seq,
                event_id=item.event_id,
                stream_id=stream_id,
                stream_version=version,
                event_type=item.event.event_type,
                schema_version=item.event.schema_version,
                recorded_at=item.recorded_at,
                payload=payload,
                parent_hash=parent,
                event_hash="",
            )
            digest = record.computed_hash()
            record = StoredEvent(**{**_fields(record), "event_hash": digest})
            parent = digest
            stored.append(record)
            rows.append(_fields(record))
        if rows:
            conn.execute(events.insert(), rows)
        return stored

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
        row = conn.execute(
            select(*EVENT_COLUMNS).where(
                events.c.stream_id == stream_id, events.c.stream_version == version
            )
        ).first()
        return _stored(row) if row else None

    def iter_events(self, conn: Connection, *, batch: int = 2000, stream_id: str | None = None):
        """Every event in seq order, read in keyset-paged batches (bounded memory)."""
        last = 0
        while True:
            query = select(*EVENT_COLUMNS).where(events.c.seq > last)
            if stream_id is not None:
                query = query.where(events.c.stream_id == stream_id)
            page = conn.execute(query.order_by(events.c.seq).limit(batch)).all()
            if not page:
                return
            for row in page:
                yield _stored(row)
            last = page[-1][0]

    def event_count(self, conn: Connection) -> int:
        return conn.execute(select(func.count()).select_from(events)).scalar_one()

    def ledger_id(self, conn: Connection) -> str:
        return conn.execute(
            select(ledger_info.c.value).where(ledger_info.c.key == "ledger_id")
        ).scalar_one()

    # --- blobs ---------------------------------------------------------------------------

    def put_blob(self, conn: Connection, data: bytes) -> str:
        digest = sha256_hex(data)
        present = conn.execute(select(blobs.c.sha256).where(blobs.c.sha256 == digest)).first()
        if present is None:
            conn.execute(blobs.insert().values(sha256=digest, size=len(data), content=data))
        return digest

    def get_blob(self, conn: Connection, digest: str) -> bytes | None:
        row = conn.execute(select(blobs.c.content).where(blobs.c.sha256 == digest)).first()
        return bytes(row[0]) if row else None

    def iter_blobs(self, conn: Connection):
        for row in conn.execute(select(blobs.c.sha256, blobs.c.content).order_by(blobs.c.sha256)):
            yield row[0], bytes(row[1])

    # --- projections ---------------------------------------------------------------------

    def load_view(self, conn: Connection, run_id: str) -> RunView | None:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).mappings().first()
        if row is None:
            return None
        cases = conn.execute(
            select(run_cases).where(run_cases.c.run_id == run_id).order_by(run_cases.c.position)
        ).mappings()
        return RunView(run=RunRow(**row), cases=tuple(CaseRow(**c) for c in cases))

    def save_view(self, conn: Connection, before: RunView | None, after: RunView) -> None:
        run_id = after.run.run_id
        if before is None:
            conn.execute(runs.insert().values(**as_dict(after.run)))
            conn.execute(run_cases.insert(), [as_dict(c) for c in after.cases])
        else:
            conn.execute(runs.update().where(runs.c.run_id == run_id).values(**as_dict(after.run)))
            for old, new in zip(before.cases, after.cases, strict=True):
                if old != new:
                    conn.execute(
                        run_cases.update()
                        .where(run_cases.c.run_id == run_id, run_cases.c.position == new.position)
                        .values(**as_dict(new))
                    )
        added = after.rounds[len(before.rounds) if before else 0 :]
        if added:
            conn.execute(rounds.insert(), [as_dict(r) for r in added])
        new_profiles = after.profiles[len(before.profiles) if before else 0 :]
        if new_profiles:
            conn.execute(profiles.insert(), [as_dict(p) for p in new_profiles])

    def all_run_ids(self, conn: Connection) -> list[str]:
        return list(conn.execute(select(runs.c.run_id).order_by(runs.c.run_id)).scalars())

    def stored_projection(self, conn: Connection, run_id: str) -> RunView | None:
        view = self.load_view(conn, run_id)
        if view is None:
            return None
        rows = conn.execute(
            select(rounds).where(rounds.c.run_id == run_id).order_by(rounds.c.round)
        ).mappings()
        found = conn.execute(
            select(profiles)
            .where(profiles.c.run_id == run_id)
            .order_by(profiles.c.stream_version)
        ).mappings()
        return RunView(
            run=view.run,
            cases=view.cases,
            rounds=tuple(RoundRow(**r) for r in rows),
            profiles=tuple(ProfileRow(**p) for p in found),
        )

    def clear_projections(self, conn: Connection) -> None:
        for table in (profiles, rounds, run_cases, runs):
            conn.execute(table.delete())


def _fields(record: StoredEvent) -> dict[str, Any]:
    return {name: getattr(record, name) for name in StoredEvent.__slots__}


@dataclass(frozen=True, slots=True)
class RoundFilter:
    run_id: str | None = None
    op_name: str | None = None
    soc: str | None = None
    decision: str | None = None
    bottleneck: str | None = None
    mechanism: str | None = None
    search: str | None = None
    since: str | None = None
    until: str | None = None
    limit: int | None = None


def query_rounds(conn: Connection, f: RoundFilter) -> list[RoundRow]:
    """Rounds across runs from the indexed projection table, oldest first."""
    query = select(rounds)
    if f.run_id is not None:
        query = query.where(rounds.c.run_id == f.run_id)
    if f.op_name is not None:
        query = query.where(rounds.c.op_name == f.op_name)
    if f.soc is not None:
        query = query.where(rounds.c.soc == f.soc)
    if f.decision is not None:
        query = query.where(rounds.c.decision == f.decision)
    if f.mechanism is not None:
        query = query.where(rounds.c.mechanism == f.mechanism)
    if f.bottleneck is not None:
        query = query.where(rounds.c.bottleneck == f.bottleneck)
    if f.since is not None:
        query = query.where(rounds.c.recorded_at >= f.since)
    if f.until is not None:
        query = query.where(rounds.c.recorded_at < f.until)
    if f.search:
        pattern = "%" + f.search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        query = query.where(
            rounds.c.hypothesis.ilike(pattern, escape="\\")
            | rounds.c.change.ilike(pattern, escape="\\")
        )
    query = query.order_by(rounds.c.recorded_at, rounds.c.run_id, rounds.c.round)
    if f.limit is not None:
        query = query.limit(f.limit)
    return [RoundRow(**r) for r in conn.execute(query).mappings()]


def list_runs(conn: Connection) -> list[RunRow]:
    return [RunRow(**r) for r in conn.execute(select(runs).order_by(runs.c.planned_at)).mappings()]


def rounds_with_bottleneck(conn: Connection, bottleneck: str, limit: int) -> list[RoundRow]:
    """The newest rounds whose starting profile had this bottleneck class (indexed)."""
    query = (
        select(rounds)
        .where(rounds.c.bottleneck == bottleneck)
        .order_by(rounds.c.recorded_at.desc())
        .limit(limit)
    )
    return [RoundRow(**r) for r in conn.execute(query).mappings()]
