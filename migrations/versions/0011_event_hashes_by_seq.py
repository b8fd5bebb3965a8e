"""The event hashes in seq order, apart from the rows: what `verify --since` reads.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02

`verify --since` proves the events a checkpoint note covers by rebuilding the Merkle tree of
every stored event hash. Read from the events table, those 32 bytes an event cost a walk
over every page of every row, payloads included (about 2 KB an event): on a ledger of a
million events, reading the hashes took longer than hashing them. With (seq, event_hash)
the hashes are read from the index alone, a few dozen bytes an event. Plain CREATE INDEX:
no table is rebuilt, on SQLite or PostgreSQL.
"""

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_seq_event_hash", "events", ["seq", "event_hash"])


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
