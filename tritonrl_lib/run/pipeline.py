"""Run the numbered notebooks in order with papermill, resumably.

Each notebook (a pipeline *step*) runs into `outputs/<run>/notebooks/`. When it finishes, the runner
records what its work depended on (`run_state`: its settings, the notebook's content, fingerprints
of the artefacts it read and wrote). A later run skips a step only while all of that still holds,
however the artefacts were produced in between (`tritonrl run`, papermill, JupyterLab); otherwise it
says why and runs the step again, and every step after it, which read what it wrote. A failing
notebook stops the run; its executed copy is kept and its own error is shown.

While a step runs, its printed lines and the state of its progress bars appear in the terminal
(`run_progress.StepMonitor`). The run starts by saying how long the profile is expected to take
(its measured `expected_minutes`).

A notebook runs in a thread of its own while the main thread waits, so Ctrl-C (or SIGTERM) reaches
the runner and not papermill: the runner stops the step's kernel (and what it started), records
that the step was interrupted, and raises `Interrupted`, which the command line says in one line
with how to resume. A kernel that dies under a step (killed, out of memory) is `Interrupted` too.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import psutil

from . import state as run_state
from ..core.config import ConfigError, RunConfig, gpu_available, load_config
from ..core.jsonio import read_json, write_json
from ..core.paths import project_root
from ..core.processes import signals_held, stop_tree
from ..core.textfmt import duration
from .notebook import papermill_parameters
from .progress import StepMonitor


class NotebookFailed(RuntimeError):
    def __init__(self, notebook: Path, executed: Path, ename: str, evalue: str, traceback: str):
        self.notebook, self.executed = notebook, executed
        self.ename, self.evalue, self.traceback = ename, evalue, traceback
        super().__init__(f"{notebook.name} failed: {ename}: {evalue}\n"
                         f"executed copy kept at {executed}")


class Interrupted(Exception):
    """The run stopped while `step` ran (`step` is "" between steps): `how` says why ("Ctrl-C",
    "SIGTERM", "its kernel died: ..."); `exit_code` is the command's (130, 143, 1)."""

    def __init__(self, step: str, how: str, wall_s: float, exit_code: int):
        self.step, self.how, self.wall_s, self.exit_code = step, how, wall_s, exit_code
        super().__init__(f"interrupted ({how})" + (f" during {step}" if step else ""))


class _Signalled(BaseException):
    """SIGTERM arrived (raised by the runner's handler, like KeyboardInterrupt for SIGINT)."""


class _KernelDied(Exception):
    """The kernel running a step went away without being asked (killed, out of memory)."""


class _Interruptions:
    """For the duration of a run: SIGTERM raises in the main thread as SIGINT does (outside the main
    thread, where Python allows no handler, it keeps its default); Ctrl-C, SIGTERM and a dead kernel
    end the run as `Interrupted`, recorded against the step that was running (`running`)."""

    def __init__(self, paths):
        self.paths, self.step, self.since = paths, "", time.time()
        self.device: tuple[str, int] = ("", 0)
        self._old = None

    def running(self, step: str, device: tuple[str, int]) -> None:
        self.step, self.since, self.device = step, time.time(), device

    def finished(self) -> None:
        self.step = ""

    def __enter__(self) -> "_Interruptions":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._raise)
        return self

    @staticmethod
    def _raise(signum, frame) -> None:
        raise _Signalled()

    def __exit__(self, kind, error, tb) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
        if not isinstance(error, (KeyboardInterrupt, _Signalled, _KernelDied)):
            return
        how, code = (("Ctrl-C", 130) if isinstance(error, KeyboardInterrupt) else ("SIGTERM", 143)
                     if isinstance(error, _Signalled) else (f"its kernel died: {error}", 1))
        wall = time.time() - self.since if self.step else 0.0
        if self.step:
            run_state.write_interrupted(self.paths, self.step, how.split(":")[0], wall, self.device)
        raise Interrupted(self.step, how, wall, code) from None


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


