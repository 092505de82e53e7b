"""The Task contract: one KernelBench-format problem."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Task:
    """A KernelBench-format problem.

    `source` is a Python module defining `class Model(nn.Module)`, module-level shape constants,
    `get_inputs()` and `get_init_inputs()`. A solution is a module defining `class ModelNew`
    with the same constructor arguments that launches `@triton.jit` kernels.
    """

    id: str  # unique and stable, e.g. "builtin/L1/relu" or "kernelbench/L2/12_Gemm_Multiply_LeakyReLU"
    level: int  # 1 single ops, 2 fusions, 3 architectures / custom algorithms
    name: str
    source: str
    op_family: str = ""  # the operation, e.g. "leaky_relu", "row_softmax"; held-out splits are by op family
    category: str = ""  # coarse group of families, e.g. "activation", "reduction", "gemm_epilogue"
    origin: str = ""  # builtin | kernelbench-checkout | kernelbench-dataset | generated | kernelbook
    description: str = ""
    reference_solution: str | None = None  # a known-good ModelNew module, when the source has one
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Task":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})
