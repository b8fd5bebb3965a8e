"""Capture a corpus of Triton optimization campaigns into a kernel-ledger ledger.

    python3 run_corpus.py --out DIR [--budget-s 480] [--ops a,b] [--repeats 40]
                          [--campaign 1|2] [--tiny] [--no-ncu]
                          [--ledger-cmd "python3 -m cli" | --ledger-cmd in-process]

For each op in ops/ (in order, while the wall-clock budget lasts): check the baseline against
a float64 torch reference on every case, time it, `plan` a run through the real command
line; then for each candidate variant in order: check it on every case (a failing case goes
into the round's case matrix: FAIL), time it interleaved with the current best
(ledger/harness/measure.py), `record` the round and take the candidate as the new best on
KEEP. Afterwards one ncu process per op profiles every kernel on every case, `profile` puts
them into the ledger, `analyze` concludes each run and `export` writes one bundle per run.
Everything lands under DIR (ledger.sqlite3, kernels, validation, raw samples, rounds, ncu,
environment.json, summary.json). `--tiny` runs tiny shapes (Triton's interpreter on a CPU:
TRITON_INTERPRET=1); its output is no evidence of speed.

`--campaign 2` is a second campaign per op, as another engineer would run it on other
shapes: each op's `CASES_2` (other shapes and dtypes), the same variants in reverse order,
runs `corpus-OP-002`. `--ledger-cmd in-process` calls the same command line (cli.app.main)
in this process instead of starting one per call (the same arguments, output and exit
codes; a second or two less per call).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import importlib
import io
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "ledger" / "harness"))
sys.path.append(str(REPO))  # cli, for --ledger-cmd in-process

# matmul and attention first: when the budget runs short, the ops left are the simple ones
OPS = [
    "swiglu",
    "gemm",
    "flash_attention",
    "cross_entropy",
    "add_rmsnorm",
    "decode_attention",
    "cumsum",
    "embedding",
    "transpose",
    # issue 32's five (capture them alone with --ops gemv,argmax,...)
    "gemv",
    "argmax",
    "token_quant_int8",
    "causal_conv1d",
    "kv_cache_scatter",
    # four more, captured alone too (--ops topk_softmax,w8a16_gemm,adamw,col_sum)
    "topk_softmax",
    "w8a16_gemm",
    "adamw",
    "col_sum",
]
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
REL_L2 = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}  # bound on ||out-ref|| / ||ref||
SEEDS = (11, 12)
OBJECTIVE = {
    "target_relative_improvement": 0.1,
    "min_relative_improvement": 0.02,
    "noise_floor": 0.01,
    "max_case_regression": 0.1,
}
NCU_SECTIONS = ["SpeedOfLight", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis"]
CAMPAIGN = "kernel-corpus-h200"
T0 = time.time()
SECOND = {"number": 1}  # which campaign this process captures (--campaign)


def cases_of(op) -> list[dict]:
    """The op's cases in this campaign: CASES, or CASES_2 for the second."""
    return op.CASES_2 if SECOND["number"] == 2 else op.CASES


def variants_of(op) -> list[dict]:
    """The op's variants in the order this campaign tries them (the second: reversed)."""
    return list(reversed(op.VARIANTS)) if SECOND["number"] == 2 else list(op.VARIANTS)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, value) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1) + "\n")
    return path


def log(*parts) -> None:
    print(f"[{time.time() - T0:6.1f}s]", *parts, flush=True)


def sh(cmd: list[str], timeout: float | None = None, cwd: Path | None = None):
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        return 124, exc.stdout or "", f"timed out after {timeout}s"
    except FileNotFoundError as exc:
        return 127, "", str(exc)


class Ledger:
    """The real command line, on one ledger; every call and its answer is logged."""

    def __init__(self, base: list[str], db: str, logfile: Path, cwd: Path):
        self.base, self.db, self.logfile, self.cwd = base, db, logfile, cwd

    def __call__(self, *args: str) -> tuple[int, dict | None, str]:
        cmd = [*self.base, *args, "--db", self.db, "--json"]
        return self.answer(shlex.join(cmd), *sh(cmd, cwd=self.cwd))

    def answer(self, shown: str, code: int, out: str, err: str) -> tuple[int, dict | None, str]:
        """The call logged; its exit code, its JSON answer (None if none) and its stderr."""
        with self.logfile.open("a") as fh:
            fh.write(f"$ {shown}\nrc={code}\n{out}{err}\n")
        try:
            doc = json.loads(out) if out.strip() else None
        except json.JSONDecodeError:
            doc = None
        return code, doc, err.strip()


