"""History indexes end with the table's key: a filtered query reads its rows in the exact
order it returns them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

`history` orders rounds by (recorded_at, run_id, round). The indexes of 0001, 0002 and
0004 end at recorded_at, so SQLite still sorted every group of equal times with a
temporary B-tree ("USE TEMP B-TREE FOR RIGHT PART OF ORDER BY") and PostgreSQL added an
incremental sort; at 1,000,000 events that sort was more than half of a 50-row
`history --mechanism M --limit 50`. With run_id and round appended, each index yields the
rows in the final order and the query stops after --limit rows. Plain DROP/CREATE INDEX:
no table is rebuilt, on SQLite or PostgreSQL.
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# (filter columns before recorded_at) of every history index on rounds
_PREFIXES = (
    (),
    ("op_name",),
    ("op_name", "decision"),
    ("decision",),
    ("bottleneck",),
    ("mechanism",),
    ("soc",),
)


def upgrade() -> None:
    for prefix in _PREFIXES:
        old = [*prefix, "recorded_at"]
        op.drop_index(f"ix_rounds_{'_'.join(old)}", table_name="rounds")
        new = [*old, "run_id", "round"]
        op.create_index(f"ix_rounds_{'_'.join(new)}", "rounds", new)


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
