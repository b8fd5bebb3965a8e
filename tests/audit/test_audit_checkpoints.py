"""Checkpoints: the RFC 6962 root over the event hashes as a C2SP note, stored append-only,
optionally signed, and held against the ledger by verify --checkpoint."""

from __future__ import annotations

import base64
import hashlib
import sqlite3

import audit_kit
import pytest
from audit_kit import copy_ledger, read_events
from unit.test_merkle import CONSISTENCY, INCLUSION, LEAVES, ROOTS

from ledger.integrity import merkle
from ledger.store.eventstore import Store

from campaign import Campaign
from conftest import CliRunner

built = audit_kit.built
EMPTY_ROOT_B64 = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="  # SHA-256 of nothing


def reference_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1 MTH, written out recursively."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(
        b"\x01" + reference_root(leaves[:k]) + reference_root(leaves[k:])
    ).digest()


def _campaign(cli, root) -> Campaign:
    campaign = Campaign(root)
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    for medians in ([16.0, 37.0, 23.0], [15.0, 37.0, 26.0]):
        result = cli(
            "record", "--run", campaign.run_id, "--result", campaign.round(medians), "--json"
        )
        campaign.accepted(result.json()["decision"], result.json()["round"])
    return campaign


def test_an_empty_ledger_checkpoints_the_empty_tree(cli):
    assert cli("db", "upgrade").exit_code == 0  # an empty ledger (checkpoint creates none)
    result = cli("checkpoint", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert (body["size"], body["root"]) == (0, EMPTY_ROOT_B64)
    assert body["note"] == f"{body['origin']}\n0\n{EMPTY_ROOT_B64}\n"
    assert cli("verify", "--checkpoint", body["note"]).exit_code == 0


def test_checkpoint_is_the_rfc6962_root_of_the_event_hashes(cli, tmp_path):
    _campaign(cli, tmp_path / "c")
    result = cli("checkpoint", "--json", "--out", tmp_path / "cp.txt")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    store = Store(cli.db_url)
    with store.transaction() as conn:
        hashes = [bytes.fromhex(e.event_hash) for e in store.iter_events(conn)]
        ledger_id = store.ledger_id(conn)
    store.close()
    assert body["origin"] == f"kernel-ledger/{ledger_id}"
    assert body["size"] == len(hashes) == 11
    assert base64.b64decode(body["root"]) == reference_root(hashes)
    assert (tmp_path / "cp.txt").read_text() == body["note"]
    assert body["note"].splitlines() == [body["origin"], "11", body["root"]]
    assert body["stored"] is True and body["signed"] is False
    again = cli("checkpoint", "--json").json()
    assert again["stored"] is False and again["checkpoint_id"] == body["checkpoint_id"]
    plain = cli("checkpoint")
    assert plain.exit_code == 0 and plain.stdout == body["note"]
    for pinned in (tmp_path / "cp.txt", body["note"], body["note"].rstrip("\n")):
        verified = cli("verify", "--checkpoint", pinned, "--json")
        assert verified.exit_code == 0, verified.stdout
        assert verified.json()["checks"]["checkpoint"] == "ok"
        assert verified.json()["checkpoints_checked"] == 1


def test_the_three_ways_a_pinned_checkpoint_fails(cli, tmp_path):
    _campaign(cli, tmp_path / "c")
    note = cli("checkpoint", "--json").json()["note"]
    origin, size, root = note.splitlines()
    cases = {
        "foreign": (f"kernel-ledger/elsewhere\n{size}\n{root}\n", "not this ledger"),
        "longer": (f"{origin}\n{int(size) + 5}\n{root}\n", "holds 11 events, fewer than the 16"),
        "rewritten": (
            f"{origin}\n{size}\n{EMPTY_ROOT_B64}\n",
            "history at or before event 11 was rewritten",
        ),
    }
    for name, (pinned, reason) in cases.items():
        result = cli("verify", "--checkpoint", pinned, "--json")
        assert result.exit_code == 1, name
        body = result.json()
        assert body["status"] == "failed" and body["checks"]["checkpoint"] == "failed"
        assert body["first_failure"]["check"] == "checkpoint"
        assert reason in body["first_failure"]["reason"], (name, body["first_failure"])
        assert body["checks"]["hash"] == "ok"  # the chain itself is fine
        assert result.error.startswith("verification failed at ledger: checkpoint:")
        assert result.stderr == ""


@pytest.mark.parametrize(
    ("pinned", "message"),
    [
        ("just-one-line.txt", "neither a file nor a checkpoint note"),
        ("origin\nnot-a-number\nAAAA\n", "checkpoint tree size 'not-a-number'"),
        ("origin\n3\n", "checkpoint needs 3 lines"),
    ],
)
def test_malformed_pinned_checkpoints_are_rejected(cli, pinned, message):
    result = cli("verify", "--checkpoint", pinned, "--json")
    assert result.exit_code == 2
    assert message in result.json()["error"]
    assert result.stderr == "" and len(result.stdout.splitlines()) == 1


def test_signed_checkpoints(cli, tmp_path):
    _campaign(cli, tmp_path / "c")
    key = tmp_path / "ledger.key"
    made = cli("checkpoint", "--generate-key", key, "--json")
    assert made.exit_code == 0, made.stderr
    verifier = made.json()["verifier_key"]
    assert key.stat().st_mode & 0o077 == 0
    assert cli("checkpoint", "--generate-key", key).exit_code == 2  # never overwritten
    signed = cli("checkpoint", "--sign", key, "--json").json()
    assert signed["signed"] is True and signed["verifier_key"] == verifier
    assert "\n\n\u2014 kernel-ledger/" in signed["note"]
    good = cli("verify", "--checkpoint", signed["note"], "--verifier-key", verifier, "--json")
    assert good.exit_code == 0 and good.json()["checkpoint"]["signature"] == "ok"
    (tmp_path / "verifier.pub").write_text(verifier + "\n")
    by_file = cli(
        "verify", "--checkpoint", signed["note"], "--verifier-key", tmp_path / "verifier.pub"
    )
    assert by_file.exit_code == 0
    other = tmp_path / "other.key"
    stranger = cli("checkpoint", "--generate-key", other, "--json").json()["verifier_key"]
    bad = cli("verify", "--checkpoint", signed["note"], "--verifier-key", stranger, "--json")
    assert bad.exit_code == 1 and bad.json()["checkpoint"]["signature"] == "failed"
    unsigned = cli("checkpoint", "--json").json()["note"]
    bare = cli("verify", "--checkpoint", unsigned, "--verifier-key", verifier, "--json")
    assert bare.exit_code == 1
    assert cli("verify", "--verifier-key", verifier).exit_code == 2
    (tmp_path / "junk.key").write_text("PRIVATE+KEY+nonsense\n")
    junk = cli("checkpoint", "--sign", tmp_path / "junk.key", "--json")
    assert junk.exit_code == 2 and "signer key is malformed" in junk.json()["error"]


def test_no_checkpoint_for_a_ledger_that_does_not_verify(built, tmp_path):
    path = tmp_path / "broken.sqlite3"
    cli = CliRunner(copy_ledger(built.path, path))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET event_id = 'forged' WHERE seq = 7")
    result = cli("checkpoint", "--json")
    assert result.exit_code == 1
    assert "does not verify (seq 7: hash" in result.json()["error"]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0] == 0


