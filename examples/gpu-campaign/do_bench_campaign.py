"""Run the whole GPU campaign on one CUDA device: validate, time, re-time, profile.

    python3 run_campaign.py [--out DIR]

needs torch and triton (and, for the profiles, Nsight Compute's `ncu` on PATH). DIR defaults
to the folder of this script; everything is written below it:

    environment.json                          device facts, versions, clocks, ncu probe
    campaign-summary.json                     medians, simulated decisions, phase times
    <op>/validation/<kernel>/manifest.json    Run Manifest v1, run type correctness
    <op>/validation/<kernel>/case-matrix.json per-case validation results
    <op>/raw/<kernel>/<case>.json             do_bench samples {"unit": "ms", "samples": [...]}
    <op>/raw/aa-<k>/<case>.json               A/A re-measurements of the final best kernel
    noise-probe.json                          single-session spread, output allocated vs fixed
    <op>/profiles/ncu.csv, ncu-launches.json  Nsight Compute output (if ncu works)

Then `python3 build_inputs.py` (standard library only) turns this into ledger inputs.

Phases: (1) environment and an ncu probe on a tiny torch kernel; (2) validation of every
kernel over the full dtype x shape matrix in parallel worker processes; (3) timing of every
kernel that passed: per case one input set and one output buffer shared by all kernels, and
BENCH_SESSIONS rounds in which every kernel gets one do_bench session in turn, its samples
pooled into one measurement; a kernel that failed validation is never timed or profiled;
(4) the decision rule of the ledger replayed on the medians to find the final best kernel,
then AA_SESSIONS more measurements of it; a small probe of single-session noise
(noise-probe.json); (5) one ncu launch per kernel per profile case.

`--smoke` runs the same code on the CPU under TRITON_INTERPRET=1 with at most 8 rows per
case and a wall-clock stand-in for do_bench, to test the plumbing without a GPU. Its output
is not evidence.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as dt
import functools
import gc
import hashlib
import importlib.util
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import campaign_plan as plan  # noqa: E402

NCU_METRICS = (
    "gpu__time_duration.sum,"
    "dram__throughput.avg.pct_of_peak_sustained_elapsed,"
    "sm__throughput.avg.pct_of_peak_sustained_elapsed,"
    "sm__warps_active.avg.pct_of_peak_sustained_active"
)
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "TRITON_CACHE_DIR", "TRITON_INTERPRET", "PYTHONHASHSEED")


# --- small helpers -----------------------------------------------------------------------


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")


def kernel_file(op: str, name: str) -> Path:
    return HERE / "kernels" / op / f"{name}.py"


def load_kernel(op: str, name: str):
    path = kernel_file(op, name)
    spec = importlib.util.spec_from_file_location(f"gpu_campaign_{op}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sh(cmd: list[str], timeout: float = 60) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return proc.returncode, proc.stdout, proc.stderr
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired as exc:
        return 124, str(exc.stdout or ""), f"timed out after {timeout}s"


def git_head() -> str | None:
    code, out, _ = sh(["git", "-C", str(HERE), "rev-parse", "HEAD"], timeout=10)
    return out.strip() if code == 0 and out.strip() else None


def torch_dtype(name: str):
    import torch

    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[name]


def device_name(smoke: bool) -> str:
    return "cpu" if smoke else "cuda"


def case_shape(case: dict, smoke: bool) -> tuple[int, int]:
    rows, cols = case["shape"]
    return (min(rows, 8), cols) if smoke else (rows, cols)


# --- inputs and references ---------------------------------------------------------------


def make_inputs(op: str, shape, dtype_name: str, seed: int, device: str):
    """Fresh random inputs (never zeros): softmax rows get offsets in [-30, 30] so the
    max-subtraction matters; RMSNorm rows get log-normal scales and a non-trivial weight."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    rows, cols = shape
    dtype = torch_dtype(dtype_name)
    x = torch.randn(rows, cols, generator=gen, device=device, dtype=torch.float32)
    if op == "softmax":
        offset = torch.rand(rows, 1, generator=gen, device=device) * 60.0 - 30.0
        return (x * 4.0 + offset).to(dtype), None
    scale = torch.exp(torch.randn(rows, 1, generator=gen, device=device))
    weight = 1.0 + 0.1 * torch.randn(cols, generator=gen, device=device)
    return (x * scale).to(dtype), weight.to(dtype)


