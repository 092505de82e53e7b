"""03_rl on the GPUs of one host, started from wherever RL is started (its notebook, `tritonrl run`,
papermill, JupyterLab, a script):

    result = run_rl(cfg, paths)   # gpus = 1: train_rl in this process, as always
                                  # gpus = N | all: N processes under `accelerate launch`; this one waits

Why a launcher in a subprocess: a notebook's kernel is one process, and data-parallel RL needs one
process per GPU, each told its rank, started together and stopped together when one of them dies.
That is what `accelerate launch` does (torch's elastic agent under it). So the kernel starts
`accelerate launch --config_file params/accelerate/ddp.yaml --num_processes N -m
tritonrl_lib.train.rl.entry --params <this run's settings>` and waits, relaying what the ranks
print (rank 0 speaks for the run; its progress bars on stderr), and then returns the result the
ranks left on disk (rank 0 writes how the run ended, trained / resumed / time_budget / already_done, to a status
file the launcher names: `--status-file`). The notebook stays the pipeline's step: papermill runs it, `tritonrl run` shows
its lines and records its step, a Ctrl-C (or the kernel's death) stops the launcher and with it
every rank (a second Ctrl-C cuts the launcher's grace short, never the kill that follows). A failed launch is an `RLLaunchError` with the ranks' last lines; the same call again
resumes from what they saved.

With no GPU, `gpus: N` starts N CPU processes (gloo): how the tests run the plumbing on a CPU.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import psutil
import yaml

from ...core.config import ConfigError, RunConfig, gpu_available
from ...core.jsonio import read_json
from ...core.paths import RunPaths, project_root
from ...core.processes import signals_held, stop_tree
from ...model import load as models
from .best import read_best
from .distributed import check_grpo_split
from .entry import load_hook, train_rl
from .log import read_rl_log
from .run_frame import RLResult

ACCELERATE_CONFIG = Path("params") / "accelerate" / "ddp.yaml"  # under the project root
STOP_WAIT_S = 60.0  # a stopped launcher's grace (its agent stops the ranks) before everything is killed


class RLLaunchError(RuntimeError):
    """The launched RL processes failed; the message holds their last lines and how to resume."""


def processes_for(cfg: RunConfig) -> tuple[int, str]:
    """(processes, device) that `cfg.gpus` asks for on this host: `all` is one per visible GPU; a
    number is that many; with no GPU visible (or device=cpu) they are CPU processes (gloo)."""
    want = cfg.gpus.strip().lower()
    on_gpu = cfg.device != "cpu" and gpu_available()
    visible = _visible_gpu_count() if on_gpu else 0
    if want == "all":
        return (max(1, visible), "cuda" if on_gpu else "cpu")
    n = int(want)
    if on_gpu and n > visible:
        raise ConfigError(f"gpus={n}, and this host shows {visible} GPU{'s' if visible != 1 else ''} "
                          "(CUDA_VISIBLE_DEVICES counts): set gpus to at most that, or all")
    return n, ("cuda" if on_gpu else "cpu")


def _visible_gpu_count() -> int:
    import torch  # NVML-based (gpu_available set it up): counts without initialising CUDA here

    return int(torch.cuda.device_count())


def run_rl(cfg: RunConfig, paths: RunPaths | None = None, *, extra_candidates: str | Callable | None = None,
           echo: Callable[[str], None] | None = None, **kwargs: Any) -> RLResult:
    """RL as `cfg.gpus` asks: in this process (1), or on N processes under `accelerate launch`.

    `extra_candidates`: a hook (entry.load_hook's `module:function`, or, in this process only, a
    callable). Other keyword arguments go to `train_rl` in this process (`pool`, `tasks`, `engine`,
    `force`, `score_final`); launched, only `force`, `score_final` and `engine` travel."""
    n, device = processes_for(cfg)
    if n == 1:
        hook = load_hook(extra_candidates) if isinstance(extra_candidates, str) else extra_candidates
        return train_rl(cfg, paths, extra_candidates=hook, echo=echo, **kwargs)
    if paths is not None and paths.root.resolve() != cfg.paths.root.resolve():
        raise ValueError(f"run_rl on {n} processes writes into the run its settings name ({cfg.paths.root}), "
                         f"not {paths.root}")
    if callable(extra_candidates):
        raise ValueError("run_rl on several processes takes extra_candidates as 'module:function' (a callable "
                         "cannot travel to the launched processes)")
    unknown = set(kwargs) - {"force", "score_final", "engine"}
    if unknown:
        raise ValueError(f"run_rl on {n} processes cannot pass {sorted(unknown)} to them")
    check_grpo_split(cfg, n)
    return launch_rl(cfg, n, device, extra_candidates=extra_candidates, echo=echo, **kwargs)


def launch_command(settings_file: Path, n: int, *, port: int | None = None, extra_candidates: str | None = None,
                   force: bool = False, score_final: bool = False, engine: str = "auto",
                   status_file: Path | None = None) -> list[str]:
    """The command that runs RL on `n` processes of this host with the settings in `settings_file`;
    rank 0 writes the run's status to `status_file`."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch",
           "--config_file", str(project_root() / ACCELERATE_CONFIG), "--num_processes", str(n),
           "--num_machines", "1", "--main_process_port", str(port or free_port()),
           "-m", "tritonrl_lib.train.rl.entry", "--params", str(settings_file), "--engine", engine]
    if status_file is not None:
        cmd += ["--status-file", str(status_file)]
    if extra_candidates:
        cmd += ["--extra-candidates", extra_candidates]
    if force:
        cmd.append("--force")
    if score_final:
        cmd.append("--score-final")
    return cmd