def _record_timing(cfg: RunConfig, name: str, wall_s: float, device: tuple[str, int]) -> None:
    path = cfg.paths.timings
    data = read_json(path, {}) or {}
    data[name] = {"wall_s": round(wall_s, 2), "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
                  "device": device[0], "gpus": device[1]}
    write_json(path, data)


def step_device(cfg: RunConfig, step: str) -> tuple[str, int]:
    """(device, GPUs) that step `step` occupies, as the cost table bills it: ("2x NVIDIA H100 ...", 2),
    or ("cpu (16 cores)", 0). Not the host's count for every step: each step's own, as its code
    places its work on this host's visible GPUs (CUDA_VISIBLE_DEVICES counts):
    - 01_data: its verifier pool, on every visible GPU when data_verify_device=auto, else the CPU;
    - 02_sft: one process, whose Trainer spreads the batch over every visible GPU (DataParallel),
      except a quantised model (one GPU: DataParallel refuses it);
    - 03_rl: gpus=N > 1 launches N ranks, one GPU each (each rank's verifier pool on its GPU);
      one process puts its verifier pool on every visible GPU;
    - 04_eval: its verifier pool, on every visible GPU;
    - 05_report: no GPU; a notebook not known here: every visible GPU."""
    visible, name = _visible_gpus() if cfg.device != "cpu" else (0, "")
    if step == "05_report":
        visible = 0
    elif step == "01_data" and cfg.data.data_verify_device == "cpu":
        visible = 0
    elif step == "02_sft" and (cfg.model.load_in_8bit or cfg.model.load_in_4bit):
        visible = min(visible, 1)
    elif step == "03_rl" and cfg.gpus.strip().lower() != "all" and int(cfg.gpus) > 1:
        visible = min(visible, int(cfg.gpus))  # launch.processes_for refuses more ranks than GPUs
    if visible:
        return f"{visible}x {name}", visible
    return f"cpu ({os.cpu_count()} cores)", 0


def _visible_gpus() -> tuple[int, str]:
    """(visible GPUs, the first one's name); (0, "") without a GPU."""
    if not gpu_available():
        return 0, ""
    try:
        import torch

        n = torch.cuda.device_count()
        return (n, torch.cuda.get_device_name(0)) if n else (0, "")
    except Exception:
        return 0, ""


def _minutes(minutes: float) -> str:
    if minutes >= 90:
        return f"{minutes / 60:.1f} hours"
    return f"{minutes:.0f} minute{'s' if round(minutes) != 1 else ''}" if minutes >= 1 else "under a minute"


def expected_duration(cfg: RunConfig, overrides: dict[str, Any]) -> str:
    """What the run is expected to take, in words: the profile's measured figure (`expected_minutes`),
    and what may make this run differ from it."""
    source = f"params/{cfg.profile}.yaml" if (project_root() / "params" / f"{cfg.profile}.yaml").is_file() \
        else f"the {cfg.profile} profile"
    if not cfg.expected_minutes:
        return (f"expected duration: not measured for the {cfg.profile} profile (no expected_minutes in {source})")
    text = (f"expected duration: about {_minutes(cfg.expected_minutes)} for 01 -> 05 (the {cfg.profile} profile, "
            f"measured; {source} says on what machine)")
    changed = sorted(k for k in overrides if k not in ("run", "outputs_dir", "profile"))
    notes = []
    if changed:
        notes.append(f"your settings ({', '.join(changed)}) change it")
    if cfg.device == "cpu":  # on a GPU profile the CPU's load matters less
        cores = os.cpu_count() or 1
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = 0.0
        if load >= 0.5 * cores:
            notes.append(f"other work keeps this machine's {cores} cores busy (load average {load:.1f}): expect "
                         "several times longer")
    return text + ("; " + "; ".join(notes) if notes else "")


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
    log(expected_duration(cfg, overrides))
    upstream_finished = 0.0  # when the latest earlier step finished: later ones must be newer
    upstream_ran = ""  # an earlier step that ran in this command: everything after it runs too
    with _Interruptions(paths) as interruptions:  # Ctrl-C, SIGTERM, a dead kernel: `Interrupted`
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
            device = step_device(cfg, nb.stem)
            run_state.write_started(paths, nb.stem, device)  # an interrupted run is billed by it too
            interruptions.running(nb.stem, device)
            t0 = time.time()
            watch = [(name, getattr(paths, name)) for name in step.watch]
            try:
                with StepMonitor(log, live=live, watch=watch) as monitor:
                    _execute(nb, paths.executed_notebook(nb.stem), params, monitor)
            except NotebookFailed as e:
                run_state.write_failed(paths, nb.stem, e.ename, time.time() - t0, device)
                raise
            wall = time.time() - t0
            record = run_state.write_record(cfg, paths, nb.stem, _sha(nb), inputs, wall)
            interruptions.finished()
            run_state.forget_alone_run(paths, nb.stem)
            upstream_finished, upstream_ran = record["finished_at"], nb.stem
            _record_timing(cfg, nb.stem, wall, device)
            log(f"{head}: done in {duration(wall)}")
            result.steps.append(StepResult(nb.stem, "ran", wall, why))
    return result