def reference(op: str, x, weight):
    import torch

    xd = x.double()
    if op == "softmax":
        return torch.softmax(xd, dim=-1)
    inv = torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + plan.RMSNORM_EPS)
    return xd * inv * weight.double()


def call(op: str, module, x, weight, out=None):
    if op == "softmax":
        return module.launch(x, out=out)
    return module.launch(x, weight, plan.RMSNORM_EPS, out=out)


# --- phase 1: environment ----------------------------------------------------------------


def collect_environment(smoke: bool) -> dict:
    import torch
    import triton

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
        "smoke": smoke,
    }
    if not smoke:
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=props.name,
            sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            total_memory_bytes=props.total_memory,
            l2_cache_bytes=getattr(props, "L2_cache_size", None),
        )
        code, out, _ = sh(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,pci.bus_id,clocks.sm,clocks.mem,"
                "clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw,power.limit",
                "--format=csv",
            ]
        )
        env["nvidia_smi"] = out.strip() if code == 0 else None
        if code == 0:
            lines = out.strip().splitlines()
            if len(lines) > 1:
                env["driver"] = lines[1].split(",")[1].strip()
    return env


def gpu_clocks() -> str | None:
    code, out, _ = sh(
        [
            "nvidia-smi",
            "--query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw",
            "--format=csv,noheader",
        ]
    )
    return out.strip() if code == 0 else None


def probe_ncu(out_dir: Path) -> dict:
    """Does ncu work here? A tiny torch kernel, one metric."""
    ncu = shutil.which("ncu")
    result: dict = {"path": ncu}
    if ncu is None:
        result.update(ok=False, reason="ncu not on PATH")
        return result
    _, version, _ = sh([ncu, "--version"])
    result["version"] = version.strip().splitlines()[-1] if version.strip() else None
    tiny = "import torch; x = torch.ones(1 << 20, device='cuda'); (x * 2).sum().item()"
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--csv",
        "--metrics",
        "gpu__time_duration.sum",
        sys.executable,
        "-c",
        tiny,
    ]
    t0 = time.time()
    code, out, err = sh(cmd, timeout=180)
    result.update(command=cmd, rc=code, seconds=round(time.time() - t0, 1))
    (out_dir / "ncu-probe.log").write_text(
        f"$ {' '.join(cmd)}\nrc={code}\n--- stdout ---\n{out}\n--- stderr ---\n{err}\n"
    )
    result["ok"] = code == 0 and "gpu__time_duration.sum" in out
    if not result["ok"]:
        result["reason"] = (err.strip() or out.strip())[-500:]
    return result


# --- phase 2: validation -----------------------------------------------------------------


def check_once(op, module, shape, dtype_name, seed, device, tol_scale):
    import torch

    tol = {k: v * tol_scale for k, v in plan.TOLERANCES[dtype_name].items()}
    x, weight = make_inputs(op, shape, dtype_name, seed, device)
    out = torch.full_like(x, float("nan"))  # poison: every element must be written
    entry = {"dtype": dtype_name, "shape": list(shape), "seed": seed}
    try:
        got = call(op, module, x, weight, out=out)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # a crash is a failed check, recorded
        entry.update(passed=False, error=f"{type(exc).__name__}: {exc}"[:800])
        return entry
    ref = reference(op, x, weight)
    got64 = got.double()
    nonfinite = int((~torch.isfinite(got64)).sum().item())
    diff = (got64 - ref).abs()
    bound = tol["atol"] + tol["rtol"] * ref.abs()
    over = int((diff > bound).sum().item())
    finite_diff = torch.nan_to_num(diff, nan=float("inf"))
    rel_l2 = float((torch.nan_to_num(got64 - ref, nan=1e300)).norm() / ref.norm())
    entry.update(
        max_abs_err=float(finite_diff.max().item()),
        rel_l2_err=rel_l2,
        elements_over_tolerance=over,
        nonfinite_outputs=nonfinite,
        same_buffer=bool(got.data_ptr() == out.data_ptr()),
    )
    entry["passed"] = bool(nonfinite == 0 and over == 0 and rel_l2 <= tol["rel_l2"])
    return entry


