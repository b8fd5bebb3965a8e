"""1b. The bulk paths that move events which already are canonical bytes with known hashes:
`import` of bundles and `db copy`, against raw inserts of the rows they write and against
pyeventsourcing saving the same number of events.

The source: generated runs written through the real append path (`workload.BulkWriter`),
each run exported as a bundle (`bundle.export_run`). Per repetition, in turn:

  import        every bundle imported into a fresh ledger (`bundle.import_bundle`: read and
                check the file, events, proofs, replay; one transaction per bundle, as the
                `import` command does)
  import floor  every row the imports wrote (events, projection rows, blobs), inserted by
                the raw driver into a fresh ledger of the same schema, one transaction per
                run, with the store's pragmas (WAL, synchronous=FULL)
  import, one command
                every bundle in one `import` (`bundle.import_bundles`: one transaction, the
                bundles after the one being written checked meanwhile in worker processes,
                one per idle CPU besides the writer's), against the floor in one transaction
  copy          `db copy` of the source into a fresh ledger (`integrity.copy.copy_ledger`: read,
                check each event, fold, insert, read back; one transaction)
  copy floor    every row the copy wrote, by the raw driver, in one transaction
  copy, checker the same copy with its reading, checks and folds in a second process
                (`copy_ledger(checker=True)`), against the floor of the rows it wrote
  peer          pyeventsourcing 9.5.6 (`Application.save` on its SQLite recorder, WAL, the
                same synchronous=FULL) saving the same number of events, each carrying the
                same payload as a dict, in a process of its own environment: one save per run
                (as the imports commit) and ~1,000-event saves (its fastest)

The peer runs in a virtual environment the benchmark makes for it (`.venv-peer/`, ignored
by git; `pip install eventsourcing==9.5.6` once); it is not a dependency of the project.
"""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

from benchmarks.bench_append import all_rows_batches, every_row
from benchmarks.common import ROOT, Section, Series, goal, progress, ratios, remove_sqlite
from benchmarks.common import sqlite_url as url_of
from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.store.eventstore import Store

PEER = "eventsourcing==9.5.6"
PEER_VENV = ROOT / ".venv-peer"
PRAGMAS = (
    "PRAGMA busy_timeout = 5000",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = FULL",
    "PRAGMA foreign_keys = ON",
)


class Workspace:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def fresh(self, name: str) -> Path:
        self.count += 1
        path = self.folder / f"{name}-{self.count}.sqlite3"
        remove_sqlite(path)
        Store(url_of(path)).close()  # created at head: schema, indexes, triggers
        return path


def build_source(space: Workspace, runs: int) -> tuple[Path, list[Path], int]:
    """The source ledger, one bundle per run, and the number of events."""
    from ledger.integrity.bundle import export_run

    generator = Generator(Shape(), prefix="bulk")
    path = space.fresh("source")
    store = Store(url_of(path))
    writer = BulkWriter(store, batch=1000)
    ids = []
    for k in range(runs):
        run = generator.run(k)
        ids.append(run.run_id)
        writer.add(run)
    writer.flush()
    bundles = []
    for run_id in ids:
        out = space.folder / "bundles" / f"{run_id}.bundle.jsonl"
        export_run(store, run_id, out)
        bundles.append(out)
    store.close()
    return path, bundles, writer.events_written


Timing = tuple[float, float]  # (wall-clock seconds, CPU seconds)


def cpu_with_children() -> float:
    """CPU seconds of this thread and of the child processes that ended (a path's worker
    processes end before it returns, so its CPU time counts theirs)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def run_import(space: Workspace, bundles: list[Path]) -> tuple[Timing, Path]:
    from ledger.integrity.bundle import import_bundle

    path = space.fresh("import")
    store = Store(url_of(path))
    start, cpu = time.perf_counter(), time.thread_time()
    for bundle in bundles:
        import_bundle(store, bundle)
    timing = (time.perf_counter() - start, time.thread_time() - cpu)
    store.close()
    return timing, path


def run_import_all(space: Workspace, bundles: list[Path]) -> tuple[Timing, Path]:
    from ledger.integrity.bundle import import_bundles

    path = space.fresh("import-all")
    store = Store(url_of(path))
    start, cpu = time.perf_counter(), cpu_with_children()
    import_bundles(store, bundles)
    timing = (time.perf_counter() - start, cpu_with_children() - cpu)
    store.close()
    return timing, path


def run_copy(space: Workspace, source: Path, checker: bool | None = None) -> tuple[Timing, Path]:
    from ledger.integrity.copy import copy_ledger, open_target

    path = space.folder / f"copy-{space.count + 1}.sqlite3"
    space.count += 1
    remove_sqlite(path)
    src = Store(url_of(source))
    target = open_target(src, url_of(path))  # creating the empty target is not timed
    start, cpu = time.perf_counter(), cpu_with_children()
    copy_ledger(src, target, checker=checker)
    timing = (time.perf_counter() - start, cpu_with_children() - cpu)
    src.close()
    target.close()
    return timing, path


def raw_floor(space: Workspace, written: Path, sizes: list[int]) -> Timing:
    """Seconds (wall, CPU) for the raw driver to insert every row `written` holds (events,
    projection rows, blobs) into a fresh ledger, in transactions of `sizes` events (each
    run's rows with its events), with the store's pragmas."""
    with sqlite3.connect(written) as src:
        events = src.execute("SELECT * FROM events ORDER BY seq").fetchall()
        batches = all_rows_batches(src, every_row(src, events), sizes)
    path = space.fresh("floor")
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in PRAGMAS:
        conn.execute(pragma)
    start, cpu = time.perf_counter(), time.thread_time()
    for batch in batches:
        conn.execute("BEGIN IMMEDIATE")
        for table, chunk in batch:
            marks = ", ".join("?" * len(chunk[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", chunk)
        conn.execute("COMMIT")
    timing = (time.perf_counter() - start, time.thread_time() - cpu)
    conn.close()
    remove_sqlite(path)
    return timing


def run_sizes(path: Path) -> list[int]:
    """Events per run, in the order the runs' first events appear (one import each)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT stream_id, COUNT(*), MIN(seq) FROM events GROUP BY stream_id ORDER BY 3"
        ).fetchall()
    return [n for _, n, _ in rows]


