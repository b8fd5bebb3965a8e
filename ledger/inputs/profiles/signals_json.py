"""A JSON object mapping signal names to numbers: signals already normalized elsewhere."""

from __future__ import annotations

import json
import math

from ledger.errors import InputError
from ledger.inputs.jsonio import check_json_value
from ledger.inputs.jsonio import reject_duplicate_keys as _reject_duplicate_keys
from ledger.inputs.profiles.common import _MAX_NAME_CHARS, Format, ParsedProfile, one_shape


def _reject_constant(token: str) -> float:
    raise ValueError(f"non-finite number {token}")


def parse_signals_json(text: str, *, source: str = "signals.json") -> ParsedProfile:
    """A JSON object of signal name -> finite number. Booleans, strings, nested values,
    NaN/Infinity, duplicate names and lone surrogates are rejected (the strict rules of
    ledger/inputs/jsonio.py that every input file follows)."""
    try:
        data = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_reject_duplicate_keys
        )
    except RecursionError:
        raise InputError(f"{source}: JSON is nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a JSON object of signal name to number")
    if not data:
        raise InputError(f"{source}: the JSON object holds no signals")
    signals: dict[str, float] = {}
    for key, value in data.items():
        label = repr(key[:80])
        if not key.strip() or len(key) > _MAX_NAME_CHARS:
            raise InputError(f"{source}: signal name {label} is empty or too long")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(
                f"{source}: signal {label} must be a number, not {type(value).__name__}"
            )
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise InputError(f"{source}: signal {label} is not a finite number")
        signals[key] = number
    try:
        check_json_value(signals)
    except ValueError as exc:
        raise InputError(f"{source}: {exc}") from None
    return ParsedProfile(
        format="signals-json",
        signals=dict(sorted(signals.items())),
        aggregation="as given",
    )


def _read(text: str, kernel_name: str | None, display: str, shape: str | None) -> ParsedProfile:
    one_shape("signals-json", display, shape)
    return parse_signals_json(text, source=display)


FORMAT = Format(
    "signals-json",
    "any",
    "a JSON object of signal name to number, for signals normalized elsewhere",
    (),
    "every name as given: write the names another format's reader gives (for a GPU the "
    "ncu-csv ones, for Ascend the msprof-op ones), or the attribution reads nothing",
    _read,
)
