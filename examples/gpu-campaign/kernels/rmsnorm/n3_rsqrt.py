"""RMSNorm forward, round 3 candidate: one rsqrt instead of 1/sqrt.

Parent: n1_multirow. One mechanism: rstd = rsqrt(ms + eps) in place of 1.0 / sqrt(ms + eps).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def kl_rmsnorm_n3_rsqrt(
    x_ptr,
    w_ptr,
    y_ptr,
    x_row_stride,
    y_row_stride,
    n_rows,
    n_cols,
    eps,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    rows = rows.to(tl.int64)
    x = tl.load(x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=0.0)
    x = x.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=1) / n_cols
    rstd = tl.math.rsqrt(ms + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(
        y_ptr + rows[:, None] * y_row_stride + cols[None, :],
        y.to(y_ptr.dtype.element_ty),
        mask=mask,
    )


def launch(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, out: torch.Tensor | None = None
) -> torch.Tensor:
    assert x.dim() == 2 and x.stride(1) == 1 and weight.shape == (x.shape[1],)
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    rows = max(1, 2048 // block)
    grid = (triton.cdiv(n_rows, rows),)
    kl_rmsnorm_n3_rsqrt[grid](
        x,
        weight,
        out,
        x.stride(0),
        out.stride(0),
        n_rows,
        n_cols,
        eps,
        BLOCK=block,
        ROWS=rows,
    )
    return out
