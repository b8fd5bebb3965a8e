"""Strict reading of the JSON files users hand to the ledger.

Every rejection is an `InputError` with one line that names the file; nothing here writes.
Rules: UTF-8 (a BOM is tolerated), one JSON value, no NaN or Infinity, no duplicate keys,
integers within RFC 8785's safe range, finite floats, bounded size and nesting depth.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ledger.errors import InputError
from ledger.files import read_input
from ledger.integrity.hashing import MAX_SAFE_INTEGER, sha256_hex
from ledger.text import display, plural  # noqa: F401  (still imported from here by some callers)

RUN_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
"""The one pattern of a run id, everywhere (config, manifest, bundle, --run): safe as a file
name and on a terminal, and short enough for every backend's column."""
MAX_DEPTH = 64
MIN_TIME_US = 1e-6
MAX_TIME_US = 1e12
"""Every time the ledger takes (a median, a sample, in microseconds) lies within
[MIN_TIME_US, MAX_TIME_US]: an attosecond to about 11.6 days. Within it every ratio, log,
sum and statistic of a round stays finite and keeps its precision; outside it an input is
refused (exit 2)."""
TIME_RANGE = f"between {MIN_TIME_US:g} and {MAX_TIME_US:g} us"


def time_problem(us: float) -> str | None:
    """Why `us` is not a time the ledger takes, or None."""
    if not math.isfinite(us) or not MIN_TIME_US <= us <= MAX_TIME_US:
        return f"must be a time {TIME_RANGE}"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def read_bytes(path: Path, what: str) -> bytes:
    """The bytes of a regular file, with one-line errors for every way that can fail
    (`ledger.files.read_input`: never blocks on a FIFO, never reads past the limit)."""
    return read_input(path, what)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return out


def nested_deeper_than(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value holds containers more than `limit` levels deep (walked
    without recursion, so any depth the parser produced can be asked about)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        for child in children:
            if isinstance(child, (dict, list)):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def check_json_value(value: Any, where: str = "") -> None:
    """Reject values RFC 8785 cannot represent exactly, and nesting beyond MAX_DEPTH."""
    if not _plainly_valid(value):
        _explain_invalid(value, where)


def _plainly_valid(value: Any) -> bool:
    """True when `value` is made of exact str/int/float/bool/None/dict/list values that pass
    every rule. A walk without the element paths, which only the error message needs:
    building a path for every element cost more than the stdlib parser's whole work. False
    means "look closer", not "invalid"."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    search = _SURROGATE.search
    while stack:
        item, depth = stack.pop()
        kind = type(item)
        if kind is dict:
            if depth >= MAX_DEPTH:
                return False
            for key in item:
                if type(key) is not str or search(key):
                    return False
            children = item.values()
        elif kind is list:
            if depth >= MAX_DEPTH:
                return False
            children = item
        else:
            children = (item,)
            depth -= 1  # the item itself, at its own depth
        for child in children:
            kind = type(child)
            if kind is float:
                if not math.isfinite(child):
                    return False
            elif kind is str:
                if search(child):
                    return False
            elif kind is int:
                if abs(child) > MAX_SAFE_INTEGER:
                    return False
            elif kind is dict or kind is list:
                stack.append((child, depth + 1))
            elif child is not None and kind is not bool:
                return False
    return True


def _explain_invalid(value: Any, where: str) -> None:
    """The walk with paths: raises ValueError naming the first element that breaks a rule."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"nesting deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, path or "value")
            continue
        if isinstance(item, bool) or item is None:
            continue
        if isinstance(item, int):
            if abs(item) > MAX_SAFE_INTEGER:
                raise ValueError(f"{path or 'value'}: integer {item} is beyond ±(2^53-1)")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{path or 'value'}: number is not finite")
        elif isinstance(item, dict):
            for key in item:
                _check_text(key, f"a key in {path or 'the top-level object'}")
            stack.extend((v, f"{path}.{k}" if path else str(k), depth + 1) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(item))


