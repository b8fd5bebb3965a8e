"""Verifiable run bundles: one run's events, proven in the ledger's Merkle tree, checkable
offline, and importable into another ledger with the very same event hashes.

A bundle is JSON Lines, every line the RFC 8785 canonical form of one object, in order:

    header   {"type": "header", "format": "kernel-ledger-bundle/1", "origin", "run_id",
              "checkpoint": the (unsigned) note of the whole ledger at export,
              "events": count, "blobs": count,
              "consistency": [{"old_size", "old_root", "proof"}]}   one per stored or
              pinned checkpoint of the ledger, proving it is a prefix of the exported tree
    event    {"type": "event", "seq", "event_id", "stream_id", "stream_version",
              "event_type", "schema_version", "recorded_at", "payload" (the JSON value),
              "parent_hash", "event_hash", "proof", and "actor" (the object) for an event
              that records who appended it}   one per event of the run, in seq order;
              proof: the RFC 6962 inclusion proof of the event hash at leaf seq-1
    blob     {"type": "blob", "sha256", "size", "content" (base64)}   the kernel sources
              and profile files the events name, by sha256

Hashes in proofs are lowercase hex; roots are base64 as in checkpoint notes. Every field of
every line is checked by `check_bundle`, and every line must be canonical, so a changed
byte anywhere makes the bundle fail.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rfc8785

from ledger import files
from ledger.core.actors import stored_problem
from ledger.core.events import ProfileRecorded
from ledger.core.projections import RunView
from ledger.errors import CheckFailed, InputError
from ledger.inputs.jsonio import RUN_ID_RE, display
from ledger.integrity import checkpoint as notes
from ledger.integrity import merkle
from ledger.integrity.audit import b64, leaves_of, origin_for, parse_pinned

# The replay verifier's per-event checks, used as they are: a bundle's run is checked by the
# very code that checks a run in a ledger.
from ledger.integrity.eventchecks import fail
from ledger.integrity.gate import run_kernels
from ledger.integrity.hashing import canonical, parse_canonical, sha256_hex
from ledger.integrity.verify import Failure, ReplayStop, Report, RunReplay
from ledger.store import audit_store
from ledger.store.eventstore import Store, StoredEvent

FORMAT = "kernel-ledger-bundle/1"
CHECKS = (
    "format",
    "hash",
    "chain",
    "canonical",
    "payload",
    "replay",
    "inclusion",
    "consistency",
    "blobs",
)
HEADER_KEYS = frozenset(
    {"type", "format", "origin", "run_id", "checkpoint", "events", "blobs", "consistency"}
)
EVENT_KEYS = frozenset(
    {
        "type",
        "seq",
        "event_id",
        "stream_id",
        "stream_version",
        "event_type",
        "schema_version",
        "recorded_at",
        "payload",
        "parent_hash",
        "event_hash",
        "proof",
    }
)
BLOB_KEYS = frozenset({"type", "sha256", "size", "content"})
CONSISTENCY_KEYS = frozenset({"old_size", "old_root", "proof"})
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]*")


@dataclass(frozen=True)
class ExportResult:
    run_id: str
    path: Path
    events: int
    blobs: int
    tree_size: int
    root: str
    consistency_sizes: list[int]
    bytes: int


def _line(value: dict[str, Any]) -> bytes:
    return canonical(value) + b"\n"


def export_run(
    store: Store,
    run_id: str,
    out: Path,
    *,
    pinned_notes: Sequence[str] = (),
    force: bool = False,
) -> ExportResult:
    """Write run `run_id` as a bundle to `out`, checked like `verify --bundle` before it is
    written. Pinned checkpoints (note texts) get consistency proofs, as do the checkpoints
    stored in the ledger."""
    out = Path(out).absolute()
    files.check_output(out, force=force, protected=store.ledger_files())
    pinned = [parse_pinned(text) for text in pinned_notes]
    with store.transaction() as conn:
        stream = store.read_stream(conn, run_id)
        if not stream:
            raise InputError(f"run {run_id!r} is not in the ledger")
        origin = origin_for(store.ledger_id(conn))
        stored = audit_store.list_checkpoints(conn)
        packed = b"".join(bytes.fromhex(page) for page in store.event_hash_pages(conn))
        leaves = leaves_of(packed)
        if len(leaves) != store.last_seq(conn):  # seqs are unique, from 1: so a gap
            raise CheckFailed("the ledger has a gap in seq: run verify. Nothing was exported")
        wanted = _named_blobs(stream)
        blobs = {d: store.get_blob(conn, d) for d in sorted(wanted)}
    proofs = merkle.ProofBuilder(leaves)
    size = proofs.size
    root = proofs.root(size)
    heads: dict[int, bytes] = {}
    for row in stored:
        if row.origin == origin and row.tree_size <= size:
            found = proofs.root(row.tree_size)
            if b64(found) != row.root_hash:
                raise CheckFailed(
                    f"stored checkpoint #{row.checkpoint_id} (size {row.tree_size}) no longer "
                    "holds: history was rewritten; run verify. Nothing was exported"
                )
            heads[row.tree_size] = found
    for cp in pinned:
        if cp.origin != origin:
            raise InputError(f"--checkpoint is for the log {cp.origin!r}, not this ledger")
        if cp.size > size or proofs.root(cp.size) != cp.root:
            raise CheckFailed(
                f"the pinned checkpoint of size {cp.size} does not hold on this ledger; run "
                "verify --checkpoint. Nothing was exported"
            )
        heads[cp.size] = cp.root
    missing = [d for d, content in blobs.items() if content is None]
    kernels = _kernels(stream)
    if kernels & set(missing):
        raise CheckFailed(
            f"run {run_id!r}: kernel source {sorted(kernels & set(missing))[0]} is not stored; "
            "run verify. Nothing was exported"
        )
    if missing:  # a bundle never leaves out a file its events name
        raise CheckFailed(
            f"run {run_id!r}: profile file {missing[0]} is not stored; run verify. Nothing "
            "was exported"
        )
    present = {d: c for d, c in blobs.items() if c is not None}
    header = {
        "type": "header",
        "format": FORMAT,
        "origin": origin,
        "run_id": run_id,
        "checkpoint": notes.format_note(notes.Checkpoint(origin, size, root)),
        "events": len(stream),
        "blobs": len(present),
        "consistency": [
            {
                "old_size": old,
                "old_root": b64(old_root),
                "proof": [h.hex() for h in proofs.consistency(old, size)],
            }
            for old, old_root in sorted(heads.items())
        ],
    }
    lines = [_line(header)]
    for e in sorted(stream, key=lambda r: r.seq):
        lines.append(
            _line(
                {
                    "type": "event",
                    "seq": e.seq,
                    "event_id": e.event_id,
                    "stream_id": e.stream_id,
                    "stream_version": e.stream_version,
                    "event_type": e.event_type,
                    "schema_version": e.schema_version,
                    "recorded_at": e.recorded_at,
                    "payload": json.loads(e.payload),
                    "parent_hash": e.parent_hash,
                    "event_hash": e.event_hash,
                    "proof": [h.hex() for h in proofs.inclusion(e.seq - 1, size)],
                    **({} if e.actor is None else {"actor": json.loads(e.actor)}),
                }
            )
        )
    for digest, content in sorted(present.items()):
        lines.append(
            _line(
                {
                    "type": "blob",
                    "sha256": digest,
                    "size": len(content),
                    "content": base64.b64encode(content).decode("ascii"),
                }
            )
        )
    report, _ = check_lines(lines)
    if not report.ok:
        f = report.first_failure
        assert f is not None
        raise CheckFailed(
            f"run {run_id!r} does not verify ({f.check}: {f.reason}); nothing was exported"
        )
    data = b"".join(lines)
    out = files.write_output(out, data, force=force, protected=store.ledger_files())
    return ExportResult(
        run_id=run_id,
        path=out,
        events=len(stream),
        blobs=len(present),
        tree_size=size,
        root=b64(root),
        consistency_sizes=sorted(heads),
        bytes=len(data),
    )


def _kernels(stream: Sequence[StoredEvent]) -> set[str]:
    return {sha for _, sha, _ in run_kernels(stream)}


def _named_blobs(stream: Sequence[StoredEvent]) -> set[str]:
    """Kernel sources and profile files the run's events name."""
    out = _kernels(stream)
    for e in stream:
        if e.event_type == "ProfileRecorded":
            profile = e.event()
            assert isinstance(profile, ProfileRecorded)
            out.update(f.sha256 for f in profile.files)
    return out


