"""`verify --since NOTE` and `check-merge --since NOTE`: the first N events a checkpoint
note covers are proven unchanged by Merkle consistency with today's tree, and only the runs
with an event after N are replayed, each whole. Run A is left as it was at the note; run B
records a round after it."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from ledger.integrity.hashing import event_hash
from ledger.store.eventstore import Store, StoredEvent

from campaign import Campaign

A, B = "softmax-a-001", "softmax-b-001"
CHECKS = "consistency, seq, hash, chain, canonical, payload, replay, projection, blobs, checkpoints"


def _record(cli, c: Campaign, medians) -> None:
    result = cli("record", "--run", c.run_id, "--result", c.round(medians), "--json")
    assert result.exit_code == 0, result.stderr
    c.accepted(result.json()["decision"], result.json()["round"])


def _ledger(cli, tmp_path: Path) -> tuple[Path, dict]:
    """Runs A and B with a round each, the note of those events, then a round of B."""
    a, b = Campaign(tmp_path / "a", run_id=A), Campaign(tmp_path / "b", run_id=B)
    for c in (a, b):
        assert cli("plan", "--config", c.config()).exit_code == 0
        _record(cli, c, [16.0, 37.0, 23.0])
    note = tmp_path / "checkpoint.txt"
    made = cli("checkpoint", "--out", note, "--json")
    assert made.exit_code == 0, made.stderr
    _record(cli, b, [15.0, 36.0, 22.0])
    return note, made.json()


def _events(url: str) -> list[StoredEvent]:
    store = Store(url)
    with store.transaction() as conn:
        found = list(store.iter_events(conn))
    store.close()
    return found


def _rewrite(url: str, changed: list[StoredEvent]) -> None:
    """Write events back in place, with the ledger's append-only guards off."""
    engine = create_engine(url)
    with engine.begin() as conn:
        if url.startswith("sqlite"):
            names = conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
            for name in list(names.scalars()):
                conn.execute(text(f'DROP TRIGGER "{name}"'))
        else:
            conn.execute(text("ALTER TABLE events DISABLE TRIGGER USER"))
        for e in changed:
            conn.execute(
                text(
                    "UPDATE events SET recorded_at = :at, payload = :payload, "
                    "parent_hash = :parent, event_hash = :hash WHERE seq = :seq"
                ),
                {
                    "at": e.recorded_at,
                    "payload": e.payload,
                    "parent": e.parent_hash,
                    "hash": e.event_hash,
                    "seq": e.seq,
                },
            )
    engine.dispose()


def _later(at: str) -> str:
    """A recorded time a microsecond off (always another string)."""
    digit = int(at[-2])
    return at[:-2] + str((digit + 1) % 10) + "Z"


def _rehashed(e: StoredEvent, **changes) -> StoredEvent:
    e = replace(e, **changes)
    fields = {k: getattr(e, k) for k in e.__dataclass_fields__ if k not in ("seq", "event_hash")}
    return replace(e, event_hash=event_hash(**fields))


def test_a_clean_ledger_verifies_from_its_note(cli, tmp_path):
    note, made = _ledger(cli, tmp_path)
    events = _events(cli.db_url)
    b_events = [e for e in events if e.stream_id == B]
    result = cli("verify", "--since", note)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"verified since the note: {len(b_events)} events in 1 run; checks {CHECKS} all ok\n"
        f"the first {made['size']} events are those of the note ({made['root']}), by Merkle "
        "consistency\n"
    )
    body = cli("verify", "--since", made["note"], "--json").json()
    assert (body["status"], body["events_checked"], body["runs_checked"]) == (
        "ok",
        len(b_events),
        1,
    )
    assert body["since"] == {
        "source": "since",
        "origin": made["origin"],
        "size": made["size"],
        "root": made["root"],
        "status": "ok",
        "reason": None,
        "signature": "not checked",
    }
    assert body["checks"]["consistency"] == "ok" and body["checkpoints_checked"] == 1
    assert cli("verify").exit_code == 0


def test_a_rewrite_inside_the_note_is_refused_by_the_consistency_proof(cli, tmp_path):
    note, made = _ledger(cli, tmp_path)
    events = _events(cli.db_url)
    # run A's last event, which no later event follows: a careful forger's rewrite, every
    # per-event check of it still passes
    last_a = [e for e in events if e.stream_id == A][-1]
    _rewrite(cli.db_url, [_rehashed(last_a, recorded_at=_later(last_a.recorded_at))])
    result = cli("verify", "--since", note)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == (
        "Error: verification failed at ledger: consistency: today's tree of "
        f"{len(events)} events is not consistent with the note's tree of the first "
        f"{made['size']} ({made['root']}): history at or before event {made['size']} was "
        "rewritten\n"
    )
    body = cli("verify", "--since", note, "--json").json()
    assert body["checks"]["consistency"] == "failed" and body["checks"]["seq"] == "not run"
    assert body["first_failure"]["check"] == "consistency"


def test_a_change_in_a_run_touched_after_the_note_is_refused_by_the_replay(cli, tmp_path):
    note, made = _ledger(cli, tmp_path)
    events = _events(cli.db_url)
    first_b = next(e for e in events if e.stream_id == B and e.event_type == "RoundSubmitted")
    value = json.loads(first_b.payload)
    value["round"] = 7
    payload = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    _rewrite(cli.db_url, [replace(first_b, payload=payload)])  # its hash left as it was
    result = cli("verify", "--since", note)
    assert result.exit_code == 1
    assert result.stdout == (  # the note holds: the hashes are unchanged
        f"the first {made['size']} events are those of the note ({made['root']}), by Merkle "
        "consistency\n"
    )
    assert result.stderr == (
        f"Error: verification failed at seq {first_b.seq} ({B} v{first_b.stream_version}): "
        "hash: event_hash does not match the event's content\n"
    )


