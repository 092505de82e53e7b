"""What a candidate computes while the reference's weights are loaded into it.

The verifier builds ModelNew, then loads the reference's state into it (`load_state_dict`), moves it
to the device and dtype, and switches it to eval mode where the reference is random. Each of those can
run the candidate's own code (state-dict hooks, `_load_from_state_dict`, `_apply`, `train` overrides),
outside `forward` and so outside the op census, on the very weights the task uses: epilogue work
folded into the weights there (a GEMM's output scale, a sum over features as one weight vector) would
be PyTorch compute nobody counted. Loading may re-lay weights out (copies, casts, views, allocation,
concatenation, flips, a cuDNN RNN's weight flattening); any other aten op is flagged
(`compute_while_loading`). The same work in `__init__`, on the solution's own weights (equal to the
reference's under the shared seed, as KernelBench builds both), is not watched: folding there is the
classic inference optimisation (batch norm into a convolution) as much as a way around this rule.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..policy import DATA_MOVEMENT_OPS, runtime_op_allowed, split_op_name

# layout work a weight may get while it is loaded, beyond every policy's bookkeeping
LAYOUT_OPS = DATA_MOVEMENT_OPS | {"flip", "roll", "rot90", "_cudnn_rnn_flatten_weight"}


def computed_while_loading(ops: Mapping[str, int]) -> list[str]:
    """The ops beyond bookkeeping and layout among those recorded while the candidate was loaded
    (an op_recorder.OpRecorder's `ops`), by name."""
    return sorted(op for op in ops if not runtime_op_allowed("strict", op) and split_op_name(op)[1] not in LAYOUT_OPS)


def relaid_out(mine: Any, reference: Any) -> bool:
    """Whether the solution's own weight holds the reference's values in another order (built from the
    same seed, then transposed or flipped in `__init__` and kept under the reference's name): the same
    smallest and largest value and the same sum and sum of squares, but not equal element by element.
    Copying the reference's tensor over it would undo the layout the solution's kernel reads."""
    import torch

    if not (isinstance(mine, torch.Tensor) and isinstance(reference, torch.Tensor)) or mine.numel() < 2 \
            or mine.dtype != reference.dtype or not mine.is_floating_point() or mine.shape != reference.shape:
        return False
    a = torch.Tensor.detach(mine).to("cpu")
    b = torch.Tensor.detach(reference).to("cpu")
    # the common case (the same values in the same order, or other values) is settled without a copy:
    # this runs for every weight of every candidate, and a Level-2 weight can hold 64 Mi values
    if torch.equal(a, b) or not (a.min() == b.min() and a.max() == b.max()):
        return False
    a, b = a.double(), b.double()
    return bool(torch.isclose(a.sum(), b.sum(), rtol=1e-9, atol=1e-9)
                and torch.isclose((a * a).sum(), (b * b).sum(), rtol=1e-9, atol=1e-9))
