"""Canonical bytes and hashes.

Payloads are canonicalized once, at append, to RFC 8785 bytes, and those exact bytes are
stored. The event hash is SHA-256 over the RFC 8785 form of the event's identity and content;
because the stored payload already *is* canonical, the envelope is assembled around those
bytes instead of re-canonicalizing the payload. `envelope_bytes` is property-tested
byte-equal to `rfc8785.dumps` of the whole envelope.

`canonical` is the fast path: a JSON encoder with sorted keys and no whitespace produces
RFC 8785 bytes for almost every value; the few constructs where the two differ are
recognised in the encoder's output and handled exactly, or the value is handed to the
`rfc8785` package, which stays the oracle (tests/unit/test_fast_canonical.py). The encoder
is `orjson` for values vouched to hold JSON types only (`string_keys=True`: JSON-mode dumps
of the event models, parsed JSON), else the standard library's C encoder; whatever `orjson`
writes differently goes to the C encoder's path, which declines the rest to the oracle.

`parse_canonical` is the check in the other direction, for bytes that should already be
canonical (stored payloads, bundle lines): parse once, and prove the bytes equal the
canonical form of their parse without the slow path wherever the fast one can tell.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any

import orjson

from ledger.errors import InputError

ZERO_HASH = "0" * 64
MAX_SAFE_INTEGER = 2**53 - 1


def canonical(value: Any, *, string_keys: bool = False) -> bytes:
    """RFC 8785 bytes of a JSON value.

    `string_keys=True` vouches that the value holds JSON types only: dicts with `str` keys,
    lists, str, int, float, bool and None (as pydantic's JSON-mode dumps and `json.loads`
    produce). It skips the key check and lets `orjson` encode (which would also encode
    types JSON does not have, such as UUIDs and enums).

    >>> canonical({"b": 1.0, "a": [True, None]})
    b'{"a":[true,null],"b":1}'
    """
    if string_keys:
        fast = _orjson_canonical(value)
        if fast is not None:
            return fast
    fast = _fast_canonical(value, string_keys)
    if fast is not None:
        return fast
    import rfc8785  # the oracle, for the rare values the fast path declines

    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise InputError(f"value cannot be stored as canonical JSON: {exc}") from exc


# check_circular=False: a cycle then ends in RecursionError, and the oracle says the same.
_encode = json.JSONEncoder(
    ensure_ascii=False,
    allow_nan=False,
    sort_keys=True,
    separators=(",", ":"),
    check_circular=False,
).encode
_CONTAINERS = (dict, list, tuple)
# 16 digits that start a number (after ",", ":" or "[", and maybe "-"), looked for as one
# plain substring once every digit is written 0, every ":" and "[" as "," and every "-"
# dropped: a regular expression costs ten times as much
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789:[", b"000000000,,")
_LONG_START = b"," + b"0" * 16
_LONG_NEGATIVE_START = b",-" + b"0" * 16
# such a number in full: its sign, digits and what follows them ("." or an exponent: not an
# integer), as the compact output writes it
_LONG_NUMBER = re.compile(rb"(?<=[,:\[])-?([0-9]{16,})([.eE]?)")
_ORJSON_INTEGRAL = re.compile(rb"\.0[,\]}]")
_ORJSON_NEGATIVE_EXPONENT = re.compile(rb"e-[0-9]")
_NEGATIVE_ZERO = re.compile(rb"-0\.0(?!\d)")
# An integral float is written "2.0" by Python and "2" by RFC 8785; outside strings ".0" can
# only end such a number, and a number is always followed by one of these three characters.
_INTEGRAL_ENDS = ((b".0,", b","), (b".0]", b"]"), (b".0}", b"}"))


def _fast_canonical(value: Any, string_keys: bool = False) -> bytes | None:
    """RFC 8785 bytes from the C JSON encoder, or None where its output may differ.

    The encoder and RFC 8785 agree on literals, integers, string escapes (both escape `"`,
    `\\` and U+0000-U+001F the same way and nothing else) and, for BMP-only keys, on key
    order. They differ on: integral floats ("2.0" vs "2"), exponent notation (Python from
    1e16 and below 1e-4, RFC 8785 from 1e21 and below 1e-6), negative zero, integers beyond
    2^53-1 (refused by RFC 8785), keys ordered by UTF-16 code units when characters beyond
    U+FFFF occur, lone surrogates (refused) and non-string keys (refused). Integral floats are
    rewritten here; every other case returns None.
    """
    if not isinstance(value, _CONTAINERS):
        return None  # a lone scalar: rare, and the oracle is quick at it
    try:
        text = _encode(value)
    except (TypeError, ValueError, RecursionError):
        return None  # not JSON (or NaN/Infinity): let the oracle say why
    if not string_keys and not _string_keys(value):
        return None
    return _repaired(text)


# orjson: sorted keys; subclasses, dataclasses and datetimes go to `_refuse` instead of being
# encoded their own way (the C encoder and the oracle refuse them, or encode a subclass as
# its base type, which the C encoder's path does the same as the oracle).
_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def _orjson_canonical(value: Any) -> bytes | None:
    """RFC 8785 bytes from `orjson`, or None where its output may differ.

    For a value of JSON types only, `orjson` writes what the C encoder writes (the same
    escapes, raw non-ASCII characters, "2.0" for integral floats, "-0.0", keys in code-point
    order) except where both differ from RFC 8785 anyway: exponents (`orjson` from 1e16 and
    below 1e-5) and NaN/Infinity, which it writes as null. The event models refuse
    non-finite numbers (`allow_inf_nan=False`) and JSON-mode dumps write them as null before
    any encoder sees them; `json.loads` output is never non-finite unless the text spelled
    NaN or Infinity, which is not canonical JSON. It refuses lone surrogates, non-string
    keys, integers beyond 64 bits and nesting beyond 254 levels: then None, as for every
    output the guards of `_repaired` decline.
    """
    written = _orjson_dumps(value)
    return None if written is None else _repaired_orjson(written)


def _orjson_dumps(value: Any) -> bytes | None:
    """`orjson`'s sorted, compact bytes of a container, or None where it refuses it."""
    if not isinstance(value, _CONTAINERS):
        return None
    try:
        return orjson.dumps(value, default=_refuse, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None


def _repaired_orjson(written: bytes) -> bytes | None:
    """`_repaired` of `orjson`'s output (see `_orjson_canonical`)."""
    if written.isascii():
        return _repaired_utf8(written)
    return _repaired(written.decode())


def parse_canonical(data: bytes) -> Any | None:
    """The JSON value (an object or array) that `data` holds, when `data` are exactly its
    RFC 8785 bytes and the fast path can prove it; None otherwise (not JSON, not canonical,
    or a form the fast path leaves to the oracle): the caller then decides the slow way.

    Two ways to the proof, both sound because the bytes compared are RFC 8785 of the parsed
    value, and bytes equal to that are canonical text, which `orjson.loads` and `json.loads`
    read to the same value (no integers of 16 digits or more pass, so none beyond 64 bits):
    most often `data` are exactly what `orjson` writes for its parse and hold none of the
    forms where `orjson` differs from RFC 8785 (`_orjson_writes_rfc8785`, a few scans of the
    bytes); else the fast canonicalizer's output for the parse (`_orjson_canonical`)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    written = _orjson_dumps(value)
    if written is None:
        return None
    if written == data and _orjson_writes_rfc8785(data):
        return value
    return value if _repaired_orjson(written) == data else None  # the same bytes, repaired


def _orjson_writes_rfc8785(data: bytes) -> bool:
    """True when `data`, known to be `orjson`'s own output for its parse, holds none of the
    forms in which `orjson` and RFC 8785 write a value differently; False where one may
    occur (then the caller takes the exact path, so a false alarm costs time, never a wrong
    answer). Strings are scanned with the rest, which can only raise false alarms. Each
    search starts from a literal (or is one byte), which the regular expression engine and
    `in` find fastest.

    Those forms, in `orjson`'s output: an integral float or negative zero ("2.0", "-0.0":
    ".0" then ",", "]" or "}"); exponents (always signed: "1e+16", "1e-7": "e", then "+",
    or "-" and a digit); integers of 16 digits or more (RFC 8785 reads numbers as doubles: a
    digit run after ",", ":" or "[", maybe after "-"); characters beyond U+FFFF (keys then
    sort differently in UTF-16, so only ASCII is taken here). Everything else, literals,
    the other numbers and string escapes, `orjson` writes as RFC 8785 does (see
    `_orjson_canonical`)."""
    if not data.isascii() or _ORJSON_INTEGRAL.search(data) is not None:
        return False
    if b"+" in data or _ORJSON_NEGATIVE_EXPONENT.search(data) is not None:
        return False
    digits = data.translate(_DIGITS_AS_ZERO)  # also ":" and "[" as ","
    if _LONG_START in digits or _LONG_NEGATIVE_START in digits:
        return _long_numbers_safe(data)
    return True


def _long_numbers_safe(data: bytes) -> bool:
    """True when every number of 16 digits or more in an encoder's compact output (a digit
    run after ",", ":" or "[", maybe after "-") is an integer within ±(2^53-1): exactly a
    double, which RFC 8785 writes as its digits, as the encoders do (the run-time settings
    that write such an integer, `min_samples` of a run decided on medians, are one of them).
    A fraction, an exponent or a longer integer: False. A string holding such text raises a
    false alarm (False), never a wrong answer."""
    for match in _LONG_NUMBER.finditer(data):
        digits, after = match.groups()
        if after or len(digits) > 16 or int(digits) > MAX_SAFE_INTEGER:
            return False
    return True


def _repaired(text: str) -> bytes | None:
    """The RFC 8785 bytes of an encoder's sorted, compact output, or None where the output
    may differ from RFC 8785 in a way not repaired here (see `_fast_canonical`)."""
    if not text.isascii():
        try:
            if len(text.encode("utf-16-le")) != 2 * len(text):
                return None  # characters beyond U+FFFF: UTF-16 key order may differ
        except UnicodeEncodeError:
            return None  # a lone surrogate
    return _repaired_utf8(text.encode())


def _repaired_utf8(data: bytes) -> bytes | None:
    """`_repaired` of an output already known to hold no character beyond U+FFFF, as its
    UTF-8 bytes (a quote byte never occurs inside a multi-byte character, and everything
    outside strings is ASCII)."""
    if b"\\" in data and b'\\"' in data:
        return None  # a string holds a quote or ends in a backslash: splitting below would lie
    outside = b"".join(data.split(b'"')[::2])  # everything but the strings' contents
    if b"e+" in outside or b"e-" in outside:
        return None  # exponent notation
    if b"-0.0" in outside and _NEGATIVE_ZERO.search(outside):
        return None
    if (
        len(outside) >= 16
        and _LONG_START in outside.translate(_DIGITS_AS_ZERO, b"-")
        and not _long_numbers_safe(outside)
    ):
        return None  # a number of 16 or more digits that may be beyond 2^53-1
    ends = [(old, new) for old, new in _INTEGRAL_ENDS if old in outside]
    if ends:
        if all(outside.count(old) == data.count(old) for old, _ in ends):
            for old, new in ends:
                data = data.replace(old, new)
        else:  # a string holds the same characters: repair between the strings only
            parts = data.split(b'"')
            parts[::2] = [_integral(part) for part in parts[::2]]
            data = b'"'.join(parts)
    return data


def _integral(outside: bytes) -> bytes:
    for old, new in _INTEGRAL_ENDS:
        outside = outside.replace(old, new)
    return outside


def _string_keys(value: Any) -> bool:
    """True when every object key in the (already encodable, so acyclic) value is a str."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if not isinstance(key, str):
                    return False
            stack.extend([v for v in item.values() if isinstance(v, _CONTAINERS)])
        else:
            stack.extend([v for v in item if isinstance(v, _CONTAINERS)])
    return True


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _string(value: str) -> bytes:
    """RFC 8785 bytes of one string (the same escapes as the C encoder's)."""
    try:
        return encode_basestring(value).encode()
    except UnicodeEncodeError:
        import rfc8785

        return rfc8785.dumps(value)  # raises the oracle's error for a lone surrogate


