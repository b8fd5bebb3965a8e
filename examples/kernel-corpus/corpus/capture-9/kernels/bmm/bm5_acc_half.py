"""Batched matrix product of many small matrices, c[b] = a[b] @ w[b]: a [B, M, K], w [B, K, N]
(fp16/bf16, contiguous), c [B, M, N] in their dtype, fp32 accumulation, tiled with tl.dot; the
batch is a grid axis (attention scores and outputs of short sequences per head, Mamba2's
chunked C^T B per chunk)."""

import torch
import triton
import triton.language as tl

NAME = "bmm"
FAMILY = "matmul"
# shape: [B, M, N, K]
CASES = [
    {"id": "fp16-b1024m128n128k64", "dtype": "fp16", "shape": [1024, 128, 128, 64],
     "tiny": [3, 20, 24, 32]},  # q @ k^T, 32 sequences of 128 tokens x 32 heads of 64
    {"id": "fp16-b1024m128n64k128", "dtype": "fp16", "shape": [1024, 128, 64, 128],
     "tiny": [2, 33, 16, 40]},  # p @ v of the same
    {"id": "fp16-b256m256n256k128", "dtype": "fp16", "shape": [256, 256, 256, 128],
     "tiny": [2, 70, 65, 48]},  # Mamba2 C^T B: 8 sequences x 32 chunks of 256, d_state 128
    {"id": "fp16-b768m197n197k64", "dtype": "fp16", "shape": [768, 197, 197, 64],
     "tiny": [4, 17, 19, 16]},  # ViT-B/16 scores: 64 images x 12 heads, 197 tokens
]  # fmt: skip
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "bf16-b512m256n256k64", "dtype": "bf16", "shape": [512, 256, 256, 64],
     "tiny": [2, 64, 48, 32]},
    {"id": "bf16-b2048m64n128k128", "dtype": "bf16", "shape": [2048, 64, 128, 128],
     "tiny": [5, 16, 40, 24]},
    {"id": "fp16-b4096m64n64k64", "dtype": "fp16", "shape": [4096, 64, 64, 64],
     "tiny": [6, 16, 16, 16]},
    {"id": "bf16-b128m256n128k256", "dtype": "bf16", "shape": [128, 256, 128, 256],
     "tiny": [2, 50, 30, 72]},
]  # fmt: skip


@triton.jit
def kl_bmm(
    a_ptr,
    w_ptr,
    c_ptr,
    B,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    PERSISTENT: tl.constexpr,
    ACC16: tl.constexpr,
):
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    tiles = grid_m * grid_n
    # work items (batch, tile), tiles of one batch adjacent: one per program, or the programs
    # of a persistent grid stride over all of them
    step = tl.num_programs(0) if PERSISTENT else B * tiles
    for item in range(tl.program_id(0), B * tiles, step):
        b = item // tiles
        t = item % tiles
        rm = (t // grid_n) * BM + tl.arange(0, BM)
        rn = (t % grid_n) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_base = a_ptr + b.to(tl.int64) * M * K
        w_base = w_ptr + b.to(tl.int64) * K * N
        if ACC16:  # noqa: SIM108 (a constexpr branch in a Triton kernel)
            acc = tl.zeros([BM, BN], tl.float16)
        else:
            acc = tl.zeros([BM, BN], tl.float32)
        for k0 in range(0, K, BK):
            a = tl.load(
                a_base + rm[:, None] * K + (k0 + rk)[None, :],
                mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K),
                other=0.0,
            )
            w = tl.load(
                w_base + (k0 + rk)[:, None] * N + rn[None, :],
                mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N),
                other=0.0,
            )
            if ACC16:  # noqa: SIM108
                acc = tl.dot(a, w, acc, out_dtype=tl.float16)
            else:
                acc = tl.dot(a, w, acc)
        tl.store(
            c_ptr + b.to(tl.int64) * M * N + rm[:, None] * N + rn[None, :],
            acc.to(c_ptr.dtype.element_ty),
            mask=(rm[:, None] < M) & (rn[None, :] < N),
        )


