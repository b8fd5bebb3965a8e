"""`import FILE...`: several bundles imported in one transaction, checked meanwhile in worker
processes; all of them or (one refused) none, with the words of a check in one process."""

from __future__ import annotations

import json
import multiprocessing
import os

import audit_kit
import pytest
from audit_kit import build_ledger, event_count, stream_rows

from ledger.integrity import bundle
from ledger.integrity.inprocesses import process_context, results_in_order
from ledger.integrity.verify import BAD_HASH
from ledger.store.eventstore import Store

from conftest import CliRunner

other_url = audit_kit.other_url
index_builds = audit_kit.index_builds
RUNS = ("softmax-a-001", "softmax-b-001")


@pytest.fixture(params=[0, 2], ids=["checked-here", "checked-in-2-processes"])
def workers(request, monkeypatch) -> int:
    """Bundles checked in this process, or in two others (which an import chooses by itself
    only for large imports on idle CPUs)."""
    monkeypatch.setattr(bundle, "_import_workers", lambda paths: request.param)
    return request.param


def _exported(url: str, folder) -> list:
    store = Store(url)
    paths = []
    for run_id in RUNS:
        out = folder / f"{run_id}.bundle.jsonl"
        bundle.export_run(store, run_id, out)
        paths.append(out)
    store.close()
    return paths


def _seqs(url: str) -> list[tuple[int, str, str]]:
    store = Store(url)
    with store.transaction() as conn:
        rows = [(e.seq, e.stream_id, e.event_hash) for e in store.iter_events(conn)]
    store.close()
    return rows


