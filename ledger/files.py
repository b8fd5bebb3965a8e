"""Reading the files users hand in and writing the files commands produce, safely.

Every input goes through `open_input`/`read_input`: a regular file only (a FIFO, device or
socket is refused without being waited on: it is opened non-blocking and checked with
fstat on the very descriptor that is read), never a SQLite database (the ledger named as an
input is refused as the ledger), and never more than its size limit.

Every output goes through `write_output` (or `check_output` and `StagedOutput` when the
bytes are known only after a check that must come first, as in `analyze`), under the rules
docs/reliability.md lists ("Output files"): never a ledger or its `-wal`/`-shm`/`-journal`
files (`guard_ledger` registers every SQLite ledger this process opens; checked when the
output is checked, staged, and once more before the rename), links followed only within
their folder, an existing file replaced only with `--force`, written through a flushed
temporary file renamed (or, without `--force`, linked) into place. A path that cannot name
a file is exit 2; a folder that cannot take it is exit 4, for every writer.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from ledger.errors import InputError, LedgerError, StoreUnavailable
from ledger.text import display

__all__ = [
    "StagedOutput",
    "bounded_lines",
    "check_output",
    "check_output_folder",
    "env_bytes",
    "guard_ledger",
    "ledger_companions",
    "max_bundle_bytes",
    "max_input_bytes",
    "open_input",
    "read_input",
    "refuse_ledger",
    "same_bytes",
    "write_failure",
    "write_output",
]

DEFAULT_MAX_INPUT_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_BUNDLE_BYTES = 16 * 1024**3
"""A bundle holds a whole run with its kernels and profiles; `KERNEL_LEDGER_MAX_BUNDLE_BYTES`
overrides the limit. A single line of it may hold one blob: `bounded_lines` allows a line
the size of a base64-encoded input file at the input limit, plus room for its keys."""

_NOT_A_FILE_NAME = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR, errno.ENAMETOOLONG, errno.ENOENT}
_COMPANION_SUFFIXES = ("-wal", "-shm", "-journal")


def ledger_companions(path: Path) -> tuple[Path, ...]:
    """A SQLite ledger file and the files SQLite keeps beside it."""
    return (path, *(Path(f"{path}{suffix}") for suffix in _COMPANION_SUFFIXES))


_GUARDED: dict[Path, None] = {}
"""The SQLite ledgers this process opened, in the order it opened them."""


def guard_ledger(path: Path) -> None:
    """From now on, no output this process writes may be the ledger `path` or one of its
    files. The store calls it for every SQLite ledger it opens (or creates)."""
    _GUARDED[Path(os.path.abspath(path))] = None


def _ledger_identities(ledgers: Iterable[Path]) -> tuple[set[Path], set[tuple[int, int]]]:
    """The names (symbolic links resolved) and the (device, inode) of every file of the
    ledgers, taken now: a `-wal` made since the ledger was opened counts too."""
    names: set[Path] = set()
    identities: set[tuple[int, int]] = set()
    for ledger in ledgers:
        for file in ledger_companions(Path(ledger)):
            names.add(Path(os.path.abspath(file)))
            with contextlib.suppress(OSError, ValueError):
                names.add(Path(os.path.realpath(file)))
            identity = _identity(file)
            if identity is not None:
                identities.add(identity)
    return names, identities


def refuse_ledger(path: Path, *, what: str = "--out", protected: Iterable[Path] = ()) -> None:
    """The one guard of every write: `InputError` if `path`, or the file it resolves to
    (through symbolic links, or as a hard link: the same device and inode), is one of the
    files of a ledger this process opened or of `protected`."""
    path = Path(os.path.abspath(path))
    names, identities = _ledger_identities([*_GUARDED, *protected])
    if not names:
        return
    try:
        real = Path(os.path.realpath(path))
    except (OSError, ValueError):
        real = path
    if path in names or real in names or _identity(path) in identities:
        raise InputError(
            f"{what} {display(path)} is the ledger or one of its files; writing there would "
            "destroy the ledger: choose another path"
        )


MAX_LIMIT_BYTES = 2**50
"""The largest size limit the environment may set (1 PiB): more is no limit at all."""


def env_bytes(name: str, default: int) -> int:
    """A size limit in bytes from the environment variable `name`, else `default`."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    text = raw.strip()
    if len(text) > 20 or not text.lstrip("+-").isdigit():
        raise InputError(f"{name} must be a whole number of bytes from 1 to {MAX_LIMIT_BYTES}")
    value = int(text)
    if not 1 <= value <= MAX_LIMIT_BYTES:
        raise InputError(f"{name} must be a whole number of bytes from 1 to {MAX_LIMIT_BYTES}")
    return value


