"""Fused dropout and residual add (a transformer block's h = residual + dropout(x, p), training):
x, residual [M, N] (fp16/bf16), out = residual + keep * x / (1 - p) in their dtype, with
keep = tl.rand(seed, i) > p for the flat element index i (Triton's Philox4x32-10 stream, the
seed-based dropout of Triton's tutorial: no mask stored, the backward regenerates it; the
scale 1 / (1 - p) comes from the host, as torch passes it).

The reference reproduces that stream in torch (Philox4x32-10 in int64 arithmetic, the int32
to float mapping of tl.rand in fp32), so the gate checks the kept mask element by element
along with the kept values; every variant keeps the stream (a variant drawing four values
per Philox call, tl.rand4x, would change the mask and needs a statistical gate instead)."""

import torch
import triton
import triton.language as tl

NAME = "dropout_add"
FAMILY = "elementwise"
P = 0.1  # dropout probability
# shape: [M tokens, N hidden]
CASES = [
    {"id": "bf16-8192x4096", "dtype": "bf16", "shape": [8192, 4096], "tiny": [7, 300]},
    {"id": "fp16-16384x5120", "dtype": "fp16", "shape": [16384, 5120], "tiny": [9, 256]},
    {"id": "bf16-4096x8192", "dtype": "bf16", "shape": [4096, 8192], "tiny": [3, 1000]},
    {"id": "fp16-512x2048", "dtype": "fp16", "shape": [512, 2048], "tiny": [2, 333]},
]
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "fp16-32768x2048", "dtype": "fp16", "shape": [32768, 2048], "tiny": [11, 200]},
    {"id": "bf16-16384x7168", "dtype": "bf16", "shape": [16384, 7168], "tiny": [5, 700]},
    {"id": "bf16-2048x4096", "dtype": "bf16", "shape": [2048, 4096], "tiny": [4, 512]},
    {"id": "fp16-8192x1024", "dtype": "fp16", "shape": [8192, 1024], "tiny": [13, 128]},
]


@triton.jit
def kl_dropout_add(
    x_ptr,
    r_ptr,
    o_ptr,
    n,
    NBLK,
    seed,
    p,
    scale,
    BLOCK: tl.constexpr,
    EVICT: tl.constexpr,
    PERSISTENT: tl.constexpr,
    NATIVE: tl.constexpr,
):
    # blocks pid, pid + step, ...: one of them unless the grid is persistent
    step = tl.num_programs(0) if PERSISTENT else NBLK
    for blk in range(tl.program_id(0), NBLK, step):
        offs = blk * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        if EVICT:
            x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
            r = tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        else:
            x = tl.load(x_ptr + offs, mask=mask, other=0.0)
            r = tl.load(r_ptr + offs, mask=mask, other=0.0)
        keep = tl.rand(seed, offs) > p
        if NATIVE:  # scale and add in the input dtype
            y = r + tl.where(keep, x * tl.cast(scale, x.dtype), 0.0)
        else:
            y = r.to(tl.float32) + tl.where(keep, x.to(tl.float32) * scale, 0.0)
        tl.store(o_ptr + offs, y.to(o_ptr.dtype.element_ty), mask=mask)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    return {
        "x": torch.randn(shape, generator=g, device=device).to(dtype),
        "residual": torch.randn(shape, generator=g, device=device).to(dtype),
        "seed": 1000003 * seed + 17,  # the dropout seed, fixed per input set
        "out": torch.empty(shape, device=device, dtype=dtype),
    }


M32 = 0xFFFFFFFF


def _mul32(a: int, b):
    """(hi, lo) 32-bit halves of a * b, a a 32-bit constant, b an int64 tensor of values in
    [0, 2**32), without overflowing int64."""
    b_hi, b_lo = b >> 16, b & 0xFFFF
    p_hi, p_lo = a * b_hi, a * b_lo  # each below 2**48
    return (p_hi + (p_lo >> 16)) >> 16, ((p_hi << 16) + p_lo) & M32


