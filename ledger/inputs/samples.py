"""Raw timing files: read per-repeat kernel times and convert them to microseconds.

Accepted formats (the unit of each is fixed or stated, never guessed from magnitudes):

* ``json-list``   -- a JSON array of numbers, in microseconds;
* ``json-object`` -- ``{"unit": "us" | "ms" | "ns", "samples": [...]}``; other keys are
  allowed and ignored (the file's sha256 keeps them as evidence). Triton's
  ``do_bench(..., return_mode="all")`` returns milliseconds, so dump it with ``"unit": "ms"``;
* ``csv``         -- a profiler table with a ``Duration(us)`` column (torch_npu
  ``kernel_details.csv``) or a ``Task Duration(us)`` column (``op_summary``, msprof
  ``OpBasicInfo.csv``). A UTF-8 BOM, padding and trailing tabs around cells, and trailing
  commas are tolerated; rows whose duration is ``N/A``, ``NA`` or empty are skipped.

The format is taken from the extension (``.json`` / ``.csv``) and otherwise from the first
character of the text. Numbers are scaled to microseconds from their decimal text with a
single rounding (``0.0153`` ms becomes exactly the float nearest to 15.3).

Every rejection is an ``InputError`` whose one-line message names the file.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ledger.errors import InputError
from ledger.files import read_input
from ledger.inputs.jsonio import (  # noqa: F401 - the time bounds are read here too
    MAX_TIME_US,
    MIN_TIME_US,
    TIME_RANGE,
    reject_duplicate_keys,
    time_problem,
)

MAX_SAMPLES_FILE_BYTES = 64 * 1024 * 1024

UNIT_EXPONENTS = {"us": 0, "ms": 3, "ns": -3}  # power of ten that turns the unit into µs
CSV_DURATION_COLUMNS = ("Duration(us)", "Task Duration(us)")  # in order of preference
CSV_MISSING_VALUES = frozenset({"", "N/A", "NA"})
MEDIAN_REL_TOL = 1e-9

_BOM = "\ufeff"


class NotSamples(InputError):
    """The file is not in a samples format at all (not UTF-8, empty, not JSON, JSON of
    another shape, a CSV without a duration column), as opposed to a samples file whose
    values are wrong. `sha256` and `size` are of the bytes read."""

    sha256: str = ""
    size: int = 0
    reason: str = ""  # the message without the "samples file <path>" it starts with


class MedianDisagrees(InputError):
    """A row's `median_us` is not the median of its own samples."""


def median_hint(sources: str = "samples_us or source") -> str:
    """How to proceed after a MedianDisagrees, said once after every row's problem; `sources`
    names what a row may carry its samples in (`decide` takes `samples_us` only)."""
    return (
        f"median_us may be left out of a row with {sources}: the ledger then takes the "
        "median of the samples itself, so there is no need to compute it"
    )


MEDIAN_HINT = median_hint()


@dataclass(frozen=True, slots=True)
class SamplesSource:
    """Per-repeat times from one raw file, already in microseconds."""

    samples_us: tuple[float, ...]
    unit: str  # the unit the file was written in
    format: str  # "json-list", "json-object" or "csv"
    sha256: str  # of the file's bytes, as read


def _shown(path: Path) -> str:
    text = str(path)
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _to_us(value: Decimal, exponent: int) -> float:
    """Scale exactly in decimal (enough digits of precision), then round once to a float.
    A value whose magnitude is far outside the time range is not scaled (the decimal
    context would overflow): it maps to infinity or zero, which the range check refuses."""
    if value.is_finite() and value and abs(value.adjusted() + exponent) > 40:
        return math.inf if value.adjusted() + exponent > 0 else 0.0
    if exponent:
        context = Context(prec=max(28, len(value.as_tuple().digits)))
        value = value.scaleb(exponent, context=context)
    return float(value)


