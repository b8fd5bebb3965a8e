"""Shared pieces of the fault and abuse campaign (tests/faults).

Two scales: the quick one runs in `make test`; `KERNEL_LEDGER_FAULTS=long` (what
`make faults` sets) runs the long one. When `KERNEL_LEDGER_FAULTS_REPORT` names a file, every
test appends its figures to it as one JSON object per line; `python tests/faults/faultkit.py
summarize FILE` prints them as the markdown table of docs/reliability.md.

This module is imported by the tests and by the writer scripts they start
(crash_writer.py, mixer.py), so it imports nothing from pytest.
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
HERE = Path(__file__).resolve().parent
LONG = os.environ.get("KERNEL_LEDGER_FAULTS", "").strip().lower() == "long"
MODE = "long" if LONG else "quick"
STAMP = "2026-11-02T09:00:00Z"
PARENT_RUN = "fault-parent-000"
CASES = (("fp16-128x257", 1.0), ("fp32-64x1024", 2.0), ("bf16-8x8193", 1.0))
BASELINE = (18.2, 40.0, 25.0)


def scale(quick: int, long: int) -> int:
    """How many times (or seconds): `quick` in `make test`, `long` in `make faults`."""
    return long if LONG else quick


def record_figures(test: str, **figures: Any) -> None:
    """Append one test's figures to $KERNEL_LEDGER_FAULTS_REPORT (when it is set)."""
    target = os.environ.get("KERNEL_LEDGER_FAULTS_REPORT")
    if not target:
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"test": test, "mode": MODE, **figures}, sort_keys=True)
    with path.open("a") as handle:
        handle.write(line + "\n")


# --- running the real command line -----------------------------------------------------


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.stdout)

    @property
    def said(self) -> str:
        """The failure as its one channel said it: the `Error:` line(s) on stderr, or, for
        `--json`, the error object on stdout, written as those lines would be."""
        if self.stderr or not self.stdout.startswith('{"status": "error"'):
            return self.stderr
        body = self.json()
        problems = body.get("problems") or []
        if len(problems) > 1:
            return f"Error: {body['error']}\n" + "".join(f"  {p}\n" for p in problems)
        return f"Error: {body['error']}\n"


def kl(*args: Any, db: str, env: dict[str, str] | None = None, timeout: float = 120) -> Outcome:
    """`kernel-ledger --db DB ARGS` in a fresh process (`python -m cli`)."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("KERNEL_LEDGER_DB", None)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "--db", db, *map(str, args)],
        cwd=ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)


def cli(*args: Any, db: str) -> Outcome:
    """`kernel-ledger --db DB ARGS` in this process (cli.app.main), much faster than `kl`.
    Every store the command opened is closed afterwards, as it would be when its process
    exits, so no connection outlives the command."""
    from cli.app import main
    from ledger.store.eventstore import Store

    opened: list[Store] = []
    original = Store.__init__

    def tracked(self: Store, *a: Any, **k: Any) -> None:
        opened.append(self)
        original(self, *a, **k)

    out, err = io.StringIO(), io.StringIO()
    code = 0
    started = time.monotonic()
    Store.__init__ = tracked  # type: ignore[method-assign]
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main(["--db", db, *map(str, args)])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        Store.__init__ = original  # type: ignore[method-assign]
        for store in opened:
            if hasattr(store, "engine"):
                store.close()
    return Outcome(code, out.getvalue(), err.getvalue(), time.monotonic() - started)


def one_line_error(stderr: str, stdout: str = "") -> bool:
    """The product rule for every failure: one `Error: …` line on stderr, or, for an input
    with several problems, that line saying `N problems:` and then one indented line each;
    with `--json` (`stdout` the error object), the object alone, one line, stderr empty."""
    if stdout.startswith('{"status": "error"'):
        return stderr == "" and stdout.count("\n") == 1 and bool(json.loads(stdout)["error"])
    if not stderr.startswith("Error: ") or "Traceback" in stderr or not stderr.endswith("\n"):
        return False
    first, *rest = stderr.removesuffix("\n").split("\n")
    if not rest:
        return True
    return first.endswith("problems:") and all(line.startswith("  ") for line in rest)


# --- looking inside a ledger ----------------------------------------------------------


def sqlite_file(url: str) -> Path:
    assert url.startswith("sqlite:///"), url
    return Path(url.removeprefix("sqlite:///"))


def integrity_check(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    conn.close()
    return "; ".join(str(r[0]) for r in rows)


def event_rows(url: str) -> dict[str, tuple[str, str, int, int]]:
    """event_id -> (event_hash, stream_id, stream_version, seq), read with SQLAlchemy."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT event_id, event_hash, stream_id, stream_version, seq FROM events")
            ).all()
    finally:
        engine.dispose()
    return {r[0]: (r[1], r[2], int(r[3]), int(r[4])) for r in rows}


