"""History across runs: rounds by filter from the indexed `rounds` projection, oldest
first, a page at a time, and the runs list. One statement per combination of filters,
built once (`rounds_query`), read through the driver's cursor (`driver.fetch`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    exists,
    or_,
    select,
    tuple_,
)

from ledger.core.projections import RoundRow, RunRow
from ledger.store.driver import driver_rows, driver_sql, with_booleans
from ledger.store.tables import events, rounds, runs

# Projection rows are read positionally, in the order of their dataclass's fields: building
# them from mappings cost more than the query itself for the small results history returns.
ROUND_COLUMNS = tuple(rounds.c[name] for name in RoundRow._fields)


ROUND_BOOLEANS = tuple(
    i for i, column in enumerate(ROUND_COLUMNS) if column.type.python_type is bool
)


def utc_bound(value: str, name: str) -> str:
    """A `since`/`until` bound (a date or time, UTC unless it names its offset) as the
    projection stores `recorded_at`; anything else is rejected input naming `name`."""
    from datetime import UTC, datetime

    from ledger.errors import InputError

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        raise InputError(
            f"{name} must be a date or time like 2026-11-30 or 2026-11-30T12:00:00Z"
        ) from None
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class RoundFilter:
    run_id: str | None = None
    op_name: str | None = None
    soc: str | None = None
    decision: str | None = None
    bottleneck: str | None = None
    mechanism: str | None = None
    search: str | None = None
    actor: str | None = None  # the decision's db_role, os_user or label, exactly
    session: str | None = None  # the candidate's measurement session id
    since: str | None = None
    until: str | None = None
    limit: int | None = None
    after: tuple[str, str, int] | None = None  # keyset: (recorded_at, run_id, round) of a row


def query_rounds(conn: Connection, f: RoundFilter) -> list[RoundRow]:
    """Rounds across runs from the indexed projection table, oldest first."""
    sql, params = rounds_sql(conn, f)
    return fetch_rounds(conn, sql, params)


def rounds_sql(conn: Connection, f: RoundFilter) -> tuple[str, Any]:
    """The SQL text of `query_rounds` for this connection's driver, and its parameters in
    the driver's own style (the benchmarks also run it without indexes)."""
    statement, values = rounds_query(f)
    return driver_sql(conn, statement, values)


def fetch_rounds(conn: Connection, sql: str, params: Any) -> list[RoundRow]:
    """Rounds from a SELECT of `ROUND_COLUMNS`, read with the driver's cursor (history
    returns hundreds of rows at a time). The one conversion SQLAlchemy did is done here:
    SQLite returns booleans as 0 and 1."""
    rows = driver_rows(conn, sql, params)
    if conn.dialect.name != "sqlite":
        return list(map(RoundRow._make, rows))
    return [RoundRow._make(with_booleans(row, ROUND_BOOLEANS)) for row in rows]


# A round's decision event: its run's RoundDecided at the row's time, and its actor, from
# one index (0009).
def _decided_here():
    return (
        (events.c.stream_id == rounds.c.run_id)
        & (events.c.event_type == "RoundDecided")
        & (events.c.recorded_at == rounds.c.recorded_at)
    )


def _recorded_by(value):
    """The round's decision was appended by an actor with this label, role or user."""
    return exists().where(
        _decided_here(),
        or_(
            *(events.c.actor.ilike(bindparam(f"actor_{key}"), escape="\\") for key in ACTOR_MATCHED)
        ),
    )


ACTOR_MATCHED = ("label", "db_role", "os_user")  # what --actor compares (letter case aside)


def _actor_patterns(name: str) -> dict[str, str]:
    """LIKE patterns finding `"key":"name"` in an actor's canonical text."""
    from json.encoder import encode_basestring

    quoted = _like_escaped(encode_basestring(name))  # as RFC 8785 writes the string
    return {f"actor_{key}": f'%"{key}":{quoted}%' for key in ACTOR_MATCHED}


