"""Column sum (a bias gradient): out[j] = sum_i x[i, j] over the M rows of x [M, N]
(fp16/bf16/fp32), into fp32 [N]."""

import torch
import triton
import triton.language as tl

NAME = "col_sum"
FAMILY = "reduction"
CASES = [
    {"id": "bf16-16384x4096", "dtype": "bf16", "shape": [16384, 4096], "tiny": [70, 100]},
    {"id": "fp16-4096x8192", "dtype": "fp16", "shape": [4096, 8192], "tiny": [33, 200]},
    {"id": "fp32-65536x1024", "dtype": "fp32", "shape": [65536, 1024], "tiny": [300, 64]},
    {"id": "bf16-512x14336", "dtype": "bf16", "shape": [512, 14336], "tiny": [9, 300]},
]
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "fp16-16384x8192", "dtype": "fp16", "shape": [16384, 8192], "tiny": [80, 130]},
    {"id": "bf16-8192x5120", "dtype": "bf16", "shape": [8192, 5120], "tiny": [50, 96]},
    {"id": "fp32-2048x4096", "dtype": "fp32", "shape": [2048, 4096], "tiny": [20, 70]},
    {"id": "fp16-32768x512", "dtype": "fp16", "shape": [32768, 512], "tiny": [260, 40]},
]


@triton.jit
def kl_col_sum(
    x_ptr,
    o_ptr,
    M,
    N,
    SPAN,
    BLOCK_N: tl.constexpr,
    ROWS: tl.constexpr,
    SPLIT: tl.constexpr,
    NATIVE: tl.constexpr,
):
    # program (i, j): columns i*BLOCK_N.., rows j*SPAN .. j*SPAN + SPAN (a multiple of ROWS)
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cmask = cols < N
    lo = tl.program_id(1) * SPAN
    if NATIVE:
        acc = tl.zeros([ROWS, BLOCK_N], x_ptr.dtype.element_ty)
    else:
        acc = tl.zeros([ROWS, BLOCK_N], tl.float32)
    for r0 in range(0, SPAN, ROWS):
        rows = lo + r0 + tl.arange(0, ROWS)
        mask = (rows < M)[:, None] & cmask[None, :]
        v = tl.load(x_ptr + rows[:, None].to(tl.int64) * N + cols[None, :], mask=mask, other=0.0)
        if NATIVE:
            acc += v
        else:
            acc += v.to(tl.float32)
    total = tl.sum(acc.to(tl.float32), axis=0)
    if SPLIT == 1:
        tl.store(o_ptr + cols, total, mask=cmask)
    else:
        tl.atomic_add(o_ptr + cols, total, mask=cmask)


def make_inputs(shape, dtype, seed, device):
    M, N = shape
    g = torch.Generator(device=device).manual_seed(seed)
    # output gradients with a per-column mean, so that the sums are not all near zero
    bias = torch.randn(N, generator=g, device=device) / M**0.5
    x = (torch.randn((M, N), generator=g, device=device) + bias).to(dtype)
    return {"x": x, "out": torch.empty(N, device=device, dtype=torch.float32)}


def reference(x):
    return x["x"].double().sum(dim=0)


def launch(p, x):
    M, N = x["x"].shape
    rows, split = p["ROWS"], p["SPLIT"]
    span = triton.cdiv(triton.cdiv(M, split), rows) * rows
    if split > 1:  # the partial sums are added into out
        x["out"].zero_()
    kl_col_sum[(triton.cdiv(N, p["BLOCK_N"]), triton.cdiv(M, span))](
        x["x"],
        x["out"],
        M,
        N,
        span,
        BLOCK_N=p["BLOCK_N"],
        ROWS=rows,
        SPLIT=split,
        NATIVE=p["NATIVE"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "cs0_base",
    "params": {"BLOCK_N": 64, "ROWS": 8, "SPLIT": 1, "NATIVE": False, "num_warps": 4},
}
VARIANTS = [
    {
        "name": "cs1_split_m16",
        "params": {"SPLIT": 16},
        "mechanism": "split reduction across programs",
        "change": (
            "the rows split over 16 programs per column block; their partial sums atomically "
            "added into a zeroed fp32 out"
        ),
        "hypothesis": (
            "One program per 64 columns is 16-224 programs for 132 SMs, each streaming all M "
            "rows; sixteen programs per column block fill the machine, 3x or more on the "
            "4096-8192-wide cases, little on the 512-row case where the zeroing launch and the "
            "atomics cost what the grid gains."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "cs2_block_n128",
        "params": {"BLOCK_N": 128},
        "mechanism": "block size",
        "change": "BLOCK_N 64 -> 128 columns per program ([8, 128] tiles)",
        "hypothesis": (
            "A 64-column row segment is 128 bytes in half precision, one sector group per row; "
            "128 columns give each thread 16-byte loads, 5% if the grid is already large enough, "
            "a loss where it halves a grid that was too small."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "cs3_rows32",
        "params": {"ROWS": 32},
        "mechanism": "rows per step",
        "change": "ROWS 8 -> 32 rows loaded per loop step ([32, BLOCK_N] tiles)",
        "hypothesis": (
            "Four times the rows per step keep four times the loads in flight per program and cut "
            "the loop trips; 10% where few programs each stream thousands of rows."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "cs4_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8 for the same tile",
        "hypothesis": (
            "Eight warps per program double the warps resident per SM when the grid is small and "
            "hide more load latency; 5% on the wide cases."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "cs5_accumulate_input_dtype",
        "params": {"NATIVE": True},
        "mechanism": "accumulation precision",
        "change": "running sums kept in the input dtype, upcast to fp32 only for the last sum",
        "hypothesis": (
            "Half-precision partial sums halve the accumulator registers and drop a convert per "
            "element, 2%; over thousands of rows the rounding may break the fp16/bf16 bound "
            "(no-op on fp32)."
        ),
        "expected_signal": {"metric": "registers_per_thread", "direction": "decrease"},
    },
]


# the variant this file is
VARIANT = 'cs4_warps8'
PARAMS = {"BLOCK_N": 64, "NATIVE": false, "ROWS": 8, "SPLIT": 16, "num_warps": 8, "sms": 132}
