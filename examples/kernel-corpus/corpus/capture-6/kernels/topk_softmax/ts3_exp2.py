"""MoE router gating (vLLM's topk_softmax): per token, softmax over the E expert logits [T, E],
then the k largest probabilities (fp32 [T, k], descending) and their expert ids (int32 [T, k],
the lowest id first among equal ones). The gate checks the weights; a wrong id shows in them."""

import torch
import triton
import triton.language as tl

NAME = "topk_softmax"
FAMILY = "reduction"
# shape: [T tokens, E experts, k]
CASES = [
    {"id": "fp32-t16384e8k2", "dtype": "fp32", "shape": [16384, 8, 2], "tiny": [40, 8, 2]},
    {"id": "bf16-t4096e256k8", "dtype": "bf16", "shape": [4096, 256, 8], "tiny": [6, 256, 8]},
    {"id": "fp16-t1024e128k8", "dtype": "fp16", "shape": [1024, 128, 8], "tiny": [9, 128, 8]},
    {"id": "bf16-t64e60k4", "dtype": "bf16", "shape": [64, 60, 4], "tiny": [5, 60, 4]},
]
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "bf16-t16384e128k8", "dtype": "bf16", "shape": [16384, 128, 8], "tiny": [12, 128, 8]},
    {"id": "fp32-t8192e256k8", "dtype": "fp32", "shape": [8192, 256, 8], "tiny": [7, 256, 8]},
    {"id": "fp16-t256e16k4", "dtype": "fp16", "shape": [256, 16, 4], "tiny": [11, 16, 4]},
    {"id": "bf16-t2048e64k6", "dtype": "bf16", "shape": [2048, 64, 6], "tiny": [10, 64, 6]},
]


@triton.jit
def kl_topk_softmax(
    x_ptr,
    w_ptr,
    i_ptr,
    T,
    E,
    NBLK,
    BLOCK_E: tl.constexpr,
    K: tl.constexpr,
    TOKENS: tl.constexpr,
    EXP2: tl.constexpr,
    NATIVE: tl.constexpr,
    PERSISTENT: tl.constexpr,
):
    # token blocks pid, pid + step, ...: one of them unless the grid is persistent
    step = tl.num_programs(0) if PERSISTENT else NBLK
    cols = tl.arange(0, BLOCK_E)
    cmask = cols < E
    for blk in range(tl.program_id(0), NBLK, step):
        rows = blk * TOKENS + tl.arange(0, TOKENS)
        rmask = rows < T
        mask = rmask[:, None] & cmask[None, :]
        v = tl.load(
            x_ptr + rows[:, None].to(tl.int64) * E + cols[None, :], mask=mask, other=float("-inf")
        )
        f = v.to(tl.float32)
        top = tl.max(f, axis=1)
        if EXP2:  # noqa: SIM108 (a constexpr branch in a Triton kernel)
            e = tl.exp2((f - top[:, None]) * 1.4426950408889634)
        else:
            e = tl.exp(f - top[:, None])
        inv = 1.0 / tl.sum(e, axis=1)
        # the selection runs on the logits (softmax keeps their order): the k largest, one at a
        # time, each taken out of the running before the next
        if NATIVE:  # noqa: SIM108 (a constexpr branch in a Triton kernel)
            s = v
        else:
            s = f
        out = rows.to(tl.int64) * K
        for j in tl.static_range(K):
            m = tl.max(s, axis=1)
            idx = tl.min(tl.where(s == m[:, None], cols[None, :], BLOCK_E), axis=1)
            hit = cols[None, :] == idx[:, None]
            weight = tl.sum(tl.where(hit, e, 0.0), axis=1) * inv
            tl.store(w_ptr + out + j, weight, mask=rmask)
            tl.store(i_ptr + out + j, idx, mask=rmask)
            s = tl.where(hit, float("-inf"), s)


def make_inputs(shape, dtype, seed, device):
    T, E, k = shape
    g = torch.Generator(device=device).manual_seed(seed)
    logits = (2 * torch.randn((T, E), generator=g, device=device)).to(dtype)
    return {
        "x": logits,
        "k": k,
        "ids": torch.empty((T, k), device=device, dtype=torch.int32),
        "out": torch.empty((T, k), device=device, dtype=torch.float32),
    }


def reference(x):
    probs = torch.softmax(x["x"].double(), dim=1)
    return torch.topk(probs, x["k"], dim=1).values


def launch(p, x):
    T, E = x["x"].shape
    tokens = p["TOKENS"]
    nblk = triton.cdiv(T, tokens)
    grid = min(nblk, p["sms"] * 4) if p["PERSISTENT"] else nblk
    kl_topk_softmax[(grid,)](
        x["x"],
        x["out"],
        x["ids"],
        T,
        E,
        nblk,
        BLOCK_E=triton.next_power_of_2(E),
        K=x["k"],
        TOKENS=tokens,
        EXP2=p["EXP2"],
        NATIVE=p["NATIVE"],
        PERSISTENT=p["PERSISTENT"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "ts0_base",
    "params": {"TOKENS": 1, "EXP2": False, "NATIVE": False, "PERSISTENT": False, "num_warps": 4},
}
VARIANTS = [
    {
        "name": "ts1_tokens8",
        "params": {"TOKENS": 8},
        "mechanism": "rows per program",
        "change": "8 tokens per program ([8, E] tiles) instead of 1",
        "hypothesis": (
            "A token's row is 8-256 logits, too little for a 128-thread program; eight rows per "
            "program give each thread work and cut the grid eightfold, 20% or more on the 8- and "
            "16-expert cases, less where E is 256."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "ts2_warps1",
        "params": {"num_warps": 1},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 1 for the same tile",
        "hypothesis": (
            "The k max/argmin rounds are cross-thread reductions; in one warp they stay in "
            "shuffles with no shared-memory round trip, and more programs fit per SM; 10% on the "
            "small-E cases, a loss where E is 256 and a thread holds 64 or more logits."
        ),
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
    {
        "name": "ts3_exp2",
        "params": {"EXP2": True},
        "mechanism": "exp2",
        "change": "exp(x - max) -> exp2((x - max) * log2e)",
        "hypothesis": (
            "exp2 maps onto the MUFU instruction and saves the multiply of exp's lowering; the "
            "kernel is latency-bound on its reductions, so 1% at most."
        ),
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
    {
        "name": "ts4_compare_input_dtype",
        "params": {"NATIVE": True},
        "mechanism": "lower-precision compare",
        "change": "the k selection rounds compare the logits in their dtype, no fp32 copy kept",
        "hypothesis": (
            "The upcast is exact, so the selection cannot change; comparing half-precision "
            "logits frees the fp32 copy's registers during the k rounds, 2% on the 128- and "
            "256-expert cases (no-op on fp32)."
        ),
        "expected_signal": {"metric": "registers_per_thread", "direction": "decrease"},
    },
    {
        "name": "ts5_persistent",
        "params": {"PERSISTENT": True},
        "mechanism": "persistent grid",
        "change": "grid of 4 programs per SM looping grid-stride over the token blocks",
        "hypothesis": (
            "Thousands of short programs become 528 long ones; less block scheduling per token, "
            "3% on the 8192-16384-token cases, nothing on the 64-256-token ones."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
]


# the variant this file is
VARIANT = 'ts3_exp2'
PARAMS = {"EXP2": true, "NATIVE": false, "PERSISTENT": false, "TOKENS": 8, "num_warps": 4, "sms": 132}
