"""The corpus driver (examples/kernel-corpus/run_corpus.py) end to end on the CPU.

Two ops, tiny shapes, 3 repeats, under Triton's interpreter and without ncu, through the real
command line on a temporary SQLite ledger: the runs are planned, every variant becomes a
round, each run is concluded and exported as a bundle that `import` accepts elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaign import kernel_ledger

pytest.importorskip("torch")
pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "examples" / "kernel-corpus" / "run_corpus.py"


def kl(*args: str, db: str) -> dict:
    return kernel_ledger(*args, db=db, cwd=REPO)


def test_driver_captures_two_ops_into_a_ledger(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--out", str(out), "--ops", "swiglu,transpose",
         "--tiny", "--repeats", "3", "--no-ncu", "--ledger-cmd", f"{sys.executable} -m cli"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ncu"] == {"used": False, "reason": "--no-ncu"}
    assert summary["skipped_ops"] == []
    assert summary["verify"]["rc"] == 0
    db = f"sqlite:///{out / 'ledger.sqlite3'}"
    for op, run_id, variants in (("swiglu", "corpus-swiglu-001", 5),
                                 ("transpose", "corpus-transpose-001", 4)):  # fmt: skip
        info = summary["ops"][op]
        assert info["run_id"] == run_id
        recorded = [r for r in info["rounds"] if r.get("rc") == 0]
        assert len(recorded) == variants, info["rounds"]
        assert {r["decision"] for r in recorded} <= {"KEEP", "DISCARD", "NOISE", "FAIL"}
        for row in recorded:
            shown = kl("show", "--run", run_id, "--round", str(row["round"]), db=db)
            assert json.dumps(shown).count(row["mechanism"]) >= 1
        run = kl("status", "--run", run_id, db=db)["run"]
        assert (run["run_id"], run["op_name"], run["status"]) == (run_id, op, "concluded")
        assert info["analyze"]["rc"] == 0 and info["bundle"]["rc"] == 0
        bundle = out / info["bundle"]["path"]
        assert bundle.stat().st_size > 0
        # the bundle is a real export: a fresh ledger imports it
        fresh = f"sqlite:///{tmp_path / (op + '.sqlite3')}"
        kl("import", str(bundle), db=fresh)
    # the failing case of a precision shortcut lands in the round's case matrix
    matrix = json.loads(
        (out / "validation" / "swiglu" / "sw4_native_precision" / "case-matrix.json").read_text()
    )
    assert {c["id"] for c in matrix["cases"]} == {
        "fp16-8192x4096", "bf16-4096x11008", "fp16-16x4096", "bf16-16384x1024"}  # fmt: skip
    raw = list((out / "raw" / "swiglu").rglob("*.json"))
    assert raw and all(json.loads(p.read_text())["unit"] == "us" for p in raw)


def test_second_campaign_runs_other_cases_in_reverse_order_in_process(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--out", str(out), "--ops", "transpose", "--campaign", "2",
         "--tiny", "--repeats", "3", "--no-ncu", "--ledger-cmd", "in-process"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["campaign_number"] == 2 and summary["verify"]["rc"] == 0
    info = summary["ops"]["transpose"]
    assert info["run_id"] == "corpus-transpose-002"
    assert [r["variant"] for r in info["rounds"]] == [
        "tr4_evict_first", "tr3_grouped_order", "tr2_warps8", "tr1_tile64"]  # fmt: skip
    db = f"sqlite:///{out / 'ledger.sqlite3'}"
    cases = kl("status", "--run", "corpus-transpose-002", db=db)
    shown = json.dumps(cases)
    for case_id in ("bf16-4096x4096", "fp16-2048x8192", "fp32-8192x1024", "bf16-3000x1000"):
        assert case_id in shown
    rounds = kl("history", "--run", "corpus-transpose-002", db=db)["rounds"]
    assert [r["mechanism"] for r in rounds] == [
        "eviction hint", "tile order / swizzled grid", "num_warps", "tile shape"]  # fmt: skip
    # the in-process calls are logged as the command line would be called
    assert (out / "ledger-commands.log").read_text().count("$ kernel-ledger record") == 4


def test_a_campaign_follows_the_suggestions_in_their_order(tmp_path: Path) -> None:
    out = tmp_path / "follow"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "examples" / "kernel-corpus" / "follow_suggestions.py"),
         "--out", str(out), "--tiny", "--repeats", "3", "--no-ncu", "--rounds", "3"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = json.loads((out / "follow-log.json").read_text())
    assert log["run_id"] == "outside-softmax-001" and log["verify"]["rc"] == 0
    assert len(log["history_runs"]) >= 8 and "outside-softmax-001" not in log["history_runs"]
    assert [r["round"] for r in log["rounds"]] == [1, 2, 3]
    sys.path.insert(0, str(REPO / "examples" / "kernel-corpus"))
    from outside import softmax

    db = f"sqlite:///{out / 'ledger.sqlite3'}"
    recorded = kl("history", "--run", "outside-softmax-001", db=db)["rounds"]
    used: set[str] = set()
    for row, done in zip(log["rounds"], recorded, strict=True):
        # the entry followed is the first suggested one with a variant not yet tried
        first = next(
            s["entry"]
            for s in row["suggested"]
            if s["entry"] in softmax.MENU and softmax.MENU[s["entry"]]["name"] not in used
        )
        assert row["followed"] == first
        assert row["suggested"][row["rank"] - 1]["entry"] == first
        assert all(e not in softmax.MENU for e in row["passed_over"])
        used.add(row["variant"])
        assert done["mechanism"] == softmax.MENU[first]["mechanism"]
        assert done["decision"] == row["decision"]
    assert "| 1 |" in (out / "follow-log.md").read_text()


NEW_OPS = ("gemv", "argmax", "token_quant_int8", "causal_conv1d", "kv_cache_scatter")


def test_the_new_ops_variants_name_one_vocabulary_entry_each() -> None:
    sys.path.insert(0, str(REPO / "examples" / "kernel-corpus"))
    import importlib

    from ledger.core.mechanisms import classify

    entries = set()
    for name in NEW_OPS:
        op = importlib.import_module(f"ops.{name}")
        assert 4 <= len(op.VARIANTS) <= 6 and len(op.CASES) == len(op.CASES_2) == 4
        assert all("tiny" in c for c in op.CASES + op.CASES_2)
        found = [classify(v["mechanism"], v["change"]).entry for v in op.VARIANTS]
        assert "other" not in found and len(set(found)) == len(found), (name, found)
        entries.update(found)
    assert {"vector-width", "masking", "recompute-vs-reuse", "split-reduction"} <= entries


def test_a_new_op_becomes_rounds_under_the_interpreter(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--out", str(out), "--ops", "argmax",
         "--tiny", "--repeats", "3", "--no-ncu", "--ledger-cmd", "in-process"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["ops"]) == ["argmax"]
    assert summary["verify"]["rc"] == 0
    for info in summary["ops"].values():
        assert info["plan"]["rc"] == 0 and info["bundle"]["rc"] == 0
        assert [r["rc"] for r in info["rounds"]] == [0] * 5, info["rounds"]
    # the split argmax (atomics, last part writes) passes on every case, ties included
    matrix = json.loads((out / "validation" / "argmax" / "am1_split16" / "case-matrix.json")
                        .read_text())  # fmt: skip
    assert matrix["passed"]


TIES = """
import torch
from ops import argmax
x = argmax.make_inputs([4, 5000], torch.float32, 3, "cpu")
logits = x["x"]
logits[0] = -5.0
logits[0, 4000] = logits[0, 1200] = -1.0  # all negative, tied across parts
logits[1] = 2.0  # all equal: index 0
logits[2, 3000] = logits[2, 4999] = 50.0
want = torch.argmax(logits, dim=1)
for split in (1, 4, 16):
    for _ in range(2):  # each launch leaves the workspace as it found it
        got = argmax.launch({**argmax.BASELINE["params"], "SPLIT": split}, x)
        assert torch.equal(got, want), (split, got, want)
        assert int(x["count"].sum()) == 0
        assert bool((x["best"] == argmax.INT64_MIN).all())
