import torch, triton, triton.language as tl, warnings, logging, cmath, math
@triton.jit
def k(x_ptr, y_ptr, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B); m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)
def run():
    x = torch.randn(1000); y = torch.empty_like(x)
    k[(4,)](x, y, 1000, B=256)
    warnings.warn("w"); logging.getLogger("x").warning("hi")
    return bool(torch.equal(y, x.relu()))
