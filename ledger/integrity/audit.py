"""The audit layer over the replay verifier: checkpoints, pinned and stored, and the
evidence files the events name.

    checkpoint     verify the whole ledger, then print and store a C2SP checkpoint note
                   (origin "kernel-ledger/<ledger id>", size, base64 RFC 6962 root)
    verify         `verify.verify_ledger` plus, in the same pass, the Merkle tree of
                   the event hashes: every stored checkpoint and a pinned one must still hold
    verify --since from a checkpoint note on: the first N events by Merkle consistency
                   with today's tree (their stored hashes, not their content), then every
                   check on the runs with an event after N, each replayed whole
    --artifacts    files named by the events still hash to their recorded digests; reported
                   apart from the ledger's own checks

A checkpoint pinned outside the database (a pull request, a git tag, CI configuration)
is what makes a rewrite of the database detectable: the per-event checks cannot tell a
consistent rewrite (every later hash recomputed) from the real history.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ledger import files
from ledger.errors import CheckFailed, InputError
from ledger.inputs.jsonio import display, read_bytes
from ledger.integrity import checkpoint as notes
from ledger.integrity import merkle
from ledger.integrity import verify as replay
from ledger.integrity.eventchecks import CHECKS
from ledger.integrity.verify import Failure, Report, verify_ledger
from ledger.store import audit_store
from ledger.store.eventstore import Store, StoredEvent

ORIGIN_PREFIX = "kernel-ledger/"
MAX_NOTE_BYTES = 64 * 1024
# Payload keys that hold a user's document verbatim: what looks like a file reference
# inside them is the user's text, not a file the ledger hashed.
VERBATIM_KEYS = frozenset({"config_document", "result_document"})


def origin_for(ledger_id: str) -> str:
    """The checkpoint origin line of a ledger.

    >>> origin_for("2f1c")
    'kernel-ledger/2f1c'
    """
    return ORIGIN_PREFIX + ledger_id


def ledger_origin(store: Store) -> str:
    with store.transaction() as conn:
        return origin_for(store.ledger_id(conn))


def b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode("ascii")


# --- reading notes and keys from the command line ----------------------------------------


def read_note_arg(value: str, flag: str = "--checkpoint") -> str:
    """A checkpoint note given as a file name or as the note text itself.

    A note pasted through `$(cat note)` loses its final newline; it is put back."""
    if not value or not value.strip():
        raise InputError(f"{flag} needs a checkpoint note or a file holding one")
    text = _file_text(value, flag) if "\n" not in value.strip("\n") else value
    if text is None:
        raise InputError(
            f"{flag} {display(value)} is neither a file nor a checkpoint note (a note has "
            "three lines: origin, size, root)"
        )
    return text if text.endswith("\n") else text + "\n"


def read_key_arg(value: str, flag: str) -> str:
    """A signer or verifier key given as a file name or as the key text itself."""
    if not value or not value.strip():
        raise InputError(f"{flag} needs a key or a file holding one")
    # Every key holds a '+': a value without one names a file, and a missing file is
    # reported as missing rather than parsed as a malformed key.
    text = _file_text(value, flag, must_be_file="+" not in value)
    return (text if text is not None else value).strip()


def _file_text(value: str, flag: str, *, must_be_file: bool = False) -> str | None:
    """The text of the file `value` names; None when it names no file (the value is then
    the note or key itself), unless `must_be_file`: then what is wrong with the path."""
    try:
        path = Path(value).expanduser()
    except RuntimeError:  # ~name of an unknown user
        if not must_be_file:
            return None
        raise InputError(
            f"{flag} file {display(value)} names a home folder that does not exist"
        ) from None
    try:
        is_file = path.is_file()
    except OSError:
        is_file = False
    if not is_file and not must_be_file:
        return None
    data = read_bytes(path, f"{flag} file")  # one line on what is wrong with a path
    if len(data) > MAX_NOTE_BYTES:
        raise InputError(f"{flag} file {display(path)} is larger than {MAX_NOTE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{flag} file {display(path)} is not UTF-8 text") from None


def parse_pinned(text: str, flag: str = "--checkpoint") -> notes.Checkpoint:
    try:
        cp, _ = notes.parse_note(text)
    except InputError as exc:
        raise InputError(f"{flag}: {exc.message}") from None
    return cp


# --- the tree of event hashes ------------------------------------------------------------


def stored_tree(store: Store, conn: Any) -> merkle.TreeBuilder:
    """The Merkle tree of every stored event hash in seq order (what a checkpoint pins)."""
    tree = merkle.TreeBuilder()
    for page in store.event_hash_pages(conn):
        tree.extend_hashes(bytes.fromhex(page))
    return tree


class TreeWatch:
    """Feeds verified events into a streaming Merkle tree and keeps the root, and the
    frontier a consistency proof starts from, at each size some checkpoint asks about."""

    def __init__(self, sizes: set[int]) -> None:
        self.builder = merkle.TreeBuilder()
        self.wanted = set(sizes)
        self.roots: dict[int, bytes] = {}
        self.frontiers: dict[int, tuple[bytes, ...]] = {}
        self._mark()

    def observe(self, e: StoredEvent) -> None:
        self.builder.append(bytes.fromhex(e.event_hash))
        if self.builder.size in self.wanted:
            self._mark()

    def extend(self, packed: bytes) -> None:
        """Many leaves at once, packed 32 bytes each (`merkle.TreeBuilder.extend_hashes`),
        stopping at each wanted size on the way."""
        builder, width = self.builder, merkle.HASH_SIZE
        start = 0
        for mark in sorted(n for n in self.wanted if n > builder.size):
            end = start + (mark - builder.size) * width
            if end > len(packed):
                break
            builder.extend_hashes(packed[start:end])
            self._mark()
            start = end
        builder.extend_hashes(packed[start:])

    def _mark(self) -> None:
        if self.builder.size in self.wanted:
            self.roots[self.builder.size] = self.builder.root()
            self.frontiers[self.builder.size] = self.builder.frontier()


@dataclass
class CheckpointResult:
    """One checkpoint held against the ledger: a pinned one or one stored in it."""

    source: str  # "pinned" or "stored #<id>"
    origin: str
    size: int
    root: str  # base64
    status: str = "not run"  # ok, failed, not run
    reason: str | None = None
    signature: str = "not checked"  # ok, failed, not checked

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def hold(result: CheckpointResult, cp: notes.Checkpoint, origin: str, watch: TreeWatch) -> None:
    """Judge one checkpoint against the roots the tree watch recorded (total: its size)."""
    total = watch.builder.size
    if cp.origin != origin:
        result.status = "failed"
        result.reason = f"the checkpoint is for the log {cp.origin!r}, not this ledger ({origin!r})"
    elif cp.size in watch.roots:
        found = watch.roots[cp.size]
        if found == cp.root:
            result.status, result.reason = "ok", None
        else:
            result.status = "failed"
            result.reason = (
                f"the first {cp.size} events have the root {b64(found)}, but the checkpoint "
                f"pins {b64(cp.root)}: history at or before event {cp.size} was rewritten"
            )
    else:
        result.status = "failed"
        result.reason = (
            f"the ledger holds {total} events, fewer than the {cp.size} the checkpoint pins: "
            "events were removed (or the checkpoint is from another copy of this ledger)"
        )


# --- artifacts: the files the events name ------------------------------------------------


@dataclass(frozen=True)
class FileMention:
    path: str
    sha256: str
    seq: int
    stream_id: str
    event_type: str
    field: str


def file_mentions(e: StoredEvent) -> Iterator[FileMention]:
    """Every file reference ({path, sha256, size}) in an event's payload, outside the
    verbatim user documents."""
    stack: list[tuple[Any, str]] = [(e.payload_value(), "")]
    while stack:
        value, where = stack.pop()
        if isinstance(value, dict):
            if _is_file_ref(value):
                yield FileMention(
                    value["path"], value["sha256"], e.seq, e.stream_id, e.event_type, where
                )
                continue
            for key, item in value.items():
                if key in VERBATIM_KEYS and not where:
                    continue
                stack.append((item, f"{where}.{key}" if where else key))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))


_FILE_REF_KEYS = {"path", "sha256", "size"}
_FILE_REF_OPTIONAL = {"resolved_path", "written_path"}  # symlink target; path as written


def _is_file_ref(value: dict[str, Any]) -> bool:
    return (
        _FILE_REF_KEYS <= value.keys() <= _FILE_REF_KEYS | _FILE_REF_OPTIONAL
        and isinstance(value["path"], str)
        and isinstance(value["sha256"], str)
        and len(value["sha256"]) == 64
    )


@dataclass
class ArtifactReport:
    checked: int = 0
    changed: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.changed and not self.missing

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "failed",
            "checked": self.checked,
            "changed": self.changed,
            "missing": self.missing,
        }

    def sentences(self) -> list[str]:
        out = []
        for item in self.changed:
            out.append(
                f"{item['path']} ({item['field']} of {item['event_type']} at seq {item['seq']}) "
                f"changed since it was recorded: sha256 {item['found_sha256'][:12]}… is not the "
                f"recorded {item['sha256'][:12]}…" + _restorable(item)
            )
        for item in self.missing:
            out.append(
                f"{item['path']} ({item['field']} of {item['event_type']} at seq {item['seq']}) "
                f"{item['problem']}" + _restorable(item)
            )
        return out


def _restorable(item: dict[str, Any]) -> str:
    if not item.get("stored_in_ledger"):
        return ""
    return "; its content is stored in the ledger (kernel-ledger checkout)"


def check_artifacts(store: Store, run_id: str | None = None) -> ArtifactReport:
    """Hash every file the events (of one run, or all) name, once per (path, sha256)."""
    report = ArtifactReport()
    seen: set[tuple[str, str]] = set()
    with store.transaction() as conn:
        for e in store.iter_events(conn, stream_id=run_id):
            try:
                mentions = list(file_mentions(e))
            except ValueError:
                continue  # an unreadable payload is the verifier's finding, not this one's
            for mention in mentions:
                key = (mention.path, mention.sha256)
                if key in seen:
                    continue
                seen.add(key)
                report.checked += 1
                problem, found = _file_state(Path(mention.path), mention.sha256)
                if problem is None:
                    continue
                item = {
                    "path": mention.path,
                    "sha256": mention.sha256,
                    "seq": mention.seq,
                    "stream_id": mention.stream_id,
                    "event_type": mention.event_type,
                    "field": mention.field,
                    "stored_in_ledger": store.get_blob(conn, mention.sha256) is not None,
                }
                if found is not None:
                    report.changed.append({**item, "found_sha256": found})
                else:
                    report.missing.append({**item, "problem": problem})
    return report


def _file_state(path: Path, expected: str) -> tuple[str | None, str | None]:
    """(problem, found sha256): (None, None) when the file holds what was recorded."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return "no longer exists", None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})", None
    if not stat.S_ISREG(info.st_mode):
        return "is no longer a regular file", None
    try:
        found = _sha256_file(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})", None
    return (None, None) if found == expected else ("changed", found)