print("ok")
"""


def test_the_split_argmax_keeps_the_first_of_tied_maxima() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", TIES], capture_output=True, text=True, env=env, timeout=300,
        cwd=REPO / "examples" / "kernel-corpus",
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


FOUR_OPS = ("topk_softmax", "w8a16_gemm", "adamw", "col_sum")


def test_the_four_later_ops_variants_name_one_vocabulary_entry_each() -> None:
    sys.path.insert(0, str(REPO / "examples" / "kernel-corpus"))
    import importlib

    from ledger.core.mechanisms import classify

    for name in FOUR_OPS:
        op = importlib.import_module(f"ops.{name}")
        assert name == op.NAME and 4 <= len(op.VARIANTS) <= 6
        assert len(op.CASES) == len(op.CASES_2) == 4
        assert all("tiny" in c for c in op.CASES + op.CASES_2)
        assert {c["id"] for c in op.CASES}.isdisjoint(c["id"] for c in op.CASES_2)
        found = [classify(v["mechanism"], None).entry for v in op.VARIANTS]
        assert "other" not in found and len(set(found)) == len(found), (name, found)


ROUTER = """
import torch
from ops import col_sum, topk_softmax as ts
base = {**ts.BASELINE["params"], "sms": 4}
for shape, dtype in (([13, 60, 4], torch.bfloat16), ([9, 16, 2], torch.float32)):
    x = ts.make_inputs(shape, dtype, 5, "cpu")
    x["x"][0] = 1.0  # all tied: the lowest ids first
    x["x"][1, 7] = x["x"][1, 3] = 9.0
    probs = torch.softmax(x["x"].double(), dim=1)
    for extra in ({}, {"TOKENS": 8}, {"TOKENS": 4, "PERSISTENT": True}, {"NATIVE": True}):
        w = ts.launch({**base, **extra}, x)
        ids = x["ids"].long()
        assert ids.unique(dim=1).shape == ids.shape  # no expert twice
        assert torch.equal(probs.gather(1, ids), torch.topk(probs, shape[2], dim=1).values)
        assert torch.allclose(w.double(), probs.gather(1, ids), rtol=1e-5, atol=0)
        assert ids[0].tolist() == list(range(shape[2])) and ids[1, :2].tolist() == [3, 7]
