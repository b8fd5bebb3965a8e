"""3b. The full replay against the code it was first measured on.

The full replay (`verify` without `--chain`) was measured at ~5k events/s, 0.04x of the
read+hash floor, at commit `BASE` (docs/benchmarks.md of that commit), and the goal set then
was "at least 4x faster". The floor moves with the machine (this shared host changed under
the suite more than once), so the ratio to the floor of one run and the events/s of another
day do not say how much faster the code became. This section says it directly: the same
ledger replayed by that commit's code and by this code, on the same machine, in turn.

  base      `BASE`'s own tree, taken from this repository's history (`git archive`) into the
            work folder, builds a ledger with its own generator (its schema of the time) and
            replays it with its `verify_ledger`
  one       this code replays a copy of that ledger brought to this schema (`Store.upgrade`:
            the migrations since then fill data only; every event keeps its bytes and hash)
            in one process
  workers   the same as `verify` runs it (worker processes on the idle CPUs)

Each replay runs in its own process; the three alternate within every repetition, and the
speed-up is this code's events/s over the base's within one repetition. Where the commit
is not in the clone (a shallow clone), the section says so and measures nothing.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from benchmarks.bench_verify import run_child
from benchmarks.common import (
    ROOT,
    Section,
    Series,
    goal,
    progress,
    python_json,
    ratios,
    remove_sqlite,
)
from benchmarks.common import sqlite_url as url_of

BASE = "665f4b8"  # the commit whose benchmark set the replay goal (issue 18)

# Run in the base tree (its `ledger` package first on the path): build one ledger of about
# N events with that commit's benchmark generator, or replay one and time it.
_BUILD = """
import json, sys
from pathlib import Path
import ledger
from benchmarks.ledgers import Ledgers
from benchmarks.workload import Shape
n = int(sys.argv[2])
made = Ledgers(Path(sys.argv[1]), [n], shape=Shape(), distinct=480)
made.build()
print(json.dumps({"path": str(made.paths[n]), "events": made.stats.events,
                  "package": ledger.__file__}))
"""
_REPLAY = """
import json, sys, time
import ledger
from ledger.store.eventstore import Store
from ledger.verify import verify_ledger
store = Store(sys.argv[1])
start = time.perf_counter()
report = verify_ledger(store)
seconds = time.perf_counter() - start
store.close()
if not report.ok:
    raise SystemExit(f"verify failed: {report.as_dict()['first_failure']}")
print(json.dumps({"events": report.events_checked, "seconds": seconds,
                  "package": ledger.__file__}))
"""


def _base_tree(work: Path) -> Path | str:
    """The base commit's tree under `work`, or why there is none. On a machine whose copy
    of the project has no history, KERNEL_LEDGER_BENCH_BASE_TREE names a folder holding
    that commit's `ledger`, `migrations`, `alembic.ini` and `benchmarks` (as `git archive`
    writes them)."""
    given = os.environ.get("KERNEL_LEDGER_BENCH_BASE_TREE")
    if given:
        tree = Path(given).resolve()
        if not (tree / "ledger" / "verify.py").is_file():
            return f"{given} holds no tree of {BASE} (no ledger/verify.py)"
        return tree
    found = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{BASE}^{{commit}}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        return f"commit {BASE} is not in this clone (a shallow clone?)"
    tree = work / f"base-{BASE}"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(
        [
            "git",
            "-C",
            str(ROOT),
            "archive",
            "--format=tar",
            BASE,
            "ledger",
            "migrations",
            "alembic.ini",
            "benchmarks",
        ],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        return f"git archive {BASE} failed: {archive.stderr.decode(errors='replace')[-300:]}"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def _in_base(tree: Path, code: str, *args: str) -> dict[str, Any]:
    paths = [str(tree), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    result = python_json(["-c", code, *args], cwd=tree, env=env, what=f"the base code ({BASE})")
    if not Path(result["package"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the base run imported {result['package']}, not {BASE}'s code")
    return result


def measure(work: Path, *, events: int, repeats: int) -> Section:
    section = Section(
        key="replay_base", title="Full replay against the code it was first measured on"
    )
    tree = _base_tree(work)
    if isinstance(tree, str):
        section.notes.append(f"Skipped: {tree}.")
        return section
    progress(f"replay-base: building a ledger of ~{events:,} events with {BASE}'s code")
    built = _in_base(tree, _BUILD, str(work / "base-ledgers"), str(events))
    base_path = Path(built["path"])
    ours = work / "replay-base-upgraded.sqlite3"
    remove_sqlite(ours)
    shutil.copyfile(base_path, ours)
    from ledger.store.eventstore import Store

    store = Store(url_of(ours), check_schema=False)
    store.upgrade()
    store.close()
    rate = {key: Series() for key in ("base", "one", "workers")}
    workers: list[int] = []
    count = 0
    for rep in range(repeats):
        progress(f"replay-base: repetition {rep + 1} ({BASE}, one process, workers)")
        base = _in_base(tree, _REPLAY, url_of(base_path))
        rate["base"].add(base["events"] / base["seconds"])
        for key, mode in (("one", "replay1"), ("workers", "replay")):
            result = run_child(mode, url_of(ours))
            if result["events"] != base["events"]:
                raise RuntimeError(
                    f"the two replays checked {base['events']} and {result['events']} events"
                )
            rate[key].add(result["events"] / result["seconds"])
            if key == "workers":
                workers.append(result["workers"])
        count = base["events"]
    one = ratios(rate["one"].values, rate["base"].values)
    both = ratios(rate["workers"].values, rate["base"].values)
    section.intro = (
        f"A ledger of {count:,} events built by commit `{BASE}`'s own benchmark generator and "
        f"replayed in full by that commit's `verify_ledger` and by this code (on a copy "
        f"upgraded to this schema: data-only migrations, every event's bytes and hash "
        f"unchanged), each in its own process, the three in turn; events per second, median "
        f"[min-max] of {repeats} repetitions; each speed-up is taken within one repetition."
    )
    section.table(
        [
            f"{BASE} (events/s)",
            "this code, one process",
            "speed-up",
            "this code, as `verify` runs it (workers)",
            "speed-up",
        ],
        [
            [
                rate["base"].show(),
                rate["one"].show(),
                one.show("{:.2f}"),
                f"{rate['workers'].show()} ({', '.join(map(str, workers))})",
                both.show("{:.2f}"),
            ]
        ],
    )
    section.figures.update(
        base=BASE,
        events=count,
        events_per_s={k: v.as_dict() for k, v in rate.items()},
        speedup_one_process=one.as_dict(),
        speedup_workers=both.as_dict(),
        workers=workers,
    )
    section.notes.append(
        "Goal (the replay at least 4x faster than when it was measured): one process "
        f"{goal(one.median, 4.0)}; as `verify` runs it {goal(both.median, 4.0)}. The "
        "number of worker processes is in parentheses: one per idle CPU when `verify` "
        "starts, so it follows this machine's load."
    )
    return section


if __name__ == "__main__":  # a quick look: python -m benchmarks.bench_replay_base [events]
    import tempfile

    size = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    with tempfile.TemporaryDirectory(prefix="kl-replay-base-") as tmp:
        print(measure(Path(tmp), events=size, repeats=2).markdown())