def max_input_bytes() -> int:
    """The size limit for any input file; `KERNEL_LEDGER_MAX_INPUT_BYTES` overrides it."""
    return env_bytes("KERNEL_LEDGER_MAX_INPUT_BYTES", DEFAULT_MAX_INPUT_BYTES)


def max_bundle_bytes() -> int:
    """The size limit for a bundle; `KERNEL_LEDGER_MAX_BUNDLE_BYTES` overrides it."""
    return env_bytes("KERNEL_LEDGER_MAX_BUNDLE_BYTES", DEFAULT_MAX_BUNDLE_BYTES)


# --- reading -------------------------------------------------------------------------------


def open_input(
    path: Path, what: str, *, limit: int | None = None, refuse_database: bool = True
) -> BinaryIO:
    """An open binary handle on the regular file `path`, refused (one-line `InputError`)
    when it is missing, a folder, not a regular file, a SQLite database (the ledger above
    all: `_refuse_database`), or over `limit` bytes (default: the input limit). The open
    never blocks: a FIFO is opened non-blocking and refused."""
    path = Path(path)
    shown = display(path)
    limit = max_input_bytes() if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise InputError(f"{what} {shown} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{what} {shown} is a directory, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{what} {shown} does not exist (a loop of symbolic links)") from None
        raise InputError(f"{what} {shown} cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # a NUL in the name
        raise InputError(f"{what} {shown} cannot be read: {exc}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError(f"{what} {shown} is a directory, not a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{what} {shown} is not a regular file")
        if refuse_database:
            _refuse_database(fd, info, what, shown)
        if info.st_size > limit:
            raise InputError(f"{what} {shown} is {info.st_size} bytes, over the {limit}-byte limit")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

_EXPECTED = {
    "config file": ("a run configuration", "config"),
    "round result": ("a round result", "round"),
    "validation manifest": ("a validation manifest", "manifest"),
    "case matrix": ("a case matrix", "case-matrix"),
    "measurements file": ("an A/A remeasure", "measurements"),
    "decide input": ("a decide input", "decide"),
    "profile file": ("profiler output", None),
    "samples file": ("a samples file", None),
    "bundle": ("a bundle (`export` writes one)", None),
}
"""What each input should be (by the name its reader gives it), and the template kind
that prints one."""


def _refuse_database(fd: int, info: os.stat_result, what: str, shown: str) -> None:
    """No input file is ever a SQLite database: the ledger named where an input was meant
    (`plan --config l.sqlite3`) is said to be the ledger, not "not UTF-8 text" or "not
    valid JSON". The ledger is recognised as the same file (through symbolic or hard links)
    as one this process opened or is about to open (`guard_ledger`), any other database by
    its 16-byte header."""
    if what.endswith(("kernel", "candidate", ".path")):
        expected, kind = "a kernel source file", None
    else:
        expected, kind = _EXPECTED.get(what, (f"a {what}" if what[:1].isalpha() else "", None))
    tail = f", not {expected}" if expected else ""
    if kind is not None:
        tail += f": pass the JSON file `template {kind}` prints"
    identity = (info.st_dev, info.st_ino)
    if _GUARDED and identity in _ledger_identities(_GUARDED)[1]:
        main = identity in {_identity(ledger) for ledger in _GUARDED}
        which = "the ledger" if main else "a file of the ledger"
        raise InputError(f"{what} {shown} is {which} (--db){tail}")
    try:
        header = os.pread(fd, len(SQLITE_HEADER), 0) if info.st_size >= 16 else b""
    except OSError:
        return  # unreadable here: the read itself says so
    if header == SQLITE_HEADER:
        raise InputError(f"{what} {shown} is a SQLite database{tail}")


def read_input(path: Path, what: str, *, limit: int | None = None) -> bytes:
    """The bytes of the regular file `path` (see `open_input`); a file that grows past the
    limit while it is read is refused too."""
    limit = max_input_bytes() if limit is None else limit
    shown = display(path)
    with open_input(path, what, limit=limit) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise InputError(f"{what} {shown} cannot be read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{what} {shown} is over the {limit}-byte limit")
    return data


def bounded_lines(handle: BinaryIO, what: str, shown: str) -> Iterator[bytes]:
    """The lines of `handle`, none longer than a blob line of an input-sized file can be."""
    line_limit = (max_input_bytes() + 2) // 3 * 4 + 64 * 1024
    while True:
        try:
            line = handle.readline(line_limit + 1)
        except OSError as exc:
            raise InputError(f"{what} {shown} cannot be read: {exc.strerror or exc}") from None
        if not line:
            return
        if len(line) > line_limit:
            raise InputError(f"{what} {shown} has a line over the {line_limit}-byte limit")
        yield line


# --- writing -------------------------------------------------------------------------------


def write_failure(message: str, exc: OSError) -> LedgerError:
    """A path that cannot name a file (no such folder, not a folder, a name too long) is
    rejected input (exit 2); a folder that cannot take the file (full disk or quota,
    read-only, no permission, I/O error) is a storage error (exit 4)."""
    reason = exc.strerror or exc
    if exc.errno in _NOT_A_FILE_NAME:
        return InputError(f"{message}: {reason}")
    return StoreUnavailable(f"{message}: {reason}")


def _write_error(target: Path, exc: OSError, what: str) -> LedgerError:
    return write_failure(f"cannot write {what} {display(target)}", exc)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except (OSError, ValueError):
        return None
    return info.st_dev, info.st_ino


def check_output_folder(
    path: Path, *, what: str = "--out", protected: Iterable[Path] = (), names: str = "the files"
) -> Path:
    """The folder outputs go into, refused before anything is written when it is the
    ledger (or a link to it) or something that exists and is not a folder (a file, FIFO,
    device or socket): `mkdir` would only say "File exists"."""
    path = Path(os.path.abspath(path))
    refuse_ledger(path, what=what, protected=protected)
    try:
        info = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return path  # made when the files are written (or refused then, as mkdir says)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{what} {display(path)} cannot be used: {reason}") from None
    if stat.S_ISDIR(info.st_mode):
        return path
    kind = "a file" if stat.S_ISREG(info.st_mode) else "a FIFO, device or socket"
    raise InputError(
        f"{what} {display(path)} is {kind}, not a folder: name a folder (new or existing) "
        f"to write {names} into"
    )


def check_output(
    path: Path, *, what: str = "--out", force: bool = False, protected: Iterable[Path] = ()
) -> Path:
    """The file an output to `path` will replace or create, after every rule of the module
    docstring that can be checked before writing; raises `InputError` otherwise."""
    path = Path(os.path.abspath(path))
    shown = display(path)
    try:
        info = path.lstat()
    except FileNotFoundError:
        info = None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"{what} {shown} cannot be used: {reason}") from None
    refuse_ledger(path, what=what, protected=protected)
    target = path
    if info is not None and stat.S_ISLNK(info.st_mode):
        resolved = Path(os.path.realpath(path))
        folder = Path(os.path.realpath(path.parent))
        if resolved.parent != folder:
            raise InputError(
                f"{what} {shown} is a symbolic link that leads out of its folder "
                f"(to {display(resolved)}); name the file itself"
            )
        try:
            info = resolved.lstat()
        except FileNotFoundError:
            raise InputError(
                f"{what} {shown} is a symbolic link to nothing ({display(resolved)}); "
                "name the file itself"
            ) from None
        except OSError as exc:
            raise InputError(f"{what} {shown} cannot be used: {exc.strerror or exc}") from None
        target = resolved
    if info is None:
        return target
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{what} {shown} is a folder; name the file to write")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            f"{what} {shown} is not a regular file (a FIFO, device or socket); outputs are "
            "written to regular files only"
        )
    if info.st_nlink > 1 and not force:
        raise InputError(f"{what} {shown} has other hard links; pass --force to replace it")
    return target


