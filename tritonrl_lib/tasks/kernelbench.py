"""KernelBench as a source of the pipeline: its problems' categories, and a fixed train / held-out split.

With `data.kernelbench` pointing at a checkout (ScalingIntelligence/KernelBench, read at run time,
never copied), 01_data splits its Level 1 and Level 2 problems: within every (level, category)
stratum a share `data.kernelbench_heldout_fraction` is held out, chosen by a hash of the seed and
the problem's id (deterministic, independent of the order files are listed in). RL draws its
KernelBench tasks from the train part only (at training sizes); evaluation reports on the held-out
part at the published sizes. The split is written to the run folder (`kernelbench_split.json`) and
shown in the report, so it is fixed, written down and never crossed.

A category is read from the problem itself: its name (KernelBench names say what the module does,
`23_Softmax`, `12_Gemm_Multiply_LeakyReLU`) and, where the name says nothing, the calls its
source makes. Level 1: elementwise, reduction, softmax, normalization, matmul, conv, pooling,
cumulative, loss, attention. Level 2: the heavy op kept in PyTorch (gemm or conv) and whether the
chain after it is elementwise only (`*_epilogue`) or reduces, normalises or pools (`*_reduction`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.jsonio import read_json, write_json
from .loaders import load_kernelbench_dir
from .task import Task

LEVELS = (1, 2)  # the levels the pipeline trains and reports on
SPLIT_FORMAT = 1

# name fragments (lower case), checked in this order: the first match names the category
_L1_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("conv", ("conv",)),
    ("attention", ("attention",)),
    ("loss", ("loss",)),
    ("cumulative", ("cumsum", "cumprod")),
    ("pooling", ("pool",)),
    ("normalization", ("norm",)),
    ("softmax", ("softmax",)),
    ("reduction", ("reduction", "argmax", "argmin", "sum", "mean", "max_", "min_", "prod")),
    ("matmul", ("matmul", "matrix", "gemm", "bmm", "matvec", "outer")),
)
_CONV_CALLS = frozenset({"Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
                         "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})
# calls in a source (attribute or function names), for problems whose name says nothing
_L1_CALLS: tuple[tuple[str, frozenset[str]], ...] = (
    ("conv", _CONV_CALLS),
    ("attention", frozenset({"scaled_dot_product_attention", "MultiheadAttention"})),
    ("loss", frozenset({"mse_loss", "cross_entropy", "kl_div", "smooth_l1_loss", "l1_loss", "nll_loss",
                        "triplet_margin_loss", "hinge_embedding_loss", "cosine_similarity", "MSELoss",
                        "CrossEntropyLoss", "KLDivLoss", "SmoothL1Loss", "HuberLoss", "huber_loss"})),
    ("cumulative", frozenset({"cumsum", "cumprod"})),
    ("pooling", frozenset({"MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
                           "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
                           "AdaptiveAvgPool2d", "adaptive_avg_pool2d"})),
    ("normalization", frozenset({"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm",
                                 "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "layer_norm", "batch_norm",
                                 "group_norm", "instance_norm", "normalize", "norm", "rms_norm"})),
    ("softmax", frozenset({"softmax", "log_softmax", "Softmax", "LogSoftmax"})),
    ("reduction", frozenset({"sum", "mean", "amax", "amin", "argmax", "argmin", "prod", "logsumexp"})),
    ("matmul", frozenset({"matmul", "mm", "bmm", "mv", "einsum", "outer", "Linear", "linear"})),
)
_HEAVY_CONV = _CONV_CALLS
_HEAVY_GEMM = frozenset({"Linear", "linear", "matmul", "mm", "bmm", "addmm", "einsum"})
# in a Level-2 name, a part after the heavy op that reduces, normalises or pools
_L2_REDUCING = ("sum", "mean", "max", "min", "logsumexp", "softmax", "norm", "pool", "argmax", "argmin",
                "globalavgpool", "variance", "std")
CATEGORIES = {1: tuple(c for c, _ in _L1_RULES) + ("elementwise",),
              2: ("gemm_epilogue", "gemm_reduction", "conv_epilogue", "conv_reduction", "other")}


def _calls(source: str) -> set[str]:
    """The names a source calls or builds: `torch.relu(x)` -> relu, `nn.Conv2d(...)` -> Conv2d."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute):
                out.add(f.attr)
            elif isinstance(f, ast.Name):
                out.add(f.id)
    return out


def _name_words(name: str) -> str:
    """`23_Softmax` -> `softmax`; the problem number dropped, lower case, words joined by `_`."""
    return re.sub(r"^\d+_", "", name).lower()


def category(task: Task) -> str:
    """The KernelBench category of a Level 1 or Level 2 problem (see the module doc)."""
    words = _name_words(task.name)
    calls = _calls(task.source)
    if task.level == 1:
        if "scalar" in words:  # a matrix times a scalar is elementwise work
            return "elementwise"
        for cat, fragments in _L1_RULES:
            if any(f in words for f in fragments):
                return cat
        for cat, names in _L1_CALLS:
            if calls & names:
                return cat
        return "elementwise"
    conv = bool(calls & _HEAVY_CONV) or "conv" in words
    gemm = bool(calls & _HEAVY_GEMM) or any(w in words for w in ("gemm", "matmul", "bmm", "linear"))
    heavy = "conv" if conv else "gemm" if gemm else None
    if heavy is None:
        return "other"
    parts = words.split("_")
    start = next((i for i, p in enumerate(parts) if p.startswith(("conv", "gemm", "matmul", "bmm", "linear"))), 0)
    tail = parts[start + 1:]
    reducing = any(r in p for p in tail for r in _L2_REDUCING)  # batchnorm, maxpool, logsumexp, ...
    return f"{heavy}_{'reduction' if reducing else 'epilogue'}"


