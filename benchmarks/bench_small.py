"""5. Start-up of `kernel-ledger status --json` as a whole process, and 6. the time of one
sample-based decision."""

from __future__ import annotations

import importlib.util
import math
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import (
    ROOT,
    Section,
    Series,
    goal,
    interleave,
    progress,
    ratios,
    remove_sqlite,
    sqlite_url,
)
from benchmarks.workload import BulkWriter, Generator, Shape
from ledger.store.eventstore import Store

FLOOR_IMPORTS = "import sqlalchemy, pydantic, typer"


_CHILD_CPU: dict[str, list[float]] = {}  # CPU seconds (user + system) of each command's runs


def _process(argv: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    _CHILD_CPU.setdefault(" ".join(argv), []).append(cpu)
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr.decode(errors='replace')[-500:]}")
    return seconds


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("kernel-ledger")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def startup(folder: Path, *, repeats: int) -> Section:
    path = folder / "startup.sqlite3"
    remove_sqlite(path)
    store = Store(sqlite_url(path))
    writer = BulkWriter(store)
    generator = Generator(Shape(), prefix="startup")
    for k in range(5):
        writer.add(generator.run(k))
    writer.flush()
    store.close()
    status = [*_cli(), "--db", sqlite_url(path), "status", "--json"]
    floor = [sys.executable, "-c", FLOOR_IMPORTS]
    bare = [sys.executable, "-c", "pass"]
    helped = [*_cli(), "--help"]
    progress(f"startup: {repeats} repetitions")
    _process(status)  # warm the file cache and the byte-code cache
    _process(floor)
    _CHILD_CPU.clear()
    times = interleave(
        lambda: _process(floor),
        lambda: _process(status),
        lambda: _process(bare),
        lambda: _process(helped),
        repeats=repeats,
    )
    floor_s, status_s, bare_s, help_s = times
    ratio = ratios(status_s.values, floor_s.values)
    section = Section(key="startup", title="Start-up")
    section.intro = (
        "Whole processes, wall-clock milliseconds, median [min-max] of "
        f"{repeats} repetitions taken in turn; ratio within each repetition. The ledger holds "
        "5 runs."
    )
    ms = "{:.0f}"
    section.table(
        ["command", "ms", "ratio to the floor"],
        [
            ["`python -c pass`", Series([s * 1000 for s in bare_s.values]).show(ms), "—"],
            [
                f'`python -c "{FLOOR_IMPORTS}"` (floor)',
                Series([s * 1000 for s in floor_s.values]).show(ms),
                "1",
            ],
            [
                "`kernel-ledger status --json`",
                Series([s * 1000 for s in status_s.values]).show(ms),
                ratio.show("{:.2f}"),
            ],
            [
                "`kernel-ledger --help`",
                Series([s * 1000 for s in help_s.values]).show(ms),
                ratios(help_s.values, floor_s.values).show("{:.2f}"),
            ],
        ],
    )
    section.notes.append(f"Goal: {goal(ratio.median, 1.5, at_least=False)}.")
    floor_cpu = _CHILD_CPU[" ".join(floor)]
    status_cpu = _CHILD_CPU[" ".join(status)]
    cpu_ratio = ratios(status_cpu, floor_cpu)
    section.notes.append(
        "CPU time of the same processes (user + system, from the children's resource "
        f"usage), which waiting for the other work on this machine does not inflate: floor "
        f"{Series([s * 1000 for s in floor_cpu]).show(ms)} ms, `status --json` "
        f"{Series([s * 1000 for s in status_cpu]).show(ms)} ms, ratio "
        f"{cpu_ratio.show('{:.2f}')}: {goal(cpu_ratio.median, 1.5, at_least=False)}."
    )
    section.figures = {
        "floor_cpu_s": Series(floor_cpu).as_dict(),
        "status_cpu_s": Series(status_cpu).as_dict(),
        "cpu_ratio": cpu_ratio.as_dict(),
        "floor_s": floor_s.as_dict(),
        "status_s": status_s.as_dict(),
        "python_s": bare_s.as_dict(),
        "ratio": ratio.as_dict(),
    }
    return section


