"""Is the lean engine the model's function? Its logits against the model's own forward, when built.

The lean engine is the model's function computed another way. In float32 the two agree to
rounding. In bf16/fp16 each rounds differently, and how far apart that leaves their logits
depends on the weights: ~2-5% for the bare embedded model, up to 20% for some fine-tuned adapters
(measured on an H200, benchmarks/lean_check.py), against 50-150% for a real mistake. So in half
precision a gap over HALF_TOL is settled by float32: the engine is accepted when it is no further
from the model's float32 forward than the model's own half-precision forward is (with a margin).
"""

from __future__ import annotations

from typing import Sequence

from .lean import LeanDecoder, own_logits, rel_error

FP32_TOL = 1e-4
HALF_TOL = 0.1
HALF_MARGIN = 1.5
FP32_ARBITER_MAX_PARAMS = 3_000_000_000  # a float32 copy of larger models is too big to make on the fly


def lean_agrees(lean: LeanDecoder, model, ids: Sequence[int]) -> tuple[bool, str]:
    """Whether the engine computes the model's function; (ok, what was measured)."""
    import copy

    import torch

    got, split = lean.check_logits(ids)
    own = own_logits(model, ids, split)
    err = rel_error(got, own)
    if lean.dtype == torch.float32:  # agreeing is the rule here: nothing to say then
        ok = err <= FP32_TOL
        return ok, "" if ok else f"its logits differ from the model's own forward (relative error {err:.2e})"
    if err <= HALF_TOL:
        return True, ""
    n_params = sum(p.numel() for p in model.parameters())
    if n_params > FP32_ARBITER_MAX_PARAMS:
        return False, (f"its logits differ from the model's own {lean.dtype} forward by {err:.2e} (relative), "
                       f"and the model is too large for a float32 comparison")
    try:
        m32 = copy.deepcopy(model).float()
    except Exception as exc:  # out of memory, weights that cannot widen, a model that does not copy
        return False, f"its logits differ from the model's own forward ({err:.2e}) and no float32 copy: {exc}"
    try:
        truth = own_logits(m32, ids, split)
    finally:
        del m32
        if lean.device.type == "cuda":
            torch.cuda.empty_cache()
    e_lean, e_own = rel_error(got, truth), rel_error(own, truth)
    ok = e_lean <= max(HALF_TOL, HALF_MARGIN * e_own)
    return ok, (f"its logits are {e_lean:.2e} (relative) from the model's float32 forward, the model's own "
                f"{str(lean.dtype).replace('torch.', '')} forward {e_own:.2e}")
