"""What a decision needs beyond the run's projection row, folded from the run's events:
the latest profile of each kernel, the timings of every round, and the mechanisms of the
failed rounds since the last diagnosis. `record` folds the stream once before deciding;
the verifier folds the same events incrementally. Pure: no I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.events import (
    DiagnosisRecorded,
    Event,
    MeasurementsRecorded,
    ProfileRecorded,
    RoundDecided,
)


@dataclass
class RunEvidence:
    profiles: dict[str, ProfileRecorded] = field(default_factory=dict)
    measured: dict[int, MeasurementsRecorded] = field(default_factory=dict)
    failed_mechanisms: dict[str, list[int]] = field(default_factory=dict)

    def apply(self, event: Event) -> None:
        if isinstance(event, ProfileRecorded):
            self.profiles[event.kernel_sha256] = event
        elif isinstance(event, MeasurementsRecorded):
            self.measured[event.round] = event
        elif isinstance(event, RoundDecided):
            if event.decision != "KEEP" and event.mechanism is not None:
                self.failed_mechanisms.setdefault(event.mechanism, []).append(event.round)
        elif isinstance(event, DiagnosisRecorded):
            self.failed_mechanisms = {}

    def signals(self, kernel_sha256: str) -> dict[str, float] | None:
        profile = self.profiles.get(kernel_sha256)
        return dict(profile.signals) if profile else None

    def bottleneck(self, kernel_sha256: str) -> str | None:
        profile = self.profiles.get(kernel_sha256)
        if profile is None or profile.attribution is None:
            return None
        return profile.attribution.get("bottleneck")

    def samples(self, round_no: int) -> list[list[float]] | None:
        """Per-case raw samples measured in a round (0: baseline), if every case has them."""
        measured = self.measured.get(round_no)
        if measured is None:
            return None
        out = []
        for m in measured.measurements:
            if not m.samples_us:
                return None
            out.append(list(m.samples_us))
        return out