def _check_positive(us: float, where: str, shown: str) -> float:
    if not math.isfinite(us):
        raise InputError(f"samples file {shown}: {where} overflows to infinity in microseconds")
    if us <= 0.0:
        raise InputError(f"samples file {shown}: {where} must be a positive time, got {us!r} us")
    problem = time_problem(us)
    if problem is not None:
        raise InputError(f"samples file {shown}: {where} {problem}, got {us!r} us")
    return us


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _json_samples(text: str, shown: str) -> tuple[tuple[float, ...], str, str]:
    try:
        value = json.loads(
            text,
            parse_float=Decimal,
            parse_constant=_reject_constant,
            object_pairs_hook=reject_duplicate_keys,
        )
    except json.JSONDecodeError as exc:
        raise NotSamples(
            f"samples file {shown} is not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise NotSamples(f"samples file {shown} is not valid JSON: {exc}") from None
    if isinstance(value, list):
        raw, unit, fmt, where = value, "us", "json-list", "item"
    elif isinstance(value, dict):
        fmt, where = "json-object", "samples"
        if "samples" not in value:
            raise NotSamples(f'samples file {shown} has no "samples" list')
        if "unit" not in value:
            raise InputError(f'samples file {shown} has no "unit" (one of "us", "ms", "ns")')
        unit, raw = value["unit"], value["samples"]
        if not isinstance(unit, str) or unit not in UNIT_EXPONENTS:
            raise InputError(
                f'samples file {shown} has unknown unit {unit!r}; use "us", "ms" or "ns"'
            )
        if not isinstance(raw, list):
            raise InputError(f'samples file {shown}: "samples" must be a list of numbers')
    else:
        raise NotSamples(
            f'samples file {shown} must hold a list of numbers or {{"unit", "samples"}}'
        )
    if not raw:
        raise InputError(f"samples file {shown} holds no samples")
    exponent = UNIT_EXPONENTS[unit]
    out: list[float] = []
    for index, item in enumerate(raw):
        label = f"{where}[{index}]" if fmt == "json-object" else f"item {index}"
        if isinstance(item, bool) or not isinstance(item, int | Decimal):
            raise InputError(
                f"samples file {shown}: {label} must be a number, not {_json_kind(item)}"
            )
        out.append(_check_positive(_to_us(Decimal(item), exponent), label, shown))
    return tuple(out), unit, fmt


def _json_kind(item: object) -> str:
    if isinstance(item, bool):
        return "a boolean"
    if item is None:
        return "null"
    if isinstance(item, str):
        return "a string"
    if isinstance(item, list):
        return "a list"
    if isinstance(item, dict):
        return "an object"
    return type(item).__name__


def _csv_samples(text: str, shown: str) -> tuple[float, ...]:
    rows = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    for row in rows:
        if any(cell.strip() for cell in row):
            header = [cell.strip().lstrip(_BOM).strip() for cell in row]
            break
    if header is None:
        raise NotSamples(f"samples file {shown} has no header row")
    column = next((name for name in CSV_DURATION_COLUMNS if name in header), None)
    if column is None:
        raise NotSamples(f"samples file {shown} has no {' or '.join(CSV_DURATION_COLUMNS)} column")
    position = header.index(column)
    out: list[float] = []
    for row in rows:
        line = rows.line_num
        if not any(cell.strip() for cell in row):
            continue  # blank line
        cell = row[position].strip() if position < len(row) else ""
        if cell in CSV_MISSING_VALUES:
            continue
        try:
            value = Decimal(cell)
        except InvalidOperation:
            raise InputError(
                f"samples file {shown}: line {line} {column} is not a number: {cell[:40]!r}"
            ) from None
        if not value.is_finite():
            raise InputError(f"samples file {shown}: line {line} {column} is not finite")
        out.append(_check_positive(_to_us(value, 0), f"line {line} {column}", shown))
    if not out:
        raise InputError(f"samples file {shown} has no {column} values")
    return tuple(out)


def load_samples_file(path: Path | str) -> SamplesSource:
    """Read one raw timing file and return its samples in microseconds with its sha256."""
    path = Path(path)
    shown = _shown(path)
    data = read_input(path, "samples file", limit=MAX_SAMPLES_FILE_BYTES)
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_samples(
            f"samples file {shown} is not UTF-8 text (byte {exc.start})", digest, len(data), shown
        ) from None
    text = text.removeprefix(_BOM)
    if not text.strip():
        raise _not_samples(f"samples file {shown} is empty", digest, len(data), shown)
    suffix = path.suffix.lower()
    as_json = suffix == ".json" or (suffix != ".csv" and text.lstrip()[:1] in ("[", "{"))
    try:
        if as_json:
            samples, unit, fmt = _json_samples(text, shown)
        else:
            samples, unit, fmt = _csv_samples(text, shown), "us", "csv"
    except NotSamples as exc:
        raise _not_samples(str(exc), digest, len(data), shown) from None
    return SamplesSource(samples_us=samples, unit=unit, format=fmt, sha256=digest)


def _not_samples(message: str, digest: str, size: int, shown: str) -> NotSamples:
    exc = NotSamples(message)
    exc.sha256, exc.size = digest, size
    exc.reason = message.removeprefix(f"samples file {shown}").strip().removeprefix(": ")
    return exc


def median(samples: Iterable[float]) -> float:
    """The median exactly as ``numpy.median`` computes it (mean of the two middle values).

    >>> median([3.0, 1.0, 2.0]), median([4.0, 1.0, 3.0, 2.0])
    (2.0, 2.5)
    """
    ordered = sorted(float(x) for x in samples)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no samples")
    if any(math.isnan(x) for x in ordered):
        raise ValueError("median of samples containing NaN")
    half = n // 2
    if n % 2:
        return ordered[half]
    return (ordered[half - 1] + ordered[half]) / 2.0


def check_median_agrees(
    median_us: float,
    samples: Sequence[float],
    rel_tol: float = MEDIAN_REL_TOL,
    *,
    label: str = "median_us",
) -> None:
    """Raise MedianDisagrees unless `median_us` equals the median of `samples` within `rel_tol`.

    The default 1e-9 admits only floating-point round-off (unit conversion, the two middle
    values averaged in another order); a median rounded for display is a disagreement.
    """
    if not 0.0 <= rel_tol < 1.0:
        raise ValueError("rel_tol must be in [0, 1)")
    computed = median(samples)
    if not math.isclose(median_us, computed, rel_tol=rel_tol, abs_tol=0.0):
        raise MedianDisagrees(
            f"{label} {median_us!r} disagrees with the median of its {len(samples)} samples "
            f"({computed!r}) by more than a relative {rel_tol:g}"
        )
