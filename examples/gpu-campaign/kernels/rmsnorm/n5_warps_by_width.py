"""RMSNorm forward, round 5 candidate: num_warps chosen from the row width.

Parent: n1_multirow. One mechanism: num_warps = 4 below 2048 columns (unchanged), 8 for
BLOCK >= 2048 and 16 for BLOCK >= 4096, so wide rows hold fewer values per thread.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def kl_rmsnorm_n5_warps_by_width(
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
    rstd = 1.0 / tl.sqrt(ms + eps)
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
    warps = 16 if block >= 4096 else (8 if block >= 2048 else 4)
    grid = (triton.cdiv(n_rows, rows),)
    kl_rmsnorm_n5_warps_by_width[grid](
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
        num_warps=warps,
    )
    return out