# --- checking a bundle -------------------------------------------------------------------


@dataclass
class BundleReport(Report):
    """The verifier's report (`failed` records the first failure) with the bundle's checks."""

    checks: dict[str, str] = field(default_factory=lambda: dict.fromkeys(CHECKS, "ok"))
    run_id: str | None = None
    origin: str | None = None
    tree_size: int | None = None
    root: str | None = None
    blobs_checked: int = 0
    pinned: dict[str, Any] | None = None
    heads: dict[int, str] = field(default_factory=dict)  # checkpoints the bundle proves

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": "ok" if self.ok else "failed",
            "run_id": self.run_id,
            "origin": self.origin,
            "tree_size": self.tree_size,
            "root": self.root,
            "events_checked": self.events_checked,
            "runs_checked": 1 if self.events_checked else 0,
            "blobs_checked": self.blobs_checked,
            "checks": dict(self.checks),
            "first_failure": self.first_failure.as_dict() if self.first_failure else None,
            "warnings": list(self.warnings),
            "consistency_sizes": sorted(self.heads),
        }
        if self.pinned is not None:
            out["checkpoint"] = self.pinned
        return out


@dataclass
class BundleContent:
    run_id: str
    records: list[StoredEvent]
    blobs: list[bytes]
    view: RunView | None = None  # the run's projection rows, as the replay folded them


