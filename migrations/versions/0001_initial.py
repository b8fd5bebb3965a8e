"""The event log, content-addressed blobs and the projections; append-only triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

This revision is frozen: it spells out its tables instead of importing ledger.store.tables,
so later changes to the models cannot change what it creates.
"""

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

APPEND_ONLY = ("events", "blobs")

SQLITE_TRIGGERS = [
    """CREATE TRIGGER {t}_refuse_update BEFORE UPDATE ON {t}
       BEGIN SELECT RAISE(ABORT, 'kernel-ledger: {t} are append-only; UPDATE refused'); END""",
    """CREATE TRIGGER {t}_refuse_delete BEFORE DELETE ON {t}
       BEGIN SELECT RAISE(ABORT, 'kernel-ledger: {t} are append-only; DELETE refused'); END""",
]
SQLITE_REPLACE_GUARD = {
    "events": """CREATE TRIGGER events_refuse_replace BEFORE INSERT ON events
       WHEN EXISTS (SELECT 1 FROM events WHERE seq = NEW.seq)
         OR EXISTS (SELECT 1 FROM events WHERE event_id = NEW.event_id)
         OR EXISTS (SELECT 1 FROM events
                    WHERE stream_id = NEW.stream_id AND stream_version = NEW.stream_version)
       BEGIN SELECT RAISE(ABORT,
         'kernel-ledger: an event with this seq, event_id or stream version already exists');
       END""",
    "blobs": """CREATE TRIGGER blobs_refuse_replace BEFORE INSERT ON blobs
       WHEN EXISTS (SELECT 1 FROM blobs WHERE sha256 = NEW.sha256)
       BEGIN SELECT RAISE(ABORT, 'kernel-ledger: this blob already exists'); END""",
}

PG_FUNCTION = """
CREATE FUNCTION ledger_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'kernel-ledger: % is append-only; % refused', TG_TABLE_NAME, TG_OP
    USING ERRCODE = 'insufficient_privilege';
END
$$
"""


def _triggers() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in APPEND_ONLY:
            for statement in SQLITE_TRIGGERS:
                op.execute(statement.format(t=table))
            op.execute(SQLITE_REPLACE_GUARD[table])
    elif dialect == "postgresql":
        op.execute(PG_FUNCTION)
        for table in APPEND_ONLY:
            op.execute(
                f"CREATE TRIGGER {table}_refuse_change BEFORE UPDATE OR DELETE ON {table} "
                "FOR EACH ROW EXECUTE FUNCTION ledger_refuse_change()"
            )
            op.execute(
                f"CREATE TRIGGER {table}_refuse_truncate BEFORE TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION ledger_refuse_change()"
            )
            op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_refuse_change")
            op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {table}_refuse_truncate")
    else:
        raise RuntimeError(f"kernel-ledger supports SQLite and PostgreSQL, not {dialect}")


def upgrade() -> None:
    info = op.create_table(
        "ledger_info",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_ledger_info"),
    )
    op.create_table(
        "events",
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("event_id", sa.String(36), nullable=False),
        sa.Column("stream_id", sa.String(256), nullable=False),
        sa.Column("stream_version", sa.Integer(), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("schema_version", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("parent_hash", sa.String(64), nullable=False),
        sa.Column("event_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_events"),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint(
            "stream_id", "stream_version", name="uq_events_stream_id_stream_version"
        ),
        sa.CheckConstraint("seq >= 1", name="ck_events_seq_positive"),
        sa.CheckConstraint("stream_version >= 1", name="ck_events_version_positive"),
    )
    op.create_table(
        "blobs",
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name="pk_blobs"),
    )
    op.create_table(
        "runs",
        sa.Column("run_id", sa.String(256), nullable=False),
        sa.Column("parent_run_id", sa.String(256)),
        sa.Column("op_name", sa.String(256), nullable=False),
        sa.Column("soc", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("conclusion", sa.String(16)),
        sa.Column("original_kernel_sha256", sa.String(64), nullable=False),
        sa.Column("best_kernel_sha256", sa.String(64), nullable=False),
        sa.Column("best_kernel_path", sa.Text(), nullable=False),
        sa.Column("best_round", sa.Integer(), nullable=False),
        sa.Column("target_relative_improvement", sa.Float(53), nullable=False),
        sa.Column("min_relative_improvement", sa.Float(53), nullable=False),
        sa.Column("noise_floor", sa.Float(53), nullable=False),
        sa.Column("max_case_regression", sa.Float(53), nullable=False),
        sa.Column("max_rounds", sa.Integer(), nullable=False),
        sa.Column("max_consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("rounds_recorded", sa.Integer(), nullable=False),
        sa.Column("kept_rounds", sa.Integer(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("cumulative_improvement", sa.Float(53), nullable=False),
        sa.Column("target_met", sa.Boolean(create_constraint=False), nullable=False),
        sa.Column("needs_diagnosis", sa.Boolean(create_constraint=False), nullable=False),
        sa.Column("remaining_rounds", sa.Integer(), nullable=False),
        sa.Column("stream_version", sa.Integer(), nullable=False),
        sa.Column("planned_at", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.String(40), nullable=False),
        sa.Column("concluded_at", sa.String(40)),
        sa.PrimaryKeyConstraint("run_id", name="pk_runs"),
    )
    op.create_index("ix_runs_op_name", "runs", ["op_name"])
    op.create_table(
        "run_cases",
        sa.Column("run_id", sa.String(256), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("case_id", sa.String(256), nullable=False),
        sa.Column("weight", sa.Float(53), nullable=False),
        sa.Column("baseline_median_us", sa.Float(53)),
        sa.Column("best_median_us", sa.Float(53)),
        sa.PrimaryKeyConstraint("run_id", "position", name="pk_run_cases"),
    )
    op.create_table(
        "rounds",
        sa.Column("run_id", sa.String(256), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("op_name", sa.String(256), nullable=False),
        sa.Column("soc", sa.String(256), nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("hypothesis", sa.Text(), nullable=False),
        sa.Column("change", sa.Text(), nullable=False),
        sa.Column("mechanism", sa.String(256)),
        sa.Column("candidate_sha256", sa.String(64), nullable=False),
        sa.Column("candidate_path", sa.Text(), nullable=False),
        sa.Column("parent_kernel_sha256", sa.String(64), nullable=False),
        sa.Column("validation_status", sa.String(16), nullable=False),
        sa.Column("relative_improvement", sa.Float(53)),
        sa.Column("worst_case_regression", sa.Float(53)),
        sa.Column("cumulative_improvement", sa.Float(53), nullable=False),
        sa.Column("best_kernel_sha256", sa.String(64), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), nullable=False),
        sa.Column("target_met", sa.Boolean(create_constraint=False), nullable=False),
        sa.Column("needs_diagnosis", sa.Boolean(create_constraint=False), nullable=False),
        sa.Column("remaining_rounds", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "round", name="pk_rounds"),
    )
    op.create_index("ix_rounds_op_name_recorded_at", "rounds", ["op_name", "recorded_at"])
    op.create_index("ix_rounds_decision_recorded_at", "rounds", ["decision", "recorded_at"])
    op.create_index("ix_rounds_recorded_at", "rounds", ["recorded_at"])
    _triggers()
    op.bulk_insert(info, [{"key": "ledger_id", "value": str(uuid.uuid4())}])


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
