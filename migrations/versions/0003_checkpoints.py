"""Checkpoints: the tree heads `kernel-ledger checkpoint` printed, kept append-only.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Frozen like the revisions before it: the table is spelled out here. Stored checkpoints are
re-checked by `verify`; like events, they can be added but never changed or removed.
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

SQLITE_TRIGGERS = (
    """CREATE TRIGGER checkpoints_refuse_update BEFORE UPDATE ON checkpoints
       BEGIN SELECT RAISE(ABORT, 'kernel-ledger: checkpoints are append-only; UPDATE refused');
       END""",
    """CREATE TRIGGER checkpoints_refuse_delete BEFORE DELETE ON checkpoints
       BEGIN SELECT RAISE(ABORT, 'kernel-ledger: checkpoints are append-only; DELETE refused');
       END""",
    """CREATE TRIGGER checkpoints_refuse_replace BEFORE INSERT ON checkpoints
       WHEN EXISTS (SELECT 1 FROM checkpoints WHERE checkpoint_id = NEW.checkpoint_id)
       BEGIN SELECT RAISE(ABORT, 'kernel-ledger: this checkpoint already exists'); END""",
)

# ledger_refuse_change() was created by revision 0001.
PG_TRIGGERS = (
    "CREATE TRIGGER checkpoints_refuse_change BEFORE UPDATE OR DELETE ON checkpoints "
    "FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change()",
    "CREATE TRIGGER checkpoints_refuse_truncate BEFORE TRUNCATE ON checkpoints "
    "FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change()",
    "ALTER TABLE checkpoints ENABLE ALWAYS TRIGGER checkpoints_refuse_change",
    "ALTER TABLE checkpoints ENABLE ALWAYS TRIGGER checkpoints_refuse_truncate",
)


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("checkpoint_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("origin", sa.Text(), nullable=False),
        sa.Column("tree_size", sa.Integer(), nullable=False),
        sa.Column("root_hash", sa.String(44), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("signed", sa.Boolean(create_constraint=False), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("checkpoint_id", name="pk_checkpoints"),
        sa.CheckConstraint("tree_size >= 0", name="ck_checkpoints_size_not_negative"),
    )
    op.create_index("ix_checkpoints_tree_size", "checkpoints", ["tree_size"])
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        statements = SQLITE_TRIGGERS
    elif dialect == "postgresql":
        statements = PG_TRIGGERS
    else:
        raise RuntimeError(f"kernel-ledger supports SQLite and PostgreSQL, not {dialect}")
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
