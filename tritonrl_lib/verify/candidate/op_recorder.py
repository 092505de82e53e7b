"""A dispatch mode that counts the aten ops run while it is active, for the verifier's own trusted
phases: the reference's forward (its GEMM and convolution calls, heavy_ops.py) and the loading of the
reference's weights into a candidate (loading_watch.py). It reports nothing itself; the candidate's
forward has its own census (runtime_checks.OpCensus), which reports through the guard."""

from __future__ import annotations

from collections import Counter

from torch.utils._python_dispatch import TorchDispatchMode

from .heavy_ops import operand_key


class OpRecorder(TorchDispatchMode):
    """`ops`: {aten op name: calls} while active (the mode may be entered more than once); `heavy`: the
    heavy calls' operand keys (heavy_ops.operand_key: "gemm:float32")."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.heavy: Counter[str] = Counter()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the census: nothing is compiled here, and torch._dynamo takes seconds to import

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func)] += 1
        key = operand_key(func, args)
        if key is not None:
            self.heavy[key] += 1
        return func(*args, **(kwargs or {}))
