"""History indexes for a filter and a decision together: `--soc`, `--mechanism` or
`--bottleneck` with `--decision`.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

`history --soc S --decision FAIL --limit 50` walked the soc index in time order and read
the table row of every round on that SoC to keep the failed ones: with one round in ten
failing, ~500 row reads for 50 rows (at 1,000,000 events, barely 100x faster than reading
the whole table). (op_name, decision, …) has served `--op O --decision D` since 0004; the
same shape now serves the other three filters that are asked together with a decision
("which NUM_STAGES changes were kept", "what failed on this SoC", "what worked against
this bottleneck"). Each index ends with the query's order, as in 0006. Plain CREATE INDEX:
no table is rebuilt, on SQLite or PostgreSQL.
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for column in ("soc", "mechanism", "bottleneck"):
        columns = [column, "decision", "recorded_at", "run_id", "round"]
        op.create_index(f"ix_rounds_{'_'.join(columns)}", "rounds", columns)


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