# --- the peer ------------------------------------------------------------------------------


def peer_python() -> Path | str:
    """The peer environment's interpreter (made once), or why there is none."""
    python = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / ".installed"
    if marker.exists() and marker.read_text().strip() == PEER:
        return python
    progress(f"making {PEER_VENV.name} with {PEER}")
    venv.create(PEER_VENV, with_pip=True, clear=True)
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PEER],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return f"pip install {PEER} failed: {done.stderr.strip()[-300:]}"
    marker.write_text(PEER + "\n")
    return python


def write_peer_input(source: Path, out: Path) -> None:
    """The source's payloads as JSON Lines, one line per run: the peer saves the same
    events with the same payload values."""
    with sqlite3.connect(source) as conn, out.open("w") as handle:
        runs: dict[str, list[Any]] = {}
        for stream, payload in conn.execute("SELECT stream_id, payload FROM events ORDER BY seq"):
            runs.setdefault(stream, []).append(json.loads(payload))
        for payloads in runs.values():
            handle.write(json.dumps(payloads) + "\n")


def run_peer(python: Path, payloads: Path, folder: Path, mode: str) -> Timing:
    """Seconds (wall, CPU) pyeventsourcing took to save every event (`mode`: per-run or
    batched)."""
    db = folder / f"peer-{mode}.sqlite3"
    remove_sqlite(db)
    done = subprocess.run(
        [str(python), str(Path(__file__).with_name("peer_eventsourcing.py")), str(db), mode],
        input=payloads.read_text(),
        capture_output=True,
        text=True,
        check=False,
    )
    remove_sqlite(db)
    if done.returncode != 0:
        raise RuntimeError(f"pyeventsourcing benchmark failed: {done.stderr.strip()[-2000:]}")
    result = json.loads(done.stdout)
    if result["synchronous"] != 2:
        raise RuntimeError(f"the peer ran at synchronous={result['synchronous']}, not FULL")
    return result["seconds"], result["cpu_seconds"]


# --- the section ---------------------------------------------------------------------------

FLOOR_HEADERS = [
    "path",
    "events/s",
    "raw inserts of the same rows (events/s)",
    "ratio",
    "CPU µs/event, path / floor",
    "CPU ratio",
]


def floor_row(
    section: Section, key: str, label: str, rate: dict[str, Series], cpu: dict[str, Series]
) -> list[str]:
    """A path's row against its floor (`key` and `key_floor` in `rate` and `cpu`), its
    wall-clock and CPU ratios kept in the section's figures."""
    floor = f"{key}_floor"
    wall = ratios(rate[key].values, rate[floor].values)
    used = ratios(cpu[floor].values, cpu[key].values)
    section.figures[f"{key}_ratio"] = wall.as_dict()
    section.figures[f"{key}_cpu_ratio"] = used.as_dict()
    return [
        label,
        rate[key].show(),
        rate[floor].show(),
        wall.show("{:.2f}"),
        f"{cpu[key].show('{:.0f}')} / {cpu[floor].show('{:.0f}')}",
        used.show("{:.2f}"),
    ]


