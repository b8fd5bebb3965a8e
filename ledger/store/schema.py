"""Schema revisions: what this version of kernel-ledger expects, and how to get there.

`HEAD_REVISION` is kept as a constant so that opening a ledger does not import Alembic;
a test proves it equals the head of migrations/.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, inspect, text

HEAD_REVISION = "0010"
KNOWN_REVISIONS = ("0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010")
MIGRATIONS = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(connection: Connection | None = None):
    """An Alembic Config built in code, pointing at this package's migrations."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def current_revision(connection: Connection) -> str | None:
    """The stamped revision, or None for an empty database. Raises if tables exist unstamped."""
    tables = set(inspect(connection).get_table_names())
    if "alembic_version" not in tables:
        if tables & {"events", "runs"}:
            return "unstamped"
        return None
    row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
    return row[0] if row else None


def upgrade(connection: Connection) -> None:
    """Bring the database to HEAD_REVISION inside the caller's connection."""
    from alembic import command

    command.upgrade(alembic_config(connection), "head")
