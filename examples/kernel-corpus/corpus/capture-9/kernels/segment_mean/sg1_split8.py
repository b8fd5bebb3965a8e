"""Segment mean over packed variable-length sequences (mean pooling of an embedding model over a
varlen batch): x [T, D] (fp16/bf16/fp32), the S sequences' row offsets cu [S + 1] (int32,
cu[0] = 0, cu[S] = T, every sequence at least one row), out[s] = mean of x[cu[s]:cu[s+1]] in
fp32 [S, D]. The lengths are data-dependent: random cut points, so that a few sequences are
long and many short, as in a packed batch."""

import torch
import triton
import triton.language as tl

NAME = "segment_mean"
FAMILY = "reduction"
# shape: [T rows in all, S sequences, D wide]
CASES = [
    {"id": "bf16-t32768s64d1024", "dtype": "bf16", "shape": [32768, 64, 1024],
     "tiny": [200, 5, 70]},
    {"id": "fp16-t65536s16d4096", "dtype": "fp16", "shape": [65536, 16, 4096],
     "tiny": [300, 3, 130]},
    {"id": "fp32-t8192s512d768", "dtype": "fp32", "shape": [8192, 512, 768],
     "tiny": [64, 20, 40]},
    {"id": "bf16-t16384s4d4096", "dtype": "bf16", "shape": [16384, 4, 4096],
     "tiny": [150, 2, 100]},
]  # fmt: skip
# the second campaign's cases (run_corpus.py --campaign 2): other shapes and dtypes
CASES_2 = [
    {"id": "fp16-t131072s256d1024", "dtype": "fp16", "shape": [131072, 256, 1024],
     "tiny": [400, 9, 64]},
    {"id": "bf16-t8192s8d8192", "dtype": "bf16", "shape": [8192, 8, 8192],
     "tiny": [90, 4, 300]},
    {"id": "fp32-t65536s1024d384", "dtype": "fp32", "shape": [65536, 1024, 384],
     "tiny": [120, 30, 48]},
    {"id": "fp16-t4096s2048d2048", "dtype": "fp16", "shape": [4096, 2048, 2048],
     "tiny": [50, 40, 33]},
]  # fmt: skip


@triton.jit
def kl_segment_mean(
    x_ptr,
    cu_ptr,
    order_ptr,
    o_ptr,
    D,
    BLOCK_D: tl.constexpr,
    ROWS: tl.constexpr,
    SPLIT: tl.constexpr,
    ORDER: tl.constexpr,
    NATIVE: tl.constexpr,
):
    # program (i, j, k): sequence i (or the i-th longest), columns j*BLOCK_D.., part k of SPLIT
    seg = tl.load(order_ptr + tl.program_id(0)) if ORDER else tl.program_id(0)
    start = tl.load(cu_ptr + seg)
    end = tl.load(cu_ptr + seg + 1)
    length = end - start
    span = tl.cdiv(length, SPLIT)
    lo = start + tl.program_id(2) * span
    hi = tl.minimum(lo + span, end)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    cmask = cols < D
    if NATIVE:
        acc = tl.zeros([ROWS, BLOCK_D], x_ptr.dtype.element_ty)
    else:
        acc = tl.zeros([ROWS, BLOCK_D], tl.float32)
    for r0 in range(lo, hi, ROWS):
        rows = r0 + tl.arange(0, ROWS)
        mask = (rows < hi)[:, None] & cmask[None, :]
        v = tl.load(x_ptr + rows[:, None].to(tl.int64) * D + cols[None, :], mask=mask, other=0.0)
        if NATIVE:
            acc += v
        else:
            acc += v.to(tl.float32)
    total = tl.sum(acc.to(tl.float32), axis=0) / length.to(tl.float32)
    if SPLIT == 1:
        tl.store(o_ptr + seg * D + cols, total, mask=cmask)
    else:  # the parts' shares of the mean are added into a zeroed out
        tl.atomic_add(o_ptr + seg * D + cols, total, mask=cmask)


def make_inputs(shape, dtype, seed, device):
    T, S, D = shape
    g = torch.Generator(device=device).manual_seed(seed)
    # S - 1 distinct cut points in 1..T-1: lengths >= 1, roughly exponential
    cuts = torch.randperm(T - 1, generator=g, device=device)[: S - 1] + 1
    cu = torch.cat([torch.zeros(1, device=device, dtype=torch.int64), cuts.sort().values,
                    torch.full((1,), T, device=device, dtype=torch.int64)])  # fmt: skip
    lengths = cu[1:] - cu[:-1]
    # hidden states with a per-sequence offset, so that the means are not all near zero
    offset = torch.randn((S, D), generator=g, device=device).repeat_interleave(lengths, dim=0)
    x = torch.randn((T, D), generator=g, device=device) + offset
    return {
        "x": x.to(dtype),
        "cu": cu.to(torch.int32),
        # the sequences longest first (a scheduler computes it once per batch, with cu)
        "order": torch.argsort(lengths, descending=True, stable=True).to(torch.int32),
        "out": torch.empty((S, D), device=device, dtype=torch.float32),
    }


