"""The input files, as pydantic models with every acceptance rule of SPEC 2.1-2.3.

Booleans are never numbers; numbers must be finite; integers fit RFC 8785. A rejection is
one line that names the field path, e.g. `baseline[2].median_us must be positive and finite`.
Unknown extra keys are allowed and kept verbatim in the events (they are evidence).
Paths inside a config, round result or measurements file resolve as the JSON-file controller
resolves them: against the working directory (or the base folder the caller names), not the
file's folder; a manifest's artifact URIs resolve against the manifest's folder.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from ledger.errors import CoverageError, InputError
from ledger.inputs.jsonio import RUN_ID_RE, JsonFile, display, read_json, time_problem
from ledger.integrity.hashing import MAX_SAFE_INTEGER, sha256_hex

if TYPE_CHECKING:
    from ledger.core.events import ValidationLinked

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
RFC3339_UTC_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
SECRET_SUFFIXES = ("TOKEN", "PASSWORD", "SECRET", "API_KEY", "APIKEY")
"""Run Manifest v1's secret-like names: one of these, or ending in `_` and one of these."""
SECRET_KEY_QUALIFIERS = ("SECRET", "PRIVATE")
"""The spec's list is of examples ("such as"): a name ending in `_KEY` with one of these
words before it is as secret-like (AWS_SECRET_ACCESS_KEY, DJANGO_SECRET_KEY,
SSH_PRIVATE_KEY), though no `*_SECRET` pattern matches it."""
RUN_TYPES = ("change-validation", "correctness", "debug", "performance", "profiling")
MANIFEST_STATUSES = ("planned", "running", "passed", "failed", "inconclusive", "cancelled")


# --- field types -------------------------------------------------------------------------


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number")
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        raise ValueError("must be within ±(2^53-1)")
    if not math.isfinite(value):
        raise ValueError("must be finite")
    return float(value)


def _positive(value: Any) -> float:
    try:
        number = _number(value)
    except ValueError:
        raise ValueError("must be positive and finite") from None
    if number <= 0:
        raise ValueError("must be positive and finite")
    return number


def _non_negative(value: Any) -> float:
    try:
        number = _number(value)
    except ValueError:
        raise ValueError("must be a finite number ≥ 0") from None
    if number < 0:
        raise ValueError("must be a finite number ≥ 0")
    return number


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be an integer ≥ 1")
    if value < 1 or value > MAX_SAFE_INTEGER:
        raise ValueError("must be an integer ≥ 1")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if not value.strip():
        raise ValueError("must be a non-empty string")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _sha256(value: Any) -> str:
    if not isinstance(value, str) or not SHA256_RE.match(value):
        raise ValueError("must be 64 lowercase hex digits")
    return value


def _schema_one(value: Any) -> int:
    if isinstance(value, bool) or value != 1 or not isinstance(value, int):
        raise ValueError("must be 1")
    return 1


Number = Annotated[float, BeforeValidator(_number)]


def _time_us(value: Any) -> float:
    number = _positive(value)
    problem = time_problem(number)
    if problem is not None:
        raise ValueError(problem)
    return number


MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
"""A case weight lies within [MIN_WEIGHT, MAX_WEIGHT]: their sum and every weighted mean
stay finite."""


def _weight(value: Any) -> float:
    number = _positive(value)
    if not MIN_WEIGHT <= number <= MAX_WEIGHT:
        raise ValueError(f"must be between {MIN_WEIGHT:g} and {MAX_WEIGHT:g}")
    return number


PositiveNumber = Annotated[float, BeforeValidator(_positive)]
TimeUs = Annotated[float, BeforeValidator(_time_us)]
Weight = Annotated[float, BeforeValidator(_weight)]
NonNegative = Annotated[float, BeforeValidator(_non_negative)]
Count = Annotated[int, BeforeValidator(_count)]
MAX_NAME_CHARS = 256
"""The longest name (op name, SoC, case id, mechanism) a ledger stores in a column of its
own, on every backend."""


