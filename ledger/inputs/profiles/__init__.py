"""Profiler output in, normalized signals out.

`load_profile` reads one profile (a file or a folder) and returns a `ParsedProfile`: numeric
signals under normalized names with documented units (docs/profiles.md), categorical facts
as strings, and the size and sha256 of every raw file it read so the ledger can store them.
Each format also has a pure `parse_*` function that takes text and does no I/O.

Formats, one module each (PROFILE_FORMATS.md):

* ``msprof-op``: an ``msprof op`` output folder (OpBasicInfo, PipeUtilization,
  ResourceConflictRatio, Memory tables; optional ``_<timestamp>`` suffixes, ``device<id>/``
  and ``<OpName>/<launch#>/`` levels);
* ``op-summary``: ``op_summary_*.csv`` of a full-run profile;
* ``kernel-details``: torch_npu ``kernel_details.csv``;
* ``ncu-csv``: Nsight Compute ``--csv`` output, long (``--page details``) or wide
  (``--page raw``);
* ``signals-json``: a JSON object mapping signal names to numbers.

Every rejection is an `InputError` whose one-line message names the file and the problem.

>>> p = parse_signals_json('{"task_duration_us": 12.5, "aiv_vec_ratio": 0.7}')
>>> p.format, p.signals["task_duration_us"]
('signals-json', 12.5)
"""

from ledger.inputs.profiles.catalog import FORMAT_LIST
from ledger.inputs.profiles.common import (
    MAX_FILE_BYTES,
    ParsedProfile,
    ShapeProfile,
    SourceFile,
)
from ledger.inputs.profiles.loader import load_profile
from ledger.inputs.profiles.msprof import merge_launches, parse_msprof_op
from ledger.inputs.profiles.ncu import parse_ncu_csv
from ledger.inputs.profiles.op_summary import parse_kernel_details, parse_op_summary
from ledger.inputs.profiles.signals_json import parse_signals_json

FORMATS = tuple(f.name for f in FORMAT_LIST)
"""The name of every profile format (each declared in its reader's module)."""

__all__ = [
    "FORMATS",
    "MAX_FILE_BYTES",
    "ParsedProfile",
    "ShapeProfile",
    "SourceFile",
    "load_profile",
    "merge_launches",
    "parse_kernel_details",
    "parse_msprof_op",
    "parse_ncu_csv",
    "parse_op_summary",
    "parse_signals_json",
]
