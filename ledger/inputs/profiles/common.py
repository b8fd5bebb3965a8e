"""What every profile reader shares: the parsed result, cell values and column headings,
CSV tables, and choosing the kernel and the shape when a file holds several."""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ledger.errors import InputError
from ledger.files import DEFAULT_MAX_INPUT_BYTES
from ledger.inputs.jsonio import plural

MAX_FILE_BYTES = DEFAULT_MAX_INPUT_BYTES
"""Largest raw profile file accepted by default (64 MiB); like every other input file,
`KERNEL_LEDGER_MAX_INPUT_BYTES` overrides it (`files.max_input_bytes`)."""

_MAX_WALK_FILES = 20_000
_MAX_WALK_DEPTH = 8
_MAX_LISTED_NAMES = 10
_MAX_NAME_CHARS = 200
_MAX_PREAMBLE_LINES = 5_000


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One raw file that was read: `path` is POSIX-style and relative to the loaded folder
    (or, for a single file, to the folder holding it)."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class ParsedProfile:
    """A profile reduced to normalized signals. `signals` values are always finite floats."""

    format: str
    signals: dict[str, float]
    attributes: dict[str, str] = field(default_factory=dict)
    files: tuple[SourceFile, ...] = ()
    kernel_name: str | None = None
    aggregation: str = ""
    notes: tuple[str, ...] = ()
    shape: str | None = None
    shapes: tuple[ShapeProfile, ...] = ()


@dataclass(frozen=True, slots=True)
class ShapeProfile:
    """One input shape (or launch configuration) of the kernel, never merged with another:
    `signals` are the medians over its `launches`, `total_us` their summed duration."""

    shape: str
    launches: int
    total_us: float
    signals: dict[str, float]


@dataclass(frozen=True, slots=True)
class Format:
    """A profile format, declared once in its reader's module: what the catalog tells agents
    (ledger/inputs/profiles/catalog.py) and how the loader recognises and reads a file of it."""

    name: str  # as ProfileRecorded.format records it
    platform: str  # "gpu", "ascend" or "any"
    what: str  # the file it reads
    named: tuple[str, ...]  # the signals its reader maps known columns or metrics to
    others: str  # what becomes of every other column or metric
    read: Callable[[str, str | None, str, str | None], ParsedProfile]
    # (text, kernel name, the file's name as shown, --shape) -> the profile
    header: Callable[[set[str]], bool] | None = None  # a CSV format: is this its header row
    # (the row's lower-cased cells)? Headers of two formats must not both match a row.
    units: dict[str, str] = field(default_factory=dict)  # a named signal's unit, where known
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # metrics or columns


def signal_sources(table) -> dict[str, tuple[str, ...]]:
    """Each signal of a reader's table with the metrics or column headings it reads it from
    (lower-cased, as the reader matches them)."""
    out: dict[str, list[str]] = {}
    for key, value in table.items():
        out.setdefault(value[0] if isinstance(value, tuple) else value, []).append(key)
    return {name: tuple(keys) for name, keys in out.items()}


def signal_names(*groups) -> tuple[str, ...]:
    return tuple(sorted({name for group in groups for name in group}))


def one_shape(fmt: str, display: str, shape: str | None) -> None:
    """Refuse --shape for a format whose file holds one shape."""
    if shape is not None:
        raise InputError(f"{display}: a {fmt} profile holds one shape; --shape does not apply")


OTHER_HEADINGS = (
    "every other numeric column under its heading, lower-cased, non-alphanumerics as `_`, "
    "the unit as a suffix (`_us`, `_kb`, `_bytes`, `_gbps`, `_mhz`; a `%` column as a "
    "fraction without suffix): the pipe columns give `aic_*`/`aiv_*` ratios and times such "
    "as `aiv_vec_ratio`, `aiv_scalar_ratio`, `aiv_mte2_ratio`, `aiv_time_us`"
)
"""What the Ascend readers make of a column they do not name."""


_NA_TOKENS = frozenset({"", "na", "n/a", "nan", "none", "null", "-", "--", "inf", "-inf"})
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def _clean(cell: str) -> str:
    """Strip whitespace (tabs included), a BOM, and any layers of surrounding quotes."""
    text = cell.replace("\ufeff", "").strip()
    while len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _number(cell: str) -> float | None:
    """A finite float, or None for NA-like, non-numeric or non-finite cells.

    >>> _number(' "1,234.5"\\t'), _number('N/A'), _number('1e999')
    (1234.5, None, None)
    """
    text = _clean(cell)
    if text.lower() in _NA_TOKENS:
        return None
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    elif not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _sanitize(name: str) -> str:
    """Lower-case snake_case: every run of other characters becomes one underscore."""
    text = re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")
    if text and text[0].isdigit():
        text = "x_" + text
    return text[:_MAX_NAME_CHARS]


