"""Run the numbered notebooks in order with papermill, resumably.

Each notebook (a pipeline *step*) runs into `outputs/<run>/notebooks/`. When it finishes, the runner
records what its work depended on (`run_state`: its settings, the notebook's content, fingerprints
of the artefacts it read and wrote). A later run skips a step only while all of that still holds,
however the artefacts were produced in between (`tritonrl run`, papermill, JupyterLab); otherwise it
says why and runs the step again, and every step after it, which read what it wrote. A failing
notebook stops the run; its executed copy is kept and its own error is shown.

While a step runs, its printed lines and the state of its progress bars appear in the terminal
(`run_progress.StepMonitor`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import state as run_state
from ..core.config import ConfigError, RunConfig, load_config
from ..core.jsonio import read_json, write_json
from ..core.paths import project_root
from .notebook import papermill_parameters
from .progress import StepMonitor


class NotebookFailed(RuntimeError):
    def __init__(self, notebook: Path, executed: Path, ename: str, evalue: str, traceback: str):
        self.notebook, self.executed = notebook, executed
        self.ename, self.evalue, self.traceback = ename, evalue, traceback
        super().__init__(f"{notebook.name} failed: {ename}: {evalue}\n"
                         f"executed copy kept at {executed}")


@dataclass
class StepResult:
    notebook: str
    status: str  # ran | skipped | failed
    wall_s: float = 0.0
    why: str = ""  # why it ran, or why a skipped step is stale ("" when it is current)


@dataclass
class PipelineResult:
    config: RunConfig
    steps: list[StepResult] = field(default_factory=list)

    @property
    def stale(self) -> list[StepResult]:
        """Steps left out (--only) whose work no longer matches their inputs."""
        return [s for s in self.steps if s.status == "skipped" and s.why]


def notebooks_dir() -> Path:
    return project_root() / "notebooks"


def discover_notebooks(directory: Path | None = None) -> list[Path]:
    """`NN_name.ipynb` files, in numeric order."""
    directory = directory or notebooks_dir()
    found = [p for p in directory.glob("[0-9][0-9]_*.ipynb")]
    return sorted(found, key=lambda p: p.name)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record_timing(cfg: RunConfig, name: str, wall_s: float) -> None:
    path = cfg.paths.timings
    data = read_json(path, {}) or {}
    data[name] = {"wall_s": round(wall_s, 2), "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                  "device": _device_name()}
    write_json(path, data)


def _device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
    except Exception:
        pass
    return f"cpu ({os.cpu_count()} cores)"


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m {s:02d}s" if m else f"{seconds:.1f}s"


def run_pipeline(profile: str | None = None, run: str | None = None, overrides: dict[str, Any] | None = None,
                 force: bool = False, only: list[str] | None = None, directory: Path | None = None,
                 log: Callable[[str], None] = print, live: bool | None = None) -> PipelineResult:
    """Run the notebooks of `directory` (default notebooks/) in order; see the module docstring.
    `live`: one progress line rewritten in place (default: when stderr is a terminal)."""
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
    params = papermill_parameters(cfg, overrides)
    live = sys.stderr.isatty() if live is None else live
    result = PipelineResult(cfg)
    log(f"run {cfg.run_name!r} (profile {cfg.profile}) -> {paths.root}")
    upstream_finished = 0.0  # when the latest earlier step finished: later ones must be newer
    upstream_ran = ""  # an earlier step that ran in this command: everything after it runs too
    for i, nb in enumerate(notebooks, 1):
        head = f"[{i}/{len(notebooks)}] {nb.stem}"
        selected = not only or any(nb.stem == o or nb.stem.startswith(o) for o in only)
        record = run_state.read_record(paths, nb.stem)
        why = run_state.why_stale(cfg, paths, nb.stem, _sha(nb), record)
        if why is None and record.get("finished_at", 0.0) < upstream_finished:
            why = "an earlier notebook ran after it"
        if why is None and upstream_ran:
            why = f"{upstream_ran} ran again"
        if force and why is None and selected:
            why = "--force"
        if not selected or why is None:
            if why is None:
                log(f"{head}: complete (finished {record.get('finished', '?')}; same settings and inputs)")
            elif record is None:
                log(f"{head}: not selected (not run yet)")
                why = ""
            else:
                log(f"{head}: not selected, and STALE: {why}; its results describe older inputs "
                    f"(run it: tritonrl run --only {nb.stem} ...)")
            result.steps.append(StepResult(nb.stem, "skipped", why=why or ""))
            upstream_finished = max(upstream_finished, (record or {}).get("finished_at", 0.0))
            continue
        log(f"{head}: running ({why})")
        step = run_state.step_of(nb.stem)
        inputs = run_state.artefacts(paths, step.reads, (record or {}).get("inputs"))
        paths.step_record(nb.stem).unlink(missing_ok=True)
        t0 = time.time()
        watch = [(name, getattr(paths, name)) for name in step.watch]
        with StepMonitor(log, live=live, watch=watch) as monitor:
            _execute(nb, paths.executed_notebook(nb.stem), params, monitor)
        wall = time.time() - t0
        record = run_state.write_record(cfg, paths, nb.stem, _sha(nb), inputs, wall)
        upstream_finished, upstream_ran = record["finished_at"], nb.stem
        _record_timing(cfg, nb.stem, wall)
        log(f"{head}: done in {_duration(wall)}")
        result.steps.append(StepResult(nb.stem, "ran", wall, why))
    return result


def _execute(nb: Path, executed: Path, params: dict[str, Any], monitor: StepMonitor) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    env_home = os.environ.get("TRITONRL_HOME")
    os.environ["TRITONRL_HOME"] = str(project_root())  # the kernel inherits it: finds params/
    # papermill warns about every parameter the parameters cell does not declare; `start()` checks
    # each against the settings instead (a mistyped one is an error there), so the warning is noise
    pm_log = logging.getLogger("papermill")
    pm_level = pm_log.level
    pm_log.setLevel(logging.ERROR)
    try:
        papermill.execute_notebook(str(nb), str(executed), parameters=params, cwd=str(project_root()),
                                   progress_bar=False, log_output=False, kernel_name="python3",
                                   stdout_file=monitor.stdout, stderr_file=monitor.stderr,
                                   # the kernel's own start-up chatter (ipykernel 7 warns on every local
                                   # TCP start) would bury the runner's progress lines; errors still show
                                   extra_arguments=["--IPKernelApp.log_level=ERROR"])
    except PapermillExecutionError as e:
        raise NotebookFailed(nb, executed, e.ename, e.evalue, "\n".join(e.traceback)) from None
    finally:
        pm_log.setLevel(pm_level)
        if env_home is None:
            os.environ.pop("TRITONRL_HOME", None)
        else:
            os.environ["TRITONRL_HOME"] = env_home