def validate_kernel(op: str, name: str, out_dir: str, env: dict, command: list, smoke: bool):
    """Worker: validate one kernel over the matrix, write its manifest and case matrix."""
    import torch

    created = now()
    device = device_name(smoke)
    if device == "cuda":
        torch.cuda.set_device(0)
    kpath = kernel_file(op, name)
    ksha = sha256_file(kpath)
    vdir = Path(out_dir) / op / "validation" / name
    vdir.mkdir(parents=True, exist_ok=True)
    tol_scale = 2.0 if smoke else 1.0  # the interpreter truncates to bf16
    cases = []
    load_error = None
    try:
        module = load_kernel(op, name)
    except Exception as exc:
        module, load_error = None, f"{type(exc).__name__}: {exc}"
    for case in plan.CASES:
        shape = case_shape(case, smoke)
        checks = []
        dtypes = [case["dtype"]] + [d for d in plan.DTYPES if d != case["dtype"]]
        for dtype_name in dtypes:
            for seed in plan.VALIDATION_SEEDS:
                if module is None:
                    checks.append(
                        {"dtype": dtype_name, "seed": seed, "passed": False, "error": load_error}
                    )
                    continue
                checks.append(check_once(op, module, shape, dtype_name, seed, device, tol_scale))
        cases.append(
            {
                "id": case["id"],
                "timed_dtype": case["dtype"],
                "shape": list(shape),
                "passed": all(c["passed"] for c in checks),
                "checks": checks,
            }
        )
    passed = all(c["passed"] for c in cases)
    matrix = {
        "kernel": {"sha256": ksha, "name": name, "file": f"kernels/{op}/{name}.py"},
        "op": op,
        "reference": "torch float64 on the same device (softmax / x*rsqrt(mean(x^2)+eps)*w)",
        "tolerances": {
            "rule": "|out-ref| <= atol + rtol*|ref| everywhere, rel_l2 <= bound, all outputs "
            "written (output poisoned with NaN before the launch)",
            "by_dtype": plan.TOLERANCES,
            "scale": tol_scale,
        },
        "seeds": list(plan.VALIDATION_SEEDS),
        "smoke": smoke,
        "passed": passed,
        "cases": cases,
    }
    matrix_path = vdir / "case-matrix.json"
    write_json(matrix_path, matrix)
    manifest = {
        "schema_version": 1,
        "run_id": plan.manifest_run_id(op, name),
        "parent_run_id": plan.OPS[op]["run_id"],
        "run_type": "correctness",
        "workspace_snapshot": {
            "campaign": plan.CAMPAIGN_ID,
            "git_head": git_head(),
            "kernel_file": f"kernels/{op}/{name}.py",
            "kernel_sha256": ksha,
            "campaign_plan_sha256": sha256_file(HERE / "campaign_plan.py"),
            "run_campaign_sha256": sha256_file(HERE / "run_campaign.py"),
        },
        "environment": env,
        "model": {"op": op, "kernel": name, "entry": "launch", "smoke": smoke},
        "topology": {"devices": 1, "device": device, "device_index": 0},
        "command": command,
        "environment_variables": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
        "artifacts": [
            {
                "name": "kernel",
                "kind": "kernel-source",
                "uri": os.path.relpath(kpath, vdir).replace(os.sep, "/"),
                "sha256": ksha,
            },
            {
                "name": "case-matrix",
                "kind": "case-matrix",
                "uri": "case-matrix.json",
                "sha256": sha256_file(matrix_path),
            },
        ],
        "status": "passed" if passed else "failed",
        "created_at": created,
        "updated_at": now(),
    }
    write_json(vdir / "manifest.json", manifest)
    failed = [c["id"] for c in cases if not c["passed"]]
    return op, name, passed, failed


# --- phase 3/4: timing -------------------------------------------------------------------


def bench(fn, smoke: bool) -> list[float]:
    """Per-repeat times in milliseconds."""
    if smoke:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return times
    import triton.testing

    return [
        float(v)
        for v in triton.testing.do_bench(
            fn, warmup=plan.BENCH_WARMUP_MS, rep=plan.BENCH_REP_MS, return_mode="all"
        )
    ]


