"""triton-optimization: the JSON-file controller's command line, kept in the ledger.

    triton-optimization plan    --output-dir D --config C
    triton-optimization record  --output-dir D --result R
    triton-optimization analyze --output-dir D

The arguments, the JSON on stdout, the run folder D and the module-level `plan`, `record`,
`analyze` and `OptimizationError` are the controller's (docs/migration.md, "The drop-in"),
so a short script that imports this module can take its place. Every step is an event in
the ledger (`KERNEL_LEDGER_DB`, else `ledger.sqlite3` beside D), decided by the ledger's
service on the medians, as the controller decides; a round recorded after `analyze`
reopens the run (RunReopened).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "SCHEMA_VERSION",
    "OptimizationError",
    "RunManifestError",
    "analyze",
    "build_parser",
    "main",
    "plan",
    "record",
    "run",
    "utc_now",
]

SCHEMA_VERSION = 1

REOPEN_REASON = "a round recorded after analyze, as the JSON-file controller accepts"

LEDGER_FILE = "ledger.sqlite3"
EXIT_INTERNAL = 70
FILE_MODE = 0o600
"""The run folder's files are the owner's alone, as the controller's (it writes each through
a `mkstemp` file, which is created 0600, renamed into place)."""


class OptimizationError(ValueError):
    """A step was refused: the message names the condition. Nothing was recorded."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class RunManifestError(ValueError):
    """The run folder's manifest.json is not a Run Manifest v1, or cannot take the step."""

    exit_code = 1


def utc_now() -> str:
    """The controller's timestamps: RFC 3339 UTC to the second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ledger_url(output_dir: Path) -> str:
    """KERNEL_LEDGER_DB, else the SQLite ledger beside the run folder."""
    configured = os.environ.get("KERNEL_LEDGER_DB")
    if configured:
        return configured
    return f"sqlite:///{Path(os.path.abspath(output_dir)).parent / LEDGER_FILE}"


def _refuse_ledger_inside(output_dir: Path) -> None:
    """A ledger file inside the run folder would be overwritten by (or mistaken for) the
    folder's files: plan refuses it before anything is created."""
    from ledger.errors import LedgerError
    from ledger.store.sqlitefile import ledger_file
    from ledger.store.urls import parse_url

    try:
        path = ledger_file(parse_url(ledger_url(output_dir), "KERNEL_LEDGER_DB"))
    except LedgerError:
        return  # the ledger's own opening names what is wrong with the URL
    if path is None:
        return
    folder = Path(os.path.realpath(output_dir))
    ledger = Path(os.path.realpath(path))
    if ledger == folder or ledger.is_relative_to(folder):
        raise OptimizationError(
            f"the ledger {path} (KERNEL_LEDGER_DB) is inside the run folder {output_dir}, "
            "whose files plan, record and analyze write: keep the ledger outside it "
            f"(the default is {LEDGER_FILE} beside the folder)"
        )


@contextlib.contextmanager
def _ledger(output_dir: Path, at: str) -> Iterator[Any]:
    """The service on the run's ledger, its clock fixed to the step's time; errors become
    this module's (a rejection exits 1; a lost race 3 and a store problem 4, as in
    kernel-ledger)."""
    from ledger.errors import LedgerError
    from ledger.reports.runfolder import ManifestError
    from ledger.services.service import LedgerService
    from ledger.store.eventstore import Store

    service = LedgerService.opening(
        lambda: Store(ledger_url(output_dir), create=True), clock=lambda: at
    )
    try:
        yield service
    except ManifestError as exc:
        raise RunManifestError(exc.message) from None
    except LedgerError as exc:
        raise OptimizationError(exc.message, 1 if exc.exit_code == 2 else exc.exit_code) from None
    finally:
        service.close()


