"""One golden scenario, replayed into SQLite and into PostgreSQL with the same clock and
event ids, gives the same ledger: byte-identical event rows but for who appended them (the
actor: the OS user and host on SQLite, the database role on PostgreSQL), so hashes that are
the same once each run is sealed with the other backend's actor, the same projection rows."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import replace
from itertools import count
from pathlib import Path

import pytest
from sqlalchemy import select

from ledger.integrity import merkle
from ledger.integrity.verify import verify_ledger
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store
from ledger.store.tables import PROJECTION_TABLES, blobs, events, ledger_info

from campaign import Campaign, write_json

NAMESPACE = uuid.UUID("6b6c6564-0000-4000-8000-000000000006")
EVENT_TYPES = {
    "RunPlanned",
    "ValidationLinked",
    "MeasurementsRecorded",
    "ProfileRecorded",
    "RoundSubmitted",
    "RoundDecided",
    "DiagnosisRecorded",
    "RunConcluded",
}


@pytest.fixture
def pg_url(pg_server: str, pg_template: str) -> str:
    from conftest import new_pg_database

    return new_pg_database(pg_server, pg_template)


def _samples(median: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [round(median * (1 + rng.uniform(-0.001, 0.001)), 4) for _ in range(n)]


def _scenario(root: Path) -> dict:
    """Write every input file of the scenario once; both backends replay the same files,
    so every recorded path and file hash is the same."""
    c = Campaign(root)
    config = c.config_doc()
    for i, row in enumerate(config["baseline"]):
        row["samples_us"] = _samples(row.pop("median_us"), 12, seed=i)
        row["repeats"] = 12
    files: dict = {"config": write_json(root / "config.json", config), "rounds": []}
    signals = {"task_duration_us": 42.0, "aiv_scalar_ratio": 0.41, "block_dim": 40}
    files["profile"] = write_json(root / "profiles" / "baseline.json", signals)
    # (medians or None for a failed validation, samples instead of medians?, decision)
    plan = [
        ([16.0, 36.0, 22.5], True, "KEEP"),
        ([15.0, 36.0, 26.0], False, "DISCARD"),
        ([16.01, 36.0, 22.5], False, "NOISE"),
        (None, False, "FAIL"),
        ([14.0, 33.0, 21.0], False, "KEEP"),
    ]
    for number, (medians, with_samples, decision) in enumerate(plan, start=1):
        status = "passed" if medians is not None else "failed"
        doc = c.round_doc(medians, number=number, status=status)
        if with_samples:
            for i, row in enumerate(doc["measurements"]):
                row["samples_us"] = _samples(row.pop("median_us"), 12, seed=10 * number + i)
                row["repeats"] = 12
        files["rounds"].append((write_json(root / "rounds" / f"{number}.json", doc), decision))
        c.accepted(decision, number)
    files["run_id"] = c.run_id
    return files


def _replay(url: str, files: dict) -> None:
    ticks = count(1)
    ids = count(1)
    service = LedgerService(
        Store(url),
        clock=lambda: f"2026-12-01T10:{next(ticks):02d}:00.000000Z",
        new_id=lambda: str(uuid.uuid5(NAMESPACE, str(next(ids)))),
    )
    run_id = files["run_id"]
    service.plan(files["config"])
    service.profile(run_id, files["profile"], baseline=True)
    for path, decision in files["rounds"]:
        assert service.record(run_id, path).decision == decision
        if decision == "FAIL":
            service.diagnose(run_id, "scalar-flow-control", "round 4 failed validation")
    service.conclude(run_id)
    service.store.close()


def _snapshot(url: str) -> dict:
    store = Store(url)
    with store.transaction() as conn:
        snap = {
            "events": [tuple(r) for r in conn.execute(select(events).order_by(events.c.seq))],
            "blobs": [tuple(r) for r in conn.execute(select(blobs).order_by(blobs.c.sha256))],
            "projections": {
                t.name: [
                    dict(r)
                    for r in conn.execute(select(t).order_by(*t.primary_key.columns)).mappings()
                ]
                for t in PROJECTION_TABLES
            },
            "stored": list(store.iter_events(conn)),
            "ledger_info_keys": sorted(conn.execute(select(ledger_info.c.key)).scalars()),
        }
    report = verify_ledger(store)
    store.close()
    assert report.ok, report.as_dict()
    snap["events"] = [(*row[:7], bytes(row[7]), *row[8:]) for row in snap["events"]]
    snap["blobs"] = [(sha, size, bytes(content)) for sha, size, content in snap["blobs"]]
    snap["root"] = merkle.root(bytes.fromhex(e.event_hash) for e in snap["stored"])
    return snap


def _resealed(stored, actor: str) -> list[str]:
    """The event hashes of `stored` with each run's chain sealed again for `actor`."""
    heads: dict[str, str] = {}
    out = []
    for e in stored:
        parent = heads.get(e.stream_id, "0" * 64)
        digest = replace(e, parent_hash=parent, actor=actor).computed_hash()
        heads[e.stream_id] = digest
        out.append(digest)
    return out


def test_golden_scenario_is_identical_on_sqlite_and_postgresql(
    tmp_path: Path, sqlite_url: str, pg_url: str
):
    files = _scenario(tmp_path / "campaign")
    _replay(sqlite_url, files)
    _replay(pg_url, files)
    lite, pg = _snapshot(sqlite_url), _snapshot(pg_url)

    # the scenario is not trivial: every kind of event, both decisions' statistics
    assert {e.event_type for e in lite["stored"]} == EVENT_TYPES
    assert len(lite["stored"]) >= 20
    decided = [json.loads(e.payload) for e in lite["stored"] if e.event_type == "RoundDecided"]
    assert [d["decision"] for d in decided] == ["KEEP", "DISCARD", "NOISE", "FAIL", "KEEP"]
    assert decided[0]["statistics"] is not None  # the bootstrap ran on raw samples

    # every column but the actor and the hashes over it, payload bytes included
    def unsealed(row):
        return row[:8]  # seq to payload; parent_hash, event_hash and actor follow

    assert [unsealed(r) for r in lite["events"]] == [unsealed(r) for r in pg["events"]]
    assert {e.actor for e in lite["stored"]} == {
        '{"host":"test-host","label":"test-suite","os_user":"tester"}'
    }
    (role,) = {json.loads(e.actor)["db_role"] for e in pg["stored"]}
    assert {e.actor for e in pg["stored"]} == {
        json.dumps({"db_role": role, "label": "test-suite"}, separators=(",", ":"))
    }
    assert _resealed(lite["stored"], pg["stored"][0].actor) == [e.event_hash for e in pg["stored"]]
    assert all(e.computed_hash() == e.event_hash for e in pg["stored"])
    assert lite["root"] != merkle.EMPTY_ROOT
    # the starting kernel, five candidates and the profile file
    assert lite["blobs"] == pg["blobs"] and len(lite["blobs"]) == 7
    assert lite["projections"] == pg["projections"]
    assert [len(lite["projections"][t.name]) for t in PROJECTION_TABLES] == [1, 3, 5, 1]
    assert lite["ledger_info_keys"] == pg["ledger_info_keys"]
