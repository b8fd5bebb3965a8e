"""The store's half of `db copy`: the tables of recorded facts, copied row for row between
two ledgers, and the blobs, inserted a page at a time. The verified part (each event checked,
written through `Store.write`, the projections folded again) is ledger/integrity/copy.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection, Table, func, select
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from ledger.errors import CheckFailed
from ledger.store.sqlitefile import ledger_file
from ledger.store.tables import PROJECTION_TABLES, blobs, ledger_info, metadata

# copied by the caller: events through the one writer, blobs a page at a time
STREAMED = ("events", "blobs")


def recorded_tables() -> list[Table]:
    """Every table but the projections: recorded facts, copied row for row."""
    derived = {t.name for t in PROJECTION_TABLES}
    return [t for t in metadata.sorted_tables if t.name not in derived]


def sqlite_file(url: str) -> Path | None:
    """The file a sqlite:// URL names (absolute); None for other URLs and in-memory ones."""
    try:
        parsed = make_url(url)
    except sa_exc.ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite":
        return None
    path = ledger_file(parsed)
    return None if path is None else path.resolve()


def held_rows(conn: Connection) -> dict[str, int]:
    """Tables that hold rows, with their counts; ledger_info (the ledger's id) is not counted."""
    counts = {
        table.name: conn.execute(select(func.count()).select_from(table)).scalar_one()
        for table in metadata.sorted_tables
        if table.name != "ledger_info"
    }
    return {name: n for name, n in counts.items() if n}


def copy_recorded_facts(src: Connection, dst: Connection, shown_url: str) -> dict[str, int]:
    """Every recorded table but the streamed ones, row for row and read back; in ledger_info
    the source's rows (its ledger_id above all) replace the target's. Rows per table."""
    return {
        table.name: _copy_rows(src, dst, table, shown_url)
        for table in recorded_tables()
        if table.name not in STREAMED
    }


def _copy_rows(src: Connection, dst: Connection, table: Table, shown_url: str) -> int:
    order = list(table.primary_key.columns)
    rows = [_plain(r) for r in src.execute(select(table).order_by(*order)).mappings()]
    if table is ledger_info:
        dst.execute(ledger_info.delete())
    if rows:
        dst.execute(table.insert(), rows)
    back = [_plain(r) for r in dst.execute(select(table).order_by(*order)).mappings()]
    if back != rows:
        raise CheckFailed(
            f"table {table.name} in {shown_url} reads back differently from the "
            "source; nothing was written"
        )
    return len(rows)


def _plain(row) -> dict[str, object]:
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in row.items()}


def insert_blobs(dst: Connection, page: Sequence[tuple[str, bytes]]) -> None:
    """Blobs as they are stored: key, size and content (their hashes checked by the caller)."""
    if page:
        dst.execute(
            blobs.insert(),
            [{"sha256": sha, "size": len(content), "content": content} for sha, content in page],
        )
