"""Is the lean engine the model's function? Its logits against the model's own forward, when built.

The lean engine is the model's function computed another way. In float32 the two agree to
rounding. In bf16/fp16 each rounds differently, and how far apart that leaves their logits
depends on the weights: ~2-5% for the bare embedded model, up to 20% for some fine-tuned adapters
(measured on an H200, benchmarks/lean_check.py; an r=64 adapter trained 6 epochs: 13.3% from the
float32 forward where the model's own bf16 forward is 5.9% from it), against 25-150% for a real
mistake (one projection off by 1.5x in a two-layer model: 25%, 24 times the bf16 forward's gap).
So in half precision a gap over HALF_TOL is settled in float32, in two steps: the engine is
accepted when it is no further from the model's float32 forward than the model's own
half-precision forward is (HALF_MARGIN, 1.5 times); up to HALF_CAP_MARGIN (3 times: the adapter above
was 2.3), an engine built the same way from the float32 model must also agree with that model's
float32 forward to FP32_TOL. That asks the question itself (does the engine compute this function?)
free of rounding: a mistake in the engine's code is made again in float32 and refused there; rounding
is not. Past the cap, or not finite, it is refused: a fault of the half-precision path alone (a cast,
an overflow) would not show in a float32 engine. Refusing costs a lot: the fallback (model.generate)
is ~13 times slower, which took a whole evaluation's budget on an H200.
"""

from __future__ import annotations

from typing import Sequence

from .lean import LeanDecoder, own_logits, rel_error

FP32_TOL = 1e-4
HALF_TOL = 0.1
HALF_MARGIN = 1.5
HALF_CAP_MARGIN = 3.0  # past this many times the model's own half-precision gap, never rounding alone (module doc)
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
        return _settled_in_float32(lean, m32, ids, got, own, split)
    except Exception as exc:  # out of memory on the way: the engine is not used, sampling goes on without it
        return False, f"its logits differ from the model's own forward ({err:.2e}); the float32 check failed: {exc}"
    finally:
        del m32
        if lean.device.type == "cuda":
            torch.cuda.empty_cache()


def _settled_in_float32(lean: LeanDecoder, m32, ids: Sequence[int], got, own, split: int) -> tuple[bool, str]:
    """The two float32 steps (the module's docstring): the engine's gap against the model's own, then, past the
    margin but within HALF_CAP_MARGIN, the engine built from the float32 model against that model."""
    import math

    truth = own_logits(m32, ids, split)
    e_lean, e_own = rel_error(got, truth), rel_error(own, truth)
    said = (f"its logits are {e_lean:.2e} (relative) from the model's float32 forward, the model's own "
            f"{str(lean.dtype).replace('torch.', '')} forward {e_own:.2e}")
    if not math.isfinite(e_lean):
        return False, said
    if e_lean <= max(HALF_TOL, HALF_MARGIN * e_own):
        return True, said
    if e_lean > max(HALF_TOL, HALF_CAP_MARGIN * e_own):
        # beyond what rounding alone has been seen to do: a fault of the half-precision path itself would not
        # show in an engine built in float32, so that engine's agreement cannot clear this one
        return False, said
    e32 = _float32_engine_error(m32, ids)
    if e32 is not None and e32 <= FP32_TOL:
        return True, f"{said}; built from the float32 model it agrees with that model's forward ({e32:.1e})"
    return False, said + ("" if e32 is None else f"; built from the float32 model it is {e32:.2e} from that "
                                                   "model's forward: not rounding")


def _float32_engine_error(m32, ids: Sequence[int]) -> float | None:
    """The relative error of a lean engine built from the float32 model against that model's own forward,
    both in full float32 (TF32 off meanwhile, through torch's own setting: its rounding is what this step
    leaves out); None where no engine could be built from it."""
    import torch

    try:
        lean32 = LeanDecoder(m32, use_graphs=False)
    except Exception:  # unsupported, out of memory
        return None
    try:
        before = torch.get_float32_matmul_precision()
    except RuntimeError:  # the caller mixed torch's two TF32 APIs: leave its settings alone
        before = None
    if before is not None:
        torch.set_float32_matmul_precision("highest")
    try:
        return lean32.check_against(m32, ids)
    finally:
        if before is not None:
            torch.set_float32_matmul_precision(before)
        lean32.release()
        del lean32
