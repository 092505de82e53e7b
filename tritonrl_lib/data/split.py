"""The train / held-out split, made over op families so held-out tasks test generalisation.

In every category a deterministic (seed-keyed) choice of `heldout_fraction` of its families is
held out, at least one where the category has two or more families and at least one always left
for training; only categories of the levels `levels` names give families up (default both: a run whose
Level-2 test is KernelBench's held-out problems may keep every built-in fusion family for training,
`data.heldout_family_levels: [1]`). Held-out families are picked among those the task suite has
tasks for, so the held-out evaluation set is never empty by accident. SFT examples come only from train families.

Two held-out evaluation sets come out of it:

    (b) unseen families   the suite's tasks whose family is held out (`heldout_task_ids`)
    (a) unseen tasks      in each train family, `in_family` of its variant tasks (tasks/variants.py:
                          other shapes, constants, axes, dtypes; never the family's original),
                          chosen by a seed-keyed draw (`heldout_in_family_ids`)

RL trains on what is left (`train_task_ids`); a task of either set is never trained on.

KernelBook rows carry no family; `leaked_family` recognises a row whose reference is a single
operation of a held-out family, so such rows can be kept out of training.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..tasks.families import FAMILIES, all_families
from ..tasks.task import Task
from .records import read_json, write_json


@dataclass
class Split:
    seed: int
    heldout_fraction: float
    train_families: list[str]
    heldout_families: list[str]
    by_category: dict[str, dict[str, list[str]]]  # category -> {"train": [...], "heldout": [...]}
    levels: list[int] = field(default_factory=lambda: [1, 2])  # the levels whose categories hold families out
    train_task_ids: list[str] = field(default_factory=list)  # suite tasks of train families
    heldout_task_ids: list[str] = field(default_factory=list)  # suite tasks of held-out families
    untagged_task_ids: list[str] = field(default_factory=list)  # tasks with no known family
    heldout_in_family_ids: list[str] = field(default_factory=list)  # set (a): unseen tasks of train families
    settings: dict[str, Any] = field(default_factory=dict)  # what produced the run's data (01_data)
    counts: dict[str, Any] = field(default_factory=dict)  # measured counts and times of the data stage

    def side(self, task: Task) -> str:
        """"train", "heldout" or "untagged" for a task."""
        if task.op_family in self.heldout_families:
            return "heldout"
        if task.op_family in self.train_families:
            return "train"
        return "untagged"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Split":
        missing = [k for k in ("seed", "train_families", "heldout_families") if k not in d]
        if missing:
            raise ValueError(f"split file lacks {', '.join(missing)}; re-run 01_data to rewrite it")
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Split":
        return cls.from_dict(read_json(path))


class SplitUnavailable(RuntimeError):
    """The run has no readable split; the message says to run the data stage."""


def load_run_split(path: Path) -> Split:
    """The split 01_data wrote for a run, or SplitUnavailable naming what to do."""
    if not Path(path).is_file():
        raise SplitUnavailable(f"no split at {path}: run the data stage first (notebooks/01_data.ipynb, or "
                               "`tritonrl run --only 01_data` with the same --params and --run)")
    try:
        return Split.load(path)
    except (ValueError, OSError) as e:  # JSONDecodeError is a ValueError
        raise SplitUnavailable(f"{path} cannot be read ({e}); re-run the data stage (01_data)") from None


def is_heldout(split: Split, task: Task) -> bool:
    """Held out of training: listed by id (either held-out set), or of a held-out op family."""
    return task.id in split.heldout_task_ids or task.id in split.heldout_in_family_ids \
        or split.side(task) == "heldout"


def heldout_set_of(split: Split, task: Task) -> str | None:
    """Which held-out evaluation set a task belongs to: "families" (b), "tasks" (a) or None."""
    if task.id in split.heldout_in_family_ids:
        return "tasks"
    if task.id in split.heldout_task_ids or split.side(task) == "heldout":
        return "families"
    return None


def n_heldout(n_families: int, fraction: float) -> int:
    """How many of a category's families to hold out: round(n * fraction), at least one when the
    category has two or more families (and the fraction is positive), never all of them."""
    if n_families < 2 or fraction <= 0:
        return 0
    return min(max(int(n_families * fraction + 0.5), 1), n_families - 1)


def make_split(seed: int, heldout_fraction: float, tasks: Iterable[Task] = (), in_family: int = 0,
               levels: Sequence[int] = (1, 2)) -> Split:
    """The split of `tasks`: families held out per category of the levels `levels` names, then
    `in_family` variant tasks of each train family held out (set a; 0 = none)."""
    known = sorted(int(k[-1]) for k in FAMILIES)
    if any(lv not in known for lv in levels):
        raise ValueError(f"heldout_family_levels={list(levels)}: name levels among {known} (or none: no family "
                         "held out)")
    if in_family < 0:
        raise ValueError(f"in_family={in_family} must be 0 or more (variant tasks held out per train family)")
    if not 0.0 <= heldout_fraction <= 1.0:
        raise ValueError(f"heldout_fraction={heldout_fraction} must lie between 0 and 1")
    tasks = list(tasks)
    with_tasks = {t.op_family for t in tasks if t.op_family}
    by_category: dict[str, dict[str, list[str]]] = {}
    heldout: set[str] = set()
    for level_key, cats in FAMILIES.items():
        for cat, fams in cats.items():
            k = n_heldout(len(fams), heldout_fraction) if int(level_key[-1]) in levels else 0
            eligible = [f for f in fams if f in with_tasks] or list(fams)
            rng = random.Random(f"split:{seed}:{cat}")
            chosen = rng.sample(eligible, min(k, len(eligible)))
            rest = [f for f in fams if f not in chosen]
            chosen += rng.sample(rest, k - len(chosen)) if k > len(chosen) else []
            held = [f for f in fams if f in chosen]
            by_category[cat] = {"train": [f for f in fams if f not in chosen], "heldout": held}
            heldout.update(held)
    order = all_families()
    split = Split(seed=seed, heldout_fraction=heldout_fraction,
                  train_families=[f for f in order if f not in heldout],
                  heldout_families=[f for f in order if f in heldout], by_category=by_category,
                  levels=sorted(set(levels)))
    held_in = set(heldout_in_family(tasks, split.train_families, seed, in_family))
    for t in tasks:
        if t.id in held_in:
            split.heldout_in_family_ids.append(t.id)
            continue
        {"train": split.train_task_ids, "heldout": split.heldout_task_ids,
         "untagged": split.untagged_task_ids}[split.side(t)].append(t.id)
    return split


def heldout_in_family(tasks: Sequence[Task], train_families: Iterable[str], seed: int, k: int) -> list[str]:
    """Per train family, `k` of its variant tasks (meta `variant_of`), drawn with a family-keyed
    seed; a family keeps its original and at least one task for training whatever `k` is."""
    if k <= 0:
        return []
    by_family: dict[str, list[Task]] = {}
    for t in tasks:
        by_family.setdefault(t.op_family, []).append(t)
    out: list[str] = []
    for fam in train_families:
        members = by_family.get(fam, [])
        variants = sorted(t.id for t in members if t.meta.get("variant_of"))
        n = min(k, len(variants), len(members) - 1)
        if n > 0:
            out += random.Random(f"split:{seed}:in_family:{fam}").sample(variants, n)
    return out


def heldout_tasks(tasks: Iterable[Task], split: Split) -> list[Task]:
    return [t for t in tasks if split.side(t) == "heldout"]


def train_tasks(tasks: Iterable[Task], split: Split) -> list[Task]:
    """The tasks training may use: of train families, not held out in their family (set a)."""
    held = set(split.heldout_in_family_ids)
    return [t for t in tasks if split.side(t) == "train" and t.id not in held]


def in_family_tasks(tasks: Iterable[Task], split: Split) -> list[Task]:
    """Held-out set (a): unseen tasks of train families."""
    held = set(split.heldout_in_family_ids)
    return [t for t in tasks if t.id in held]


# Operation names (as the difficulty analysis reports them) that reveal a family. Families whose
# name is itself an op name (relu, softmax, cumsum, layer_norm, ...) match directly.
OP_ALIASES = {
    "mm": "matmul", "addmm": "matmul", "einsum": "matmul", "linear": "matmul", "bmm": "bmm", "baddbmm": "bmm",
    "mv": "matvec", "outer": "outer", "ger": "outer", "maxpool1d": "max_pool1d", "maxpool2d": "max_pool2d",
    "avgpool1d": "avg_pool1d", "avgpool2d": "avg_pool2d", "sum": "sum_dim", "mean": "mean_dim", "amax": "max_dim",
    "amin": "min_dim", "argmax": "argmax_dim", "argmin": "argmin_dim", "prod": "prod_dim", "norm": "norm_dim",
    "vector_norm": "norm_dim", "normalize": "l2_normalize", "batchnorm": "batch_norm", "leakyrelu": "leaky_relu",
    "hardtanh": "hardtanh", "mse_loss": "mse_loss", "l1_loss": "l1_loss", "smooth_l1_loss": "smooth_l1_loss",
    "cross_entropy": "cross_entropy", "kl_div": "kl_div", "cosine_similarity": "cosine_similarity",
    "abs": "abs", "square": "square", "clamp": "clamp", "clip": "clamp", "add": "add", "mul": "mul", "sub": "sub",
    "div": "div", "where": "where_positive", "gelu": "gelu", "silu": "silu", "swish": "silu",
    # nn.ConvTranspose<n>d; a depthwise / pointwise / separable Conv2d reads as conv2d
    "convtranspose1d": "conv_transpose1d", "convtranspose2d": "conv_transpose2d", "convtranspose3d": "conv_transpose3d",
}


def single_op_family(ops: Sequence[str]) -> str | None:
    """The Level-1 family a reference *is*, when its computation is one operation (repeated or not)
    that names a family; None otherwise. Fusions contain many ops but are no one op's task."""
    distinct = list(dict.fromkeys(ops))
    if len(distinct) != 1:
        return None
    op = distinct[0]
    known = set(all_families(level=1))
    fam = op if op in known else OP_ALIASES.get(op)
    return fam if fam in known else None


def leaked_family(ops: Sequence[str], heldout_families: Iterable[str]) -> str | None:
    """The held-out family a reference with these operations is a task of, if any."""
    fam = single_op_family(ops)
    return fam if fam is not None and fam in set(heldout_families) else None