def make_inputs(shape, dtype, seed, device):
    B, M, N, K = shape
    g = torch.Generator(device=device).manual_seed(seed)
    return {
        "a": torch.randn((B, M, K), generator=g, device=device).to(dtype),
        "w": (torch.randn((B, K, N), generator=g, device=device) / K**0.5).to(dtype),
        "out": torch.empty((B, M, N), device=device, dtype=dtype),
    }


def reference(x):
    return torch.bmm(x["a"].double(), x["w"].double())


def launch(p, x):
    B, M, K = x["a"].shape
    N = x["w"].shape[2]
    items = B * triton.cdiv(M, p["BM"]) * triton.cdiv(N, p["BN"])
    grid = min(items, p["sms"] * 2) if p["PERSISTENT"] else items
    kl_bmm[(grid,)](
        x["a"],
        x["w"],
        x["out"],
        B,
        M,
        N,
        K,
        BM=p["BM"],
        BN=p["BN"],
        BK=p["BK"],
        PERSISTENT=p["PERSISTENT"],
        # fp16 inputs may accumulate in fp16 (the MMA has an fp16 accumulator; bf16 has none)
        ACC16=p["ACC16"] and x["a"].dtype == torch.float16,
        num_warps=p["num_warps"],
        num_stages=p["num_stages"],
    )
    return x["out"]


BASELINE = {
    "name": "bm0_base",
    "params": {
        "BM": 64,
        "BN": 64,
        "BK": 32,
        "PERSISTENT": False,
        "ACC16": False,
        "num_warps": 4,
        "num_stages": 2,
    },
}
VARIANTS = [
    {
        "name": "bm1_tile128x64",
        "params": {"BM": 128},
        "mechanism": "tile shape",
        "change": "output tile 64x64 -> 128x64, same 4 warps",
        "hypothesis": (
            "A taller tile reuses each w tile over twice the rows and halves the programs that "
            "re-read it; 5-10% where M is 128 or 256, a loss on the 64-row and 197-row cases, "
            "where half of a 128-row tile (or of the last one) is masked off."
        ),
        "expected_signal": {"metric": "sm_throughput", "direction": "increase"},
    },
    {
        "name": "bm2_stages3",
        "params": {"num_stages": 3},
        "mechanism": "software pipelining stages",
        "change": "num_stages 2 -> 3 on the K loop",
        "hypothesis": (
            "A third buffer keeps one more pair of tiles in flight; with K 64-256 the loop is "
            "2-8 steps of BK 32, so the prologue is most of it: 3% on the K=128-256 cases, "
            "nothing where K is 64, some loss from the shared memory it takes per program."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "bm3_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8 for the same tile",
        "hypothesis": (
            "Eight warps give each warp a smaller slice of the tile and more loads outstanding "
            "per program; 3% where the tile is 128 rows, a loss on 64x64 where each warp's MMA "
            "fragment gets too small to keep the tensor cores busy."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "bm4_persistent",
        "params": {"PERSISTENT": True},
        "mechanism": "persistent grid",
        "change": "grid of 2 programs per SM looping grid-stride over the (batch, tile) items",
        "hypothesis": (
            "1024 to 12288 programs of a few microseconds each become 264; the next "
            "item's loads start while the last one's stores drain, 5% on the many-small-matrix "
            "cases, a loss if two programs per SM leave it short of warps to hide latency."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
    {
        "name": "bm5_acc_half",
        "params": {"ACC16": True},
        "mechanism": "accumulation precision",
        "change": (
            "tl.dot accumulates in fp16 for fp16 inputs (out_dtype=float16) instead of fp32; "
            "bf16 inputs keep fp32, which their MMA requires"
        ),
        "hypothesis": (
            "An fp16 accumulator halves the accumulator registers and doubles the MMA rate on "
            "some parts; with K only 64-256 the rounding of the partial sums may stay inside "
            "the fp16 bound, 5% where the tile's MMA issue bounds it (no-op on bf16)."
        ),
        "expected_signal": {"metric": "registers_per_thread", "direction": "decrease"},
    },
]


# the variant this file is
VARIANT = 'bm5_acc_half'
PARAMS = {"ACC16": true, "BK": 32, "BM": 64, "BN": 64, "PERSISTENT": false, "num_stages": 2, "num_warps": 4, "sms": 132}
