"""Alembic environment. Runs on a connection handed over by kernel-ledger, or on the URL in
KERNEL_LEDGER_DB when `alembic` is used directly."""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy import create_engine

from ledger.store.tables import metadata

config = context.config


def _run(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("KERNEL_LEDGER_DB")
    if not url:
        raise SystemExit("Error: set KERNEL_LEDGER_DB to the ledger's SQLAlchemy URL")
    engine = create_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("Error: offline (--sql) migrations are not supported")
run_migrations_online()