def envelope_bytes(
    *,
    stream_id: str,
    stream_version: int,
    event_id: str,
    event_type: str,
    schema_version: int,
    recorded_at: str,
    parent_hash: str,
    payload: bytes,
    actor: str | None = None,
) -> bytes:
    """RFC 8785 bytes of the event envelope, with `payload` (and `actor`, the canonical
    text of the actor object, when the event records one) spliced in as stored.

    Keys appear in RFC 8785 order (all are ASCII, so plain code-point order): actor (only
    when recorded: an event from before actors were recorded has no such key, so its bytes
    are those it always had), event_id, event_type, parent_hash, payload, recorded_at,
    schema_version, stream_id, stream_version.
    """
    head, tail = _around_payload(
        stream_id,
        stream_version,
        event_id,
        event_type,
        schema_version,
        recorded_at,
        parent_hash,
        actor,
    )
    return b"".join((head, payload, tail))


def event_hash(
    *,
    stream_id: str,
    stream_version: int,
    event_id: str,
    event_type: str,
    schema_version: int,
    recorded_at: str,
    parent_hash: str,
    payload: bytes,
    actor: str | None = None,
) -> str:
    """SHA-256 (hex) of `envelope_bytes` of the same fields (hashed in three pieces, so the
    payload is not copied)."""
    head, tail = _around_payload(
        stream_id,
        stream_version,
        event_id,
        event_type,
        schema_version,
        recorded_at,
        parent_hash,
        actor,
    )
    digest = hashlib.sha256(head)
    digest.update(payload)
    digest.update(tail)
    return digest.hexdigest()


