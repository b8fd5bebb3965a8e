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
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from ledger.errors import CoverageError, InputError, InputProblems
from ledger.inputs.jsonio import (
    RUN_ID_RE,
    TIME_RANGE,
    JsonFile,
    display,
    read_json,
    time_problem,
)
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
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAFE_INTEGER:
        raise ValueError("must be an integer ≥ 1")
    return value


def _plain_string(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    return value


def _text(value: Any) -> str:
    if not _plain_string(value).strip():
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


def described(
    default: Any = PydanticUndefined,
    meaning: str = "",
    *,
    unit: str | None = None,
    example: Any = PydanticUndefined,
    left_out: str | None = None,
    note: str | None = None,
) -> Any:
    """A field with its meaning (and unit, and the example the template shows): the one
    source of what the schema, the template and docs/inputs.md say about it
    (ledger/inputs/schemas.py). Type and default come from the annotation and `default`.
    `left_out`: for an optional field the template writes (it has an example), what happens
    when it is left out; the template says so beside it. `note`: what the template says
    beside a field it writes, where its example is not a value to keep unthinkingly."""
    extra: dict[str, Any] = {}
    if unit is not None:
        extra["unit"] = unit
    if left_out is not None:
        extra["left_out"] = left_out
    if note is not None:
        extra["note"] = note
    return Field(
        default,
        description=meaning,
        examples=None if example is PydanticUndefined else [example],
        json_schema_extra=extra or None,
    )


class Rows:
    """The schema of a field that holds objects kept unparsed until needed (a round's
    measurements are read only once its gate passed): `model` describes each of them (or
    the one object, with `many` False)."""

    def __init__(self, model: str, *, many: bool = True, left_out: str | None = None) -> None:
        self.name, self.many, self.left_out = model, many, left_out

    @property
    def model(self) -> type[BaseModel]:
        found = globals()[self.name]  # named: the model may be defined further down
        return found if isinstance(found, type) else found()  # or built on first use

    def __call__(self, schema: dict[str, Any]) -> None:
        one = inlined(self.model.model_json_schema())
        if not self.many and "anyOf" in schema:
            one.pop("description", None)
            schema["anyOf"] = [one, {"type": "null"}]
        elif not self.many:
            schema.pop("$ref", None)  # a validated model's own schema: this one replaces it
            schema.update({k: v for k, v in one.items() if k != "description"})
        elif "anyOf" in schema:
            schema["anyOf"] = [{"type": "array", "items": one}, {"type": "null"}]
        else:
            schema["items"] = one
        if self.left_out is not None:
            schema["left_out"] = self.left_out


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema with its `$defs` written in where each is used: a schema that can sit
    inside another one's property."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return walk({**defs[ref.removeprefix("#/$defs/")], **{
                    k: v for k, v in node.items() if k != "$ref"}})  # fmt: skip
            return {k: walk(v) for k, v in node.items() if k != "$defs"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def rows(
    model: Any,
    meaning: str,
    example: Any,
    *,
    default: Any = PydanticUndefined,
    many: bool = True,
    left_out: str | None = None,
):
    """A `described` field of unparsed objects that `model` describes (see `Rows`)."""
    return Field(
        default,
        description=meaning,
        examples=None if example is PydanticUndefined else [example],
        json_schema_extra=Rows(model, many=many, left_out=left_out),  # type: ignore[arg-type]
    )


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


def problems(
    exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> list[str]:
    """Every validation error, one line each: `<path> <rule>`; a key a closed model does not
    allow names the key it likely meant, where `model` (the validated one) tells."""
    out = []
    for error in _one_branch(exc.errors(include_url=False)):
        path = field_path(error["loc"])
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        text = f"{path} {_message(error)}" if path else _message(error)
        if error["type"] == "extra_forbidden" and model is not None:
            known = _fields_at(model, error["loc"][:-1])
            near = nearest(str(error["loc"][-1]), known) if known else None
            if near is not None:
                text += f" (did you mean {near}?)"
        out.append(" ".join(text.split()))
    return out


_SHAPE_ERRORS = {"model_type", "model_attributes_type", "list_type", "dict_type"}


def _union_tag(part: Any) -> bool:
    """A loc part naming a branch of a union of models (`ProfileRef`, `list[ProfileRef]`),
    not a key of the input."""
    if not isinstance(part, str):
        return False
    name = part[5:-1] if part.startswith("list[") and part.endswith("]") else part
    found = globals().get(name)
    return isinstance(found, type) and issubclass(found, BaseModel)


def _one_branch(errors: list[Any]) -> list[Any]:
    """The errors with union branches resolved as a reader means them: of a field that takes
    an object or a list of them, only the branch the input's shape chose (the one with an
    error inside it, not merely "must be an array"), without the branch's name in the path;
    where neither branch takes the input's shape, one error saying what both would take."""
    tagged: dict[tuple, dict[str, list[Any]]] = {}
    for error in errors:
        at = next((i for i, part in enumerate(error["loc"]) if _union_tag(part)), None)
        if at is not None:
            inside = error["type"] not in _SHAPE_ERRORS or len(error["loc"]) > at + 1
            branch = tagged.setdefault(tuple(error["loc"][:at]), {})
            branch.setdefault(error["loc"][at], []).append((error, inside))
    kept: dict[int, Any] = {}
    for branches in tagged.values():
        chosen = [b for b, errs in branches.items() if any(inside for _, inside in errs)][:1]
        if chosen:
            kept |= {id(e): e for e, _ in branches[chosen[0]]}
        else:
            first = next(iter(branches.values()))[0][0]
            kept[id(first)] = {**first, "type": "shape", "msg": "must be an object or an array "
                               "of objects"}  # fmt: skip
    out = []
    for error in errors:
        if any(_union_tag(part) for part in error["loc"]):
            if id(error) not in kept:
                continue
            error = kept[id(error)]
            error = {**error, "loc": tuple(p for p in error["loc"] if not _union_tag(p))}
        out.append(error)
    return out


def _fields_at(model: type[BaseModel], loc: Sequence[Any]) -> list[str]:
    """The field names of the model found at `loc` inside `model` ([] where none is)."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        inner = nested_model(field)[0] if field is not None else None
        if inner is None:
            return []
        model = inner
    return list(model.model_fields)


def nested_model(info: FieldInfo) -> tuple[type[BaseModel] | None, bool]:
    """The model a field's value is made of, and whether the value is a list of them (a
    field that takes one object or a list, as a round's `profile`, counts as one)."""
    if isinstance(info.json_schema_extra, Rows):
        return info.json_schema_extra.model, info.json_schema_extra.many
    found: tuple[type[BaseModel] | None, bool] = (None, False)
    pending = [info.annotation]
    while pending:
        annotation = pending.pop()
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return annotation, False
        args = [a for a in get_args(annotation) if a is not type(None)]
        if get_origin(annotation) is list and args:
            inner = args[0]
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                found = (inner, True)
            continue
        pending.extend(args)
    return found


def validate_model(model: type[BaseModel], value: Any, what: str, shown: str) -> Any:
    """The model of `value`, or InputProblems listing every problem it has."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise InputProblems(f"invalid {what} {shown}", problems(exc, model=model)) from None


# --- shared pieces -----------------------------------------------------------------------


class PathRef(_Open):
    """A file, named by its path."""

    path: Text = described(
        meaning="Path of the file; a relative path resolves against the working directory "
        "(as the JSON-file controller resolves it).",
        example="kernels/kernel_v0.py",
    )


class CaseSpec(_Open):
    """One planned case and its weight in the weighted improvement."""

    id: Name = described(
        meaning="The case id; every measurement and case matrix row names it.",
        example="fp16-1024x1024",
    )
    weight: Weight = described(
        1.0,
        f"Weight of the case in the weighted mean improvement, between {MIN_WEIGHT:g} and "
        f"{MAX_WEIGHT:g}.",
    )


class MeasurementIn(_Open):
    """One case's timing. `median_us` is required unless `samples_us` is given."""

    case_id: Name = described(meaning="The planned case this row times.", example="fp16-1024x1024")
    median_us: TimeUs | None = described(
        None,
        "Median time of the case; required unless samples_us or source gives the samples "
        f"to compute it from ({TIME_RANGE}).",
        unit="us",
        example=52.0,
        left_out="the ledger then takes the median of the samples in samples_us or source "
        "(give one of them)",
    )
    repeats: Count | None = described(
        None,
        "How many timed repeats the median is of; required with median_us alone (default: "
        "the number of samples).",
        example=50,
        left_out="the ledger then counts the samples in samples_us or source (give one of them)",
    )
    samples_us: list[TimeUs] | None = described(
        None,
        "The raw per-repeat times; with samples on both sides the decision also runs the "
        "seeded bootstrap (the config's `statistics` settings).",
        unit="us",
    )
    source: Text | None = described(
        None,
        'A raw samples file (a JSON list of us, {"unit", "samples"} or a Duration(us) CSV), '
        "relative to the working directory; its samples are read and recorded.",
    )

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
    """Where and when a set of measurements was taken (the harness writes it). Keys it does
    not know (timer, flush, device_name) are kept verbatim."""

    id: Name = described(
        meaning="The session's id: the same id means the same session.", example="s-1a2b3c"
    )
    device: Text | None = described(None, "The device measured on, e.g. the GPU's uuid.")
    host: Text | None = described(None, "The host's name.")
    started_at: Text | None = described(None, "When the session started (RFC 3339 UTC).")


def _session_id(value: Any) -> Any:
    """A session named by its id alone (`"session": "aa-1"`, as the H200 campaign's A/A files
    write it) reads as `{"id": "aa-1"}`."""
    return {"id": value} if isinstance(value, str) else value


def case_rows(
    rows: Sequence[MeasurementIn], planned: Sequence[str], field: str
) -> tuple[dict[str, tuple[int, MeasurementIn]], list[tuple[int, str]]]:
    """Each planned case's row and its index, and every problem with the index of the row
    it is about (len(rows) for a planned case with no row): an unplanned case id, a case
    measured twice, a planned case not measured."""
    by_case: dict[str, tuple[int, MeasurementIn]] = {}
    found: list[tuple[int, str]] = []
    for index, row in enumerate(rows):
        if row.case_id not in planned:
            found.append((index, f"{field}[{index}].case_id {row.case_id!r} is not a planned case"))
        elif row.case_id in by_case:
            found.append(
                (index, f"{field}[{index}].case_id {row.case_id!r} appears more than once")
            )
        else:
            by_case[row.case_id] = (index, row)
    found += [
        (len(rows), f"{field} has no row for planned case {case!r}")
        for case in planned
        if case not in by_case
    ]
    return by_case, found


def check_measurements(
    rows: Sequence[MeasurementIn], planned: Sequence[str], field: str
) -> dict[str, MeasurementIn]:
    """Exactly one row per planned case and no unplanned case ids (every problem listed)."""
    by_case, found = case_rows(rows, planned, field)
    if found:
        raise InputProblems("", [problem for _, problem in found])
    return {case: row for case, (_, row) in by_case.items()}


# --- run configuration (SPEC 2.1) --------------------------------------------------------


class ObjectiveIn(_Open):
    """What counts as better; every value is a fraction (0.1 is 10%)."""

    target_relative_improvement: NonNegative = described(
        meaning="Cumulative weighted improvement over the baseline at which the run's target "
        "is met; it decides mergeability: a run concludes passed, and `check-merge` passes, "
        "only once the target is met.",
        unit="fraction",
        example=0.1,
        note="check-merge passes only if the cumulative improvement reaches this (0.1 is "
        "+10%): set what this run must reach, not the example",
    )
    min_relative_improvement: NonNegative = described(
        meaning="Smallest weighted improvement over the best kernel that can KEEP a candidate.",
        unit="fraction",
        example=0.01,
    )
    noise_floor: NonNegative = described(
        meaning="A weighted change within this of zero is NOISE, not a result.",
        unit="fraction",
        example=0.005,
    )
    max_case_regression: NonNegative = described(
        meaning="Largest slowdown of any one case a KEEP may carry.",
        unit="fraction",
        example=0.02,
    )


class TargetIn(_Open):
    """The platform; other keys (versions, driver) are kept verbatim."""

    soc: Name = described(
        meaning="The chip the kernel runs on: an Ascend SoC (Ascend910B2) or a GPU (NVIDIA "
        "H200); profiles are attributed with its vocabulary.",
        example="Ascend910B2",
    )


# --- the statistics settings (SPEC 4.2, 4.2b) ----------------------------------------------

STATISTICS_SETTINGS: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "min_samples": (
        "Raw samples per case both sides need before the seeded bootstrap may turn a KEEP "
        "into NOISE or DISCARD; with fewer, the contract's medians decide. An integer ≥ 3.",
        "samples per case",
        {"minimum": 3},
    ),
    "resamples": (
        "Bootstrap resamples per decision, 100 to 100000.",
        None,
        {"minimum": 100, "maximum": 100_000},
    ),
    "alpha": (
        "The KEEP test's level: NOISE unless the lower alpha quantile of the improvement is "
        "above the noise floor. Strictly between 0 and 0.5.",
        "fraction",
        {"exclusiveMinimum": 0, "exclusiveMaximum": 0.5},
    ),
    "regression_quantile": (
        "DISCARD when this quantile of the worst case regression exceeds "
        "max_case_regression. Strictly between 0.5 and 1.",
        "fraction",
        {"exclusiveMinimum": 0.5, "exclusiveMaximum": 1},
    ),
    "bootstrap": (
        '"smoothed" (a kernel-smoothed bootstrap of each median) or "plain" (the rule as '
        "first recorded).",
        None,
        {},
    ),
    "sequential": (
        "Decide at the first look that settles the rule, one look every `batch` candidate "
        "samples per case (`assess` says when to stop); absent: one decision on all samples.",
        None,
        {},
    ),
    "assumed_drift": (
        "The standard deviation of I between two sessions assumed where the two sides come "
        "from different sessions and the run has no A/A estimate; absent: 0.02. Strictly "
        "between 0 and 1.",
        "fraction",
        {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
    ),
}
"""What each key of `statistics` means, its unit and its bounds: the schema, the template
and docs/inputs.md say it. The keys, their types and defaults are the core's
(`StatisticsConfig`, ledger/core/stats.py), which also enforces the bounds."""

SEQUENTIAL_SETTINGS: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "min_repeats": (
        "Candidate samples per case at the first look, at least 3.",
        "samples per case",
        {"minimum": 3},
    ),
    "max_repeats": (
        "Samples per case at the last look (the most a round measures), from min_repeats to "
        "100000.",
        "samples per case",
        {"maximum": 100_000},
    ),
    "batch": (
        "Samples per case added between two looks, at least 1.",
        "samples per case",
        {"minimum": 1},
    ),
    "unpaired_best": (
        "Without a same-session reference, how a look takes the best kernel's stored samples: "
        '"first-n" (its first n beside the candidate\'s first n) or "all" (every one at every '
        "look, the rule as first recorded).",
        None,
        {},
    ),
}
"""The same for `statistics.sequential` (`SequentialConfig`, ledger/core/looks.py)."""


TARGET_SETTINGS: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "vector_cores": ("Ascend: AI vector cores, for the parallelism rules.", "cores", {}),
    "cube_cores": ("Ascend: AI cube cores.", "cores", {}),
    "ub_bytes": ("Ascend: unified buffer per core, for the UB live-set rule.", "bytes", {}),
    "sm_count": (
        "GPU: streaming multiprocessors, to compare the grid with the SMs (blocks per SM).",
        "SMs",
        {},
    ),
    "peak_bandwidth_gbps": (
        "GPU: peak DRAM bandwidth; bytes over the duration become a share of it where the "
        "profile gives no throughput. No floor: headroom needs `floors`.",
        "GB/s",
        {},
    ),
    "peak_tflops": (
        "Peak compute; FLOPs over the duration become a share of it where the profile gives "
        "no throughput.",
        "10^12 FLOP/s",
        {},
    ),
}
"""The `target` keys attribution reads besides `soc` (`TargetCaps`, ledger/core/bottleneck.py:
keys, types and defaults, all positive where given). Other keys are kept verbatim."""

