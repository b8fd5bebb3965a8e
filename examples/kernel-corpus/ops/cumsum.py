"""Inclusive prefix sum along the last dim of [M, N] (a scan), output in the input dtype."""

import torch
import triton
import triton.language as tl

NAME = "cumsum"
FAMILY = "scan"
CASES = [
    {"id": "fp32-4096x4096", "dtype": "fp32", "shape": [4096, 4096], "tiny": [3, 64]},
    {"id": "fp16-16384x1024", "dtype": "fp16", "shape": [16384, 1024], "tiny": [4, 40]},
    {"id": "bf16-1024x16384", "dtype": "bf16", "shape": [1024, 16384], "tiny": [2, 150]},
    {"id": "fp32-64x131072", "dtype": "fp32", "shape": [64, 131072], "tiny": [2, 300]},
]
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "fp16-4096x4096", "dtype": "fp16", "shape": [4096, 4096], "tiny": [3, 64]},
    {"id": "bf16-16384x2048", "dtype": "bf16", "shape": [16384, 2048], "tiny": [4, 48]},
    {"id": "fp16-256x65536", "dtype": "fp16", "shape": [256, 65536], "tiny": [2, 260]},
    {"id": "bf16-8192x512", "dtype": "bf16", "shape": [8192, 512], "tiny": [5, 24]},
]


@triton.jit
def kl_cumsum(x_ptr, y_ptr, M, N, BLOCK: tl.constexpr, ROWS: tl.constexpr, ACC_FP32: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rmask = rows[:, None] < M
    base = rows[:, None].to(tl.int64) * N
    if ACC_FP32:  # noqa: SIM108 (a constexpr branch in a Triton kernel)
        carry = tl.zeros([ROWS], tl.float32)
    else:
        carry = tl.zeros([ROWS], x_ptr.dtype.element_ty)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = rmask & (cols[None, :] < N)
        v = tl.load(x_ptr + base + cols[None, :], mask=mask, other=0.0)
        if ACC_FP32:
            v = v.to(tl.float32)
        c = tl.cumsum(v, axis=1) + carry[:, None]
        tl.store(y_ptr + base + cols[None, :], c.to(y_ptr.dtype.element_ty), mask=mask)
        carry = carry + tl.sum(v, axis=1)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=g, device=device).to(dtype)
    return {"x": x, "out": torch.empty_like(x)}


def reference(x):
    return torch.cumsum(x["x"].double(), dim=-1)


def launch(p, x):
    M, N = x["x"].shape
    kl_cumsum[(triton.cdiv(M, p["ROWS"]),)](
        x["x"],
        x["out"],
        M,
        N,
        BLOCK=p["BLOCK"],
        ROWS=p["ROWS"],
        ACC_FP32=p["ACC_FP32"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "cs0_base",
    "params": {"BLOCK": 1024, "ROWS": 1, "ACC_FP32": True, "num_warps": 4},
}
VARIANTS = [
    {
        "name": "cs1_rows4",
        "params": {"ROWS": 4, "BLOCK": 256},
        "mechanism": "rows per program",
        "change": "4 rows per program, 256-wide chunks (same elements per step)",
        "hypothesis": (
            "Short rows (1024) finish in one chunk; four rows per program raise the work per "
            "program and the loads in flight, 5% on the 16384-row case."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "cs2_block4096",
        "params": {"BLOCK": 4096},
        "mechanism": "chunk size of the scan",
        "change": "4096-wide chunks instead of 1024",
        "hypothesis": (
            "Fewer loop iterations along long rows and fewer serial carry updates; 10% on the "
            "131072-wide rows."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
    {
        "name": "cs3_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8",
        "hypothesis": (
            "The in-block scan is latency-bound; twice the warps give the scheduler more to hide "
            "it, 3%."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "cs4_acc_input_dtype",
        "params": {"ACC_FP32": False},
        "mechanism": "accumulation precision",
        "change": "scan and carry accumulated in the input dtype instead of fp32",
        "hypothesis": (
            "Half-precision accumulation halves register use; little speed (memory-bound) and "
            "long rows will lose precision in fp16/bf16."
        ),
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
]