def _check_text(text: str, where: str) -> None:
    """JSON may escape a lone UTF-16 surrogate (\\ud800); that is not Unicode text and can be
    neither stored as UTF-8 nor canonicalized."""
    match = _SURROGATE.search(text)
    if match is not None:
        raise ValueError(
            f"{display(where)}: string holds the unpaired surrogate \\u{ord(match.group()):04x}, "
            "which is not Unicode text"
        )


def _refuse_depth(text: str, what: str, shown: str) -> None:
    """InputError when `text` nests deeper than MAX_DEPTH outside its strings. A text with at
    most MAX_DEPTH opening brackets (inside strings or not) cannot: most inputs have a few
    dozen and skip the character loop."""
    if text.count("[") + text.count("{") > MAX_DEPTH:
        _check_depth(text, what, shown)


def _check_depth(text: str, what: str, shown: str) -> None:
    depth = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(f"{what} {shown} is nested deeper than {MAX_DEPTH} levels")
        elif ch in "]}":
            depth -= 1


NOTES_MARK = "//"
"""How a template (`kernel-ledger template KIND`) marks its notes: a line starting with it.
The notes document the format; the files the ledger reads are JSON, which has no comments,
so a file that kept them is refused, naming their lines (`notes_refusal`)."""


def note_lines(lines: list[str]) -> list[int]:
    """The 1-based numbers of the lines that are `//` notes."""
    return [n for n, line in enumerate(lines, start=1) if line.lstrip().startswith(NOTES_MARK)]


def _spans(numbers: list[int]) -> str:
    """`1, 4-6, 9` for [1, 4, 5, 6, 9]."""
    out: list[str] = []
    start = end = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == end + 1:
            end = n
            continue
        out.append(str(start) if start == end else f"{start}-{end}")
        if n is not None:
            start = end = n
    return ", ".join(out)


def notes_refusal(what: str, shown: str, numbers: list[int]) -> InputError:
    """The refusal of a file that kept a template's `//` note lines."""
    where = f"line {numbers[0]}" if len(numbers) == 1 else f"lines {_spans(numbers)}"
    return InputError(
        f"{what} {shown} holds // notes on {where}: drop those lines (a template's // notes "
        "document the format; the file itself is read as JSON, which has no comments)"
    )


def parse_json_bytes(data: bytes, what: str, shown: str) -> Any:
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {shown} is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise InputError(f"{what} {shown} is empty")
    # Nesting beyond MAX_DEPTH is named as such, whatever else is wrong with the text: the
    # parser stops at its recursion limit (a RecursionError, not a crash) and the value check
    # refuses any container deeper than MAX_DEPTH, so a text that parses and passes is never
    # too deep, and the character scan (slow, in Python) runs only once something failed.
    try:
        value = json.loads(
            text, parse_constant=_no_constants, object_pairs_hook=reject_duplicate_keys
        )
    except json.JSONDecodeError as exc:
        _refuse_depth(text, what, shown)
        notes = note_lines(text.splitlines())
        if notes:  # no JSON text has a line starting with //: these are a template's notes
            raise notes_refusal(what, shown, notes) from None
        raise InputError(
            f"{what} {shown} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError) as exc:
        _refuse_depth(text, what, shown)
        raise InputError(f"{what} {shown} is not valid JSON: {exc}") from None
    try:
        check_json_value(value)
    except ValueError as exc:
        _refuse_depth(text, what, shown)
        raise InputError(f"{what} {shown} cannot be accepted: {exc}") from None
    return value


class JsonFile:
    """A parsed JSON input file together with the evidence about it."""

    __slots__ = ("data", "path", "sha256", "size", "value")

    def __init__(self, path: Path, data: bytes, value: Any) -> None:
        self.path = path
        self.data = data
        self.value = value
        self.sha256 = sha256_hex(data)
        self.size = len(data)


def read_json(path: Path, what: str, *, object_root: bool = True) -> JsonFile:
    """Read and strictly parse a JSON file; `what` names it in messages ("config file")."""
    path = Path(path)
    data = read_bytes(path, what)
    value = parse_json_bytes(data, what, display(path))
    if object_root and not isinstance(value, dict):
        kind = type(value).__name__.replace("dict", "object").replace("list", "array")
        raise InputError(f"{what} {display(path)} must hold a JSON object, not a {kind}")
    return JsonFile(path, data, value)
