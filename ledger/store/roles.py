"""Least-privilege grants for the application role of a shared PostgreSQL ledger.

Two roles share a ledger: the owner, which owns the tables and runs the migrations, and an
application role, which engineers and agents use to plan, record and read. The application
role may read every table and append to the log; it may never change or remove what was
appended. It updates the projection rows of a run (they follow the events in the same
transaction) but cannot delete them; rebuilding projections is the owner's job.

The grants are derived from the tables this kernel-ledger knows: the projection tables
(`PROJECTION_TABLES`) get SELECT, INSERT and UPDATE; every other table is a log of recorded
facts (events, blobs, ledger_info, checkpoints, and any table a later revision adds) and
gets SELECT and INSERT only. Running `db grant` again after `db upgrade` covers new tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text
from sqlalchemy.dialects import postgresql

from ledger.errors import InputError
from ledger.store.eventstore import Store
from ledger.store.tables import PROJECTION_TABLES, metadata

APPEND_ONLY = ("SELECT", "INSERT")
PROJECTION = ("SELECT", "INSERT", "UPDATE")
READ_ONLY = ("SELECT",)
# alembic_version is not in the models: the application role only reads it (schema check).
SCHEMA_VERSION_TABLE = "alembic_version"


def privileges() -> dict[str, tuple[str, ...]]:
    """Table name -> the privileges the application role gets on it."""
    projection_names = {t.name for t in PROJECTION_TABLES}
    grants: dict[str, tuple[str, ...]] = {}
    for table in metadata.sorted_tables:
        grants[table.name] = PROJECTION if table.name in projection_names else APPEND_ONLY
    grants[SCHEMA_VERSION_TABLE] = READ_ONLY
    return dict(sorted(grants.items()))


@dataclass(frozen=True)
class GrantResult:
    role: str
    owner: str
    schema: str
    grants: dict[str, tuple[str, ...]]


def check_role_name(role: str) -> str:
    if not role or len(role.encode("utf-8")) > 63:
        raise InputError("--role needs a PostgreSQL role name of 1 to 63 bytes")
    if any(ord(ch) < 32 or ch == "\x7f" for ch in role):
        raise InputError("--role must not contain control characters")
    return role


def grant_statements(role: str, schema: str = "public") -> list[str]:
    """The SQL that gives `role` exactly the application privileges (revoking any others)."""
    quote = postgresql.dialect().identifier_preparer.quote
    who = quote(check_role_name(role))
    where = quote(schema)
    statements = [f"GRANT USAGE ON SCHEMA {where} TO {who}"]
    for table, allowed in privileges().items():
        name = f"{where}.{quote(table)}"
        statements.append(f"REVOKE ALL ON TABLE {name} FROM {who}")
        statements.append(f"GRANT {', '.join(allowed)} ON TABLE {name} TO {who}")
    return statements


def check_grant(dialect: str, role: str) -> None:
    """Refuse a grant that cannot be made, before any ledger is opened: a bad role name, or
    a SQLite ledger (`dialect`: the backend name of the database URL)."""
    check_role_name(role)
    if dialect == "sqlite":
        raise InputError(
            "db grant is for PostgreSQL ledgers; a SQLite ledger has no roles (protect the "
            "file and its folder with file permissions instead)"
        )


def grant(store: Store, role: str) -> GrantResult:
    """Run `grant_statements` on a PostgreSQL ledger, as the role that owns its tables."""
    check_grant(store.dialect, role)
    with store.transaction(write=True) as conn:
        schema, owner = _ledger_schema(conn)
        current = conn.execute(text("SELECT current_user")).scalar_one()
        # A role that neither owns the tables nor is a superuser only gets warnings from
        # GRANT ("no privileges were granted"): refuse instead of pretending.
        if not conn.execute(
            text(
                "SELECT pg_has_role(current_user, :o, 'USAGE') OR "
                "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
            ),
            {"o": owner},
        ).scalar_one():
            raise InputError(
                f"db grant must run as the role that owns the ledger's tables ({owner!r}), "
                f"not {current!r}"
            )
        if not conn.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": role}).first():
            raise InputError(f"role {role!r} does not exist; create it first (CREATE ROLE)")
        if role in (owner, current):
            raise InputError(
                f"role {role!r} owns the ledger's tables or runs this command; grant to the "
                "application role, not to the owner"
            )
        for statement in grant_statements(role, schema):
            conn.exec_driver_sql(statement)
    return GrantResult(role=role, owner=owner, schema=schema, grants=privileges())


def _ledger_schema(conn: Connection) -> tuple[str, str]:
    """(schema, owner) of the events table this connection resolves through its search_path."""
    row = conn.execute(
        text(
            "SELECT n.nspname, pg_get_userbyid(c.relowner) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass('events')"
        )
    ).first()
    if row is None:
        raise InputError("this database has no ledger yet; run db upgrade as the owner first")
    return row[0], row[1]
