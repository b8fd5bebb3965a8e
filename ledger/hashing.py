"""Canonical bytes and hashes.

Payloads are canonicalized once, at append, with RFC 8785 (the `rfc8785` package) and those
exact bytes are stored. The event hash is SHA-256 over the RFC 8785 form of the event's
identity and content; because the stored payload already *is* canonical, the envelope is
assembled around those bytes instead of re-canonicalizing the payload. `envelope_bytes`
is property-tested byte-equal to `rfc8785.dumps` of the whole envelope.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rfc8785

from ledger.errors import InputError

ZERO_HASH = "0" * 64
MAX_SAFE_INTEGER = 2**53 - 1


def canonical(value: Any) -> bytes:
    """RFC 8785 bytes of a JSON value.

    >>> canonical({"b": 1.0, "a": [True, None]})
    b'{"a":[true,null],"b":1}'
    """
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise InputError(f"value cannot be stored as canonical JSON: {exc}") from exc


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> tuple[str, int]:
    """(hex digest, size in bytes) of a file, read in chunks."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _string(value: str) -> bytes:
    return rfc8785.dumps(value)


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
) -> bytes:
    """RFC 8785 bytes of the event envelope, with `payload` spliced in as stored.

    Keys appear in RFC 8785 order (all are ASCII, so plain code-point order):
    event_id, event_type, parent_hash, payload, recorded_at, schema_version, stream_id,
    stream_version.
    """
    return b"".join(
        (
            b'{"event_id":',
            _string(event_id),
            b',"event_type":',
            _string(event_type),
            b',"parent_hash":',
            _string(parent_hash),
            b',"payload":',
            payload,
            b',"recorded_at":',
            _string(recorded_at),
            b',"schema_version":',
            str(int(schema_version)).encode(),
            b',"stream_id":',
            _string(stream_id),
            b',"stream_version":',
            str(int(stream_version)).encode(),
            b"}",
        )
    )


def event_hash(**fields: Any) -> str:
    """SHA-256 (hex) of `envelope_bytes(**fields)`."""
    return hashlib.sha256(envelope_bytes(**fields)).hexdigest()


def envelope_reference(fields: Mapping[str, Any], payload_value: Any) -> bytes:
    """The slow, obvious envelope: re-canonicalize everything. Used as the test oracle and by
    the deep verifier."""
    return rfc8785.dumps({**fields, "payload": payload_value})
