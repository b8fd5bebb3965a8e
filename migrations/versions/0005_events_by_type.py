"""Events by type within a run: `record` reads only the few events its decision needs.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

`record` used to read and validate every evidence event of its run before deciding, so
its cost grew with the run's length (a run of 2,000 rounds: 150-300 ms a record). With
(stream_id, event_type, stream_version) it finds the events it needs (the plan, the best
round's measurements, diagnoses, remeasures) from the index alone: a few lookups, whatever
the run's length. Plain CREATE INDEX: no table is rebuilt, on SQLite or PostgreSQL.
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_events_stream_id_event_type_stream_version",
        "events",
        ["stream_id", "event_type", "stream_version"],
    )


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
