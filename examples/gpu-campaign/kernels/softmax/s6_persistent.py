"""Row softmax, round 6 candidate (written on s1_multirow): persistent grid over the SMs.

Parent: s1_multirow. One mechanism: instead of one program per block of rows, launch
min(row blocks, 4 x SM count) programs that loop over row blocks with a grid stride. The
per-block work (ROWS = max(1, 2048 // BLOCK) rows, whole row in registers) is unchanged.
"""

import torch
import triton
import triton.language as tl

_SM_COUNT: dict[int, int] = {}


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 132
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SM_COUNT:
        _SM_COUNT[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SM_COUNT[index]


@triton.jit
def kl_softmax_s6_persistent(
    x_ptr,
    y_ptr,
    x_row_stride,
    y_row_stride,
    n_rows,
    n_cols,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    n_blocks = tl.cdiv(n_rows, ROWS)
    cols = tl.arange(0, BLOCK)
    col_mask = (cols < n_cols)[None, :]
    for blk in range(tl.program_id(0), n_blocks, tl.num_programs(0)):
        rows = blk * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & col_mask
        rows = rows.to(tl.int64)
        x = tl.load(
            x_ptr + rows[:, None] * x_row_stride + cols[None, :], mask=mask, other=-float("inf")
        )
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
    n_blocks = triton.cdiv(n_rows, rows)
    grid = (min(n_blocks, 4 * _sm_count(x.device)),)
    kl_softmax_s6_persistent[grid](
        x, out, x.stride(0), out.stride(0), n_rows, n_cols, BLOCK=block, ROWS=rows
    )
    return out