# Units written in a column heading, as "name(unit)": suffix of the signal and scale factor.
# A scale of 0.01 turns a percentage into a fraction and adds no suffix.
_HEADING_UNITS: dict[str, tuple[str, float]] = {
    "us": ("_us", 1.0),
    "ms": ("_us", 1e3),
    "ns": ("_us", 1e-3),
    "s": ("_us", 1e6),
    "gb/s": ("_gbps", 1.0),
    "mb/s": ("_gbps", 1e-3),
    "kb": ("_kb", 1.0),
    "mb": ("_kb", 1024.0),
    "b": ("_bytes", 1.0),
    "byte": ("_bytes", 1.0),
    "bytes": ("_bytes", 1.0),
    "%": ("", 0.01),
    "mhz": ("_mhz", 1.0),
}
_HEADING = re.compile(r"^(.*?)\s*\(([^()]*)\)\s*$")

# Signal names renamed after sanitizing (msprof tables and full-run CSVs).
_ALIASES = {
    "aic_mac_time_us": "aic_cube_time_us",
    "aic_mac_ratio": "aic_cube_ratio",
    "aicore_time_us": "aic_time_us",
    "aiv_gm_to_ub_bw_gbps": "gm_to_ub_bw_gbps",
    "aiv_ub_to_gm_bw_gbps": "ub_to_gm_bw_gbps",
    "gm_to_ub_datas_kb": "gm_to_ub_kb",
    "ub_to_gm_datas_kb": "ub_to_gm_kb",
    "aiv_gm_to_ub_datas_kb": "gm_to_ub_kb",
    "aiv_ub_to_gm_datas_kb": "ub_to_gm_kb",
}


def _normalize_heading(heading: str) -> tuple[str, float]:
    """Signal name and scale for a column heading such as 'aiv_mte2_active_bw(GB/s)'.

    >>> _normalize_heading("aiv_mte2_active_bw(GB/s)")
    ('aiv_mte2_bw_gbps', 1.0)
    >>> _normalize_heading("cube_utilization(%)")
    ('cube_utilization', 0.01)
    """
    base, suffix, scale = heading, "", 1.0
    match = _HEADING.match(heading)
    if match:
        unit = match.group(2).strip().lower()
        if unit in _HEADING_UNITS:
            base = match.group(1)
            suffix, scale = _HEADING_UNITS[unit]
        else:
            base = f"{match.group(1)}_{unit}"
    name = _sanitize(base)
    if not name:
        return "", scale
    if suffix and not name.endswith(suffix):
        name += suffix
    name = name.replace("_active_bw_", "_bw_")
    return _ALIASES.get(name, name), scale