def settings_file(cfg: RunConfig, folder: Path) -> Path:
    """The run's settings as a profile file the launched processes load (`--params FILE`), with the
    outputs folder made absolute (the processes may start elsewhere)."""
    data = cfg.to_dict()
    data["outputs_dir"] = str(cfg.paths.root.parent.resolve())
    data["run"] = cfg.run_name
    path = folder / f"rl_{cfg.run_name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def free_port() -> int:
    """A TCP port free now on this host, for the ranks' rendezvous (the default 29500 would collide
    with another launch on the same host)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch_rl(cfg: RunConfig, n: int, device: str, *, extra_candidates: str | None = None,
              echo: Callable[[str], None] | None = None, force: bool = False, score_final: bool = False,
              engine: str = "auto") -> RLResult:
    """Start `accelerate launch` for `n` processes, relay their output, wait; -> the result on disk."""
    say = echo or (lambda s: print(s, flush=True))
    paths = cfg.paths.ensure()
    t0 = time.perf_counter()
    say(f"RL on {n} {'GPUs' if device == 'cuda' else 'CPU processes (gloo; no GPU visible)'} of this host: "
        f"accelerate launch with {ACCELERATE_CONFIG} (docs/MULTI_GPU.md)")
    with tempfile.TemporaryDirectory(prefix="tritonrl-rl-launch-") as tmp:
        status_file = Path(tmp) / "status.json"
        cmd = launch_command(settings_file(cfg, Path(tmp)), n, extra_candidates=extra_candidates, force=force,
                             score_final=score_final, engine=engine, status_file=status_file)
        code, lines = _run_relayed(cmd, say, launch_env(n))
        status = (read_json(status_file, None) or {}).get("status") if code == 0 else None
    tail = "\n".join(lines)
    if code != 0:
        raise RLLaunchError(f"RL on {n} processes stopped (exit code {code}). Their last lines:\n{tail}\n"
                            "What they saved stays: the same call (or `tritonrl run`) resumes from it.")
    if not status:
        raise RLLaunchError(f"RL on {n} processes ended (exit code 0) without rank 0 writing how the run ended "
                            f"(--status-file). Their last lines:\n{tail}")
    marker = read_json(paths.rl_checkpoint / models.MARKER, None) or {}
    done = int(marker.get("steps", 0)) if cfg.rl.method == "grpo" else int(marker.get("round", -1)) + 1
    return RLResult(cfg.rl.method, paths.rl_checkpoint, status, rounds_done=done, best=read_best(paths),
                    log=paths.rl_log, curriculum_log=paths.curriculum_log, wall_s=time.perf_counter() - t0,
                    history=read_rl_log(paths))


def launch_env(n: int) -> dict[str, str]:
    """The launched processes' environment: this one's, unbuffered output, the checkout they run from,
    and (unless set) each process's share of the host's cores as its thread count (torchrun would
    give each one thread, and say so in a warning)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRITONRL_HOME": str(project_root())}
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // n)))
    return env


