"""The events: small, frozen, past tense. Every fact the ledger knows is one of these.

Each class names its `event_type` and `schema_version`; `EVENT_TYPES` is the registry used
to read stored payloads back. Reading an unknown type fails loudly. `docs/events.md`
documents every field.
"""

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from ledger.core.decide import known_version
from ledger.core.mechanisms import known as known_vocabulary
from ledger.integrity.hashing import canonical

# (No `from __future__ import annotations` here: pydantic reads these annotations as the
# objects they are instead of evaluating their text, which makes each class cheaper to
# create at every command's start.)
# Every model refuses NaN and Infinity where a number is typed: JSON has no such numbers, and
# a payload must not become something else (null) on its way to canonical bytes. A model's
# validator and serializer are built on first use, so a command builds those of the events
# it reads and writes, not all of them.
_CONFIG = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, defer_build=True)


class Event(BaseModel):
    model_config = _CONFIG

    event_type: ClassVar[str]
    schema_version: ClassVar[int] = 1

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=False)

    def canonical_payload(self) -> bytes:
        # JSON-mode dumps write every key as a str: the key check can be skipped
        return canonical(self.payload(), string_keys=True)


class _OmitsUnset(BaseModel):
    """A model whose `OMITTED` fields are left out of its payload while they are None, so
    a value recorded before those fields existed serializes exactly as it did."""

    model_config = _CONFIG
    OMITTED: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for key in self.OMITTED:
            if data.get(key) is None:
                data.pop(key, None)
        return data


class FileRef(_OmitsUnset):
    """A file the ledger was given: where it was, and what it held.

    `path` is absolute. `written_path` is the path as the input file wrote it, present only
    when that differs from `path` (a relative path, resolved against the working directory or
    a manifest's folder). `resolved_path` is where `path` led once symlinks were followed;
    it is present only when that differs from `path`. So a FileRef of an absolute path
    without symlinks, and every event recorded before these fields existed, serializes
    exactly as `{path, sha256, size}`."""

    model_config = _CONFIG
    OMITTED: ClassVar[tuple[str, ...]] = ("resolved_path", "written_path")
    path: str
    sha256: str
    size: int
    resolved_path: str | None = None
    written_path: str | None = None


class CaseWeight(BaseModel):
    model_config = _CONFIG
    id: str
    weight: float


class ObjectiveFields(BaseModel):
    model_config = _CONFIG
    target_relative_improvement: float
    min_relative_improvement: float
    noise_floor: float
    max_case_regression: float


class LimitFields(BaseModel):
    model_config = _CONFIG
    max_rounds: int
    max_consecutive_failures: int


class NamedPath(_OmitsUnset):
    """A file an input named that was not there: its absolute path and, when that differs,
    the path as written."""

    model_config = _CONFIG
    OMITTED: ClassVar[tuple[str, ...]] = ("written_path",)
    path: str
    written_path: str | None = None


class Measurement(_OmitsUnset):
    """One case's timing as recorded. `samples_us` are kept whole when given.

    `source_not_found` is the raw-samples file the row named (`source`) that did not exist:
    the JSON-file controller never reads that file, so the row's median and repeats stand
    on their own. `source_not_samples` says why a `source` that does exist is not a samples
    file (a benchmark log, a dump of another shape): its bytes are recorded in `source` as
    evidence and, again, the median and repeats stand on their own. Each is present only
    then, so every other measurement serializes as it did before the fields existed."""

    model_config = _CONFIG
    OMITTED: ClassVar[tuple[str, ...]] = ("source_not_found", "source_not_samples")
    case_id: str
    median_us: float
    repeats: int
    samples_us: list[float] | None = None
    source: FileRef | None = None
    extra: dict[str, Any] = {}
    source_not_found: NamedPath | None = None
    source_not_samples: str | None = None


class RunPlanned(Event, _OmitsUnset):
    """A run was validated and locked: its kernel, cases, objective and limits."""

    event_type: ClassVar[str] = "RunPlanned"
    run_id: str
    parent_run_id: str | None
    op_name: str
    target: dict[str, Any]
    kernel: FileRef
    cases: list[CaseWeight]
    objective: ObjectiveFields
    limits: LimitFields
    statistics: dict[str, Any] | None = None
    measurement_policy: dict[str, Any] | None = None
    config: FileRef
    config_document: dict[str, Any]
    # what plan warned about (a likely typo in a key, an objective that reads like a
    # percentage); present only when there was a warning, so runs planned before the field
    # existed serialize exactly as they did
    warnings: list[str] | None = None
    OMITTED: ClassVar[tuple[str, ...]] = ("warnings",)