def philox_uniform(seed: int, offsets):
    """tl.rand(seed, offsets) for int32 offsets: Philox4x32-10 on the counter (offset, 0, 0, 0)
    with the key (seed low, seed high), its first word mapped to [0, 1) as tl.rand maps it."""
    c0 = offsets.to(torch.int64) & M32
    c1 = torch.zeros_like(c0)
    c2 = torch.zeros_like(c0)
    c3 = torch.zeros_like(c0)
    k0, k1 = seed & M32, (seed >> 32) & M32
    for _ in range(10):
        hi_b, lo_b = _mul32(0xCD9E8D57, c2)
        hi_a, lo_a = _mul32(0xD2511F53, c0)
        c0, c1, c2, c3 = hi_b ^ c1 ^ k0, lo_b, hi_a ^ c3 ^ k1, lo_a
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    signed = torch.where(c0 >= 2**31, c0 - 2**32, c0)  # bitcast to int32
    signed = torch.where(signed < 0, -signed - 1, signed)
    return signed.to(torch.float32) * torch.tensor(4.6566127342e-10, dtype=torch.float32)


def keep_mask(x):
    n = x["x"].numel()
    offsets = torch.arange(n, device=x["x"].device, dtype=torch.int64)
    return (philox_uniform(x["seed"], offsets) > torch.tensor(P, dtype=torch.float32)).reshape(
        x["x"].shape
    )


def reference(x):
    keep = keep_mask(x)
    return x["residual"].double() + torch.where(keep, x["x"].double() / (1.0 - P), 0.0)


def launch(p, x):
    n = x["x"].numel()
    block = p["BLOCK"]
    nblk = triton.cdiv(n, block)
    grid = min(nblk, p["sms"] * 4) if p["PERSISTENT"] else nblk
    kl_dropout_add[(grid,)](
        x["x"],
        x["residual"],
        x["out"],
        n,
        nblk,
        x["seed"],
        P,
        1.0 / (1.0 - P),
        BLOCK=block,
        EVICT=p["EVICT"],
        PERSISTENT=p["PERSISTENT"],
        NATIVE=p["NATIVE"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "do0_base",
    "params": {"BLOCK": 1024, "EVICT": False, "PERSISTENT": False, "NATIVE": False, "num_warps": 4},
}
VARIANTS = [
    {
        "name": "do1_block4096",
        "params": {"BLOCK": 4096},
        "mechanism": "block size",
        "change": "BLOCK 1024 -> 4096 elements per program",
        "hypothesis": (
            "Four times the elements per program keep four times the loads in flight per thread "
            "and quarter the grid; the ten Philox rounds per element (about a hundred integer "
            "instructions) may make the kernel ALU-bound, in which case 2% at most."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "do2_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8 for the same block",
        "hypothesis": (
            "Eight warps halve the elements each thread holds and its Philox work, and put twice "
            "the warps on the integer pipes of an SM to hide the multiply latency; 5% if the "
            "Philox rounds bound the kernel, nothing if HBM does."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "do3_evict_first",
        "params": {"EVICT": True},
        "mechanism": "eviction hint",
        "change": "x and residual loads with eviction_policy='evict_first'",
        "hypothesis": (
            "Both inputs are read once; evict_first keeps them from displacing the output's "
            "lines in L2, 1% at most on the buffers larger than L2, nothing on 512x2048."
        ),
        "expected_signal": {"metric": "l2_hit_rate", "direction": "increase"},
    },
    {
        "name": "do4_persistent",
        "params": {"PERSISTENT": True},
        "mechanism": "persistent grid",
        "change": "grid of 4 programs per SM looping grid-stride over the blocks",
        "hypothesis": (
            "Up to 115 thousand programs become 528; less block scheduling, 2% on the large "
            "cases, a loss if one program's loads no longer overlap another's Philox rounds."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
    {
        "name": "do5_native_math",
        "params": {"NATIVE": True},
        "mechanism": "lower-precision arithmetic",
        "change": "x / (1 - p) and the residual add in the input dtype instead of fp32",
        "hypothesis": (
            "Half-precision math drops four converts per element, 1-2% where the ALU bounds the "
            "kernel; two roundings instead of one add an ulp of error, within the fp16 bound, "
            "near the bf16 one."
        ),
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
]


# the variant this file is
VARIANT = 'do2_warps8'
PARAMS = {"BLOCK": 1024, "EVICT": false, "NATIVE": false, "PERSISTENT": false, "num_warps": 8, "sms": 132}