class InProcessLedger(Ledger):
    """The same command line, called in this process (cli.app.main) from `cwd`."""

    def __call__(self, *args: str) -> tuple[int, dict | None, str]:
        from cli.app import main as cli_main

        argv = [*args, "--db", self.db, "--json"]
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with (
            contextlib.chdir(self.cwd),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                cli_main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        return self.answer(
            f"kernel-ledger {shlex.join(argv)}", code, out.getvalue(), err.getvalue()
        )


def environment(device: str) -> dict:
    import torch
    import triton

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
        "device": device,
        "interpret": os.environ.get("TRITON_INTERPRET") == "1",
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=props.name,
            sm_count=props.multi_processor_count,
            compute_capability=f"{props.major}.{props.minor}",
            l2_cache_bytes=getattr(props, "L2_cache_size", None),
        )
        code, out, _ = sh(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw",
                "--format=csv",
            ]
        )
        env["nvidia_smi"] = out.strip() if code == 0 else None
        code, out, _ = sh(["nvidia-smi"])
        env["nvidia_smi_full"] = out if code == 0 else None
    return env


def kernel_file(out: Path, op, name: str) -> Path:
    """The kernel a round names: the op's module with this variant's parameters selected."""
    path = out / "kernels" / op.NAME / f"{name}.py"
    if not path.exists():
        params = json.dumps(CURRENT_PARAMS[(op.NAME, name)], sort_keys=True)
        source = Path(op.__file__).read_text()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"{source}\n\n# the variant this file is\nVARIANT = {name!r}\nPARAMS = {params}\n"
        )
    return path


CURRENT_PARAMS: dict[tuple[str, str], dict] = {}
INPUTS: dict[tuple, tuple] = {}  # (op, case, seed) -> (inputs, float64 reference), one op at a time


def shape_of(case: dict, tiny: bool) -> list[int]:
    return case["tiny"] if tiny else case["shape"]