def write_samples(path: Path, sessions, op, kernel, case_id, label, smoke, started):
    """One measurement: BENCH_SESSIONS do_bench sessions, samples pooled in time order."""
    samples = [v for session in sessions for v in session]
    write_json(
        path,
        {
            "unit": "ms",
            "samples": samples,
            "samples_us": [plan.ms_to_us(v) for v in samples],
            "session_lengths": [len(s) for s in sessions],
            "session_medians_us": [plan.median([plan.ms_to_us(v) for v in s]) for s in sessions],
            "op": op,
            "kernel": kernel,
            "kernel_sha256": sha256_file(kernel_file(op, kernel)),
            "case_id": case_id,
            "measurement": label,
            "timer": "wall-clock stand-in (smoke)"
            if smoke
            else "triton.testing.do_bench(return_mode='all')",
            "warmup_ms": plan.BENCH_WARMUP_MS,
            "rep_ms": plan.BENCH_REP_MS,
            "sessions": len(sessions),
            "output_buffer": "one preallocated buffer per case, shared by all kernels",
            "started_at": started,
        },
    )
    return plan.median([plan.ms_to_us(v) for v in samples])


def case_buffers(op: str, case: dict, smoke: bool):
    """Inputs (seed 1000) and one output buffer per case; every kernel uses the same ones."""
    import torch

    x, weight = make_inputs(op, case_shape(case, smoke), case["dtype"], 1000, device_name(smoke))
    return x, weight, torch.empty_like(x)


def measure(op: str, modules: dict, names: list[str], bufs, smoke: bool) -> dict:
    """BENCH_SESSIONS rounds; in each, every kernel gets one do_bench session in turn."""
    x, weight, out = bufs
    sessions: dict = {k: [] for k in names}
    gc.disable()  # no collector pauses inside a session
    try:
        for _ in range(plan.BENCH_SESSIONS):
            for k in names:
                fn = functools.partial(call, op, modules[k], x, weight, out)
                sessions[k].append(bench(fn, smoke))
    finally:
        gc.enable()
    return sessions


def time_op(op: str, kernels: list[str], out: Path, smoke: bool) -> dict:
    """Every passing kernel on every case; kernels interleaved within a case."""
    modules = {k: load_kernel(op, k) for k in kernels}
    medians: dict = {k: {} for k in kernels}
    for case in plan.CASES:
        bufs = case_buffers(op, case, smoke)
        for k in kernels:
            call(op, modules[k], *bufs)  # JIT load outside the timed region
        started = now()
        sessions = measure(op, modules, kernels, bufs, smoke)
        for k in kernels:
            medians[k][case["id"]] = write_samples(
                out / op / "raw" / k / f"{case['id']}.json",
                sessions[k],
                op,
                k,
                case["id"],
                "main",
                smoke,
                started,
            )
    return medians


def aa_op(op: str, best: str, out: Path, smoke: bool) -> list[dict]:
    """AA_SESSIONS more measurements of the best kernel, each like a main one."""
    modules = {best: load_kernel(op, best)}
    bufs = {c["id"]: case_buffers(op, c, smoke) for c in plan.CASES}
    rows = []
    for k in range(1, plan.AA_SESSIONS + 1):
        row = {}
        for case in plan.CASES:
            started = now()
            sessions = measure(op, modules, [best], bufs[case["id"]], smoke)
            row[case["id"]] = write_samples(
                out / op / "raw" / f"aa-{k}" / f"{case['id']}.json",
                sessions[best],
                op,
                best,
                case["id"],
                f"aa-{k}",
                smoke,
                started,
            )
        rows.append(row)
    return rows