def measure(folder: Path, *, runs: int, repeats: int) -> Section:
    section = Section(key="bulk", title="Import and copy (SQLite)")
    space = Workspace(folder)
    progress(f"bulk: writing {runs} runs and exporting a bundle of each")
    source, bundles, events = build_source(space, runs)
    per_run = run_sizes(source)
    python = peer_python()
    payloads = folder / "peer-input.jsonl"
    write_peer_input(source, payloads)
    keys = (
        "import",
        "import_floor",
        "import_all",
        "import_all_floor",
        "copy",
        "copy_floor",
        "copy_checker",
        "copy_checker_floor",
        "peer_per_run",
        "peer_batched",
    )
    rate = {k: Series() for k in keys}  # events per wall-clock second
    cpu = {k: Series() for k in keys}  # CPU microseconds per event

    def add(key: str, timing: Timing) -> None:
        rate[key].add(events / timing[0])
        cpu[key].add(timing[1] * 1e6 / events)

    for rep in range(repeats):
        progress(f"bulk: repetition {rep + 1}")
        timing, written = run_import(space, bundles)
        add("import", timing)
        add("import_floor", raw_floor(space, written, per_run))
        remove_sqlite(written)
        timing, written = run_import_all(space, bundles)
        add("import_all", timing)
        add("import_all_floor", raw_floor(space, written, [events]))
        remove_sqlite(written)
        timing, written = run_copy(space, source)
        add("copy", timing)
        add("copy_floor", raw_floor(space, written, [events]))
        remove_sqlite(written)
        timing, written = run_copy(space, source, checker=True)
        add("copy_checker", timing)
        add("copy_checker_floor", raw_floor(space, written, [events]))
        remove_sqlite(written)
        if not isinstance(python, str):
            add("peer_per_run", run_peer(python, payloads, folder, "per-run"))
            add("peer_batched", run_peer(python, payloads, folder, "batched"))
    rows = []
    for key, label in (
        ("import", f"`import` of {len(bundles)} bundles (one transaction each)"),
        ("import_all", f"`import` of the {len(bundles)} bundles in one command (one transaction)"),
        ("copy", "`db copy` (one transaction)"),
        ("copy_checker", "`db copy`, checks and folds in a second process"),
    ):
        rows.append(floor_row(section, key, label, rate, cpu))
    section.intro = (
        f"{events:,} events in {runs} runs (~{events // runs} events per run), written through "
        "the append path and exported as one bundle per run. Events per second, median "
        f"[min-max] of {repeats} repetitions; each ratio is taken within one repetition. The "
        "floor inserts every row the path wrote (events, projection rows, blobs) with the raw "
        "driver, in the same transactions, at the same durability (WAL, synchronous=FULL). "
        "CPU: this thread's CPU time (`time.thread_time`) per event, with the worker processes' "
        "where a path starts any, path / floor, and the "
        "ratio floor / path: the figure that waiting for the disk and for the other processes "
        "on a shared machine does not move. "
        "`db copy` reads, checks and folds in a second process by itself from 20,000 events "
        "when two CPUs are idle; this source is smaller, so that row asks for it."
    )
    section.table(FLOOR_HEADERS, rows)
    section.figures.update(
        events=events,
        runs=runs,
        # (the peer's series stay empty where its environment could not be made)
        events_per_s={k: v.as_dict() for k, v in rate.items() if v.values},
        cpu_us_per_event={k: v.as_dict() for k, v in cpu.items() if v.values},
    )
    section.notes.append(
        "Goal (≥ 0.5x the raw inserts, wall clock): import "
        f"{goal(section.figures['import_ratio']['median'], 0.5)}; import in one command "
        f"{goal(section.figures['import_all_ratio']['median'], 0.5)}; copy "
        f"{goal(section.figures['copy_ratio']['median'], 0.5)}; copy with its second process "
        f"{goal(section.figures['copy_checker_ratio']['median'], 0.5)}."
    )
    if isinstance(python, str):
        section.notes.append(f"pyeventsourcing: skipped ({python}).")
        return section
    peer_rows = []
    named = {"import": "import", "import_all": "import, one command", "copy": "copy"}
    for key, label, ours in (
        ("peer_per_run", "one save per run (as `import` of one bundle commits)", "import"),
        ("peer_batched", "~1,000-event saves", "import_all"),
        ("peer_batched", "~1,000-event saves", "copy"),
    ):
        wall = ratios(rate[ours].values, rate[key].values)
        used = ratios(cpu[key].values, cpu[ours].values)
        section.figures[f"{ours}_to_peer"] = wall.as_dict()
        section.figures[f"{ours}_to_peer_cpu"] = used.as_dict()
        peer_rows.append(
            [
                label,
                rate[key].show(),
                f"{named[ours]} {wall.show('{:.2f}')}",
                cpu[key].show("{:.0f}"),
                f"{named[ours]} {used.show('{:.2f}')}",
            ]
        )
    section.table(
        [
            "pyeventsourcing 9.5.6 saving the same events",
            "events/s",
            "ours / peer",
            "peer CPU µs/event",
            "CPU ratio peer / ours",
        ],
        peer_rows,
    )
    section.notes.append(
        "The peer hashes nothing, checks nothing and keeps no projection: it JSON-encodes each "
        "event's payload dict (its default transcoder) and inserts one row per event. "
        "Goal (≥ 1x the peer, wall clock): import "
        f"{goal(section.figures['import_to_peer']['median'], 1.0)}; import in one command "
        f"{goal(section.figures['import_all_to_peer']['median'], 1.0)}; copy "
        f"{goal(section.figures['copy_to_peer']['median'], 1.0)}."
    )
    return section


if __name__ == "__main__":  # a quick look: python -m benchmarks.bench_bulk [runs] [repeats]
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    with tempfile.TemporaryDirectory(prefix="kl-bulk-") as tmp:
        print(measure(Path(tmp), runs=count, repeats=reps).markdown())
