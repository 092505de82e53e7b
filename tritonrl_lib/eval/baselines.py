"""Reference times of tasks on this machine, in eager PyTorch and under `torch.compile`: measured, stored, looked up.

    store = measure_baselines(tasks, device="cuda", out_dir=default_dir(cfg.outputs_dir))
    store.ms(task, "compile")                    # None when not measured (or it failed)
    store, note = baselines_for_eval(cfg.eval.baselines, cfg.outputs_dir, "cuda")
    attach_to_record(record, tasks, store, note) # rows get speedups vs both; metrics vs_eager_baseline, vs_compile

Times depend on the machine, so a file holds one machine's (`<out_dir>/<machine slug>.json`, the
GPU's name and the torch and Triton versions in its name and in the file), and the evaluation uses
only the file of the machine it runs on. Entries are keyed by task id and a hash of the task's
source: a changed task is measured again, its old entry left alone. The file is written after every
task (atomically), so a killed run loses at most the task it was on and a rerun measures only what
is missing.

Each task is measured in its own process (baseline_measure.py) with a time limit, so a compile that
hangs, a CUDA out-of-memory or a crash costs that task only: what failed is recorded with its error
and the run moves on. A recorded failure is not retried (`force` measures everything again) except a
timeout, when the new limit is longer, and a compile skipped for want of a C++ compiler.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from . import metrics as M
from ..core.config import ConfigError
from ..core.jsonio import DamagedFile, read_json, write_json
from ..core.paths import project_root
from ..tasks.task import Task

BASELINE_FORMAT = 1
MODES = ("eager", "compile")
# where a row of an eval record keeps each baseline and its speedup (metrics.BASELINE_MS / BASELINE_BLOCKS)
ROW_MS = {"eager": "baseline_eager_ms", "compile": "baseline_compile_ms"}
ROW_SPEEDUP = {"eager": "speedup_vs_eager_baseline", "compile": "speedup_vs_compile"}
NOTE_PREFIX = "baselines: "
DEFAULT_TIMEOUT_S = 600.0
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class BaselineError(RuntimeError):
    """Baselines that cannot be measured or read as asked; the message says what to do."""


# --------------------------------------------------------------------------- the machine


def _triton_version() -> str | None:
    try:
        import triton

        return str(triton.__version__)
    except Exception:
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def machine_identity(device: str) -> dict[str, Any]:
    """What the times depend on: the device (its model name) and the torch and Triton versions."""
    import torch

    ident: dict[str, Any] = {"device": device}
    if device == "cuda":
        ident["name"] = torch.cuda.get_device_name(0)
        ident["cuda"] = torch.version.cuda
    else:
        ident["name"] = _cpu_name()
    ident["torch"] = torch.__version__
    ident["triton"] = _triton_version()
    return ident


def same_machine(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in ("device", "name", "torch", "triton"))


def describe_machine(ident: Mapping[str, Any]) -> str:
    return f"{ident.get('name')} ({ident.get('device')}), torch {ident.get('torch')}, triton {ident.get('triton')}"


def file_name(ident: Mapping[str, Any]) -> str:
    """`cuda_NVIDIA_H100_80GB_HBM3_torch2.9.0_cu128_triton3.5.0.json`, `cpu_..._torch2.13.0_cpu_triton3.9.0.json`."""
    raw = f"{ident['device']}_{ident['name']}_torch{ident['torch']}_triton{ident['triton']}"
    return re.sub(r"[^A-Za-z0-9.-]+", "_", raw).strip("_") + ".json"


def default_dir(outputs_dir: str | Path) -> Path:
    """Where `tritonrl baselines` writes and the evaluation looks: `<outputs_dir>/baselines/`
    (a relative outputs_dir is under the checkout, as run folders are)."""
    root = Path(outputs_dir).expanduser()
    if not root.is_absolute():
        root = project_root() / root
    return root / "baselines"


def source_hash(task: Task) -> str:
    return hashlib.sha256(task.source.encode()).hexdigest()[:16]


def compiler_for_cpu_compile() -> str | None:
    """The C++ compiler inductor would use on the CPU ($CXX, else g++), or None when there is none."""
    return shutil.which(os.environ.get("CXX") or "g++")


# --------------------------------------------------------------------------- the file


@dataclass
class BaselineFile:
    path: Path
    machine: dict[str, Any]
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @staticmethod
    def key(task: Task) -> str:
        return f"{task.id}#{source_hash(task)}"

    @classmethod
    def load(cls, path: Path) -> "BaselineFile":
        try:
            data = read_json(path)
        except (OSError, DamagedFile) as e:
            raise BaselineError(f"cannot read the baselines file {path}: {e}; delete it to measure again") from None
        if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT or "machine" not in data:
            raise BaselineError(f"{path} is not a baselines file of format {BASELINE_FORMAT}; delete it to "
                                "measure again")
        return cls(Path(path), dict(data["machine"]), dict(data.get("entries") or {}))

    @classmethod
    def open(cls, path: Path, machine: dict[str, Any]) -> "BaselineFile":
        """The file at `path` (its machine must be `machine`), or a new empty one."""
        if not path.is_file():
            return cls(path, dict(machine))
        store = cls.load(path)
        if not same_machine(store.machine, machine):
            raise BaselineError(f"{path} holds times of {describe_machine(store.machine)}, not of this machine "
                                f"({describe_machine(machine)}); give another --out folder")
        return store

    def save(self) -> Path:
        """Written whole (atomically), with the entries another process saved there since this one read the
        file kept beside its own (two evaluations of one machine measuring at once lose nothing)."""
        try:
            on_disk = read_json(self.path, None) if self.path.is_file() else None
        except (OSError, DamagedFile):
            on_disk = None
        if isinstance(on_disk, dict) and same_machine(on_disk.get("machine") or {}, self.machine):
            self.entries = {**(on_disk.get("entries") or {}), **self.entries}
        return write_json(self.path, {"format": BASELINE_FORMAT, "machine": self.machine, "entries": self.entries},
                          indent=1)

    def entry(self, task: Task) -> dict[str, Any] | None:
        return self.entries.get(self.key(task))

    def ms(self, task: Task, mode: str) -> float | None:
        result = (self.entry(task) or {}).get(mode) or {}
        ms = result.get("ms")
        return float(ms) if isinstance(ms, (int, float)) and ms > 0 else None

    def pending(self, task: Task, modes: Sequence[str], timeout_s: float) -> list[str]:
        """The modes of `task` still to measure: never measured, skipped, or timed out under a shorter limit."""
        entry = self.entry(task) or {}
        out = []
        for mode in modes:
            result = entry.get(mode)
            if (result is None or result.get("reason") == "skipped"
                    or (result.get("reason") == "timeout" and float(result.get("timeout_s", 0)) < timeout_s)):
                out.append(mode)
        return out

    def record(self, task: Task, results: Mapping[str, dict[str, Any]], timing: Mapping[str, Any],
               wall_s: float) -> None:
        entry = self.entries.setdefault(self.key(task), {"id": task.id, "name": task.name, "level": task.level,
                                                         "source_hash": source_hash(task)})
        entry.update(results)
        entry["timing"] = dict(timing)
        entry["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        entry["wall_s"] = round(wall_s, 2)


# --------------------------------------------------------------------------- measuring


def run_task(task: Task, modes: Sequence[str], device: str, timing: Mapping[str, Any],
             timeout_s: float) -> dict[str, dict[str, Any]]:
    """Measure one task in its own process (baseline_measure.py): mode -> result, every asked mode
    present (a time or an error with its reason)."""
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="tritonrl-baseline-") as tmp:
        job, out, err = Path(tmp, "job.json"), Path(tmp, "results.jsonl"), Path(tmp, "stderr.txt")
        job.write_text(json.dumps({"task_id": task.id, "source": task.source, "modes": list(modes), "device": device,
                                   "parent_pid": os.getpid(), **timing}))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT),
                                                                          os.environ.get("PYTHONPATH")]))}
        timed_out = False
        with err.open("wb") as err_file:
            proc = subprocess.Popen([sys.executable, "-m", "tritonrl_lib.eval.baseline_measure", str(job), str(out)],
                                    cwd=tmp, env=env, stdin=subprocess.DEVNULL, stdout=err_file, stderr=err_file,
                                    start_new_session=True)  # its own group: compile workers go with it
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                if proc.poll() is None:  # timed out, or this process was interrupted
                    os.killpg(proc.pid, signal.SIGKILL)  # its group: the compile workers it started too
                    proc.wait()
        compiling = False
        for line in out.read_text().splitlines() if out.is_file() else []:
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill
            if row.get("event") == "compiling":
                compiling = True
            elif row.get("mode") in modes:
                results[row.pop("mode")] = row
        for mode in modes:
            if mode in results:
                continue
            if timed_out:
                doing = "compiling or timing the compiled model" if compiling else "loading or timing the reference"
                results[mode] = {"error": f"timed out after {timeout_s:g} s ({doing}); a longer --timeout-s "
                                          "measures it again", "reason": "timeout", "timeout_s": timeout_s}
            else:
                tail = err.read_text(errors="replace").strip()[-800:] if err.is_file() else ""
                results[mode] = {"error": f"the measuring process ended with exit code {proc.returncode} before a "
                                          f"result: {tail or '(no output)'}", "reason": "crashed"}
    return results


def check_device(device: str) -> None:
    if device not in ("cuda", "cpu"):
        raise BaselineError(f"device {device!r}: use cuda or cpu")
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BaselineError("no GPU is visible here (torch.cuda.is_available() is False): baselines are GPU "
                                "timings of the machine that evaluates; run this on that machine, or give "
                                "--device cpu to measure on this CPU (the file is labelled cpu)")


def measure_baselines(tasks: Sequence[Task], *, modes: Sequence[str] = MODES, device: str = "cuda",
                      out_dir: Path, timing: Mapping[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S,
                      force: bool = False, progress: bool = True,
                      log: Callable[[str], None] = print) -> tuple[BaselineFile, dict[str, int]]:
    """Measure what `out_dir`'s file for this machine lacks of `tasks` x `modes`; the file is saved
    after every task. `timing`: warmup, trials, trim (the verifier's settings). Returns the file and
    counts (measured, reused)."""
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise BaselineError(f"modes {','.join(modes)}: choose from {','.join(MODES)}")
    check_device(device)
    store = BaselineFile.open(Path(out_dir) / file_name(machine_identity(device)), machine_identity(device))
    no_compiler = device == "cpu" and "compile" in modes and compiler_for_cpu_compile() is None
    if no_compiler:
        log("torch.compile on the CPU needs a C++ compiler and none was found ($CXX or g++): compile is "
            "skipped and recorded so; install g++ and run again to measure it")
    todo = [(t, modes if force else store.pending(t, modes, timeout_s)) for t in tasks]
    todo = [(t, m) for t, m in todo if m]
    counts = {"measured": 0, "reused": len(tasks) - len(todo)}
    bar = _bar(len(todo), progress)
    try:
        for task, wanted in todo:
            if bar is not None:
                bar.set_postfix_str(task.name[:40])
            run = [m for m in wanted if not (m == "compile" and no_compiler)]
            t0 = time.perf_counter()
            results = run_task(task, run, device, timing, timeout_s) if run else {}
            if no_compiler and "compile" in wanted:
                results["compile"] = {"error": "torch.compile on the CPU needs a C++ compiler: none found ($CXX or "
                                               "g++)", "reason": "skipped"}
            store.record(task, results, timing, time.perf_counter() - t0)
            store.save()
            counts["measured"] += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return store, counts


def _bar(total: int, progress: bool):
    if not progress or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="baselines", unit="task")


def summary_rows(store: BaselineFile, tasks: Sequence[Task]) -> list[dict[str, Any]]:
    """One row per task: its eager and compile times, compile's speedup over eager, what failed."""
    rows = []
    for t in tasks:
        entry = store.entry(t) or {}
        eager, comp = store.ms(t, "eager"), store.ms(t, "compile")
        problems = [f"{m}: {entry[m].get('reason')}: {entry[m].get('error', '')}" for m in MODES
                    if isinstance(entry.get(m), dict) and entry[m].get("error")]
        rows.append({"task": t.id, "level": t.level, "eager_ms": eager, "compile_ms": comp,
                     "compile_speedup": round(eager / comp, 3) if eager and comp else None,
                     "compile_s": (entry.get("compile") or {}).get("compile_s"),
                     "problem": "; ".join(problems)[:160]})
    return rows


def timing_settings(verify_cfg: Any) -> dict[str, Any]:
    """The verifier's timing settings (warm-up, trials, trim), which baselines are timed with."""
    return {"warmup": verify_cfg.timing_warmup, "trials": verify_cfg.timing_trials, "trim": verify_cfg.timing_trim}


def solved_task_ids(records: Iterable[Mapping[str, Any]]) -> set[str]:
    """The tasks with a correct sample in any of these eval records: the only ones whose baseline changes a
    fast_p (a task never answered correctly has no fast sample whatever its times; metrics.baseline_rows)."""
    return {str(r["id"]) for rec in records for r in rec.get("detailed_results") or []
            if isinstance(r, Mapping) and r.get("correct") and r.get("id") is not None}


def measure_for_solved(records: Sequence[Mapping[str, Any]], tasks: Sequence[Task], *, setting: str,
                       outputs_dir: str | Path, device: str, timing: Mapping[str, Any], progress: bool = True,
                       log: Callable[[str], None] = print) -> BaselineFile | None:
    """eval.baselines_measure=solved: time the `tasks` that some record answered correctly into the folder
    eval.baselines (`setting`) names, as `tritonrl baselines --solved-in` would; the file, or None (said
    in `log`) where nothing is measured: baselines off or named as one file, nothing solved."""
    setting = (setting or "auto").strip()
    folder = default_dir(outputs_dir) if setting == "auto" else Path(setting).expanduser()
    if setting == "off" or folder.is_file():
        log(f"baselines: eval.baselines={setting} is {'off' if setting == 'off' else 'one file'}: nothing measured "
            "(give it a folder, or auto, to have the solved tasks timed into it)")
        return None
    solved = solved_task_ids(records)
    todo = [t for t in tasks if t.id in solved]
    if not todo:
        log("baselines: no task answered correctly: no eager or torch.compile time is needed")
        return None
    log(f"baselines: timing eager and torch.compile for the {len(todo)} task(s) answered correctly, into {folder}")
    store, counts = measure_baselines(todo, device=device, out_dir=folder, timing=timing, progress=progress, log=log)
    log(f"baselines: {counts['measured']} measured now, {counts['reused']} already in {store.path}")
    return store


# --------------------------------------------------------------------------- the evaluation's side


def baselines_for_eval(setting: str, outputs_dir: str | Path, device: str) -> tuple[BaselineFile | None, str | None]:
    """The baselines file an evaluation on this machine uses (eval.baselines: auto = the default folder,
    off, a folder, or a file), or None and a note saying why there is none."""
    setting = (setting or "auto").strip()
    if setting == "off":
        return None, (f"{NOTE_PREFIX}off (eval.baselines=off): no speedups against stored eager or "
                      "torch.compile times (vs_eager_baseline, vs_compile are null)")
    here = machine_identity(device)
    path = default_dir(outputs_dir) if setting == "auto" else Path(setting).expanduser()
    if setting != "auto" and not path.exists():
        raise ConfigError(f"eval.baselines={setting}: no such file or folder (give a baselines file or the folder "
                          "`tritonrl baselines --out` wrote, auto for the default folder, or off)")
    if path.is_dir() or setting == "auto":
        path = path / file_name(here)
    if not path.is_file():
        return None, (f"{NOTE_PREFIX}none for this machine ({describe_machine(here)}) at {path}, so vs_compile and "
                      "vs_eager_baseline are null; measure them with `tritonrl baselines --tasks <these tasks>`")
    store = BaselineFile.load(path)
    if not same_machine(store.machine, here):
        return None, (f"{NOTE_PREFIX}{path} holds times of {describe_machine(store.machine)}, not this machine "
                      f"({describe_machine(here)}): not used; vs_compile and vs_eager_baseline are null")
    return store, None


def attach_speedups(rows: list[dict[str, Any]], tasks: Sequence[Task], store: BaselineFile | None) -> dict[str, Any]:
    """Each row gets its task's baseline times (`baseline_eager_ms`, `baseline_compile_ms`) and, where
    the sample is correct and timed, its speedup over each (baseline ms / the sample's kernel_time_ms);
    without a store those fields are removed. Returns what was attached, per mode."""
    by_id = {t.id: t for t in tasks}
    covered: dict[str, set[str]] = {m: set() for m in MODES}
    for r in rows:
        task = by_id.get(r["id"])
        for mode in MODES:
            ms = store.ms(task, mode) if store is not None and task is not None else None
            if store is None:
                r.pop(ROW_MS[mode], None)
                r.pop(ROW_SPEEDUP[mode], None)
                continue
            kernel = r.get("kernel_time_ms")
            r[ROW_MS[mode]] = ms
            r[ROW_SPEEDUP[mode]] = (ms / kernel if ms is not None and r.get("correct") and kernel else None)
            if ms is not None:
                covered[mode].add(r["id"])
    ids = {r["id"] for r in rows}
    return {f"tasks_with_{m}": len(covered[m]) for m in MODES} | {
        "tasks_without_compile": sorted(ids - covered["compile"])[:20]}


def missing_note(rows: Sequence[Mapping[str, Any]], path: Path, missing: int, timed: int) -> str:
    """What the record's note says of the tasks without a torch.compile time in the file."""
    if not timed:
        return f"{path} holds no torch.compile time of these tasks: vs_compile is not measured"
    solved = len(M.unknown_speed(rows, "vs_compile"))
    return (f"{missing} task(s) have no torch.compile time in {path} (not measured, or it failed there): "
            + (f"vs_compile leaves out the {solved} of them with a correct sample, and counts" if solved else
               "none of them has a correct sample, so vs_compile counts")
            + " the samples of those never solved as not fast")


def attach_to_record(record: dict[str, Any], tasks: Sequence[Task], store: BaselineFile | None,
                     note: str | None, resamples: int = 0) -> bool:
    """Attach `store`'s speedups to an eval record's rows, recompute its metrics (with the
    vs_eager_baseline and vs_compile blocks) and say in `baselines` / `notes` which file and machine
    were used, or why none. Returns whether anything changed (the caller rewrites the file then)."""
    rows = record["detailed_results"]
    before = json.dumps([[r.get(f) for f in (*ROW_MS.values(), *ROW_SPEEDUP.values())] for r in rows])
    before += json.dumps(record.get("baselines"), sort_keys=True)
    info = attach_speedups(rows, tasks, store)
    if store is not None:
        record["baselines"] = {"file": str(store.path), "machine": store.machine, "tasks": len({r["id"] for r in rows}),
                               **info}
    else:
        record["baselines"] = {"file": None, "note": note}
    notes = [n for n in record.get("notes", []) if not n.startswith(NOTE_PREFIX)]
    if store is not None and info["tasks_with_compile"] < record["baselines"]["tasks"]:
        missing = record["baselines"]["tasks"] - info["tasks_with_compile"]
        notes.append(NOTE_PREFIX + missing_note(rows, store.path, missing, info["tasks_with_compile"]))
    elif store is None and note:
        notes.append(note)
    after = json.dumps([[r.get(f) for f in (*ROW_MS.values(), *ROW_SPEEDUP.values())] for r in rows])
    after += json.dumps(record["baselines"], sort_keys=True)
    changed = before != after or notes != record.get("notes", []) or "fast_p" not in record.get("metrics", {})
    record["notes"] = notes
    if changed:
        record["metrics"] = M.compute_metrics(rows, int(record.get("k") or 1), resamples=resamples)
    return changed
