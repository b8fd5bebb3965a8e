"""What the replay verifier asks of the storage itself, beyond the events' bytes: that every
column holds the storage type the ledger writes, and that every blob's size is its length.

On SQLite any column can hold any value; a row rewritten with another storage type (a
payload stored as text, say) would read back looking right and hide the rewrite. PostgreSQL
enforces the column types, so there the type checks are empty."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

# the storage type (SQLite's typeof) of each events column as the ledger writes it
SQLITE_EVENT_TYPES = {
    "event_id": "text",
    "stream_id": "text",
    "stream_version": "integer",
    "event_type": "text",
    "schema_version": "integer",
    "recorded_at": "text",
    "payload": "blob",
    "parent_hash": "text",
    "event_hash": "text",
    "actor": "text",  # or null: an event from before actors were recorded
}
NULLABLE = frozenset({"actor"})


def first_mistyped_event(
    conn: Connection, dialect: str, run_id: str | None, after_seq: int = 0
) -> tuple[int, str, int, str, str] | None:
    """The first event (in seq order, after `after_seq`; of one run when `run_id` is given)
    with a column of
    another storage type than the ledger writes: (seq, stream_id, stream_version, column,
    the type found). None on PostgreSQL."""
    if dialect != "sqlite":
        return None
    wrong = " OR ".join(
        f"typeof({c}) NOT IN ('{t}', 'null')" if c in NULLABLE else f"typeof({c}) != '{t}'"
        for c, t in SQLITE_EVENT_TYPES.items()
    )
    kinds = ", ".join(f"typeof({c})" for c in SQLITE_EVENT_TYPES)
    where = f"({wrong}) AND seq > :after" + (" AND stream_id = :run" if run_id is not None else "")
    params: dict[str, Any] = {"after": after_seq}
    if run_id is not None:
        params["run"] = run_id
    row = conn.execute(
        text(
            f"SELECT seq, stream_id, stream_version, {kinds} FROM events WHERE {where} "
            "ORDER BY seq LIMIT 1"
        ),
        params,
    ).first()
    if row is None:
        return None
    found = dict(zip(SQLITE_EVENT_TYPES, row[3:], strict=True))
    column = next(
        c
        for c, t in SQLITE_EVENT_TYPES.items()
        if found[c] != t and not (c in NULLABLE and found[c] == "null")
    )
    return row[0], str(row[1]), row[2], column, str(found[column])


def first_misstated_blob(conn: Connection, dialect: str) -> str | None:
    """The key of the first blob whose stored size is not its content's length (or, on
    SQLite, whose content or size is stored as another type); None when every blob holds."""
    wrong = (
        "typeof(content) != 'blob' OR typeof(size) != 'integer' OR " if dialect == "sqlite" else ""
    )
    row = conn.execute(
        text(
            f"SELECT sha256 FROM blobs WHERE {wrong}size != length(content) ORDER BY sha256 LIMIT 1"
        )
    ).first()
    return None if row is None else str(row[0])