class ValidationLinked(Event, _OmitsUnset):
    """A correctness manifest (and its case matrix) vouched for a kernel."""

    event_type: ClassVar[str] = "ValidationLinked"
    round: int
    kernel_sha256: str
    manifest: FileRef
    manifest_run_id: str
    manifest_parent_run_id: str | None
    status: str
    case_matrix: FileRef | None
    case_ids: list[str]
    # the planned cases the case matrix reports as not passed, present only when the
    # manifest's own status says passed: the correctness gate fails them all the same, and
    # validations recorded before the field existed serialize exactly as they did
    cases_not_passed: list[str] | None = None
    OMITTED: ClassVar[tuple[str, ...]] = ("cases_not_passed",)

    @property
    def passed(self) -> bool:
        """Whether the correctness gate passed: the manifest says passed and its case matrix
        reports no planned case otherwise."""
        return self.status == "passed" and not self.cases_not_passed

    @property
    def gate_status(self) -> str:
        """The gate's status: the manifest's own, or `failed` where a case did not pass."""
        return "failed" if self.status == "passed" and self.cases_not_passed else self.status


class MeasurementsRecorded(Event, _OmitsUnset):
    """Timings of one kernel on every planned case (round 0 is the baseline)."""

    event_type: ClassVar[str] = "MeasurementsRecorded"
    round: int
    # "reference": the parent (best) kernel measured in the candidate's session, interleaved
    role: Literal["baseline", "candidate", "reference"]
    kernel_sha256: str
    measurements: list[Measurement]
    # where and when they were measured (the input's `session`); present only when named,
    # so measurements recorded before the field existed serialize exactly as they did
    session: dict[str, Any] | None = None
    OMITTED: ClassVar[tuple[str, ...]] = ("session",)


class RoundSubmitted(Event):
    """A round's hypothesis, change and candidate kernel, as the round result stated them."""

    event_type: ClassVar[str] = "RoundSubmitted"
    round: int
    parent_kernel_sha256: str
    candidate: FileRef
    hypothesis: str
    change: str
    mechanism: str | None = None
    profiler_signals: dict[str, float] | None = None
    expected_signal: dict[str, Any] | None = None
    result: FileRef
    result_document: dict[str, Any]


class BestKernel(BaseModel):
    model_config = _CONFIG
    sha256: str
    path: str
    round: int
    medians_us: list[float]


class CaseCheck(BaseModel):
    """The mechanism check on one case: the best kernel's and the candidate's profile of
    that same case."""

    model_config = _CONFIG
    case_id: str
    best_value: float | None
    candidate_value: float | None
    confirmed: bool | None


class MechanismCheck(_OmitsUnset):
    """Did the profiler signal the round named move the way it said, by enough?

    Where either kernel has profiles of named cases, the check is made case by case, each
    case against the same case (`cases`); `case_id` names the case whose values are the
    top-level ones. Both are present only then, so a check made before cases were profiled
    serializes exactly as it did."""

    model_config = _CONFIG
    OMITTED: ClassVar[tuple[str, ...]] = ("case_id", "cases")
    metric: str
    direction: Literal["increase", "decrease"]
    min_change: float
    best_value: float | None
    candidate_value: float | None
    confirmed: bool | None
    case_id: str | None = None
    cases: list[CaseCheck] | None = None


class StartProfile(BaseModel):
    """The best kernel's latest profile when the round was decided."""

    model_config = _CONFIG
    kernel_sha256: str
    bottleneck: str | None
    signals: dict[str, float]


class MechanismEntry(BaseModel):
    """The vocabulary entry a round's mechanism maps to (ledger/core/mechanisms.py): the
    entry's id (`other` when no phrase matched), the vocabulary's version, and which text
    named it ("mechanism" or "change"; None for `other`)."""

    model_config = _CONFIG
    entry: str
    vocabulary: int
    source: str | None

    @field_validator("vocabulary")
    @classmethod
    def _known_vocabulary(cls, version: int) -> int:
        return known_vocabulary(version)


class _UnderContract(Event, _OmitsUnset):
    """An event the contract decided: `contract` is the version of the rules it was
    decided under (`decide.CONTRACTS`). Version 1 is left out of the payload, so every
    event recorded before versions existed, and every one decided under version 1 since,
    serializes exactly as it did, and a payload without the key reads as version 1; a
    later version is written. A version this kernel-ledger does not know is refused."""

    contract: int = 1

    @field_validator("contract")
    @classmethod
    def _known(cls, version: int) -> int:
        return known_version(version)

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = _OmitsUnset._omit_unset(self, handler)
        if data.get("contract") == 1:
            del data["contract"]
        return data