def _name(value: Any) -> str:
    text = _text(value)
    if len(text) > MAX_NAME_CHARS:
        raise ValueError(f"must be at most {MAX_NAME_CHARS} characters")
    return text


def _run_id(value: Any) -> str:
    if not isinstance(value, str) or not RUN_ID_RE.fullmatch(value):
        raise ValueError("must match ^[a-z0-9][a-z0-9._-]{0,127}$")
    return value


Text = Annotated[str, BeforeValidator(_text)]
Name = Annotated[str, BeforeValidator(_name)]
RunId = Annotated[str, BeforeValidator(_run_id)]
Sha256 = Annotated[str, BeforeValidator(_sha256)]
SchemaOne = Annotated[int, BeforeValidator(_schema_one)]


class _Open(BaseModel):
    """Extra keys are evidence: kept, not interpreted. (Each model's validator is built on
    first use: `record` builds no configuration model, `plan` no round result.)"""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True, defer_build=True)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


# --- error formatting --------------------------------------------------------------------


def field_path(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-before[_number()]",) or str(part).startswith("function-"):
            continue
        elif isinstance(part, str) and not _PLAIN_KEY.fullmatch(part):
            out += f"[{json.dumps(part, ensure_ascii=False)}]"  # "", "a b", "a.b": quoted
        else:
            out += f".{part}" if out else str(part)
    return out


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-]+")


def _message(error: Any) -> str:
    kind = error["type"]
    msg = error["msg"]
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return "is not an allowed key"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "must be an object"
    if kind == "list_type":
        return "must be an array"
    if kind in ("string_type",):
        return "must be a string"
    if kind == "literal_error":
        return "must be one of " + msg.split("Input should be ", 1)[-1]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg[:1].lower() + msg[1:]


def explain(exc: ValidationError, prefix: str = "") -> str:
    """The first validation error as one line: `<path> <rule>`."""
    error = exc.errors(include_url=False)[0]
    path = field_path(error["loc"])
    if prefix:
        path = f"{prefix}.{path}" if path else prefix
    text = f"{path} {_message(error)}" if path else _message(error)
    return " ".join(text.split())


def validate_model(model: type[BaseModel], value: Any, what: str, shown: str) -> Any:
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise InputError(f"invalid {what} {shown}: {explain(exc)}") from None


# --- shared pieces -----------------------------------------------------------------------


class PathRef(_Open):
    path: Text


class CaseSpec(_Open):
    id: Name
    weight: Weight = 1.0


class MeasurementIn(_Open):
    """One case's timing. `median_us` is required unless `samples_us` is given."""

    case_id: Name
    median_us: TimeUs | None = None
    repeats: Count | None = None
    samples_us: list[TimeUs] | None = None
    source: Text | None = None

    @model_validator(mode="after")
    def _median_or_samples(self) -> MeasurementIn:
        raw = self.samples_us is not None or self.source is not None
        if self.median_us is None and not raw:
            raise ValueError("median_us is required (or samples_us or source to compute it from)")
        if self.samples_us is not None and not self.samples_us:
            raise ValueError("samples_us must not be empty")
        if self.repeats is None and not raw:
            raise ValueError("repeats is required")
        return self


class SessionIn(_Open):
    """Where and when a set of measurements was taken (the harness writes it)."""

    id: Name = Field(description="The session's id: the same id means the same session.")
    device: Text | None = Field(
        default=None, description="The device measured on, e.g. the GPU's uuid (text)."
    )
    host: Text | None = Field(default=None, description="The host's name (text).")
    started_at: Text | None = Field(
        default=None, description="When the session started (RFC 3339 UTC text)."
    )


def check_measurements(
    rows: Sequence[MeasurementIn], planned: Sequence[str], field: str
) -> dict[str, MeasurementIn]:
    """Exactly one row per planned case and no unplanned case ids."""
    by_case: dict[str, MeasurementIn] = {}
    for index, row in enumerate(rows):
        if row.case_id not in planned:
            raise InputError(f"{field}[{index}].case_id {row.case_id!r} is not a planned case")
        if row.case_id in by_case:
            raise InputError(f"{field}[{index}].case_id {row.case_id!r} appears more than once")
        by_case[row.case_id] = row
    missing = [case for case in planned if case not in by_case]
    if missing:
        raise InputError(f"{field} has no row for planned case {missing[0]!r}")
    return by_case