def test_a_bad_or_foreign_note_is_an_input_error(cli, tmp_path):
    note, made = _ledger(cli, tmp_path)
    foreign = made["note"].replace(made["origin"], "kernel-ledger/another-ledger")
    root = base64.b64encode(bytes(32)).decode()
    cases = [
        ("not a note\n", "Error: --since not a note\\n is neither a file nor a checkpoint note"),
        (f"{made['origin']}\nten\n{root}\n", "Error: --since: "),
        (
            foreign,
            "Error: --since: the note is for the log 'kernel-ledger/another-ledger', "
            f"not this ledger ('{made['origin']}')\n",
        ),
        (str(tmp_path / "missing.txt"), "Error: --since "),
    ]
    for value, expected in cases:
        result = cli("verify", "--since", value)
        assert result.exit_code == 2, (value, result.stdout, result.stderr)
        assert result.stderr.startswith(expected) and result.stderr.count("\n") == 1
        assert result.stdout == ""
    other = made["note"].replace(made["root"], root)  # this ledger's, with another root
    result = cli("verify", "--since", other)
    assert result.exit_code == 1 and "consistency: today's tree" in result.stderr
    refused = cli("verify", "--since", note, "--run", A)
    assert refused.exit_code == 2
    assert refused.stderr == (
        "Error: --since verifies the whole ledger from its note on; it takes no --run, "
        "--checkpoint, --artifacts, --bundle or --chain\n"
    )


def test_a_signed_note_needs_its_key(cli, tmp_path):
    _ledger(cli, tmp_path)
    key = tmp_path / "signer.key"
    made = cli("checkpoint", "--generate-key", key, "--json")
    assert made.exit_code == 0, made.stderr
    verifier = made.json()["verifier_key"]
    signed = cli("checkpoint", "--sign", key, "--json").json()["note"]
    assert cli("verify", "--since", signed, "--verifier-key", verifier).exit_code == 0
    body = cli("verify", "--since", signed, "--verifier-key", verifier, "--json").json()
    assert body["since"]["signature"] == "ok"
    other = tmp_path / "other.key"
    wrong = cli("checkpoint", "--generate-key", other, "--json").json()["verifier_key"]
    result = cli("verify", "--since", signed, "--verifier-key", wrong)
    assert result.exit_code == 2 and result.stderr == (
        "Error: --since: the note carries no valid signature by the given --verifier-key\n"
    )


def test_check_merge_since_the_note(cli, tmp_path):
    note, made = _ledger(cli, tmp_path)
    kernel = tmp_path / "a" / "kernels" / "v0.py"  # A's starting kernel
    body = cli("check-merge", "--run", A, "--kernel", kernel, "--since", note, "--json")
    assert body.exit_code == 1  # A has not concluded, and this is not its best kernel
    found = body.json()
    assert found["checks"]["verify"] == "ok" and found["checks"]["checkpoint"] == "ok"
    assert found["verification"]["checks"]["consistency"] == "ok"
    events = _events(cli.db_url)
    last_a = [e for e in events if e.stream_id == A][-1]
    _rewrite(cli.db_url, [_rehashed(last_a, recorded_at=_later(last_a.recorded_at))])
    found = cli("check-merge", "--run", A, "--kernel", kernel, "--since", note, "--json").json()
    assert found["checks"]["verify"] == "failed"
    assert any("(consistency)" in reason for reason in found["reasons"])
    both = cli("check-merge", "--run", A, "--kernel", kernel, "--since", note, "--checkpoint", note)
    assert both.exit_code == 2
    assert both.stderr == "Error: --since and --checkpoint are two starting points; give one\n"
    assert made["size"] > 0


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_removed_events_are_refused(cli, tmp_path):
    note, made = _ledger(cli, tmp_path)
    engine = create_engine(cli.db_url)
    with engine.begin() as conn:
        for (name,) in conn.execute(text("SELECT name FROM sqlite_master WHERE type='trigger'")):
            conn.execute(text(f'DROP TRIGGER "{name}"'))
        conn.execute(text("DELETE FROM events WHERE seq > :n"), {"n": made["size"] - 2})
    engine.dispose()
    result = cli("verify", "--since", note)
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: verification failed at ledger: consistency: the ledger holds "
        f"{made['size'] - 2} events, fewer than the {made['size']} the note covers: events "
        "were removed (or the note is from another copy of this ledger)\n"
    )


def test_the_mcp_tool_answers_as_the_command_line(cli, tmp_path):
    import sys

    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    note, _ = _ledger(cli, tmp_path)

    async def call():  # served from the note's folder: the server reads files only inside it
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cli", "--db", cli.db_url, "mcp"], cwd=str(tmp_path)
        )
        async with stdio_client(params) as streams, ClientSession(*streams) as session:
            await session.initialize()
            ok = await session.call_tool("verify", {"since": str(note)})
            bad = await session.call_tool("verify", {"since": "not a note\n"})
            return ok, bad

    ok, bad = anyio.run(call)
    assert not ok.is_error
    assert ok.structured_content == cli("verify", "--since", note, "--json").json()
    assert bad.is_error and bad.structured_content["error"].startswith(
        "argument 'since' not a note"
    )
