"""Row softmax, round 2 candidate: masked tail filled with 0.0 instead of -inf.

Parent: s1_multirow. One mechanism: the fill value of masked (padded) lanes. This is wrong
whenever n_cols < BLOCK: padded lanes then add exp(0 - max) to the row sum (and a 0 to
the max), so rows with a tail come out scaled down. Validation must catch it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def kl_softmax_s2_zero_tail_fill(
    x_ptr,
    y_ptr,
    x_row_stride,
    y_row_stride,
    n_rows,
    n_cols,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    rows = rows.to(tl.int64)
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    m = tl.max(x, axis=1)
    e = tl.exp(x - m[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(
        y_ptr + rows[:, None] * y_row_stride + cols[None, :],
        y.to(y_ptr.dtype.element_ty),
        mask=mask,
    )


def launch(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    rows = max(1, 2048 // block)
    grid = (triton.cdiv(n_rows, rows),)
    kl_softmax_s2_zero_tail_fill[grid](
        x, out, x.stride(0), out.stride(0), n_rows, n_cols, BLOCK=block, ROWS=rows
    )
    return out
