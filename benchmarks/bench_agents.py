"""7. Per-call cost for agents: `record` through the MCP server (one long-lived process)
against the reference controller's command line `record`, at rounds 1, 100 and 1,000; and
`record` through our command line against the import floor."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.campaign_files import FileCampaign
from benchmarks.common import ROOT, Section, goal, progress, sqlite_url

REFERENCE = ROOT.parent / "shared" / "reference" / "vllm-ascend-workspace"
SCRIPT = Path(".agents/skills/ascend-triton-kernel-optimization/scripts/triton_optimization.py")
FLOOR_IMPORTS = "import sqlalchemy, pydantic, typer"


def _reference_copy(work: Path) -> Path | None:
    """A copy of the controller's .agents folder (it finds its library by its own place)."""
    for source in (REFERENCE, Path("/work/shared/reference/vllm-ascend-workspace")):
        if (source / SCRIPT).is_file():
            target = work / "reference"
            shutil.copytree(source / ".agents", target / ".agents", dirs_exist_ok=True)
            return target / SCRIPT
    return None


def _controller_module(script: Path):
    spec = importlib.util.spec_from_file_location("triton_optimization_ref", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CPU_S: list[float] = []  # user + system seconds of the last process `_timed_process` ran


def _timed_process(argv: list[str]) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S[:] = [after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime]
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {(done.stderr or done.stdout)[-400:]}")
    return seconds, done.stdout


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("kernel-ledger")
    return [str(script)] if script.exists() else [sys.executable, "-m", "cli"]


def _median_ms(values: list[float]) -> str:
    low, mid, high = (v * 1000 for v in (min(values), statistics.median(values), max(values)))
    return f"{mid:.1f} [{low:.1f}-{high:.1f}]"


def measure(work: Path, *, at: tuple[int, ...] = (1, 100, 1000), repeats: int = 5) -> Section:
    import anyio

    section = Section(key="agents", title="Per-call cost for agents")
    script = _reference_copy(work)
    if script is None:
        section.notes.append("Skipped: the reference controller is not on this machine.")
        return section
    controller = _controller_module(script)
    files = FileCampaign(work / "files", "agents-bench-001", max_rounds=max(at) + repeats + 5)
    config = files.config()
    ref_dir = work / "reference-run"
    with contextlib.redirect_stdout(io.StringIO()):
        assert controller.main(["plan", "--output-dir", str(ref_dir), "--config", str(config)]) == 0
    url = sqlite_url(work / "agents.sqlite3")
    windows = {n + k for n in at for k in range(repeats)}
    last = max(windows)
    mcp_s: dict[int, list[float]] = {n: [] for n in at}
    ref_s: dict[int, list[float]] = {n: [] for n in at}
    cli_s: dict[int, list[float]] = {n: [] for n in at}
    floor_s: dict[int, list[float]] = {n: [] for n in at}
    cpu_ratios: list[float] = []  # CLI record / floor, CPU time, each pair in turn

    async def campaign() -> None:
        from mcp.client.session import ClientSession
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cli", "--db", url, "mcp"], cwd=str(ROOT)
        )
        async with stdio_client(params) as streams, ClientSession(*streams) as session:
            await session.initialize()
            planned = await session.call_tool("plan", {"config": str(config)})
            assert not planned.is_error, planned.content[0].text
            for number in range(1, last + 1):
                path, medians = files.next_round()
                window = next((n for n in at if n <= number < n + repeats), None)
                if window is None:
                    with contextlib.redirect_stdout(io.StringIO()):
                        assert controller.main(
                            ["record", "--output-dir", str(ref_dir), "--result", str(path)]
                        ) == 0  # fmt: skip
                    answer = await session.call_tool("record", {"run": files.run_id,
                                                               "result": str(path)})  # fmt: skip
                else:
                    # the controller's command line, as an agent runs it
                    seconds, _ = _timed_process(
                        [sys.executable, str(script), "record", "--output-dir", str(ref_dir),
                         "--result", str(path)]
                    )  # fmt: skip
                    ref_s[window].append(seconds)
                    start = time.perf_counter()
                    answer = await session.call_tool("record", {"run": files.run_id,
                                                               "result": str(path)})  # fmt: skip
                    mcp_s[window].append(time.perf_counter() - start)
                assert not answer.is_error, answer.content[0].text
                files.recorded(answer.structured_content["decision"], medians)
                if number % 100 == 0:
                    progress(f"agents: round {number}/{last}")

    anyio.run(campaign)

    # our command line `record` against the import floor, on a ledger at each round. The
    # floor's packages come with their bytecode compiled, as pip installs any package; an
    # editable checkout gets its own on first import, unless PYTHONDONTWRITEBYTECODE says
    # no, and then every process would compile the sources again: compile them once here.
    import compileall

    for package in ("cli", "ledger"):
        compileall.compile_dir(ROOT / package, quiet=1)
    cli_files = FileCampaign(work / "cli-files", "agents-cli-001", max_rounds=max(at) + 20)
    cli_url = sqlite_url(work / "cli.sqlite3")
    _timed_process([*_cli(), "--db", cli_url, "plan", "--config", str(cli_files.config())])
    from ledger.services.service import LedgerService
    from ledger.store.eventstore import Store

    store = Store(cli_url)
    service = LedgerService(store)
    floor = [sys.executable, "-c", FLOOR_IMPORTS]
    for number in range(1, max(at) + repeats):
        path, medians = cli_files.next_round()
        window = next((n for n in at if n <= number < n + repeats), None)
        if window is None:
            decision = service.record(cli_files.run_id, path).decision
        else:
            floor_s[window].append(_timed_process(floor)[0])
            floor_cpu = CPU_S[0]
            seconds, out = _timed_process(
                [*_cli(), "--db", cli_url, "record", "--run", cli_files.run_id,
                 "--result", str(path), "--json"]
            )  # fmt: skip
            cli_s[window].append(seconds)
            cpu_ratios.append(CPU_S[0] / floor_cpu)
            import json

            decision = json.loads(out)["decision"]
        cli_files.recorded(decision, medians)
    store.close()

    section.intro = (
        f"Wall-clock milliseconds per `record`, median [min-max] of {repeats} consecutive "
        "rounds from each starting round; 8 cases, medians only. MCP: a `tools/call` round "
        "trip from the SDK's client to one long-lived `kernel-ledger mcp` (SQLite), the "
        "server started once. Controller: `python3 triton_optimization.py record` as a "
        "process, the reference JSON-file controller on the same round files. CLI: "
        "`kernel-ledger record --json` as a process; floor: `python -c "
        f"'{FLOOR_IMPORTS}'`."
    )
    for key, ours, theirs, headers, target in (
        ("mcp_vs_controller", mcp_s, ref_s, ["MCP record ms", "controller CLI record ms"], 1.0),
        ("cli_record_vs_floor", cli_s, floor_s, ["CLI record ms", "import floor ms"], 1.5),
    ):
        rows = []
        for n in at:
            ratio = statistics.median(ours[n]) / statistics.median(theirs[n])
            section.figures[f"{key}_{n}"] = ratio
            rows.append(
                [f"{n:,}", _median_ms(ours[n]), _median_ms(theirs[n]), f"{ratio:.3f}",
                 goal(ratio, target, at_least=False)]
            )  # fmt: skip
        section.table(["round", *headers, "ratio", f"goal ≤ {target:g}"], rows)
    cpu = statistics.median(cpu_ratios)
    section.figures["cli_record_vs_floor_cpu"] = cpu
    section.notes.append(
        "CPU time (user + system) of the same CLI and floor processes, which waiting for the "
        "other work on this machine does not inflate: CLI record / floor "
        f"{cpu:.3f} [{min(cpu_ratios):.3f}-{max(cpu_ratios):.3f}] over the "
        f"{len(cpu_ratios)} pairs: {goal(cpu, 1.5, at_least=False)}."
    )
    return section
