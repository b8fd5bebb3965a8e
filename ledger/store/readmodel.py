"""The read model of the use cases: lookups beside the projection rows, each for one
caller in ledger/services/ (`record`'s evidence read, its answer to a retried round, the
explanations `history` shows), so that the recorder (`Store`) stays narrow.

A run's events by type go through the index (stream_id, event_type, stream_version): a few
lookups whatever the run's length."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, bindparam, select

from ledger.store.eventstore import EVENT_COLUMNS, StoredEvent, _stored
from ledger.store.tables import events, profiles, rounds


def type_versions(
    conn: Connection, stream_id: str, event_types: Sequence[str]
) -> list[tuple[int, str]]:
    """(stream_version, event_type) of the run's events of these types, in order."""
    # one equality lookup per type: with `IN (...)` SQLite walks the run's whole
    # (stream_id, stream_version) index instead, to return the rows in order
    found = [
        (version, kind)
        for kind in event_types
        for version in conn.execute(_TYPE_VERSIONS, {"stream": stream_id, "type": kind})
        .scalars()
        .all()
    ]
    return sorted(found)


def nth_version(conn: Connection, stream_id: str, event_type: str, n: int) -> int | None:
    """The stream version of the run's `n`-th event (1-based) of this type."""
    found = {"stream": stream_id, "type": event_type, "skip": n - 1}
    return conn.execute(_NTH_VERSION, found).scalar()


def last_version_before(
    conn: Connection, stream_id: str, event_type: str, before: int
) -> int | None:
    """The stream version of the run's last event of this type before version `before`."""
    found = {"stream": stream_id, "type": event_type, "before": before}
    return conn.execute(_LAST_VERSION_BEFORE, found).scalar()


def versions_after(conn: Connection, stream_id: str, event_type: str, after: int) -> list[int]:
    """The stream versions of the run's events of this type after version `after`."""
    found = {"stream": stream_id, "type": event_type, "after": after}
    return list(conn.execute(_VERSIONS_AFTER, found).scalars())


def failed_rounds(conn: Connection, run_id: str, first: int) -> set[int]:
    """The run's rounds from `first` on that were not kept and named a mechanism
    (`rounds` rows)."""
    return set(conn.execute(_FAILED_ROUNDS, {"run": run_id, "first": first}).scalars())


def candidate_rounds(conn: Connection, run_id: str, sha256: str) -> list[tuple[int, str, str]]:
    """(round, candidate sha256, decision) of the run's decided rounds whose candidate was
    this kernel (`rounds` rows), oldest first: `status` and `check-merge` on a best kernel
    submitted more than once (`projections.resubmissions`)."""
    rows = conn.execute(_CANDIDATE_ROUNDS, {"run": run_id, "sha256": sha256})
    return [(number, sha256, decision) for number, decision in rows]


def read_versions(conn: Connection, stream_id: str, versions: Iterable[int]) -> list[StoredEvent]:
    """The run's events at these stream versions, in version order."""
    wanted = sorted(set(versions))
    rows = conn.execute(_READ_VERSIONS, {"stream": stream_id, "versions": wanted})
    return [_stored(r) for r in rows]


def profile_versions(conn: Connection, run_id: str, kernel: str) -> list[int]:
    """The stream versions of every profile of this kernel in the run (`profiles` rows):
    a decision reads the latest of each case they profiled."""
    return list(conn.execute(_PROFILE_VERSIONS, {"run": run_id, "kernel": kernel}).scalars())


_OF_TYPE = (events.c.stream_id == bindparam("stream"), events.c.event_type == bindparam("type"))

_TYPE_VERSIONS = select(events.c.stream_version).where(*_OF_TYPE).order_by(events.c.stream_version)
_NTH_VERSION = (
    select(events.c.stream_version)
    .where(*_OF_TYPE)
    .order_by(events.c.stream_version)
    .limit(1)
    .offset(bindparam("skip"))
)
_LAST_VERSION_BEFORE = (
    select(events.c.stream_version)
    .where(*_OF_TYPE, events.c.stream_version < bindparam("before"))
    .order_by(events.c.stream_version.desc())
    .limit(1)
)
_VERSIONS_AFTER = (
    select(events.c.stream_version)
    .where(*_OF_TYPE, events.c.stream_version > bindparam("after"))
    .order_by(events.c.stream_version)
)
_FAILED_ROUNDS = select(rounds.c.round).where(
    rounds.c.run_id == bindparam("run"),
    rounds.c.round >= bindparam("first"),
    rounds.c.decision != "KEEP",
    rounds.c.mechanism.is_not(None),
)
_CANDIDATE_ROUNDS = (
    select(rounds.c.round, rounds.c.decision)
    .where(rounds.c.run_id == bindparam("run"), rounds.c.candidate_sha256 == bindparam("sha256"))
    .order_by(rounds.c.round)
)
_READ_VERSIONS = (
    select(*EVENT_COLUMNS)
    .where(
        events.c.stream_id == bindparam("stream"),
        events.c.stream_version.in_(bindparam("versions", expanding=True)),
    )
    .order_by(events.c.stream_version)
)
_PROFILE_VERSIONS = (
    select(profiles.c.stream_version)
    .where(profiles.c.run_id == bindparam("run"), profiles.c.kernel_sha256 == bindparam("kernel"))
    .order_by(profiles.c.stream_version)
)