def reference(x):
    cu = x["cu"].long()
    lengths = cu[1:] - cu[:-1]
    ids = torch.repeat_interleave(torch.arange(len(lengths), device=cu.device), lengths)
    sums = torch.zeros((len(lengths), x["x"].shape[1]), dtype=torch.float64, device=cu.device)
    sums.index_add_(0, ids, x["x"].double())
    return sums / lengths.double()[:, None]


def launch(p, x):
    D = x["x"].shape[1]
    S = x["cu"].numel() - 1
    split = p["SPLIT"]
    if split > 1:
        x["out"].zero_()
    kl_segment_mean[(S, triton.cdiv(D, p["BLOCK_D"]), split)](
        x["x"],
        x["cu"],
        x["order"],
        x["out"],
        D,
        BLOCK_D=p["BLOCK_D"],
        ROWS=p["ROWS"],
        SPLIT=split,
        ORDER=p["ORDER"],
        NATIVE=p["NATIVE"],
        num_warps=p["num_warps"],
    )
    return x["out"]


BASELINE = {
    "name": "sg0_base",
    "params": {
        "BLOCK_D": 128,
        "ROWS": 8,
        "SPLIT": 1,
        "ORDER": False,
        "NATIVE": False,
        "num_warps": 4,
    },
}
VARIANTS = [
    {
        "name": "sg1_split8",
        "params": {"SPLIT": 8},
        "mechanism": "split reduction across programs",
        "change": (
            "each sequence's rows split over 8 programs per column block; their shares of the "
            "mean atomically added into a zeroed fp32 out"
        ),
        "hypothesis": (
            "One program per sequence and 128 columns is 128 to 32768 programs; a long sequence "
            "keeps its programs streaming while the SMs of the short ones idle; eight parts per "
            "sequence shorten the longest program eightfold, 2x or more on the 4- to 16-sequence "
            "cases, a loss on the many-short cases where most parts are empty."
        ),
        "expected_signal": {"metric": "achieved_occupancy", "direction": "increase"},
    },
    {
        "name": "sg2_rows32",
        "params": {"ROWS": 32},
        "mechanism": "rows per step",
        "change": "ROWS 8 -> 32 rows loaded per loop step ([32, BLOCK_D] tiles)",
        "hypothesis": (
            "Four times the rows per step keep four times the loads in flight per program; 10% "
            "where sequences are hundreds of rows, a loss on sequences shorter than 32 rows, "
            "whose single step is mostly masked."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "sg3_block_d256",
        "params": {"BLOCK_D": 256},
        "mechanism": "block size",
        "change": "BLOCK_D 128 -> 256 columns per program",
        "hypothesis": (
            "Wider row segments give each thread 16-byte loads in half precision and halve the "
            "programs reading each sequence's offsets; 5% on the wide cases, a loss where it "
            "halves a grid that was already too small."
        ),
        "expected_signal": {"metric": "dram_throughput", "direction": "increase"},
    },
    {
        "name": "sg4_longest_first",
        "params": {"ORDER": True},
        "mechanism": "program order",
        "change": (
            "program i reduces the i-th longest sequence (order precomputed with the offsets) "
            "instead of sequence i"
        ),
        "hypothesis": (
            "Programs start in launch order; starting the longest sequences first keeps a long "
            "one from beginning last and running alone at the end, 5-10% on the cases with more "
            "programs than fit at once and lengths that vary tenfold, nothing elsewhere."
        ),
        "expected_signal": {"metric": "duration_us", "direction": "decrease"},
    },
    {
        "name": "sg5_accumulate_input_dtype",
        "params": {"NATIVE": True},
        "mechanism": "accumulation precision",
        "change": "running sums kept in the input dtype, upcast to fp32 only for the last sum",
        "hypothesis": (
            "Half-precision partial sums halve the accumulator registers and drop a convert per "
            "element, 2%; over sequences of thousands of rows the rounding may break the "
            "fp16/bf16 bound (no-op on fp32)."
        ),
        "expected_signal": {"metric": "registers_per_thread", "direction": "decrease"},
    },
]


# the variant this file is
VARIANT = 'sg1_split8'
PARAMS = {"BLOCK_D": 128, "NATIVE": false, "ORDER": true, "ROWS": 8, "SPLIT": 8, "num_warps": 4, "sms": 132}
