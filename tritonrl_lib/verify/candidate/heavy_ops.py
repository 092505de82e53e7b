"""How many GEMM and convolution calls a forward makes, the reference's and the candidate's.

The `fusion` policy lets a Level-2 solution keep the reference's heavy ops (the GEMM and convolution
families of policy.py) in PyTorch and judges it on the rest. It does not let it add more of them:
epilogue work written as one more GEMM or convolution (a sum over features as a product with a ones
vector, an average pool as a depthwise convolution with 1/k^2 weights) is PyTorch doing what the
task asks Triton to do. The reference phase records the reference's ops per input set
(op_recorder.OpRecorder) and sends their `reference_counts` with its outputs; the judge holds the
candidate's census on the same set to those counts (`excess`): no more heavy calls in all than the
reference makes. Counted by family, not by name: `F.linear` and `x @ w.t()` plus a bias kernel are one
GEMM each, whichever aten op they dispatch to, and a convolution done as an im2col GEMM is still one
heavy call.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping

from ..policy import CONV_OPS, GEMM_OPS, aten_base_name

FAMILIES = {"gemm": "GEMM", "conv": "convolution"}

# Reference ops that do GEMMs or convolutions inside, how many no census can tell (an RNN's per step and
# layer, attention's two and more): a reference that runs one leaves that family without a limit, so
# an honest candidate may write them as plain GEMMs with Triton between.
UNCOUNTED = {
    "gemm": frozenset({"scaled_dot_product_attention", "_scaled_dot_product_attention_math",
                       "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu",
                       "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
                       "_flash_attention_forward", "_efficient_attention_forward", "_native_multi_head_attention",
                       "_transformer_encoder_layer_fwd", "lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell",
                       "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell",
                       "_cudnn_rnn", "miopen_rnn", "mkldnn_rnn_layer", "_trilinear", "bilinear"}),
    "conv": frozenset({"cudnn_convolution_relu", "cudnn_convolution_add_relu"}),
}


def family(op: object) -> str | None:
    """"gemm" or "conv" for an op of those families (an aten name or OpOverload), else None."""
    base = aten_base_name(op)
    if base in GEMM_OPS:
        return "gemm"
    if base in CONV_OPS:
        return "conv"
    return None


def counts(ops: Mapping[str, int]) -> dict[str, int]:
    """A census ({aten op name: calls}) -> calls per heavy family."""
    out: Counter[str] = Counter()
    for op, n in ops.items():
        f = family(op)
        if f is not None and isinstance(n, int):
            out[f] += n
    return dict(out)


def reference_counts(ops: Mapping[str, int]) -> dict[str, int | None]:
    """The reference's census (an op_recorder.OpRecorder's `ops`) -> calls per heavy family, None for a
    family it ran an uncounted op of (UNCOUNTED): what the reference phase sends with its outputs."""
    bases = {aten_base_name(op) for op in ops}
    return {**counts(ops), **{fam: None for fam, names in UNCOUNTED.items() if bases & names}}


def excess(ops: Mapping[str, int], reference: Any) -> list[tuple[str, int, int, list[str]]]:
    """Where the candidate made more heavy calls than the reference on the same set: nothing while its
    GEMMs and convolutions together are no more than the reference's (a convolution done as an im2col
    GEMM is still one heavy call); else each family it called more often than the reference, as
    (family, candidate's calls, reference's, the candidate's ops of that family). No limit where the
    reference ran uncounted heavy work (a family None), nor when its counts are missing or malformed."""
    if not isinstance(reference, dict) or not all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                                  for v in reference.values()):
        return []
    if any(v is None for v in reference.values()):
        return []
    mine = counts(ops)
    if sum(mine.values()) <= sum(reference.values()):
        return []
    return [(f, n, reference.get(f, 0), sorted(str(op) for op in ops if family(op) == f))
            for f, n in sorted(mine.items()) if n > reference.get(f, 0)]
