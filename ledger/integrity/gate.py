"""The pre-merge gate (`check-merge`) and restoring kernels from the ledger (`checkout`).

check-merge passes only when all of these hold:

    concluded    the run concluded `passed`
    kernel       the file to merge is byte for byte the run's best kernel
    verify       the run's events verify: hashes, chain, canonical payloads, replay of every
                 decision, projections, stored kernel sources, stored checkpoints
    checkpoint   the pinned checkpoint, when one is given, still holds
    artifacts    files the run's events name still hash to what was recorded; a change is
                 reported, and is a failure only with `strict_artifacts`

Every reason is a sentence a reviewer can act on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger import files
from ledger.core.actors import describe, parsed
from ledger.core.events import RoundSubmitted, RunPlanned
from ledger.core.projections import resubmission, resubmissions
from ledger.errors import CheckFailed, InputError
from ledger.inputs.jsonio import display, read_bytes
from ledger.integrity import audit
from ledger.integrity.hashing import sha256_hex
from ledger.store.eventstore import Store, StoredEvent
from ledger.text import md_line, pct

OK, FAILED, WARN, SKIPPED, NOT_RUN = "ok", "failed", "changed", "not given", "not run"


@dataclass
class GateResult:
    run_id: str
    kernel_path: str
    kernel_sha256: str
    best_kernel_sha256: str
    best_round: int
    conclusion: str | None
    checks: dict[str, str]
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verification: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    # who recorded each decision and the conclusion (actor objects; None before actors)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    concluded_by: dict[str, str] | None = None

    @property
    def ok(self) -> bool:
        return not self.reasons

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "failed",
            "run_id": self.run_id,
            "kernel": {"path": self.kernel_path, "sha256": self.kernel_sha256},
            "best_kernel_sha256": self.best_kernel_sha256,
            "best_round": self.best_round,
            "conclusion": self.conclusion,
            "checks": dict(self.checks),
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "verification": self.verification,
            "artifacts": self.artifacts,
            "decisions": self.decisions,
            "concluded_by": self.concluded_by,
        }

    def recorded_by(self) -> list[str]:
        """Who kept each kept round and who concluded the run, one sentence each."""
        lines = [
            f"round {d['round']} {d['decision']} recorded by {describe(d['actor'])}"
            for d in self.decisions
            if d["decision"] == "KEEP"
        ]
        if self.conclusion is not None:
            lines.append(f"concluded {self.conclusion} by {describe(self.concluded_by)}")
        return lines

    def markdown(self) -> str:
        """A summary for a pull-request comment."""
        mark = {OK: "✅", FAILED: "❌", WARN: "⚠️", SKIPPED: "", NOT_RUN: ""}
        verdict = "✅ passed" if self.ok else "❌ failed"
        checkpoint = self.verification.get("checkpoint")
        rows = [
            ("run concluded `passed`", "concluded", f"conclusion: {self.conclusion or 'none'}"),
            (
                "kernel is the run's best",
                "kernel",
                f"`{self.kernel_sha256[:16]}` vs best `{self.best_kernel_sha256[:16]}` "
                f"(round {self.best_round})",
            ),
            (
                "history verifies (chain, replay, projections)",
                "verify",
                f"{self.verification.get('events_checked', 0)} events",
            ),
            (
                "pinned checkpoint holds",
                "checkpoint",
                f"size {checkpoint['size']}" if checkpoint else "none given",
            ),
            (
                "evidence files unchanged",
                "artifacts",
                f"{self.artifacts.get('checked', 0)} files checked",
            ),
        ]
        lines = [
            f"### kernel-ledger check-merge: {verdict}",
            "",
            f"Run `{self.run_id}`, kernel `{self.kernel_path}`.",
            "",
            "| check | result | detail |",
            "|---|---|---|",
        ]
        for title, key, detail in rows:
            status = self.checks.get(key, NOT_RUN)
            shown = f"{mark.get(status, '')} {status}".strip()
            lines.append(f"| {title} | {shown} | {detail} |")
        if self.reasons:
            lines += ["", "**Why it failed**", ""] + [f"- {md_line(r)}" for r in self.reasons]
        if self.notes:
            lines += ["", "**Notes**", ""] + [f"- {md_line(n)}" for n in self.notes]
        who = self.recorded_by()
        if who:
            lines += ["", "**Who recorded it**", ""] + [f"- {md_line(w)}" for w in who]
        lines += [
            "",
            f"Reproduce: `kernel-ledger check-merge --run {self.run_id} --kernel "
            f"{self.kernel_path}`",
            "",
        ]
        return "\n".join(lines)


def check_merge(
    store: Store,
    run_id: str,
    kernel: Path,
    *,
    pinned_note: str | None = None,
    verifier_key: str | None = None,
    strict_artifacts: bool = False,
    since_note: str | None = None,
) -> GateResult:
    """Run every check of the gate; never stops at the first failing one. With `since_note`
    the history is verified from that checkpoint on (`audit.verify_since`), which is then
    the checkpoint that must hold."""
    with store.transaction() as conn:
        view = store.stored_projection(conn, run_id)
        stream = store.read_stream(conn, run_id) if view is not None else []
    if view is None:
        raise InputError(f"run {run_id!r} is not in the ledger")
    kernel = Path(kernel)
    data = read_bytes(kernel, "--kernel")
    digest = sha256_hex(data)
    run = view.run
    result = GateResult(
        run_id=run_id,
        kernel_path=str(kernel),
        kernel_sha256=digest,
        best_kernel_sha256=run.best_kernel_sha256,
        best_round=run.best_round,
        conclusion=run.conclusion,
        checks={},
        decisions=[
            {"round": value["round"], "decision": value["decision"], "actor": parsed(e.actor)}
            for e, value in ((e, e.payload_value()) for e in stream)
            if e.event_type == "RoundDecided"
        ],
        concluded_by=next(
            (parsed(e.actor) for e in reversed(stream) if e.event_type == "RunConcluded"), None
        ),
    )
    if run.conclusion == "passed":
        result.checks["concluded"] = OK
    else:
        result.checks["concluded"] = FAILED
        if run.conclusion is None:
            result.reasons.append(
                f"Run {run_id} has not concluded; conclude it with kernel-ledger analyze "
                f"--run {run_id} once its rounds are done."
            )
        else:
            result.reasons.append(
                f"Run {run_id} concluded {run.conclusion}, not passed: its cumulative "
                f"improvement {pct(run.cumulative_improvement)} did not reach the target "
                f"{pct(run.target_relative_improvement)} (objective.target_relative_improvement), "
                "so no kernel of it may be merged. A concluded run takes no more rounds: to "
                "go on, plan a new run from its best kernel (kernel-ledger checkout --run "
                f'{run_id} --out FILE) with parent_run_id "{run_id}" in its config and a '
                "target it can reach."
            )
    again = resubmissions(
        (r.round, r.candidate_sha256, r.decision)
        for r in view.rounds
        if r.candidate_sha256 == run.best_kernel_sha256
    ).get(run.best_round)
    if again and run.best_round > 0:  # said, never refused: the verdict does not change
        said = resubmission(f"the best kernel (round {run.best_round})", "KEEP", again)
        result.notes.append(said["sentence"][0].upper() + said["sentence"][1:] + ".")
    if digest == run.best_kernel_sha256:
        result.checks["kernel"] = OK
    else:
        result.checks["kernel"] = FAILED
        result.reasons.append(
            f"The file {display(kernel)} (sha256 {digest[:16]}…) is not the best kernel of run "
            f"{run_id} ({run.best_kernel_sha256[:16]}…, round {run.best_round})"
            f"{_which_kernel(digest, stream, view)}; restore the best one with kernel-ledger "
            f"checkout --run {run_id}."
        )
    if since_note is not None:
        report = audit.verify_since(store, since_note, verifier_key)
        report.artifacts = audit.check_artifacts(store, run_id)
        report.pinned, report.since = report.since, None
    else:
        report = audit.verify(
            store, run_id, pinned_note=pinned_note, verifier_key=verifier_key, artifacts=True
        )
    result.verification = {
        key: value for key, value in report.as_dict().items() if key != "artifacts"
    }
    ledger_failure = report.ledger.first_failure or next(
        (
            audit.Failure(None, None, None, "checkpoints", s.reason or "")
            for s in report.stored
            if s.status == "failed"
        ),
        None,
    )
    if ledger_failure is None:
        result.checks["verify"] = OK
    else:
        result.checks["verify"] = FAILED
        where = f"at seq {ledger_failure.seq} " if ledger_failure.seq is not None else ""
        result.reasons.append(
            f"The history of run {run_id} does not verify {where}({ledger_failure.check}): "
            f"{ledger_failure.reason}."
        )
    if report.pinned is None:
        result.checks["checkpoint"] = SKIPPED
    elif report.pinned.status == OK:
        result.checks["checkpoint"] = OK
    else:
        result.checks["checkpoint"] = report.pinned.status
        result.reasons.append(
            f"The pinned checkpoint (size {report.pinned.size}) does not hold: "
            f"{report.pinned.reason or 'the ledger stopped verifying before it'}."
        )
    artifacts = report.artifacts
    assert artifacts is not None
    result.artifacts = artifacts.as_dict()
    sentences = [s[0].upper() + s[1:] + "." for s in artifacts.sentences()]
    if artifacts.ok:
        result.checks["artifacts"] = OK
    elif strict_artifacts:
        result.checks["artifacts"] = FAILED
        result.reasons += sentences
    else:
        result.checks["artifacts"] = WARN
        result.notes += sentences
    return result


def run_kernels(stream: Sequence[StoredEvent]) -> list[tuple[int, str, str]]:
    """(round, sha256, recorded path) of every kernel the run's events name, in their
    order: round 0 the starting kernel, then each round's candidate."""
    out = []
    for record in stream:
        if record.event_type in ("RunPlanned", "RoundSubmitted"):
            event = record.event()
            if isinstance(event, RunPlanned):
                out.append((0, event.kernel.sha256, event.kernel.path))
            elif isinstance(event, RoundSubmitted):
                out.append((event.round, event.candidate.sha256, event.candidate.path))
    return out