FLOORS_SETTINGS: dict[str, tuple[str, str | None, dict[str, Any]]] = {
    "bytes_moved": (
        "Bytes the kernel must move; absent: the profile's (bytes_moved, gm_to_ub_kb + "
        "ub_to_gm_kb, dram_bytes, or dram_bytes_read + dram_bytes_write).",
        "bytes",
        {},
    ),
    "elements": ("Elements the kernel must compute, for the vector floor.", "elements", {}),
    "effective_bandwidth_gbps": (
        "Bandwidth the memory floor is taken at: memory floor = bytes moved / it.",
        "GB/s",
        {},
    ),
    "vector_throughput_elems_per_us": (
        "Vector throughput the vector floor is taken at: vector floor = elements / it.",
        "elements per us",
        {},
    ),
    "empty_kernel_us": ("The launch floor: the time of an empty kernel.", "us", {}),
}
"""The config's `floors` (`Floors`, ledger/core/bottleneck.py): what the kernel must at least
cost. A profile's headroom is 1 - (largest floor) / (its duration): it needs one floor here
and a duration in the profile."""


def _settings_model(
    name: str,
    doc: str,
    config: type,
    said: dict,
    kinds: dict | None = None,
    base: type[BaseModel] | None = None,
) -> Any:
    """A model of a settings object for its schema, template and reference: one field per
    field of the core's `config` dataclass, with its type and default, and the meaning,
    unit and bounds `said` gives it (`kinds`: the type of a field the dataclass types
    loosely, such as a nested settings model); `base` adds its own fields first."""
    import dataclasses
    import typing

    from pydantic import create_model

    hints = typing.get_type_hints(config)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        meaning, unit, bounds = said[f.name]
        kind = (kinds or {}).get(f.name, hints[f.name])
        if f.default is None:
            kind = kind | None
        extra = {**bounds, **({"unit": unit} if unit else {})}
        fields[f.name] = (
            kind,
            Field(f.default, description=meaning, json_schema_extra=extra or None),
        )
    return create_model(name, __base__=base or _Closed, __doc__=doc, **fields)


