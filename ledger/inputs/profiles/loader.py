"""Reading profiles from disk: one file or a folder, sniffed to its format, bounded in size,
depth and count, every raw file hashed so the ledger can store it (`load_profile`)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path, PurePosixPath

from ledger.errors import InputError
from ledger.files import max_input_bytes, open_input
from ledger.inputs.jsonio import plural
from ledger.inputs.profiles.catalog import BY_NAME, FORMAT_LIST
from ledger.inputs.profiles.common import (
    _MAX_WALK_DEPTH,
    _MAX_WALK_FILES,
    ParsedProfile,
    SourceFile,
    _find_header,
    _listing,
    _select,
)
from ledger.inputs.profiles.msprof import (
    _MSPROF_EXTRA,
    _MSPROF_FILE,
    _MSPROF_TABLES,
    merge_launches,
    parse_msprof_op,
)


def _read(path: Path, display: str) -> tuple[str, SourceFile]:
    """The text of one profile file, through the one bounded reader (`ledger.files`): a
    regular file only, opened without blocking (a FIFO is refused, not waited on), within
    the input limit."""
    limit = max_input_bytes()
    shown = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit}-byte"
    try:
        with open_input(path, "profile file", limit=2**62) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > limit:
                raise InputError(
                    f"{display}: {size} bytes is over the {shown} limit for profile files"
                )
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{display}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise InputError(f"{display}: over the {shown} limit")
    record = SourceFile(display, hashlib.sha256(data).hexdigest(), len(data))
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{display}: is UTF-16 text; save it as UTF-8")
    if b"\x00" in data:
        raise InputError(f"{display}: is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{display}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    if not text.strip():
        raise InputError(f"{display}: is empty")
    return text, record


def _sniff(text: str, display: str) -> tuple[str, int, int]:
    """The format of a CSV file from its header row, the offset of that row and the number
    of preamble lines before it."""
    offset, kind, skipped = _find_header(text, FORMAT_LIST)
    if kind == "per-core":
        raise InputError(
            f"{display}: is a per-core msprof op table; load its folder, which must hold "
            "OpBasicInfo.csv"
        )
    if kind is None:
        raise InputError(
            f"{display}: not a recognised profile (expected msprof op, op_summary, "
            "kernel_details or ncu --csv columns)"
        )
    return kind, offset, skipped


def _relative(path: Path, root: Path) -> str:
    try:
        return PurePosixPath(path.relative_to(root)).as_posix()
    except ValueError:
        return path.name


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    root_depth = len(root.parts)
    for current, dirs, files in os.walk(root, onerror=None, followlinks=False):
        here = Path(current)
        dirs[:] = sorted(d for d in dirs if len(here.parts) - root_depth < _MAX_WALK_DEPTH)
        for name in sorted(files):
            found.append(here / name)
            if len(found) > _MAX_WALK_FILES:
                raise InputError(
                    f"{root}: holds more than {_MAX_WALK_FILES} files; point at the profile "
                    "folder itself"
                )
    return found


def _launch_dirs(files: Sequence[Path]) -> dict[Path, dict[str, list[Path]]]:
    by_dir: dict[Path, dict[str, list[Path]]] = {}
    for path in files:
        match = _MSPROF_FILE.match(path.name)
        if match:
            table = next(t for t in _MSPROF_TABLES if t.lower() == match.group(1).lower())
            by_dir.setdefault(path.parent, {}).setdefault(table, []).append(path)
    return by_dir


def _load_launch(
    directory: Path, tables: Mapping[str, list[Path]], root: Path, kernel_name: str | None
) -> ParsedProfile:
    texts: dict[str, str] = {}
    names: dict[str, str] = {}
    records: list[SourceFile] = []
    notes: list[str] = []
    for table, paths in tables.items():
        chosen = sorted(paths)[-1]
        display = _relative(chosen, root)
        if len(paths) > 1:
            notes.append(f"{len(paths)} {table} files in one folder; read the last, {display}")
        text, record = _read(chosen, display)
        texts[table], names[table] = text, display
        records.append(record)
    profile = parse_msprof_op(
        texts["OpBasicInfo"],
        texts.get("PipeUtilization"),
        texts.get("ResourceConflictRatio"),
        texts.get("Memory"),
        kernel_name=kernel_name,
        sources=names,
        extra={t: texts[t] for t in _MSPROF_EXTRA if t in texts},
    )
    op_name = profile.kernel_name
    if not op_name:
        parent = directory.parent if directory.name.isdigit() else directory
        op_name = parent.name
    return replace(
        profile,
        kernel_name=op_name,
        files=tuple(sorted(records, key=lambda r: r.path)),
        notes=(*notes, *profile.notes),
    )


def _load_msprof_folder(
    root: Path, by_dir: Mapping[Path, Mapping[str, list[Path]]], kernel_name: str | None
) -> ParsedProfile:
    launch_dirs = sorted(d for d, tables in by_dir.items() if "OpBasicInfo" in tables)
    if not launch_dirs:
        orphan = sorted(by_dir)[0]
        raise InputError(
            f"{_relative(orphan, root) if orphan != root else root}: msprof op tables found "
            "but no OpBasicInfo.csv beside them"
        )
    launches = [_load_launch(d, by_dir[d], root, None) for d in launch_dirs]
    names = [p.kernel_name or "" for p in launches]
    chosen, notes = _select(names, kernel_name, str(root))
    selected = [p for p in launches if p.kernel_name == chosen]
    merged = merge_launches(selected)
    signals = dict(merged.signals)
    signals.setdefault("launch_count", 1.0)
    return replace(
        merged,
        signals=dict(sorted(signals.items())),
        kernel_name=chosen,
        notes=(*notes, *merged.notes),
    )


def _load_file(path: Path, kernel_name: str | None, shape: str | None = None) -> ParsedProfile:
    root = path.parent
    if _MSPROF_FILE.match(path.name):
        if shape is not None:
            raise InputError(
                f"{path.name}: an msprof op profile holds one shape; --shape does not apply"
            )
        try:
            siblings = sorted(p for p in root.iterdir() if p.is_file())
        except OSError as exc:
            raise InputError(f"{root}: cannot list ({exc.strerror or exc})") from None
        return _load_msprof_folder(root, _launch_dirs(siblings), kernel_name)
    display = path.name
    text, record = _read(path, display)
    if path.suffix.lower() == ".json":
        fmt, offset, skipped = "signals-json", 0, 0
    else:
        fmt, offset, skipped = _sniff(text, display)
    if skipped and fmt != "ncu-csv":  # ncu notes its own preamble
        text = text[offset:]
    profile = BY_NAME[fmt].read(text, kernel_name, display, shape)
    if skipped and fmt != "ncu-csv":
        note = f"{display}: skipped {plural(skipped, 'line')} before the header"
        profile = replace(profile, notes=(note, *profile.notes))
    if fmt == "signals-json" and kernel_name is not None:
        profile = replace(profile, kernel_name=kernel_name)
    return replace(profile, files=(record,))


def _is_full_run_csv(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(".csv") and (
        name.startswith("op_summary") or name.startswith("kernel_details")
    )


def load_profile(
    path: Path, *, kernel_name: str | None = None, shape: str | None = None
) -> ParsedProfile:
    """Read a profile file or folder; see the module docstring for the formats.

    A folder is searched (not following links) for ``msprof op`` tables; when it holds
    none, for exactly one ``op_summary*.csv`` or ``kernel_details*.csv``. `shape` picks one
    input shape (``Input Shapes``) or ncu launch size (``grid (..) block (..)``) where the
    kernel ran with several; without it, each shape is reported and the one with the most
    total time is attributed.
    """
    path = Path(path)
    if kernel_name is not None and not kernel_name.strip():
        raise InputError(f"{path}: the kernel name is empty")
    if shape is not None and not shape.strip():
        raise InputError(f"{path}: the shape is empty")
    try:
        is_dir = path.is_dir()
        exists = is_dir or path.exists()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not exists:
        raise InputError(f"{path}: no such file or folder")
    if not is_dir:
        return _load_file(path, kernel_name, shape)
    try:
        files = _walk(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot list ({exc.strerror or exc})") from None
    by_dir = _launch_dirs(files)
    if by_dir:
        if shape is not None:
            raise InputError(
                f"{path}: an msprof op profile holds one shape; --shape does not apply"
            )
        return _load_msprof_folder(path, by_dir, kernel_name)
    full_run = [f for f in files if _is_full_run_csv(f)]
    if len(full_run) == 1:
        only = full_run[0]
        profile = _load_file(only, kernel_name, shape)
        record = profile.files[0]
        return replace(profile, files=(replace(record, path=_relative(only, path)),))
    if full_run:
        raise InputError(
            f"{path}: holds {len(full_run)} op_summary/kernel_details files; pass one of "
            f"{_listing([_relative(f, path) for f in full_run])}"
        )
    raise InputError(
        f"{path}: no profile files found (expected OpBasicInfo.csv, PipeUtilization.csv, "
        "op_summary_*.csv or kernel_details.csv)"
    )
