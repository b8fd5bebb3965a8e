"""Unpack a capture (the tarball of run_corpus.py's or follow_suggestions.py's device
command) into corpus/ or another folder.

    python3 examples/kernel-corpus/build_corpus.py TGZ [--dest examples/kernel-corpus/corpus]

Keeps what a reader and the benchmarks need, at a modest size: the bundles (one per run),
the round inputs and configs, validation manifests and case matrices, kernel sources, raw
samples, per-launch ncu CSVs and logs, the ledger's command log, summary.json,
environment.json and the capture's log. Leaves out the SQLite ledger itself (the bundles
rebuild it with `kernel-ledger import`) and full .ncu-rep reports over 1 MB. Standard
library only; writes PROVENANCE.json with the tarball's sha256 and the files kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
KEEP_DIRS = ("bundles", "inputs", "validation", "kernels", "raw", "ncu", "analysis")
KEEP_FILES = (
    "summary.json",
    "environment.json",
    "ledger-commands.log",
    "corpus.log",
    "follow-log.json",
    "follow-log.md",
    "follow.log",
)
ROOTS = ("summary.json", "follow-log.json")  # a capture's, or follow_suggestions.py's
MAX_FILE = 1 << 20


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tgz")
    parser.add_argument("--dest", default=str(HERE / "corpus"))
    args = parser.parse_args(argv)
    tgz, dest = Path(args.tgz), Path(args.dest)
    digest = hashlib.sha256(tgz.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        roots = [p.parent for name in ROOTS for p in Path(tmp).rglob(name)]
        if len(roots) != 1:
            print(
                f"Error: {tgz} holds {len(roots)} of {' or '.join(ROOTS)}, expected 1",
                file=sys.stderr,
            )
            return 2
        root = roots[0]
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        kept, dropped = [], []
        for path in sorted(root.rglob("*")):
            if not path.is_file():
                continue
            rel = path.relative_to(root)
            wanted = rel.parts[0] in KEEP_DIRS or str(rel) in KEEP_FILES
            if not wanted or (path.suffix == ".ncu-rep" and path.stat().st_size > MAX_FILE):
                dropped.append(str(rel))
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            kept.append(str(rel))
    marker = next(dest / name for name in ROOTS if (dest / name).is_file())
    summary = json.loads(marker.read_text())
    provenance = {
        "source_tarball": tgz.name,
        "source_sha256": digest,
        "captured_by": (
            "examples/kernel-corpus/"
            + ("run_corpus.py" if marker.name == "summary.json" else "follow_suggestions.py")
            + " on the device machine (README.md)"
        ),
        "wall_s": summary.get("wall_s"),
        "files_kept": len(kept),
        "left_out": dropped,
    }
    (dest / "PROVENANCE.json").write_text(json.dumps(provenance, indent=1) + "\n")
    size = sum((dest / k).stat().st_size for k in kept)
    print(f"{len(kept)} files, {size / 1e6:.1f} MB in {dest}; left out {len(dropped)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
