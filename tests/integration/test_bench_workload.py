"""The benchmark ledgers are real ledgers: written through the store's append path, they pass
every check of `verify` on both backends. Also the store paths the benchmarks drove faster:
batched blobs, positional rows, paged reads. No timings are asserted here."""

from __future__ import annotations

import hashlib

import pytest

from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.core.projections import RoundRow
from ledger.errors import StoreUnavailable
from ledger.integrity.verify import verify_ledger
from ledger.store.eventstore import Store
from ledger.store.history import (
    RoundFilter,
    fetch_rounds,
    query_rounds,
    rounds_query,
    rounds_sql,
    rounds_with_bottleneck,
)


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
    scans the rounds table, and every filter but --run reads its index in the query's exact
    order (recorded_at, run_id, round), so nothing is sorted and a --limit stops the read
    (the benchmark measures how much that saves)."""
    store = Store(sqlite_url)
    _write(store, 4)
    filters = [
        RoundFilter(run_id="softmax-t-0000000"),
        RoundFilter(op_name="softmax", decision="KEEP", limit=50),
        RoundFilter(bottleneck="scalar-flow-control", limit=50),
        RoundFilter(mechanism="NUM_STAGES", limit=50),
        RoundFilter(soc="Ascend910B2", decision="FAIL", limit=50),
        RoundFilter(mechanism="NUM_STAGES", decision="KEEP", limit=50),
        RoundFilter(bottleneck="scalar-flow-control", decision="DISCARD", limit=50),
        RoundFilter(soc="Ascend910B2", limit=50),
        RoundFilter(op_name="gelu", since="2025-01-01T00:00:00Z", until="2025-01-02T00:00:00Z"),
        RoundFilter(decision="KEEP", since="2025-01-01T00:00:00Z", until="2025-01-02T00:00:00Z"),
        RoundFilter(op_name="softmax", actor="nobody"),
        RoundFilter(session="s-0000001", limit=50),
    ]
    with store.transaction() as conn:
        for f in filters:
            sql, params = rounds_sql(conn, f)
            plan = " ".join(
                str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            )
            assert "SEARCH rounds USING" in plan and "SCAN rounds" not in plan, (f, plan)
            if f.run_id is None:  # a run's ~20 rounds come by its key and are sorted
                assert "TEMP B-TREE" not in plan, (f, plan)
            if f.actor is not None:  # each decision's actor from the index that holds it
                assert "ix_events_stream_id_event_type_recorded_at_actor (stream_id=?" in plan
            if f.decision is not None and f.since is None:  # both equalities from the index
                assert "decision=?" in plan and plan.count("=?") == 2, (f, plan)
    store.close()


def test_history_rows_read_by_the_driver_equal_sqlalchemys(store: Store):
    """`query_rounds` reads rows with the driver's cursor; they equal, value for value and
    type for type, the rows SQLAlchemy's own result gives for the same statement (booleans
    are bool on SQLite too, NULLs stay None) for every kind of filter."""
    _write(store, 6, shape=Shape(rounds=6, profile_every=2))
    with store.transaction() as conn:
        every = query_rounds(conn, RoundFilter())
        middle = sorted(r.recorded_at for r in every)[len(every) // 2]
        first = every[0]
        filters = [
            RoundFilter(),
            RoundFilter(run_id=first.run_id),
            RoundFilter(op_name=first.op_name, decision=first.decision, limit=3),
            RoundFilter(soc=first.soc, limit=5),
            RoundFilter(mechanism=next(r.mechanism for r in every if r.mechanism), limit=4),
            RoundFilter(bottleneck=next(r.bottleneck for r in every if r.bottleneck)),
            RoundFilter(since=middle),
            RoundFilter(until=middle, decision="FAIL"),
            RoundFilter(search=first.hypothesis[2:9].upper()),
            RoundFilter(search="100%_\\"),
        ]
        for f in filters:
            statement, values = rounds_query(f)
            expected = list(map(RoundRow._make, conn.execute(statement, values)))
            found = query_rounds(conn, f)
            assert found == expected, f
            assert [list(map(type, r)) for r in found] == [list(map(type, r)) for r in expected]
        assert [len(query_rounds(conn, f)) for f in filters[:2]] == [36, 6]
        assert any(r.mechanism_confirmed is None for r in every)
        assert {type(r.target_met) for r in every} == {bool}
        bottleneck = next(r.bottleneck for r in every if r.bottleneck)
        newest = rounds_with_bottleneck(conn, bottleneck, 3)
        matching = [r for r in every if r.bottleneck == bottleneck]
        assert newest == sorted(matching, key=lambda r: r.recorded_at, reverse=True)[:3]


def test_a_driver_error_in_a_history_read_is_the_stores_error(store: Store):
    with pytest.raises(StoreUnavailable, match=r"no_such_column"), store.transaction() as conn:
        fetch_rounds(conn, "SELECT no_such_column FROM rounds", ())