def file_digest(path: Path) -> str:
    """SHA-256 of a ledger file and its -wal (to prove a failed command wrote nothing)."""
    digest = hashlib.sha256()
    for candidate in (path, Path(f"{path}-wal")):
        if candidate.exists():
            digest.update(candidate.name.encode())
            digest.update(candidate.read_bytes())
    return digest.hexdigest()


# --- small file systems of our own ----------------------------------------------------

_MOUNT_PROBE: list[str | None] = []


def mount_unavailable() -> str | None:
    """None when this process may mount a tmpfs (root, mount permitted), else the reason."""
    if not _MOUNT_PROBE:
        reason = None
        if os.geteuid() != 0:
            reason = "not root: cannot mount a small tmpfs"
        else:
            probe = Path(tempfile.mkdtemp(prefix="kl-mount-probe-"))
            proc = _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe))
            if proc.returncode == 0:
                _mount_cmd("umount", str(probe))
            else:
                reason = f"mount -t tmpfs is not permitted here: {proc.stderr.strip()}"
            probe.rmdir()
        _MOUNT_PROBE.append(reason)
    return _MOUNT_PROBE[0]


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return _mount_cmd("mount", *args)


def _mount_cmd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (e.g. "2m") mounted at `path` for the duration."""
    path.mkdir(parents=True, exist_ok=True)
    proc = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    assert proc.returncode == 0, proc.stderr
    try:
        yield path
    finally:
        gc.collect()
        if _mount_cmd("umount", str(path)).returncode != 0:
            _mount_cmd("umount", "-l", str(path))


def remount(path: Path, mode: str) -> None:
    """Remount the tmpfs at `path` read-only ("ro") or read-write ("rw")."""
    gc.collect()
    proc = _mount("-o", f"remount,{mode}", str(path))
    assert proc.returncode == 0, proc.stderr


@contextmanager
def read_only_file(path: Path) -> Iterator[Path]:
    """Make one file read-only, even for root (a read-only bind mount of the file itself),
    while its folder stays writable."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o444)
        try:
            yield path
        finally:
            path.chmod(mode)
        return
    proc = _mount("--bind", str(path), str(path))
    assert proc.returncode == 0, proc.stderr
    try:
        proc = _mount("-o", "remount,bind,ro", str(path))
        assert proc.returncode == 0, proc.stderr
        yield path
    finally:
        gc.collect()
        if _mount_cmd("umount", str(path)).returncode != 0:
            _mount_cmd("umount", "-l", str(path))


# --- campaign files for the writers ----------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


class Files:
    """Input files for many runs that share one starting kernel and a few candidates.

    Every run's `parent_run_id` is PARENT_RUN, and every manifest names PARENT_RUN as its
    parent, so one manifest serves every run. Candidates: `slow-K` (validated, measured
    slower than the baseline: DISCARD), `fast-K` (validated, faster: KEEP or NOISE or
    DISCARD depending on the medians) and `broken` (validation failed: FAIL).
    """

    def __init__(self, root: Path, *, candidates: int = 4, write: bool = True) -> None:
        """Write the files under `root`; `write=False` only names files written before
        (processes sharing them must not rewrite what another one may be reading)."""
        self.root = root
        self.write = write
        self.kernel = self._kernel("v0.py", "# starting kernel\nBLOCK = 128\n")
        self.baseline_manifest = self._manifest("baseline", self.kernel, "passed")
        self.passed: list[tuple[Path, Path]] = []
        for k in range(candidates):
            body = f"# candidate {k}\nBLOCK = {256 + k}\n"
            kernel = self._kernel(f"cand-{k}.py", body)
            self.passed.append((kernel, self._manifest(f"cand-{k}", kernel, "passed")))
        broken = self._kernel("broken.py", "# broken candidate\nBLOCK = -1\n")
        self.broken = (broken, self._manifest("broken", broken, "failed"))
        self.kernel_sha = sha256(self.kernel)

    def _kernel(self, name: str, body: str) -> Path:
        path = self.root / "kernels" / name
        if self.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
        return path

    def _manifest(self, name: str, kernel: Path, status: str) -> Path:
        folder = self.root / "validation" / name
        if not self.write:
            return folder / "manifest.json"
        write_json(
            folder / "case-matrix.json",
            {"kernel": {"sha256": sha256(kernel)}, "cases": [{"id": c} for c, _ in CASES]},
        )
        return write_json(folder / "manifest.json", manifest_doc(f"{name}-check", kernel, status))

    def config_doc(self, run_id: str, *, max_rounds: int = 12) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "run_id": run_id,
            "parent_run_id": PARENT_RUN,
            "op_name": "softmax",
            "kernel": {"path": str(self.kernel)},
            "validation_manifest": str(self.baseline_manifest),
            "target": {"soc": "Ascend910B2"},
            "cases": [{"id": c, "weight": w} for c, w in CASES],
            "baseline": [
                {"case_id": c, "median_us": m, "repeats": 50}
                for (c, _), m in zip(CASES, BASELINE, strict=True)
            ],
            "objective": {
                "target_relative_improvement": 0.5,
                "min_relative_improvement": 0.01,
                "noise_floor": 0.005,
                "max_case_regression": 0.02,
            },
            "max_rounds": max_rounds,
            "max_consecutive_failures": 3,
        }

    def config(self, run_id: str, folder: Path, **kwargs: Any) -> Path:
        return write_json(folder / f"config-{run_id}.json", self.config_doc(run_id, **kwargs))

    def round_doc(
        self,
        number: int,
        parent_sha: str,
        *,
        candidate: int | None,
        factor: float = 1.05,
        signals: bool = False,
    ) -> dict[str, Any]:
        """Round `number`; `candidate=None` is the broken one (FAIL). Medians are the
        baseline's times `factor`."""
        kernel, manifest = self.broken if candidate is None else self.passed[candidate]
        doc: dict[str, Any] = {
            "schema_version": 1,
            "round": number,
            "parent_kernel_sha256": parent_sha,
            "candidate": {"path": str(kernel)},
            "hypothesis": f"Round {number}: try candidate {candidate}",
            "change": f"BLOCK=128 -> {kernel.stem}",
            "verification": {"manifest": str(manifest)},
            "measurements": [
                {"case_id": c, "median_us": round(m * factor, 6), "repeats": 50}
                for (c, _), m in zip(CASES, BASELINE, strict=True)
            ],
        }
        if signals:
            doc["profiler_signals"] = {"aiv_scalar_ratio": 0.12, "aiv_vec_ratio": 0.54}
        return doc


