"""What both RL methods share: the training-task pool, where RL starts, run state and resume,
the per-round/step log, the best-checkpoint record, and reading the logs back for plots.

Layout of `paths.rl_checkpoint` (checkpoints/rl, the one folder every stage names):

    adapter_config.json, adapter_model.safetensors, tokenizer files, tritonrl_model.json
                        the latest RL adapter (the final one once the run finishes): what eval loads
    rl_state.json       method + fingerprint of the settings the folder's contents belong to
    best.json           the best measured policy: method, round/step, metric, value, path
    best/               that policy's adapter
    rounds/round-NNN/   best-of-N: samples.jsonl (every candidate with its verdict), round.json
                        (written after verification: the round is never verified twice), adapter/
    checkpoint-N/       GRPO: the Trainer's resumable checkpoints
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .. import models
from ..config import ConfigError, RunConfig, RunPaths
from ..tasks.task import Task

STATE_FILE = "rl_state.json"
BEST_DIR = "best"
ROUNDS_DIR = "rounds"


class RLStartError(FileNotFoundError):
    """RL cannot start (no SFT adapter, no training tasks); the message names the stage to run."""


# --------------------------------------------------------------------------- tasks


def heldout_filter(paths: RunPaths, tasks: Sequence[Task]) -> list[Task]:
    """The tasks NOT held out for evaluation by the run's split (data/split.py: by op family)."""
    from ..data.split import SplitUnavailable, is_heldout, load_run_split

    try:
        split = load_run_split(paths.split)
    except SplitUnavailable as e:
        raise RLStartError(f"rl_tasks=train needs the held-out split: {e}; or choose rl_tasks=all / level1 / "
                           "level2 / a list of task ids") from None
    return [t for t in tasks if not is_heldout(split, t)]


def select_rl_tasks(cfg: RunConfig, paths: RunPaths | None = None, tasks: Sequence[Task] | None = None) -> list[Task]:
    """The RL training tasks chosen by cfg.rl.rl_tasks:

    train   every task of cfg.data.task_source not held out by the run's split (the default)
    all     every task          level1 / level2   tasks of that level (level2 includes harder levels)
    a,b,c   these task ids
    """
    from ..tasks import load_tasks

    paths = paths or cfg.paths
    if tasks is None:
        tasks = load_tasks(cfg.data.task_source, size=cfg.data.task_size)
    tasks = list(tasks)
    sel = cfg.rl.rl_tasks.strip()
    if sel == "train":
        chosen = heldout_filter(paths, tasks)
    elif sel == "all":
        chosen = tasks
    elif sel == "level1":
        chosen = [t for t in tasks if t.level == 1]
    elif sel == "level2":
        chosen = [t for t in tasks if t.level >= 2]
    else:
        wanted = [s.strip() for s in sel.split(",") if s.strip()]
        by_id = {t.id: t for t in tasks}
        missing = [w for w in wanted if w not in by_id]
        if missing:
            raise ConfigError(f"rl_tasks names unknown task ids: {', '.join(missing[:5])}"
                              f"{' ...' if len(missing) > 5 else ''}; ids look like {tasks[0].id if tasks else '?'} "
                              "(or use train / all / level1 / level2)")
        chosen = [by_id[w] for w in wanted]
    if not chosen:
        raise RLStartError(f"rl_tasks={sel!r} selects no tasks from {cfg.data.task_source!r}")
    return chosen


def pool_by_level(tasks: Iterable[Task]) -> dict[int, list[Task]]:
    out: dict[int, list[Task]] = {}
    for t in tasks:
        out.setdefault(int(t.level), []).append(t)
    return out


# --------------------------------------------------------------------------- where RL starts


def start_adapter(paths: RunPaths) -> Path:
    """The SFT adapter RL continues from; a clear error naming 02_sft when it is missing."""
    sft = paths.sft_checkpoint
    if not models.checkpoint_complete(sft):
        raise RLStartError(f"no finished SFT adapter at {sft}: RL starts from it. Run the SFT stage first "
                           "(notebooks/02_sft.ipynb, or `tritonrl run --only 02_sft` with the same profile and run)")
    return sft


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


def _device_of(model):
    import torch

    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def base_model_spec(cfg: RunConfig) -> str:
    spec = cfg.model.model
    p = Path(spec).expanduser()
    if spec not in ("embedded", "tiny") and p.exists():
        return models.adapter_base(p) if models.is_adapter_dir(p) else str(p.resolve())
    return spec