def noise_probe(out: Path, smoke: bool) -> dict:
    """Why did single sessions of short kernels disagree in the pilot? Same kernel, same
    inputs, 8 single do_bench sessions each: the output allocated per call (the pilot's
    policy) against one fixed output buffer; host seconds per session are recorded too."""
    op, kernel = "softmax", "s0_base"
    module = load_kernel(op, kernel)
    result: dict = {"op": op, "kernel": kernel, "rep_ms": plan.BENCH_REP_MS, "cases": {}}
    for case_id in ("bf16-8192x128", "fp16-32x4097"):
        case = next(c for c in plan.CASES if c["id"] == case_id)
        x, weight, fixed = case_buffers(op, case, smoke)
        rows: dict = {"alloc_per_call": [], "fixed_output": []}
        for _ in range(8):
            for mode in rows:
                buf = fixed if mode == "fixed_output" else None
                t0 = time.perf_counter()
                samples = bench(functools.partial(call, op, module, x, weight, buf), smoke)
                rows[mode].append(
                    {
                        "median_us": plan.median([plan.ms_to_us(v) for v in samples]),
                        "repeats": len(samples),
                        "host_s": round(time.perf_counter() - t0, 4),
                    }
                )
        result["cases"][case_id] = rows
    write_json(out / "noise-probe.json", result)
    return result


# --- phase 5: Nsight Compute ---------------------------------------------------------------


def ncu_target(op: str, kernels: list[str], out: Path) -> None:
    """Run under ncu: one launch per kernel per profile case, in a recorded order."""
    import torch

    modules = {k: load_kernel(op, k) for k in kernels}
    launches = []
    for case_id in plan.PROFILE_CASES:
        case = next(c for c in plan.CASES if c["id"] == case_id)
        x, weight = make_inputs(op, case["shape"], case["dtype"], 1000, "cuda")
        for k in kernels:
            call(op, modules[k], x, weight)
            torch.cuda.synchronize()
            launches.append({"index": len(launches), "kernel": k, "case_id": case_id})
    write_json(out / op / "profiles" / "ncu-launches.json", launches)


def run_ncu(op: str, kernels: list[str], out: Path) -> dict:
    pdir = out / op / "profiles"
    pdir.mkdir(parents=True, exist_ok=True)
    cmd = [
        shutil.which("ncu") or "ncu",
        "--clock-control",
        "none",
        "--csv",
        "--print-units",
        "base",
        "--kernel-name",
        "regex:^kl_",
        "--section",
        "SpeedOfLight",
        "--section",
        "Occupancy",
        "--section",
        "LaunchStats",
        "--metrics",
        NCU_METRICS,
        sys.executable,
        str(HERE / "run_campaign.py"),
        "--out",
        str(out),
        "--ncu-target",
        op,
        "--kernels",
        ",".join(kernels),
    ]
    t0 = time.time()
    code, stdout, stderr = sh(cmd, timeout=150)
    (pdir / "ncu.csv").write_text(stdout)
    (pdir / "ncu.log").write_text(f"$ {' '.join(cmd)}\nrc={code}\n{stderr}")
    return {"rc": code, "seconds": round(time.time() - t0, 1), "command": cmd}