def _bad(check: str, reason: str, e: StoredEvent | None = None) -> ReplayStop:
    return fail(e, check, reason)


def check_bundle(
    path: Path, *, pinned_note: str | None = None, verifier_key: str | None = None
) -> tuple[BundleReport, BundleContent | None]:
    """Check a bundle file offline (no database); the content is returned when it passed."""
    path = Path(path)
    with files.open_input(path, "bundle", limit=files.max_bundle_bytes()) as handle:
        lines = files.bounded_lines(handle, "bundle", display(path))
        return check_lines(lines, pinned_note=pinned_note, verifier_key=verifier_key)


def check_lines(
    lines: Iterable[bytes], *, pinned_note: str | None = None, verifier_key: str | None = None
) -> tuple[BundleReport, BundleContent | None]:
    """Every check of a bundle, over its raw lines (each ending in a newline)."""
    pinned = parse_pinned(pinned_note) if pinned_note is not None else None
    report = BundleReport()
    try:
        content = _check(iter(lines), report)
    except ReplayStop as bad:
        report.failed(bad.failure)
        return report, None
    if pinned is not None:
        report.checks["checkpoint"] = "ok"
        report.pinned = _hold_pinned(report, pinned, pinned_note or "", verifier_key)
        if report.pinned["status"] == "failed":
            report.failed(Failure(None, None, None, "checkpoint", report.pinned["reason"]))
            return report, None
    return report, content


def _check(lines: Iterator[bytes], report: BundleReport) -> BundleContent:
    numbered = _parsed_lines(lines)
    number, header, _ = next(numbered, (1, None, b""))
    if header is None:
        raise _bad("format", "the bundle is empty")
    cp, counts, heads = _header(number, header)
    report.run_id, report.origin = header["run_id"], cp.origin
    report.tree_size, report.root = cp.size, b64(cp.root)
    replay = RunReplay()
    records: list[StoredEvent] = []
    last_seq = 0
    inclusion = merkle.InclusionChecker(cp.size, cp.root)
    known: dict[str, bytes] = {}  # proof hashes already read, as bytes
    for _ in range(counts[0]):
        number, value, body = next(numbered, (number + 1, None, b""))
        if value is None or value.get("type") != "event":
            raise _bad("format", f"line {number}: expected event {len(records) + 1} of {counts[0]}")
        e, proof = _event(number, value, header["run_id"], body, known)
        if e.seq <= last_seq or e.seq > cp.size:
            raise _bad(
                "format",
                f"line {number}: seq {e.seq} is out of order or outside the tree of {cp.size}",
            )
        last_seq = e.seq
        event = replay.check(e, value["payload"])  # its bytes: canonical, as the line is
        if not inclusion.verify(bytes.fromhex(e.event_hash), e.seq - 1, proof):
            raise _bad(
                "inclusion",
                f"the inclusion proof of event seq {e.seq} does not lead to the checkpoint's root",
                e,
            )
        replay.apply(e, event)
        records.append(e)
        report.events_checked += 1
    blobs: dict[str, bytes] = {}
    for _ in range(counts[1]):
        number, value, _ = next(numbered, (number + 1, None, b""))
        if value is None or value.get("type") != "blob":
            raise _bad("format", f"line {number}: expected blob {len(blobs) + 1} of {counts[1]}")
        digest, content = _blob(number, value)
        if blobs and digest <= max(blobs):
            raise _bad("format", f"line {number}: blobs are not in sha256 order")
        blobs[digest] = content
        report.blobs_checked += 1
    extra = next(numbered, None)
    if extra is not None:
        raise _bad("format", f"line {extra[0]}: the header announced no more lines")
    for old_size, old_root, proof in heads:
        if not merkle.verify_consistency(old_size, cp.size, proof, old_root, cp.root):
            raise _bad(
                "consistency",
                f"the consistency proof from size {old_size} does not lead to the checkpoint",
            )
    missing = sorted(replay.kernels - set(blobs))
    if missing:
        raise _bad("blobs", f"kernel source {missing[0]} named by the run is not in the bundle")
    report.warnings = replay.warnings
    report.heads = {old: b64(old_root) for old, old_root, _ in heads}
    return BundleContent(header["run_id"], records, list(blobs.values()), replay.view)


