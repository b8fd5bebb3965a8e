"""Bundles: export a run with inclusion proofs, check it offline, import it elsewhere with the
same event hashes; any changed byte fails."""

from __future__ import annotations

import json
import random

import audit_kit
import pytest
import rfc8785
from audit_kit import build_ledger, copy_ledger, event_count, read_events, stream_rows

from ledger.integrity import bundle
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

from conftest import CliRunner

other_url = audit_kit.other_url
built = audit_kit.built
RUN_A, RUN_B = "softmax-a-001", "softmax-b-001"
NO_DATABASE = "postgresql+psycopg://nobody@127.0.0.1:9/none"  # nothing listens on port 9


def _lines(path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def _exported_a(built, out) -> list[bytes]:
    """Run A of the built ledger exported to `out`, as lines."""
    store = Store(built.url)
    bundle.export_run(store, RUN_A, out)
    store.close()
    return _lines(out)


def test_export_check_offline_import_and_import_again(db_url, other_url, tmp_path):
    built = build_ledger(tmp_path / "src", url=db_url)
    cli, target = CliRunner(db_url), CliRunner(other_url)
    pinned = cli("checkpoint", "--json").json()
    b = built.runs[RUN_B]  # the log grows after the checkpoint was pinned
    service = LedgerService(Store(db_url))
    audit_kit.record(service, b, [16.5, 37.5, 23.5])
    service.store.close()
    out = tmp_path / "a.bundle.jsonl"
    exported = cli("export", "--run", RUN_A, "--out", out, "--json")
    assert exported.exit_code == 0, exported.stderr
    body = exported.json()
    assert body["status"] == "exported" and body["run_id"] == RUN_A
    assert (
        body["events"] == len(stream_rows(db_url, RUN_A)) and body["blobs"] == 6
    )  # v0 and five candidates
    assert body["consistency_sizes"] == [pinned["size"]]
    assert body["tree_size"] == pinned["size"] + 4

    offline = CliRunner(NO_DATABASE)  # verify --bundle opens no database at all
    checked = offline("verify", "--bundle", out, "--json")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    report = checked.json()
    assert report["status"] == "ok" and report["events_checked"] == body["events"]
    assert set(report["checks"].values()) == {"ok"}
    held = offline("verify", "--bundle", out, "--checkpoint", pinned["note"], "--json")
    assert held.exit_code == 0, held.stdout
    assert held.json()["checkpoint"]["status"] == "ok"

    imported = target("import", out, "--json")
    assert imported.exit_code == 0, imported.stderr
    assert imported.json()["events_imported"] == body["events"]
    assert stream_rows(other_url, RUN_A) == stream_rows(db_url, RUN_A)
    again = target("import", out, "--json")
    assert again.exit_code == 0 and again.json()["status"] == "unchanged"
    assert event_count(other_url) == body["events"]
    verified = target("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    assert verified.json()["runs_checked"] == 1
    kernel = built.runs[RUN_A].best_kernel
    gate = target("check-merge", "--run", RUN_A, "--kernel", kernel, "--json")
    assert gate.exit_code == 0, gate.stdout
    restored = tmp_path / "restored.py"
    assert target("checkout", "--run", RUN_A, "--out", restored).exit_code == 0
    assert restored.read_bytes() == kernel.read_bytes()


def test_import_continues_a_run_and_refuses_a_clash(db_url, other_url, tmp_path):
    from campaign import Campaign

    campaign = Campaign(tmp_path / "campaign", run_id="bundled-001")
    source = LedgerService(Store(db_url), clock=audit_kit.Clock())
    source.plan(campaign.config())
    audit_kit.record(source, campaign, [16.0, 37.0, 23.0])
    cli, target = CliRunner(db_url), CliRunner(other_url)
    first = tmp_path / "first.jsonl"
    assert cli("export", "--run", "bundled-001", "--out", first).exit_code == 0
    assert target("import", first, "--json").json()["events_imported"] == 7
    audit_kit.record(source, campaign, [15.0, 37.0, 26.0])
    source.store.close()
    second = tmp_path / "second.jsonl"
    assert cli("export", "--run", "bundled-001", "--out", second).exit_code == 0
    grown = target("import", second, "--json").json()
    assert grown["events_imported"] == 4 and grown["events_in_bundle"] == 11
    assert stream_rows(other_url, "bundled-001") == stream_rows(db_url, "bundled-001")
    assert target("verify").exit_code == 0

    elsewhere = tmp_path / "elsewhere.sqlite3"  # the same run recorded again, another time
    rival = LedgerService(Store(f"sqlite:///{elsewhere}"))
    campaign.rounds_written, campaign.best_kernel = 0, campaign.root / "kernels" / "v0.py"
    rival.plan(campaign.config())
    rival.store.close()
    clash = tmp_path / "clash.jsonl"
    assert (
        CliRunner(f"sqlite:///{elsewhere}")(
            "export", "--run", "bundled-001", "--out", clash
        ).exit_code
        == 0
    )
    refused = target("import", clash, "--json")
    assert refused.exit_code == 2
    assert "already in this ledger with different content at version 1" in refused.error
    assert refused.stderr == ""
    assert event_count(other_url) == 11


def test_every_flipped_byte_fails(built, tmp_path):
    out = tmp_path / "a.jsonl"
    store = Store(built.url)
    bundle.export_run(store, RUN_A, out)
    store.close()
    data = out.read_bytes()
    report, content = bundle.check_lines(_lines(out))
    assert report.ok and content is not None
    rng = random.Random(7)
    header_end = data.index(b"\n") + 1
    positions = list(range(header_end)) + rng.sample(range(header_end, len(data)), 400)
    survived = []
    for position in positions:
        flipped = bytearray(data)
        flipped[position] ^= rng.randrange(1, 256)
        report, _ = bundle.check_lines(bytes(flipped).splitlines(keepends=True))
        if report.ok:
            survived.append(position)
    assert survived == [], f"flips at {survived[:10]} went unnoticed"


@pytest.mark.parametrize(
    ("damage", "check"),
    [
        ("drop-last-line", "format"),
        ("drop-event-and-count", "chain"),
        ("swap-events", "chain"),
        ("blank-line", "format"),
        ("pretty-printed", "format"),
        ("foreign-blob", "blobs"),
        ("no-final-newline", "format"),
        ("uppercase-proof-hash", "format"),
        ("short-proof-hash", "format"),
        # later events, whose proofs share hashes with the ones checked before them
        ("later-proof-top-changed", "inclusion"),
        ("later-proof-cut", "inclusion"),
        ("later-proof-number", "format"),
        ("later-proof-list", "format"),
        ("later-proof-uppercase-known-hash", "format"),
    ],
)
def test_damaged_bundles_fail(built, tmp_path, damage, check):
    lines = _exported_a(built, tmp_path / "a.jsonl")
    header = json.loads(lines[0])
    if damage == "drop-last-line":
        lines = lines[:-1]
    elif damage == "drop-event-and-count":
        header["events"] -= 1
        lines = [bundle._line(header), *lines[1:5], *lines[6:]]
    elif damage == "swap-events":
        lines[3], lines[4] = lines[4], lines[3]
    elif damage == "blank-line":
        lines.insert(2, b"\n")
    elif damage == "pretty-printed":
        lines[2] = (json.dumps(json.loads(lines[2]), indent=1).replace("\n", " ") + "\n").encode()
    elif damage == "foreign-blob":
        blob = json.loads(lines[-1])
        blob["content"] = "AAAA"
        blob["size"] = 3
        lines[-1] = bundle._line(blob)
    elif damage == "no-final-newline":
        lines[-1] = lines[-1][:-1]
    elif damage in ("uppercase-proof-hash", "short-proof-hash"):
        event = json.loads(lines[2])
        first = event["proof"][0]
        event["proof"][0] = first.upper() if damage.startswith("upper") else first[:-1]
        lines[2] = bundle._line(event)
    elif damage.startswith("later-proof"):
        event = json.loads(lines[5])
        proof = event["proof"]
        if damage == "later-proof-top-changed":
            proof[-1] = f"{int(proof[-1][0], 16) ^ 1:x}" + proof[-1][1:]
        elif damage == "later-proof-cut":
            proof.pop()
        elif damage == "later-proof-number":
            proof[1] = 7
        elif damage == "later-proof-list":
            proof[-1] = [proof[-1]]
        else:  # a hash the earlier lines hold, spelled in capitals
            proof[-1] = proof[-1].upper()
        lines[5] = bundle._line(event)
    report, content = bundle.check_lines(lines)
    assert not report.ok and content is None
    assert report.first_failure.check == check, report.first_failure


def test_a_bundle_and_pinned_checkpoints(built, tmp_path):
    path = tmp_path / "copy.sqlite3"
    url = copy_ledger(built.path, path, drop_guards=False)
    cli = CliRunner(url)
    early = audit_kit.checkpoint_notes(url)[10]  # never stored: export must be told of it
    out = tmp_path / "a.jsonl"
    assert cli("export", "--run", RUN_A, "--out", out, "--checkpoint", early).exit_code == 0
    offline = CliRunner(NO_DATABASE)
    assert offline("verify", "--bundle", out, "--checkpoint", early).exit_code == 0
    unproven = audit_kit.checkpoint_notes(url)[11]
    result = offline("verify", "--bundle", out, "--checkpoint", unproven, "--json")
    assert result.exit_code == 1
    failure = result.json()["first_failure"]
    assert failure["check"] == "checkpoint"
    assert "carries no proof for a checkpoint of size 11" in failure["reason"]
    foreign = early.replace(early.splitlines()[0], "kernel-ledger/another-ledger")
    result = offline("verify", "--bundle", out, "--checkpoint", foreign, "--json")
    assert result.exit_code == 1 and "not the bundle's" in result.json()["first_failure"]["reason"]
    wrong_root = early.splitlines()
    wrong_root[2] = audit_kit.checkpoint_notes(url)[9].splitlines()[2]
    result = offline("verify", "--bundle", out, "--checkpoint", "\n".join(wrong_root) + "\n")
    assert result.exit_code == 1 and "was rewritten" in result.stderr


def test_signed_pinned_checkpoint_for_a_bundle(built, tmp_path):
    url = copy_ledger(built.path, tmp_path / "copy.sqlite3", drop_guards=False)
    cli = CliRunner(url)
    key = tmp_path / "signer.key"
    verifier = cli("checkpoint", "--generate-key", key, "--json").json()["verifier_key"]
    signed = cli("checkpoint", "--sign", key, "--json").json()["note"]
    out = tmp_path / "a.jsonl"
    assert cli("export", "--run", RUN_A, "--out", out).exit_code == 0
    offline = CliRunner(NO_DATABASE)
    ok = offline("verify", "--bundle", out, "--checkpoint", signed, "--verifier-key", verifier)
    assert ok.exit_code == 0, ok.stderr
    other_key = tmp_path / "other.key"
    stranger = cli("checkpoint", "--generate-key", other_key, "--json").json()["verifier_key"]
    bad = offline(
        "verify", "--bundle", out, "--checkpoint", signed, "--verifier-key", stranger, "--json"
    )
    assert bad.exit_code == 1
    assert bad.json()["checkpoint"]["signature"] == "failed"


def test_export_refuses_unknown_runs_and_broken_ledgers(built, tmp_path):
    import sqlite3

    path = tmp_path / "copy.sqlite3"
    cli = CliRunner(copy_ledger(built.path, path))
    out = tmp_path / "x.jsonl"
    unknown = cli("export", "--run", "no-such-run", "--out", out, "--json")
    assert unknown.exit_code == 2 and "not in the ledger" in unknown.json()["error"]
    victim = next(e for e in read_events(path) if e.stream_id == RUN_A and e.stream_version == 5)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE events SET recorded_at = '2026-01-01T00:00:00.000000Z' WHERE seq = ?",
            (victim.seq,),
        )
    broken = cli("export", "--run", RUN_A, "--out", out)
    assert broken.exit_code == 1 and "does not verify" in broken.stderr
    assert not out.exists()
    assert cli("export", "--run", RUN_A, "--out", tmp_path).exit_code == 2  # a folder
    missing = cli("verify", "--bundle", tmp_path / "none.jsonl", "--json")
    assert missing.exit_code == 2 and "does not exist" in missing.json()["error"]


def test_the_payload_is_cut_from_its_line_exactly():
    """The payload's canonical bytes are taken from the event line as they stand, also when
    the payload itself holds a "proof" key or the text of another key."""
    payload = {"proof": [1, 2], "note": ',"payload":{"x":1}', "z": {"proof": []}}
    line = rfc8785.dumps(
        {
            "type": "event",
            "event_hash": "0" * 64,
            "event_id": 'id ,"payload": "',
            "event_type": "T",
            "parent_hash": "0" * 64,
            "payload": payload,
            "proof": ["a" * 64],
            "recorded_at": '2026 ,"proof":[',
            "schema_version": 1,
            "seq": 1,
            "stream_id": "s",
            "stream_version": 1,
        }
    )
    assert bundle._payload_bytes(line) == rfc8785.dumps(payload)


def _forged_bundle(built, tmp_path, change) -> bytes:
    """Run A exported from a copy whose history was rewritten as a careful forger would (one
    event changed, the rest of its run re-linked and re-hashed, the tree rebuilt), with the
    export's own check skipped: every hash, link and inclusion proof holds."""
    path = tmp_path / "forged.sqlite3"
    copy_ledger(built.path, path)
    events = read_events(path)
    target = next(i for i, e in enumerate(events) if change(e) is not None)
    audit_kit.consistent_rewrite(path, target, change)
    store = Store(f"sqlite:///{path}")
    real = bundle.check_lines
    bundle.check_lines = lambda lines, **kw: (bundle.BundleReport(), None)
    try:
        out = tmp_path / "forged.bundle.jsonl"
        bundle.export_run(store, RUN_A, out)
    finally:
        bundle.check_lines = real
        store.close()
    return out.read_bytes()


def _flip_decision(e):
    if e.stream_id != RUN_A or e.event_type != "RoundDecided":
        return None
    payload = json.loads(e.payload)
    payload["decision"] = "DISCARD" if payload["decision"] == "KEEP" else "KEEP"
    return {"payload": rfc8785.dumps(payload)}


def _plan_of_another_op(e):
    if e.stream_id != RUN_A or e.event_type != "RunPlanned":
        return None
    payload = json.loads(e.payload)
    payload["op_name"] = "gelu"  # what the runs row and every rounds row carry
    return {"payload": rfc8785.dumps(payload)}


@pytest.mark.parametrize(
    ("damage", "check"),
    [
        ("payload-altered", "hash"),  # a payload byte changed, its hash left as it was
        ("payload-altered-rehashed", "inclusion"),  # and its hash recomputed
        ("parent-unlinked", "chain"),
        ("decision-forged-consistently", "replay"),
        ("plan-forged-consistently", None),  # projections follow the forged plan: it imports
    ],
)
def test_import_refuses_a_damaged_bundle_and_writes_nothing(built, db_url, tmp_path, damage, check):
    """`import` checks each event's bytes, hash, chain and inclusion and replays the run
    before it writes; on SQLite and PostgreSQL alike nothing of a refused bundle is written.
    A history rewritten consistently (tree and all) imports only where every decision still
    follows from the events, and then as the forged history says: a pinned checkpoint is
    what catches that (test_a_bundle_and_pinned_checkpoints)."""
    out = tmp_path / "a.jsonl"
    if damage in ("decision-forged-consistently", "plan-forged-consistently"):
        change = _flip_decision if damage.startswith("decision") else _plan_of_another_op
        out.write_bytes(_forged_bundle(built, tmp_path, change))
    else:
        lines = _exported_a(built, out)
        event = json.loads(lines[4])
        if damage == "parent-unlinked":
            event["parent_hash"] = "0" * 64  # and re-hashed: the link, not the hash, fails
        else:
            event["payload"]["round"] = event["payload"].get("round", 0) + 1
        if damage != "payload-altered":
            fields = {k: event[k] for k in audit_kit.COLUMNS if k not in ("seq", "event_hash")}
            fields["payload"] = rfc8785.dumps(event["payload"])
            fields["actor"] = rfc8785.dumps(event["actor"]).decode()
            event["event_hash"] = audit_kit.event_hash(**fields)
        lines[4] = bundle._line(event)
        out.write_bytes(b"".join(lines))
    target = CliRunner(db_url)
    result = target("import", out, "--json")
    if check is None:
        assert result.exit_code == 0, result.stderr
        assert target("verify", "--json").exit_code == 0
        return
    assert result.exit_code == 2, result.stdout + result.stderr
    assert f"({check}: " in result.error, result.stdout
    assert result.stderr == "" and result.stdout.count("\n") == 1
    store = Store(db_url)
    with store.transaction() as conn:
        assert store.event_count(conn) == 0
        assert store.all_run_ids(conn) == []
    store.close()
