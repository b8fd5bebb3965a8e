"""The campaign and audit use cases as JSON documents, shared by the command line and the
MCP server (`kernel-ledger mcp`).

Each use case takes a `Ledger` (how to open the store) and the command's options by name,
already checked by their model in cli/arguments.py (both front ends call a use case through
it), calls the service, and returns an `Outcome`: the one object `--json` prints (and the MCP
tool returns), the result itself for the text renderer, and, for the checks, the one-line
failure. Nothing here prints; rejected input raises the ledger's own errors before anything
is written. Arguments that name files are paths, relative to the working directory.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DECISIONS = ("KEEP", "DISCARD", "NOISE", "FAIL")
DEFAULT_OUTPUT_ROOT = Path(".vaws-local/ascend-triton/optimization")


@dataclass
class Outcome:
    document: dict[str, Any]
    value: Any = None
    failure: str | None = None  # a check ran and failed (exit 1): the one-line reason


class Ledger:
    """How a use case reaches the ledger: `open_store(create, check_schema)` makes a Store.
    The command line opens one per command; the MCP server keeps the one it opened."""

    def __init__(self, open_store: Callable[..., Any]) -> None:
        self.open_store = open_store

    def store(self, *, create: bool = False):
        return self.open_store(create=create)

    def service(self, *, create: bool = False):
        """The service; its store is opened on first use, after the input files were
        checked, so a bad file is rejected before a ledger is opened or created."""
        from ledger.services.service import LedgerService

        return LedgerService.opening(lambda: self.store(create=create))


def input_path(value: str | None, flag: str) -> Path:
    if value is None or not str(value).strip():
        from ledger.errors import InputError

        raise InputError(f"{flag} needs a file path")
    return Path(value)


# --- writes ----------------------------------------------------------------------------------


def plan(ledger: Ledger, config: str, dry_run: bool = False) -> Outcome:
    service = ledger.service(create=not dry_run)
    result = service.plan(input_path(config, "--config"), dry_run=dry_run)
    return Outcome(
        {
            "status": "checked" if dry_run else "planned",
            "run_id": result.run_id,
            "kernel_sha256": result.kernel_sha256,
            "case_count": result.case_count,
            "warnings": list(result.warnings),
            **_not_found(result.samples_not_found),
            **_not_samples(result.sources_not_samples),
        },
        result,
    )


def _not_found(cases: tuple[str, ...]) -> dict[str, list[str]]:
    """The JSON key naming cases whose samples file was named but not found, when any were."""
    return {"samples_not_found": list(cases)} if cases else {}


def _not_samples(cases: tuple[str, ...]) -> dict[str, list[str]]:
    """The JSON key naming cases whose `source` file holds no samples, when any did."""
    return {"sources_not_samples": list(cases)} if cases else {}


def record(ledger: Ledger, run: str, result: str) -> Outcome:
    r = ledger.service().record(run, input_path(result, "--result"))
    return Outcome(
        {
            "status": "recorded",
            "run_id": r.run_id,
            "round": r.round,
            "decision": r.decision,
            "relative_improvement": r.relative_improvement,
            "worst_case_regression": r.worst_case_regression,
            "cumulative_improvement": r.cumulative_improvement,
            "target_met": r.target_met,
            "needs_diagnosis": r.needs_diagnosis,
            "remaining_rounds": r.remaining_rounds,
            "best_kernel_sha256": r.best_kernel_sha256,
            **({"flags": list(r.flags)} if r.flags else {}),
            **_not_found(r.samples_not_found),
            **_not_samples(r.sources_not_samples),
            "already_recorded": r.already_recorded,
        },
        r,
    )


def analyze(
    ledger: Ledger, run: str, output_dir: str | None = None, force: bool = False
) -> Outcome:
    from ledger.services.analysis import analyze as run_analyze

    folder = Path(output_dir) if output_dir else DEFAULT_OUTPUT_ROOT / run
    r = run_analyze(ledger.service(), run, folder, force=force)
    return Outcome(
        {
            "status": r.status,
            "run_id": r.run_id,
            "target_met": r.target_met,
            "best_kernel_sha256": r.best_kernel_sha256,
            "analysis": str(r.analysis_path),
        },
        r,
    )


def profile(
    ledger: Ledger,
    path: str,
    run: str,
    baseline: bool = False,
    round_no: int | None = None,
    kernel: str | None = None,
    kernel_name: str | None = None,
    shape: str | None = None,
) -> Outcome:
    event = ledger.service().profile(
        run,
        input_path(path, "PATH"),
        baseline=baseline,
        round_no=round_no,
        kernel_sha256=kernel,
        kernel_name=kernel_name,
        shape=shape,
    )
    attribution = event.attribution or {}
    return Outcome(
        {
            "status": "recorded",
            "run_id": run,
            "kernel_sha256": event.kernel_sha256,
            "format": event.format,
            "signals": event.signals,
            "attribution": attribution,
            "notes": attribution.get("notes", []),
        },
        event,
    )


def diagnose(ledger: Ledger, run: str, bottleneck: str, evidence: str) -> Outcome:
    event = ledger.service().diagnose(run, bottleneck, evidence)
    return Outcome(
        {
            "status": "recorded",
            "run_id": run,
            "bottleneck": event.bottleneck,
            "after_round": event.after_round,
            "consecutive_failures_before": event.consecutive_failures_before,
        },
        event,
    )


def noise(ledger: Ledger, run: str, measurements: str) -> Outcome:
    result = ledger.service().noise(run, input_path(measurements, "--measurements"))
    return Outcome({"status": "recorded", **result}, result)


# --- reads -----------------------------------------------------------------------------------


def status(ledger: Ledger, run: str | None = None) -> Outcome:
    from ledger.core.projections import as_dict
    from ledger.store.history import list_runs

    # A read of the projection rows: the store alone, so start-up does not import the
    # service's input models and controller (see docs/benchmarks.md, start-up).
    store = ledger.store()
    if run is None:
        with store.transaction() as conn:
            rows = list_runs(conn)
        return Outcome({"status": "ok", "runs": [as_dict(r) for r in rows]}, rows)
    with store.transaction() as conn:
        view = store.load_view(conn, run)
    if view is None:
        from ledger.errors import InputError

        raise InputError(f"run {run!r} is not in the ledger")
    r = view.run
    return Outcome(
        {
            "status": "ok",
            "run": as_dict(r),
            "best_kernel": {
                "sha256": r.best_kernel_sha256,
                "path": r.best_kernel_path,
                "round": r.best_round,
            },
            "cases": [as_dict(c) for c in view.cases],
        },
        view,
    )


def _date(value: str | None, flag: str) -> str | None:
    if value is None:
        return None
    from datetime import UTC, datetime

    from ledger.errors import InputError

    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"{flag} must be a date or time like 2026-11-30 or 2026-11-30T12:00:00Z"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def history(
    ledger: Ledger,
    run: str | None = None,
    op: str | None = None,
    soc: str | None = None,
    decision: str | None = None,
    bottleneck: str | None = None,
    mechanism: str | None = None,
    like_profile: str | None = None,
    kernel_name: str | None = None,
    search: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
) -> Outcome:
    from ledger.errors import InputError
    from ledger.store.history import RoundFilter, list_runs, query_rounds

    if decision is not None and decision.upper() not in DECISIONS:
        raise InputError(f"--decision must be one of {', '.join(DECISIONS)}, not {decision!r}")
    if like_profile is not None:
        return _like_profile(ledger, like_profile, kernel_name, limit or 10)
    f = RoundFilter(
        run_id=run,
        bottleneck=bottleneck,
        op_name=op,
        soc=soc,
        decision=decision.upper() if decision else None,
        mechanism=mechanism,
        search=search,
        since=_date(since, "--since"),
        until=_date(until, "--until"),
        limit=limit,
    )
    service = ledger.service()
    if run is not None:
        service.view(run)  # an unknown run is an error, not an empty list
    with service.store.transaction() as conn:
        rows = query_rounds(conn, f)
        runs = {r.run_id: r for r in list_runs(conn)} if rows else {}
    return Outcome(
        {
            "status": "ok",
            "count": len(rows),
            "rounds": [round_document(r, runs.get(r.run_id)) for r in rows],
        },
        rows,
    )


def round_document(row, run) -> dict[str, Any]:
    """A decided round as history --json gives it: the projection row with `flags` a list,
    `start_signals` an object, and `reason`, the decision's grounds in one sentence."""
    import json

    from ledger.core.projections import as_dict

    doc = as_dict(row)
    doc["flags"] = [f for f in (row.flags or "").split(",") if f]
    doc["start_signals"] = json.loads(row.start_signals) if row.start_signals else None
    doc["reason"] = decision_reason(row, run)
    return doc


