"""What a decision needs beyond the run's projection row, folded from the run's events:
the latest profile of each kernel, the timings of every round, the mechanisms of the
failed rounds since the last diagnosis, and the latest decision's chain factors (contract 2)
with the original baseline's session. Pure: no I/O, no clock.

There is one reducer, `RunEvidence.apply`, and two reads that use it: the verifier folds
every event of a run; `record` folds only the events a decision reads, found through the
events-by-type index (`LedgerService.decision_evidence`), and cuts the result to the
decision's `DecisionScope` with `RunEvidence.within`. The full fold cut the same way is
field for field what `record` reads, and a decision on either is the same decision
(tests/integration/test_evidence_reads.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ledger.core.events import (
    DiagnosisRecorded,
    Event,
    Measurement,
    MeasurementsRecorded,
    NoiseMeasured,
    ProfileRecorded,
    RoundDecided,
    RunPlanned,
)

if TYPE_CHECKING:
    from ledger.core.projections import RunView

Samples = list[list[float] | None]

EVIDENCE_EVENT_TYPES = (
    "RunPlanned",
    "ProfileRecorded",
    "MeasurementsRecorded",
    "NoiseMeasured",
    "RoundDecided",
    "DiagnosisRecorded",
)
"""The event types `RunEvidence.apply` reads; the others leave it unchanged."""


def _samples(measurements: list[Measurement]) -> Samples:
    return [list(m.samples_us) if m.samples_us else None for m in measurements]


@dataclass
class RunEvidence:
    profiles: dict[str, ProfileRecorded] = field(default_factory=dict)
    # the latest profile of each (kernel, planned case) where the profile named its case
    case_profiles: dict[tuple[str, str], ProfileRecorded] = field(default_factory=dict)
    measured: dict[int, MeasurementsRecorded] = field(default_factory=dict)
    failed_mechanisms: dict[str, list[int]] = field(default_factory=dict)
    statistics: dict | None = None
    latest: dict[str, Samples] = field(default_factory=dict)
    noise_pairs: list[tuple[Samples, Samples]] = field(default_factory=list)
    references: dict[int, MeasurementsRecorded] = field(default_factory=dict)
    chain_factors: list[float] | None = None  # the latest decision's (contract 2)
    baseline_session: dict | None = None  # the session the original baseline names

    @classmethod
    def folded(cls, events: Iterable[Event]) -> RunEvidence:
        """The evidence of `events`, applied in order: the one fold every read uses."""
        evidence = cls()
        for event in events:
            evidence.apply(event)
        return evidence

    def apply(self, event: Event) -> None:
        if isinstance(event, RunPlanned):
            self.statistics = event.statistics
        elif isinstance(event, NoiseMeasured):
            now = _samples(event.measurements)
            before = self.latest.get(event.kernel_sha256)
            if before is not None:
                self.noise_pairs.append((before, now))
            self.latest[event.kernel_sha256] = now
        elif isinstance(event, ProfileRecorded):
            self.profiles[event.kernel_sha256] = event
            if event.case_id is not None:
                self.case_profiles[(event.kernel_sha256, event.case_id)] = event
        elif isinstance(event, MeasurementsRecorded) and event.role == "reference":
            self.references[event.round] = event  # read by its own round's decision only
        elif isinstance(event, MeasurementsRecorded):
            self.measured[event.round] = event
            self.latest[event.kernel_sha256] = _samples(event.measurements)
            if event.round == 0:
                self.baseline_session = event.session
        elif isinstance(event, RoundDecided):
            self.chain_factors = event.chain_factors
            # a round that was not kept counts against the mechanism it changed
            if event.decision != "KEEP" and event.mechanism is not None:
                self.failed_mechanisms.setdefault(event.mechanism, []).append(event.round)
        elif isinstance(event, DiagnosisRecorded):
            self.failed_mechanisms = {}

    def within(self, scope: DecisionScope) -> RunEvidence:
        """This evidence cut to what a decision in `scope` reads: the profiles of its
        kernels, the measurements of its best round, the failed mechanisms only while the
        run needs a diagnosis, no latest samples per kernel (only a remeasure reads them);
        every other field whole."""
        return replace(
            self,
            profiles={k: p for k, p in self.profiles.items() if k in scope.kernels},
            case_profiles={k: p for k, p in self.case_profiles.items() if k[0] in scope.kernels},
            measured={r: m for r, m in self.measured.items() if r == scope.best_round},
            failed_mechanisms=(
                {m: list(r) for m, r in self.failed_mechanisms.items()} if scope.failures else {}
            ),
            latest={},
            noise_pairs=list(self.noise_pairs),
            references={},
        )

    def signals(self, kernel_sha256: str) -> dict[str, float] | None:
        profile = self.profiles.get(kernel_sha256)
        return dict(profile.signals) if profile else None

    def case_signals(self, kernel_sha256: str) -> dict[str, dict[str, float]]:
        """The signals of the kernel's latest profile of each case, by case id (only the
        profiles that named their case)."""
        return {
            case: dict(p.signals)
            for (kernel, case), p in self.case_profiles.items()
            if kernel == kernel_sha256
        }

    def bottleneck(self, kernel_sha256: str) -> str | None:
        profile = self.profiles.get(kernel_sha256)
        if profile is None or profile.attribution is None:
            return None
        return profile.attribution.get("bottleneck")

    def session(self, round_no: int) -> dict | None:
        """The session a round's candidate (0: the baseline) was measured in, if named."""
        measured = self.measured.get(round_no)
        return measured.session if measured is not None else None

    def samples(self, round_no: int) -> Samples | None:
        """Per-case raw samples measured in a round (0: baseline); None for a case without."""
        measured = self.measured.get(round_no)
        return _samples(measured.measurements) if measured is not None else None


@dataclass(frozen=True, slots=True)
class DecisionScope:
    """What of a run's evidence the decision on its next round reads (`decide_round`): the
    samples of the best round, the latest profile of a few kernels (the best and the
    candidate), the failed mechanisms since the last diagnosis only while the run needs a
    diagnosis, and the plan's statistics and every A/A pair whole."""

    best_round: int
    kernels: frozenset[str]
    failures: bool

    @classmethod
    def of(cls, view: RunView, kernels: Iterable[str]) -> DecisionScope:
        """The scope of a decision on the run in state `view` about these kernels."""
        run = view.run
        return cls(run.best_round, frozenset(kernels), run.needs_diagnosis)
