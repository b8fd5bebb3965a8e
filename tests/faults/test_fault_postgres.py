"""PostgreSQL faults, on a private cluster of our own (the shared one must not be stopped):
a connection dropped in the middle of an append (its backend terminated, or the whole
server stopped) and the append retried with the same event ids leaves exactly one copy;
a server restarted in the middle of a run gives clear exit-4 errors, then work resumes."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultkit import (
    Files,
    cli,
    event_rows,
    one_line_error,
    pg_start,
    pg_stop,
    private_cluster,
    record_figures,
    write_json,
)
from sqlalchemy import event

from ledger.errors import ConflictError, StoreUnavailable
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store


@pytest.fixture(scope="module")
def cluster() -> Iterator:
    pg, reason = private_cluster()
    if pg is None:
        pytest.skip(reason)
    yield pg
    pg.stop()


class Campaign:
    """A fresh database on the private cluster with one planned run."""

    def __init__(self, cluster, root: Path, run_id: str) -> None:
        self.cluster = cluster
        self.run_id = run_id
        self.name = f"faults_{uuid.uuid4().hex[:10]}"
        self.url = cluster.create_database(self.name)
        Store(self.url, check_schema=False).upgrade()
        self.root = root
        self.files = Files(root / "files")
        result = cli("plan", "--config", self.files.config(run_id, root), db=self.url)
        assert result.code == 0, result.stderr

    def round_file(self, number: int) -> Path:
        doc = self.files.round_doc(number, self.files.kernel_sha, candidate=number % 4)
        return write_json(self.root / "rounds" / f"round-{number}.json", doc)


class Replay:
    """Event ids for LedgerService: the same sequence again on every `rewind()`."""

    def __init__(self, count: int = 8) -> None:
        self.ids = [str(uuid.uuid4()) for _ in range(count)]
        self.next = 0

    def __call__(self) -> str:
        self.next += 1
        return self.ids[self.next - 1]

    def rewind(self) -> None:
        self.next = 0


def _backend_pid(conn) -> int:
    return conn.connection.dbapi_connection.info.backend_pid


def _drop_on(store: Store, moment: str, drop) -> list[str]:
    """Call `drop(conn)` once, at `moment`: before the INSERT of the events, or just before
    COMMIT. Returns a list that records the moment once it happened."""
    happened: list[str] = []

    def before_insert(conn, _cursor, statement, *_args) -> None:
        if not happened and statement.lstrip().upper().startswith("INSERT INTO EVENTS"):
            happened.append(moment)
            drop(conn)

    def before_commit(conn) -> None:
        if not happened and conn.get_execution_options().get("ledger_write"):
            happened.append(moment)
            drop(conn)

    if moment == "insert":
        event.listen(store.engine, "before_cursor_execute", before_insert)
    else:
        event.listen(store.engine, "commit", before_commit)
    return happened


@pytest.mark.parametrize(
    ("moment", "how"),
    [("insert", "terminate"), ("commit", "terminate"), ("insert", "stop server")],
)
def test_connection_dropped_mid_append_then_retried(cluster, tmp_path: Path, moment, how):
    campaign = Campaign(cluster, tmp_path, "drop-001")
    before = event_rows(campaign.url)
    ids = Replay()
    store = Store(campaign.url)
    service = LedgerService(store, new_id=ids)
    calls: list[tuple] = []
    append = service.append

    def remembering_append(*args, **kwargs):
        calls.append((args, kwargs))
        return append(*args, **kwargs)

    service.append = remembering_append  # type: ignore[method-assign]

    def drop(conn) -> None:
        if how == "terminate":
            cluster.psql("SELECT pg_terminate_backend(%s)", [_backend_pid(conn)])
        else:
            pg_stop(cluster)

    happened = _drop_on(store, moment, drop)
    try:
        with pytest.raises(StoreUnavailable) as info:
            service.record(campaign.run_id, campaign.round_file(1))
    finally:
        if how == "stop server":
            pg_start(cluster)
    assert happened == [moment]
    message = str(info.value)
    assert info.value.exit_code == 4 and "\n" not in message
    assert campaign.url.split("@")[1] in message or "127.0.0.1" in message, message
    store.close()
    assert event_rows(campaign.url) == before  # the dropped append left nothing

    # the writer retries the very same append: same events, same event ids
    ids.rewind()
    retry_store = Store(campaign.url)
    retry = LedgerService(retry_store, new_id=ids)
    args, kwargs = calls[0]
    _, stored = retry.append(*args, **kwargs)
    assert [e.event_id for e in stored] == ids.ids[: len(stored)]
    # ... and once more, as if that acknowledgement had been lost too: it is recognised
    # as a retry, answered with the stored events, and nothing new is written
    ids.rewind()
    _, again = retry.append(*args, **kwargs)
    assert [e.event_hash for e in again] == [e.event_hash for e in stored]
    retry_store.close()
    rows = event_rows(campaign.url)
    assert len(rows) == len(before) + len(stored)  # exactly one copy
    assert all(rows[e.event_id][0] == e.event_hash for e in stored)
    verify = cli("verify", "--json", db=campaign.url)
    assert verify.code == 0, verify.stdout
    record_figures(
        f"postgres[dropped at {moment}, {how}]",
        error=message[:120],
        copies_after_two_retries=1,
        events=len(stored),
    )


def test_retry_of_an_acknowledged_append_is_recognised(cluster, tmp_path: Path):
    campaign = Campaign(cluster, tmp_path, "ack-000")
    ids = Replay()
    store = Store(campaign.url)
    service = LedgerService(store, new_id=ids)
    calls: list[tuple] = []
    append = service.append

    def remembering_append(*args, **kwargs):
        calls.append((args, kwargs))
        return append(*args, **kwargs)

    service.append = remembering_append  # type: ignore[method-assign]
    service.record(campaign.run_id, campaign.round_file(1))
    rows = event_rows(campaign.url)
    ids.rewind()
    args, kwargs = calls[0]
    try:
        _, again = append(*args, **kwargs)  # the acknowledgement was lost: send it again
    finally:
        store.close()
    assert [e.event_id for e in again] == ids.ids[: len(again)]
    assert event_rows(campaign.url) == rows


def test_retry_with_new_ids_after_a_lost_acknowledgement_is_a_conflict(cluster, tmp_path):
    """Only a retry with the same event ids is recognised as a retry: the same content with
    fresh ids is another writer's append at a stale version (exit 3), nothing written."""
    campaign = Campaign(cluster, tmp_path, "ack-001")
    store = Store(campaign.url)
    service = LedgerService(store)
    view = service.view(campaign.run_id)
    from ledger.core.events import DiagnosisRecorded

    item = DiagnosisRecorded(
        bottleneck="vector-compute", evidence="x", after_round=0, consecutive_failures_before=0
    )
    service.append(campaign.run_id, view, [item], [])
    rows = event_rows(campaign.url)
    with pytest.raises(ConflictError):
        service.append(campaign.run_id, view, [item], [])
    store.close()
    assert event_rows(campaign.url) == rows