# --------------------------------------------------------------------------- state and resume


def fingerprint(cfg: RunConfig, method: str, start: Path, task_ids: Sequence[str]) -> dict[str, Any]:
    """What an RL run's results depend on; its checkpoints are resumed only when this matches."""
    rl = dataclasses.asdict(cfg.rl)
    rl["method"] = method
    train = {k: getattr(cfg.sft, k) for k in ("per_device_batch_size", "grad_accum_steps", "max_seq_len", "packing")}
    return {"method": method, "rl": rl, "model": dataclasses.asdict(cfg.model), "seed": cfg.seed,
            "verify": dataclasses.asdict(cfg.verify), "train": train, "start": adapter_identity(start),
            "tasks": hashlib.sha256("\n".join(sorted(task_ids)).encode()).hexdigest()[:16]}


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=str), encoding="utf-8")
    tmp.replace(path)


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, default=str) + "\n")
    tmp.replace(path)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a jsonl log; a torn last line (a kill mid-append) is ignored."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


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


def prepare_state(cfg: RunConfig, paths: RunPaths, method: str, fp: dict[str, Any], force: bool,
                  say=print) -> bool:
    """True when the folder holds this very run (resume); otherwise it is cleared and a fresh state
    written."""
    root = paths.rl_checkpoint
    state = read_json(root / STATE_FILE)
    if state and state.get("fingerprint") == fp and not force:
        return True
    if state or (root.is_dir() and any(root.iterdir())):
        why = "force=True" if force else "settings, start adapter or tasks changed"
        say(f"RL: {why}; clearing {root} and the RL logs")
    clear_rl_folder(paths)
    root.mkdir(parents=True, exist_ok=True)
    write_json(root / STATE_FILE, {"method": method, "fingerprint": fp,
                                   "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return False


def trim_log(path: Path, key: str, upto: int) -> list[dict[str, Any]]:
    """Keep the records whose `key` < upto (work that finished); rewrite the file; return them."""
    kept = [r for r in read_jsonl(path) if int(r.get(key, -1)) < upto]
    if path.is_file():
        write_jsonl(path, kept)
    return kept


def append_log(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")


# --------------------------------------------------------------------------- best checkpoint


def read_best(paths: RunPaths) -> dict[str, Any] | None:
    return read_json(paths.rl_best)


def maybe_record_best(paths: RunPaths, model, tokenizer, base_model: str, *, method: str, where: dict[str, Any],
                      metric: str, value: float, extra: dict[str, Any] | None = None) -> bool:
    """Save `model` as the best policy when `value` beats the recorded one (ties keep the earlier)."""
    best = read_best(paths)
    if best is not None and best.get("method") == method and float(best.get("value", float("-inf"))) >= value:
        return False
    folder = paths.rl_checkpoint / BEST_DIR
    models.save_checkpoint(model, tokenizer, folder, base_model=base_model,
                           extra={"stage": "rl", "method": method, "best": True, **where})
    write_json(paths.rl_best, {"method": method, **where, "metric": metric, "value": value,
                               "path": str(folder), **(extra or {}),
                               "recorded": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return True


# --------------------------------------------------------------------------- statistics


def verdict_stats(levels: Sequence[int], verdicts: Sequence[Any]) -> dict[str, Any]:
    """Correct rate and mean reward overall and by level, and how far candidates got."""
    n = len(verdicts)
    out: dict[str, Any] = {"samples": n, "correct": sum(bool(v.correct) for v in verdicts)}
    out["correct_rate"] = out["correct"] / n if n else None
    out["mean_reward"] = sum(float(v.reward) for v in verdicts) / n if n else None
    by_level: dict[str, dict[str, Any]] = {}
    for lvl in sorted(set(int(x) for x in levels)):
        vs = [v for x, v in zip(levels, verdicts) if int(x) == lvl]
        by_level[str(lvl)] = {"samples": len(vs), "correct": sum(bool(v.correct) for v in vs),
                              "correct_rate": sum(bool(v.correct) for v in vs) / len(vs),
                              "mean_reward": sum(float(v.reward) for v in vs) / len(vs)}
    out["by_level"] = by_level
    stages: dict[str, int] = {}
    for v in verdicts:
        stages[v.stage] = stages.get(v.stage, 0) + 1
    out["stages"] = stages
    # candidates that got past extraction and the static check, i.e. ran in a worker process
    out["ran_in_workers"] = sum(n for st, n in stages.items() if st not in ("none", "extract"))
    return out


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


# --------------------------------------------------------------------------- reading logs back (plots)


def read_rl_log(paths: RunPaths) -> list[dict[str, Any]]:
    return read_jsonl(paths.rl_log)


def rl_table(paths: RunPaths) -> str:
    """The rl_log as a plain-text table, one row per round (best-of-N) or step (GRPO)."""
    log = read_rl_log(paths)
    if not log:
        return "(no RL rounds or steps logged yet)"
    key = "round" if "round" in log[0] else "step"

    def pct(x):
        return "-" if x is None else f"{100 * x:.0f}%"

    def num(x, fmt="{:.3f}"):
        return "-" if x is None else fmt.format(x)

    head = f"{key:>5} {'tasks':>5} {'samples':>7} {'correct':>7} {'L1':>5} {'L2':>5} {'reward':>6} " \
           f"{'kept':>4} {'verif/min':>9} {'tok/s':>8} {'P(L2)':>5}"
    rows = [head]
    for r in log:
        lv = r.get("by_level") or {}
        rows.append(f"{r.get(key):>5} {len(r.get('tasks', [])):>5} {r.get('samples', 0):>7} "
                    f"{pct(r.get('correct_rate')):>7} {pct(lv.get('1', {}).get('correct_rate')):>5} "
                    f"{pct(lv.get('2', {}).get('correct_rate')):>5} {num(r.get('mean_reward')):>6} "
                    f"{str(r.get('kept', '-')):>4} {num(r.get('verifications_per_min'), '{:.0f}'):>9} "
                    f"{num(r.get('rollout_tokens_per_s'), '{:.0f}'):>8} {num(r.get('curriculum_p'), '{:.2f}'):>5}")
    return "\n".join(rows)


def plot_rl_curves(paths: RunPaths, save: bool = True):
    """Reward / correct-rate per round (or step) and the curriculum's P(Level 2), from the logs.
    Returns the matplotlib figure (None when there is nothing logged yet)."""
    from ..curriculum import read_curriculum_log

    log = read_rl_log(paths)
    cur = read_curriculum_log(paths.curriculum_log)
    if not log and not cur:
        return None
    import matplotlib

    if save:
        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
    if log:
        key = "round" if "round" in log[0] else "step"
        xs = [r[key] for r in log]
        ax1.plot(xs, [r.get("mean_reward") for r in log], marker="o", label="mean reward")
        ax1.plot(xs, [r.get("correct_rate") for r in log], marker="s", label="correct rate")
        for lvl, style in (("1", ":"), ("2", "--")):
            ys = [(r.get("by_level") or {}).get(lvl, {}).get("correct_rate") for r in log]
            if any(y is not None for y in ys):
                ax1.plot(xs, ys, linestyle=style, label=f"correct rate L{lvl}")
        ax1.set_xlabel(key)
        ax1.set_ylim(-0.02, 1.02)
        ax1.set_title(f"RL ({log[0].get('method', '')}) on training tasks")
        ax1.legend(fontsize=8)
    if cur:
        xs = [r["step"] for r in cur]
        ax2.step(xs, [r["p_level2"] for r in cur], where="post", label="P(Level 2)")
        ax2.plot(xs, [r["running_l1_rate"] for r in cur], marker=".", label="running L1 correct rate")
        trig = next((r["triggered_at"] for r in cur if r.get("triggered_at") is not None), None)
        if trig is not None:
            ax2.axvline(trig, color="grey", linestyle=":", label=f"trigger (step {trig})")
        ax2.set_xlabel("curriculum step")
        ax2.set_ylim(-0.02, 1.02)
        ax2.set_title("curriculum")
        ax2.legend(fontsize=8)
    fig.tight_layout()
    if save:
        paths.charts_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(paths.chart("rl_curves"), dpi=110)
    return fig


# --------------------------------------------------------------------------- one entry for both methods


def train_rl(cfg: RunConfig, paths: RunPaths | None = None, **kwargs) -> RLResult:
    """Run cfg.rl.method (best_of_n | grpo) with `kwargs` passed through (pool=, force=, ...)."""
    if cfg.rl.method == "best_of_n":
        from .best_of_n import train_best_of_n

        return train_best_of_n(cfg, paths, **kwargs)
    if cfg.rl.method == "grpo":
        from .grpo import train_grpo

        return train_grpo(cfg, paths, **kwargs)
    raise ConfigError(f"rl.method={cfg.rl.method!r}: expected best_of_n or grpo")
