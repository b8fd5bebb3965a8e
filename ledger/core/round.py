"""One round, from submission to decision: the rules that admit it and the events it becomes.

Pure: values in, values out; no I/O, no clock, no store. `record`, the legacy importer, the
verifier and the benchmarks' workload generator all go through this module, so a rule
changed here changes everywhere at once:

    admit(view, round, parent)            the refusals of a round submitted now (empty: admitted)
    round_events(view, evidence, plan,    RoundSubmitted, ValidationLinked,
                 submitted, validation,   [MeasurementsRecorded], [ProfileRecorded] and
                 measurements)            RoundDecided, folded into `evidence`
    decision(view, submitted, evidence,   the RoundDecided of `controller.decide_round`, under
             measurements[, recorded])    the newest contract version; the verifier replays a
                                          stored decision through it, under its own version

`controller.decide_round` is called from `decision` and from nowhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ledger.core.controller import attribution_settings, decide_round, profile_event
from ledger.core.events import (
    Event,
    Measurement,
    MeasurementsRecorded,
    ProfileRecorded,
    RoundDecided,
    RoundSubmitted,
    RunPlanned,
    ValidationLinked,
)
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView

RULES = ("concluded", "budget", "order", "parent")
"""The admission rules, in the order they are checked and reported."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a round is not admitted: the rule it breaks and the facts, worded once per rule
    for each place a refusal is reported.

    `message` is what `record` says (one line, exit 2); `problem` is what the legacy importer
    lists for a folder's round; `reason` is what `verify` reports for a stored round.
    Detected once, by `admit`; only the wording differs with where it is reported."""

    rule: str
    run_id: str
    round: int
    next_round: int
    max_rounds: int
    parent: str
    best: str
    conclusion: str | None

    @property
    def message(self) -> str:
        run = repr(self.run_id)
        if self.rule == "concluded":
            return f"run {run} has concluded ({self.conclusion}); it accepts no rounds"
        if self.rule == "budget":
            return f"round budget exhausted: run {run} has recorded all {self.max_rounds} rounds"
        if self.rule == "order":
            return (
                f"round {self.round} is out of order: the next round of run {run} is "
                f"{self.next_round}"
            )
        return (
            f"stale parent: parent_kernel_sha256 {self.parent} is not the current best kernel "
            f"of run {run} ({self.best})"
        )

    def problem(self, where: str) -> str:
        """`where` names the round's place in the folder (rounds.json rounds[i])."""
        if self.rule == "concluded":
            return f"round {self.round} follows the run's conclusion"
        if self.rule == "budget":
            return f"round {self.round} is beyond the budget of {self.max_rounds} rounds"
        if self.rule == "order":
            return f"{where} is round {self.round}, but the next round is {self.next_round}"
        return (
            f"broken parent chain: round {self.round} names parent {self.parent[:12]}…, but "
            f"the best kernel after round {self.next_round - 1} was {self.best[:12]}…"
        )

    @property
    def reason(self) -> str:
        if self.rule == "concluded":
            return "a round was submitted after the run concluded"
        if self.rule == "budget":
            return f"round {self.round} exceeds max_rounds"
        if self.rule == "order":
            return f"round {self.round} is out of sequence"
        return "the round's parent was not the best kernel of its time"


def admit(view: RunView, round_no: int, parent_kernel_sha256: str) -> list[Refusal]:
    """Every rule a round numbered `round_no`, built on `parent_kernel_sha256`, breaks when
    submitted to the run in state `view`, in `RULES` order; empty when it is admitted.

    The run must not have concluded, must have rounds left in its budget, the round must be
    the next one, and its parent must be the run's current best kernel."""
    run = view.run
    next_round = run.rounds_recorded + 1
    broken = (
        ("concluded", view.concluded),
        ("budget", next_round > run.max_rounds),
        ("order", round_no != next_round),
        ("parent", parent_kernel_sha256 != run.best_kernel_sha256),
    )
    return [
        Refusal(
            rule=rule,
            run_id=run.run_id,
            round=round_no,
            next_round=next_round,
            max_rounds=run.max_rounds,
            parent=parent_kernel_sha256,
            best=run.best_kernel_sha256,
            conclusion=run.conclusion,
        )
        for rule, fails in broken
        if fails
    ]


def decision(
    view: RunView,
    submitted: RoundSubmitted,
    evidence: RunEvidence,
    measurements: list[Measurement] | None,
    *,
    recorded: RoundDecided | None = None,
    contract: int | None = None,
) -> RoundDecided:
    """The round's decision: `measurements` are the candidate's (None: it failed validation),
    `evidence` is the run's evidence folded through the round's events before the decision.

    A new decision is made under the newest contract version (or `contract`); a replay
    passes the stored decision as `recorded`, which is re-derived under the version it
    records."""
    return decide_round(
        view=view,
        submitted=submitted,
        evidence=evidence,
        candidate_medians=(
            [m.median_us for m in measurements] if measurements is not None else None
        ),
        candidate_samples=(
            [list(m.samples_us) if m.samples_us else None for m in measurements]
            if measurements is not None
            else None
        ),
        contract=contract if recorded is None else recorded.contract,
        vocabulary=(
            recorded.mechanism_entry.vocabulary
            if recorded is not None and recorded.mechanism_entry is not None
            else None
        ),
    )


@dataclass(frozen=True, slots=True)
class DecidedRound:
    """A round's events in append order, the decision last (also as `decided`)."""

    events: list[Event]
    decided: RoundDecided


def round_events(
    *,
    view: RunView,
    evidence: RunEvidence,
    plan: RunPlanned,
    submitted: RoundSubmitted,
    validation: ValidationLinked,
    measurements: list[Measurement] | None,
    vocabulary: bool = True,
    profiles: Sequence[ProfileRecorded] = (),
    reference: list[Measurement] | None = None,
    session: dict | None = None,
    contract: int | None = None,
) -> DecidedRound:
    """The events of an admitted round, in the order they are appended: the submission, its
    validation, the candidate's measurements (when validation passed), the profile its
    result carried (when it named profiler signals), the profiles of its candidate read
    from the files the round result named (`profiles`, read by the caller) and the decision
    on all of them.

    `view` is the run before the round and `evidence` the run's evidence before it; each
    event returned is folded into `evidence` as it is made, the decision last. Without
    `vocabulary` the decision records no mechanism entry, as decisions did before the
    vocabulary existed (the legacy importer's, whose events must hash as they always did);
    `contract` names the contract version to decide under (None: the newest)."""
    candidate = submitted.candidate.sha256
    events: list[Event] = [submitted, validation]
    if measurements is not None and reference is not None:
        events.append(
            MeasurementsRecorded(
                round=submitted.round,
                role="reference",
                kernel_sha256=submitted.parent_kernel_sha256,
                measurements=reference,
                session=session,
            )
        )
    if measurements is not None:
        events.append(
            MeasurementsRecorded(
                round=submitted.round,
                role="candidate",
                kernel_sha256=candidate,
                measurements=measurements,
                session=session,
            )
        )
    if submitted.profiler_signals:
        events.append(
            profile_event(
                attribution_settings(plan),
                subject="round",
                round_no=submitted.round,
                kernel_sha256=candidate,
                origin="round-result",
                fmt="signals-json",
                signals=dict(submitted.profiler_signals),
            )
        )
    events.extend(profiles)
    for event in events:
        evidence.apply(event)
    decided = decision(view, submitted, evidence, measurements, contract=contract)
    if not vocabulary:
        decided = decided.model_copy(update={"mechanism_entry": None})
    evidence.apply(decided)
    events.append(decided)
    return DecidedRound(events, decided)
