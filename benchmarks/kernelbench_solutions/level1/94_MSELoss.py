import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def squared_error_partial_kernel(p_ptr, t_ptr, partial_ptr, n_elements,
                                 BLOCK: tl.constexpr, BLOCKS_PER_PROGRAM: tl.constexpr):
    # Pass 1 of 2: each program sums (p - t)^2 over BLOCKS_PER_PROGRAM consecutive blocks in a
    # float32 vector and stores one partial sum (a fixed order: the result does not depend on
    # scheduling). int64 offsets: the published inputs have 1.07e9 elements each.
    start = tl.program_id(0).to(tl.int64) * (BLOCK * BLOCKS_PER_PROGRAM)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(0, BLOCKS_PER_PROGRAM):
        idx = start + j * BLOCK + offs
        mask = idx < n_elements
        p = tl.load(p_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        t = tl.load(t_ptr + idx, mask=mask, other=0.0).to(tl.float32)
        d = p - t
        acc += d * d
    tl.store(partial_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def mean_of_partials_kernel(partial_ptr, out_ptr, n_partials, n_elements, BLOCK: tl.constexpr):
    # Pass 2 of 2: one program adds the partial sums and divides by the element count.
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_partials, BLOCK):
        acc += tl.load(partial_ptr + start + offs, mask=start + offs < n_partials, other=0.0)
    mean = tl.sum(acc, axis=0) / n_elements
    tl.store(out_ptr, mean.to(out_ptr.dtype.element_ty))


def mse_loss(predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    assert predictions.shape == targets.shape, \
        f"predictions {tuple(predictions.shape)} and targets {tuple(targets.shape)} differ in shape"
    p = predictions.contiguous()
    t = targets.contiguous()
    n = p.numel()
    assert p.dtype == t.dtype, f"predictions ({p.dtype}) and targets ({t.dtype}) differ in dtype"
    out = torch.empty((), dtype=p.dtype, device=p.device)
    block, per_program = 4096, 16
    n_partials = max(1, triton.cdiv(n, block * per_program))
    partials = torch.empty(n_partials, dtype=torch.float32, device=p.device)
    squared_error_partial_kernel[(n_partials,)](p, t, partials, n, BLOCK=block, BLOCKS_PER_PROGRAM=per_program,
                                                num_warps=8)
    mean_of_partials_kernel[(1,)](partials, out, n_partials, n, BLOCK=1024, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mse_loss(predictions, targets)
