"""target_met is decided after a round, never at plan: the stored rows follow.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

SPEC 3 computes `target_met` after every round, and the JSON-file controller starts every
run with it false. Until now the plan's projection row said a target of 0 was met before
any round, so `status` showed it met and `analyze` straight after `plan` concluded
`passed` where the controller concludes `inconclusive`. The fold now starts every run with
`target_met` false; this revision brings the stored rows of runs planned before it to what
the fold gives: a run with no round recorded and no conclusion recorded.

A run that was analyzed before its first round keeps its row: its `RunConcluded` event
recorded `target_met`, and the fold takes it from there (`verify` accepts such a
conclusion as recorded under the earlier rule). Data only: no table changes.
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        sa.text(
            "UPDATE runs SET target_met = :no WHERE target_met = :yes AND rounds_recorded = 0 "
            "AND NOT EXISTS (SELECT 1 FROM events WHERE events.stream_id = runs.run_id "
            "AND events.event_type = 'RunConcluded')"
        ).bindparams(yes=True, no=False)
    )


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
