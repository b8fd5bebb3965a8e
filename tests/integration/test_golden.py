"""The golden ledger: a ledger written by an earlier release must read, verify, export and
copy exactly as it did then.

tests/fixtures/golden/ledger.sqlite3 is `make demo`'s ledger (three runs, 111 events: every
decision, raw samples, A/A remeasures, ncu profiles, conclusions) made at commit 665f4b8 and
compacted with VACUUM INTO. expected.json holds what that release said of it: every event's
hash, the decisions and run projections, the sha256 of each run's exported bundle and the
checkpoint note. A change that alters any of these for existing data breaks old ledgers and
bundles people already pinned; this test says so before they do."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from conftest import CliRunner

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())


@pytest.fixture(autouse=True)
def _no_env_db(monkeypatch):
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    path = tmp_path / "golden" / "ledger.sqlite3"
    path.parent.mkdir()
    shutil.copyfile(GOLDEN / "ledger.sqlite3", path)
    return path


def _upgraded(path: Path) -> CliRunner:
    cli = CliRunner(f"sqlite:///{path}")
    result = cli("db", "upgrade")
    assert result.exit_code == 0, result.stderr
    return cli


def _events(path: Path) -> list[list]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT seq, stream_id, stream_version, event_type, event_hash FROM events ORDER BY seq"
        )
        return [list(r) for r in rows]


def test_golden_ledger_verifies_after_upgrade(golden: Path) -> None:
    cli = _upgraded(golden)
    result = cli("verify", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert _events(golden) == EXPECTED["events"]


def test_golden_decisions_and_projections_are_unchanged(golden: Path) -> None:
    _upgraded(golden)
    with sqlite3.connect(golden) as conn:
        decisions = conn.execute("SELECT run_id, round, decision FROM rounds ORDER BY 1, 2")
        runs = conn.execute(
            "SELECT run_id, status, conclusion, best_kernel_sha256, best_round FROM runs"
            " ORDER BY run_id"
        )
        assert [list(r) for r in decisions] == EXPECTED["decisions"]
        assert [list(r) for r in runs] == EXPECTED["runs"]


def test_golden_bundles_and_checkpoint_are_byte_identical(golden: Path, tmp_path: Path) -> None:
    cli = _upgraded(golden)
    for run_id, digest in EXPECTED["bundles_sha256"].items():
        out = tmp_path / f"{run_id}.bundle.jsonl"
        result = cli("export", "--run", run_id, "--out", str(out))
        assert result.exit_code == 0, result.stderr
        assert hashlib.sha256(out.read_bytes()).hexdigest() == digest, run_id
    note = cli("checkpoint", "--json")
    assert note.exit_code == 0, note.stderr
    assert note.json()["note"] == EXPECTED["note"]


def test_golden_bundles_import_with_the_same_event_hashes(golden: Path, tmp_path: Path) -> None:
    cli = _upgraded(golden)
    fresh = CliRunner(f"sqlite:///{tmp_path / 'fresh' / 'ledger.sqlite3'}")
    for run_id in EXPECTED["bundles_sha256"]:
        out = tmp_path / f"{run_id}.bundle.jsonl"
        assert cli("export", "--run", run_id, "--out", str(out)).exit_code == 0
        result = fresh("import", str(out), "--json")
        assert result.exit_code == 0, result.stdout + result.stderr
    assert fresh("verify").exit_code == 0
    imported = {(r[1], r[2]): r[4] for r in _events(tmp_path / "fresh" / "ledger.sqlite3")}
    assert imported == {(r[1], r[2]): r[4] for r in EXPECTED["events"]}


@pytest.mark.postgres
def test_golden_ledger_copies_to_postgresql_unchanged(golden: Path, pg_server: str) -> None:
    cli = _upgraded(golden)
    name = f"kl_golden_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        make_url(pg_server).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    target = make_url(pg_server).set(database=name).render_as_string(hide_password=False)
    result = cli("db", "copy", "--to", target, "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    pg = CliRunner(target)
    assert pg("verify").exit_code == 0
    assert pg("checkpoint", "--json").json()["note"] == EXPECTED["note"]
    engine = create_engine(target)
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT seq, stream_id, stream_version, event_type, event_hash FROM events"
                " ORDER BY seq"
            )
        )
        assert [list(r) for r in rows] == EXPECTED["events"]
    engine.dispose()


def _as_role(url: str, role: str) -> str:
    """`url` as the login role `role`, a superuser made here if the server has none yet."""
    admin = create_engine(make_url(url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(
            text(
                f"DO $$ BEGIN CREATE ROLE {role} LOGIN SUPERUSER; "
                "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
            )
        )
    admin.dispose()
    return make_url(url).set(username=role).render_as_string(hide_password=False)


def test_golden_legacy_imports_keep_their_hashes(db_url: str) -> None:
    """Every controller-written run folder of tests/fixtures/legacy imports to the very
    events (ids, hashes, Merkle root) it imported to when legacy-expected.json was written
    (tests/fixtures/golden/legacy.py says by which code), on both backends."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("golden_legacy", GOLDEN / "legacy.py")
    assert spec is not None and spec.loader is not None
    legacy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(legacy)
    expected = json.loads(legacy.EXPECTED.read_text())
    if db_url.startswith("postgresql"):  # the events' actor is the role: a fixed one
        db_url = _as_role(db_url, legacy.PG_ROLE)
        expected = {**expected, **expected["postgresql"]}
    facts, _ = legacy.legacy_import_facts(db_url)
    assert facts["runs"] == expected["runs"]
    assert facts["events"] == expected["events"]
    assert (facts["tree_size"], facts["tree_root"]) == (
        expected["tree_size"],
        expected["tree_root"],
    )


class _OtherCpu:
    """numpy as another CPU runs it: `std` summed in another order (another SIMD width)
    lands `ulps` units in the last place away; `scale` moves it for real."""

    def __init__(self, real, *, ulps: int = 0, scale: float = 1.0) -> None:
        self._real, self._ulps, self._scale = real, ulps, scale

    def __getattr__(self, name):
        return getattr(self._real, name)

    def std(self, *args, **kwargs):
        value = float(self._real.std(*args, **kwargs)) * self._scale
        for _ in range(self._ulps):
            value = self._real.nextafter(value, self._real.inf)
        return value


def test_golden_ledger_verifies_on_a_cpu_that_sums_in_another_order(golden, monkeypatch):
    """Recorded on one machine, verified on another: numpy's reductions sum in an order that
    depends on the CPU, and an AMD EPYC without AVX-512 re-derived the golden ledger's
    improvement spreads one unit in the last place away. Such figures count as equal; a
    figure that really moved does not."""
    import numpy

    from ledger.core import stats

    cli = _upgraded(golden)
    monkeypatch.setattr(stats, "np", _OtherCpu(numpy, ulps=3))
    result = cli("verify", "--json")
    assert result.exit_code == 0, result.stdout
    assert result.json()["warnings"] == []
    monkeypatch.setattr(stats, "np", _OtherCpu(numpy, scale=1.0001))
    moved = cli("verify", "--json")
    assert moved.exit_code == 1
    assert moved.json()["first_failure"]["reason"].endswith(
        "recorded statistics differ from a re-derivation"
    )
