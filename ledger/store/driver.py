"""Statements built once, compiled once per driver and run with the driver's own cursor:
the read paths that return many small rows (history, projections) pay for SQLite's work, not
for SQLAlchemy's result objects. Driver errors are raised as SQLAlchemy's, so
`Store.transaction` translates them as it does every other."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    Connection,
)
from sqlalchemy import exc as sa_exc


def driver_sql(conn: Connection, statement: Any, values: dict[str, Any]) -> tuple[str, Any]:
    """A statement built once (module level or cached) compiled once per driver, and its
    parameter values in that driver's style."""
    dialect = conn.dialect
    key = (dialect.name, dialect.paramstyle, statement)
    compiled = _COMPILED.get(key)
    if compiled is None:
        done = statement.compile(dialect=dialect)
        # the binds SQLAlchemy adds itself (SQLite's "OFFSET ?") keep their compiled values
        defaults = done.params
        compiled = _COMPILED[key] = (
            str(done),
            defaults,
            done.positiontup if done.positional else None,
        )
    sql, defaults, order = compiled
    if order is None:
        return sql, {**defaults, **values}
    return sql, tuple(values[name] if name in values else defaults[name] for name in order)


_COMPILED: dict[tuple[str, str, Any], tuple[str, dict[str, Any], Any]] = {}


def fetch(
    conn: Connection, statement: Any, values: dict[str, Any], booleans: Sequence[int]
) -> list[Sequence[Any]]:
    """The rows of a statement built once, read with the driver's cursor (`driver_rows`),
    the columns at `booleans` made bool as SQLAlchemy made them."""
    rows = driver_rows(conn, *driver_sql(conn, statement, values))
    if not booleans or conn.dialect.name != "sqlite":
        return rows
    return [with_booleans(row, booleans) for row in rows]


def driver_rows(conn: Connection, sql: str, params: Any) -> list[Sequence[Any]]:
    """Rows read with the driver's cursor: SQLAlchemy's result rows (a row object and type
    processing per row) cost as much as SQLite's own work on an indexed query. Driver
    errors are raised as SQLAlchemy's, so `Store.transaction` reports them as it does
    every other."""
    dbapi = conn.dialect.loaded_dbapi
    try:
        with contextlib.closing(conn.connection.cursor()) as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()
    except dbapi.Error as exc:
        raise sa_exc.DBAPIError.instance(sql, params, exc, dbapi.Error) from exc


def with_booleans(row: Sequence[Any], booleans: Sequence[int]) -> list[Any]:
    values = list(row)
    for i in booleans:
        if values[i] is not None:
            values[i] = bool(values[i])
    return values
