import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_softmax_kernel(x_ptr, out_ptr, n_cols, inv_temp, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=float("-inf")).to(tl.float32) * inv_temp
    v = v - tl.max(v, axis=0)
    e = tl.where(mask, tl.exp(v), 0.0)
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden, num_classes, temperature):
        super().__init__()
        self.head = nn.Linear(hidden, num_classes)
        self.temperature = temperature

    def forward(self, x):
        logits = self.head(x).contiguous()
        n_cols = logits.shape[-1]
        n_rows = logits.numel() // n_cols
        out = torch.empty_like(logits)
        BLOCK = triton.next_power_of_2(n_cols)
        scaled_softmax_kernel[(n_rows,)](logits, out, n_cols, 1.0 / self.temperature, BLOCK=BLOCK)
        return out
