"""The benchmark ledgers are real ledgers: written through the store's append path, they pass
every check of `verify` on both backends. Also the store paths the benchmarks drove faster:
batched blobs, positional rows, paged reads. No timings are asserted here."""

from __future__ import annotations

import hashlib

from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.store.eventstore import RoundFilter, Store, query_rounds, rounds_query
from ledger.verify import verify_ledger


def _write(store: Store, runs: int, *, distinct: int = 0, shape: Shape | None = None) -> int:
    writer = BulkWriter(store, batch=200)
    generator = Generator(shape or Shape(rounds=6), prefix="t", distinct=distinct)
    for k in range(runs):
        writer.add(generator.run(k))
    writer.flush()
    return writer.events_written


def test_generated_ledger_passes_verify(store: Store):
    shape = Shape(rounds=6, samples_every=2, samples=12, profile_every=2)
    written = _write(store, 5, distinct=3, shape=shape)  # runs 3 and 4 replay runs 0 and 1
    report = verify_ledger(store)
    assert report.ok, report.as_dict()
    assert report.events_checked == written
    assert report.runs_checked == 5
    with store.transaction() as conn:
        assert store.event_count(conn) == written
        kinds = {e.event_type for e in store.iter_events(conn)}
        rounds = query_rounds(conn, RoundFilter())
    assert kinds >= {
        "RunPlanned",
        "ValidationLinked",
        "MeasurementsRecorded",
        "RoundSubmitted",
        "RoundDecided",
        "ProfileRecorded",
        "RunConcluded",
    }
    assert len(rounds) == 5 * 6
    assert {r.decision for r in rounds} >= {"KEEP", "FAIL"}


def test_a_replayed_run_has_its_own_identity(store: Store):
    _write(store, 3, distinct=2)
    with store.transaction() as conn:
        first = store.read_stream(conn, "softmax-t-0000000")
        again = store.read_stream(conn, "softmax-t-0000002")  # run 2 replays run 0
    assert [e.event_type for e in first] == [e.event_type for e in again]
    assert first[0].payload != again[0].payload  # RunPlanned names its run
    assert {e.event_hash for e in first}.isdisjoint(e.event_hash for e in again)


def test_put_blobs_stores_each_content_once_and_returns_digests_in_order(store: Store):
    a, b = b"# kernel a\n", b"# kernel b\n"
    with store.transaction(write=True) as conn:
        store.put_blob(conn, a)
        digests = store.put_blobs(conn, [b, a, b])
    assert digests == [hashlib.sha256(x).hexdigest() for x in (b, a, b)]
    with store.transaction() as conn:
        stored = dict(store.iter_blobs(conn))
        assert store.put_blobs(conn, []) == []
    assert stored == {hashlib.sha256(a).hexdigest(): a, hashlib.sha256(b).hexdigest(): b}


def test_paged_reads_cross_page_boundaries_in_seq_order(store: Store):
    written = _write(store, 3)
    with store.transaction() as conn:
        everything = list(store.iter_events(conn, batch=7))
        one = list(store.iter_events(conn, batch=5, stream_id="layernorm-t-0000001"))
    assert [e.seq for e in everything] == list(range(1, written + 1))
    assert [e.stream_version for e in one] == list(range(1, len(one) + 1))
    assert all(e.stream_id == "layernorm-t-0000001" for e in one)
    assert all(e.computed_hash() == e.event_hash for e in everything)


def test_history_filters_are_served_by_an_index(sqlite_url: str):
    """The SQLite plan of every benchmarked history filter searches an index: none of them
    scans the rounds table, and a filter with a limit reads its index in time order instead of
    sorting every match (the benchmark measures how much that saves)."""
    store = Store(sqlite_url)
    _write(store, 4)
    filters = [
        RoundFilter(run_id="softmax-t-0000000"),
        RoundFilter(op_name="softmax", decision="KEEP", limit=50),
        RoundFilter(bottleneck="scalar-flow-control", limit=50),
        RoundFilter(mechanism="NUM_STAGES", limit=50),
        RoundFilter(soc="Ascend910B2", decision="FAIL", limit=50),
        RoundFilter(soc="Ascend910B2", limit=50),
        RoundFilter(op_name="gelu", since="2025-01-01T00:00:00Z", until="2025-01-02T00:00:00Z"),
        RoundFilter(decision="KEEP", since="2025-01-01T00:00:00Z", until="2025-01-02T00:00:00Z"),
    ]
    with store.transaction() as conn:
        for f in filters:
            statement, values = rounds_query(f)
            compiled = statement.compile(dialect=store.engine.dialect)
            params = tuple(values.get(n, compiled.params[n]) for n in compiled.positiontup or ())
            plan = " ".join(
                str(row[-1])
                for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", params)
            )
            assert "SEARCH rounds USING" in plan and "SCAN rounds" not in plan, (f, plan)
            if f.limit is not None:  # read in recorded_at order and stop after `limit` rows
                assert "TEMP B-TREE FOR ORDER BY" not in plan, (f, plan)
    store.close()
