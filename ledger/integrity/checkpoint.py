"""Checkpoints: C2SP tlog-checkpoint notes, optionally Ed25519-signed (C2SP signed-note).

A checkpoint body is three lines, each ending in a newline: the origin (which log), the
tree size in canonical decimal, and the base64 RFC 6962 root of the first `size` events;
extension lines may follow. A signed note adds a blank line and one or more lines
"— <key name> <base64(4-byte key hash || signature)>".

Keys use the golang.org/x/mod/sumdb/note text forms, so Go tooling can read them:
verifier "<name>+<hex key hash>+<base64(0x01 || public key)>" and signer
"PRIVATE+KEY+<name>+<hex key hash>+<base64(0x01 || seed)>". The key hash is the first
four bytes of SHA-256(name || "\\n" || 0x01 || public key).

Signing needs the optional `cryptography` package, imported only when a key is used.

>>> cp = Checkpoint("example.org/ledger", 2, bytes(32))
>>> print(format_note(cp), end="")
example.org/ledger
2
AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
>>> parse_note(format_note(cp)) == (cp, [])
True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.errors import InputError

SIGNATURE_PREFIX = "\u2014 "  # em dash, space
ED25519 = 0x01
MAX_SIGNATURES = 100
MAX_TREE_SIZE = 2**63 - 1
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_HEX8 = re.compile(r"[0-9a-fA-F]{8}")
_LINE_NAMES = {1: "origin line", 2: "tree size line", 3: "root hash line"}
_MISSING_EXTRA = "signing needs the optional 'sign' extra: pip install 'kernel-ledger[sign]'"


@dataclass(frozen=True)
class Checkpoint:
    """One tree head: `origin` names the log, `root` is the Merkle root of its first `size` leaves.

    >>> Checkpoint("log", 0, bytes(32)).body().splitlines()[1]
    '0'
    """

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or _has_control(self.origin):
            raise ValueError("origin must be non-empty, on one line, without control characters")
        if not 0 <= self.size <= MAX_TREE_SIZE:
            raise ValueError(f"tree size must be within 0..{MAX_TREE_SIZE}")
        if len(self.root) != 32:
            raise ValueError("root must be 32 bytes")
        if any(not line or _has_control(line) for line in self.extensions):
            raise ValueError("extension lines must be non-empty, without control characters")

    def body(self) -> str:
        """The note text that gets signed: every line ends in a newline."""
        lines = [self.origin, str(self.size), base64.b64encode(self.root).decode("ascii")]
        return "".join(line + "\n" for line in (*lines, *self.extensions))


@dataclass(frozen=True)
class Signature:
    """One signature line: key name, 4-byte key hash (as an int) and the raw signature.

    >>> Signature("log", 0x01020304, b"sig").line()
    '— log AQIDBHNpZw==\\n'
    """

    name: str
    key_hash: int
    signature: bytes

    def line(self) -> str:
        blob = self.key_hash.to_bytes(4, "big") + self.signature
        return f"{SIGNATURE_PREFIX}{self.name} {base64.b64encode(blob).decode('ascii')}\n"


def format_note(cp: Checkpoint, signatures: Sequence[Signature] = ()) -> str:
    """The checkpoint body, then (if any signatures) a blank line and one line per signature."""
    if not signatures:
        return cp.body()
    return cp.body() + "\n" + "".join(sig.line() for sig in signatures)


def parse_note(text: str) -> tuple[Checkpoint, list[Signature]]:
    """Parse a checkpoint note, signed or not, strictly; raises InputError naming the fault.

    The signatures are parsed, not verified (see `verify_signature`).

    >>> cp, sigs = parse_note("log\\n0\\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\\n")
    >>> cp.size, cp.root.hex()[:8], sigs
    (0, 'e3b0c442', [])
    """
    body, signature_block = _split_note(text)
    return _parse_body(body), _parse_signatures(signature_block)


def key_hash(name: str, public_key: bytes) -> int:
    """C2SP key ID of an Ed25519 key: SHA-256(name || "\\n" || 0x01 || key)[:4], big-endian."""
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public_key).digest()
    return int.from_bytes(digest[:4], "big")


def generate_signing_key(name: str) -> tuple[str, str]:
    """A new Ed25519 key pair as (signer key, verifier key) strings; keep the first secret.

    >>> signer, verifier = generate_signing_key("example.org/ledger")  # doctest: +SKIP
    >>> verifier.split("+")[0]  # doctest: +SKIP
    'example.org/ledger'
    """
    _check_key_name(name, "key name")
    return _signer_key_string(name, secrets.token_bytes(32))


def verifier_key_for(signer_key: str) -> str:
    """The verifier (public) key string that belongs to a signer key string."""
    name, seed = _parse_signer_key(signer_key)
    return _signer_key_string(name, seed)[1]


def sign(cp_or_note: Checkpoint | str, signer_key: str) -> str:
    """Signed note text for a checkpoint, or for note text (keeping its other signatures).

    A signature already present from the same key (name and key hash) is replaced.

    >>> note = sign(Checkpoint("log", 1, bytes(32)), signer)  # doctest: +SKIP
    """
    if isinstance(cp_or_note, Checkpoint):
        cp, existing = cp_or_note, []
    else:
        cp, existing = parse_note(cp_or_note)
    new = _sign_text(cp.body(), signer_key)
    kept = [sig for sig in existing if (sig.name, sig.key_hash) != (new.name, new.key_hash)]
    return format_note(cp, [*kept, new])


def verify_signature(note_text: str, verifier_key: str) -> bool:
    """True if the note carries a signature by this key and every such signature is valid.

    Signatures by other keys are ignored, as C2SP signed-note requires. Raises InputError
    for a malformed note or key.

    >>> verify_signature(sign(cp, signer), verifier)  # doctest: +SKIP
    True
    """
    cp, signatures = parse_note(note_text)
    name, khash, public = _parse_verifier_key(verifier_key)
    mine = [sig for sig in signatures if sig.name == name and sig.key_hash == khash]
    if not mine:
        return False
    key = _ed25519().Ed25519PublicKey.from_public_bytes(public)
    from cryptography.exceptions import InvalidSignature

    message = cp.body().encode("utf-8")
    for sig in mine:
        if len(sig.signature) != 64:
            return False
        try:
            key.verify(sig.signature, message)
        except InvalidSignature:
            return False
    return True


# --- parsing helpers -------------------------------------------------------------------


def _has_control(text: str) -> bool:
    return any(ord(ch) < 0x20 for ch in text)


def _split_note(text: str) -> tuple[str, str]:
    """(body, signature block); the block is '' for an unsigned checkpoint."""
    if not text:
        raise InputError("checkpoint note is empty")
    if any(ord(ch) < 0x20 and ch != "\n" for ch in text):
        raise InputError("checkpoint note contains a control character; only newlines are allowed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError("checkpoint note is not valid UTF-8") from exc
    if not text.endswith("\n"):
        raise InputError("checkpoint note must end with a newline")
    split = text.rfind("\n\n")
    if split < 0:
        return text, ""
    block = text[split + 2 :]
    if not block:
        raise InputError("checkpoint note has a blank line but no signature lines after it")
    return text[: split + 1], block


def _parse_body(body: str) -> Checkpoint:
    lines = body[:-1].split("\n")
    if len(lines) < 3:
        raise InputError(
            f"checkpoint needs 3 lines (origin, tree size, root hash) but has {len(lines)}"
        )
    origin, size_text, root_text, *extensions = lines
    for number, line in enumerate(lines, start=1):
        if not line:
            what = _LINE_NAMES.get(number, f"extension line {number}")
            raise InputError(f"checkpoint {what} is empty")
    if not _DECIMAL.fullmatch(size_text):
        raise InputError(
            f"checkpoint tree size {size_text!r} is not a decimal number without leading zeros"
        )
    size = int(size_text)
    if size > MAX_TREE_SIZE:
        raise InputError(f"checkpoint tree size {size_text} is too large")
    root = _decode_base64(root_text, "checkpoint root hash")
    if len(root) != 32:
        raise InputError(f"checkpoint root hash must be 32 bytes but is {len(root)}")
    return Checkpoint(origin, size, root, tuple(extensions))


def _parse_signatures(block: str) -> list[Signature]:
    lines = block[:-1].split("\n") if block else []
    if len(lines) > MAX_SIGNATURES:
        raise InputError(f"checkpoint note has more than {MAX_SIGNATURES} signatures")
    signatures = []
    for number, line in enumerate(lines, start=1):
        where = f"signature line {number}"
        if not line.startswith(SIGNATURE_PREFIX):
            raise InputError(f"{where} does not start with an em dash and a space")
        name, _, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
        _check_key_name(name, f"{where}: key name")
        blob = _decode_base64(encoded, f"{where}: signature")
        if len(blob) < 5:
            raise InputError(f"{where}: signature is too short")
        signatures.append(Signature(name, int.from_bytes(blob[:4], "big"), blob[4:]))
    return signatures


def strict_base64(text: Any) -> bytes | None:
    """Strict standard base64 (a string, padded, canonical, nothing else), or None."""
    if not isinstance(text, str):
        return None
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def _decode_base64(text: str, what: str) -> bytes:
    raw = strict_base64(text)
    if raw is None or not text:
        raise InputError(f"{what} is not valid standard base64")
    return raw


def _check_key_name(name: str, what: str) -> None:
    if not name:
        raise InputError(f"{what} is empty")
    if "+" in name or any(ch.isspace() for ch in name) or _has_control(name):
        raise InputError(f"{what} {name!r} must not contain spaces or '+'")


# --- key helpers -----------------------------------------------------------------------


def _ed25519() -> Any:
    """The cryptography Ed25519 module, imported only when a key is actually used."""
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise InputError(_MISSING_EXTRA) from exc
    return ed25519


def _sign_text(text: str, signer_key: str) -> Signature:
    """Ed25519 signature over any note text (the C2SP signed-note rule, not checkpoint-specific)."""
    name, seed = _parse_signer_key(signer_key)
    private = _ed25519().Ed25519PrivateKey.from_private_bytes(seed)
    khash = key_hash(name, private.public_key().public_bytes_raw())
    return Signature(name, khash, private.sign(text.encode("utf-8")))


def _signer_key_string(name: str, seed: bytes) -> tuple[str, str]:
    """(signer key, verifier key) strings for a name and a 32-byte Ed25519 seed."""
    private = _ed25519().Ed25519PrivateKey.from_private_bytes(seed)
    public = private.public_key().public_bytes_raw()
    khash = f"{key_hash(name, public):08x}"
    tag = bytes([ED25519])
    signer = f"PRIVATE+KEY+{name}+{khash}+{base64.b64encode(tag + seed).decode('ascii')}"
    verifier = f"{name}+{khash}+{base64.b64encode(tag + public).decode('ascii')}"
    return signer, verifier


def _parse_key(text: str, what: str) -> tuple[str, int, bytes]:
    """(name, key hash, 32-byte key) from "<name>+<hex hash>+<base64(0x01 || key)>"."""
    parts = text.strip().split("+", 2)
    if len(parts) != 3 or not _HEX8.fullmatch(parts[1]):
        raise InputError(f"{what} is malformed; expected <name>+<8 hex digits>+<base64 key>")
    name, hash_text, encoded = parts
    _check_key_name(name, f"{what} name")
    raw = _decode_base64(encoded, what)
    if len(raw) != 33 or raw[0] != ED25519:
        raise InputError(f"{what} is not an Ed25519 key (type 0x01 followed by 32 bytes)")
    return name, int(hash_text, 16), raw[1:]


def _parse_verifier_key(text: str) -> tuple[str, int, bytes]:
    name, khash, public = _parse_key(text, "verifier key")
    if key_hash(name, public) != khash:
        raise InputError("verifier key hash does not match its name and key")
    return name, khash, public


def _parse_signer_key(text: str) -> tuple[str, bytes]:
    """(name, 32-byte seed); the key hash is checked against the derived public key."""
    stripped = text.strip()
    if not stripped.startswith("PRIVATE+KEY+"):
        raise InputError("signer key is malformed; expected PRIVATE+KEY+<name>+<hash>+<key>")
    name, khash, seed = _parse_key(stripped.removeprefix("PRIVATE+KEY+"), "signer key")
    public = _ed25519().Ed25519PrivateKey.from_private_bytes(seed).public_key()
    if key_hash(name, public.public_bytes_raw()) != khash:
        raise InputError("signer key hash does not match its name and key")
    return name, seed