x = col_sum.make_inputs([300, 70], torch.float32, 2, "cpu")
for split in (1, 7, 16):
    for _ in range(2):  # the atomic partials start from zero every launch
        got = col_sum.launch({**col_sum.BASELINE["params"], "SPLIT": split}, x)
        assert torch.allclose(got.double(), x["x"].double().sum(0), rtol=1e-5, atol=1e-5)
print("ok")
"""


def test_the_router_returns_the_top_experts_and_split_sums_add_up() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", ROUTER], capture_output=True, text=True,
        env=env, timeout=300, cwd=REPO / "examples" / "kernel-corpus",
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr


OPS8 = ("group_quant_fp8", "dropout_add", "bmm", "segment_mean")


def test_the_ops8_variants_name_one_vocabulary_entry_each() -> None:
    sys.path.insert(0, str(REPO / "examples" / "kernel-corpus"))
    import importlib

    from ledger.core.mechanisms import classify

    for name in OPS8:
        op = importlib.import_module(f"ops.{name}")
        assert name == op.NAME and 4 <= len(op.VARIANTS) <= 6
        assert len(op.CASES) == len(op.CASES_2) == 4
        assert all("tiny" in c for c in op.CASES + op.CASES_2)
        assert {c["id"] for c in op.CASES}.isdisjoint(c["id"] for c in op.CASES_2)
        found = [classify(v["mechanism"], None).entry for v in op.VARIANTS]
        assert "other" not in found and len(set(found)) == len(found), (name, found)


OPS8_CHECKS = """
import torch
from ops import dropout_add as do, group_quant_fp8 as gq, segment_mean as sg
# the float64 e4m3 rounding of the fp8 reference is torch's float8_e4m3fn cast
y = torch.cat([torch.randn(4000, dtype=torch.float64) * 100, torch.tensor([17.0, -1.0625,
               0.003, 447.9, 0.0, 2.0**-9, 125.7])]).clamp(-448, 448)  # fmt: skip
assert torch.equal(gq.e4m3(y), y.to(torch.float8_e4m3fn).double())
# dropout: the kept mask is the reference's Philox stream exactly, at about 1 - p
x = do.make_inputs([9, 500], torch.float32, 4, "cpu")
x["residual"].zero_()
for extra in ({}, {"BLOCK": 256, "PERSISTENT": True}):
    got = do.launch({**do.BASELINE["params"], "sms": 2, **extra}, x)
    assert torch.equal(got != 0, do.keep_mask(x) & (x["x"] != 0))
    assert torch.allclose(got.double(), do.reference(x), rtol=1e-6, atol=0)
assert abs(float(do.keep_mask(x).double().mean()) - (1 - do.P)) < 0.02
# segment mean: the split parts, and the longest-first order, add up to the same means
x = sg.make_inputs([300, 7, 40], torch.float32, 2, "cpu")
assert int(x["cu"][-1]) == 300 and bool((x["cu"][1:] > x["cu"][:-1]).all())
for extra in ({}, {"SPLIT": 8}, {"SPLIT": 3, "ORDER": True}):
    for _ in range(2):  # the atomic partials start from zero every launch
        got = sg.launch({**sg.BASELINE["params"], **extra}, x)
        assert torch.allclose(got.double(), sg.reference(x), rtol=1e-5, atol=1e-6)
print("ok")
"""


def test_the_ops8_references_and_their_split_and_seeded_kernels() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", OPS8_CHECKS], capture_output=True, text=True,
        env=env, timeout=300, cwd=REPO / "examples" / "kernel-corpus",
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
