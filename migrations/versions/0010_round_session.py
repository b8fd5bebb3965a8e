"""The session a round's candidate was measured in, on its `rounds` row: `history --session`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02

A measurement set may name its `session` (id, device, host, start; docs/statistics.md); the
candidate's is on its MeasurementsRecorded event, whose payload carries the samples too.
`rounds.session_id` holds that session's id (NULL where the round named none, or was never
measured), and an index on (session_id, recorded_at, run_id, round) answers
`history --session ID` in the query's order, as the other filters' indexes do (0006). The
column is added in place and filled from the stored events (the candidate's
MeasurementsRecorded of each round), as the projection fold fills it from now on, so
`db rebuild-projections` gives the same rows. No event is touched.
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ["session_id", "recorded_at", "run_id", "round"]


def upgrade() -> None:
    op.add_column("rounds", sa.Column("session_id", sa.String(256)))
    op.create_index(f"ix_rounds_{'_'.join(COLUMNS)}", "rounds", COLUMNS)
    conn = op.get_bind()
    found = conn.execute(
        sa.text("SELECT stream_id, payload FROM events WHERE event_type = 'MeasurementsRecorded'")
    )
    sessions = {}
    for stream_id, payload in found:
        value = json.loads(bytes(payload))
        session = value.get("session")
        if value.get("role") == "candidate" and isinstance(session, dict) and session.get("id"):
            sessions[(stream_id, value["round"])] = session["id"]
    update = sa.text(
        "UPDATE rounds SET session_id = :session WHERE run_id = :run AND round = :round"
    )
    for (run, round_no), session in sorted(sessions.items()):
        conn.execute(update, {"session": session, "run": run, "round": round_no})


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