def test_stored_checkpoints_are_append_only_and_rechecked(store, tmp_path):
    from ledger.integrity import audit
    from ledger.services.session import utc_now

    made = audit.make_checkpoint(store, clock=utc_now)
    for statement in ("UPDATE checkpoints SET tree_size = 5", "DELETE FROM checkpoints"):
        with pytest.raises(Exception, match="append-only"), store.engine.begin() as conn:
            conn.exec_driver_sql(statement)
    report = audit.verify(store)
    assert report.ok and report.as_dict()["checkpoints_checked"] == 1
    assert made.checkpoint_id == 1


def test_a_rewrite_fails_the_stored_checkpoint_in_plain_verify(built, tmp_path):
    path = tmp_path / "copy.sqlite3"
    url = copy_ledger(built.path, path)
    cli = CliRunner(url)
    assert cli("checkpoint").exit_code == 0
    events = read_events(path)
    with sqlite3.connect(path) as conn:  # a rewrite that keeps the per-event checks happy
        audit_kit.write_event(conn, events[-1].seq, audit_kit.rehash(events[-1], event_id="x"))
    result = cli("verify", "--json")
    assert result.exit_code == 1
    body = result.json()
    assert body["checks"]["hash"] == "ok" and body["checks"]["checkpoints"] == "failed"
    assert body["first_failure"]["check"] == "checkpoints"
    assert body["first_failure"]["reason"].startswith("stored checkpoint #1: the first 41 events")


# --- the proof builder against the reference vectors -------------------------------------


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_proof_builder_matches_inclusion_vectors(index, size, proof):
    builder = merkle.ProofBuilder(LEAVES)
    assert builder.inclusion(index, size) == proof
    assert builder.root(size) == ROOTS[size]


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_proof_builder_matches_consistency_vectors(old, new, proof):
    assert merkle.ProofBuilder(LEAVES).consistency(old, new) == proof


def test_proof_builder_proves_every_prefix_of_a_small_tree():
    leaves = [bytes([i]) * (i % 5) for i in range(40)]
    builder = merkle.ProofBuilder(leaves)
    for size in range(41):
        assert (
            builder.root(size)
            == merkle.root(leaves[:size])
            == reference_root([leaf for leaf in leaves[:size]])
        )
        for index in range(size):
            proof = builder.inclusion(index, size)
            assert merkle.verify_inclusion(leaves[index], index, size, proof, builder.root(size))
        for old in range(size + 1):
            proof = builder.consistency(old, size)
            roots = builder.root(old), builder.root(size)
            assert merkle.verify_consistency(old, size, proof, *roots)
    with pytest.raises(ValueError):
        builder.inclusion(5, 41)
    with pytest.raises(ValueError):
        builder.consistency(3, 2)
