"""Profiles projection; bottleneck, mechanism check and flags on rounds; diagnosis on runs.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rounds") as batch:
        batch.add_column(sa.Column("bottleneck", sa.String(64)))
        batch.add_column(sa.Column("mechanism_confirmed", sa.Boolean(create_constraint=False)))
        batch.add_column(sa.Column("flags", sa.Text()))
        batch.add_column(sa.Column("start_signals", sa.Text()))
    op.create_index("ix_rounds_bottleneck_recorded_at", "rounds", ["bottleneck", "recorded_at"])
    op.create_index("ix_rounds_mechanism", "rounds", ["mechanism"])
    op.create_index("ix_rounds_soc", "rounds", ["soc"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("bottleneck_model", sa.String(64)))
    op.create_table(
        "profiles",
        sa.Column("run_id", sa.String(256), nullable=False),
        sa.Column("stream_version", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(256), nullable=False),
        sa.Column("soc", sa.String(256), nullable=False),
        sa.Column("kernel_sha256", sa.String(64), nullable=False),
        sa.Column("subject", sa.String(16), nullable=False),
        sa.Column("round", sa.Integer()),
        sa.Column("format", sa.String(32), nullable=False),
        sa.Column("bottleneck", sa.String(64)),
        sa.Column("signals", sa.Text(), nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "stream_version", name="pk_profiles"),
    )
    op.create_index("ix_profiles_bottleneck", "profiles", ["bottleneck"])
    op.create_index("ix_profiles_kernel_sha256", "profiles", ["kernel_sha256"])


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
