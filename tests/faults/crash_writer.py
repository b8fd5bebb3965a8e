"""Kill -9 writers at random moments while they append, and report what they acknowledged.

    python tests/faults/crash_writer.py --db URL --work DIR --kills N --seed S --report FILE

The driver imports everything once, then N times: forks a writer, sleeps a random time
(uniform in 0..--max-delay-ms), sends it SIGKILL and reaps it. A writer opens the ledger
through the real `Store` and `LedgerService` and appends without pause: it plans runs,
records rounds (FAIL, DISCARD, or DISCARD with a profile: batches of 3, 4 and 5 events) and
concludes runs that used their budget, continuing whatever the killed writers before it
left behind. Before each append it announces on a pipe the event ids the batch will carry
("B"), marks the moment it is inside the write transaction ("T"), and after the append
returned (committed) prints what was stored ("A"). The report
lists every acknowledged event and every batch that was in flight when its writer died;
the test compares them with the database.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]

from faultkit import Files  # noqa: E402

ROUNDS_PER_RUN = 8


def writer(url: str, work: Path, files: Files, seed: int, out: int) -> None:
    """One writer: append until killed. Never returns normally."""
    from ledger.services.service import LedgerService
    from ledger.store.eventstore import Store
    from ledger.store.history import list_runs

    rng = random.Random(seed)
    store = Store(url)
    appended: list = []
    original_append = store.append_or_find

    def capturing_append(conn, stream_id, expected_version, batch):
        os.write(out, b"T\n")  # inside the write transaction now
        stored, written = original_append(conn, stream_id, expected_version, batch)
        appended.extend(stored)
        return stored, written

    store.append_or_find = capturing_append  # type: ignore[method-assign]
    announced: list[str] = []

    def say(tag: str, value: object) -> None:
        os.write(out, f"{tag} {json.dumps(value)}\n".encode())

    service = LedgerService(store, new_id=lambda: announced.pop(0))

    while True:
        with store.transaction() as conn:
            open_runs = [r for r in list_runs(conn) if r.conclusion is None]
            run_count = len(store.all_run_ids(conn))
        appended.clear()
        if not open_runs:
            run_id = f"crash-{run_count + 1:05d}"
            config = files.config(run_id, work / "configs", max_rounds=ROUNDS_PER_RUN)
            announced[:] = [str(uuid.uuid4()) for _ in range(3)]
            say("B", {"kind": "plan", "run": run_id, "ids": announced})
            service.plan(config)
        else:
            run = open_runs[0]
            if run.rounds_recorded >= run.max_rounds:
                announced[:] = [str(uuid.uuid4())]
                say("B", {"kind": "conclude", "run": run.run_id, "ids": announced})
                service.conclude(run.run_id)
            else:
                number = run.rounds_recorded + 1
                kind = rng.choice(("fail", "discard", "profiled"))
                doc = files.round_doc(
                    number,
                    run.best_kernel_sha256,
                    candidate=None if kind == "fail" else rng.randrange(len(files.passed)),
                    factor=1.05,
                    signals=kind == "profiled",
                )
                path = work / "rounds" / f"{run.run_id}-{number}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(doc))
                size = {"fail": 3, "discard": 4, "profiled": 5}[kind]
                announced[:] = [str(uuid.uuid4()) for _ in range(size)]
                say("B", {"kind": kind, "run": run.run_id, "ids": list(announced)})
                service.record(run.run_id, path)
        if announced:
            raise RuntimeError(f"the batch used fewer ids than announced: {announced}")
        say(
            "A",
            [[e.event_id, e.event_hash, e.stream_id, e.stream_version, e.seq] for e in appended],
        )


def warm_up(work: Path, files: Files) -> None:
    """Import and exercise every code path once in a scratch ledger, so that forked writers
    start appending at once. No connection stays open (fork safety)."""
    from ledger.services.service import LedgerService
    from ledger.store.eventstore import Store

    store = Store(f"sqlite:///{work / 'warm-up.sqlite3'}")
    service = LedgerService(store)
    service.plan(files.config("warm-up", work / "configs"))
    for number, kind in enumerate(("fail", "discard", "profiled"), start=1):
        doc = files.round_doc(
            number, files.kernel_sha, candidate=None if kind == "fail" else 0, signals=True
        )
        path = work / "rounds" / f"warm-up-{number}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
        service.record("warm-up", path)
    service.conclude("warm-up")
    store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", required=True)
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--kills", required=True, type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-delay-ms", type=float, default=120.0)
    parser.add_argument("--report", required=True, type=Path)
    args = parser.parse_args()
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    files = Files(work / "files")
    warm_up(work, files)
    from ledger.store.eventstore import Store

    Store(args.db).close()  # the ledger exists before the first kill
    rng = random.Random(args.seed)
    acked: list[list] = []
    in_flight: list[dict] = []
    errors: list[str] = []
    kills_in_flight = kills_in_transaction = 0
    started = time.monotonic()
    for index in range(args.kills):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer
            os.close(read_end)
            try:
                writer(args.db, work, files, args.seed * 100_003 + index, write_end)
            except BaseException as exc:
                os.write(write_end, f"E {type(exc).__name__}: {exc}\n".encode()[:4000])
            os._exit(3)
        os.close(write_end)
        time.sleep(rng.uniform(0, args.max_delay_ms) / 1000)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        os.close(read_end)
        pending = None
        inside = False
        for line in b"".join(chunks).decode().splitlines(keepends=True):
            if not line.endswith("\n"):
                continue  # a line cut by the kill is not an acknowledgement
            tag, _, body = line.rstrip("\n").partition(" ")
            if tag == "B":
                pending, inside = json.loads(body), False
            elif tag == "T":
                inside = True
            elif tag == "A":
                acked.extend(json.loads(body))
                pending, inside = None, False
            elif tag == "E":
                errors.append(body)
        if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
            errors.append(f"writer {index} ended by itself (status {status})")
        if pending is not None:
            in_flight.append(pending)
            kills_in_flight += 1
            kills_in_transaction += inside
    args.report.write_text(
        json.dumps(
            {
                "kills": args.kills,
                "kills_in_flight": kills_in_flight,
                "kills_in_transaction": kills_in_transaction,
                "acked": acked,
                "in_flight": in_flight,
                "errors": errors,
                "seconds": round(time.monotonic() - started, 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
