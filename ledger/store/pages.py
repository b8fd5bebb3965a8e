"""Pages of the ledger for the read-only web view: runs by filter, one run's events in
order, the latest profiles. Keyset pagination (after the last key shown), so a page costs
the same at the end of a large ledger as at its start."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from ledger.core.projections import RunRow
from ledger.store.eventstore import EVENT_COLUMNS, StoredEvent, _stored
from ledger.store.tables import events, profiles, runs


def runs_page(
    conn: Connection,
    *,
    op: str | None,
    soc: str | None,
    status: str | None,
    after: str | None,
    limit: int,
) -> list[RunRow]:
    """Up to `limit` runs in run-id order after `after`; `status` is "open", "concluded" or
    a conclusion."""
    query = select(runs)
    if op:
        query = query.where(runs.c.op_name == op)
    if soc:
        query = query.where(runs.c.soc == soc)
    if status == "open":
        query = query.where(runs.c.conclusion.is_(None))
    elif status == "concluded":
        query = query.where(runs.c.conclusion.is_not(None))
    elif status:
        query = query.where(runs.c.conclusion == status)
    if after:
        query = query.where(runs.c.run_id > after)
    query = query.order_by(runs.c.run_id).limit(limit)
    return [RunRow(**r) for r in conn.execute(query).mappings()]


def events_page(conn: Connection, run_id: str, after: int, limit: int) -> list[StoredEvent]:
    """Up to `limit` of a run's events after stream version `after`, in order."""
    query = (
        select(*EVENT_COLUMNS)
        .where(events.c.stream_id == run_id, events.c.stream_version > after)
        .order_by(events.c.stream_version)
        .limit(limit)
    )
    return [_stored(r) for r in conn.execute(query)]


def latest_profiles(conn: Connection, limit: int) -> list[dict[str, Any]]:
    """The most recently recorded profiles: run, version, subject, round and bottleneck."""
    query = (
        select(
            profiles.c.run_id,
            profiles.c.stream_version,
            profiles.c.subject,
            profiles.c.round,
            profiles.c.bottleneck,
        )
        .order_by(profiles.c.recorded_at.desc(), profiles.c.run_id, profiles.c.stream_version)
        .limit(limit)
    )
    return [dict(r) for r in conn.execute(query).mappings()]
