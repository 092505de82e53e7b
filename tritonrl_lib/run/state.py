"""Is a pipeline step's work still current? Each step's completion, tied to what it read.

A *step* is one numbered notebook (`01_data` ... `05_report`). When `tritonrl run` finishes a step it
writes a step record (`RunPaths.step_record`): the settings the step's outputs depend on, and a
content fingerprint of every artefact it read (earlier steps' outputs) and wrote. A step is current
while all of these still hold; otherwise `why_stale` says what changed, in words:

    settings changed: rl.n_samples 3 -> 2
    checkpoints/sft changed since it ran       (an earlier step ran again, however it was run)
    checkpoints/rl changed after it finished: 03_rl was run on its own (papermill or JupyterLab) ...

So a notebook re-run by papermill or in JupyterLab is noticed by what it left on disk, whoever ran
it. A notebook that names its step (`STEP = "03_rl"` before `start(globals())`) and starts outside
`tritonrl run` also leaves a note (`note_alone_run`): when and with which settings, so the next
`tritonrl run` can say what happened; and it warns, before any work, when `tritonrl run` had
finished that step in the same run folder. A step `tritonrl run` was interrupted in leaves a record
saying so (`write_interrupted`). The report uses the same records to mark results whose inputs have since changed
(`stale_inputs`), and checks every eval record against the checkpoint it describes
(`stale_eval_records`: this works for records however they were made).

Fingerprints hash file contents (SHA-256), reusing a recorded hash while a file's size and mtime are
unchanged, so checking a run costs a few `stat` calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..core.config import VERIFY_SPEED_ONLY, RunConfig
from ..core.digests import file_sha256
from ..core.jsonio import DamagedFile, read_json, write_json
from ..core.paths import RunPaths
from ..eval.identity import TRAINING_NOTEBOOK, model_identity
from ..eval.resume import is_resume_folder
from ..model.load import MARKER, checkpoint_complete
from ..train.rl.time_budget import stopped_after


@dataclass(frozen=True)
class Step:
    """What a pipeline step's outputs depend on and what it writes (RunPaths property names)."""

    settings: tuple[str, ...]  # RunConfig sections and top-level settings
    reads: tuple[str, ...]  # earlier steps' artefacts
    writes: tuple[str, ...]
    watch: tuple[str, ...] = ()  # logs whose new records show the step's progress in the terminal


_TRAINING = ("seed", "device", "model")
STEPS: dict[str, Step] = {
    "01_data": Step(("seed", "data", "verify"), (), ("data_dir",)),
    # (02_sft prints its own progress lines, train/sft/log.py: its log needs no watching)
    "02_sft": Step((*_TRAINING, "sft"), ("sft_train",), ("sft_checkpoint", "sft_log")),
    "03_rl": Step((*_TRAINING, "data", "sft", "rl", "verify"), ("split", "sft_checkpoint"),
                  ("rl_checkpoint", "rl_log", "curriculum_log")),
    "04_eval": Step((*_TRAINING, "data", "rl", "verify", "eval"), ("split", "sft_checkpoint", "rl_checkpoint"),
                    ("eval_dir",)),
    "05_report": Step(("seed", "device", "model", "data", "sft", "rl", "verify", "eval"),
                      ("eval_dir", "sft_log", "rl_log", "curriculum_log", "sft_checkpoint", "rl_checkpoint"),
                      ("report_html",)),
}
# Settings that change how fast a step runs, never what it produces.
# `rl.rl_time_budget_s` says when a call stops, not what RL makes: a run it stopped is unfinished (below)
SPEED_ONLY = {"verify": VERIFY_SPEED_ONLY, "rl": ("rl_time_budget_s",)}
# Where a run is, what it is called and how long it is expected to take: not settings of its work.
_LOCATION = ("profile", "run", "outputs_dir", "expected_minutes")
# `tritonrl run` sets this in the environment of the kernel it starts, to the step that kernel runs:
# a notebook that finds its own step there is not running alone.
RUNNER_STEP = "TRITONRL_RUNNER_STEP"


