"""The ledger database opened: the SQLite file checked before it is opened (and a new one
made at head), the engine and its pragmas, the schema gate, and `Database.transaction`, the
one way to open a transaction (it commits, rolls back, closes and translates driver errors:
a lost race is `ConflictError`, exit 3; a store that fails is `StoreUnavailable`, exit 4).

SQLite (WAL, synchronous=FULL, writers take the lock up front with BEGIN IMMEDIATE) is the
embedded default; PostgreSQL (an advisory lock orders the writers) is the shared one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy import exc as sa_exc

from ledger.errors import (
    ConflictError,
    InputError,
    LedgerMissing,
    SchemaOutOfDate,
    StoreUnavailable,
)
from ledger.store import schema
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
from ledger.store.urls import busy_timeout_s, parse_url
from ledger.text import display

PG_APPEND_LOCK = 0x6B6C6564  # "kled": the advisory lock that serializes appends
LOW_DISK_BYTES = 1024 * 1024  # an I/O error with less free space than this is a full disk


def _describe(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    return " ".join(str(orig).split()) or type(orig).__name__


class Database:
    """An opened ledger database: its engine, schema gate and transactions."""

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
            from ledger.files import guard_ledger

            guard_ledger(self.path)  # no output of this process may overwrite it
            if not read_only:  # what a creation killed midway left beside it
                remove_dead_creations(self.path)
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
        if "pattern too complex" in lowered:  # the query's text, not the ledger, is at fault
            return InputError(
                "the search pattern is too complex for the ledger to match (SQLite allows "
                "LIKE patterns of at most 50,000 bytes); use a shorter one"
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