def _parsed_lines(lines: Iterator[bytes]) -> Iterator[tuple[int, dict[str, Any], bytes]]:
    """(line number, JSON object, the line's bytes) of every line, each proven canonical."""
    for number, raw in enumerate(lines, start=1):
        if not raw.endswith(b"\n"):
            raise _bad("format", f"line {number} does not end with a newline (truncated?)")
        body = raw[:-1]
        value = parse_canonical(body)
        if type(value) is dict:
            yield number, value, body
            continue
        try:
            value = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _bad("format", f"line {number} is not a JSON object") from None
        if not isinstance(value, dict):
            raise _bad("format", f"line {number} is not a JSON object")
        try:
            exact = rfc8785.dumps(value) == body
        except (rfc8785.CanonicalizationError, ValueError, TypeError, RecursionError):
            exact = False
        if not exact:
            raise _bad("format", f"line {number} is not in RFC 8785 canonical form")
        yield number, value, body


def _keys(number: int, value: dict[str, Any], keys: frozenset[str], what: str) -> None:
    if set(value) != keys:
        odd = sorted(set(value) ^ keys)
        raise _bad("format", f"line {number}: the {what} has missing or unknown keys {odd}")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _hashes(number: int, values: Any, what: str) -> list[bytes]:
    # one match over the joined hashes once each is a string of 64 characters: an inclusion
    # proof holds ~20 of them and every event line has one
    if (
        not isinstance(values, list)
        or not all(isinstance(v, str) and len(v) == 64 for v in values)
        or not _HEX.fullmatch(joined := "".join(values))
    ):
        raise _bad("format", f"line {number}: {what} must be a list of 64-hex hashes")
    raw = bytes.fromhex(joined)
    return [raw[at : at + 32] for at in range(0, len(raw), 32)]


def _header(
    number: int, header: dict[str, Any]
) -> tuple[notes.Checkpoint, tuple[int, int], list[tuple[int, bytes, list[bytes]]]]:
    if header.get("type") != "header":
        raise _bad("format", f"line {number}: the bundle must start with its header")
    _keys(number, header, HEADER_KEYS, "header")
    if header["format"] != FORMAT:
        raise _bad("format", f"line {number}: format {header['format']!r} is not {FORMAT!r}")
    for key in ("origin", "run_id", "checkpoint"):
        if not isinstance(header[key], str) or not header[key]:
            raise _bad("format", f"line {number}: header.{key} must be a non-empty string")
    try:
        cp, signatures = notes.parse_note(header["checkpoint"])
    except InputError as exc:
        raise _bad("format", f"line {number}: header.checkpoint: {exc.message}") from None
    if signatures or cp.extensions:
        raise _bad("format", f"line {number}: header.checkpoint must be a plain, unsigned note")
    if cp.origin != header["origin"]:
        raise _bad("format", f"line {number}: header.origin differs from the checkpoint's origin")
    if not _int(header["events"]) or header["events"] < 1:
        raise _bad("format", f"line {number}: header.events must be a count of at least 1")
    if not _int(header["blobs"]) or header["blobs"] < 0:
        raise _bad("format", f"line {number}: header.blobs must be a count")
    heads = []
    entries = header["consistency"]
    if not isinstance(entries, list):
        raise _bad("format", f"line {number}: header.consistency must be a list")
    last = -1
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise _bad("format", f"line {number}: header.consistency[{index}] must be an object")
        _keys(number, entry, CONSISTENCY_KEYS, f"consistency entry {index}")
        old = entry["old_size"]
        if not _int(old) or not last < old <= cp.size:
            raise _bad(
                "format",
                f"line {number}: consistency sizes must increase within 0..{cp.size}",
            )
        last = old
        old_root = notes.strict_base64(entry["old_root"])
        if old_root is None or len(old_root) != 32:
            raise _bad("format", f"line {number}: consistency[{index}].old_root is not a root")
        heads.append((old, old_root, _hashes(number, entry["proof"], "a consistency proof")))
    return cp, (header["events"], header["blobs"]), heads