def decision_reason(row, run) -> str:
    """Why the round got its decision, in the contract's words (ledger/core/decide.py)."""
    from ledger.core.decide import Objective, reason

    return reason(
        row.decision,
        validation_status=row.validation_status,
        improvement=row.relative_improvement,
        regression=row.worst_case_regression,
        objective=None if run is None else Objective.of(run),
    )


def _like_profile(ledger: Ledger, path: str, kernel_name: str | None, limit: int) -> Outcome:
    from ledger.core.bottleneck import classify
    from ledger.core.similar import rank
    from ledger.inputs.profiles import load_profile
    from ledger.store.history import list_runs, rounds_with_bottleneck

    parsed = load_profile(Path(path), kernel_name=kernel_name)
    attribution = classify(parsed.signals, attributes=parsed.attributes)
    store = ledger.store()
    with store.transaction() as conn:
        candidates = rounds_with_bottleneck(conn, str(attribution.bottleneck), 500)
        runs = {r.run_id: r for r in list_runs(conn)} if candidates else {}
    similar = rank(parsed.signals, candidates, limit)
    return Outcome(
        {
            "status": "ok",
            "bottleneck": str(attribution.bottleneck),
            "first_experiment": attribution.first_experiment,
            "count": len(similar),
            "rounds": [
                {
                    **round_document(s.row, runs.get(s.row.run_id)),
                    "distance": s.distance,
                    "shared_signals": s.shared_signals,
                }
                for s in similar
            ],
        },
        (attribution, similar),
    )


