"""Schema: migrations create exactly the models; new ledgers start at head; old ones are
refused with the upgrade command."""

from __future__ import annotations

import sqlite3

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from ledger.errors import SchemaOutOfDate, StoreUnavailable
from ledger.store import schema
from ledger.store.eventstore import Store
from ledger.store.tables import metadata
from ledger.store.urls import DEFAULT_DB


def test_head_revision_constant_matches_migrations():
    scripts = ScriptDirectory.from_config(schema.alembic_config())
    assert scripts.get_current_head() == schema.HEAD_REVISION
    assert {s.revision for s in scripts.walk_revisions()} == set(schema.KNOWN_REVISIONS)


def test_models_and_migrations_agree(store: Store):
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_new_sqlite_ledger_created_at_head_with_folders(tmp_path):
    path = tmp_path / "deep" / "er" / "ledger.sqlite3"
    store = Store(f"sqlite:///{path}")
    assert path.exists() and store.revision() == schema.HEAD_REVISION
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_path_is_relative_to_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    from ledger.store.urls import resolve_url

    assert resolve_url(None) == DEFAULT_DB
    Store(resolve_url(None)).close()
    assert (tmp_path / ".vaws-local/ascend-triton/optimization/ledger.sqlite3").exists()
    monkeypatch.setenv("KERNEL_LEDGER_DB", "sqlite:///x.db")
    assert resolve_url(None) == "sqlite:///x.db"
    assert resolve_url("sqlite:///y.db") == "sqlite:///y.db"


def test_out_of_date_ledger_is_refused_with_the_command(tmp_path):
    path = tmp_path / "old.sqlite3"
    Store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0000'")
    known = schema.KNOWN_REVISIONS
    try:
        schema.KNOWN_REVISIONS = ("0000", *known)
        with pytest.raises(SchemaOutOfDate) as info:
            Store(f"sqlite:///{path}")
    finally:
        schema.KNOWN_REVISIONS = known
    assert "kernel-ledger --db 'sqlite:///" in str(info.value) and "db upgrade" in str(info.value)
    assert info.value.exit_code == 4


def test_unknown_revision_is_refused(tmp_path):
    path = tmp_path / "future.sqlite3"
    Store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreUnavailable, match="does not know"):
        Store(f"sqlite:///{path}")


def test_empty_postgres_database_needs_db_upgrade(pg_server):
    import uuid

    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    from conftest import _admin

    name = f"kl_empty_{uuid.uuid4().hex[:8]}"
    with _admin(pg_server).connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    with pytest.raises(SchemaOutOfDate, match="has no schema yet; run: kernel-ledger --db"):
        Store(url)
    store = Store(url, check_schema=False)
    assert store.upgrade() == (None, schema.HEAD_REVISION)
    Store(url).close()
