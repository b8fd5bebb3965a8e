"""The SQLite ledger file itself: its WAL companions, what an interrupted creation left
beside it, hard links to it, and the free space and read-only state of its folder."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def ledger_file(parsed) -> Path | None:
    """The file of a SQLite URL; None for in-memory and `file:` URI databases."""
    database = parsed.database or ""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).expanduser().absolute()


def companions(path: Path) -> tuple[Path, Path]:
    return Path(f"{path}-wal"), Path(f"{path}-shm")


def creation_prefix(path: Path) -> str:
    """The name a new ledger is made under before it is linked into place: the prefix,
    followed by the creating process's id, a dash and a random tag."""
    return f".{path.name}.new-"


def creations(path: Path) -> Iterator[tuple[Path, int]]:
    """The files a ledger creation at `path` made (companions included), with the id of the
    process that made them."""
    prefix = creation_prefix(path)
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        pid, _, _ = entry.name[len(prefix) :].partition("-")
        if pid.isdigit():
            yield Path(entry.path), int(pid)


def alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_dead_creations(path: Path) -> None:
    """Delete what an interrupted creation (a process killed while it made the ledger) left
    beside `path`; the files of a creation still under way are kept."""
    for leftover, pid in creations(path):
        if not alive(pid):
            with contextlib.suppress(OSError):
                leftover.unlink()


def other_links(path: Path, info: os.stat_result) -> int:
    """How many hard links of the ledger file are not its own creation name: a creation
    links its new file into place and then removes the temporary name (a dead creation's
    name is removed here)."""
    others = info.st_nlink - 1
    for leftover, pid in creations(path):
        try:
            same = leftover.stat().st_ino == info.st_ino and leftover.stat().st_dev == info.st_dev
        except OSError:
            continue
        if same:
            others -= 1
            if not alive(pid):
                with contextlib.suppress(OSError):
                    leftover.unlink()
    return others


def file_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_dev, info.st_ino


def free_bytes(folder: Path) -> int | None:
    try:
        info = os.statvfs(folder)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def read_only_fs(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False