# --- main --------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE), help="output folder (default: here)")
    parser.add_argument("--ops", default=",".join(plan.OPS), help="comma-separated ops")
    parser.add_argument("--jobs", type=int, default=8, help="validation worker processes")
    parser.add_argument("--skip-ncu", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="CPU interpreter plumbing test")
    parser.add_argument("--ncu-target", help=argparse.SUPPRESS)
    parser.add_argument("--kernels", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    if args.ncu_target:
        ncu_target(args.ncu_target, args.kernels.split(","), out)
        return 0
    if args.smoke:
        os.environ["TRITON_INTERPRET"] = "1"
    ops = [o for o in args.ops.split(",") if o]
    command = ["python3", "run_campaign.py", *(argv if argv is not None else sys.argv[1:])]
    out.mkdir(parents=True, exist_ok=True)
    phases: dict = {}
    t_start = time.time()

    env = collect_environment(args.smoke)
    env["started_at"] = now()
    if not args.smoke and not args.skip_ncu:
        env["ncu"] = probe_ncu(out)
        print("ncu probe:", json.dumps({k: env["ncu"].get(k) for k in ("ok", "rc", "reason")}))
    phases["environment_s"] = round(time.time() - t_start, 1)
    write_json(out / "environment.json", env)

    # validation, in parallel worker processes
    t0 = time.time()
    jobs = [(op, k) for op in ops for k in plan.kernel_names(op)]
    validation: dict = {op: {} for op in ops}
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=ctx) as pool:
        futures = [
            pool.submit(validate_kernel, op, k, str(out), env, command, args.smoke)
            for op, k in jobs
        ]
        for fut in cf.as_completed(futures):
            try:
                op, k, passed, failed = fut.result()
            except Exception:
                traceback.print_exc()
                continue
            validation[op][k] = {"passed": passed, "failed_cases": failed}
            print(f"validate {op}/{k}: {'passed' if passed else 'FAILED ' + ','.join(failed)}")
    phases["validation_s"] = round(time.time() - t0, 1)

    summary: dict = {"ops": {}, "phases": phases, "command": command}
    env["clocks_before_timing"] = None if args.smoke else gpu_clocks()
    for op in ops:
        t0 = time.time()
        passed = {k: validation[op].get(k, {}).get("passed", False) for k in plan.kernel_names(op)}
        timed = [k for k in plan.kernel_names(op) if passed[k]]
        if not passed[plan.OPS[op]["start"]]:
            print(f"{op}: the starting kernel failed validation; nothing timed")
            summary["ops"][op] = {"validation": validation[op], "error": "start kernel failed"}
            continue
        medians = time_op(op, timed, out, args.smoke)
        phases[f"{op}_timing_s"] = round(time.time() - t0, 1)
        rounds = plan.simulate(op, medians, passed)
        best = rounds[-1]["best_after"] if rounds else plan.OPS[op]["start"]
        t0 = time.time()
        aa = aa_op(op, best, out, args.smoke)
        phases[f"{op}_aa_s"] = round(time.time() - t0, 1)
        summary["ops"][op] = {
            "validation": validation[op],
            "medians_us": medians,
            "simulated_rounds": rounds,
            "best": best,
            "aa_medians_us": aa,
        }
    t0 = time.time()
    summary["noise_probe"] = noise_probe(out, args.smoke)
    phases["noise_probe_s"] = round(time.time() - t0, 1)
    env["clocks_after_timing"] = None if args.smoke else gpu_clocks()

    if not args.smoke and not args.skip_ncu and env.get("ncu", {}).get("ok"):
        for op in summary["ops"]:
            timed = [k for k in plan.kernel_names(op) if validation[op].get(k, {}).get("passed")]
            t0 = time.time()
            summary["ops"][op]["ncu"] = run_ncu(op, timed, out)
            phases[f"{op}_ncu_s"] = round(time.time() - t0, 1)
    env["finished_at"] = now()
    phases["total_s"] = round(time.time() - t_start, 1)
    write_json(out / "environment.json", env)
    write_json(out / "campaign-summary.json", summary)

    # the short table last
    for op, info in summary["ops"].items():
        if "medians_us" not in info:
            continue
        print(f"\n== {op}: medians (us) ==")
        ids = [c["id"] for c in plan.CASES]
        print(f"{'kernel':22s}" + "".join(f"{i:>17s}" for i in ids))
        for k, row in info["medians_us"].items():
            print(f"{k:22s}" + "".join(f"{row[i]:17.2f}" for i in ids))
        for r in info["simulated_rounds"]:
            imp = "" if r["improvement"] is None else f" I={r['improvement']:+.4f}"
            reg = "" if r["regression"] is None else f" R={r['regression']:+.4f}"
            flag = "" if r["lineage_ok"] else "  LINEAGE-MISMATCH"
            print(f"round {r['round']}: {r['candidate']:20s} {r['decision']:8s}{imp}{reg}{flag}")
        print("A/A medians of", info["best"], ":")
        for row in info["aa_medians_us"]:
            print("   ", " ".join(f"{row[i]:.2f}" for i in ids))
        if "ncu" in info:
            print("ncu rc:", info["ncu"]["rc"], "in", info["ncu"]["seconds"], "s")
    for case_id, rows in summary["noise_probe"]["cases"].items():
        for mode, runs in rows.items():
            meds = " ".join(f"{r['median_us']:.2f}" for r in runs)
            print(f"noise probe {case_id} {mode}: {meds}")
    print("\nphases:", json.dumps(phases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