def manifest_doc(run_id: str, kernel: Path, status: str) -> dict[str, Any]:
    """A Run Manifest v1 (correctness) vouching for `kernel`, whose case matrix lies beside."""
    return {
        "schema_version": 1,
        "run_id": run_id,
        "parent_run_id": PARENT_RUN,
        "run_type": "correctness",
        "workspace_snapshot": {},
        "environment": {},
        "model": {},
        "topology": {},
        "command": ["pytest", "tests/test_softmax.py"],
        "environment_variables": {"ASCEND_RT_VISIBLE_DEVICES": "0"},
        "artifacts": [
            {"name": "kernel", "kind": "source", "uri": str(kernel), "sha256": sha256(kernel)},
            {"name": "case-matrix", "kind": "json", "uri": "case-matrix.json"},
        ],
        "status": status,
        "created_at": STAMP,
        "updated_at": STAMP,
    }


# --- PostgreSQL: a private cluster that can be stopped and started again ---------------


def private_cluster():
    """A PgCluster of our own (restarting the shared one would break other tests), or the
    reason there is none. Returns (cluster, None) or (None, reason).

    Unlike the shared test cluster it is durable (fsync, synchronous_commit and
    full_page_writes on), so that a crash of the server loses no committed transaction,
    as in production."""
    sys.path.insert(0, str(TESTS))
    from pgcluster import PgCluster, PgNotAvailable, pg_required

    cluster = PgCluster("kledger_faults")
    try:
        cluster.start()
    except PgNotAvailable as exc:
        if pg_required():
            raise
        return None, str(exc)
    for setting in ("fsync", "synchronous_commit", "full_page_writes"):
        cluster.psql(f"ALTER SYSTEM SET {setting} = on", dbname="postgres")
    cluster.psql("SELECT pg_reload_conf()", dbname="postgres")
    return cluster, None


def pg_stop(cluster, mode: str = "immediate") -> None:
    """Stop the server process but keep its data folder (pg_ctl stop -m MODE)."""
    proc = cluster._run(
        [str(cluster.bindir / "pg_ctl"), "stop", "-D", str(cluster.data_dir), "-m", mode, "-W"],
        timeout=30,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    deadline = time.monotonic() + 15
    while cluster.is_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not cluster.is_running()


def pg_start(cluster) -> None:
    """Start the stopped server again on the same port with the same data."""
    proc = cluster._run(
        [
            str(cluster.bindir / "pg_ctl"),
            "start",
            "-D",
            str(cluster.data_dir),
            "-l",
            str(cluster.log_path),
            "-w",
            "-t",
            "30",
        ],
        timeout=40,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr + cluster.log_tail()
    deadline = time.monotonic() + 30
    while True:
        try:
            cluster.psql("SELECT 1", dbname="postgres")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


# --- figures ---------------------------------------------------------------------------


def summarize(path: Path) -> str:
    """The figures file as a markdown table (the last line of each test and mode wins)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            latest[(item.pop("test"), item.pop("mode"))] = item
    out = ["| test | mode | figures |", "|---|---|---|"]
    for (test, mode), figures in sorted(latest.items()):
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in sorted(figures.items()))
        out.append(f"| {test} | {mode} | {shown} |")
    return "\n".join(out)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_fmt(v)}" for k, v in sorted(value.items())) + "}"
    return str(value)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "summarize":
        sys.exit("usage: python tests/faults/faultkit.py summarize FIGURES.jsonl")
    print(summarize(Path(sys.argv[2])))