def _execute(nb: Path, executed: Path, params: dict[str, Any], monitor: StepMonitor) -> None:
    """Run one notebook with papermill, in a thread: the main thread waits, so Ctrl-C and SIGTERM
    reach it (papermill's own handlers would turn them into a shut-down kernel and a traceback);
    then the kernel this step started, and everything it started, is stopped."""
    import papermill
    from nbclient.exceptions import DeadKernelError
    from papermill.exceptions import PapermillExecutionError

    # the kernel inherits these: TRITONRL_HOME finds params/; RUNNER_STEP tells the notebook that
    # `tritonrl run` runs it (not a run on its own, which would warn)
    env = {"TRITONRL_HOME": str(project_root()), run_state.RUNNER_STEP: nb.stem}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    # papermill warns about every parameter the parameters cell does not declare; `start()` checks
    # each against the settings instead (a mistyped one is an error there), so the warning is noise
    pm_log = logging.getLogger("papermill")
    pm_level = pm_log.level
    pm_log.setLevel(logging.ERROR)
    pm_log.addFilter(_no_kernel_died)  # the run says that in its own line (Interrupted)
    me = psutil.Process()
    before = {c.pid for c in me.children()}
    outcome: dict[str, BaseException] = {}

    def work() -> None:
        try:
            papermill.execute_notebook(str(nb), str(executed), parameters=params, cwd=str(project_root()),
                                       progress_bar=False, log_output=False, kernel_name="python3",
                                       stdout_file=monitor.stdout, stderr_file=monitor.stderr,
                                       # the kernel's own start-up chatter (ipykernel 7 warns on every local
                                       # TCP start) would bury the runner's progress lines; errors still show
                                       extra_arguments=["--IPKernelApp.log_level=ERROR"])
        except BaseException as e:  # handed to the main thread
            outcome["error"] = e

    thread = threading.Thread(target=work, name=f"papermill {nb.stem}", daemon=True)
    try:
        thread.start()
        while thread.is_alive():
            thread.join(0.25)
    except BaseException:  # Ctrl-C, SIGTERM: stop the kernel and all it started (a second Ctrl-C waits)
        with signals_held():
            stop_tree([c for c in me.children() if c.pid not in before])
        thread.join(timeout=10)  # papermill sees its kernel gone
        raise
    finally:
        pm_log.setLevel(pm_level)
        pm_log.removeFilter(_no_kernel_died)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    error = outcome.get("error")
    if error is None:
        return
    if isinstance(error, PapermillExecutionError):
        raise NotebookFailed(nb, executed, error.ename, error.evalue, "\n".join(error.traceback)) from None
    if isinstance(error, DeadKernelError):
        raise _KernelDied("killed, or out of memory?") from None
    raise error


def _no_kernel_died(record: logging.LogRecord) -> bool:
    """nbclient's "Kernel died while waiting for execute reply." (logged through papermill's logger)."""
    return not str(record.msg).startswith("Kernel died")