def _like_escaped(text: str) -> str:
    """`text` matched literally by a LIKE pattern with escape character backslash."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def decision_actors(conn: Connection, rows: list[RoundRow]) -> dict[tuple[str, int], str | None]:
    """The stored actor text of each round's decision event, by (run, round); None for a
    decision from before actors were recorded. One query per 200 runs."""
    wanted = {(r.run_id, r.recorded_at): r.round for r in rows}
    found: dict[tuple[str, int], str | None] = {}
    run_ids = sorted({r.run_id for r in rows})
    for start in range(0, len(run_ids), 200):
        chunk = run_ids[start : start + 200]
        for run_id, at, actor in conn.execute(_DECISION_ACTORS, {"runs": chunk}):
            number = wanted.get((run_id, at))
            if number is not None:
                found[(run_id, number)] = actor
    return found


_DECISION_ACTORS = select(events.c.stream_id, events.c.recorded_at, events.c.actor).where(
    events.c.stream_id.in_(bindparam("runs", expanding=True)),
    events.c.event_type == "RoundDecided",
)


# (filter field, how it compares); a query's shape is which of them are set.
_ROUND_FILTERS = (
    ("run_id", lambda v: rounds.c.run_id == v),
    ("op_name", lambda v: rounds.c.op_name == v),
    ("soc", lambda v: rounds.c.soc == v),
    ("decision", lambda v: rounds.c.decision == v),
    ("mechanism", lambda v: rounds.c.mechanism == v),
    ("bottleneck", lambda v: rounds.c.bottleneck == v),
    ("since", lambda v: rounds.c.recorded_at >= v),
    ("until", lambda v: rounds.c.recorded_at < v),
    (
        "search",
        lambda v: rounds.c.hypothesis.ilike(v, escape="\\") | rounds.c.change.ilike(v, escape="\\"),
    ),
    ("actor", _recorded_by),
    ("session", lambda v: rounds.c.session_id == v),
)


def rounds_query(f: RoundFilter) -> tuple[Any, dict[str, Any]]:
    """The SELECT behind `query_rounds` and its parameter values (the benchmarks also run it
    without indexes). One statement per combination of filters, built once: a history query
    then costs SQLAlchemy no statement building or cache-key work, only the query itself."""
    values: dict[str, Any] = {}
    for name, _ in _ROUND_FILTERS:
        value = getattr(f, name)
        if value is not None and (name != "search" or value):
            values[name] = value
    if "actor" in values:
        values.update(_actor_patterns(values.pop("actor")))
        shape_extra = {"actor"}
    else:
        shape_extra = set()
    if "search" in values:
        values["search"] = f"%{_like_escaped(values['search'])}%"
    if f.after is not None:
        values["after_at"], values["after_run"], values["after_round"] = f.after
    if f.limit is not None:
        values["limit"] = f.limit
    return _rounds_statement(frozenset(values) | shape_extra), values


@functools.cache
def _rounds_statement(shape: frozenset[str]):
    query = select(*ROUND_COLUMNS)
    for name, condition in _ROUND_FILTERS:
        if name in shape:
            query = query.where(condition(bindparam(name)))
    if "after_at" in shape:  # the next page: rows after this one in the query's order
        query = query.where(
            tuple_(rounds.c.recorded_at, rounds.c.run_id, rounds.c.round)
            > tuple_(bindparam("after_at"), bindparam("after_run"), bindparam("after_round"))
        )
    query = query.order_by(rounds.c.recorded_at, rounds.c.run_id, rounds.c.round)
    if "limit" in shape:
        query = query.limit(bindparam("limit"))
    return query


_WITH_BOTTLENECK = (
    select(*ROUND_COLUMNS)
    .where(rounds.c.bottleneck == bindparam("bottleneck"))
    .order_by(rounds.c.recorded_at.desc())
    .limit(bindparam("n"))
)


_ALL_RUNS = select(*(runs.c[name] for name in RunRow.__slots__)).order_by(runs.c.planned_at)


def list_runs(conn: Connection) -> list[RunRow]:
    return [RunRow(*r) for r in conn.execute(_ALL_RUNS)]


def rounds_with_bottleneck(conn: Connection, bottleneck: str, limit: int) -> list[RoundRow]:
    """The newest rounds whose starting profile had this bottleneck class (indexed)."""
    sql, params = driver_sql(conn, _WITH_BOTTLENECK, {"bottleneck": bottleneck, "n": limit})
    return fetch_rounds(conn, sql, params)