def _run_relayed(cmd: list[str], say: Callable[[str], None], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run `cmd`, its stdout line by line to `say`, its stderr (progress bars, warnings) as it comes to
    this process's stderr; -> (exit code, the last lines of both, as a terminal would show them).
    Interrupted (Ctrl-C, the kernel stopped), the launcher and everything it started is stopped (`_stop`)."""
    proc = subprocess.Popen([sys.executable, "-c", _DIE_WITH_PARENT, *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=str(project_root()))
    tail: collections.deque[str] = collections.deque(maxlen=40)

    def out() -> None:
        with proc.stdout:
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                tail.append(line)
                say(line)

    def err() -> None:
        partial = b""
        with proc.stderr:
            while chunk := os.read(proc.stderr.fileno(), 65536):
                sys.stderr.write(chunk.decode(errors="replace"))
                sys.stderr.flush()
                partial = (partial + chunk)[-8192:]
                *done, partial = partial.split(b"\n")
                # a progress bar redraws its line after each \r: keep what was left showing
                tail.extend(d.rsplit(b"\r", 1)[-1].decode(errors="replace") for d in done
                            if d.rsplit(b"\r", 1)[-1].strip())

    readers = [(threading.Thread(target=f, daemon=True), pipe) for f, pipe in ((out, proc.stdout), (err, proc.stderr))]
    try:
        for t, _ in readers:
            t.start()
        while proc.poll() is None:
            time.sleep(0.2)
    except BaseException:
        _stop(proc)
        raise
    finally:
        for t, pipe in readers:  # each reader closes its pipe at its end; these close the rest
            if t.ident is not None:
                t.join(timeout=5)
            if not t.is_alive():  # (one still reading a pipe an escaped process holds open closes it
                pipe.close()      # itself: closed under it, its read would block this, or lose its fd)
    return proc.returncode, list(tail)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the launcher (its agent stops the ranks), up to STOP_WAIT_S for it to end, then
    every process it started, before the SIGTERM or since (one orphaned when its parent exited
    included), frozen and killed. A second Ctrl-C or SIGTERM cuts the wait short and goes straight to
    the kill, during which further ones wait (`signals_held`)."""
    family: dict[int, psutil.Process] = {}

    def gather() -> None:
        if proc.returncode is not None:
            return  # exited and reaped, its pid free for another process: what it left is in `family`
        try:
            launcher = psutil.Process(proc.pid)
            family.update({p.pid: p for p in [launcher, *launcher.children(recursive=True)]})
        except psutil.Error:
            pass

    with signals_held() as held:  # a second interrupt ends the grace, and arrives once all is killed
        gather()
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_WAIT_S
        while proc.poll() is None and time.monotonic() < deadline and not held.arrived:
            gather()
            time.sleep(0.2)
        gather()
        stop_tree(family.values())
        try:
            proc.wait(timeout=5)  # reaped: no zombie left behind
        except subprocess.TimeoutExpired:
            pass


# The launcher's first moments: SIGTERM to it when the process that started it dies (a killed kernel:
# no launch outlives the notebook that waited for it; Linux's PR_SET_PDEATHSIG, kept across exec),
# then the launcher itself. A bootstrap rather than Popen's preexec_fn, which is unsafe in a process
# with threads (a Jupyter kernel has several).
_DIE_WITH_PARENT = ("import ctypes, os, signal, sys\n"
                    "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"
                    "except (OSError, AttributeError):\n    pass\n"
                    "os.execv(sys.argv[1], sys.argv[1:])")
