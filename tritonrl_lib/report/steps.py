"""The run's steps as the report tells them: how each notebook's last run ended, and the cost table,
each notebook's time counted once.

    states = step_states(paths)      # step -> StepState: finished, interrupted, failed, running (this report's step)
    step_lines(states)               # "03_rl: interrupted (Ctrl-C) on ..., 8m 10s in, before it finished; ..."
    cost_rows(timings, states)       # the cost table: a row per notebook run, a total that counts each notebook once

How a step's last run ended, as the run folder tells it (run/state.py, run/pipeline.py):

- finished: `tritonrl run` wrote its step record (`write_record`), and its wall-clock, device and
  GPUs into `timings.json` (one entry per notebook, its latest finished run);
- interrupted: the record says so (`write_interrupted`: Ctrl-C, SIGTERM, a kernel that died), or
  the runner itself was stopped outright (kill -9, a closed terminal, a machine gone). The runner
  removes a step's record when the step starts, so then what is left is the copy of the notebook
  papermill was executing (`RunPaths.executed_notebook`): started, never ended;
- failed: that copy ended with an error (the runner keeps it);
- running: the step this report is being built in (`tritonrl run` names it in the environment of the
  notebook's kernel, `run_state.RUNNER_STEP`).

The cost table counts what the run's current state was made by: per notebook, its latest run, whether
it finished or was interrupted (an interrupted run's partial work is what a resumed run picks up). A
finished run of a notebook that has since started again (interrupted, failed, running now) is shown,
labelled, and not counted: the later run replaces its work. So a partial rerun never adds two runs of
the same notebook. A run that did not finish is billed by the device and GPUs the runner added to
its step record when it started; a run folder from before that has its GPU-hours left out of the
total, and the total says how many.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping

from ..core.paths import RunPaths
from ..core.textfmt import duration
from ..run import state as run_state


@dataclass(frozen=True)
class StepState:
    step: str
    state: str  # finished | interrupted | failed | running | none
    when: str = ""  # when it finished, stopped or failed (local time, as the runner writes it)
    wall_s: float | None = None  # how long that run took (interrupted: how long it ran before; None: unknown)
    how: str = ""  # interrupted: "Ctrl-C", "SIGTERM", "its kernel died", "killed"; failed: the error's name
    at_least: bool = False  # wall_s is a lower bound (read from the executed notebook's last save)
    device: str = ""  # what the run ran on, as the runner recorded it when the step started ("": not recorded)
    gpus: int | None = None  # the GPUs it occupied (None: not recorded)


def _local(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ts))


def _executed(paths: RunPaths, step: str) -> StepState | None:
    """How the copy of the notebook papermill executed says its run ended: started and never ended
    (interrupted, or running), ended with an error (failed); None when it ended well or is not there."""
    path = paths.executed_notebook(step)
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))  # read once: a long run's copy can be large
        meta = (notebook.get("metadata") or {}).get("papermill") or {}
        mtime = path.stat().st_mtime
    except (OSError, ValueError, AttributeError):
        return None  # none, or cut short mid-write: it tells nothing
    start = meta.get("start_time")
    try:
        started = datetime.fromisoformat(start).timestamp() if isinstance(start, str) else None
    except ValueError:
        started = None
    if started is None:
        return None
    if meta.get("end_time") is None:
        return StepState(step, "interrupted", _local(mtime), max(0.0, mtime - started), "killed", at_least=True)
    if meta.get("exception"):
        return StepState(step, "failed", _local(mtime), meta.get("duration"), _failed_error(notebook))
    return None


def _failed_error(notebook: Mapping[str, Any]) -> str:
    """The name of the error a failed notebook stopped on ("" when the copy does not say)."""
    for cell in notebook.get("cells") or []:
        for out in cell.get("outputs") or []:
            if out.get("output_type") == "error":
                return str(out.get("ename") or "")
    return ""


def step_names(paths: RunPaths, timings: Mapping[str, Any] = ()) -> list[str]:
    """The run's steps in order: the pipeline's, and any other notebook it recorded or timed."""
    names = set(run_state.STEPS) | set(timings)
    if paths.notebooks_dir.is_dir():
        names |= {m.group(1) for p in paths.notebooks_dir.iterdir()
                  if (m := re.fullmatch(r"\.(.+)\.done\.json", p.name))}
    return sorted(names)


def step_state(paths: RunPaths, step: str, this_step: str | None = None) -> StepState:
    """How step `step`'s last run ended (see the module's docstring)."""
    if this_step is None:
        this_step = os.environ.get(run_state.RUNNER_STEP, "")
    record = run_state.read_record(paths, step) or {}
    if "settings" in record:
        return StepState(step, "finished", str(record.get("finished", "")), record.get("wall_s"))
    if step == this_step:
        return StepState(step, "running")
    # the runner adds the step's device to its record when the step starts (run/pipeline.py)
    gpus = record.get("gpus")
    device = {"device": str(record.get("device") or ""), "gpus": int(gpus) if isinstance(gpus, (int, float)) else None}
    if "interrupted" in record:
        return StepState(step, "interrupted", str(record.get("when", "")), record.get("wall_s"),
                         str(record["interrupted"]), **device)
    if "failed" in record:  # a runner that records a failed step
        return StepState(step, "failed", str(record.get("when", "")), record.get("wall_s"), str(record["failed"]),
                         **device)
    executed = _executed(paths, step)
    if executed is not None:
        return dataclasses.replace(executed, **device)
    if "started" in record:  # a runner that records a step's start: it started, and never ended
        return StepState(step, "interrupted", str(record.get("started", "")), None, "killed", **device)
    return StepState(step, "none")


def step_states(paths: RunPaths, timings: Mapping[str, Any] = ()) -> dict[str, StepState]:
    this_step = os.environ.get(run_state.RUNNER_STEP, "")
    return {name: step_state(paths, name, this_step) for name in step_names(paths, timings)}


def _how(s: StepState) -> str:
    return "the run was stopped without a word: killed, or its machine stopped" if s.how == "killed" else s.how


def ended_phrase(s: StepState) -> str:
    """"interrupted (Ctrl-C) on 2026-11-25T10:01:02, 8m 10s in": how a run that did not finish ended."""
    ran = ""
    if s.wall_s is not None:
        ran = f", {'at least ' if s.at_least else ''}{duration(float(s.wall_s))} in"
    if s.state == "interrupted":
        return f"interrupted ({_how(s)}) on {s.when or '?'}{ran}"
    if s.state == "failed":
        return f"failed{f' ({s.how})' if s.how else ''} on {s.when or '?'}{ran}"
    return s.state


def step_lines(states: Mapping[str, StepState], paths: RunPaths) -> list[str]:
    """A sentence for each step whose last run did not finish: how it ended, and what to do."""
    lines = []
    for name, s in states.items():
        if s.state == "interrupted":
            lines.append(f"{name}: {ended_phrase(s)}, before it finished; `tritonrl run` (or `make run`) runs it "
                         "again, picking up what it had saved, and then the notebooks after it")
        elif s.state == "failed":
            lines.append(f"{name}: {ended_phrase(s)}; its error is in {paths.executed_notebook(name)}")
    return lines


# --------------------------------------------------------------------------- the cost table


def _gpus(device: str) -> int:
    m = re.match(r"^\s*(\d+)x ", device or "")
    return int(m.group(1)) if m else 0


def _row(notebook: str, run: str, wall: float | None, device: str, counted: str,
         gpus: Any = None) -> dict[str, Any]:
    """`gpus` as recorded; else read from `device` ("2x NVIDIA ..."); None when neither was recorded."""
    if not isinstance(gpus, (int, float)):
        gpus = _gpus(device) if device else None
    return {"notebook": notebook, "run": run, "wall_s": None if wall is None else round(float(wall), 1),
            "minutes": None if wall is None else round(float(wall) / 60, 2), "device": device or "not recorded",
            "gpus": None if gpus is None else int(gpus),
            "gpu_hours": None if wall is None or gpus is None else round(float(wall) * gpus / 3600, 4),
            "counted": counted}


def cost_rows(timings: Mapping[str, Mapping[str, Any]],
              states: Mapping[str, StepState] | None = None) -> list[dict[str, Any]]:
    """The cost table: per notebook, wall-clock, device and GPU-hours (wall x GPUs) of its latest run,
    with a total row last that counts each notebook once (see the module's docstring)."""
    states = states or {}
    rows = []
    for name in sorted(set(timings) | {n for n, s in states.items() if s.state in ("interrupted", "failed")}):
        t = timings.get(name)
        s = states.get(name)
        later = s is not None and s.state in ("interrupted", "failed", "running")
        if t is not None:
            when = f"finished {t.get('finished', '?')}"
            if not later:
                run, count = when, "yes"
            elif s.state == "running":
                run, count = f"{when} (the previous run: this one is timed when it finishes)", "no: run again now"
            else:
                run, count = f"{when} (its work replaced by the later run below)", "no: run again since"
            rows.append(_row(name, run, float(t.get("wall_s") or 0.0), str(t.get("device", "")), count,
                             t.get("gpus")))
        if later and s.state != "running":
            rows.append(_row(name, ended_phrase(s), s.wall_s, s.device,
                             "yes" if s.wall_s is not None else "no: not timed", s.gpus))
    counted = [r for r in rows if r["counted"] == "yes"]
    if counted:
        wall = sum(r["wall_s"] for r in counted)
        gh = [r["gpu_hours"] for r in counted if r["gpu_hours"] is not None]
        unknown = len(counted) - len(gh)  # a run folder from before the runner recorded a step's device
        run = f"{len(counted)} notebook run(s), each notebook once"
        if unknown:
            run += (f"; GPU-hours count {len(gh)} of them: {unknown} ran on a device that was not recorded "
                    "(their wall-clock is in the total)")
        rows.append({"notebook": "total", "run": run,
                     "wall_s": round(wall, 1), "minutes": round(wall / 60, 2), "device": "",
                     "gpus": max((r["gpus"] or 0) for r in counted),
                     "gpu_hours": round(sum(gh), 4) if gh else None, "counted": ""})
    return rows


def counted_timings(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The counted rows as `charts.timing_chart` takes them: label -> {"wall_s"}."""
    out = {}
    for r in rows:
        if r["counted"] == "yes":
            label = r["notebook"] if r["run"].startswith("finished") else f"{r['notebook']} ({r['run'].split(' ')[0]})"
            out[label] = {"wall_s": r["wall_s"]}
    return out
