"""History indexes: filters on mechanism, target, and op with decision read `rounds` in time
order.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

`history --mechanism M --limit N` (and `--soc S`) found every matching round through a
one-column index and then sorted them all by time; with the time as the index's second
column the query reads the matches in time order and stops after N. `--op O --decision D`
walked every round with decision D and kept those of op O (one in sixteen on a ledger of
sixteen ops); (op_name, decision, recorded_at) goes straight to them.
Plain CREATE/DROP INDEX: no table is rebuilt, on SQLite or PostgreSQL.
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_rounds_mechanism_recorded_at", "rounds", ["mechanism", "recorded_at"])
    op.drop_index("ix_rounds_mechanism", table_name="rounds")
    op.create_index("ix_rounds_soc_recorded_at", "rounds", ["soc", "recorded_at"])
    op.drop_index("ix_rounds_soc", table_name="rounds")
    op.create_index(
        "ix_rounds_op_name_decision_recorded_at", "rounds", ["op_name", "decision", "recorded_at"]
    )


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
