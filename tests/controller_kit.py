"""The JSON-file controller as a test oracle: where its copy is, a workspace laid out as the
agents' (inputs under runs/, run folders under .vaws-local/, every path in an input file
relative to the workspace root), and the controller's command line run from that root.

The controller lives in ../shared/reference/vllm-ascend-workspace (MIT) next to the
repository, or where KERNEL_LEDGER_REFERENCE points; tests that need it skip without it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SKILL = Path(".agents/skills/ascend-triton-kernel-optimization")
SCRIPT = SKILL / "scripts" / "triton_optimization.py"
RUNS = Path(".vaws-local/ascend-triton/optimization")
STAMP = "2026-11-02T09:00:00Z"

WRAPPER = """try:
    from cli.triton_optimization import *  # kernel-ledger's drop-in (docs/migration.md)
except ModuleNotFoundError as missing:  # kernel-ledger is not installed in this Python
    import json, sys
    print(json.dumps({"status": "failed", "error": f"kernel-ledger is not installed: {missing}"}))
    sys.exit(1)

if __name__ == "__main__":
    run()
"""
"""The script an existing workspace puts in place of the controller (docs/migration.md)."""


def reference() -> Path | None:
    """The reference workspace: $KERNEL_LEDGER_REFERENCE, else shared/reference/... in a
    folder above the repository (../shared for a clone next to it)."""
    configured = os.environ.get("KERNEL_LEDGER_REFERENCE")
    candidates = [Path(configured)] if configured else []
    candidates += [p / "shared/reference/vllm-ascend-workspace" for p in REPO.parents]
    return next((p for p in candidates if (p / SCRIPT).is_file()), None)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")
    return path


@dataclass
class Step:
    exit_code: int
    output: dict[str, Any]
    stderr: str


@dataclass
class Workspace:
    """One agent workspace: `.agents/` (the controller, or the drop-in wrapper in its
    place), inputs under `runs/<run>/`, run folders under `.vaws-local/`."""

    root: Path
    dropin: bool
    env: dict[str, str] = field(default_factory=dict)
    in_process: bool = False  # run the script in this interpreter (the drop-in starts slowly)

    @classmethod
    def make(cls, root: Path, source: Path, *, dropin: bool) -> Workspace:
        shutil.copytree(source / ".agents", root / ".agents")
        if dropin:
            (root / SCRIPT).write_text(WRAPPER, encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "KERNEL_LEDGER_DB"}
        env["PYTHONPATH"] = str(REPO)
        return cls(root, dropin, env)

    def run(self, *args: str) -> Step:
        if self.in_process:
            return self._run_here(args)
        done = subprocess.run(
            [sys.executable, "-B", str(SCRIPT), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = done.stdout.splitlines()
        assert len(lines) == 1, (done.stdout, done.stderr)
        return Step(done.returncode, json.loads(lines[0]), done.stderr)

    def _run_here(self, args: tuple[str, ...]) -> Step:
        """The script run as `python -B SCRIPT ARGS` would run it, in this interpreter."""
        out, err = io.StringIO(), io.StringIO()
        before, argv = os.getcwd(), sys.argv
        code = 0
        try:
            os.chdir(self.root)
            sys.argv = [str(SCRIPT), *args]
            with redirect_stdout(out), redirect_stderr(err):
                runpy.run_path(str(SCRIPT), run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(before)
            sys.argv = argv
        lines = out.getvalue().splitlines()
        assert len(lines) == 1, (out.getvalue(), err.getvalue())
        return Step(code, json.loads(lines[0]), err.getvalue())

    def folder_files(self, run_folder: Path) -> dict[str, str]:
        """Every file of a run folder (names relative to it), its text normalized."""
        base = self.root / run_folder
        if not base.exists():
            return {}
        out = {}
        for path in sorted(base.rglob("*")):
            name = str(path.relative_to(base))
            out[name + ("/" if path.is_dir() else "")] = (
                self.normalize(path.read_text(encoding="utf-8")) if path.is_file() else ""
            )
        return out

    def normalize(self, text: str) -> str:
        """Text with this workspace's absolute root and the clock's times taken out."""
        text = text.replace(str(self.root.resolve()), "<ws>").replace(str(self.root), "<ws>")
        return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>", text)


class Inputs:
    """Writes the same campaign inputs into several workspaces: kernels, correctness
    manifests with their case matrices, configurations and round results, every path in them
    relative to the workspace root (`absolute` writes them absolute instead)."""

    def __init__(self, roots: list[Path], run_id: str, *, absolute: bool = False) -> None:
        self.roots = roots
        self.run_id = run_id
        self.absolute = absolute
        self.dir = Path("runs") / run_id

    def _path(self, root: Path, relative: Path) -> str:
        return str(root / relative) if self.absolute else str(relative)

    def each(self, relative: Path, make) -> Path:
        """Write `make(root)` (a JSON value or text) at `relative` in every workspace."""
        for root in self.roots:
            value = make(root)
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(value, str):
                target.write_text(value, encoding="utf-8")
            else:
                write_json(target, value)
        return relative

    def kernel(self, name: str) -> Path:
        text = f"# {self.run_id}: {name}\nBLOCK = 1\n"
        return self.each(self.dir / "kernels" / f"{name}.py", lambda _: text)

    def sha(self, kernel: Path) -> str:
        return sha256(self.roots[0] / kernel)

    def manifest(
        self,
        name: str,
        kernel: Path,
        cases: list[str],
        *,
        parent: str | None = None,
        status: str = "passed",
        run_type: str = "correctness",
        kernel_sha: str | None = None,
    ) -> Path:
        folder = self.dir / "validation" / name
        digest = kernel_sha or self.sha(kernel)
        self.each(
            folder / "case-matrix.json",
            lambda root: {
                "schema_version": 1,
                "kernel": {"path": self._path(root, kernel), "sha256": digest},
                "cases": [{"id": c} for c in cases],
            },
        )
        return self.each(
            folder / "manifest.json",
            lambda root: {
                "schema_version": 1,
                "run_id": f"{name}-validation",
                "parent_run_id": parent if parent is not None else self.run_id,
                "run_type": run_type,
                "workspace_snapshot": {},
                "environment": {},
                "model": {},
                "topology": {},
                "command": ["python", "validate.py"],
                "environment_variables": {},
                "artifacts": [
                    {
                        "name": "kernel",
                        "kind": "triton-kernel",
                        "uri": self._path(root, kernel),
                        "sha256": digest,
                    },
                    {"name": "case-matrix", "kind": "case-matrix", "uri": "case-matrix.json"},
                ],
                "status": status,
                "created_at": STAMP,
                "updated_at": STAMP,
            },
        )

    def config(self, kernel: Path, manifest: Path, **doc: Any) -> Path:
        return self.each(
            self.dir / "optimization-config.json",
            lambda root: {
                "schema_version": 1,
                "run_id": self.run_id,
                "kernel": {"path": self._path(root, kernel)},
                "validation_manifest": self._path(root, manifest),
                **doc,
            },
        )

    def round(
        self,
        number: int,
        parent: Path,
        candidate: Path,
        manifest: Path,
        measurements: list[dict[str, Any]] | None,
        *,
        name: str | None = None,
        parent_sha: str | None = None,
        **extra: Any,
    ) -> Path:
        def doc(root: Path) -> dict[str, Any]:
            value = {
                "schema_version": 1,
                "round": number,
                "parent_kernel_sha256": parent_sha or self.sha(parent),
                "candidate": {"path": self._path(root, candidate)},
                "hypothesis": f"hypothesis of round {number}",
                "change": f"BLOCK={number - 1} -> {number}",
                "verification": {"manifest": self._path(root, manifest)},
                **extra,
            }
            if measurements is not None:
                value["measurements"] = measurements
            return value

        return self.each(self.dir / "rounds" / f"{name or f'round-{number}'}.json", doc)
