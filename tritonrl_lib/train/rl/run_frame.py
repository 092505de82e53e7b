"""An RL run's frame, whichever the method: `open_run` finds where it starts and what its results
depend on, and resumes the RL folder or clears it; `RLRun.result` is what the trainer returns.

Layout of `paths.rl_checkpoint` (checkpoints/rl, the one folder every stage names; every path
below comes from RunPaths):

    adapter_config.json, adapter_model.safetensors, tokenizer files, tritonrl_model.json
                        the latest RL adapter (the final one once the run finishes): what eval loads
    rl_state.json       method + fingerprint of the settings the folder's contents belong to
    best.json, best/    the best measured policy and its adapter (best.py)
    rounds/round-NNN/   best-of-N: samples.jsonl (every candidate with its verdict), round.json
                        (written after verification: the round is never verified twice),
                        kept.jsonl, adapter/
    checkpoint-N/       GRPO: the Trainer's resumable checkpoints

Several processes (distributed.py): rank 0 alone clears or resumes the folder and writes what
`open_run` writes; the others wait for it and take its word on whether this is a resume.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from ...core.config import RunConfig
from ...core.jsonio import read_json, write_json
from ...core.paths import RunPaths
from ...model import load as models
from ...tasks.task import Task
from ...verify.batch import training_verify_config
from .best import read_best
from .distributed import SINGLE, Ranks
from .log import read_rl_log
from .reward_tasks import training_sizes_note
from .start import pool_by_level, start_adapter, training_tasks


@dataclass
class RLResult:
    method: str
    checkpoint: Path  # checkpoints/rl: the adapter eval loads
    status: str  # trained | resumed | already_done
    rounds_done: int = 0  # best-of-N rounds or GRPO optimizer steps finished
    best: dict[str, Any] | None = None
    log: Path | None = None
    curriculum_log: Path | None = None
    wall_s: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)  # the rl_log records of this run

    def summary(self) -> str:
        unit = "rounds" if self.method == "best_of_n" else "steps"
        best = f"best {self.best.get('metric')}={self.best.get('value'):.3f} ({self.best.get('policy')})" \
            if self.best else "no best recorded"
        return (f"RL {self.method} {self.status}: {self.rounds_done} {unit}, {best}, wall={self.wall_s:.1f}s; "
                f"adapter: {self.checkpoint}")


@dataclass
class RLRun:
    """An opened RL run: what a trainer needs before its first round or step."""

    cfg: RunConfig
    paths: RunPaths
    method: str
    start: Path  # the SFT adapter RL continues from
    tasks: list[Task]  # the training tasks
    fingerprint: dict[str, Any]
    resuming: bool  # the RL folder holds this very run: go on from what it holds
    base_spec: str  # the base model every saved adapter names
    say: Callable[[str], None]
    t_start: float  # time.perf_counter() when the run was opened
    ranks: Ranks = SINGLE  # the processes running it (distributed.py)

    @property
    def by_level(self) -> dict[int, list[Task]]:
        return pool_by_level(self.tasks)

    def finished_adapter(self) -> dict[str, Any] | None:
        """The marker of the adapter in checkpoints/rl when one is complete (None otherwise)."""
        root = self.paths.rl_checkpoint
        return read_json(root / models.MARKER, None) if models.checkpoint_complete(root) else None

    def result(self, status: str, rounds_done: int, history: list[dict[str, Any]] | None = None) -> RLResult:
        """What the trainer returns; `history` defaults to the whole RL log (a run found finished) on
        rank 0, and to none on the other ranks (the log is rank 0's: they need not read it)."""
        if history is None:
            history = read_rl_log(self.paths) if self.ranks.is_main else []
        return RLResult(self.method, self.paths.rl_checkpoint, status, rounds_done=rounds_done,
                        best=read_best(self.paths), log=self.paths.rl_log, curriculum_log=self.paths.curriculum_log,
                        wall_s=time.perf_counter() - self.t_start, history=history)


def open_run(cfg: RunConfig, paths: RunPaths | None, method: str, *, tasks: Sequence[Task] | None,
             force: bool, say: Callable[[str], None], ranks: Ranks = SINGLE) -> RLRun:
    """Find the start adapter and the training tasks, and resume the RL folder when it holds this
    very run (same fingerprint, not `force`); otherwise clear it and start a fresh state. With
    several ranks, rank 0 decides and prepares the folder, and fills the model cache first."""
    from ..trainer import base_model_spec  # imports transformers, which reading a finished run never needs

    t_start = time.perf_counter()
    paths = (paths or cfg.paths).ensure()
    start = start_adapter(paths)
    # rank 0 alone measures the tasks against the cap (every rank probing at once would share the cores N ways)
    train_tasks = ranks.from_main(lambda: training_tasks(cfg, paths, tasks))
    if cfg.rl.train_task_max_mb:
        say(training_sizes_note(train_tasks, cfg.rl.train_task_max_mb))
    fp = fingerprint(cfg, method, start, [t.id for t in train_tasks], world=ranks.world)
    ranks.agree(fp, "the run's fingerprint")
    resuming = ranks.from_main(lambda: prepare_state(paths, method, fp, force, say))
    if ranks.world > 1:  # the model cache's one-time conversions (embedded GGUF, tiny build) by rank 0 alone
        if ranks.is_main:
            models.resolve_model(cfg.model.model, cfg.seed)
        ranks.barrier()
    return RLRun(cfg, paths, method, start, train_tasks, fp, resuming, base_model_spec(cfg.model.model), say,
                 t_start, ranks)


@contextlib.contextmanager
def verifier_pool(cfg: RunConfig, pool=None, ranks: Ranks = SINGLE) -> Iterator[Any]:
    """The pool to verify with: `pool` as given (left open), or a new one with the training rewards'
    settings (`training_verify_config`: as many workers as the host's cores feed), closed at the end.
    With several ranks each has its own pool, its workers on the rank's GPU and its share of the
    host's cores (`Ranks.pool_on_my_gpu`, `Ranks.pool_workers`); rank 0's shows progress."""
    if pool is not None:
        yield pool
        return
    from ...verify.pool import VerifierPool  # imports torch: only when this run starts its own pool

    with ranks.pool_on_my_gpu():
        own = VerifierPool(training_verify_config(cfg), workers=ranks.pool_workers(cfg), progress=ranks.is_main)
    try:
        yield own
    finally:
        own.close()


# --------------------------------------------------------------------------- state and resume


def adapter_identity(path: Path) -> str:
    """A short hash of an adapter folder's marker and weights' size/mtime (what RL started from)."""
    h = hashlib.sha256()
    marker = path / models.MARKER
    if marker.is_file():
        h.update(marker.read_bytes())
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        f = path / name
        if f.is_file():
            st = f.stat()
            h.update(f"{name}:{st.st_size}".encode())
            with f.open("rb") as fh:
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:16]