# --- verify ------------------------------------------------------------------------------


@dataclass
class AuditReport:
    """The verifier's report, with the checkpoint and artifact results beside it."""

    ledger: Report
    origin: str
    stored: list[CheckpointResult] = field(default_factory=list)
    pinned: CheckpointResult | None = None
    artifacts: ArtifactReport | None = None
    since: CheckpointResult | None = None

    @property
    def chain_ok(self) -> bool:
        return self.ledger.ok

    @property
    def ok(self) -> bool:
        return self.first_failure is None and (self.artifacts is None or self.artifacts.ok)

    @property
    def checkpoint_failure(self) -> Failure | None:
        candidates = [(self.pinned, "checkpoint"), *((s, "checkpoints") for s in self.stored)]
        for result, check in candidates:
            if result is not None and result.status == "failed":
                if check == "checkpoint":
                    where = "the pinned checkpoint"
                else:
                    where = f"stored checkpoint {result.source.removeprefix('stored ')}"
                return Failure(None, None, None, check, f"{where}: {result.reason}")
        return None

    @property
    def first_failure(self) -> Failure | None:
        return self.ledger.first_failure or self.checkpoint_failure

    def checks(self) -> dict[str, str]:
        checks = dict(self.ledger.checks)
        checks["checkpoints"] = _summary([s.status for s in self.stored])
        if self.pinned is not None:
            checks["checkpoint"] = self.pinned.status
        return checks

    def as_dict(self) -> dict[str, Any]:
        failure = self.first_failure
        out: dict[str, Any] = {
            "status": "ok" if self.ok else "failed",
            "events_checked": self.ledger.events_checked,
            "runs_checked": self.ledger.runs_checked,
            "events_without_actor": self.ledger.without_actor,
            "checks": self.checks(),
            "first_failure": failure.as_dict() if failure else None,
            "warnings": list(self.ledger.warnings),
            "origin": self.origin,
            "checkpoints_checked": len(self.stored),
        }
        if self.pinned is not None:
            out["checkpoint"] = self.pinned.as_dict()
        if self.since is not None:
            out["since"] = self.since.as_dict()
        if self.artifacts is not None:
            out["artifacts"] = self.artifacts.as_dict()
        return out


