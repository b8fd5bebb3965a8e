"""Row softmax, round 3 candidate: online (streaming) max/sum over column tiles.

Parent: s1_multirow. One mechanism: instead of holding the whole row, the program walks it in
TILE = min(BLOCK, 1024) column tiles; pass 1 keeps a running max and a rescaled running sum
(online softmax), pass 2 re-reads each tile and writes exp(x - max) / sum. Rows per program
are unchanged (max(1, 2048 // BLOCK)).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def kl_softmax_s3_online_tiled(
    x_ptr,
    y_ptr,
    x_row_stride,
    y_row_stride,
    n_rows,
    n_cols,
    TILE: tl.constexpr,
    ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_mask = rows < n_rows
    rows = rows.to(tl.int64)
    x_base = x_ptr + rows[:, None] * x_row_stride
    y_base = y_ptr + rows[:, None] * y_row_stride
    m = tl.full((ROWS,), -float("inf"), tl.float32)
    s = tl.zeros((ROWS,), tl.float32)
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_base + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    for start in range(0, n_cols, TILE):
        cols = start + tl.arange(0, TILE)
        mask = row_mask[:, None] & (cols < n_cols)[None, :]
        x = tl.load(x_base + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m[:, None]) / s[:, None]
        tl.store(y_base + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    rows = max(1, 2048 // block)
    tile = min(block, 1024)
    grid = (triton.cdiv(n_rows, rows),)
    kl_softmax_s3_online_tiled[grid](
        x, out, x.stride(0), out.stride(0), n_rows, n_cols, TILE=tile, ROWS=rows
    )
    return out
