"""Row softmax over [M, N], y = exp(x - max) / sum(exp(x - max)), output in the input dtype.

An op outside the corpus (ops/): follow_suggestions.py takes it through a campaign whose
rounds follow `kernel-ledger suggest`. The baseline loops over the row in column blocks,
three passes (max, sum, write); each entry of MENU is one variant for one entry of the
mechanism vocabulary, its parameters applied on top of the current best."""

import torch
import triton
import triton.language as tl

NAME = "softmax"
FAMILY = "softmax"
CASES = [
    {"id": "fp16-32768x2048", "dtype": "fp16", "shape": [32768, 2048], "tiny": [5, 48]},
    {"id": "bf16-4096x50304", "dtype": "bf16", "shape": [4096, 50304], "tiny": [3, 300]},
    {"id": "fp32-8192x4096", "dtype": "fp32", "shape": [8192, 4096], "tiny": [4, 96]},
    {"id": "bf16-131072x128", "dtype": "bf16", "shape": [131072, 128], "tiny": [9, 16]},
]
LOG2E = 1.4426950408889634


@triton.jit
def _exp(x, EXP2: tl.constexpr):
    if EXP2:
        return tl.exp2(x * 1.4426950408889634)
    return tl.exp(x)


@triton.jit
def _step(x_ptr, base, rmask, start, N, other, BLOCK: tl.constexpr, POLICY: tl.constexpr):
    """One [ROWS, BLOCK] step of the rows: its offsets, mask and values (fp32)."""
    cols = start + tl.arange(0, BLOCK)
    mask = rmask[:, None] & (cols[None, :] < N)
    offs = base + cols[None, :]
    v = tl.load(x_ptr + offs, mask=mask, other=other, eviction_policy=POLICY)
    return offs, mask, v.to(tl.float32)


