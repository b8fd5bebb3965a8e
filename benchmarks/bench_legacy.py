"""1c. `import --legacy`: JSON-file controller run folders replayed, re-decided and appended,
against raw inserts of the rows the import wrote.

The folders: campaigns written as a user writes them (`campaign_files.FileCampaign`: kernels,
validation manifests with case matrices, a configuration and round results) and run through
the controller's command line as kernel-ledger's drop-in keeps it
(`cli.triton_optimization`: plan, record each round, analyze every third run), which writes
the controller's run folders. Per repetition, in turn:

  per folder    every folder imported into a fresh ledger (`legacy.import_legacy`: read the
                folder's files and every file they name, replay and re-decide each round,
                compare, append; one transaction per folder, as one `import --legacy DIR`)
  floor         every row the imports wrote (events, projection rows, blobs), inserted by the
                raw driver into a fresh ledger, one transaction per run, with the store's
                pragmas (WAL, synchronous=FULL)
  one command   every folder in one `import --legacy DIR...` (`legacy.import_legacies`: one
                transaction, the folders after the one being written replayed meanwhile in
                worker processes, one per idle CPU besides the writer's), against the floor
                in one transaction

Unlike a bundle, a folder holds no event: each one is built, canonicalized and hashed, and
every round reads its result, candidate kernel, validation manifest and case matrix from
the files. The floor only inserts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bench_bulk import (
    FLOOR_HEADERS,
    Timing,
    Workspace,
    cpu_with_children,
    floor_row,
    raw_floor,
    run_sizes,
)
from benchmarks.campaign_files import FileCampaign
from benchmarks.common import Section, Series, goal, progress, ratios, remove_sqlite
from benchmarks.common import sqlite_url as url_of
from ledger.store.eventstore import Store


@contextlib.contextmanager
def _inside(folder: Path, ledger: Path) -> Iterator[None]:
    """The drop-in as an agent runs it: from the workspace root, its ledger named."""
    before, named = Path.cwd(), os.environ.get("KERNEL_LEDGER_DB")
    os.chdir(folder)
    os.environ["KERNEL_LEDGER_DB"] = url_of(ledger)
    try:
        yield
    finally:
        os.chdir(before)
        if named is None:
            os.environ.pop("KERNEL_LEDGER_DB", None)
        else:
            os.environ["KERNEL_LEDGER_DB"] = named


def build_folders(root: Path, runs: int, rounds: int) -> list[Path]:
    """`runs` controller run folders of `rounds` rounds each under root/optimization/."""
    from cli import triton_optimization as controller

    folders = []
    root.mkdir(parents=True, exist_ok=True)
    with _inside(root, root / "drop-in.sqlite3"):
        for k in range(runs):
            run_id = f"softmax-legacy-{k:04d}"
            campaign = FileCampaign(root / "inputs" / run_id, run_id)
            folder = root / "optimization" / run_id
            controller.plan(folder, config_path=campaign.config())
            for _ in range(rounds):
                path, medians = campaign.next_round()
                decided = controller.record(folder, result_path=path)["decision"]
                campaign.recorded(decided, medians)
            if k % 3 == 0:
                controller.analyze(folder)
            folders.append(folder)
    return folders


def run_per_folder(space: Workspace, folders: list[Path], root: Path) -> tuple[Timing, Path]:
    from ledger.services.legacy import import_legacy

    path = space.fresh("legacy")
    store = Store(url_of(path))
    start, cpu = time.perf_counter(), time.thread_time()
    for folder in folders:
        import_legacy(store, folder, workspace=root)
    timing = (time.perf_counter() - start, time.thread_time() - cpu)
    store.close()
    return timing, path


def run_one_command(space: Workspace, folders: list[Path], root: Path) -> tuple[Timing, Path]:
    from ledger.services.legacy import import_legacies

    path = space.fresh("legacy-all")
    store = Store(url_of(path))
    start, cpu = time.perf_counter(), cpu_with_children()
    import_legacies(store, folders, workspace=root)
    timing = (time.perf_counter() - start, cpu_with_children() - cpu)
    store.close()
    return timing, path


def measure(folder: Path, *, runs: int, rounds: int, repeats: int) -> Section:
    section = Section(key="legacy", title="Legacy import (SQLite)")
    space = Workspace(folder)
    progress(f"legacy: running {runs} campaigns of {rounds} rounds through the drop-in")
    t0 = time.perf_counter()
    folders = build_folders(folder / "workspace", runs, rounds)
    built = time.perf_counter() - t0
    keys = ("per_folder", "per_folder_floor", "one_command", "one_command_floor")
    rate = {k: Series() for k in keys}  # events per wall-clock second
    cpu = {k: Series() for k in keys}  # CPU microseconds per event
    folder_ms = Series()
    events = 0
    for rep in range(repeats):
        progress(f"legacy: repetition {rep + 1}")
        timing, written = run_per_folder(space, folders, folder / "workspace")
        per_run = run_sizes(written)
        events = sum(per_run)
        floor = raw_floor(space, written, per_run)
        remove_sqlite(written)
        for key, value in (("per_folder", timing), ("per_folder_floor", floor)):
            rate[key].add(events / value[0])
            cpu[key].add(value[1] * 1e6 / events)
        folder_ms.add(timing[0] * 1e3 / len(folders))
        timing, written = run_one_command(space, folders, folder / "workspace")
        floor = raw_floor(space, written, [events])
        remove_sqlite(written)
        for key, value in (("one_command", timing), ("one_command_floor", floor)):
            rate[key].add(events / value[0])
            cpu[key].add(value[1] * 1e6 / events)
    rows = []
    for key, label in (
        ("per_folder", f"`import --legacy DIR`, once per folder ({runs} transactions)"),
        ("one_command", f"`import --legacy DIR...` of the {runs} folders (one transaction)"),
    ):
        rows.append(floor_row(section, key, label, rate, cpu))
    speedup = ratios(rate["one_command"].values, rate["per_folder"].values)
    section.figures.update(
        events=events,
        runs=runs,
        rounds=rounds,
        ms_per_folder=folder_ms.as_dict(),
        one_command_to_per_folder=speedup.as_dict(),
        events_per_s={k: v.as_dict() for k, v in rate.items()},
        cpu_us_per_event={k: v.as_dict() for k, v in cpu.items()},
        build_seconds=built,
    )
    section.intro = (
        f"{runs} run folders of {rounds} rounds and 8 cases ({events:,} events; every third "
        "run analyzed), written by running each campaign's files through the controller's "
        f"command line as the drop-in keeps it ({built:.0f} s, not timed below). Events per "
        f"second, median [min-max] of {repeats} repetitions; each ratio is taken within one "
        "repetition. The floor inserts every row the import wrote (events, projection rows, "
        "blobs) with the raw driver, in the same transactions, at the same durability (WAL, "
        "synchronous=FULL). CPU per event counts the worker processes where the path starts "
        "any. A folder's import reads ~70 files (each round's result, candidate kernel, "
        "validation manifest and case matrix) and builds, canonicalizes and hashes every event; "
        "the floor reads nothing and builds nothing."
    )
    section.table(FLOOR_HEADERS, rows)
    section.notes.append(
        f"One folder per command: {folder_ms.show('{:.1f}')} ms per folder. One command for "
        f"all: {speedup.show('{:.2f}')}x the events per second of one folder per command. "
        "Ratio to the floor (≥ 0.5x, the goal of the bulk paths that move events already "
        f"sealed): one command {goal(section.figures['one_command_ratio']['median'], 0.5)}."
    )
    return section


if __name__ == "__main__":  # a quick look: python -m benchmarks.bench_legacy [runs] [repeats]
    import tempfile

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    with tempfile.TemporaryDirectory(prefix="kl-legacy-") as tmp:
        print(measure(Path(tmp), runs=count, rounds=20, repeats=reps).markdown())
