"""Run the numbered notebooks in order with papermill, resumably.

Each notebook runs into `outputs/<run>/notebooks/`. A notebook that finished is recorded with a
marker holding the parameters and the notebook's content hash; a later run skips it while both
match, unless forced. Once a notebook re-runs, every later one re-runs too: they read what it
wrote. A failing notebook stops the run; its executed copy is kept and its own error is shown.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .config import ConfigError, RunConfig, load_config, project_root, resolve_key


class NotebookFailed(RuntimeError):
    def __init__(self, notebook: Path, executed: Path, ename: str, evalue: str, traceback: str):
        self.notebook, self.executed = notebook, executed
        self.ename, self.evalue, self.traceback = ename, evalue, traceback
        super().__init__(f"{notebook.name} failed: {ename}: {evalue}\n"
                         f"executed copy kept at {executed}")


@dataclass
class StageResult:
    notebook: str
    status: str  # ran | skipped | failed
    wall_s: float = 0.0


@dataclass
class PipelineResult:
    config: RunConfig
    stages: list[StageResult] = field(default_factory=list)


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def discover_notebooks(directory: Path | None = None) -> list[Path]:
    """`NN_name.ipynb` files, in numeric order."""
    directory = directory or notebooks_dir()
    found = [p for p in directory.glob("[0-9][0-9]_*.ipynb")]
    return sorted(found, key=lambda p: p.name)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _marker(cfg: RunConfig, nb: Path) -> Path:
    return cfg.paths.notebooks_dir / f".{nb.stem}.done.json"


def _record_timing(cfg: RunConfig, name: str, wall_s: float) -> None:
    path = cfg.paths.timings
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.is_file() else {}
    data[name] = {"wall_s": round(wall_s, 2), "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                  "device": _device_name()}
    path.write_text(json.dumps(data, indent=2))


def _device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
    except Exception:
        pass
    return f"cpu ({os.cpu_count()} cores)"


def notebook_parameters(cfg: RunConfig, overrides: dict[str, Any]) -> dict[str, Any]:
    """papermill parameters: profile, run and each override under its bare (identifier) name."""
    params: dict[str, Any] = {"profile": cfg.profile, "run": cfg.run_name}
    for key, value in overrides.items():
        path = resolve_key(key)
        if path[-1] in ("profile", "run"):
            continue
        params[path[-1]] = value
    return params


def run_pipeline(profile: str | None = None, run: str | None = None, overrides: dict[str, Any] | None = None,
                 force: bool = False, only: list[str] | None = None, directory: Path | None = None,
                 log: Callable[[str], None] = print) -> PipelineResult:
    overrides = dict(overrides or {})
    if run:
        overrides["run"] = run
    cfg = load_config(profile, overrides=overrides)  # validates every parameter before anything runs
    paths = cfg.paths.ensure()
    cfg.save(paths.config_snapshot)
    notebooks = discover_notebooks(directory)
    if not notebooks:
        raise ConfigError(f"no numbered notebooks (NN_name.ipynb) in {directory or notebooks_dir()}")
    if only:
        unknown = [o for o in only if not any(nb.stem == o or nb.stem.startswith(o) for nb in notebooks)]
        if unknown:
            raise ConfigError(f"--only {', '.join(unknown)}: no such notebook; have "
                              f"{', '.join(nb.stem for nb in notebooks)}")
    params = notebook_parameters(cfg, overrides)
    result = PipelineResult(cfg)
    log(f"run {cfg.run_name!r} (profile {cfg.profile}) -> {paths.root}")
    upstream_finished = 0.0  # when the latest earlier notebook finished: later ones must be newer
    for i, nb in enumerate(notebooks, 1):
        selected = not only or any(nb.stem == o or nb.stem.startswith(o) for o in only)
        marker = _marker(cfg, nb)
        fingerprint = {"params": params, "notebook_sha": _sha(nb)}
        previous = json.loads(marker.read_text()) if marker.is_file() else {}
        done = ({k: previous.get(k) for k in fingerprint} == fingerprint
                and previous.get("finished_at", 0.0) >= upstream_finished)
        if not selected or (done and not force):
            why = "not selected" if not selected else "complete"
            log(f"[{i}/{len(notebooks)}] {nb.stem}: skipped ({why})")
            result.stages.append(StageResult(nb.stem, "skipped"))
            upstream_finished = max(upstream_finished, previous.get("finished_at", 0.0))
            continue
        log(f"[{i}/{len(notebooks)}] {nb.stem}: running")
        marker.unlink(missing_ok=True)
        t0 = time.time()
        executed = paths.notebooks_dir / nb.name
        _execute(nb, executed, params)
        wall = time.time() - t0
        upstream_finished = time.time()
        marker.write_text(json.dumps({**fingerprint, "wall_s": round(wall, 2), "finished_at": upstream_finished,
                                      "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=2))
        _record_timing(cfg, nb.stem, wall)
        log(f"[{i}/{len(notebooks)}] {nb.stem}: done in {wall:.1f}s")
        result.stages.append(StageResult(nb.stem, "ran", wall))
    return result


def _execute(nb: Path, executed: Path, params: dict[str, Any]) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    env_home = os.environ.get("TRITONRL_HOME")
    os.environ["TRITONRL_HOME"] = str(project_root())  # the kernel inherits it: finds params/
    try:
        papermill.execute_notebook(str(nb), str(executed), parameters=params, cwd=str(project_root()),
                                   progress_bar=sys.stderr.isatty(), log_output=False,
                                   kernel_name="python3",
                                   # the kernel's own start-up chatter (ipykernel 7 warns on every local
                                   # TCP start) would bury the runner's progress lines; errors still show
                                   extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except PapermillExecutionError as e:
        raise NotebookFailed(nb, executed, e.ename, e.evalue, "\n".join(e.traceback)) from None
    finally:
        if env_home is None:
            os.environ.pop("TRITONRL_HOME", None)
        else:
            os.environ["TRITONRL_HOME"] = env_home