def _summary(statuses: list[str]) -> str:
    if "failed" in statuses:
        return "failed"
    if "not run" in statuses:
        return "not run"
    return "ok"


def verify(
    store: Store,
    run_id: str | None = None,
    *,
    pinned_note: str | None = None,
    verifier_key: str | None = None,
    artifacts: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Every check of `verify_ledger`, every stored checkpoint, the pinned one (if given)
    and, with `artifacts`, the files the events name.

    For the whole ledger the Merkle tree is fed by the verifier in the same pass, from the
    events that passed their checks; for one run it is built from the stored event hashes
    (only that run's content is checked against its hashes)."""
    pinned_cp = parse_pinned(pinned_note) if pinned_note is not None else None
    with store.transaction() as conn:
        origin = origin_for(store.ledger_id(conn))
        stored = audit_store.list_checkpoints(conn)
    parsed = [(row, _stored_note(row)) for row in stored]
    sizes = {cp.size for _, cp in parsed if cp is not None}
    if pinned_cp is not None:
        sizes.add(pinned_cp.size)
    watch = TreeWatch(sizes)
    if run_id is None:
        report = verify_ledger(store, on_progress=on_progress, observe=watch.observe)
        complete = report.ok or report.checks.get("projection") != "not run"
    else:
        report = verify_ledger(store, run_id, on_progress=on_progress)
        with store.transaction() as conn:
            for page in store.event_hash_pages(conn):
                watch.extend(bytes.fromhex(page))
        complete = True
    audit = AuditReport(ledger=report, origin=origin)
    audit.stored = _held_stored(parsed, origin, watch, complete)
    if pinned_cp is not None:
        result = CheckpointResult("pinned", pinned_cp.origin, pinned_cp.size, b64(pinned_cp.root))
        if complete or pinned_cp.size in watch.roots or pinned_cp.origin != origin:
            hold(result, pinned_cp, origin, watch)
        if verifier_key is not None:
            good = notes.verify_signature(pinned_note or "", verifier_key)
            result.signature = "ok" if good else "failed"
            if not good and result.status != "failed":
                result.status = "failed"
                result.reason = "the checkpoint carries no valid signature by the given key"
        audit.pinned = result
    if artifacts:
        audit.artifacts = check_artifacts(store, run_id)
    return audit


def _held_stored(
    parsed: list[tuple[audit_store.StoredCheckpoint, notes.Checkpoint | None]],
    origin: str,
    watch: TreeWatch,
    complete: bool,
) -> list[CheckpointResult]:
    """Each stored checkpoint held against the tree (`complete`: every event was seen)."""
    results = []
    for row, cp in parsed:
        result = CheckpointResult(
            f"stored #{row.checkpoint_id}", row.origin, row.tree_size, row.root_hash
        )
        if cp is None:
            result.status = "failed"
            result.reason = "the stored note does not parse or disagrees with its own row"
        elif complete or cp.size in watch.roots or cp.origin != origin:
            hold(result, cp, origin, watch)
        results.append(result)
    return results


def verify_since(store: Store, note: str, verifier_key: str | None = None) -> AuditReport:
    """Verify from the checkpoint `note` on (`verify --since`): the note must parse, be this
    ledger's and (with `verifier_key`) carry a valid signature by it, else InputError. Then
    the first N events it covers must be a prefix of today's tree (a Merkle consistency
    proof from N to today's size, over the stored event hashes: their content is not read),
    and every check of `verify` holds on the runs with an event after N, each replayed whole;
    every stored checkpoint is held against today's tree."""
    cp = parse_pinned(note, "--since")
    if verifier_key is not None and not notes.verify_signature(note, verifier_key):
        raise InputError("--since: the note carries no valid signature by the given --verifier-key")
    with store.transaction() as conn:
        origin = origin_for(store.ledger_id(conn))
        if cp.origin != origin:
            raise InputError(
                f"--since: the note is for the log {cp.origin!r}, not this ledger ({origin!r})"
            )
        parsed = [(row, _stored_note(row)) for row in audit_store.list_checkpoints(conn)]
        watch = TreeWatch({cp.size, *(c.size for _, c in parsed if c is not None)})
        new_leaves: list[bytes] = []  # the leaves after the note's
        for page in store.event_hash_pages(conn):
            packed = bytes.fromhex(page)
            new_leaves += leaves_of(
                packed[max(0, cp.size - watch.builder.size) * merkle.HASH_SIZE :]
            )
            watch.extend(packed)
        size = watch.builder.size
        since = CheckpointResult("since", cp.origin, cp.size, b64(cp.root), status="ok")
        if verifier_key is not None:
            since.signature = "ok"
        reason = None
        if size < cp.size:
            reason = (
                f"the ledger holds {size} events, fewer than the {cp.size} the note covers: "
                "events were removed (or the note is from another copy of this ledger)"
            )
        else:
            proof = merkle.consistency_from(cp.size, watch.frontiers[cp.size], new_leaves)
            if not merkle.verify_consistency(cp.size, size, proof, cp.root, watch.builder.root()):
                reason = (
                    f"today's tree of {size} events is not consistent with the note's tree of "
                    f"the first {cp.size} ({b64(cp.root)}): history at or before event "
                    f"{cp.size} was rewritten"
                )
        if reason is None:
            report = replay.verify_since(store, conn, cp.size)
        else:
            since.status, since.reason = "failed", reason
            report = Report(checks=dict.fromkeys(("consistency", *CHECKS), "ok"))
            report.failed(Failure(None, None, None, "consistency", reason))
    report.checks = {"consistency": since.status, **report.checks}
    audit = AuditReport(ledger=report, origin=origin, since=since)
    audit.stored = _held_stored(parsed, origin, watch, True)
    return audit


def leaves_of(packed: bytes) -> list[bytes]:
    """Packed event hashes as a list of leaves (32 bytes each)."""
    width = merkle.HASH_SIZE
    return [packed[i : i + width] for i in range(0, len(packed), width)]


def _stored_note(row: audit_store.StoredCheckpoint) -> notes.Checkpoint | None:
    try:
        cp, _ = notes.parse_note(row.note)
    except InputError:
        return None
    if (cp.origin, cp.size, b64(cp.root)) != (row.origin, row.tree_size, row.root_hash):
        return None
    return cp


# --- making a checkpoint -----------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointMade:
    checkpoint: notes.Checkpoint
    note: str
    signed: bool
    stored: bool
    checkpoint_id: int
    verifier_key: str | None


def make_checkpoint(
    store: Store,
    *,
    signer_key: str | None = None,
    clock: Callable[[], str],
    on_progress: Callable[[int, int], None] | None = None,
    before_storing: Callable[[str], None] | None = None,
) -> CheckpointMade:
    """Verify the whole ledger, then store and return its checkpoint note; `before_storing`
    sees the note first and may refuse it (an output that cannot take it).

    A ledger that does not verify gets no checkpoint: pinning it would vouch for a
    history already known to be wrong."""
    verifier = notes.verifier_key_for(signer_key) if signer_key is not None else None
    with store.transaction() as conn:
        origin = origin_for(store.ledger_id(conn))
    watch = TreeWatch(set())
    report = verify_ledger(store, on_progress=on_progress, observe=watch.observe)
    if not report.ok:
        f = report.first_failure
        assert f is not None
        where = f"seq {f.seq}" if f.seq is not None else "the ledger"
        raise CheckFailed(
            f"the ledger does not verify ({where}: {f.check}: {f.reason}); no checkpoint was made"
        )
    cp = notes.Checkpoint(origin, watch.builder.size, watch.builder.root())
    note = notes.sign(cp, signer_key) if signer_key is not None else notes.format_note(cp)
    if before_storing is not None:
        before_storing(note)
    with store.transaction(write=True) as conn:
        row, new = audit_store.save_checkpoint(
            conn,
            origin=origin,
            tree_size=cp.size,
            root_hash=b64(cp.root),
            note=note,
            signed=signer_key is not None,
            created_at=clock(),
        )
    return CheckpointMade(cp, note, signer_key is not None, new, row.checkpoint_id, verifier)


def generate_key(path: Path, name: str, protected: Sequence[Path] = ()) -> str:
    """Write a new Ed25519 signer key to `path` (readable by its owner only) and return the
    verifier key that goes with it. An existing file is never overwritten."""
    signer, verifier = notes.generate_signing_key(name)
    if os.path.lexists(path):
        raise InputError(f"{display(path)} exists already; a key file is never overwritten")
    files.write_output(
        path, (signer + "\n").encode(), what="--generate-key", protected=protected, mode=0o600
    )
    return verifier


def _sha256_file(path: Path) -> str:
    """The hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
