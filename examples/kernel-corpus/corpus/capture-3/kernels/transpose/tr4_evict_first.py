"""2-D transpose: y[j, i] = x[i, j], a pure data-movement kernel."""

import torch
import triton
import triton.language as tl

NAME = "transpose"
FAMILY = "data-movement"
CASES = [
    {"id": "fp16-8192x8192", "dtype": "fp16", "shape": [8192, 8192], "tiny": [40, 24]},
    {"id": "fp32-4096x4096", "dtype": "fp32", "shape": [4096, 4096], "tiny": [24, 40]},
    {"id": "bf16-16384x1024", "dtype": "bf16", "shape": [16384, 1024], "tiny": [64, 16]},
    {"id": "fp16-1000x3000", "dtype": "fp16", "shape": [1000, 3000], "tiny": [17, 33]},
]
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "bf16-4096x4096", "dtype": "bf16", "shape": [4096, 4096], "tiny": [32, 32]},
    {"id": "fp16-2048x8192", "dtype": "fp16", "shape": [2048, 8192], "tiny": [16, 48]},
    {"id": "fp32-8192x1024", "dtype": "fp32", "shape": [8192, 1024], "tiny": [48, 16]},
    {"id": "bf16-3000x1000", "dtype": "bf16", "shape": [3000, 1000], "tiny": [33, 17]},
]


@triton.jit
def kl_transpose(
    x_ptr, y_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr, EVICT: tl.constexpr
):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    if GROUP > 1:
        width = GROUP * grid_n
        group = pid // width
        first = group * GROUP
        size = tl.minimum(grid_m - first, GROUP)
        pm = first + (pid % width) % size
        pn = (pid % width) // size
    else:
        pm = pid // grid_n
        pn = pid % grid_n
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if EVICT:
        tile = tl.load(
            x_ptr + rm[:, None] * N + rn[None, :], mask=mask, eviction_policy="evict_first"
        )
    else:
        tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    tl.store(y_ptr + rn[None, :] * M + rm[:, None], tile, mask=mask)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(shape, generator=g, device=device).to(dtype)
    return {"x": x, "out": torch.empty((shape[1], shape[0]), device=device, dtype=dtype)}


def reference(x):
    return x["x"].double().t()


def launch(p, x):
    M, N = x["x"].shape
    grid = (triton.cdiv(M, p["BM"]) * triton.cdiv(N, p["BN"]),)
    kl_transpose[grid](
        x["x"],
        x["out"],
        M,
        N,
        BM=p["BM"],
        BN=p["BN"],
        GROUP=p["GROUP"],
        EVICT=p["EVICT"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "tr0_base",
    "params": {"BM": 32, "BN": 32, "GROUP": 1, "EVICT": False, "num_warps": 4},
}
VARIANTS = [
    {
        "name": "tr1_tile64",
        "params": {"BM": 64, "BN": 64},
        "mechanism": "tile shape",
        "change": "64x64 tiles instead of 32x32",
        "hypothesis": (
            "Larger tiles give longer contiguous runs on both the read and the transposed write; "
            "10% on the square cases."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "tr2_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8 per tile",
        "hypothesis": (
            "More warps per tile split the shared-memory shuffle Triton inserts for the layout "
            "change; 3%."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "tr3_grouped_order",
        "params": {"GROUP": 8},
        "mechanism": "tile order / swizzled grid",
        "change": "program ids walk tiles in groups of 8 tile-rows",
        "hypothesis": (
            "Grouping tiles keeps the written column panel resident in L2 while neighbours fill "
            "it, fewer partial-sector writes, 3% on 8192x8192."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "decrease"},
    },
    {
        "name": "tr4_evict_first",
        "params": {"EVICT": True},
        "mechanism": "eviction hint",
        "change": "input tile loaded with eviction_policy='evict_first'",
        "hypothesis": (
            "The input is read exactly once; evicting it first leaves L2 to merge the scattered "
            "writes, 2%."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
]


# the variant this file is
VARIANT = 'tr4_evict_first'
PARAMS = {"BM": 32, "BN": 32, "EVICT": true, "GROUP": 1, "num_warps": 4, "sms": 132}