def _proof(number: int, values: Any, known: dict[str, bytes]) -> list[bytes]:
    """An event's inclusion proof as bytes (see `_hashes`); the hashes met on earlier lines
    are taken from `known` (consecutive events share most of their proofs), the others are
    checked and added to it."""
    if type(values) is not list:
        return _hashes(number, values, "proof")
    try:
        out = list(map(known.get, values))
    except TypeError:  # an unhashable value: not a string
        return _hashes(number, values, "proof")
    if None in out:
        for at, value in enumerate(values):
            if out[at] is None:
                if not isinstance(value, str) or not _HEX64.fullmatch(value):
                    raise _bad("format", f"line {number}: proof must be a list of 64-hex hashes")
                out[at] = known[value] = bytes.fromhex(value)
    return out  # type: ignore[return-value]


def _event(
    number: int, value: dict[str, Any], run_id: str, body: bytes, known: dict[str, bytes]
) -> tuple[StoredEvent, list[bytes]]:
    _keys(number, value, EVENT_KEYS | {"actor"} if "actor" in value else EVENT_KEYS, "event")
    for key in ("seq", "stream_version", "schema_version"):
        if not _int(value[key]) or value[key] < 1:
            raise _bad("format", f"line {number}: {key} must be a positive integer")
    for key in ("event_id", "stream_id", "event_type", "recorded_at", "parent_hash"):
        if not isinstance(value[key], str):
            raise _bad("format", f"line {number}: {key} must be a string")
    if not isinstance(value["event_hash"], str) or not _HEX64.fullmatch(value["event_hash"]):
        raise _bad("format", f"line {number}: event_hash must be 64 lowercase hex digits")
    if value["stream_id"] != run_id:
        raise _bad("format", f"line {number}: the event belongs to another run than the header's")
    if not isinstance(value["payload"], dict):
        raise _bad("format", f"line {number}: payload must be a JSON object")
    proof = _proof(number, value["proof"], known)
    actor = None
    if "actor" in value:  # absent for an event from before actors were recorded
        try:
            actor = canonical(value["actor"], string_keys=True).decode()
        except InputError:
            actor = ""
        why = stored_problem(actor) if isinstance(value["actor"], dict) else "not an object"
        if why is not None:
            raise _bad("format", f"line {number}: actor: {why}")
    e = StoredEvent(
        seq=value["seq"],
        event_id=value["event_id"],
        stream_id=value["stream_id"],
        stream_version=value["stream_version"],
        event_type=value["event_type"],
        schema_version=value["schema_version"],
        recorded_at=value["recorded_at"],
        payload=_payload_bytes(body),
        parent_hash=value["parent_hash"],
        event_hash=value["event_hash"],
        actor=actor,
    )
    return e, proof


def _payload_bytes(body: bytes) -> bytes:
    """The payload's canonical bytes, cut from its event line (canonical, so the payload's
    own bytes are in it as they are stored). The line's keys before "payload" hold strings,
    in which `,"` cannot occur unescaped, so the first `,"payload":` is the event's; after it
    come "proof" and keys of strings and integers only, so the last `,"proof":[` ends the
    payload. A cut in the wrong place could only fail the event's hash check, never pass it.
    """
    return body[body.index(b',"payload":') + 11 : body.rindex(b',"proof":[')]


def _blob(number: int, value: dict[str, Any]) -> tuple[str, bytes]:
    _keys(number, value, BLOB_KEYS, "blob")
    digest, size, text = value["sha256"], value["size"], value["content"]
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise _bad("format", f"line {number}: blob sha256 must be 64 lowercase hex digits")
    if not _int(size) or size < 0 or not isinstance(text, str):
        raise _bad("format", f"line {number}: blob size and content are malformed")
    content = notes.strict_base64(text)
    if content is None or len(content) != size:
        raise _bad("format", f"line {number}: blob content is not canonical base64 of its size")
    if sha256_hex(content) != digest:
        raise _bad("blobs", f"blob {digest} does not hash to its sha256 (line {number})")
    return digest, content