class RoundDecided(_UnderContract):
    """The controller's decision, with every input needed to re-derive it."""

    event_type: ClassVar[str] = "RoundDecided"
    round: int
    decision: Literal["KEEP", "DISCARD", "NOISE", "FAIL"]
    evidence: Literal["medians", "samples", "validation"]
    case_ids: list[str]
    weights: list[float]
    objective: ObjectiveFields
    limits: LimitFields
    best_before: BestKernel
    candidate_sha256: str
    candidate_medians_us: list[float] | None
    relative_improvement: float | None
    worst_case_regression: float | None
    statistics: dict[str, Any] | None = None
    best_after: BestKernel
    consecutive_failures: int
    cumulative_improvement: float
    target_met: bool
    needs_diagnosis: bool
    remaining_rounds: int
    mechanism: str | None = None
    mechanism_check: MechanismCheck | None = None
    start_profile: StartProfile | None = None
    retried_rounds: list[int] = []
    flags: list[str] = []
    # the vocabulary entry of `mechanism`/`change`; left out while None, so decisions
    # recorded before the vocabulary (and those of a legacy import) keep their bytes
    mechanism_entry: MechanismEntry | None = None
    # contract 2, once a kept round had a same-session reference: per case the factor that
    # carries the best kernel's stored medians to the original baseline's session (the
    # cumulative improvement is the chained one), the plain comparison of the best kernel's
    # medians with the original baseline, and whether those two sides are known to come
    # from different sessions; left out while None, so every other decision keeps its bytes
    chain_factors: list[float] | None = None
    baseline_improvement: float | None = None
    baseline_across_sessions: bool | None = None
    OMITTED: ClassVar[tuple[str, ...]] = (
        "mechanism_entry",
        "chain_factors",
        "baseline_improvement",
        "baseline_across_sessions",
    )


class NoiseMeasured(Event, _OmitsUnset):
    """An A/A remeasure of the current best kernel: session drift comes from these."""

    event_type: ClassVar[str] = "NoiseMeasured"
    # `session`: where and when the remeasure was taken (the file's `session`); present only
    # when named, so remeasures recorded before the field existed serialize as they did
    OMITTED: ClassVar[tuple[str, ...]] = ("session",)
    kernel_sha256: str
    after_round: int
    measurements: list[Measurement]
    source: FileRef
    session: dict[str, Any] | None = None


class DiagnosisRecorded(Event):
    """A new bottleneck model after repeated failures; the failure count restarts."""

    event_type: ClassVar[str] = "DiagnosisRecorded"
    bottleneck: str
    evidence: str
    after_round: int
    consecutive_failures_before: int


class RunConcluded(_UnderContract):
    """The run ended; it accepts no more rounds."""

    event_type: ClassVar[str] = "RunConcluded"
    conclusion: Literal["passed", "failed", "inconclusive"]
    target_met: bool
    needs_diagnosis: bool
    cumulative_improvement: float
    round_count: int
    kept_rounds: list[int]
    best_kernel: BestKernel


class RunReopened(Event):
    """A concluded run took another round, as the JSON-file controller allows (its `record`
    accepts a round after `analyze`). The conclusion stays in the history; the run is active
    again until it is concluded anew. Appended together with the round that reopens it."""

    event_type: ClassVar[str] = "RunReopened"
    conclusion: Literal["passed", "failed", "inconclusive"]
    round: int
    reason: str


class ProfileRecorded(Event, _OmitsUnset):
    """Profiler output for one kernel of the run, normalized to signals and attributed.

    `subject` "candidate" is a profile of a candidate before its round was recorded (its
    round joins it by the kernel's sha256). `case_id` is the planned case the profile ran,
    present only when named, so every profile recorded before the field existed serializes
    exactly as it did."""

    event_type: ClassVar[str] = "ProfileRecorded"
    subject: Literal["baseline", "round", "kernel", "candidate"]
    round: int | None
    kernel_sha256: str
    origin: Literal["file", "round-result"]
    format: str
    kernel_name: str | None = None
    signals: dict[str, float]
    attributes: dict[str, str] = {}
    files: list[FileRef] = []
    aggregation: str = ""
    attribution: dict[str, Any] | None = None
    case_id: str | None = None
    OMITTED: ClassVar[tuple[str, ...]] = ("case_id",)


EVENT_TYPES: dict[str, type[Event]] = {
    cls.event_type: cls
    for cls in (
        RunPlanned,
        ValidationLinked,
        MeasurementsRecorded,
        RoundSubmitted,
        RoundDecided,
        RunConcluded,
        RunReopened,
        ProfileRecorded,
        DiagnosisRecorded,
        NoiseMeasured,
    )
}


UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}
"""Reading older schema versions: (event type, schema version) -> a pure function from a
payload of that version to the payload of the next. A change to what an event's payload
means raises its class's `schema_version` and adds the step from the version before here;
stored events keep their bytes, version and hash (verify checks those as stored) and are
read as the current model through the chain of steps. No event type has changed its schema
version yet, so the table is empty; a field added with a default needs no step (payloads
without the key read with the default; see `verify._as_recorded`)."""


class UnknownEventType(ValueError):
    pass


def load_event(event_type: str, schema_version: int, payload: dict[str, Any]) -> Event:
    """Rebuild an event object from its stored type, version and payload, upcasting a payload
    of an older schema version through `UPCASTERS`."""
    cls = EVENT_TYPES.get(event_type)
    if cls is None or schema_version > cls.schema_version:
        raise UnknownEventType(f"unknown event type {event_type!r} version {schema_version}")
    version = schema_version
    while version < cls.schema_version:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise UnknownEventType(
                f"unknown event type {event_type!r} version {schema_version}: no upcast from "
                f"version {version}"
            )
        payload = step(payload)
        version += 1
    return cls.model_validate(payload)