def decisions(*, repeats: int, cases: int = 16, samples: int = 50, resamples: int = 2000):
    if importlib.util.find_spec("ledger.core.stats") is None:
        section = Section(key="decisions", title="Sample-based decision")
        section.notes.append("Skipped: ledger/core/stats.py is not in this tree yet.")
        return section
    import numpy as np

    from ledger.core import decide, stats

    rng = random.Random(3)
    weights = [1.0 + (i % 3) for i in range(cases)]
    base = [rng.uniform(10, 90) for _ in range(cases)]
    best = [[b * (1 + rng.gauss(0, 0.01)) for _ in range(samples)] for b in base]
    cand = [[b * (1 + rng.gauss(-0.03, 0.01)) for _ in range(samples)] for b in base]
    b_med = [float(np.median(s)) for s in best]
    c_med = [float(np.median(s)) for s in cand]
    objective = decide.Objective(0.1, 0.01, 0.005, 0.02)
    contract = decide.contract_decision(
        decide.weighted_improvement(weights, b_med, c_med),
        decide.worst_regression(b_med, c_med),
        objective,
    )
    config = stats.StatisticsConfig(resamples=resamples)

    def ledger_decision() -> float:
        start = time.perf_counter()
        stats.noise_aware_decision(
            contract=contract,
            weights=weights,
            best_samples=best,
            cand_samples=cand,
            objective=objective,
            config=config,
            seed=12345,
            drift_sigma=0.0,
            drift_estimated=False,
            best_medians=b_med,
            cand_medians=c_med,
        )
        return time.perf_counter() - start

    b_arr, c_arr = np.array(best), np.array(cand)
    w = np.array(weights) / sum(weights)

    def naive_bootstrap() -> float:
        """The textbook vectorized bootstrap: draw every resample's indices, take, median."""
        start = time.perf_counter()
        gen = np.random.default_rng(12345)
        shape = (resamples, cases, samples)
        rows = np.arange(cases)[None, :, None]
        mb = np.median(b_arr[rows, gen.integers(0, samples, size=shape)], axis=2)
        mc = np.median(c_arr[rows, gen.integers(0, samples, size=shape)], axis=2)
        improvement = ((mb - mc) / mb) @ w
        regression = np.max((mc - mb) / mb, axis=1)
        np.quantile(improvement, 0.05)
        np.quantile(regression, 0.8)
        return time.perf_counter() - start

    progress(f"decisions: {repeats} repetitions")
    ledger_s, naive_s = interleave(ledger_decision, naive_bootstrap, repeats=repeats)
    ratio = ratios(ledger_s.values, naive_s.values)
    section = Section(key="decisions", title="Sample-based decision")
    section.intro = (
        f"`stats.noise_aware_decision` for {cases} cases x {samples} samples x {resamples} "
        "resamples, against the textbook vectorized numpy bootstrap of the same shape "
        "(draw every resample's indices, gather, median). Milliseconds, median [min-max] of "
        f"{repeats} repetitions taken in turn."
    )
    ms = "{:.2f}"
    section.table(
        ["computation", "ms", "ratio"],
        [
            [
                "`stats.noise_aware_decision`",
                Series([s * 1000 for s in ledger_s.values]).show(ms),
                ratio.show("{:.2f}"),
            ],
            ["textbook numpy bootstrap", Series([s * 1000 for s in naive_s.values]).show(ms), "1"],
        ],
    )
    section.figures = {
        "ledger_ms": Series([s * 1000 for s in ledger_s.values]).as_dict(),
        "naive_ms": Series([s * 1000 for s in naive_s.values]).as_dict(),
        "ratio": ratio.as_dict(),
    }
    assert math.isfinite(ratio.median)
    return section