def show(ledger: Ledger, run: str, round_no: int) -> Outcome:
    detail = ledger.service().round_detail(run, round_no)
    return Outcome({"status": "ok", **detail}, detail)


def compare(ledger: Ledger, run: str, rounds: list[int]) -> Outcome:
    result = ledger.service().compare(run, rounds[0], rounds[1])
    return Outcome({"status": "ok", **result}, result)


# --- audit -----------------------------------------------------------------------------------


def pinned_note(value: str | None) -> str | None:
    from ledger.integrity.audit import parse_pinned, read_note_arg

    if value is None:
        return None
    note = read_note_arg(value)
    parse_pinned(note)  # a malformed note is rejected (exit 2) before the ledger is opened
    return note


def key_arg(value: str | None, flag: str) -> str | None:
    from ledger.integrity.audit import read_key_arg

    return read_key_arg(value, flag) if value is not None else None


def _failed_at(f, of: str = "ledger") -> str:
    where = f"seq {f.seq} ({f.stream_id} v{f.stream_version})" if f.seq else of
    what = "verification" if of == "ledger" else f"{of} verification"
    return f"{what} failed at {where}: {f.check}: {f.reason}"


def verify(
    ledger: Ledger,
    run: str | None = None,
    checkpoint: str | None = None,
    verifier_key: str | None = None,
    artifacts: bool = False,
    bundle: str | None = None,
    chain: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> Outcome:
    from ledger.errors import InputError

    if chain:
        if artifacts or any(v is not None for v in (checkpoint, verifier_key, bundle)):
            raise InputError(
                "--chain checks the hash chain alone; it takes no --checkpoint, "
                "--verifier-key, --artifacts or --bundle"
            )
        from ledger.integrity.verify import verify_chain

        report = verify_chain(ledger.store(), run, on_progress=on_progress)
        failure = None if report.ok else _failed_at(report.first_failure)
        return Outcome(report.as_dict(), ("chain", report), failure)
    key = key_arg(verifier_key, "--verifier-key")
    note = pinned_note(checkpoint)
    if key is not None and note is None:
        raise InputError("--verifier-key needs --checkpoint")
    if bundle is not None:
        from ledger.integrity.bundle import check_bundle

        if run is not None or artifacts:
            raise InputError("--bundle is checked on its own; it takes no --run or --artifacts")
        report, _ = check_bundle(input_path(bundle, "--bundle"), pinned_note=note, verifier_key=key)
        failure = None if report.ok else _failed_at(report.first_failure, "bundle")
        return Outcome(report.as_dict(), ("bundle", report), failure)
    from ledger.integrity import audit

    report = audit.verify(
        ledger.store(),
        run,
        pinned_note=note,
        verifier_key=key,
        artifacts=artifacts,
        on_progress=on_progress,
    )
    failure = None
    if not report.ok:
        if report.first_failure is not None:
            failure = _failed_at(report.first_failure)
        else:
            assert report.artifacts is not None
            count = len(report.artifacts.changed) + len(report.artifacts.missing)
            from ledger.inputs.jsonio import plural

            failure = (
                f"the ledger verifies, but {plural(count, 'evidence file')} changed or vanished"
            )
    return Outcome(report.as_dict(), ("ledger", report), failure)


def check_merge(
    ledger: Ledger,
    run: str,
    kernel: str,
    checkpoint: str | None = None,
    verifier_key: str | None = None,
    strict_artifacts: bool = False,
    markdown: bool = False,
) -> Outcome:
    from ledger.integrity.gate import check_merge as gate

    key = key_arg(verifier_key, "--verifier-key")
    note = pinned_note(checkpoint)
    if key is not None and note is None:
        from ledger.errors import InputError

        raise InputError("--verifier-key needs --checkpoint")
    result = gate(
        ledger.store(),
        run,
        input_path(kernel, "--kernel"),
        pinned_note=note,
        verifier_key=key,
        strict_artifacts=strict_artifacts,
    )
    body = result.as_dict()
    if markdown:
        body["markdown"] = result.markdown()
    failure = None
    if not result.ok:
        more = f" (and {len(result.reasons) - 1} more)" if len(result.reasons) > 1 else ""
        failure = f"check-merge failed: {result.reasons[0]}{more}"
    return Outcome(body, result, failure)


def restore(ledger: Ledger, run: str, round_no: int | None = None):
    """The kernel `checkout` restores, read from the ledger."""
    from ledger.integrity.gate import restore_kernel

    return restore_kernel(ledger.store(), run, round_no)


def checkout(
    ledger: Ledger,
    run: str,
    out: str | None,
    round_no: int | None = None,
    force: bool = False,
) -> Outcome:
    from ledger.errors import InputError
    from ledger.integrity.gate import restore_kernel, write_kernel

    if out is None:
        raise InputError(
            "a JSON result does not carry the kernel's source; name the kernel file with --out"
        )
    store = ledger.store()
    restored = restore_kernel(store, run, round_no)
    written = write_kernel(Path(out), restored.content, force=force, protected=store.ledger_files())
    return Outcome(
        {
            "status": "ok",
            "run_id": restored.run_id,
            "round": restored.round,
            "sha256": restored.sha256,
            "recorded_path": restored.recorded_path,
            "path": str(written),
            "bytes": len(restored.content),
        },
        (restored, written),
    )


def stderr_line(message: str) -> None:
    from cli.output import terminal_safe

    sys.stderr.write(f"Error: {terminal_safe(message)}\n")