class StagedOutput:
    """An output written under a temporary name in its folder, flushed to the disk, and not
    yet in place: `commit` (optionally with the final bytes) puts it there, `discard`
    removes it. Use it as a context manager to discard on any failure."""

    def __init__(
        self,
        target: Path,
        data: bytes,
        *,
        what: str = "--out",
        force: bool = False,
        mode: int = 0o644,
        on_error: Callable[[OSError], LedgerError] | None = None,
    ) -> None:
        refuse_ledger(target, what=what)
        self.target = target
        self.what = what
        self.force = force
        self.temp: Path | None = None
        self.on_error = on_error or (lambda exc: _write_error(target, exc, what))
        folder = target.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            temp = folder / f".{target.name[:200]}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            self.temp = temp
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, mode)
        except OSError as exc:
            self.discard()
            raise self.on_error(exc) from None

    def __enter__(self) -> StagedOutput:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.discard()

    def commit(self, data: bytes | None = None) -> Path:
        assert self.temp is not None, "a staged output is committed once"
        temp, target = self.temp, self.target
        try:
            refuse_ledger(target, what=self.what)  # a link made since the bytes were staged
            if data is not None:
                with temp.open("r+b") as handle:
                    handle.write(data)
                    handle.truncate(len(data))
                    handle.flush()
                    os.fsync(handle.fileno())
            if self.force:
                os.replace(temp, target)
            else:
                self._link_new(temp, target)
            self.temp = None
            _sync_folder(target.parent)
        except OSError as exc:
            raise self.on_error(exc) from None
        finally:
            self.discard()
        return target

    def _link_new(self, temp: Path, target: Path) -> None:
        """Put `temp` in place only if nothing is there (a file made meanwhile stays)."""
        try:
            os.link(temp, target)
        except FileExistsError:
            raise InputError(f"{display(target)} exists; pass --force to overwrite it") from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            if os.path.lexists(target):  # no hard links on this file system
                raise InputError(
                    f"{display(target)} exists; pass --force to overwrite it"
                ) from None
            os.replace(temp, target)
            return
        temp.unlink()

    def discard(self) -> None:
        if self.temp is not None:
            with contextlib.suppress(OSError):
                self.temp.unlink()
            self.temp = None


def _sync_folder(folder: Path) -> None:
    """Flush a rename to the disk (not possible on every platform or file system)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def same_bytes(target: Path, data: bytes) -> bool:
    try:
        if target.stat().st_size != len(data):
            return False
        with open_input(target, "output", limit=len(data), refuse_database=False) as handle:
            return handle.read(len(data) + 1) == data
    except (OSError, InputError):
        return False


def write_output(
    path: Path,
    data: bytes,
    *,
    what: str = "--out",
    force: bool = False,
    protected: Iterable[Path] = (),
    mode: int = 0o644,
) -> Path:
    """Write `data` to `path` atomically under the rules of the module docstring (a
    symbolic link to a file in its own folder is followed); `path`, made absolute, is
    returned. A file that already holds exactly `data` is replaced by an identical one."""
    target = check_output(path, what=what, force=force, protected=protected)
    replaces = os.path.lexists(target)
    path = Path(os.path.abspath(path))
    if replaces and not force and not same_bytes(target, data):
        raise InputError(
            f"{what} {display(path)} exists with other content; pass --force to overwrite it"
        )
    with StagedOutput(target, data, what=what, force=force or replaces, mode=mode) as out:
        out.commit()
    return path
