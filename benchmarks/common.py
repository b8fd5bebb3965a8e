"""What every benchmark shares: repeated measurement, medians with spread, ratios taken
within one repetition, machine facts and fresh SQLite ledgers."""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Series:
    """Repeated values of one figure; quoted as median [min-max] over the repetitions."""

    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    def show(self, fmt: str = "{:,.0f}") -> str:
        if not self.values:
            return "—"
        if len(self.values) == 1:
            return fmt.format(self.median)
        return f"{fmt.format(self.median)} [{fmt.format(self.low)}-{fmt.format(self.high)}]"

    def as_dict(self) -> dict[str, Any]:
        return {"median": self.median, "min": self.low, "max": self.high, "n": len(self.values)}


def python_json(
    args: Sequence[str], *, cwd: Path, what: str, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run this interpreter with `args` in a process of its own and read the JSON object on
    the last line it prints; RuntimeError naming `what` (with the end of stderr) when it
    fails."""
    import json

    done = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


@dataclass
class Section:
    """One benchmark's results: a title, what was measured, tables and notes."""

    key: str
    title: str
    intro: str = ""
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def table(self, headers: list[str], rows: list[list[str]]) -> None:
        self.tables.append((headers, rows))

    def markdown(self) -> str:
        out = [f"## {self.title}", ""]
        if self.intro:
            out += [self.intro, ""]
        for headers, rows in self.tables:
            out.append("| " + " | ".join(headers) + " |")
            out.append("|" + "|".join("---" for _ in headers) + "|")
            out += ["| " + " | ".join(row) + " |" for row in rows]
            out.append("")
        for note in self.notes:
            out += [note, ""]
        return "\n".join(out)


def goal(value: float, target: float, *, at_least: bool = True) -> str:
    met = value >= target if at_least else value <= target
    sign = "≥" if at_least else "≤"
    return f"{'met' if met else 'NOT met'} (goal {sign} {target:g}x)"


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def copy_sqlite(source: Path, target: Path) -> None:
    """Copy a ledger file whose writers have all closed (WAL checkpointed on close)."""
    import sqlite3

    remove_sqlite(target)
    with sqlite3.connect(source) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copyfile(source, target)


def rss_mib() -> float:
    """Peak resident set size of this process so far, MiB.

    Linux's VmHWM belongs to the process image, which execve replaces; getrusage's
    ru_maxrss survives execve and would charge a child with its parent's peak."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine_facts() -> list[tuple[str, str]]:
    import numpy
    import pydantic
    import sqlalchemy

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages / 2**30:.1f} GiB"
    except (ValueError, OSError):
        memory = "unknown"
    import sqlite3

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return [
        ("CPU", f"{cpu} ({os.cpu_count()} logical cores)"),
        ("memory", memory),
        ("load average at start (1, 5, 15 min)", load),
        ("OS", f"{platform.system()} {platform.release()}"),
        ("Python", platform.python_version()),
        ("SQLite", sqlite3.sqlite_version),
        (
            "libraries",
            f"sqlalchemy {sqlalchemy.__version__}, pydantic {pydantic.VERSION}, "
            f"numpy {numpy.__version__}",
        ),
        ("git commit", _git_head()),
    ]


def _git_head() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' (with uncommitted changes)' if dirty else ''}" or "unknown"


def progress(message: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


def interleave(*runners: Callable[[], float], repeats: int) -> list[Series]:
    """Run each runner once per repetition, in turn, so drift in machine load affects all
    of them alike; returns one series per runner."""
    series = [Series() for _ in runners]
    for _ in range(repeats):
        for runner, s in zip(runners, series, strict=True):
            s.add(runner())
    return series


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> Series:
    """Per-repetition ratios (a figure and its floor measured in the same repetition)."""
    return Series([a / b for a, b in zip(numerators, denominators, strict=True)])