# --- the run folder ----------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    """Replace a folder file whole: a reader sees the old file or the new one, never part
    (ledger.files' atomic writer; the folder's files are the controller's to replace)."""
    from ledger import files
    from ledger.errors import LedgerError

    try:
        files.write_output(
            path, text.encode("utf-8"), what="run folder file", force=True, mode=FILE_MODE
        )
    except LedgerError as exc:
        raise OptimizationError(exc.message, 1 if exc.exit_code == 2 else exc.exit_code) from None


def _write_json(path: Path, value: Any) -> None:
    from ledger.reports.runfolder import dumps

    _write(path, dumps(value))


class _Staged:
    """A step's folder files, written under temporary names in the folder before the ledger
    append (a folder that cannot take them refuses the step with nothing appended) and
    renamed into place after it. Leaving the `with` block removes what was not published,
    and the folders it made for a step that did not happen."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(os.path.abspath(folder))  # a/../b/../out makes no a/ or b/
        self.staged: dict[str, Any] = {}  # name -> ledger.files.StagedOutput
        self.made: list[Path] = []
        self.published = False

    def make_folder(self, name: str) -> None:
        for path in (self.folder, self.folder / name):
            if not path.exists():
                path.mkdir(parents=True)
                self.made.append(path)

    def json(self, name: str, value: Any) -> None:
        from ledger.files import StagedOutput
        from ledger.reports.runfolder import dumps

        target = self.folder / name
        self.staged[name] = StagedOutput(
            target, dumps(value).encode("utf-8"), what="run folder file", force=True, mode=FILE_MODE
        )

    def publish(self) -> None:
        for staged in self.staged.values():
            staged.commit()
        self.published = True

    def __enter__(self) -> _Staged:
        return self

    def __exit__(self, *exc: object) -> None:
        for staged in self.staged.values():
            staged.discard()
        if not self.published:
            for path in reversed(self.made):
                with contextlib.suppress(OSError):
                    path.rmdir()


def _folder_bytes(path: Path) -> bytes:
    """A folder file's bytes: a missing file fails as the controller's read does (OSError);
    a FIFO, device or oversized file is refused by ledger.files' bounded reader instead of
    blocking or filling memory (ValueError, reported like a malformed file)."""
    from ledger import files
    from ledger.errors import LedgerError

    os.stat(path)
    try:
        return files.read_input(path, "run folder file")
    except LedgerError as exc:
        raise ValueError(exc.message) from None


def _folder_json(path: Path) -> Any:
    """A folder file's JSON, parsed as the controller parses it, but never nested deeper
    than the ledger's inputs may be (a deeper file is refused, not a RecursionError)."""
    from ledger.inputs.jsonio import MAX_DEPTH, nested_deeper_than

    too_deep = ValueError(f"it is nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(_folder_bytes(path))
    except RecursionError:
        raise too_deep from None
    if nested_deeper_than(value):
        raise too_deep
    return value


def _read_json(path: Path, what: str) -> dict[str, Any]:
    """A folder file, read as the controller reads it."""
    try:
        value = _folder_json(path)
    except (OSError, ValueError) as exc:
        raise OptimizationError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(value, dict):
        raise OptimizationError(f"the {what} {path} must hold a JSON object")
    return value


def _read_manifest(output_dir: Path) -> dict[str, Any]:
    from ledger.reports.runfolder import MANIFEST, ManifestError, check_manifest

    path = output_dir / MANIFEST
    try:
        value = _folder_json(path)
        check_manifest(value, str(path))
    except (OSError, ValueError) as exc:
        raise RunManifestError(f"cannot read the run manifest {path}: {exc}") from None
    except ManifestError as exc:
        raise RunManifestError(exc.message) from None
    return value


class _RunFolder:
    """A run folder the controller (or this module) wrote, as the next step reads it."""

    def __init__(self, output_dir: Path) -> None:
        from ledger.reports.runfolder import CONFIG, ROUNDS, STATE, Folder

        self.path = output_dir
        config = _read_json(output_dir / CONFIG, "optimization config")
        state = _read_json(output_dir / STATE, "optimization state")
        rounds = _read_json(output_dir / ROUNDS, "rounds file")
        listed = rounds.get("rounds")
        if not isinstance(listed, list):
            raise OptimizationError(f"the rounds file {output_dir / ROUNDS} has no rounds list")
        run_id = config.get("run_id")
        if not isinstance(run_id, str) or not run_id:
            raise OptimizationError(
                f"the optimization config {output_dir / CONFIG} names no run_id"
            )
        self.run_id = run_id
        self.folder = Folder(config=config, state=state, rounds=listed)

    def check_ledger(self, service: Any) -> Any:
        """The run's view in the ledger, which must stand where the folder stands. A folder
        the controller wrote before the switch, whose run the ledger does not hold yet, is
        imported first (`kernel-ledger import --legacy`, relative paths against the working
        directory), and so are the rounds the controller recorded in the folder since this
        module last did (the ledger's events stay, the folder's new rounds follow them), so
        a campaign can change controllers between any two rounds."""
        from ledger.errors import InputError
        from ledger.services.legacy import import_legacy

        try:
            view = service.view(self.run_id)
        except InputError:
            view = None
        if view is None or self._ahead_of(view):
            try:
                import_legacy(service.store, self.path, workspace=Path.cwd())
            except InputError as exc:
                where = "is not in" if view is None else "has fewer rounds in"
                raise OptimizationError(
                    f"run {self.run_id!r} of {self.path} {where} the ledger "
                    f"{service.store.shown_url}, and the folder does not import: {exc.message}"
                ) from None
            view = service.view(self.run_id)
        state = self.folder.state
        if (
            state.get("next_round") != view.run.rounds_recorded + 1
            or state.get("current_best_sha256") != view.run.best_kernel_sha256
        ):
            raise OptimizationError(
                f"the run folder {self.path} and the ledger disagree about run "
                f"{self.run_id!r}: the folder expects round {state.get('next_round')} on "
                f"kernel {state.get('current_best_sha256')}, the ledger round "
                f"{view.run.rounds_recorded + 1} on kernel {view.run.best_kernel_sha256}"
            )
        return view

    def _ahead_of(self, view: Any) -> bool:
        """Whether the folder holds steps the ledger's run does not (the controller went on
        writing it): more rounds, or an analysis of a run the ledger never concluded (the
        controller analyzes a run once)."""
        from ledger.reports.runfolder import ANALYSIS

        next_round = self.folder.state.get("next_round")
        if type(next_round) is int and next_round > view.run.rounds_recorded + 1:
            return True
        return view.run.concluded_at is None and (self.path / ANALYSIS).exists()


@contextlib.contextmanager
def _started_on_coverage(output_dir: Path) -> Iterator[None]:
    """The controller makes the run folder (and round-artifacts/ in it) once the starting
    manifest is read as passed correctness evidence, before it checks what that evidence
    covers: a plan refused for coverage leaves the folder so, here as there."""
    from ledger.errors import CoverageError
    from ledger.reports.runfolder import ROUND_ARTIFACTS

    try:
        yield
    except CoverageError as exc:
        if exc.status == "passed":
            (output_dir / ROUND_ARTIFACTS).mkdir(parents=True, exist_ok=True)
        raise


# --- the three steps ---------------------------------------------------------------------


def plan(output_dir: Path, *, config_path: Path, created_at: str | None = None) -> dict[str, Any]:
    """Validate a configuration, lock the run in the ledger and start its folder. The folder's
    files are staged before the run is appended, so a folder that cannot take them refuses
    the step with nothing in the ledger."""
    from ledger.core.events import RunPlanned, ValidationLinked
    from ledger.core.stats import MEDIANS_ONLY  # decided as the controller decides
    from ledger.reports import runfolder

    output_dir, config_path = Path(output_dir), Path(config_path)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise OptimizationError(
            f"the output folder {output_dir} is not empty: plan starts a run in a new folder"
        )
    _refuse_ledger_inside(output_dir)
    at = created_at or utc_now()
    staged = _Staged(output_dir)

    def stage(events: Sequence[Any]) -> None:
        planned = next(e for e in events if isinstance(e, RunPlanned))
        validation = next(e for e in events if isinstance(e, ValidationLinked))
        manifest = runfolder.start_manifest(planned, validation, at)
        found = runfolder.planned_folder(events)
        staged.make_folder(runfolder.ROUND_ARTIFACTS)
        staged.json(runfolder.CONFIG, found.config)
        staged.json(runfolder.STATE, found.state)
        staged.json(runfolder.ROUNDS, runfolder.rounds_document(found))
        staged.json(runfolder.MANIFEST, manifest)

    with staged, _ledger(output_dir, at) as service, _started_on_coverage(output_dir):
        result = service.plan(
            config_path, base_dir=Path.cwd(), statistics=MEDIANS_ONLY, check=stage
        )
        staged.publish()
    return {
        "status": "planned",
        "run_id": result.run_id,
        "kernel_sha256": result.kernel_sha256,
        "case_count": result.case_count,
    }


def record(
    output_dir: Path, *, result_path: Path, recorded_at: str | None = None
) -> dict[str, Any]:
    """Record one round in the ledger (reopening a concluded run) and in the folder, whose
    files are staged before the round is appended."""
    from ledger.reports import runfolder

    output_dir = Path(output_dir)
    run = _RunFolder(output_dir)
    manifest = _read_manifest(output_dir)
    at = recorded_at or utc_now()
    staged = _Staged(output_dir)

    def stage(events: Sequence[Any]) -> None:
        found = runfolder.with_round(run.folder, at, events)
        staged.json(runfolder.ROUNDS, runfolder.rounds_document(found))
        staged.json(runfolder.STATE, found.state)
        if manifest["status"] == "planned":
            staged.json(runfolder.MANIFEST, runfolder.move(manifest, "running", at))

    from ledger.core.decide import CONTROLLER_CONTRACT

    with staged, _ledger(output_dir, at) as service:
        run.check_ledger(service)
        # the run folder's replay (import --legacy) must give these very events, and it
        # records no mechanism entry: readers classify such rounds when they read them
        result = service.record(
            run.run_id,
            Path(result_path),
            base_dir=Path.cwd(),
            reopen=REOPEN_REASON,
            check=stage,
            vocabulary=False,
            contract=CONTROLLER_CONTRACT,  # the controller's rule, as the replay decides
        )
        staged.publish()
    return {
        "status": "recorded",
        "round": result.round,
        "decision": result.decision,
        "target_met": result.target_met,
        "needs_diagnosis": result.needs_diagnosis,
        "remaining_rounds": result.remaining_rounds,
    }


def analyze(output_dir: Path, *, updated_at: str | None = None) -> dict[str, Any]:
    """Conclude the run in the ledger and write analysis.json, report.md and the manifest's
    terminal status. As with the controller, analysis.json and report.md are written before
    the manifest is read, so a folder whose manifest cannot conclude again (a second
    analyze) still gets them, and the step fails; the ledger then stays as it was."""
    from ledger.core.decide import CONTROLLER_CONTRACT
    from ledger.reports import runfolder

    output_dir = Path(output_dir)
    run = _RunFolder(output_dir)
    at = updated_at or utc_now()
    with _ledger(output_dir, at) as service:
        view = run.check_ledger(service)
        view = service.conclusion_preview(service.full_view(run.run_id), CONTROLLER_CONTRACT)
        analysis = runfolder.analysis_document(run.folder, view.run)
        _write_json(output_dir / runfolder.ANALYSIS, analysis)
        _write(output_dir / runfolder.REPORT, runfolder.report_text(analysis))
        manifest = _read_manifest(output_dir)
        manifest = runfolder.concluded_manifest(manifest, str(view.run.conclusion), at)
        service.conclude(run.run_id, contract=CONTROLLER_CONTRACT)
    _write_json(output_dir / runfolder.MANIFEST, manifest)
    return {
        "status": view.run.conclusion,
        "target_met": view.run.target_met,
        "best_kernel_sha256": view.run.best_kernel_sha256,
        "analysis": str((output_dir / runfolder.ANALYSIS).resolve()),
    }


# --- command line ------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="triton-optimization",
        description="Plan, record, and analyze single-kernel optimization rounds in the ledger.",
    )
    steps = parser.add_subparsers(dest="action", required=True)
    step = steps.add_parser("plan", help="validate a configuration and start a run folder")
    step.add_argument("--output-dir", required=True, type=Path)
    step.add_argument("--config", required=True, type=Path)
    step = steps.add_parser("record", help="record one round result")
    step.add_argument("--output-dir", required=True, type=Path)
    step.add_argument("--result", required=True, type=Path)
    step = steps.add_parser("analyze", help="conclude the run and write its analysis")
    step.add_argument("--output-dir", required=True, type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one step; print its JSON object. Exit 0, or 1 when the step was refused (3: another
    writer won the race; 4: the ledger cannot be opened)."""
    args = build_parser().parse_args(argv)
    try:
        if args.action == "plan":
            payload = plan(args.output_dir, config_path=args.config)
        elif args.action == "record":
            payload = record(args.output_dir, result_path=args.result)
        else:
            payload = analyze(args.output_dir)
    except (OptimizationError, RunManifestError) as exc:
        return _failed(str(exc), exc.exit_code)
    except ModuleNotFoundError as exc:  # the ledger's dependencies are not in this Python
        return _failed(
            f"kernel-ledger is not installed in this Python ({sys.executable}): module "
            f"{exc.name!r} is missing; install it (pip install kernel-ledger's folder, or "
            "activate its .venv) and retry",
            1,
        )
    except OSError as exc:
        return _failed(f"cannot write the run folder {args.output_dir}: {exc}", 1)
    except Exception as exc:  # a bug or a folder file of the wrong shape: never a traceback
        return _failed(f"internal error ({type(exc).__name__}: {exc})", EXIT_INTERNAL)
    print(json.dumps(payload, ensure_ascii=False))
    return 0


def _failed(message: str, exit_code: int) -> int:
    print(json.dumps({"status": "failed", "error": message}, ensure_ascii=False))
    return exit_code


def run() -> None:
    """The console script `triton-optimization`."""
    sys.exit(main())


if __name__ == "__main__":
    run()