def test_server_restarted_mid_run(cluster, tmp_path: Path):
    campaign = Campaign(cluster, tmp_path, "restart-001")
    for number in (1, 2):
        result = cli(
            "record",
            "--run",
            campaign.run_id,
            "--result",
            campaign.round_file(number),
            db=campaign.url,
        )
        assert result.code == 0, result.stderr
    long_lived = LedgerService(Store(campaign.url))  # holds pooled connections across it
    assert long_lived.view(campaign.run_id).run.rounds_recorded == 2
    pg_stop(cluster, "fast")
    outages = {}
    try:
        for name, args in {
            "record": ["record", "--run", campaign.run_id, "--result", campaign.round_file(3)],
            "status": ["status", "--run", campaign.run_id],
            "history": ["history"],
            "verify": ["verify"],
        }.items():
            result = cli(*args, "--json", db=campaign.url)
            assert result.code == 4, (name, result.stderr)
            assert one_line_error(result.stderr, result.stdout) and "is unavailable" in result.said
            assert json.loads(result.stdout)["exit_code"] == 4
            assert result.seconds < 10, (name, result.seconds)  # refused at once, no hang
            outages[name] = round(result.seconds, 3)
        with pytest.raises(StoreUnavailable):
            long_lived.view(campaign.run_id)
    finally:
        pg_start(cluster)
    # work resumes: the long-lived service reconnects, new commands work
    assert long_lived.view(campaign.run_id).run.rounds_recorded == 2
    result = cli(
        "record",
        "--run",
        campaign.run_id,
        "--result",
        campaign.round_file(3),
        "--json",
        db=campaign.url,
    )
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["round"] == 3
    long_lived.store.close()
    history = cli("history", "--run", campaign.run_id, "--json", db=campaign.url).json()
    assert [r["round"] for r in history["rounds"]] == [1, 2, 3]
    assert cli("verify", db=campaign.url).code == 0
    record_figures("postgres[server restarted mid-run]", refused_in_s=outages, resumed=True)
