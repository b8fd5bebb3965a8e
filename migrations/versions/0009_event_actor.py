"""Every event records who appended it: the `actor` column, hashed in its envelope.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02

`events.actor` holds the RFC 8785 text of the actor object (ledger/core/actors.py) of each
event appended from now on; the events already stored keep NULL, which hashes as they always
did (the envelope has no `actor` key at all), so every event byte and hash is untouched.
The column is added in place (`ALTER TABLE ... ADD COLUMN`): no table is rebuilt, and the
append-only triggers stay as they are.

An index on (stream_id, event_type, recorded_at, actor) finds the decision event of a
`rounds` row and its actor from the index alone (`history` names it, and `history --actor`
compares it for every round it reads: about 90 ms over the 22,740 rounds of a
100,000-event ledger when none matches, against 0.7 to 2.5 s when each actor is read from its
row, behind the payload).

On PostgreSQL the role is the database's word, not the client's: a row trigger refuses an
event whose actor does not name `current_user` as its `db_role` (the writer reads
`current_user` in the same transaction before it hashes the event, so what it hashes is
what the database accepts). The role that owns the ledger's tables, which can alter them
anyway, may write any actor or none: `db copy` and `import` carry events and their actors
verbatim. The trigger is ENABLE ALWAYS, as the append-only ones are.
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

PG_FUNCTION = """
CREATE FUNCTION ledger_actor_is_current_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.actor IS NOT NULL AND (NEW.actor::jsonb ->> 'db_role') = current_user::text THEN
        RETURN NEW;
    END IF;
    IF pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE oid = TG_RELID), 'USAGE')
    THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'kernel-ledger: role % may append only events whose actor names it as '
        'db_role, not %', current_user, coalesce(NEW.actor, 'no actor')
        USING ERRCODE = 'insufficient_privilege';
END $$
"""


def upgrade() -> None:
    op.add_column("events", sa.Column("actor", sa.Text()))
    op.create_index(
        "ix_events_stream_id_event_type_recorded_at_actor",
        "events",
        ["stream_id", "event_type", "recorded_at", "actor"],
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        op.execute(
            "CREATE TRIGGER events_actor_is_current_user BEFORE INSERT ON events "
            "FOR EACH ROW EXECUTE FUNCTION ledger_actor_is_current_user()"
        )
        op.execute("ALTER TABLE events ENABLE ALWAYS TRIGGER events_actor_is_current_user")


def downgrade() -> None:
    raise RuntimeError("kernel-ledger never downgrades: events are kept forever")
