"""The data stage's files and their record formats (one JSON object per line in every .jsonl).

sft_train.jsonl (`SFTExample`): one verified training pair per line. `prompt`/`completion` are
TRL's conversational prompt/completion columns (SFTTrainer takes them as they are); the other
columns are flat and typed the same on every row (but `meta`, a small record of the example's sizes
and surface), so `datasets.load_dataset("json", ...)` reads the file without schema surprises.

difficulty_labels.jsonl (`DifficultyRecord`): one heuristic label per task.

split.json (`Split`, written by split.py): families and task ids on each side of the split, plus
the settings and counts that produced the run's data (what 01_data compares to skip a re-run).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# the data stage's files are read and written like every other file of a run (one damage policy)
from ..core.jsonio import read_json, read_jsonl, write_json, write_jsonl  # noqa: F401  (re-exported)


@dataclass
class SFTExample:
    id: str  # "<origin>/<op_family or source name>/<content hash>"; unique in a file
    task_id: str  # the id of the task the prompt was made from (a generated or KernelBook task)
    origin: str  # generated | kernelbook
    op_family: str  # a family of tasks/families.py; "" for KernelBook rows
    category: str  # the family's category; "" for KernelBook rows
    level: int  # 1 single op, 2 fusion, 3 architecture / custom algorithm
    prompt: list[dict[str, str]]  # [system, user] messages (prompts.build_messages)
    completion: list[dict[str, str]]  # [assistant] message: the solution in one ```python block
    source: str  # the PyTorch reference module (the task's source)
    solution: str  # the ModelNew module, as it appears inside the completion's block
    variant: str = ""  # how this example was varied, for people: "dtype=float16 shape=... style=..."
    verified: bool = False  # the verifier passed `solution` on the task `task_id` names before it was kept (a
    #                         published-scale `source` is that task with larger constants; the verifier ran the task)
    # generated examples: index, dtype, the verified `shape` / `numel` and the prompt's `published_shape` /
    # `published_numel` (a published-scale prompt shows the verified module with larger constants),
    # `int64_offsets`, `house_surface`, `surface`; {} for KernelBook rows
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SFTExample":
        missing = [k for k in ("id", "prompt", "completion") if k not in d]
        if missing:
            raise ValueError(f"SFT record lacks {', '.join(missing)}: {str(d)[:120]}")
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class DifficultyRecord:
    id: str  # the task's id
    origin: str
    name: str
    op_family: str
    category: str
    declared_level: int | None  # the level the source gave the task (None for KernelBook rows)
    level: int  # the heuristic's label: 1, 2 or 3
    reasons: list[str] = field(default_factory=list)  # why, e.g. "chain: conv2d -> batch_norm -> relu"
    n_tokens: int = 0  # Python tokens in the reference's forward computation

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DifficultyRecord":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


def read_sft_examples(path: str | Path) -> list[SFTExample]:
    return [SFTExample.from_dict(d) for d in read_jsonl(path)]


def read_difficulty_labels(path: str | Path) -> list[DifficultyRecord]:
    return [DifficultyRecord.from_dict(d) for d in read_jsonl(path)]