# --- run configuration (SPEC 2.1) --------------------------------------------------------


class ObjectiveIn(_Open):
    target_relative_improvement: NonNegative
    min_relative_improvement: NonNegative
    noise_floor: NonNegative
    max_case_regression: NonNegative


class TargetIn(_Open):
    soc: Name


class RunConfig(_Open):
    schema_version: SchemaOne
    run_id: RunId
    parent_run_id: RunId | None = None
    op_name: Name
    kernel: PathRef
    validation_manifest: Text
    target: TargetIn
    cases: list[CaseSpec]
    baseline: list[MeasurementIn]
    objective: ObjectiveIn
    max_rounds: Count
    max_consecutive_failures: Count
    statistics: dict[str, Any] | None = None
    measurement_policy: dict[str, Any] | None = None
    session: SessionIn | None = Field(
        default=None,
        description="Where and when the baseline was measured (an object: id, device, host, "
        "started_at).",
    )

    @model_validator(mode="after")
    def _cases(self) -> RunConfig:
        if not self.cases:
            raise ValueError("cases must be a non-empty list")
        seen: set[str] = set()
        for index, case in enumerate(self.cases):
            if case.id in seen:
                raise ValueError(f"cases[{index}].id {case.id!r} is not unique")
            seen.add(case.id)
        return self

    @property
    def case_ids(self) -> list[str]:
        return [case.id for case in self.cases]


# --- round result (SPEC 2.2) -------------------------------------------------------------


class VerificationIn(_Open):
    manifest: Text


class ExpectedSignal(_Closed):
    metric: Text
    direction: Literal["increase", "decrease"]
    min_change: NonNegative = 0.0


class ReferenceIn(_Open):
    """The parent kernel measured in the candidate's session (the harness's `reference`)."""

    kernel_sha256: Sha256 | None = Field(
        default=None, description="The reference kernel's sha256: the round's parent (hex)."
    )
    measurements: list[dict[str, Any]] = Field(
        description="One measurement per planned case, as `measurements` (µs)."
    )


class ProfileRef(_Closed):
    """A profile of the round's candidate: the profiler's file or folder (relative to the
    round result's folder unless absolute), the kernel's rows in it (`kernel`, where it
    holds several), and the case it ran (`case`, a planned case id) or its `shape`."""

    file: Text
    kernel: Text | None = None
    case: Name | None = None
    shape: Text | None = None


class RoundResult(_Open):
    schema_version: SchemaOne
    round: Count
    parent_kernel_sha256: Sha256
    candidate: PathRef
    hypothesis: Text
    change: Text
    verification: VerificationIn
    measurements: list[dict[str, Any]] | None = None
    session: SessionIn | None = Field(
        default=None,
        description="Where and when `measurements` were taken (an object: id, device, host, "
        "started_at); with no reference, a best kernel measured in another session makes a "
        "KEEP clear the drift.",
    )
    reference: ReferenceIn | None = Field(
        default=None,
        description="The parent (best) kernel measured interleaved with the candidate in its "
        "session: {kernel_sha256?, measurements}; I and R are then computed against it.",
    )
    profiler_signals: dict[str, Number] | None = None
    profile: ProfileRef | list[ProfileRef] | None = None
    mechanism: Name | None = None
    expected_signal: ExpectedSignal | None = None


# --- Run Manifest v1 (SPEC 2.3) ----------------------------------------------------------


def _timestamp(value: Any) -> str:
    if not isinstance(value, str) or not RFC3339_UTC_RE.match(value):
        raise ValueError("must be an RFC 3339 UTC time ending in Z")
    try:
        datetime.fromisoformat(value[:19])
    except ValueError:
        raise ValueError("must be an RFC 3339 UTC time ending in Z") from None
    return value