@triton.jit
def kl_softmax(
    x_ptr,
    y_ptr,
    M,
    N,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
    ONE_PASS: tl.constexpr,
    EXP2: tl.constexpr,
    LOW: tl.constexpr,
    KEEP: tl.constexpr,  # eviction policy of the reads before the write pass
    LAST: tl.constexpr,  # and of the write pass's
    PERSISTENT: tl.constexpr,
):
    groups = tl.cdiv(M, ROWS)
    step = tl.num_programs(0) if PERSISTENT else groups
    for g in range(tl.program_id(0), groups, step):
        rows = g * ROWS + tl.arange(0, ROWS)
        rmask = rows < M
        base = rows.to(tl.int64)[:, None] * N
        m = tl.full([ROWS, BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([ROWS, BLOCK], tl.float32)
        if ONE_PASS:  # running max and sum together, the sum rescaled as the max grows
            for start in range(0, N, BLOCK):
                _, _, v = _step(x_ptr, base, rmask, start, N, float("-inf"), BLOCK, KEEP)
                new_m = tl.maximum(m, v)
                s = tl.where(
                    new_m == float("-inf"), 0.0, s * _exp(m - new_m, EXP2) + _exp(v - new_m, EXP2)
                )
                m = new_m
            mx = tl.max(m, axis=1)
            total = tl.sum(
                tl.where(m == float("-inf"), 0.0, s * _exp(m - mx[:, None], EXP2)), axis=1
            )
        else:  # one pass for the max, one for the sum
            for start in range(0, N, BLOCK):
                _, _, v = _step(x_ptr, base, rmask, start, N, float("-inf"), BLOCK, KEEP)
                m = tl.maximum(m, v)
            mx = tl.max(m, axis=1)
            for start in range(0, N, BLOCK):
                _, mask, v = _step(x_ptr, base, rmask, start, N, float("-inf"), BLOCK, KEEP)
                s += tl.where(mask, _exp(v - mx[:, None], EXP2), 0.0)
            total = tl.sum(s, axis=1)
        inv = 1.0 / total
        for start in range(0, N, BLOCK):  # the write pass
            offs, mask, v = _step(x_ptr, base, rmask, start, N, 0.0, BLOCK, LAST)
            e = _exp(v - mx[:, None], EXP2)
            if LOW:  # the scale multiply in the input dtype
                y = e.to(y_ptr.dtype.element_ty) * inv[:, None].to(y_ptr.dtype.element_ty)
            else:
                y = e * inv[:, None]
            tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    x = (2 * torch.randn(shape, generator=g, device=device)).to(dtype)
    return {"x": x, "out": torch.empty_like(x)}


def reference(x):
    return torch.softmax(x["x"].double(), dim=-1)


def launch(p, x):
    M, N = x["x"].shape
    groups = triton.cdiv(M, p["ROWS"])
    grid = (min(groups, 4 * p["sms"]) if p["PERSISTENT"] else groups,)
    # a row up to WHOLE wide is one chunk: the loops run once
    block = triton.next_power_of_2(N) if p["WHOLE"] >= N else p["BLOCK"]
    kl_softmax[grid](
        x["x"],
        x["out"],
        M,
        N,
        BLOCK=block,
        ROWS=p["ROWS"],
        ONE_PASS=p["ONE_PASS"],
        EXP2=p["EXP2"],
        LOW=p["LOW"],
        KEEP="evict_last" if p["EVICT"] else "",
        LAST="evict_first" if p["EVICT"] else "",
        PERSISTENT=p["PERSISTENT"],
        num_warps=p["num_warps"],
        num_stages=p["num_stages"],
    )
    return x["out"]


BASELINE = {
    "name": "sm0_base",
    "params": {
        "BLOCK": 1024,
        "WHOLE": 0,
        "ROWS": 1,
        "ONE_PASS": False,
        "EXP2": False,
        "LOW": False,
        "EVICT": False,
        "PERSISTENT": False,
        "num_warps": 4,
        "num_stages": 2,
    },
}
# One variant per vocabulary entry this kernel can express, written before any suggestion
# was seen; follow_suggestions.py picks them in the order `suggest` ranks their entries.
MENU = {
    "block-shape": {
        "name": "sm_block4096",
        "params": {"BLOCK": 4096},
        "mechanism": "column block per loop step",
        "change": "BLOCK 1024 -> 4096 columns per loop step in every pass",
        "hypothesis": (
            "Wider steps keep four times the loads in flight per row and cut the loop overhead;"
            " 5% on the wide rows."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    "split-reduction": {
        "name": "sm_whole_row",
        "params": {"WHOLE": 8192},
        "mechanism": "chunk size of the row reduction",
        "change": (
            "a row up to 8192 wide is one chunk (BLOCK = next power of 2 of N) instead of "
            "1024-wide chunks"
        ),
        "hypothesis": (
            "Rows of 128 to 4096 finish each pass in one step without loop overhead or a "
            "masked tail; 5% on those cases, the 50304-wide rows unchanged."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
    "rows-per-program": {
        "name": "sm_rows4",
        "params": {"ROWS": 4},
        "mechanism": "rows per program",
        "change": "each program takes 4 rows ([4, BLOCK] per step) instead of 1",
        "hypothesis": (
            "Narrow rows (128, 2048) leave a 1024-wide step mostly masked or short; 4 rows per "
            "program give each step more work, 10% on the narrow cases."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
    "warps-per-program": {
        "name": "sm_warps8",
        "params": {"num_warps": 8},
        "mechanism": "num_warps",
        "change": "num_warps 4 -> 8",
        "hypothesis": "More warps per row program hide more load latency; 5% on the wide rows.",
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    "pipelining": {
        "name": "sm_stages4",
        "params": {"num_stages": 4},
        "mechanism": "software pipelining stages",
        "change": "num_stages 2 -> 4 for the column loops",
        "hypothesis": "Deeper pipelining prefetches further along the row; 3% on the long rows.",
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    "recompute-vs-reuse": {
        "name": "sm_one_pass_stats",
        "params": {"ONE_PASS": True},
        "mechanism": "reuse: running max and sum in a single pass",
        "change": (
            "max and sum of exponentials in one pass, the sum rescaled as the max grows (the row "
            "is read twice instead of three times)"
        ),
        "hypothesis": (
            "One read of the row less: the kernel is memory-bound, so up to 30% where the row "
            "does not stay in L2."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "decrease"},
    },
    "arithmetic-rewrite": {
        "name": "sm_exp2",
        "params": {"EXP2": True},
        "mechanism": "special-function instruction",
        "change": "exp(x) -> exp2(x*log2e)",
        "hypothesis": "exp2 maps onto the MUFU instruction directly; 1-2%.",
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
    "cache-hints": {
        "name": "sm_evict",
        "params": {"EVICT": True},
        "mechanism": "eviction hint",
        "change": "reads before the write pass with evict_last, the write pass's with evict_first",
        "hypothesis": (
            "Keeping the row in L2 between the passes turns the re-reads into L2 hits; 5% on the "
            "rows that do not fit."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "decrease"},
    },
    "precision": {
        "name": "sm_scale_low",
        "params": {"LOW": True},
        "mechanism": "lower-precision arithmetic",
        "change": "exp(x - max) * (1/sum) multiplied in the input dtype",
        "hypothesis": "A half-precision multiply saves a conversion per element; under 1%.",
        "expected_signal": {"metric": "sm_throughput", "direction": "decrease"},
    },
    "persistent-grid": {
        "name": "sm_persistent",
        "params": {"PERSISTENT": True},
        "mechanism": "persistent grid",
        "change": "4 x SM count programs loop over the row groups instead of one per group",
        "hypothesis": (
            "131072 short rows launch 131072 programs; a persistent grid saves the launch and "
            "tail effects, 5% there."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
}


# the variant this file is
VARIANT = 'sm_warps8'
PARAMS = {"BLOCK": 1024, "EVICT": false, "EXP2": true, "LOW": false, "ONE_PASS": false, "PERSISTENT": false, "ROWS": 1, "WHOLE": 0, "num_stages": 2, "num_warps": 8, "sms": 132}