def _hold_pinned(
    report: BundleReport, cp: notes.Checkpoint, note: str, verifier_key: str | None
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "source": "pinned",
        "origin": cp.origin,
        "size": cp.size,
        "root": b64(cp.root),
        "status": "ok",
        "reason": None,
        "signature": "not checked",
    }
    if verifier_key is not None:
        good = notes.verify_signature(note, verifier_key)
        result["signature"] = "ok" if good else "failed"
        if not good:
            result["status"] = "failed"
            result["reason"] = "the checkpoint carries no valid signature by the given key"
            return result
    assert report.tree_size is not None and report.root is not None
    known = {**report.heads, report.tree_size: report.root}
    if cp.origin != report.origin:
        reason = (
            f"the checkpoint is for the log {cp.origin!r}, not the bundle's ({report.origin!r})"
        )
    elif cp.size > report.tree_size:
        reason = (
            f"the bundle was exported when its ledger held {report.tree_size} events, before "
            f"the checkpoint of {cp.size}; export it again"
        )
    elif cp.size not in known:
        reason = (
            f"the bundle carries no proof for a checkpoint of size {cp.size}; export it with "
            "--checkpoint"
        )
    elif known[cp.size] != b64(cp.root):
        reason = (
            f"the bundle's tree of the first {cp.size} events has another root than the "
            f"checkpoint: history at or before event {cp.size} was rewritten"
        )
    else:
        return result
    result["status"], result["reason"] = "failed", reason
    return result


# --- importing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportResult:
    run_id: str
    origin: str
    events_in_bundle: int
    events_imported: int
    first_seq: int | None
    last_seq: int | None


def import_bundle(
    store: Store,
    path: Path,
    *,
    pinned_note: str | None = None,
    verifier_key: str | None = None,
) -> ImportResult:
    """Check a bundle (against a pinned checkpoint note when one is given), then append its
    run to this ledger verbatim (see `audit_store.import_run_verbatim`): nothing is written
    unless everything checks. Its run id must follow the run id pattern."""
    return import_bundles(store, [path], pinned_note=pinned_note, verifier_key=verifier_key)[0]


def import_bundles(
    store: Store,
    paths: Sequence[Path],
    *,
    pinned_note: str | None = None,
    verifier_key: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[ImportResult]:
    """`import_bundle` of each bundle in the order given, all in one transaction: every
    bundle is imported, or (one refused) none is, and the refusal names that bundle. The
    ledger's write lock is taken once the first bundle has checked. `on_progress(bundles
    written, bundles)` is told after each bundle."""
    results = []
    with ExitStack() as stack:
        conn = None
        for path in map(Path, paths):
            origin, content = _checked_to_import(path, pinned_note, verifier_key)
            if conn is None:
                conn = stack.enter_context(store.transaction(write=True))
            results.append(_append(store, conn, origin, content))
            if on_progress is not None:
                on_progress(len(results), len(paths))
    return results


def _checked_to_import(
    path: Path, pinned_note: str | None, verifier_key: str | None
) -> tuple[str, BundleContent]:
    """The bundle's origin and content, checked like `verify --bundle`; else InputError."""
    report, content = check_bundle(path, pinned_note=pinned_note, verifier_key=verifier_key)
    if content is None:
        f = report.first_failure
        assert f is not None
        raise InputError(
            f"bundle {display(path)} does not verify ({f.check}: {f.reason}); nothing was imported"
        )
    if not RUN_ID_RE.fullmatch(content.run_id):
        raise InputError(
            f"bundle {display(path)} holds run {display(content.run_id)!r}, which is not a run "
            f"id (ids match {RUN_ID_RE.pattern}); nothing was imported"
        )
    return str(report.origin), content


def _append(store: Store, conn: Any, origin: str, content: BundleContent) -> ImportResult:
    outcome = audit_store.import_run_verbatim(
        store, conn, content.run_id, content.records, content.blobs, content.view
    )
    seqs = [e.seq for e in outcome.imported]
    return ImportResult(
        run_id=content.run_id,
        origin=origin,
        events_in_bundle=len(content.records),
        events_imported=len(outcome.imported),
        first_seq=seqs[0] if seqs else None,
        last_seq=seqs[-1] if seqs else None,
    )