def _around_payload(
    stream_id: str,
    stream_version: int,
    event_id: str,
    event_type: str,
    schema_version: int,
    recorded_at: str,
    parent_hash: str,
    actor: str | None = None,
) -> tuple[bytes, bytes]:
    """The envelope's bytes before and after the payload."""
    try:
        head = (
            ("{" if actor is None else f'{{"actor":{actor},')
            + f'"event_id":{encode_basestring(event_id)},'
            f'"event_type":{encode_basestring(event_type)},'
            f'"parent_hash":{encode_basestring(parent_hash)},"payload":'
        ).encode()
        tail = (
            f',"recorded_at":{encode_basestring(recorded_at)},'
            f'"schema_version":{int(schema_version)},'
            f'"stream_id":{encode_basestring(stream_id)},'
            f'"stream_version":{int(stream_version)}}}'
        ).encode()
    except UnicodeEncodeError:
        for text in (event_id, event_type, parent_hash, recorded_at, stream_id):
            _string(text)  # the oracle's error for the field with a lone surrogate
        raise
    return head, tail


def envelope_reference(fields: Mapping[str, Any], payload_value: Any) -> bytes:
    """The slow, obvious envelope: re-canonicalize everything. Used as the test oracle and by
    the deep verifier."""
    import rfc8785

    return rfc8785.dumps({**fields, "payload": payload_value})