def _finite_only(signals: Mapping[str, float], notes: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in sorted(signals):
        value = float(signals[key])
        if math.isfinite(value):
            out[key] = value
        else:
            notes.append(f"{key} dropped: its aggregate is not finite")
    return out


def _joined(values: Iterable[str]) -> str:
    distinct = sorted({v for v in values if v})
    if len(distinct) <= 8:
        return " | ".join(distinct)
    return f"{len(distinct)} distinct values"


@dataclass(slots=True)
class _Table:
    source: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def index(self, *spellings: str) -> int | None:
        wanted = [s.lower() for s in spellings]
        lowered = [h.lower() for h in self.header]
        for spelling in wanted:
            if spelling in lowered:
                return lowered.index(spelling)
        return None

    def require(self, *spellings: str) -> int:
        idx = self.index(*spellings)
        if idx is None:
            raise InputError(f"{self.source}: missing required column {spellings[0]!r}")
        return idx


def _csv_rows(text: str, source: str) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(f"{source}: malformed CSV ({exc})") from None


def _table(text: str, source: str) -> _Table:
    """Parse CSV text into a header and rows of cleaned cells.

    Blank lines are skipped; trailing empty heading cells (a trailing comma) are dropped;
    short rows are padded and surplus cells ignored.
    """
    raw = _csv_rows(text, source)
    header: list[str] | None = None
    rows: list[list[str]] = []
    notes: list[str] = []
    surplus = 0
    for record in raw:
        cells = [_clean(c) for c in record]
        if not any(cells):
            continue
        if header is None:
            while cells and not cells[-1]:
                cells.pop()
            header = cells
            continue
        if len(cells) > len(header):
            if any(cells[len(header) :]):
                surplus += 1
            cells = cells[: len(header)]
        elif len(cells) < len(header):
            cells += [""] * (len(header) - len(cells))
        rows.append(cells)
    if header is None:
        raise InputError(f"{source}: no CSV header row found")
    if surplus:
        notes.append(
            f"{source}: {plural(surplus, 'row')} had more cells than the header; extra ignored"
        )
    return _Table(source, header, rows, notes)


def _listing(names: Sequence[str]) -> str:
    shown = [repr(n[:80]) for n in names[:_MAX_LISTED_NAMES]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _select(
    names: Sequence[str],
    kernel_name: str | None,
    source: str,
    *,
    also: Callable[[str], str] | None = None,
) -> tuple[str, list[str]]:
    """Choose one kernel among distinct `names`; returns (name, notes).

    An exact match wins, then a match of `also(name)` (for ncu: the name before its
    argument list), then a unique case-insensitive substring match.
    """
    distinct = list(dict.fromkeys(n for n in names if n))
    if not distinct:
        raise InputError(f"{source}: no kernel rows found")
    if kernel_name is None:
        if len(distinct) == 1:
            return distinct[0], []
        raise InputError(
            f"{source}: holds {len(distinct)} kernels; pass a kernel name, one of "
            f"{_listing(distinct)}"
        )
    if kernel_name in distinct:
        return kernel_name, []
    if also is not None:
        short = [n for n in distinct if also(n) == kernel_name]
        if len(short) == 1:
            return short[0], []
    needle = kernel_name.lower()
    hits = [n for n in distinct if needle in n.lower()]
    if len(hits) == 1:
        return hits[0], [f"kernel name {kernel_name!r} matched {hits[0]!r} by substring"]
    if hits:
        raise InputError(
            f"{source}: kernel name {kernel_name!r} is ambiguous; it matches {_listing(hits)}"
        )
    raise InputError(f"{source}: no kernel named {kernel_name!r}; available: {_listing(distinct)}")


def _shape_key(text: str) -> str:
    return re.sub(r"[\s\"']+", "", text).lower()


def _pick_shape(
    groups: Mapping[str, Sequence[int]],
    totals: Mapping[str, float],
    shape: str | None,
    kernel: str,
    source: str,
) -> tuple[str, list[str]]:
    """The shape to attribute among `groups` (shape -> row indices): the one asked for, or,
    when none is asked for and there are several, the one with the most total time."""
    names = list(groups)
    if shape is not None:
        wanted = _shape_key(shape)
        exact = [n for n in names if _shape_key(n) == wanted]
        hits = exact or [n for n in names if wanted in _shape_key(n)]
        if len(hits) == 1:
            return hits[0], []
        what = "is ambiguous; it matches" if hits else "matches none of"
        raise InputError(
            f"{source}: shape {shape!r} {what} the shapes of {kernel!r}: {_listing(hits or names)}"
        )
    if len(names) == 1:
        return names[0], []
    chosen = max(names, key=lambda n: (totals.get(n, 0.0), -names.index(n)))
    others = ", ".join(f"{n!r} ({len(groups[n])} launch(es))" for n in names if n != chosen)
    return chosen, [
        f"{kernel!r} ran with {len(names)} different shapes, never merged: attributed "
        f"{chosen!r} ({len(groups[chosen])} launch(es), the most total time); the others "
        f"are reported each on their own: {others}; pass --shape to choose"
    ]


def _line_cells(line: str) -> list[str]:
    try:
        record = next(csv.reader([line]), [])
    except csv.Error:
        return []
    return [_clean(c) for c in record]


def _find_header(
    text: str, formats: Iterable[Format], limit: int = _MAX_PREAMBLE_LINES
) -> tuple[int, str | None, int]:
    """(offset of the header line, the name of the first of `formats` whose header it is,
    preamble lines skipped). Lines before the
    header that are a tool's own (``==PROF==``, ``==WARNING==``) or the profiled program's
    output (commas and quotes included) are skipped one line at a time, so an unbalanced
    quote there cannot swallow the table."""
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if number >= limit:
            break
        stripped = line.replace("\ufeff", "").strip()
        if stripped and not stripped.startswith("=="):
            cells = {c.lower() for c in _line_cells(stripped)} - {""}
            if len(cells) >= 2:
                kind = next((f.name for f in formats if f.header and f.header(cells)), None)
                if kind is not None:
                    return offset, kind, number
            if {"block_id", "sub_block_id"} & cells or any(c.startswith("aiv_") for c in cells):
                return offset, "per-core", number
        offset += len(line)
    return 0, None, 0
