"""What a decision needs beyond the run's projection row, folded from the run's events:
the latest profile of each kernel, the timings of every round, and the mechanisms of the
failed rounds since the last diagnosis. `record` folds the stream once before deciding;
the verifier folds the same events incrementally. Pure: no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.events import (
    DiagnosisRecorded,
    Event,
    Measurement,
    MeasurementsRecorded,
    NoiseMeasured,
    ProfileRecorded,
    RoundDecided,
    RunPlanned,
)

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
    measured: dict[int, MeasurementsRecorded] = field(default_factory=dict)
    failed_mechanisms: dict[str, list[int]] = field(default_factory=dict)
    statistics: dict | None = None
    latest: dict[str, Samples] = field(default_factory=dict)
    noise_pairs: list[tuple[Samples, Samples]] = field(default_factory=list)

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
        elif isinstance(event, MeasurementsRecorded):
            self.measured[event.round] = event
            self.latest[event.kernel_sha256] = _samples(event.measurements)
        elif isinstance(event, RoundDecided):
            self.round_decided(event.round, event.decision, event.mechanism)
        elif isinstance(event, DiagnosisRecorded):
            self.failed_mechanisms = {}

    def round_decided(self, number: int, decision: str, mechanism: str | None) -> None:
        """A round that was not kept counts against the mechanism it changed."""
        if decision != "KEEP" and mechanism is not None:
            self.failed_mechanisms.setdefault(mechanism, []).append(number)

    def signals(self, kernel_sha256: str) -> dict[str, float] | None:
        profile = self.profiles.get(kernel_sha256)
        return dict(profile.signals) if profile else None

    def bottleneck(self, kernel_sha256: str) -> str | None:
        profile = self.profiles.get(kernel_sha256)
        if profile is None or profile.attribution is None:
            return None
        return profile.attribution.get("bottleneck")

    def samples(self, round_no: int) -> Samples | None:
        """Per-case raw samples measured in a round (0: baseline); None for a case without."""
        measured = self.measured.get(round_no)
        return _samples(measured.measurements) if measured is not None else None
