"""Row softmax, starting kernel: one program per row, the whole row in registers.

BLOCK = next_pow2(n_cols), default num_warps (4). Math in fp32, output in the input dtype.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def kl_softmax_s0_base(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    e = tl.exp(x - m)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def launch(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    kl_softmax_s0_base[(n_rows,)](x, out, x.stride(0), out.stride(0), n_cols, BLOCK=block)
    return out