def check(op, params: dict, case: dict, tiny: bool, device: str) -> dict:
    """Fresh inputs per seed, output poisoned with NaN, rel-L2 against float64 torch."""
    import torch

    dtype = getattr(torch, DTYPES[case["dtype"]])
    bound = REL_L2[case["dtype"]] * (4.0 if tiny else 1.0)
    checks = []
    for seed in SEEDS:
        key = (op.NAME, case["id"], seed)
        if key not in INPUTS:  # inputs and the float64 reference depend on the seed alone
            x = op.make_inputs(shape_of(case, tiny), dtype, seed, device)
            INPUTS[key] = (x, op.reference(x))
        x, ref = INPUTS[key]
        x["out"].fill_(float("nan")) if x["out"].is_floating_point() else x["out"].fill_(-1)
        try:
            got = op.launch(params, x)
            if device == "cuda":
                torch.cuda.synchronize()
            got64 = got.double()
            ref64 = ref.double().reshape(got64.shape)
            finite = bool(torch.isfinite(got64).all()) or not bool(torch.isfinite(ref64).all())
            err = float((got64 - ref64).norm() / ref64.norm().clamp_min(1e-30))
            del got64
            ok = finite and err <= bound
            checks.append(
                {
                    "seed": seed,
                    "rel_l2": err if err == err and err != float("inf") else str(err),
                    "bound": bound,
                    "all_written": finite,
                    "passed": ok,
                }
            )
        except Exception as exc:  # a kernel that does not compile or crashes fails the case
            checks.append(
                {"seed": seed, "passed": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
            )
    return {
        "id": case["id"],
        "dtype": case["dtype"],
        "shape": shape_of(case, tiny),
        "passed": all(c["passed"] for c in checks),
        "checks": checks,
    }


def validate(
    op, name: str, params: dict, out: Path, run_id: str, env: dict, tiny: bool, device: str
) -> tuple[Path, bool, list[str]]:
    kpath = kernel_file(out, op, name)
    ksha = sha256_file(kpath)
    vdir = out / "validation" / op.NAME / name
    created = now()
    cases = [check(op, params, c, tiny, device) for c in cases_of(op)]
    passed = all(c["passed"] for c in cases)
    matrix = write_json(
        vdir / "case-matrix.json",
        {
            "kernel": {"sha256": ksha, "name": name, "file": os.path.relpath(kpath, vdir)},
            "op": op.NAME,
            "reference": "torch float64 (run_corpus.py reference())",
            "rule": "rel_l2 = ||out-ref||/||ref|| <= bound per dtype, output poisoned first",
            "bounds": REL_L2,
            "seeds": list(SEEDS),
            "tiny": tiny,
            "passed": passed,
            "cases": cases,
        },
    )
    manifest = {
        "schema_version": 1,
        "run_id": f"{run_id}.validate.{name}",
        "parent_run_id": run_id,
        "run_type": "correctness",
        "workspace_snapshot": {
            "campaign": CAMPAIGN,
            "kernel_sha256": ksha,
            "run_corpus_sha256": sha256_file(Path(__file__)),
        },
        "environment": {k: v for k, v in env.items() if k != "nvidia_smi_full"},
        "model": {"op": op.NAME, "kernel": name, "params": params},
        "topology": {"devices": 1, "device": device},
        "command": [sys.executable, "run_corpus.py"],
        "environment_variables": {
            k: os.environ[k] for k in ("TRITON_INTERPRET",) if k in os.environ
        },
        "artifacts": [
            {
                "name": "kernel",
                "kind": "kernel-source",
                "uri": os.path.relpath(kpath, vdir),
                "sha256": ksha,
            },
            {
                "name": "case-matrix",
                "kind": "case-matrix",
                "uri": "case-matrix.json",
                "sha256": sha256_file(matrix),
            },
        ],
        "status": "passed" if passed else "failed",
        "created_at": created,
        "updated_at": now(),
    }
    path = write_json(vdir / "manifest.json", manifest)
    return path, passed, [c["id"] for c in cases if not c["passed"]]


def measure(
    op,
    cand: dict,
    ref: dict | None,
    tiny: bool,
    device: str,
    repeats: int,
    raw: Path,
    ref_sha: str | None,
):
    import torch
    from measure import Harness

    harness = Harness(timer="cuda" if device == "cuda" else "wall")
    for case in cases_of(op):
        dtype = getattr(torch, DTYPES[case["dtype"]])
        key = (op.NAME, case["id"], "timing")
        if key not in INPUTS:  # one input set per case, shared by both sides of every round
            INPUTS[key] = (op.make_inputs(shape_of(case, tiny), dtype, 1000, device), None)
        x = INPUTS[key][0]
        harness.add_case(
            case["id"],
            candidate=lambda x=x: op.launch(cand, x),
            reference=(lambda x=x: op.launch(ref, x)) if ref else None,
        )
    result = harness.run(repeats=repeats)
    return result.write(raw, reference_sha256=ref_sha)


def rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def start_run(op, run_id: str, out: Path, ledger: Ledger, env: dict, args, device: str):
    """Check and time the baseline, write the run's config and `plan` it. The summary, and
    the baseline's parameters when the run was planned (else None)."""
    sms = env.get("sm_count") or 4
    summary = {"run_id": run_id, "family": op.FAMILY, "rounds": [], "kernels": []}
    base = {**op.BASELINE["params"], "sms": sms}
    CURRENT_PARAMS[(op.NAME, op.BASELINE["name"])] = base
    manifest, passed, failed = validate(
        op, op.BASELINE["name"], base, out, run_id, env, args.tiny, device
    )
    if not passed:
        summary["skipped"] = f"baseline fails correctness on {failed}"
        return summary, None
    kpath = kernel_file(out, op, op.BASELINE["name"])
    frag = measure(
        op,
        base,
        None,
        args.tiny,
        device,
        args.repeats,
        out / "raw" / op.NAME / op.BASELINE["name"],
        None,
    )
    config = {
        "schema_version": 1,
        "run_id": run_id,
        "parent_run_id": CAMPAIGN,
        "op_name": op.NAME,
        "kernel": {"path": rel(kpath, out)},
        "validation_manifest": rel(manifest, out),
        "target": {
            "soc": env.get("gpu_name") or "cpu-interpreter",
            **{
                k: env.get(k)
                for k in ("sm_count", "compute_capability", "torch", "triton")
                if env.get(k) is not None
            },
        },
        "op_family": op.FAMILY,
        "cases": [
            {"id": c["id"], "weight": 1.0, "dtype": c["dtype"], "shape": shape_of(c, args.tiny)}
            for c in cases_of(op)
        ],
        "baseline": [{**m, "source": rel(Path(m["source"]), out)} for m in frag["measurements"]],
        "objective": OBJECTIVE,
        "max_rounds": getattr(args, "max_rounds", None) or len(op.VARIANTS) + 1,
        "max_consecutive_failures": getattr(args, "max_rounds", None) or len(op.VARIANTS) + 1,
        "campaign": SECOND["number"],
        "measurement_policy": {
            "harness": "ledger/harness/measure.py",
            "timer": frag["session"].get("timer"),
            "repeats": args.repeats,
            "flush": frag["session"].get("flush"),
            "interleaved": "candidate and current best, alternating order per sample",
        },
        "environment": {k: v for k, v in env.items() if k != "nvidia_smi_full"},
    }
    cfg_path = write_json(out / "inputs" / op.NAME / "config.json", config)
    code, _, err = ledger("plan", "--config", rel(cfg_path, out))
    summary["plan"] = {"rc": code, "error": err or None}
    if code != 0:
        return summary, None
    summary["kernels"].append(op.BASELINE["name"])
    return summary, base


def try_variant(
    op,
    var: dict,
    number: int,
    best_name: str,
    best: dict,
    run_id: str,
    out: Path,
    ledger,
    env,
    args,
    device: str,
) -> dict:
    """One round: the variant's parameters on top of the current best, checked, timed
    interleaved with the best (when it passed) and `record`ed. The summary's row of it."""
    cand = {**best, **var["params"]}
    CURRENT_PARAMS[(op.NAME, var["name"])] = cand
    cpath = kernel_file(out, op, var["name"])
    manifest, passed, failed = validate(op, var["name"], cand, out, run_id, env, args.tiny, device)
    result = {
        "schema_version": 1,
        "round": number,
        "parent_kernel_sha256": sha256_file(kernel_file(out, op, best_name)),
        "candidate": {"path": rel(cpath, out)},
        "hypothesis": var["hypothesis"],
        "change": var["change"],
        "mechanism": var["mechanism"],
        "verification": {"manifest": rel(manifest, out)},
        "derived_from": best_name,
    }
    if "expected_signal" in var:
        result["expected_signal"] = var["expected_signal"]
    if passed:
        frag = measure(
            op,
            cand,
            best,
            args.tiny,
            device,
            args.repeats,
            out / "raw" / op.NAME / var["name"],
            result["parent_kernel_sha256"],
        )
        result["session"] = frag["session"]
        result["measurements"] = [
            {**m, "source": rel(Path(m["source"]), out)} for m in frag["measurements"]
        ]
        result["reference"] = {
            **frag["reference"],
            "measurements": [
                {**m, "source": rel(Path(m["source"]), out)}
                for m in frag["reference"]["measurements"]
            ],
        }
    rpath = write_json(out / "inputs" / op.NAME / "rounds" / f"round-{number}.json", result)
    code, doc, err = ledger("record", "--run", run_id, "--result", rel(rpath, out))
    decision = (doc or {}).get("decision") if isinstance(doc, dict) else None
    if isinstance(decision, dict):
        decision = decision.get("decision") or decision.get("value")
    improvement = (doc or {}).get("relative_improvement") if isinstance(doc, dict) else None
    row = {
        "round": number,
        "variant": var["name"],
        "mechanism": var["mechanism"],
        "rc": code,
        "decision": decision,
        "failed_cases": failed,
        "error": err or None,
    }
    if improvement is not None:
        row["relative_improvement"] = improvement
    log(f"{op.NAME} round {number} {var['name']}: {decision} rc={code} {err[:200]}")
    return row


def run_op(op, out: Path, ledger: Ledger, env: dict, args, device: str) -> dict:
    run_id = f"corpus-{op.NAME.replace('_', '-')}-{SECOND['number']:03d}"
    summary, base = start_run(op, run_id, out, ledger, env, args, device)
    if base is None:
        return summary
    best_name, best = op.BASELINE["name"], base
    number = 0
    for var in variants_of(op):
        number += 1
        if time.time() - T0 > args.budget_s * 0.85:
            summary["rounds"].append({"variant": var["name"], "skipped": "budget"})
            number -= 1
            continue
        row = try_variant(op, var, number, best_name, best, run_id, out, ledger, env, args, device)
        summary["rounds"].append(row)
        if row["rc"] != 0:  # rejected: nothing written, the ledger's next round is still this one
            number -= 1
            continue
        summary["kernels"].append(var["name"])
        if row["decision"] == "KEEP":
            best_name, best = var["name"], CURRENT_PARAMS[(op.NAME, var["name"])]
    summary["best"] = best_name
    return summary


# --- ncu ----------------------------------------------------------------------------------


def ncu_target(module: str, kernels: list[str], params_file: Path) -> None:
    """Under ncu: every kernel once per case, each launch alone in a profiler range; the
    launches are listed next to the params file."""
    import torch

    op = importlib.import_module(module)
    params = json.loads(params_file.read_text())
    launches, skipped = [], []
    for case in cases_of(op):
        dtype = getattr(torch, DTYPES[case["dtype"]])
        x = op.make_inputs(case["shape"], dtype, 1000, "cuda")
        for name in kernels:
            try:
                op.launch(params[name], x)  # compile and warm outside the range
                torch.cuda.synchronize()
            except Exception as exc:  # a variant that does not build for this case (a FAIL)
                skipped.append({"kernel": name, "case_id": case["id"], "error": str(exc)[:300]})
                continue
            torch.cuda.cudart().cudaProfilerStart()
            op.launch(params[name], x)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
            launches.append({"index": len(launches), "kernel": name, "case_id": case["id"]})
    write_json(params_file.parent / "launches.json", launches)
    write_json(params_file.parent / "not-profiled.json", skipped)


def run_ncu(op, kernels: list[str], pdir: Path, timeout: float) -> dict:
    """One ncu process over `kernels` of `op` on every case, its CSV and log in `pdir`."""
    pdir.mkdir(parents=True, exist_ok=True)
    params = {k: CURRENT_PARAMS[(op.NAME, k)] for k in kernels}
    pfile = write_json(pdir / "params.json", params)
    sections = [a for s in NCU_SECTIONS for a in ("--section", s)]
    cmd = [
        shutil.which("ncu") or "ncu",
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--csv",
        "--print-units",
        "base",
        "--kernel-name",
        "regex:^kl_",
        *sections,
        sys.executable,
        str(Path(__file__).resolve()),
        "--ncu-target",
        op.__name__,
        "--kernels",
        ",".join(kernels),
        "--params",
        str(pfile),
        "--campaign",
        str(SECOND["number"]),
        "--out",
        str(pdir),
    ]
    t0 = time.time()
    code, stdout, stderr = sh(cmd, timeout=timeout)
    (pdir / "ncu.csv").write_text(stdout)
    (pdir / "ncu.log").write_text(f"$ {shlex.join(cmd)}\nrc={code}\n{stderr[-20000:]}")
    return {"rc": code, "seconds": round(time.time() - t0, 1)}


def split_ncu(pdir: Path) -> dict[tuple[str, str], Path]:
    """One CSV per (kernel, case) from the ncu.csv in `pdir`, matched to its launches."""
    text = (pdir / "ncu.csv").read_text() if (pdir / "ncu.csv").exists() else ""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # drop ==PROF== lines
    if not lines or not (pdir / "launches.json").exists():
        return {}
    rows = [r for r in csv.DictReader(io.StringIO("\n".join(lines) + "\n")) if r["ID"].isdigit()]
    header = list(rows[0].keys()) if rows else []
    ids = sorted({r["ID"] for r in rows}, key=int)
    launches = json.loads((pdir / "launches.json").read_text())
    if len(ids) != len(launches):
        (pdir / "MISMATCH").write_text(
            f"ncu profiled {len(ids)} launches, expected {len(launches)}\n"
        )
        return {}
    files = {}
    for launch_id, launch in zip(ids, launches, strict=True):
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=header, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writeheader()
        writer.writerows(r for r in rows if r["ID"] == launch_id)
        path = pdir / f"{launch['kernel']}.{launch['case_id']}.ncu.csv"
        path.write_text(buf.getvalue())
        files[(launch["kernel"], launch["case_id"])] = path
    return files


def profile_op(op, info: dict, out: Path, ledger: Ledger, args) -> None:
    """ncu over every recorded kernel and case, then `profile` each launch into its round."""
    left = args.budget_s - (time.time() - T0) - 15
    if left < 15:
        info["ncu"] = {"skipped": f"budget: {left + 15:.0f}s left"}
        return
    pdir = out / "ncu" / op.NAME
    info["ncu"] = run_ncu(op, info["kernels"], pdir, timeout=min(left, 90))
    files = split_ncu(pdir)
    info["ncu"]["profiles"] = len(files)
    round_of = {r["variant"]: r["round"] for r in info["rounds"] if r.get("rc") == 0}
    ingested = []
    for (kernel, case_id), path in sorted(files.items()):
        if kernel == op.BASELINE["name"]:
            target = ["--baseline"]
        elif kernel in round_of:
            target = ["--round", str(round_of[kernel])]
        else:
            continue
        code, _, err = ledger("profile", "--run", info["run_id"], *target, rel(path, out))
        ingested.append({"kernel": kernel, "case_id": case_id, "rc": code, "error": err or None})
    info["profiles_ingested"] = ingested
    log(f"{op.NAME}: ncu rc={info['ncu']['rc']}, {len(files)} profiles, {info['ncu']['seconds']}s")


# --- main ---------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--campaign", type=int, choices=(1, 2), default=1)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (interpreter)")
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--ledger-cmd", default=f"{sys.executable} -m cli")
    parser.add_argument("--ncu-target", help=argparse.SUPPRESS)
    parser.add_argument("--kernels", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    SECOND["number"] = args.campaign
    if args.ncu_target:
        ncu_target(args.ncu_target, args.kernels.split(","), Path(args.params))
        return 0
    import torch

    out.mkdir(parents=True, exist_ok=True)
    device = (
        "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
    )
    env = environment(device)
    env["started_at"] = now()
    kind = InProcessLedger if args.ledger_cmd == "in-process" else Ledger
    base = shlex.split(args.ledger_cmd)
    if base and os.sep in base[0] and not os.path.isabs(base[0]):
        base[0] = os.path.abspath(base[0])  # the ledger runs in DIR: a relative path would not
    ledger = kind(
        base,
        f"sqlite:///{out / 'ledger.sqlite3'}",
        out / "ledger-commands.log",
        out,
    )
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    summary = {
        "campaign": CAMPAIGN,
        "campaign_number": args.campaign,
        "budget_s": args.budget_s,
        "ops": {},
        "skipped_ops": [],
    }
    ncu_ok = not args.no_ncu and device == "cuda" and shutil.which("ncu") is not None
    reason = "--no-ncu" if args.no_ncu else "no GPU" if device != "cuda" else "ncu not on PATH"
    summary["ncu"] = {"used": ncu_ok, "reason": None if ncu_ok else reason}
    took: list[float] = []
    for name in args.ops.split(","):
        elapsed = time.time() - T0
        guess = max(took) if took else 0.0  # the slowest op so far
        if took and elapsed + guess > args.budget_s - 15:
            summary["skipped_ops"].append(
                {
                    "op": name,
                    "reason": f"budget: {elapsed:.0f}s spent, an op took up to {guess:.0f}s",
                }
            )
            continue
        op = importlib.import_module(f"ops.{name}")
        t0 = time.time()
        try:
            info = run_op(op, out, ledger, env, args, device)
        except Exception as exc:  # one broken op must not lose the others
            info = {"error": f"{type(exc).__name__}: {exc}"[:600]}
        summary["ops"][name] = info
        INPUTS.clear()
        if device == "cuda":
            torch.cuda.empty_cache()
        if info.get("plan", {}).get("rc") == 0:
            if ncu_ok:
                profile_op(op, info, out, ledger, args)
            code, _, err = ledger(
                "analyze", "--run", info["run_id"], "--output-dir", str(out / "analysis" / name)
            )
            info["analyze"] = {"rc": code, "error": err or None}
            bundle = out / "bundles" / f"{info['run_id']}.bundle.jsonl"
            bundle.parent.mkdir(exist_ok=True)
            code, _, err = ledger(
                "export", "--run", info["run_id"], "--out", str(bundle), "--force"
            )
            info["bundle"] = {"rc": code, "path": rel(bundle, out), "error": err or None}
        info["seconds"] = round(time.time() - t0, 1)
        took.append(info["seconds"])
        write_json(out / "summary.json", summary)  # what is done survives a kill
        log(f"{name}: best {info.get('best')} in {info['seconds']}s")
    code, _, err = ledger("verify")
    summary["verify"] = {"rc": code, "error": err or None}
    env["finished_at"] = now()
    write_json(out / "environment.json", env)
    summary["wall_s"] = round(time.time() - T0, 1)
    write_json(out / "summary.json", summary)
    for name, info in summary["ops"].items():
        decisions = " ".join(
            f"{r.get('decision') or r.get('skipped') or r.get('rc')}"
            for r in info.get("rounds", [])
        )
        print(
            f"{name:18s} best={info.get('best')} {decisions}",
            info.get("error") or info.get("skipped") or "",
        )
    print(
        "skipped ops:",
        summary["skipped_ops"],
        "verify rc:",
        summary["verify"]["rc"],
        "wall",
        summary["wall_s"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
