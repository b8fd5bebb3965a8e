"""Row softmax for Ascend (triton-ascend): the starting kernel.

One program per row; the whole row is loaded into UB in one block.
"""

import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def launch(x, out):
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, n_rows, n_cols, x.stride(0), BLOCK=block)
    return out
