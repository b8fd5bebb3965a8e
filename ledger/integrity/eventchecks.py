"""The per-event checks of `verify`: seq, hash and chain (the one chain checker), canonical
payload and payload validates; and the checks of the stored rows themselves (storage types
of the events' columns, the blob table).

`check_chain` is the whole of `verify --chain`; `check_event` adds the actor and payload
checks and is what every reader of events that moves or replays them runs first (`verify`,
`db copy`, bundles). A failure is raised as `ReplayStop`, naming its seq.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ledger.core.actors import stored_problem
from ledger.core.events import Event, load_event
from ledger.errors import InputError
from ledger.integrity.hashing import ZERO_HASH, canonical, parse_canonical, sha256_hex
from ledger.store.checks import SQLITE_EVENT_TYPES, first_misstated_blob, first_mistyped_event
from ledger.store.eventstore import Store, StoredEvent

CHECKS = ("seq", "hash", "chain", "canonical", "payload", "replay", "projection", "blobs")
CHAIN_CHECKS = CHECKS[:3]
GAP = "expected seq {expected}, found {seq}: the log has a gap"
BAD_HASH = "event_hash does not match the event's content"
NOT_CONTIGUOUS = "stream version {version} follows {previous}: not contiguous"
BAD_PARENT = "parent_hash does not link to the previous event of the run"


@dataclass(frozen=True)
class Failure:
    seq: int | None
    stream_id: str | None
    stream_version: int | None
    check: str
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ReplayStop(Exception):
    """The first failure of a check: the check stops there."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure


class Head(Protocol):
    """A run's chain head: the version and hash of its last event checked."""

    version: int
    last_hash: str


@dataclass(slots=True)
class ChainHead:
    version: int = 0
    last_hash: str = ZERO_HASH


def fail(e: StoredEvent | None, check: str, reason: str) -> ReplayStop:
    if e is None:
        return ReplayStop(Failure(None, None, None, check, reason))
    return ReplayStop(Failure(e.seq, e.stream_id, e.stream_version, check, reason))


def check_chain(e: StoredEvent, head: Head, expected_seq: int | None) -> None:
    """Seq (when `expected_seq` is given), hash over the stored envelope, and the run's
    chain: the version follows `head`'s and the parent hash is its last hash."""
    if expected_seq is not None and e.seq != expected_seq:
        raise fail(e, "seq", GAP.format(expected=expected_seq, seq=e.seq))
    if e.computed_hash() != e.event_hash:
        raise fail(e, "hash", BAD_HASH)
    if e.stream_version != head.version + 1:
        raise fail(
            e, "chain", NOT_CONTIGUOUS.format(version=e.stream_version, previous=head.version)
        )
    if e.parent_hash != head.last_hash:
        raise fail(e, "chain", BAD_PARENT)


def check_event(
    e: StoredEvent, head: Head, expected_seq: int | None, payload_value: Any = None
) -> Event:
    """`check_chain`, then the canonical and payload checks; the parsed event.
    `payload_value`: the payload's JSON value, from a caller that has proven `e.payload` to
    be its canonical bytes already (a bundle line checked whole)."""
    check_chain(e, head, expected_seq)
    if e.actor is not None:
        why = stored_problem(e.actor)
        if why is not None:
            raise fail(e, "canonical", why)
    value = payload_value if payload_value is not None else canonical_value(e)
    try:
        return load_event(e.event_type, e.schema_version, value)
    except ValueError as exc:
        reason = " ".join(str(exc).split())[:300]
        raise fail(e, "payload", f"{e.event_type} payload is invalid: {reason}") from None


def canonical_value(e: StoredEvent) -> Any:
    """The payload's JSON value, once its bytes are proven RFC 8785 canonical (the fast
    check where it can tell, else a parse and the canonicalizer, which names the fault)."""
    value = parse_canonical(e.payload)
    if value is not None:
        return value
    try:
        value = json.loads(e.payload)
    except (ValueError, UnicodeDecodeError):
        raise fail(e, "canonical", "payload is not JSON") from None
    try:
        canonical_bytes = canonical(value, string_keys=True)  # json.loads keys are str
    except InputError as exc:
        raise fail(e, "canonical", f"payload cannot be canonical: {exc.__cause__}") from None
    if canonical_bytes != e.payload:
        raise fail(e, "canonical", "payload bytes are not RFC 8785 canonical")
    return value


class LedgerCheck:
    """`check_event` (or, `chain_only`, `check_chain`) over events in seq order, seq gapless
    from 1 unless `gapless` is False (one run's events), for a reader that walks or moves
    them (`verify --chain`, `db copy`). Memory: one chain head per run."""

    def __init__(self, *, chain_only: bool = False, gapless: bool = True) -> None:
        self.heads: dict[str, ChainHead] = {}
        self._expected = 1 if gapless else None
        self._check = check_chain if chain_only else check_event

    def check(self, e: StoredEvent) -> Event | None:
        """Check the next event and move its run's head past it; returns the parsed event
        (None when `chain_only`). Raises `ReplayStop` with the failure."""
        head = self.heads.get(e.stream_id)
        if head is None:
            head = self.heads[e.stream_id] = ChainHead()
        event = self._check(e, head, self._expected)
        head.version, head.last_hash = e.stream_version, e.event_hash
        if self._expected is not None:
            self._expected += 1
        return event


def check_storage(store: Store, conn, run_id: str | None, check: str, after_seq: int = 0) -> None:
    """The first event (after `after_seq`) stored with a column of another storage type
    than the ledger writes (`ledger.store.checks`): reading it as if it were right would
    hide a rewrite."""
    found = first_mistyped_event(conn, store.dialect, run_id, after_seq)
    if found is not None:
        seq, stream_id, version, column, kind = found
        reason = (
            f"column {column} is stored as {kind}, not {SQLITE_EVENT_TYPES[column]}: "
            "the row was written outside kernel-ledger"
        )
        raise ReplayStop(Failure(seq, stream_id, version, check, reason))


def check_blob_table(store: Store, conn) -> None:
    """Every stored blob has the size and storage type it was stored with and hashes to its
    key."""
    misstated = first_misstated_blob(conn, store.dialect)
    if misstated is not None:
        raise fail(
            None,
            "blobs",
            f"stored blob {misstated}: its size or storage type is not what was stored",
        )
    for digest, content in store.iter_blobs(conn):
        check_blob(digest, content)


def check_blob(digest: str, content: bytes) -> None:
    if sha256_hex(content) != digest:
        raise fail(None, "blobs", f"stored kernel source {digest} does not hash to its key")
