"""The one place that names a run's paths (`RunPaths`: everything under `outputs/<run>/`), and where
the project's checkout is (`project_root`: params/ and notebooks/)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError


@dataclass(frozen=True)
class RunPaths:
    """Every path of a run, derived from `outputs/<run>/`. No other code builds a path."""

    root: Path

    def __post_init__(self):
        object.__setattr__(self, "root", Path(self.root))

    # data
    @property
    def data_dir(self) -> Path: return self.root / "data"
    @property
    def sft_train(self) -> Path: return self.data_dir / "sft_train.jsonl"
    @property
    def difficulty_labels(self) -> Path: return self.data_dir / "difficulty_labels.jsonl"
    @property
    def split(self) -> Path: return self.data_dir / "split.json"
    @property
    def tasks_manifest(self) -> Path: return self.data_dir / "tasks.jsonl"
    @property
    def kernelbench_split(self) -> Path: return self.data_dir / "kernelbench_split.json"  # data.kernelbench
    @property
    def rl_train_sizes(self) -> Path: return self.data_dir / "rl_train_sizes.json"  # rl.train_task_max_mb's measurements

    # checkpoints: one name per model stage, used by every step (the source lost its RL run to
    # `rl_best_of_n` vs `rl_final`)
    @property
    def checkpoints_dir(self) -> Path: return self.root / "checkpoints"
    @property
    def sft_checkpoint(self) -> Path: return self.checkpoints_dir / "sft"
    @property
    def rl_checkpoint(self) -> Path: return self.checkpoints_dir / "rl"
    # inside checkpoints/rl (train/rl/run_frame.py describes the layout)
    @property
    def rl_state(self) -> Path: return self.rl_checkpoint / "rl_state.json"
    @property
    def rl_best(self) -> Path: return self.rl_checkpoint / "best.json"
    @property
    def rl_best_adapter(self) -> Path: return self.rl_checkpoint / "best"
    @property
    def rl_rounds_dir(self) -> Path: return self.rl_checkpoint / "rounds"

    def rl_round(self, index: int) -> "RoundPaths":
        """The files of best-of-N round `index` (0-based)."""
        return RoundPaths(self.rl_rounds_dir / f"round-{index:03d}")

    def checkpoint(self, model_stage: str) -> Path:
        """The adapter folder of a trained model stage (`sft` or `rl`)."""
        if model_stage not in ("sft", "rl"):
            raise ConfigError(f"no checkpoint for model stage {model_stage!r}: expected 'sft' or 'rl'")
        return self.checkpoints_dir / model_stage

    # logs
    @property
    def logs_dir(self) -> Path: return self.root / "logs"
    @property
    def sft_log(self) -> Path: return self.logs_dir / "sft_log.jsonl"
    @property
    def rl_log(self) -> Path: return self.logs_dir / "rl_log.jsonl"
    @property
    def curriculum_log(self) -> Path: return self.logs_dir / "curriculum.jsonl"
    @property
    def timings(self) -> Path: return self.logs_dir / "timings.json"

    # evaluation and report
    @property
    def eval_dir(self) -> Path: return self.root / "eval"

    def eval_file(self, model_stage: str) -> Path:
        return self.eval_dir / f"eval_{model_stage}.json"

    @property
    def charts_dir(self) -> Path: return self.root / "charts"

    def chart(self, name: str) -> Path:
        return self.charts_dir / f"{name}.png"

    @property
    def eval_comparison(self) -> Path: return self.eval_dir / "comparison.json"  # RL minus SFT, with intervals

    @property
    def report_html(self) -> Path: return self.root / "report.html"

    # notebooks and config
    @property
    def notebooks_dir(self) -> Path: return self.root / "notebooks"
    @property
    def config_snapshot(self) -> Path: return self.root / "config.yaml"

    def executed_notebook(self, step: str) -> Path:
        """The executed copy of pipeline step `step` (a notebook's stem, e.g. `03_rl`)."""
        return self.notebooks_dir / f"{step}.ipynb"

    def step_record(self, step: str) -> Path:
        """What `tritonrl run` recorded when `step` finished: its settings, the artefacts it read and wrote."""
        return self.notebooks_dir / f".{step}.done.json"

    @property
    def sft_run_state(self) -> Path: return self.sft_checkpoint / "sft_run.json"

    def ensure(self) -> "RunPaths":
        for d in (self.data_dir, self.checkpoints_dir, self.logs_dir, self.eval_dir, self.charts_dir,
                  self.notebooks_dir):
            d.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class RoundPaths:
    """The files of one best-of-N round, in checkpoints/rl/rounds/round-NNN/."""

    dir: Path

    @property
    def samples(self) -> Path: return self.dir / "samples.jsonl"  # every candidate with its verdict
    @property
    def meta(self) -> Path: return self.dir / "round.json"  # written once the round is verified
    @property
    def kept(self) -> Path: return self.dir / "kept.jsonl"  # the candidates trained on
    @property
    def adapter(self) -> Path: return self.dir / "adapter"  # the adapter after the round's training
    @property
    def trainer_dir(self) -> Path: return self.dir / "trainer"  # the fine-tune's scratch output, removed after



def project_root() -> Path:
    """The checkout holding params/ and notebooks/: $TRITONRL_HOME, else the nearest ancestor of
    the working directory with a tritonrl pyproject, else the package's own checkout."""
    env = os.environ.get("TRITONRL_HOME")
    if env:
        return Path(env).resolve()
    candidates = [Path.cwd().resolve(), *Path.cwd().resolve().parents]
    candidates.append(Path(__file__).resolve().parents[2])
    for d in candidates:
        pp = d / "pyproject.toml"
        if pp.is_file() and 'name = "tritonrl"' in pp.read_text(errors="ignore"):
            return d
    return Path.cwd().resolve()