def _which_kernel(digest: str, stream, view) -> str:
    """What the file is, if it is some other kernel of the run."""
    number = next((n for n, sha, _ in run_kernels(stream) if sha == digest), None)
    if number == 0:
        return "; it is the run's starting kernel"
    if number is not None:
        decision = next((r.decision for r in view.rounds if r.round == number), "undecided")
        return f"; it is the candidate of round {number}, decided {decision}"
    return ""


# --- checkout ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Restored:
    run_id: str
    round: int
    sha256: str
    recorded_path: str
    content: bytes


def restore_kernel(store: Store, run_id: str, round_no: int | None = None) -> Restored:
    """The source of the run's best kernel, or of round N's candidate (0: the starting
    kernel), from the ledger's content-addressed store, checked against its sha256."""
    with store.transaction() as conn:
        view = store.load_view(conn, run_id)
        if view is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        stream = store.read_stream(conn, run_id)
        if round_no is None:
            sha, path, number = (
                view.run.best_kernel_sha256,
                view.run.best_kernel_path,
                view.run.best_round,
            )
        else:
            sha, path, number = _round_kernel(stream, run_id, round_no)
        content = store.get_blob(conn, sha)
    if content is None:
        raise CheckFailed(
            f"the source of kernel {sha} (run {run_id}, round {number}) is not stored in the "
            "ledger; run verify"
        )
    if sha256_hex(content) != sha:
        raise CheckFailed(
            f"the stored source of kernel {sha} does not hash to its key: the ledger is "
            "damaged; run verify"
        )
    return Restored(run_id, number, sha, path, content)


def _round_kernel(stream, run_id: str, round_no: int) -> tuple[str, str, int]:
    if round_no < 0:
        raise InputError("--round must be 0 (the starting kernel) or a round number")
    for number, sha, path in run_kernels(stream):
        if number == round_no:
            return sha, path, round_no
    raise InputError(f"run {run_id!r} has no round {round_no}")


def write_kernel(out: Path, content: bytes, *, force: bool, protected: Sequence[Path] = ()) -> Path:
    """Write a restored kernel; an existing file with other content is kept unless `force`
    (the rules of `ledger.files`)."""
    return files.write_output(Path(out), content, force=force, protected=protected)