# The settings models below are built on first use (cached): when a schema, template or
# reference is asked for, so `record` and `plan` load no module for them.


@cache
def StatisticsIn() -> type[BaseModel]:  # a model, built on first use
    """The config's `statistics` settings as a model."""
    from ledger.core.looks import UNPAIRED_BEST, SequentialConfig
    from ledger.core.stats import BOOTSTRAPS, StatisticsConfig

    sequential = _settings_model(
        "SequentialIn",
        "Looks of the sequential rule: at min_repeats, every batch samples per case, and at "
        "max_repeats.",
        SequentialConfig,
        SEQUENTIAL_SETTINGS,
        {"unpaired_best": Literal[UNPAIRED_BEST]},
    )
    return _settings_model(
        "StatisticsIn",
        "Settings of the noise-aware rule; a key left out takes its default.",
        StatisticsConfig,
        STATISTICS_SETTINGS,
        {"sequential": sequential, "bootstrap": Literal[BOOTSTRAPS]},
    )


@cache
def TargetSchema() -> type[BaseModel]:  # a model, built on first use
    """The config's `target` as its schema shows it: `soc` and the keys attribution reads."""
    from ledger.core.bottleneck import TargetCaps

    doc = TargetIn.__doc__ or ""
    return _settings_model("TargetSchema", doc, TargetCaps, TARGET_SETTINGS, base=TargetIn)