def test_several_bundles_import_together(db_url, other_url, tmp_path, workers):
    build_ledger(tmp_path / "src", url=db_url)
    paths = _exported(db_url, tmp_path)
    target = CliRunner(other_url)
    result = target("import", *paths, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    sizes = [len(stream_rows(db_url, run_id)) for run_id in RUNS]
    assert body["status"] == "imported" and body["events_imported"] == sum(sizes)
    assert [b["run_id"] for b in body["bundles"]] == list(RUNS)
    assert [b["events_imported"] for b in body["bundles"]] == sizes
    assert body["bundles"][1]["first_seq"] == sizes[0] + 1  # in the order given
    for run_id in RUNS:
        assert stream_rows(other_url, run_id) == stream_rows(db_url, run_id)
    assert target("verify").exit_code == 0

    again = target("import", *paths, paths[0])
    assert again.exit_code == 0, again.stderr
    assert again.stdout.count("already in the ledger with these events; nothing to import") == 3
    assert event_count(other_url) == sum(sizes)


def test_progress_is_told_after_each_bundle_written(tmp_path, workers):
    build_ledger(tmp_path / "src")
    paths = _exported(f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}", tmp_path)
    told: list[tuple[int, int]] = []
    store = Store(f"sqlite:///{tmp_path / 'target.sqlite3'}")
    bundle.import_bundles(
        store, [*paths, paths[0]], workers=workers, on_progress=lambda *a: told.append(a)
    )
    store.close()
    assert told == [(1, 3), (2, 3), (3, 3)]


def test_the_same_ledger_whether_checked_here_or_apart(tmp_path, monkeypatch):
    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    paths = _exported(source, tmp_path)
    ledgers = []
    for count in (0, 2):
        monkeypatch.setattr(bundle, "_import_workers", lambda paths, count=count: count)
        url = f"sqlite:///{tmp_path / f'imported-{count}.sqlite3'}"
        assert CliRunner(url)("import", *reversed(paths)).exit_code == 0
        ledgers.append(_seqs(url))
    assert ledgers[0] == ledgers[1] and len(ledgers[0]) == event_count(source)


def _damaged(path, tmp_path):
    """The bundle with one payload byte changed (its hash left as it was)."""
    lines = path.read_bytes().splitlines(keepends=True)
    event = json.loads(lines[3])
    event["payload"]["round"] = event["payload"].get("round", 0) + 1
    lines[3] = bundle._line(event)
    out = tmp_path / f"damaged-{path.name}"
    out.write_bytes(b"".join(lines))
    return out


@pytest.mark.parametrize("where", ["first", "last"])
def test_one_refused_bundle_writes_nothing_of_any(db_url, other_url, tmp_path, workers, where):
    build_ledger(tmp_path / "src", url=db_url)
    good, other = _exported(db_url, tmp_path)
    bad = _damaged(other, tmp_path)
    order = [bad, good] if where == "first" else [good, good, bad]
    target = CliRunner(other_url)
    refused = target("import", *order)
    assert refused.exit_code == 2, refused.stdout + refused.stderr
    assert refused.stderr == (
        f"Error: bundle {bad} does not verify (hash: {BAD_HASH}); nothing was imported\n"
    )
    assert refused.stderr.count("\n") == 1 and refused.stdout == ""
    assert event_count(other_url) == 0
    missing = target("import", good, tmp_path / "nowhere.jsonl")
    assert missing.exit_code == 2 and "nowhere.jsonl" in missing.stderr
    assert event_count(other_url) == 0


def test_the_refusal_reads_the_same_from_a_worker(tmp_path, monkeypatch):
    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    good, other = _exported(source, tmp_path)
    bad = _damaged(other, tmp_path)
    said = set()
    for count in (0, 2):
        monkeypatch.setattr(bundle, "_import_workers", lambda paths, count=count: count)
        url = f"sqlite:///{tmp_path / f'target-{count}.sqlite3'}"
        result = CliRunner(url)("import", good, bad, "--json")
        assert result.exit_code == 2
        said.add(result.stderr)
        assert event_count(url) == 0
    assert len(said) == 1, said


TEST_PROCESS = os.getpid()


def test_a_refusal_stops_the_workers_before_it_is_raised(tmp_path):
    from ledger.errors import InputError

    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    good, other = _exported(source, tmp_path)
    bad = _damaged(other, tmp_path)
    store = Store(f"sqlite:///{tmp_path / 'target.sqlite3'}")
    with pytest.raises(InputError, match="does not verify") as refused:
        bundle.import_bundles(store, [bad, good, good, good], workers=2)
    store.close()
    assert refused.value is not None  # its traceback still holds the importer's frame
    assert multiprocessing.active_children() == []


def _numbered(k: int) -> tuple[int, int]:
    return k, os.getpid()


def _exits_on(job: int) -> int:
    if job == 0 and os.getpid() != TEST_PROCESS:
        os._exit(1)  # a worker that dies: the pool breaks
    return job


def test_results_come_back_in_order_from_other_processes():
    results = list(results_in_order(_numbered, [(k,) for k in range(40)], workers=2, window=3))
    assert [k for _, (k, _) in results] == list(range(40)) and all(done for done, _ in results)
    assert TEST_PROCESS not in {pid for _, (_, pid) in results}


def test_a_worker_that_dies_leaves_its_job_to_the_caller():
    results = list(results_in_order(_exits_on, [(k,) for k in range(8)], workers=2, window=2))
    assert results[0] == (False, None)  # the pool broke: the caller does them itself
    assert all(r in ((False, None), (True, k)) for k, r in enumerate(results))


_REAL_CHECK = bundle._checked_apart


def _dies_on_a(path, *args):
    if "softmax-a" in str(path) and os.getpid() != TEST_PROCESS:
        os._exit(1)
    return _REAL_CHECK(path, *args)


def test_a_bundle_whose_worker_dies_is_checked_here(tmp_path, monkeypatch):
    """A worker process that fails otherwise than by a refusal leaves its bundle (and any
    not yet checked) to the importing process: the import is the same."""
    assert process_context().get_start_method() == "fork"  # the patched function reaches the child
    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    paths = _exported(source, tmp_path)
    monkeypatch.setattr(bundle, "_checked_apart", _dies_on_a)
    monkeypatch.setattr(bundle, "_import_workers", lambda paths: 2)
    url = f"sqlite:///{tmp_path / 'target.sqlite3'}"
    result = CliRunner(url)("import", *paths, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["events_imported"] == event_count(source)
    assert CliRunner(url)("verify").exit_code == 0


def test_a_signed_pinned_checkpoint_holds_every_bundle(tmp_path, workers):
    """--checkpoint and --verifier-key reach the checks in the worker processes: each
    bundle is held against the pinned note, and a key that did not sign it refuses all."""
    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    cli = CliRunner(source)
    key = tmp_path / "signer.key"
    verifier = cli("checkpoint", "--generate-key", key, "--json").json()["verifier_key"]
    signed = cli("checkpoint", "--sign", key, "--json").json()["note"]
    stranger = cli("checkpoint", "--generate-key", tmp_path / "other.key", "--json").json()
    paths = _exported(source, tmp_path)
    url = f"sqlite:///{tmp_path / 'target.sqlite3'}"
    pinned = ("--checkpoint", signed)
    refused = CliRunner(url)("import", *paths, *pinned, "--verifier-key", stranger["verifier_key"])
    assert refused.exit_code == 2 and "softmax-a-001.bundle.jsonl does not verify" in refused.stderr
    assert "(checkpoint: the checkpoint carries no valid signature" in refused.stderr
    assert event_count(url) == 0
    held = CliRunner(url)("import", *paths, *pinned, "--verifier-key", verifier, "--json")
    assert held.exit_code == 0, held.stderr
    assert held.json()["events_imported"] == event_count(source)


def test_an_event_id_another_run_holds_refuses_the_import(tmp_path):
    """Event ids are unique in a ledger: a bundle whose event id this ledger already holds
    under another run is refused by name, and nothing is written."""
    import sqlite3

    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    first_a = stream_rows(source, RUNS[0])[0]
    paths = _exported(source, tmp_path)
    target = tmp_path / "target.sqlite3"
    url = f"sqlite:///{target}"
    assert CliRunner(url)("import", paths[1]).exit_code == 0  # run B only
    with sqlite3.connect(target) as conn:  # its first event takes the id of A's first
        conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
        conn.execute("UPDATE events SET event_id = ? WHERE seq = 1", (first_a[0],))
    before = event_count(url)
    refused = CliRunner(url)("import", paths[0])
    assert refused.exit_code == 2, refused.stderr
    assert refused.stderr == (
        f"Error: event id {first_a[0]} of the bundle is already used by run 'softmax-b-001' "
        "version 1 in this ledger; nothing was imported\n"
    )
    assert event_count(url) == before


@pytest.mark.parametrize("order", ["older-first", "newer-first"])
def test_two_exports_of_one_run_in_one_command(tmp_path, workers, order):
    """An earlier and a later export of the same run: whichever comes first, the run is
    imported whole, once, with the source's events."""
    from ledger.services.service import LedgerService

    from campaign import Campaign

    source_url = f"sqlite:///{tmp_path / 'source.sqlite3'}"
    campaign = Campaign(tmp_path / "campaign", run_id="bundled-001")
    source = LedgerService(Store(source_url), clock=audit_kit.Clock())
    source.plan(campaign.config())
    audit_kit.record(source, campaign, [16.0, 37.0, 23.0])
    older = tmp_path / "older.jsonl"
    bundle.export_run(source.store, "bundled-001", older)
    audit_kit.record(source, campaign, [15.0, 37.0, 26.0])
    newer = tmp_path / "newer.jsonl"
    bundle.export_run(source.store, "bundled-001", newer)
    source.store.close()
    url = f"sqlite:///{tmp_path / 'target.sqlite3'}"
    paths = [older, newer] if order == "older-first" else [newer, older]
    result = CliRunner(url)("import", *paths, "--json")
    assert result.exit_code == 0, result.stderr
    counts = [b["events_imported"] for b in result.json()["bundles"]]
    assert counts == ([7, 4] if order == "older-first" else [11, 0])
    assert stream_rows(url, "bundled-001") == stream_rows(source_url, "bundled-001")
    assert CliRunner(url)("verify").exit_code == 0


# --- a bulk import into an empty SQLite ledger builds its indexes after the rows ---------


def _schema(path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY 2"
        ).fetchall()


def _all_rows(path) -> dict[str, list[tuple]]:
    """Every table's rows but the ledger's own id, once `PRAGMA integrity_check` found
    every index entry to match its row."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = [
            t
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if t != "ledger_info"
        ]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables}


def test_a_bulk_import_into_an_empty_ledger_builds_its_indexes_after(
    tmp_path, monkeypatch, workers, index_builds
):
    build_ledger(tmp_path / "src")
    paths = _exported(f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}", tmp_path)
    ledgers = {}
    for bulk in (False, True):
        monkeypatch.setattr(bundle, "_bulk", lambda paths, bulk=bulk: bulk)
        path = tmp_path / f"bulk-{bulk}.sqlite3"
        fresh = tmp_path / f"fresh-{bulk}.sqlite3"
        Store(f"sqlite:///{fresh}").close()
        assert CliRunner(f"sqlite:///{path}")("import", *paths).exit_code == 0
        assert _schema(path) == _schema(fresh)  # every index as the schema makes it
        ledgers[bulk] = _all_rows(path)
    assert index_builds == ["import"]
    assert ledgers[True] == ledgers[False]


def test_one_bundle_builds_the_indexes_after_from_the_bulk_size(
    tmp_path, monkeypatch, index_builds
):
    build_ledger(tmp_path / "src")
    first, _ = _exported(f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}", tmp_path)
    size = first.stat().st_size
    for threshold, builds in ((size + 1, []), (size, ["import"])):
        monkeypatch.setattr(bundle, "PARALLEL_MIN_BYTES", threshold)
        target = CliRunner(f"sqlite:///{tmp_path / f'target-{threshold}.sqlite3'}")
        assert target("import", first).exit_code == 0
        assert index_builds == builds
        assert target("verify").exit_code == 0
    assert bundle._import_workers([first]) == 0  # one bundle: nothing to check meanwhile


def test_a_refused_bulk_import_leaves_the_indexes_as_they_were(tmp_path, monkeypatch, workers):
    build_ledger(tmp_path / "src")
    good, other = _exported(f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}", tmp_path)
    monkeypatch.setattr(bundle, "_bulk", lambda paths: True)
    path, fresh = tmp_path / "target.sqlite3", tmp_path / "fresh.sqlite3"
    Store(f"sqlite:///{fresh}").close()
    refused = CliRunner(f"sqlite:///{path}")("import", good, _damaged(other, tmp_path))
    assert refused.exit_code == 2 and "nothing was imported" in refused.stderr
    assert _schema(path) == _schema(fresh)
    assert event_count(f"sqlite:///{path}") == 0


def test_indexes_stay_when_the_ledger_holds_events_or_is_shared(
    db_url, other_url, tmp_path, monkeypatch, index_builds
):
    """A ledger that holds events keeps its indexes up to date row by row (building them
    again would read every row it holds), and so does PostgreSQL (its DROP INDEX would
    lock out the ledger's readers until the import commits)."""
    build_ledger(tmp_path / "src", url=db_url)
    first, second = _exported(db_url, tmp_path)
    monkeypatch.setattr(bundle, "_bulk", lambda paths: True)
    target = CliRunner(other_url)
    assert target("import", first).exit_code == 0
    assert index_builds == (["import"] if other_url.startswith("sqlite") else [])
    assert target("import", second, first).exit_code == 0
    assert index_builds == (["import"] if other_url.startswith("sqlite") else [])
    for run_id in RUNS:
        assert stream_rows(other_url, run_id) == stream_rows(db_url, run_id)
    assert target("verify").exit_code == 0
