"""The read use cases, one method each: what a run's events say, for `show`, `compare`,
`history`'s explanations, the reports and `analyze`. Nothing here writes. `LedgerService`
has them as its methods (`Queries`). (`status` and `history` themselves read the projection
rows through the store, without the service: ledger/store/history.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ledger.core import decide
from ledger.core.actors import parsed
from ledger.core.events import MeasurementsRecorded as Measured
from ledger.core.events import RoundDecided, RunPlanned, ValidationLinked
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView, resubmission, resubmissions
from ledger.errors import InputError
from ledger.inputs.models import explain_inputs
from ledger.services.session import Session
from ledger.store import readmodel
from ledger.store.eventstore import StoredEvent


class Queries(Session):
    """The read use cases, one method each."""

    def round_detail(self, run_id: str, round_no: int) -> dict[str, Any]:
        """One round in full: what was submitted, validated, measured, profiled and decided."""
        _, stream = self.state(run_id)
        detail: dict[str, Any] = {"run_id": run_id, "round": round_no, "profiles": []}
        submitted = next(
            (
                e
                for e in (r.event() for r in stream if r.event_type == "RoundSubmitted")
                if getattr(e, "round", None) == round_no
            ),
            None,
        )
        # a candidate profiled before its round (`profile --candidate`) joins that round
        early = submitted.candidate.sha256 if submitted is not None else None  # type: ignore[union-attr]
        decided_rounds: list[tuple[int, str, str]] = []  # every decided round's candidate
        for record in stream:
            event = record.event()
            if isinstance(event, RoundDecided):
                decided_rounds.append((event.round, event.candidate_sha256, event.decision))
            joined = (
                record.event_type == "ProfileRecorded"
                and getattr(event, "subject", None) == "candidate"
                and getattr(event, "kernel_sha256", None) == early
            )
            if getattr(event, "round", None) != round_no and not joined:
                continue
            payload = record.payload_value()
            payload["seq"] = record.seq
            key = {
                "RoundSubmitted": "submitted",
                "ValidationLinked": "validation",
                "MeasurementsRecorded": "measurements",
                "RoundDecided": "decision",
                "RunReopened": "reopened",
            }.get(record.event_type)
            if key == "measurements" and payload.get("role") == "reference":
                key = "reference"  # the parent measured beside the candidate, in its session
            if record.event_type == "ProfileRecorded":
                detail["profiles"].append(payload)
            elif key is not None and (
                round_no > 0 or key in ("validation", "measurements", "reference")
            ):
                detail[key] = payload
                if key == "decision":  # who recorded it (null before actors were recorded)
                    detail["actor"] = parsed(record.actor)
        if round_no > 0 and "decision" not in detail:
            raise InputError(f"run {run_id!r} has no round {round_no}")
        if "decision" in detail:
            from ledger.core.explain import explain

            decided = RoundDecided.model_validate(
                {k: v for k, v in detail["decision"].items() if k != "seq"}
            )
            read = [
                model.model_validate({k: v for k, v in detail[key].items() if k != "seq"})
                for key, model in (("validation", ValidationLinked), ("reference", Measured))
                if key in detail
            ]
            why = explain(decided, **explain_inputs(read).get(round_no, {}))
            detail["explanation"] = why.as_dict()
            earlier = resubmissions(decided_rounds).get(round_no)
            if earlier:  # the same candidate file was submitted in earlier rounds
                subject = f"the candidate of round {round_no}"
                detail["resubmission"] = resubmission(subject, decided.decision, earlier)
        return detail

    def explanations(self, run_id: str) -> dict[int, Any]:
        """Why each round got its decision (`explain.explain`), by round, from the run's
        RoundDecided and failed ValidationLinked events (read through the type index)."""
        from ledger.core.explain import explain

        with self.store.transaction() as conn:
            stored = self.store.read_stream(
                conn, run_id, types=("RoundDecided", "ValidationLinked", "MeasurementsRecorded")
            )
        events = [record.event() for record in stored]
        inputs = explain_inputs(events)
        return {
            d.round: explain(d, **inputs.get(d.round, {}))
            for d in events
            if isinstance(d, RoundDecided)
        }

    def explain_rounds(self, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], Any]:
        """`explain.explain` for each (run, round) given, each read through the type index
        (a run's n-th RoundDecided is round n): for `history`, whose rows come from the
        projection."""
        from ledger.core.explain import explain

        return {
            key: explain(decided, **inputs)
            for key, (decided, inputs) in self._decided(keys).items()
        }

    def _decided(
        self, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[RoundDecided, dict[str, Any]]]:
        """Each (run, round)'s RoundDecided and what `explain` takes beside it
        (`explain_inputs`): for a FAIL the cases its validation's case matrix marks as
        failed, for a round measured beside a same-session reference its medians, read
        through the type index (a round's events are appended together: its reference just
        before its candidate's measurements)."""
        out: dict[tuple[str, int], tuple[RoundDecided, dict[str, Any]]] = {}
        with self.store.transaction() as conn:
            for run_id, number in keys:
                version = readmodel.nth_version(conn, run_id, "RoundDecided", number)
                record = self.store.read_version(conn, run_id, version) if version else None
                if record is None:
                    continue
                decided = record.event()
                if not isinstance(decided, RoundDecided) or decided.round != number:
                    continue
                wanted: list[tuple[str, int]] = []
                if decided.decision == "FAIL":
                    wanted.append(("ValidationLinked", version))
                if decided.candidate_medians_us is not None:  # measured: a reference?
                    measured = readmodel.last_version_before(
                        conn, run_id, "MeasurementsRecorded", version
                    )
                    if measured is not None:
                        wanted.append(("MeasurementsRecorded", measured))
                read = []
                for event_type, before in wanted:
                    at = readmodel.last_version_before(conn, run_id, event_type, before)
                    event = self.store.read_version(conn, run_id, at).event() if at else None
                    if getattr(event, "round", None) == number:
                        read.append(event)
                out[(run_id, number)] = (decided, explain_inputs(read).get(number, {}))
        return out

    def all_views(self) -> list[RunView]:
        """Every run's whole stored projection (rows, cases, rounds, profiles), by plan time."""
        from ledger.store.history import list_runs

        with self.store.transaction() as conn:
            views = [self.store.stored_projection(conn, r.run_id) for r in list_runs(conn)]
        return [v for v in views if v is not None]

    def suggest(self, run_id: str, *, limit: int = 5) -> Any:
        """What to try next on the run: `suggest.suggest` over every other run of the
        ledger, the failure signatures' rounds with their reasons and failing cases."""
        from ledger.core import suggest

        target = suggest.target_of(self.full_view(run_id))
        found = suggest.suggest(target, self.all_views(), limit=limit)
        keys = [(b.run_id, b.round) for s in found.signatures for b in s.rounds]
        return suggest.with_failure_details(found, self.failure_details(keys))

    def failure_details(
        self, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], tuple[str, tuple[str, ...]]]:
        """(run, round) -> the decision's sentence and its failing cases: those its
        validation failed on (a FAIL), else the case that regressed most."""
        from ledger.core.explain import explain

        details = {}
        for key, (decided, inputs) in self._decided(keys).items():
            why = explain(decided, **inputs)
            failed = inputs.get("failed_cases")
            cases = tuple(failed or ()) if decided.decision == "FAIL" else ()
            if not cases and why.worst_case:
                cases = (why.worst_case,)
            details[key] = (why.sentence, cases)
        return details

    def knowledge(self, *, leave_out: Sequence[str] = ()) -> tuple[list[dict], dict[str, dict]]:
        """The ledger's runs (but `leave_out`) as knowledge candidates and the formal
        documents their promotion gives (`knowledge.candidates`, `knowledge.promoted`): each
        decided round's RoundDecided hash as evidence, each run verified by the replay
        verifier first."""
        from ledger.core import knowledge
        from ledger.integrity.verify import verify_ledger

        views = [v for v in self.all_views() if v.run.run_id not in leave_out]
        hashes: dict[tuple[str, int], str] = {}
        with self.store.transaction() as conn:
            for view in views:
                for stored in self.store.read_stream(
                    conn, view.run.run_id, types=("RoundDecided",)
                ):
                    hashes[(view.run.run_id, stored.event().round)] = stored.event_hash  # type: ignore[attr-defined]
        verified = {v.run.run_id: verify_ledger(self.store, v.run.run_id).ok for v in views}
        failed = [
            (r.run_id, r.round)
            for v in views
            for r in v.rounds
            if r.decision in ("FAIL", "DISCARD")
        ]
        found = knowledge.candidates(views, hashes, verified, self.failure_details(failed))
        return found, knowledge.promoted(found)

    def compare(self, run_id: str, first: int, second: int) -> dict[str, Any]:
        """Per-case medians of two rounds (0 is the baseline) and their relative deltas."""
        view, stream = self.state(run_id)
        evidence = RunEvidence.folded(record.event() for record in stream)
        sides = []
        for number in (first, second):
            measured = evidence.measured.get(number)
            if measured is None:
                if not 0 < number <= view.run.rounds_recorded:
                    raise InputError(f"run {run_id!r} has no round {number}")
                raise InputError(
                    f"round {number} of run {run_id!r} has no measurements (a FAIL round)"
                )
            sides.append({m.case_id: m.median_us for m in measured.measurements})
        cases = []
        for case in view.cases:
            a, b = sides[0][case.case_id], sides[1][case.case_id]
            cases.append(
                {
                    "case_id": case.case_id,
                    "weight": case.weight,
                    "a_median_us": a,
                    "b_median_us": b,
                    "relative_change": (b - a) / a,
                }
            )
        weights = [c.weight for c in view.cases]
        sessions = [(evidence.measured[n].session or {}).get("id") for n in (first, second)]
        return {
            "run_id": run_id,
            "round_a": first,
            "round_b": second,
            # the session each side's medians were measured in (null: not named), and the
            # rounds decided on a same-session reference rather than on these medians
            "sessions": sessions,
            "decided_on_reference": [n for n in (first, second) if n in evidence.references],
            "cases": cases,
            "relative_improvement": decide.weighted_improvement(
                weights, [c["a_median_us"] for c in cases], [c["b_median_us"] for c in cases]
            ),
        }

    def planned_event(self, run_id: str) -> RunPlanned:
        """The run's RunPlanned, refused when the run is unknown."""
        with self.store.transaction() as conn:
            first = self.store.read_version(conn, run_id, 1)
        if first is None:
            raise InputError(f"run {run_id!r} is not in the ledger")
        event = first.event()
        assert isinstance(event, RunPlanned)
        return event

    def head_hash(self, run_id: str) -> str:
        """The event hash of the run's latest event."""
        with self.store.transaction() as conn:
            return self.store.stream_head(conn, run_id)[1]

    def stream(self, run_id: str) -> list[StoredEvent]:
        """The run's events in version order."""
        with self.store.transaction() as conn:
            return self.store.read_stream(conn, run_id)
