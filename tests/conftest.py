"""Fixtures shared by every test: the store backends (SQLite and a real PostgreSQL),
campaign builders and an in-process CLI runner."""

from __future__ import annotations

import io
import json
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from campaign import Campaign

BACKENDS = ("sqlite", "postgresql")

# Who every test appends as (ledger/core/actors.py): pinned, so that a fresh ledger hashes
# the same on every machine; subprocesses inherit it. PostgreSQL's db_role is the database's.
os.environ.setdefault("KERNEL_LEDGER_ACTOR", "test-suite")
os.environ.setdefault("KERNEL_LEDGER_TEST_OS_USER", "tester")
os.environ.setdefault("KERNEL_LEDGER_TEST_HOST", "test-host")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The PostgreSQL server URL: started here, or given by KERNEL_LEDGER_TEST_PG_URL."""
    from pgcluster import session_cluster

    url, stop = session_cluster()
    if url is None:
        pytest.skip(str(stop))
    yield url
    stop()  # type: ignore[operator]


def _admin(url: str):
    return create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")


@pytest.fixture(scope="session")
def pg_template(pg_server: str) -> str:
    """A database migrated to head, copied for each test (CREATE DATABASE ... TEMPLATE)."""
    from ledger.store.eventstore import Store

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"kl_template_{worker}_{uuid.uuid4().hex[:6]}"
    admin = _admin(pg_server)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    store = Store(url, check_schema=False)
    store.upgrade()
    store.close()
    admin.dispose()
    return name


def new_pg_database(pg_server: str, template: str) -> str:
    name = f"kl_{uuid.uuid4().hex[:12]}"
    admin = _admin(pg_server)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    admin.dispose()
    return make_url(pg_server).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path: Path) -> str:
    """A fresh, empty ledger on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    server = request.getfixturevalue("pg_server")
    template = request.getfixturevalue("pg_template")
    return new_pg_database(server, template)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'ledger.sqlite3'}"


@pytest.fixture
def store(db_url: str):
    from ledger.store.eventstore import Store

    s = Store(db_url)
    yield s
    s.close()


@pytest.fixture
def campaign(tmp_path: Path) -> Campaign:
    return Campaign(tmp_path / "campaign")


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)

    @property
    def error(self) -> str:
        """What went wrong, from the one channel it was said on: the `error` of a `--json`
        answer (stdout), else the `Error:` line(s) on stderr, without the prefix."""
        if self.stdout.startswith("{"):
            return str(self.json().get("error", ""))
        return self.stderr.removeprefix("Error: ").rstrip("\n")


@pytest.fixture
def cli(db_url: str, monkeypatch):
    """Run `kernel-ledger --db <fresh ledger> ARGS` in-process; returns exit code and output."""
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    return CliRunner(db_url)


class CliRunner:
    def __init__(self, db_url: str) -> None:
        self.db_url = db_url

    def __call__(self, *args: str, db: bool = True) -> Result:
        from cli.app import main

        argv = (["--db", self.db_url] if db else []) + [str(a) for a in args]
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        return Result(code, out.getvalue(), err.getvalue())

    def event_count(self) -> int:
        from ledger.store.eventstore import Store

        store = Store(self.db_url)
        with store.transaction() as conn:
            n = store.event_count(conn)
        store.close()
        return n


def pytest_configure(config) -> None:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