def _artifact_sha(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", value):
        raise ValueError("must be 64 hex digits")
    return value.lower()


Timestamp = Annotated[str, BeforeValidator(_timestamp)]
ArtifactSha = Annotated[str, BeforeValidator(_artifact_sha)]


class Artifact(_Closed):
    name: Text
    kind: Text
    uri: Text
    sha256: ArtifactSha | None = None


class RunManifest(_Closed):
    schema_version: SchemaOne
    run_id: RunId
    parent_run_id: RunId | None
    run_type: Literal["change-validation", "correctness", "debug", "performance", "profiling"]
    workspace_snapshot: dict[str, Any]
    environment: dict[str, Any]
    model: dict[str, Any]
    topology: dict[str, Any]
    command: list[Annotated[str, BeforeValidator(lambda v: _plain_string(v))]]
    environment_variables: dict[str, Annotated[str, BeforeValidator(lambda v: _plain_string(v))]]
    artifacts: list[Artifact]
    status: Literal["planned", "running", "passed", "failed", "inconclusive", "cancelled"]
    created_at: Timestamp
    updated_at: Timestamp

    @model_validator(mode="after")
    def _rules(self) -> RunManifest:
        for key in self.environment_variables:
            if secret_like(key):
                raise ValueError(f"environment_variables.{key} looks like a secret and is refused")
        names: set[str] = set()
        for index, artifact in enumerate(self.artifacts):
            if artifact.name in names:
                raise ValueError(f"artifacts[{index}].name {artifact.name!r} is not unique")
            names.add(artifact.name)
        return self

    def artifact(self, name: str) -> Artifact | None:
        return next((a for a in self.artifacts if a.name == name), None)


def secret_like(name: str) -> bool:
    """Whether an environment variable name looks like it holds a secret, whatever its case.

    The name's ending decides, as in the spec's `*_TOKEN` patterns: TOKENIZER_PATH,
    PASSWORD_MIN_LENGTH, MY_PASSWORD_FILE (a path) and GITHUB_TOKEN_X are not refused."""
    upper = name.upper()
    if any(upper == s or upper.endswith("_" + s) for s in SECRET_SUFFIXES):
        return True
    words = upper.split("_")
    return words[-1] == "KEY" and any(w in SECRET_KEY_QUALIFIERS for w in words[:-1])


def _plain_string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


# --- loading -----------------------------------------------------------------------------


def resolve(base_dir: Path, raw: str) -> Path:
    """A path from inside an input file: absolute, or relative to `base_dir` (the working
    directory for a config or round result, the manifest's folder for an artifact URI)."""
    try:
        path = Path(raw).expanduser()
    except RuntimeError:
        raise InputError(f"path {raw!r} names a home folder that does not exist") from None
    if not path.is_absolute():
        path = Path(base_dir) / path
    return Path(os.path.abspath(path))


def base_folder(base_dir: Path | None) -> Path:
    """The folder relative paths in input files resolve against: `base_dir` when the caller
    names one, else the working directory (as the JSON-file controller does)."""
    return Path(os.path.abspath(base_dir if base_dir is not None else Path.cwd()))


def load_config(path: Path) -> tuple[JsonFile, RunConfig]:
    doc = read_json(path, "config file")
    return doc, validate_model(RunConfig, doc.value, "config", display(path))


def load_round_result(path: Path) -> tuple[JsonFile, RoundResult]:
    doc = read_json(path, "round result")
    return doc, validate_model(RoundResult, doc.value, "round result", display(path))


def load_manifest(path: Path) -> tuple[JsonFile, RunManifest]:
    doc = read_json(path, "validation manifest")
    return doc, validate_model(RunManifest, doc.value, "validation manifest", display(path))


def parse_measurements(rows: Any, field: str, shown: str) -> list[MeasurementIn]:
    if rows is None:
        raise InputError(f"invalid round result {shown}: {field} is required")
    out = []
    for index, row in enumerate(rows):
        try:
            out.append(MeasurementIn.model_validate(row))
        except ValidationError as exc:
            raise InputError(
                f"invalid round result {shown}: {explain(exc, f'{field}[{index}]')}"
            ) from None
    return out


# --- validation evidence for one kernel (SPEC 2.3) ---------------------------------------


class CaseMatrix(_Open):
    kernel: dict[str, Any]
    cases: list[dict[str, Any]]


class ValidationEvidence(BaseModel):
    """A manifest that passed the SPEC 2.3 checks for one kernel, and what it said."""

    model_config = ConfigDict(frozen=True)
    manifest_path: Path
    manifest_sha256: str
    manifest_size: int
    manifest: RunManifest
    case_matrix_path: Path
    case_matrix_sha256: str
    case_matrix_size: int
    case_ids: list[str]
    manifest_written: str | None = None  # the paths as the files wrote them
    case_matrix_written: str | None = None
    cases_not_passed: list[str] = []  # planned cases the case matrix reports as not passed

    @property
    def passed(self) -> bool:
        """The correctness gate: the manifest passed and so did every planned case."""
        return self.manifest.status == "passed" and not self.cases_not_passed


def check_validation(
    manifest_path: Path,
    *,
    kernel_sha256: str,
    planned_case_ids: Sequence[str],
    allowed_parents: Sequence[str | None] | None = None,
    what: str = "validation manifest",
    written: str | None = None,
) -> ValidationEvidence:
    """Load a Run Manifest v1 and check that it vouches for this kernel and these cases.
    `written` is the manifest's path as the naming file wrote it; the case matrix's URI
    resolves against the manifest's folder unless absolute."""
    doc, manifest = load_manifest(manifest_path)
    shown = display(manifest_path)
    if manifest.run_type != "correctness":
        raise InputError(f"{what} {shown} has run_type {manifest.run_type!r}, not 'correctness'")
    if allowed_parents is not None and manifest.parent_run_id not in allowed_parents:
        allowed = " or ".join(repr(p) for p in allowed_parents if p is not None)
        raise InputError(
            f"{what} {shown} has parent_run_id {manifest.parent_run_id!r}, expected {allowed}"
        )

    def uncovered(message: str) -> CoverageError:
        return CoverageError(message, status=manifest.status)

    kernel = manifest.artifact("kernel")
    if kernel is None:
        raise uncovered(f"{what} {shown} has no artifact named 'kernel'")
    if kernel.sha256 is None:
        raise uncovered(f"{what} {shown}: artifact 'kernel' carries no sha256")
    if kernel.sha256 != kernel_sha256:
        raise uncovered(
            f"{what} {shown} vouches for kernel {kernel.sha256}, not for {kernel_sha256}"
        )
    matrix_ref = manifest.artifact("case-matrix")
    if matrix_ref is None:
        raise uncovered(f"{what} {shown} has no artifact named 'case-matrix'")
    matrix_uri = matrix_ref.uri.removeprefix("file://")
    matrix_path = resolve(manifest_path.parent, matrix_uri)
    matrix_shown = display(matrix_path)
    try:
        matrix_doc = read_json(matrix_path, "case matrix")
        if matrix_ref.sha256 is not None and matrix_ref.sha256 != matrix_doc.sha256:
            raise InputError(f"case matrix {matrix_shown} does not match the sha256 in {shown}")
        matrix = validate_model(CaseMatrix, matrix_doc.value, "case matrix", matrix_shown)
    except InputError as exc:
        raise uncovered(exc.message) from None
    if matrix.kernel.get("sha256") != kernel_sha256:
        raise uncovered(
            f"case matrix {matrix_shown} is for kernel {matrix.kernel.get('sha256')!r}, "
            f"not {kernel_sha256}"
        )
    ids: list[str] = []
    for index, case in enumerate(matrix.cases):
        case_id = case.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise uncovered(f"case matrix {matrix_shown}: cases[{index}].id must be a string")
        if case_id in ids:
            raise uncovered(f"case matrix {matrix_shown}: case {case_id!r} appears twice")
        ids.append(case_id)
    if set(ids) != set(planned_case_ids):
        missing = sorted(set(planned_case_ids) - set(ids))
        extra = sorted(set(ids) - set(planned_case_ids))
        detail = f"missing {missing}" if missing else f"unplanned {extra}"
        raise uncovered(f"case matrix {matrix_shown} does not cover the planned cases: {detail}")
    return ValidationEvidence(
        cases_not_passed=[str(c["id"]) for c in matrix.cases if not case_passed(c)],
        manifest_path=manifest_path,
        manifest_sha256=doc.sha256,
        manifest_size=doc.size,
        manifest=manifest,
        case_matrix_path=matrix_path,
        case_matrix_sha256=matrix_doc.sha256,
        case_matrix_size=matrix_doc.size,
        case_ids=ids,
        manifest_written=written,
        case_matrix_written=matrix_uri,
    )


# --- plan warnings ------------------------------------------------------------------------

_OBJECTIVE_FRACTIONS = (
    "target_relative_improvement",
    "min_relative_improvement",
    "noise_floor",
    "max_case_regression",
)


def _nearest(key: str, known: Sequence[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return found[0] if found else None


def config_warnings(document: Any) -> list[str]:
    """What `plan` warns about in a configuration it accepts: a key the contract does not
    know but that is close to one it does (kept as evidence, as every extra key is), and an
    objective value above 1, which reads like a percentage where a fraction is meant."""
    if not isinstance(document, dict):
        return []
    warnings = []
    sections: list[tuple[str, dict[str, Any], Sequence[str]]] = [
        ("", document, list(RunConfig.model_fields))
    ]
    if isinstance(document.get("objective"), dict):
        sections.append(("objective.", document["objective"], list(ObjectiveIn.model_fields)))
    for prefix, values, known in sections:
        for key in values:
            if key in known:
                continue
            near = _nearest(str(key), known)
            if near is not None and near not in values:
                warnings.append(
                    f"config key {prefix}{key} is not one the contract knows (kept as "
                    f"evidence); did you mean {prefix}{near}?"
                )
    objective = document.get("objective")
    if isinstance(objective, dict):
        for key in _OBJECTIVE_FRACTIONS:
            value = objective.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 1:
                warnings.append(
                    f"objective.{key} is {value:g}, that is {value * 100:g}%: objective "
                    "values are fractions (0.1 is 10%)"
                )
    return warnings


def manifest_run_id(run_id: str) -> str:
    """A Run Manifest id for this run: the run id itself when it fits the id pattern."""
    cleaned = re.sub(r"[^a-z0-9._-]", "-", run_id.lower()).lstrip("._-") or "run"
    return cleaned[:128]


def case_passed(case: dict[str, Any]) -> bool:
    """Whether a case matrix's row reports its case passed: no `passed: false` and a
    `status` of "passed" where it has one. The one rule of the correctness gate per case."""
    return case.get("passed") is not False and case.get("status", "passed") == "passed"


def failed_validation_cases(linked: ValidationLinked) -> list[str] | None:
    """The case ids a failed validation's case matrix marks as not passed, read from the
    file the event names when it still holds the bytes that were hashed; None otherwise."""
    import json

    ref = linked.case_matrix
    if ref is None:
        return None
    try:
        data = Path(ref.resolved_path or ref.path).read_bytes()
    except OSError:
        return None
    if sha256_hex(data) != ref.sha256:
        return None
    try:
        cases = json.loads(data).get("cases")
    except (ValueError, AttributeError):
        return None
    if not isinstance(cases, list):
        return None
    failed = []
    for case in cases:
        if not isinstance(case, dict) or "id" not in case:
            continue
        if not case_passed(case):
            failed.append(str(case["id"]) + _worst_error(case))
    return failed


def _worst_error(case: dict[str, Any]) -> str:
    """ " (max_abs_err 0.37)" from the case or its first failed check, where recorded."""
    checks = [c for c in case.get("checks") or () if isinstance(c, dict)]
    source = next((c for c in checks if c.get("passed") is False), case)
    for key in ("max_abs_err", "rel_l2_err"):
        value = source.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f" ({key} {value:.3g})"
    return ""
