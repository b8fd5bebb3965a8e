"""SwiGLU forward, out = silu(a) * b, elementwise over [M, N]."""

import torch
import triton
import triton.language as tl

NAME = "swiglu"
FAMILY = "elementwise"
CASES = [
    {"id": "fp16-8192x4096", "dtype": "fp16", "shape": [8192, 4096], "tiny": [4, 64]},
    {"id": "bf16-4096x11008", "dtype": "bf16", "shape": [4096, 11008], "tiny": [3, 80]},
    {"id": "fp16-16x4096", "dtype": "fp16", "shape": [16, 4096], "tiny": [2, 48]},
    {"id": "bf16-16384x1024", "dtype": "bf16", "shape": [16384, 1024], "tiny": [5, 32]},
]
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "fp16-2048x14336", "dtype": "fp16", "shape": [2048, 14336], "tiny": [3, 72]},
    {"id": "bf16-32768x4096", "dtype": "bf16", "shape": [32768, 4096], "tiny": [6, 40]},
    {"id": "bf16-1x8192", "dtype": "bf16", "shape": [1, 8192], "tiny": [1, 96]},
    {"id": "fp16-4096x2816", "dtype": "fp16", "shape": [4096, 2816], "tiny": [4, 44]},
]


@triton.jit
def kl_swiglu(
    a_ptr,
    b_ptr,
    o_ptr,
    n,
    BLOCK: tl.constexpr,
    FP32: tl.constexpr,
    EVICT: tl.constexpr,
    PERSISTENT: tl.constexpr,
):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK if PERSISTENT else n
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        if EVICT:
            a = tl.load(a_ptr + offs, mask=mask, eviction_policy="evict_first")
            b = tl.load(b_ptr + offs, mask=mask, eviction_policy="evict_first")
        else:
            a = tl.load(a_ptr + offs, mask=mask)
            b = tl.load(b_ptr + offs, mask=mask)
        if FP32:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        out = a * tl.sigmoid(a.to(tl.float32)).to(a.dtype) * b
        tl.store(o_ptr + offs, out.to(o_ptr.dtype.element_ty), mask=mask)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(shape, generator=g, device=device).to(dtype)
    b = torch.randn(shape, generator=g, device=device).to(dtype)
    return {"a": a, "b": b, "out": torch.empty_like(a)}


def reference(x):
    a, b = x["a"].double(), x["b"].double()
    return torch.nn.functional.silu(a) * b


def launch(p, x):
    n = x["a"].numel()
    blocks = triton.cdiv(n, p["BLOCK"])
    grid = (min(blocks, p["sms"] * 4) if p["PERSISTENT"] else blocks,)
    kl_swiglu[grid](
        x["a"],
        x["b"],
        x["out"],
        n,
        BLOCK=p["BLOCK"],
        FP32=p["FP32"],
        EVICT=p["EVICT"],
        PERSISTENT=p["PERSISTENT"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "sw0_base",
    "params": {"BLOCK": 1024, "FP32": True, "EVICT": False, "PERSISTENT": False, "num_warps": 4},
}
VARIANTS = [
    {
        "name": "sw1_block4096",
        "params": {"BLOCK": 4096},
        "mechanism": "larger block per program",
        "change": "BLOCK 1024 -> 4096 elements per program",
        "hypothesis": (
            "Four times the elements per program cuts the grid by 4x and its scheduling cost; the"
            " large cases should gain 3% or more as more bytes are in flight per SM."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "sw2_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8 for the same block",
        "hypothesis": (
            "Eight warps per program halve the elements each thread holds, which raises memory-"
            "level parallelism per SM; expect 2% on the big cases."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "sw3_evict_first",
        "params": {"EVICT": True},
        "mechanism": "eviction hint",
        "change": "loads of a and b with eviction_policy='evict_first'",
        "hypothesis": (
            "a and b are read once; marking them evict_first keeps L2 free for the output's "
            "write-back, maybe 2% on the cases larger than L2."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "sw4_native_precision",
        "params": {"FP32": False},
        "mechanism": "lower-precision arithmetic",
        "change": "multiply a*sigmoid(a)*b in the input dtype instead of upcasting to fp32",
        "hypothesis": (
            "Half-precision multiplies need fewer conversion instructions; the op is memory-bound"
            " so at best 1-2%, and bf16 rounding may cost accuracy."
        ),
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
    {
        "name": "sw5_persistent",
        "params": {"PERSISTENT": True},
        "mechanism": "persistent grid",
        "change": "grid of 4 programs per SM looping grid-stride over the tensor",
        "hypothesis": (
            "A persistent grid of 4 programs per SM avoids launching tens of thousands of short "
            "programs; expect 2% on the large cases, nothing on the 16-row case."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
]
