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

Their precision is the reference's too: each heavy call's operand dtypes are recorded (`operand_key`:
"gemm:float16"), the reference's per input set and the candidate's by its census, and a candidate whose
heavy call runs on operands of a dtype that neither the reference's calls of that family take on that set
nor the set's own inputs have (the reference phase sends both as one list: `dtype_excess`; a float32 GEMM
run on half operands and widened back is another op, tensor cores rather than Triton) is flagged
`cheat:heavy_op_dtype`.
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


_OPERAND_FAMILY: dict[Any, str | None] = {}  # op -> the family whose operands it is judged for (a cache)


def _operand_family(op: Any) -> str | None:
    """The heavy family of an op, counted (family) or not (UNCOUNTED: attention, RNN layers)."""
    try:
        return _OPERAND_FAMILY[op]
    except (KeyError, TypeError):
        pass
    fam = family(op)
    if fam is None:
        base = aten_base_name(op)
        fam = next((f for f, names in UNCOUNTED.items() if base in names), None)
    try:
        _OPERAND_FAMILY[op] = fam
    except TypeError:
        pass
    return fam


def operand_key(op: Any, args: Any) -> str | None:
    """"<family>:<dtype>[+<dtype>...]" for a heavy op (its floating-point tensor operands' dtypes, sorted),
    None for any other op or one without float operands."""
    fam = _operand_family(op)
    if fam is None:
        return None
    dtypes: set[str] = set()
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            dtype = getattr(t, "dtype", None)
            if dtype is not None and callable(getattr(t, "is_floating_point", None)) and t.is_floating_point():
                dtypes.add(str(dtype).replace("torch.", ""))
    return f"{fam}:{'+'.join(sorted(dtypes))}" if dtypes else None


def operand_dtypes(keys: Mapping[str, int] | list[str]) -> dict[str, list[str]]:
    """Operand keys ("gemm:float32") -> the dtypes each family's calls took: {"gemm": ["float32"]}."""
    out: dict[str, set[str]] = {}
    for key in keys:
        fam, _, dtypes = str(key).partition(":")
        out.setdefault(fam, set()).update(d for d in dtypes.split("+") if d)
    return {fam: sorted(d) for fam, d in out.items()}


def dtype_excess(candidate: Mapping[str, int], reference: Any) -> list[tuple[str, list[str], list[str]]]:
    """Where the candidate's heavy calls took operand dtypes the reference's of the same family never do on
    that input set: (family, the candidate's dtypes there, the reference's). Nothing for a family the
    reference does not call (the call count judges that), nor when the reference's dtypes are missing."""
    if not isinstance(reference, dict):
        return []
    mine = operand_dtypes(candidate)
    out = []
    for fam, dtypes in sorted(mine.items()):
        ref = reference.get(fam)
        if not isinstance(ref, list) or not ref:
            continue
        extra = sorted(set(dtypes) - {str(d) for d in ref})
        if extra:
            out.append((fam, extra, sorted(str(d) for d in ref)))
    return out


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