@cache
def FloorsIn() -> type[BaseModel]:  # a model, built on first use
    """The config's `floors` as a model."""
    from ledger.core.bottleneck import Floors

    doc = "What the kernel must at least cost; headroom = 1 - largest floor / duration."
    return _settings_model("FloorsIn", doc, Floors, FLOORS_SETTINGS)


class RunConfig(_Open):
    """The run configuration `plan` locks: kernel, cases, baseline, objective and limits.
    Keys it does not know are kept verbatim as evidence."""

    schema_version: SchemaOne = described(meaning="Always 1.", example=1)
    run_id: RunId = described(
        meaning=f"The run's id ({RUN_ID_RE.pattern}); every later command names it.",
        example="softmax-001",
    )
    parent_run_id: RunId | None = described(
        None, "The run this one continues, if any; a round's manifest may name it as parent."
    )
    op_name: Name = described(meaning="The operator the kernel implements.", example="softmax")
    kernel: PathRef = described(meaning="The starting kernel's source file.")
    validation_manifest: Text = described(
        meaning="The starting kernel's correctness manifest (Run Manifest v1, run_type "
        "correctness, status passed, every planned case passed in its case matrix), relative "
        "to the working directory.",
        example="validation/baseline/manifest.json",
    )
    target: TargetIn = rows(
        "TargetSchema",
        "The platform the run measures on: `soc`, and what attribution may know of it.",
        PydanticUndefined,
        many=False,
    )
    cases: list[CaseSpec] = described(meaning="The planned cases, at least one, ids unique.")
    baseline: list[MeasurementIn] = described(
        meaning="The starting kernel's timing, one row per planned case."
    )
    objective: ObjectiveIn = described(meaning="The decision thresholds.")
    max_rounds: Count = described(meaning="The round budget (integer ≥ 1).", example=8)
    max_consecutive_failures: Count = described(
        meaning="Rounds in a row without a KEEP after which the run needs a diagnosis.",
        example=3,
    )
    statistics: dict[str, Any] | None = rows(
        "StatisticsIn",
        "Settings of the noise-aware rule on raw samples (and of the sequential rule); a key "
        "left out takes its default.",
        PydanticUndefined,
        default=None,
        many=False,
    )
    measurement_policy: dict[str, Any] | None = described(
        None,
        "How every timing of the run is taken (warmup, repeats, timer, ...), recorded "
        "verbatim with the plan.",
    )
    session: SessionIn | None = described(
        None, "Where and when the baseline was measured (id, device, host, started_at)."
    )
    floors: dict[str, Any] | None = rows(
        "FloorsIn",
        "What the kernel must at least cost, for each profile's headroom (1 - largest floor "
        "/ duration); without a floor, headroom is unknown.",
        PydanticUndefined,
        default=None,
        many=False,
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
    """Where the candidate's correctness evidence is."""

    manifest: Text = described(
        meaning="The candidate's correctness manifest (Run Manifest v1, run_type "
        "correctness, parent_run_id the run), relative to the working directory. A case "
        "matrix that reports any planned case not passed makes the round FAIL.",
        example="validation/round-1/manifest.json",
    )


class ExpectedSignal(_Closed):
    """The profiler signal the round's change should move; the decision records whether
    the candidate's profile confirmed it."""

    metric: Text = described(
        meaning="A signal name the profile readers give (Profiles, at the end of the skill's "
        "references/inputs.md, lists them per format); one the profiles hold.",
        example="occupancy",
    )
    direction: Literal["increase", "decrease"] = described(
        meaning="Which way the signal should move.", example="increase"
    )
    min_change: NonNegative = described(
        0.0,
        "Smallest change that counts as moved: absolute, in the signal's own unit (us for "
        "duration_us, a fraction for a throughput), from the best kernel's value.",
    )


class ReferenceIn(_Open):
    """The parent kernel measured in the candidate's session (the harness's `reference`)."""

    kernel_sha256: Sha256 | None = described(
        None, "sha256 of the reference kernel: the round's parent, 64 lowercase hex digits."
    )
    measurements: list[dict[str, Any]] = rows(
        "MeasurementIn",
        "The parent's timing in the candidate's session, one row per planned case.",
        [{"case_id": "fp16-1024x1024", "samples_us": [48.1, 47.9, 48.0]}],
    )


class ProfileRef(_Closed):
    """A profile of the round's candidate, ingested with the round: the profiler's file or
    folder, the kernel's rows in it (where it holds several) and the case it ran (or its
    launch shape). `file` and `case` are taken for `path` and `case_id`."""

    path: Text = described(
        meaning="The profiler's output (ncu CSV, msprof op folder or op_summary); a relative "
        "path resolves against the working directory, as candidate.path does, else beside "
        "the round result.",
        example="profiles/candidate.fp16-1024x1024.ncu.csv",
    )
    kernel: Text | None = described(None, "The kernel's name in the file, where it holds several.")
    case_id: Name | None = described(None, "The planned case the profile ran.")
    shape: Text | None = described(None, "The launch shape it ran, where no case is named.")
    format: Text | None = described(
        None,
        "The profiler's format, for a reader (a format of Profiles in the skill's "
        "references/inputs.md: ncu-csv, msprof-op, ...); the file's own header decides how "
        "it is read.",
    )

    @model_validator(mode="before")
    @classmethod
    def _other_names(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = dict(value)
            for old, new in (("file", "path"), ("case", "case_id")):
                if old in value and new not in value:
                    value[new] = value.pop(old)
        return value


class RoundResult(_Open):
    """One round, as `record` takes it. Keys it does not know are kept verbatim."""

    schema_version: SchemaOne = described(meaning="Always 1.", example=1)
    round: Count = described(meaning="The round's number: the run's next round.", example=1)
    parent_kernel_sha256: Sha256 = described(
        meaning="sha256 of the run's current best kernel (status shows it), 64 lowercase hex "
        "digits.",
        example="0" * 64,
    )
    candidate: PathRef = described(
        meaning="The candidate kernel's source, a new file.",
        example={"path": "kernels/kernel_r1.py"},
    )
    hypothesis: Text = described(
        meaning="The one falsifiable hypothesis the round tests.",
        example="Four rows per program amortize instruction issue",
    )
    change: Text = described(
        meaning="The one change made to test it.", example="ROWS_PER_ITER=1 -> 4"
    )
    verification: VerificationIn = described(meaning="The candidate's correctness evidence.")
    measurements: list[dict[str, Any]] | None = rows(  # rows checked once the gate passed
        "MeasurementIn",
        "The candidate's timing, one row per planned case (as in the baseline); required "
        "when its correctness gate passed, not read when it failed.",
        [{"case_id": "fp16-1024x1024", "median_us": 47.9, "repeats": 50}],
        default=None,
        left_out="a candidate that failed its correctness gate is recorded as FAIL without them",
    )
    session: SessionIn | None = described(
        None,
        "Where and when `measurements` were taken (id, device, host, started_at); without a "
        "reference, a best kernel measured in another session makes a KEEP clear the drift.",
    )
    reference: ReferenceIn | None = described(
        None,
        "The parent (best) kernel measured interleaved with the candidate in its session "
        "({kernel_sha256?, measurements}); I and R are then computed against it.",
    )
    profiler_signals: dict[str, Number] | None = described(
        None,
        "The candidate's profile as a signal map (name -> number), recorded with the round "
        "for its mechanism check.",
    )
    profile: ProfileRef | list[ProfileRef] | None = described(
        None,
        "The candidate's profile file(s), ingested with the round so its mechanism check is "
        "decided at record: each names its file and, where it holds several, the kernel and "
        "the case or shape it ran.",
    )
    mechanism: Name | None = described(
        None,
        "The primary mechanism the change works on, in words holding a phrase of the "
        "mechanism vocabulary (the skill's references/mechanisms.md); `record` says the "
        "entry it maps to, and history and `suggest` group rounds by it.",
    )
    expected_signal: ExpectedSignal | None = described(
        None, "The profiler signal the change should move."
    )


# --- A/A remeasure (`noise`) and decision inputs (`decide`) -------------------------------


class NoiseFile(_Open):
    """An A/A remeasure for `noise`: the current best kernel timed again, every planned
    case. Keys it does not know are kept verbatim."""

    kernel_sha256: Sha256 = described(
        meaning="sha256 of the kernel timed: the run's current best (status shows it).",
        example="0" * 64,
    )
    measurements: list[MeasurementIn] = described(
        meaning="One row per planned case, as in the baseline."
    )
    session: Annotated[SessionIn, BeforeValidator(_session_id)] | None = Field(
        None,
        description="Where and when the remeasure was taken (id, device, host, started_at), "
        "or its id alone, recorded with it; measure each remeasure in a session of its own, "
        "as the drift it estimates is between sessions.",
        json_schema_extra=lambda schema: schema["anyOf"].insert(1, {"type": "string"}),
    )


class DecideInput(_Closed):
    """One decision's inputs for `decide` (no ledger): the objective, the cases, and both
    sides' timings; measurement rows take samples_us inline, not source files."""

    objective: ObjectiveIn = described(meaning="The decision thresholds.")
    cases: list[CaseSpec] = described(meaning="The cases, ids unique.")
    best: list[MeasurementIn] = described(meaning="The best kernel's timing, one row per case.")
    candidate: list[MeasurementIn] = described(meaning="The candidate's timing, one row per case.")
    statistics: dict[str, Any] | None = rows(
        "StatisticsIn",
        "Settings of the noise-aware rule; a key left out takes its default.",
        PydanticUndefined,
        default=None,
        many=False,
    )
    drift_sigma: NonNegative | None = described(
        None, "Session drift estimated from A/A pairs; default: not estimated.", unit="fraction"
    )
    session: SessionIn | None = described(None, "The session the candidate was measured in.")
    best_session: SessionIn | None = described(
        None, "The session the best kernel's timing comes from, where it is another one."
    )
    reference: list[MeasurementIn] | None = described(
        None,
        "The best kernel measured again in the candidate's session, interleaved with it; "
        "with it, the decision is made against this reference.",
    )


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
    """A file the manifest vouches for. A correctness manifest names two: `kernel` (the
    kernel it tested, with its sha256) and `case-matrix` (the per-case results)."""

    name: Text = described(
        meaning="The artifact's name, unique in the manifest: `kernel` and `case-matrix` are "
        "the ones the ledger reads.",
        example="kernel",
    )
    kind: Text = described(meaning="What the file is (source, json, log, ...).", example="source")
    uri: Text = described(
        meaning="Where the file is: a path relative to the manifest's folder, absolute, or "
        "file://.",
        example="../../kernels/kernel_v0.py",
    )
    sha256: ArtifactSha | None = described(
        None,
        "sha256 of the file (64 hex digits); required for `kernel`, checked against the file "
        "for `case-matrix` when given.",
        example="0" * 64,
        left_out="except on the `kernel` artifact, and the file is then not checked against it",
    )


_PlainText = Annotated[str, BeforeValidator(_plain_string)]


class RunManifest(_Closed):
    """Run Manifest v1: the record of one correctness (or other) run. Only the listed keys
    are allowed."""

    schema_version: SchemaOne = described(meaning="Always 1.", example=1)
    run_id: RunId = described(
        meaning=f"This manifest's own run id ({RUN_ID_RE.pattern}).",
        example="softmax-001-round-1",
    )
    parent_run_id: RunId | None = described(
        meaning="The run it belongs to: for a round's manifest, the ledger run's id (or that "
        "run's parent); may be null for a starting kernel's. The key must be present.",
        example="softmax-001",
    )
    run_type: Literal["change-validation", "correctness", "debug", "performance", "profiling"] = (
        described(meaning="The ledger reads only `correctness` manifests.", example="correctness")
    )
    workspace_snapshot: dict[str, Any] = described(
        meaning="The workspace's state (git commit, dirty, ...), free form.", example={}
    )
    environment: dict[str, Any] = described(
        meaning="Hardware and software versions, free form.", example={}
    )
    model: dict[str, Any] = described(
        meaning="What was tested (op name, ...), free form.", example={}
    )
    topology: dict[str, Any] = described(meaning="Devices used, free form.", example={})
    command: list[_PlainText] = described(
        meaning="The command line that ran the tests, one string per argument.",
        example=["python", "-m", "pytest", "tests/test_kernel.py"],
    )
    environment_variables: dict[str, _PlainText] = described(
        meaning="Environment variables that mattered, name -> value; secret-like names "
        "(*_TOKEN, *_PASSWORD, *_SECRET, *_API_KEY, ...) are refused.",
        example={},
    )
    artifacts: list[Artifact] = described(
        meaning="The files it vouches for, names unique: `kernel` and `case-matrix`.",
        example=[
            {
                "name": "kernel",
                "kind": "source",
                "uri": "../../kernels/kernel_r1.py",
                "sha256": "0" * 64,
            },
            {"name": "case-matrix", "kind": "json", "uri": "case-matrix.json"},
        ],
    )
    status: Literal["planned", "running", "passed", "failed", "inconclusive", "cancelled"] = (
        described(
            meaning="The run's overall status; the gate also needs every planned case passed "
            "in the case matrix.",
            example="passed",
        )
    )
    created_at: Timestamp = described(
        meaning="RFC 3339 UTC time ending in Z.", example="2026-11-02T09:00:00Z"
    )
    updated_at: Timestamp = described(
        meaning="RFC 3339 UTC time ending in Z.", example="2026-11-02T09:00:00Z"
    )

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
    out, found = [], []
    for index, row in enumerate(rows):
        try:
            out.append(MeasurementIn.model_validate(row))
        except ValidationError as exc:
            found += problems(exc, f"{field}[{index}]")
    if found:
        raise InputProblems(f"invalid round result {shown}", found)
    return out


# --- validation evidence for one kernel (SPEC 2.3) ---------------------------------------


class MatrixKernel(_Open):
    """The kernel a case matrix is for."""

    sha256: str = described(
        meaning="sha256 of the kernel tested: the manifest's `kernel` artifact's.",
        example="0" * 64,
    )


class MatrixCase(_Open):
    """One case's correctness result. Other keys (dtype, shape, max_abs_err, checks) are
    kept and shown where a case failed."""

    id: str = described(meaning="The planned case id.", example="fp16-1024x1024")
    status: str | None = described(
        None,
        'The case\'s result: "passed", or anything else (failed, skipped, error) for not '
        "passed; absent reads as passed unless `passed` is false.",
        example="passed",
        left_out='the case then reads as passed, unless "passed" is false',
    )
    passed: bool | None = described(None, "false marks the case not passed.")


class CaseMatrix(_Open):
    """The per-case correctness results a correctness manifest names as its `case-matrix`
    artifact: one row per planned case, every one passed for the gate to pass."""

    kernel: dict[str, Any] = rows(
        "MatrixKernel",
        "The kernel the matrix is for: an object whose `sha256` is the kernel's.",
        {"sha256": "0" * 64},
        many=False,
    )
    cases: list[dict[str, Any]] = rows(
        "MatrixCase",
        "One row per planned case, ids unique.",
        [{"id": "fp16-1024x1024", "status": "passed"}],
    )


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

_OBJECTIVE_FRACTIONS = tuple(ObjectiveIn.model_fields)


def nearest(key: str, known: Sequence[str]) -> str | None:
    """The known key `key` is likely a typo of: a close match (`wieght` -> `weight`), or,
    for short keys where that ratio is low, the same letters in another order (`paht`)."""
    import difflib

    found = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    if found:
        return found[0]
    if len(key) >= 3:
        return next((k for k in known if k != key and sorted(k) == sorted(key)), None)
    return None


def config_warnings(document: Any) -> list[str]:
    """What `plan` warns about in a configuration it accepts besides near-miss keys
    (ledger/inputs/schemas.py, `key_warnings`): an objective value above 1, which reads like
    a percentage where a fraction is meant."""
    if not isinstance(document, dict):
        return []
    warnings = []
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


def explain_inputs(events: Iterable[Any]) -> dict[int, dict[str, Any]]:
    """What `explain.explain` takes beside a RoundDecided, by round, read from the round's
    other events: `failed_cases` from a failed ValidationLinked (its case matrix, where the
    file still holds the bytes that were hashed; None otherwise) and `reference_us`, the
    medians of its MeasurementsRecorded with role "reference" (the sides a decision on a
    same-session reference compared). The one reading of both for every caller of
    `explain`: `show`, `history`, the report, the web view, report.md, suggest, `record`
    and `assess`."""
    from ledger.core.events import MeasurementsRecorded, ValidationLinked

    found: dict[int, dict[str, Any]] = {}
    for event in events:
        if isinstance(event, ValidationLinked) and not event.passed:
            found.setdefault(event.round, {})["failed_cases"] = failed_validation_cases(event)
        elif isinstance(event, MeasurementsRecorded) and event.role == "reference":
            found.setdefault(event.round, {})["reference_us"] = [
                m.median_us for m in event.measurements
            ]
    return found


def _worst_error(case: dict[str, Any]) -> str:
    """ " (max_abs_err 0.37)" from the case or its first failed check, where recorded."""
    checks = [c for c in case.get("checks") or () if isinstance(c, dict)]
    source = next((c for c in checks if c.get("passed") is False), case)
    for key in ("max_abs_err", "rel_l2_err"):
        value = source.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f" ({key} {value:.3g})"
    return ""