def step_of(name: str) -> Step:
    """The step's declaration; a notebook the table does not know depends on every setting."""
    known = STEPS.get(name)
    if known is not None:
        return known
    every = tuple(f.name for f in dataclasses.fields(RunConfig) if f.name not in _LOCATION)
    return Step(every, (), ())


def step_settings(cfg: RunConfig, step: Step) -> dict[str, Any]:
    """The settings a step's outputs depend on, as plain data (flattened: `rl.n_samples`)."""
    out: dict[str, Any] = {}
    for name in step.settings:
        value = getattr(cfg, name)
        if dataclasses.is_dataclass(value):
            skip = SPEED_ONLY.get(name, ())
            out.update({f"{name}.{k}": v for k, v in dataclasses.asdict(value).items() if k not in skip})
        else:
            out[name] = value
    return out


# --------------------------------------------------------------------------- fingerprints


def _is_scratch(path: Path) -> bool:
    # temp files of atomic writes (.name.PID.tmp), half-done saves (.saving-*/) and an unfinished
    # evaluation's resume folder (.eval_<stage>.resume-*/, eval/resume.py) come and go
    return any(part.startswith(".") and (part.endswith(".tmp") or part.startswith(".saving-")) or is_resume_folder(part)
               for part in path.parts)


def fingerprint(path: Path, root: Path, known: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{"files": {relpath: [size, mtime_ns, sha256]}, "digest": one hash of them all} of a file or
    folder (empty when absent). `known` (an earlier fingerprint) lends its hashes to unchanged files."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else []
    old = (known or {}).get("files", {})
    out: dict[str, list] = {}
    for f in files:
        rel = f.relative_to(root).as_posix()
        if _is_scratch(f.relative_to(root)):
            continue
        try:
            st = f.stat()
            prev = old.get(rel)
            same = prev is not None and prev[0] == st.st_size and prev[1] == st.st_mtime_ns
            out[rel] = [st.st_size, st.st_mtime_ns, prev[2] if same else file_sha256(f)]
        except FileNotFoundError:  # removed while we looked: it is not part of the state
            continue
    digest = hashlib.sha256("\n".join(f"{k} {v[2]}" for k, v in sorted(out.items())).encode()).hexdigest()
    return {"files": out, "digest": digest}


def artefacts(paths: RunPaths, names: tuple[str, ...], known: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The fingerprints of RunPaths artefacts `names`."""
    known = known or {}
    return {n: fingerprint(getattr(paths, n), paths.root, known.get(n)) for n in names}


def _changed(paths: RunPaths, recorded: Mapping[str, Any]) -> list[str]:
    """The recorded artefacts whose content differs now, as paths relative to the run."""
    out = []
    for name, fp in recorded.items():
        target = getattr(paths, name, None)
        if target is None:
            continue
        if fingerprint(target, paths.root, fp)["digest"] != fp.get("digest"):
            out.append(target.relative_to(paths.root).as_posix())
    return out


# --------------------------------------------------------------------------- step records


def read_record(paths: RunPaths, name: str) -> dict[str, Any] | None:
    try:
        rec = read_json(paths.step_record(name), None)
    except DamagedFile:
        return None  # a record cut short by a kill: the step is simply not known to be done
    return rec if isinstance(rec, dict) else None


def write_record(cfg: RunConfig, paths: RunPaths, name: str, notebook_sha: str, inputs: Mapping[str, Any],
                 wall_s: float) -> dict[str, Any]:
    """Record that step `name` finished: its settings, the inputs it read (fingerprinted before it
    ran) and what it wrote (fingerprinted now)."""
    step = step_of(name)
    previous = read_record(paths, name) or {}
    record = {"notebook_sha": notebook_sha, "settings": step_settings(cfg, step), "inputs": dict(inputs),
              "outputs": artefacts(paths, step.writes, previous.get("outputs")),
              "wall_s": round(wall_s, 2), "finished_at": time.time(),
              "finished": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(paths.step_record(name), record)
    return record


def _settings_diff(old: Mapping[str, Any], new: Mapping[str, Any], most: int = 3) -> str:
    keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    shown = [f"{k} {old.get(k, '(unset)')!r} -> {new.get(k, '(unset)')!r}" for k in keys[:most]]
    return ", ".join(shown) + (f" and {len(keys) - most} more" if len(keys) > most else "")


def _on(device: tuple[str, int] | None) -> dict[str, Any]:
    """What the step runs on, as the cost table bills a run that never finished (only a finished one
    gets a timings entry): {"device": "2x NVIDIA ...", "gpus": 2}; nothing when not given."""
    return {} if device is None else {"device": device[0], "gpus": device[1]}


def write_interrupted(paths: RunPaths, name: str, how: str, wall_s: float,
                      device: tuple[str, int] | None = None) -> None:
    """Record that `tritonrl run` was interrupted while step `name` ran (`how`: "Ctrl-C", ...) on `device`."""
    write_json(paths.step_record(name), {"interrupted": how, "wall_s": round(wall_s, 2),
                                         "interrupted_at": time.time(),
                                         "when": time.strftime("%Y-%m-%dT%H:%M:%S"), **_on(device)})


def write_started(paths: RunPaths, name: str, device: tuple[str, int] | None = None) -> None:
    """Record that step `name` started on `device` (replacing its finished record): a run killed outright
    (kill -9, a closed terminal, a machine that stopped) then still reads as interrupted, not as never run."""
    write_json(paths.step_record(name), {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "started_at": time.time(),
                                         **_on(device)})


def write_failed(paths: RunPaths, name: str, ename: str, wall_s: float,
                 device: tuple[str, int] | None = None) -> None:
    """Record that step `name` ended with an error (`ename`) on `device`: the report says so; a later run
    redoes it."""
    write_json(paths.step_record(name), {"failed": ename, "wall_s": round(wall_s, 2), "failed_at": time.time(),
                                         "when": time.strftime("%Y-%m-%dT%H:%M:%S"), **_on(device)})


def why_stale(cfg: RunConfig, paths: RunPaths, name: str, notebook_sha: str | None = None,
              record: Mapping[str, Any] | None = None) -> str | None:
    """Why step `name` must run again, in words; None while its record still holds. With
    `notebook_sha`, an edited notebook counts too."""
    record = record if record is not None else read_record(paths, name)
    if record is not None and "interrupted" in record:
        return (f"it was interrupted ({record['interrupted']}) on {record.get('when', '?')} before it finished; "
                "it picks up what it had saved")
    if record is not None and "failed" in record:
        return f"it failed ({record['failed']}) on {record.get('when', '?')}"
    if record is not None and "started" in record and "settings" not in record:
        return (f"it was interrupted on {record['started']} (it started and never finished: the run was killed, "
                "or its machine stopped); it picks up what it had saved")
    if record is None or "settings" not in record:  # none, or one written before records held settings
        return "not run by `tritonrl run` yet"
    stopped = _stopped_by_budget(paths) if name == "03_rl" else None
    if stopped:
        return stopped
    if notebook_sha is not None and record.get("notebook_sha") != notebook_sha:
        return "the notebook changed"
    now = step_settings(cfg, step_of(name))
    if record["settings"] != now:
        return f"settings changed: {_settings_diff(record['settings'], now)}"
    changed = _changed(paths, record.get("inputs", {}))
    if changed:
        return f"{', '.join(changed)} changed since it ran"
    changed = _changed(paths, record.get("outputs", {}))
    if changed:
        return f"{', '.join(changed)} changed after it finished: {_who_changed(paths, name, record)}"
    return None


def _stopped_by_budget(paths: RunPaths) -> str | None:
    """Why RL must go on: its last call stopped at `rl_time_budget_s` (the adapter's marker says so)."""
    done = stopped_after(read_json(paths.rl_checkpoint / MARKER, None))
    return f"RL stopped at its time budget (rl_time_budget_s) after {done}; it goes on from there" if done else None


def _who_changed(paths: RunPaths, name: str, record: Mapping[str, Any]) -> str:
    """What replaced a finished step's outputs, as far as the run folder tells."""
    alone = _read_alone(paths, name)
    if alone is None or alone.get("started_at", 0.0) < record.get("finished_at", 0.0):
        return ("something other than `tritonrl run` wrote there (the notebook run on its own, or a hand edit); "
                "running it again with this run's settings")
    diff = _settings_diff(record.get("settings", {}), alone.get("settings", {}))
    return (f"{name} was run on its own (papermill or JupyterLab) on {alone.get('started', '?')}, "
            + (f"with other settings ({diff}), " if diff else "with the same settings, ")
            + "and replaced what `tritonrl run` had made; running it again with this run's settings "
              "(a notebook run on its own keeps its result apart with -p run NAME)")


# --------------------------------------------------------------------------- a notebook run on its own


def alone_record(paths: RunPaths, name: str) -> Path:
    """The note a notebook of step `name` leaves when it starts outside `tritonrl run`."""
    return paths.notebooks_dir / f".{name}.alone.json"


def _read_alone(paths: RunPaths, name: str) -> dict[str, Any] | None:
    try:
        rec = read_json(alone_record(paths, name), None)
    except DamagedFile:
        return None
    return rec if isinstance(rec, dict) else None


def note_alone_run(cfg: RunConfig, paths: RunPaths, name: str) -> str | None:
    """Step `name`'s notebook starts on its own (papermill, JupyterLab) in `paths`' run folder: leave a
    note for the next `tritonrl run` (when, which settings), and return a warning when `tritonrl run`
    had finished this step there, whose result this run may replace; None when there is none."""
    settings = step_settings(cfg, step_of(name))
    write_json(alone_record(paths, name), {"started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                           "started_at": time.time(), "settings": settings})
    record = read_record(paths, name)
    if record is None or "settings" not in record:
        return None
    diff = _settings_diff(record["settings"], settings)
    writes = ", ".join(getattr(paths, w).relative_to(paths.root).as_posix() for w in step_of(name).writes)
    return (f"WARNING: `tritonrl run` finished {name} in {paths.root} on {record.get('finished', '?')}. This notebook, "
            f"run on its own, writes into the same folder "
            + (f"with other settings ({diff}): it will replace" if diff else
               "with the same settings: it may redo and replace")
            + f" that result ({writes}), and the next `tritonrl run` will then run {name} and the notebooks after "
            "it again. To keep the finished result, stop now and give this notebook a run folder of its own "
            "(-p run NAME; the earlier notebooks run there first).")


def forget_alone_run(paths: RunPaths, name: str) -> None:
    """`tritonrl run` ran step `name` itself: an earlier note of a run on its own says nothing any more."""
    alone_record(paths, name).unlink(missing_ok=True)


# --------------------------------------------------------------------------- what the report checks


def stale_inputs(paths: RunPaths, name: str) -> list[str]:
    """The artefacts step `name` read that have changed since it ran ([] without a record)."""
    record = read_record(paths, name)
    return _changed(paths, record.get("inputs", {})) if record else []


def stale_eval_records(cfg: RunConfig, paths: RunPaths, records: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Eval records that describe a model which is no longer there: {model stage: why}. A record
    remembers a fingerprint of the model it evaluated; the stage's checkpoint must still match it."""
    out: dict[str, str] = {}
    for model_stage, rec in records.items():
        evaluated = (rec.get("fingerprint") or {}).get("model")
        if evaluated is None:
            continue  # a record from before fingerprints: nothing to compare against
        if model_stage == "base":
            if evaluated != model_identity(cfg.model.model):
                out[model_stage] = (f"it evaluated the base model {evaluated!r}; the run's model is now "
                                    f"{cfg.model.model!r}")
            continue
        if model_stage not in TRAINING_NOTEBOOK:
            continue
        folder = paths.checkpoint(model_stage)
        if not checkpoint_complete(folder):
            out[model_stage] = f"the {model_stage} checkpoint it evaluated is gone ({folder} is not a finished save)"
        elif model_identity(str(folder)) != evaluated:
            out[model_stage] = (f"the {model_stage} checkpoint was trained again after this evaluation "
                                f"({TRAINING_NOTEBOOK[model_stage]} ran since)")
    return out
