"""SQLAlchemy tables. Alembic revisions in migrations/ create them; tests prove they agree.

Every constraint and index has a name, so migrations can refer to it on every backend.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

ledger_info = Table(
    "ledger_info",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

events = Table(
    "events",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=False),
    Column("event_id", String(36), nullable=False),
    Column("stream_id", String(256), nullable=False),
    Column("stream_version", Integer, nullable=False),
    Column("event_type", String(64), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("parent_hash", String(64), nullable=False),
    Column("event_hash", String(64), nullable=False),
    Column("actor", Text),  # 0009: who appended it (ledger/core/actors.py); None before
    UniqueConstraint("event_id"),
    UniqueConstraint("stream_id", "stream_version"),
    Index(None, "stream_id", "event_type", "stream_version"),  # 0005: record's reads by type
    Index(None, "stream_id", "event_type", "recorded_at", "actor"),  # 0009: a decision's actor
    CheckConstraint("seq >= 1", name="seq_positive"),
    CheckConstraint("stream_version >= 1", name="version_positive"),
)

blobs = Table(
    "blobs",
    metadata,
    Column("sha256", String(64), primary_key=True),
    Column("size", Integer, nullable=False),
    Column("content", LargeBinary, nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("run_id", String(256), primary_key=True),
    Column("parent_run_id", String(256)),
    Column("op_name", String(256), nullable=False),
    Column("soc", String(256), nullable=False),
    Column("status", String(16), nullable=False),
    Column("conclusion", String(16)),
    Column("original_kernel_sha256", String(64), nullable=False),
    Column("best_kernel_sha256", String(64), nullable=False),
    Column("best_kernel_path", Text, nullable=False),
    Column("best_round", Integer, nullable=False),
    Column("target_relative_improvement", Float(53), nullable=False),
    Column("min_relative_improvement", Float(53), nullable=False),
    Column("noise_floor", Float(53), nullable=False),
    Column("max_case_regression", Float(53), nullable=False),
    Column("max_rounds", Integer, nullable=False),
    Column("max_consecutive_failures", Integer, nullable=False),
    Column("rounds_recorded", Integer, nullable=False),
    Column("kept_rounds", Integer, nullable=False),
    Column("consecutive_failures", Integer, nullable=False),
    Column("cumulative_improvement", Float(53), nullable=False),
    Column("target_met", Boolean(create_constraint=False), nullable=False),
    Column("needs_diagnosis", Boolean(create_constraint=False), nullable=False),
    Column("remaining_rounds", Integer, nullable=False),
    Column("stream_version", Integer, nullable=False),
    Column("planned_at", String(40), nullable=False),
    Column("updated_at", String(40), nullable=False),
    Column("concluded_at", String(40)),
    Column("bottleneck_model", String(64)),
    Index(None, "op_name"),
)

run_cases = Table(
    "run_cases",
    metadata,
    Column("run_id", String(256), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("case_id", String(256), nullable=False),
    Column("weight", Float(53), nullable=False),
    Column("baseline_median_us", Float(53)),
    Column("best_median_us", Float(53)),
)

rounds = Table(
    "rounds",
    metadata,
    Column("run_id", String(256), primary_key=True),
    Column("round", Integer, primary_key=True),
    Column("op_name", String(256), nullable=False),
    Column("soc", String(256), nullable=False),
    Column("decision", String(16), nullable=False),
    Column("hypothesis", Text, nullable=False),
    Column("change", Text, nullable=False),
    Column("mechanism", String(256)),
    Column("candidate_sha256", String(64), nullable=False),
    Column("candidate_path", Text, nullable=False),
    Column("parent_kernel_sha256", String(64), nullable=False),
    Column("validation_status", String(16), nullable=False),
    Column("relative_improvement", Float(53)),
    Column("worst_case_regression", Float(53)),
    Column("cumulative_improvement", Float(53), nullable=False),
    Column("best_kernel_sha256", String(64), nullable=False),
    Column("consecutive_failures", Integer, nullable=False),
    Column("target_met", Boolean(create_constraint=False), nullable=False),
    Column("needs_diagnosis", Boolean(create_constraint=False), nullable=False),
    Column("remaining_rounds", Integer, nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Column("bottleneck", String(64)),
    Column("mechanism_confirmed", Boolean(create_constraint=False)),
    Column("flags", Text),
    Column("start_signals", Text),
    Column("session_id", String(256)),  # the candidate's measurement session: 0010
    # history's filters; each ends with the query's order, (recorded_at, run_id, round): 0006
    Index(None, "op_name", "recorded_at", "run_id", "round"),
    Index(None, "op_name", "decision", "recorded_at", "run_id", "round"),
    Index(None, "decision", "recorded_at", "run_id", "round"),
    Index(None, "recorded_at", "run_id", "round"),
    Index(None, "bottleneck", "recorded_at", "run_id", "round"),
    Index(None, "mechanism", "recorded_at", "run_id", "round"),
    Index(None, "soc", "recorded_at", "run_id", "round"),
    # a filter together with --decision: 0007
    Index(None, "soc", "decision", "recorded_at", "run_id", "round"),
    Index(None, "mechanism", "decision", "recorded_at", "run_id", "round"),
    Index(None, "bottleneck", "decision", "recorded_at", "run_id", "round"),
    # history --session: 0010
    Index(None, "session_id", "recorded_at", "run_id", "round"),
)

profiles = Table(
    "profiles",
    metadata,
    Column("run_id", String(256), primary_key=True),
    Column("stream_version", Integer, primary_key=True),
    Column("op_name", String(256), nullable=False),
    Column("soc", String(256), nullable=False),
    Column("kernel_sha256", String(64), nullable=False),
    Column("subject", String(16), nullable=False),
    Column("round", Integer),
    Column("format", String(32), nullable=False),
    Column("bottleneck", String(64)),
    Column("signals", Text, nullable=False),
    Column("recorded_at", String(40), nullable=False),
    Index(None, "bottleneck"),
    Index(None, "kernel_sha256"),
)

checkpoints = Table(
    "checkpoints",
    metadata,
    Column("checkpoint_id", Integer, primary_key=True, autoincrement=False),
    Column("origin", Text, nullable=False),
    Column("tree_size", Integer, nullable=False),
    Column("root_hash", String(44), nullable=False),
    Column("note", Text, nullable=False),
    Column("signed", Boolean(create_constraint=False), nullable=False),
    Column("created_at", String(40), nullable=False),
    CheckConstraint("tree_size >= 0", name="size_not_negative"),
    Index(None, "tree_size"),
)

PROJECTION_TABLES = (runs, run_cases, rounds, profiles)