def fingerprint(cfg: RunConfig, method: str, start: Path, task_ids: Sequence[str], world: int = 1) -> dict[str, Any]:
    """What an RL run's results depend on; its checkpoints are resumed only when this matches.

    `world`: the processes running it. Best-of-N's fine-tune batch grows with it and each rank samples
    with its own seeds, so a run resumed on another count would mix two regimes."""
    rl = dataclasses.asdict(cfg.rl)
    rl["method"] = method
    if method != "best_of_n" or not rl["replay_ratio"]:
        del rl["replay_ratio"]  # only best-of-N replays: off, runs fingerprinted before it existed still resume
    del rl["rl_time_budget_s"]  # when a call stops, not what a step does: a run goes on under another budget
    if not rl["train_task_max_mb"]:
        del rl["train_task_max_mb"]  # no cap: runs fingerprinted before it existed still resume
    train = {k: getattr(cfg.sft, k) for k in ("per_device_batch_size", "grad_accum_steps", "max_seq_len", "packing")}
    if "replay_ratio" in rl and cfg.sft.answer_layout != "as_written":
        train["answer_layout"] = cfg.sft.answer_layout  # replayed corpus rows are laid out so; as_written as before
    if world > 1:  # only then: one process's fingerprint is as before, so its runs written then still resume
        train["world"] = world
    return {"method": method, "rl": rl, "model": dataclasses.asdict(cfg.model), "seed": cfg.seed,
            "verify": dataclasses.asdict(cfg.verify), "train": train, "start": adapter_identity(start),
            "tasks": hashlib.sha256("\n".join(sorted(task_ids)).encode()).hexdigest()[:16]}


def fingerprint_digest(fp: dict[str, Any]) -> str:
    """A short name of an RL run's whole fingerprint, written into its adapter's marker: an adapter that
    another run's settings produced is another model (its evaluations do not carry over), even where its
    weights come out the same (a best-of-N run that kept nothing)."""
    return hashlib.sha256(json.dumps(fp, sort_keys=True, default=str).encode()).hexdigest()[:16]


def clear_rl_folder(paths: RunPaths) -> None:
    """Remove what an older, different RL run left (adapter marker first, so nothing looks finished)."""
    root = paths.rl_checkpoint
    if not root.is_dir():
        return
    (root / models.MARKER).unlink(missing_ok=True)
    for p in root.iterdir():
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
    for log in (paths.rl_log, paths.curriculum_log):
        log.unlink(missing_ok=True)


def _world(fp: dict[str, Any]) -> int:
    return int(fp.get("train", {}).get("world", 1))


def _what_changed(old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """Why a folder's run is not resumed, in words; a changed process count by name, with the
    setting that resumes a run (the gpus it started with)."""
    if isinstance(old, dict) and _world(old) != _world(new):
        recorded = "world" in old.get("train", {})  # a state written before counts were recorded holds none
        before = str(_world(old)) if recorded else "1 (or several, before process counts were recorded)"
        return (f"the process count changed: the RL folder's run ran on {before} and this one runs on {_world(new)}, "
                f"and best-of-N's fine-tune batch and the ranks' sampling seeds depend on it; a run resumes only on "
                f"the process count it started with (the gpus setting)")
    return "settings, start adapter or tasks changed"


def prepare_state(paths: RunPaths, method: str, fp: dict[str, Any], force: bool, say=print) -> bool:
    """True when the folder holds this very run (resume); otherwise it is cleared and a fresh state
    written."""
    root = paths.rl_checkpoint
    state = read_json(paths.rl_state, None)
    if state and state.get("fingerprint") == fp and not force:
        return True
    if state or (root.is_dir() and any(root.iterdir())):
        why = "force=True" if force else _what_changed((state or {}).get("fingerprint"), fp)
        say(f"RL: {why}; clearing {root} and the RL logs")
    clear_rl_folder(paths)
    root.mkdir(parents=True, exist_ok=True)
    write_json(paths.rl_state, {"method": method, "fingerprint": fp,
                                "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return False