@dataclass
class KernelBenchSplit:
    """Which KernelBench problems RL may train on and which only evaluation sees."""

    checkout: str
    seed: int
    heldout_fraction: float
    categories: dict[str, str]  # task id -> category
    train_ids: list[str]
    heldout_ids: list[str]
    sources_digest: str  # of every problem's source: another checkout (or an edited one) is another split
    format: int = SPLIT_FORMAT
    strata: dict[str, dict[str, int]] = field(default_factory=dict)  # "L1/matmul" -> {"train": n, "heldout": n}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "KernelBenchSplit":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def save(self, path: Path) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: Path) -> "KernelBenchSplit":
        return cls.from_dict(read_json(path))

    def side(self, task_id: str) -> str | None:
        """"train", "heldout", or None for a problem the split does not hold."""
        if task_id in self._heldout:
            return "heldout"
        return "train" if task_id in self._train else None

    @functools.cached_property
    def _heldout(self) -> frozenset[str]:  # side() runs once per task: the sets are made once
        return frozenset(self.heldout_ids)

    @functools.cached_property
    def _train(self) -> frozenset[str]:
        return frozenset(self.train_ids)


class SplitOutOfDate(ValueError):
    """The checkout's problems are not the ones the split was made of (edited, or another checkout)."""


def sources_digest(tasks: Iterable[Task]) -> str:
    h = hashlib.sha256()
    for t in sorted(tasks, key=lambda t: t.id):
        h.update(f"{t.id}\0{hashlib.sha256(t.source.encode()).hexdigest()}\n".encode())
    return h.hexdigest()[:16]


def _held_count(n: int, fraction: float) -> int:
    """Problems held out of a stratum of `n`: the share rounded, at least one of any stratum of two
    or more (every kind of problem is measured), and never all of it (every kind is trained on)."""
    if n <= 1:
        return 0
    return min(n - 1, max(1, round(n * fraction)))


def make_kernelbench_split(tasks: Sequence[Task], seed: int, heldout_fraction: float,
                           checkout: str = "") -> KernelBenchSplit:
    """Stratified by (level, category); within a stratum the problems are ordered by a hash of the
    seed and their id, and the first `_held_count` are held out."""
    if not 0.0 < heldout_fraction < 1.0:
        raise ValueError(f"kernelbench_heldout_fraction={heldout_fraction} must be between 0 and 1 (exclusive)")
    chosen = [t for t in tasks if t.level in LEVELS]
    # load_kernelbench tagged them already; a task from elsewhere is tagged here
    cats = {t.id: t.category if t.category in CATEGORIES[t.level] else category(t) for t in chosen}
    strata: dict[tuple[int, str], list[Task]] = {}
    for t in chosen:
        strata.setdefault((t.level, cats[t.id]), []).append(t)
    train, held, counts = [], [], {}
    for (level, cat), members in sorted(strata.items()):
        members = sorted(members, key=lambda t: hashlib.sha256(f"{seed}:{t.id}".encode()).hexdigest())
        k = _held_count(len(members), heldout_fraction)
        held += [t.id for t in members[:k]]
        train += [t.id for t in members[k:]]
        counts[f"L{level}/{cat}"] = {"train": len(members) - k, "heldout": k}
    order = {t.id: i for i, t in enumerate(chosen)}
    return KernelBenchSplit(checkout=checkout, seed=seed, heldout_fraction=heldout_fraction, categories=cats,
                            train_ids=sorted(train, key=order.get), heldout_ids=sorted(held, key=order.get),
                            sources_digest=sources_digest(chosen), strata=counts)


def load_kernelbench(checkout: str | Path) -> list[Task]:
    """The checkout's Level 1 and Level 2 problems, as published, each tagged with its category."""
    tasks = load_kernelbench_dir(checkout, levels=LEVELS)
    return [_tagged(t) for t in tasks]


def _tagged(task: Task) -> Task:
    return dataclasses.replace(task, category=category(task))


def split_tasks(tasks: Sequence[Task], split: KernelBenchSplit, side: str) -> list[Task]:
    """The problems of one side of the split ("train" or "heldout"), in the tasks' order."""
    ids = set(split.train_ids if side == "train" else split.heldout_ids)
    return [t for t in tasks if t.id in ids]


def split_side_tasks(split: KernelBenchSplit, side: str, checkout: str | Path = "") -> list[Task]:
    """One side of the split, read from the checkout it was made of (`checkout` where the split names
    none); SplitOutOfDate when the problems there changed since, TaskSourceError when it cannot be read."""
    tasks = load_kernelbench(split.checkout or checkout)
    if sources_digest(tasks) != split.sources_digest:
        raise SplitOutOfDate(f"the KernelBench checkout at {split.checkout or checkout} changed since 01_data split it")
    return split_tasks(tasks, split, side)
