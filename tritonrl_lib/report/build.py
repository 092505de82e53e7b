"""The results report of a run: what the run was, tables, charts and the models' own replies, from
whatever the run wrote, as one HTML page.

    report = build_report(cfg, paths)     # reads outputs/<run>/..., writes report.html + charts/*.png
    report.html_path, report.tables, report.charts, report.missing, report.stale, report.headline

Reads only files (eval records, the SFT / RL / curriculum logs, timings.json, best.json, the pipeline's
step records and executed notebooks), so it works on any run at any point: what a step has not produced
yet is listed under "missing" with the notebook that produces it (a notebook interrupted or failed
first, steps.py), and the rest is reported. Results whose inputs have
changed since they were made (an eval record of a checkpoint trained again afterwards, a step whose
inputs or settings changed) are listed under "stale" and left out of every number and chart: the
page never describes artefacts that no longer exist. A chart with nothing honest to draw (no data,
a single point) is replaced by a sentence saying why. The page itself is `report_html`.

Published figures appear only in their own table, labelled as other models on other task sets,
with where each number was published. They are context, not a like-for-like comparison.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

from . import charts as C
from ..core.config import RunConfig
from ..core.jsonio import DamagedFile, read_json, read_jsonl
from ..core.paths import RunPaths
from ..core.textfmt import duration
from ..eval import metrics as M
from ..eval.identity import TRAINING_NOTEBOOK
from ..eval.record import load_records, metrics_table
from ..model.load import checkpoint_complete
from ..run import state as run_state
from ..train.rl.log import seen_before
from . import kernelbench as KB
from .contents import Report, RunData
from .html import parse_table, render_html  # noqa: F401  (parse_table: the report's readers)
from .reference_run import load_reference
from .steps import StepState, cost_rows, counted_timings, step_lines, step_states
from .text import TASK_SOURCES, explain_reason, pick_examples, run_description, tasks_evaluated

# Figures published by others, for context only: other models, other task sets (KernelBench).
PUBLISHED: list[dict[str, Any]] = [
    {"model": "TritonRL (8B)", "metric": "correct", "level1": 63.0, "level2": 7.0,
     "task_set": "KernelBench Level 1 / Level 2",
     "quoted": "reported for TritonRL (Woo et al. 2025, arXiv:2510.17891); quoted second-hand, not re-measured"},
    {"model": "KernelLLM (8B)", "metric": "pass@1", "level1": 20.2, "level2": None,
     "task_set": "KernelBench-Triton Level 1",
     "quoted": "KernelLLM model card (huggingface.co/facebook/KernelLLM)"},
]

STEP_OF_LOG = {"sft_log": "02_sft", "rl_log": "03_rl", "curriculum_log": "03_rl"}


# --------------------------------------------------------------------------- reading the run


def _log(paths: RunPaths, name: str, problems: list[str]) -> list[dict[str, Any]]:
    try:
        return read_jsonl(getattr(paths, name))
    except DamagedFile as e:
        problems.append(f"{name.replace('_', ' ')}: {e}")
        return []


def _json(path: Path, problems: list[str]) -> Any:
    try:
        return read_json(path, None)
    except DamagedFile as e:
        problems.append(str(e))
        return None


def collect(cfg: RunConfig, paths: RunPaths) -> RunData:
    """Everything the report reads, a note for each thing that is not there yet, and each result
    whose inputs changed since it was made (left out of `records` and the logs)."""
    problems: list[str] = []
    data = RunData(records=load_records(paths), sft_log=_log(paths, "sft_log", problems),
                   rl_log=_log(paths, "rl_log", problems), curriculum_log=_log(paths, "curriculum_log", problems),
                   timings=_json(paths.timings, problems) or {}, rl_best=_json(paths.rl_best, problems))
    _drop_stale(cfg, paths, data)
    data.steps = step_states(paths, data.timings)
    data.missing.extend(step_lines(data.steps, paths))  # a notebook interrupted or failed: said first

    for model_stage in cfg.eval.eval_stages:
        if model_stage in data.records:
            continue
        if model_stage in TRAINING_NOTEBOOK and not checkpoint_complete(paths.checkpoint(model_stage)):
            nb = TRAINING_NOTEBOOK[model_stage]
            data.missing.append(f"{model_stage}: no trained model at {paths.checkpoint(model_stage)}, so no "
                                f"evaluation (run {nb}, then 04_eval)")
        elif not any(s.startswith(f"{model_stage}: ") for s in data.stale):
            data.missing.append(f"{model_stage}: no evaluation at {paths.eval_file(model_stage)} (run 04_eval)")
    if not data.sft_log:
        data.missing.append(f"SFT loss: no log at {paths.sft_log} (run 02_sft)")
    if not data.rl_log:
        data.missing.append(f"RL curves: no log at {paths.rl_log} (run 03_rl)")
    if not data.curriculum_log:
        data.missing.append(f"curriculum: no log at {paths.curriculum_log} (run 03_rl)")
    if not data.timings:
        data.missing.append(f"wall-clock: no {paths.timings} (written when notebooks run through "
                            "`tritonrl run` / `make run`)")
    data.missing.extend(problems)
    return data


def _drop_stale(cfg: RunConfig, paths: RunPaths, data: RunData) -> None:
    """Move what no longer matches its inputs out of the data, into `stale` sentences; say which
    steps' results were made with other settings than the report's, or outside `tritonrl run`."""
    for model_stage, why in run_state.stale_eval_records(cfg, paths, data.records).items():
        data.records.pop(model_stage)
        data.stale.append(f"{model_stage}: its evaluation is left out: {why}; run 04_eval again")
    for step in ("02_sft", "03_rl"):
        changed = run_state.stale_inputs(paths, step)
        if changed:
            data.stale.append(f"{step}: trained on {', '.join(changed)} as it was before it changed; its "
                              f"training curves are left out; run {step} again (and what follows)")
            for log, owner in STEP_OF_LOG.items():
                if owner == step:
                    setattr(data, log, [])
            if step == "03_rl":
                data.rl_best = None
    for step in ("01_data", "02_sft", "03_rl", "04_eval"):
        record = run_state.read_record(paths, step)
        why = run_state.why_stale(cfg, paths, step, record=record) if record and "settings" in record else None
        if why and why.startswith("settings changed: "):
            data.caveats.append(f"{step}: made with other settings than this report's (as made -> as now: "
                                f"{why.removeprefix('settings changed: ')})")
        elif why and "changed after it finished" in why:
            changed = why.split(" changed after")[0]
            data.caveats.append(f"{step}: ran again outside `tritonrl run` after its last recorded finish ({changed} "
                                "changed); the settings it used then are not recorded, and the settings table "
                                "below is this report's")


# --------------------------------------------------------------------------- tables


def _gpus(device: str) -> int:
    m = re.match(r"^\s*(\d+)x ", device or "")
    return int(m.group(1)) if m else 0


def timings_table(timings: Mapping[str, Mapping[str, Any]],
                  states: Mapping[str, StepState] | None = None) -> list[dict[str, Any]]:
    """Per notebook run: wall-clock, device and GPU-hours (wall x GPUs); a total row last that counts
    each notebook once (steps.cost_rows: a run replaced by a later one is shown, not counted)."""
    return cost_rows(timings, states)


def on_gpu(cfg: RunConfig, data: RunData) -> bool:
    """A run on a GPU (or set up for one): its profile asks for CUDA or is the 7B one, or what it
    measured ran on a GPU."""
    devices = [str(t.get("device", "")) for t in data.timings.values()]
    devices += [str(rec.get("device", "")) for rec in data.records.values()]
    return cfg.device == "cuda" or cfg.profile == "qwen7b" or any(_gpus(d) > 0 for d in devices)


# the source's setup at its real size: GPU-hours from rates measured on a 7B stand-in (issue 19)
BENCHMARKS_DIR = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"  # measurements kept in the repository
SCALE_COST_FILE = BENCHMARKS_DIR / "qwen7b_standin_h100.json"


def scale_cost_table(path: Path = SCALE_COST_FILE) -> list[dict[str, Any]]:
    """The `qwen7b` run's GPU-hours on one GPU and on eight, beside the source's own figure, from
    benchmarks/qwen7b_standin.py's results (rates measured on a random-weight stand-in); empty where
    the file is absent (an installed package without the project's docs) or holds no cost."""
    try:
        rows = (json.loads(path.read_text()).get("cost") or {}).get("rows") or []
    except (OSError, ValueError):
        return []
    out = []
    for r in rows:
        if not isinstance(r, Mapping) or "gpu_hours" not in r:
            continue
        out.append({"case": r.get("case", ""), "gpus": r.get("gpus"),
                    "sft_h": round(float(r.get("sft_s") or 0) / 3600, 2), "rl_h": round(float(r.get("rl_s") or 0) / 3600, 2),
                    "eval_h": round(float(r.get("eval_s") or 0) / 3600, 2), "wall_h": r.get("wall_hours"),
                    "gpu_hours": r.get("gpu_hours"), "source_gpu_hours": r.get("source_gpu_hours")})
    return out


# RL's step on 1..N GPUs of one host, measured (benchmarks/rl_multi_gpu.py's records, issue 32)
MULTI_GPU_FILES = "rl_multi_gpu_*.json"


def multi_gpu_table(files: list[Path] | None = None) -> list[dict[str, Any]]:
    """RL steps measured on 1, 2, 4... GPUs of one host (benchmarks/rl_multi_gpu.py's records kept under
    docs/benchmarks): per model, method and GPU count, each phase's seconds and the speedup against one
    GPU; empty where none is kept (an installed package without the project's docs)."""
    if files is None:
        files = sorted(BENCHMARKS_DIR.glob(MULTI_GPU_FILES))
    rows = []
    for f in files:
        try:
            found = json.loads(Path(f).read_text())
        except (OSError, ValueError):
            continue
        for r in found.get("table") or [] if isinstance(found, Mapping) else []:
            if not isinstance(r, Mapping) or not isinstance(r.get("step_s"), (int, float)):
                continue
            rows.append({"model": r.get("model", ""), "method": r.get("method", ""), "gpus": r.get("gpus"),
                         **{k: round(float(r[k]), 1) if isinstance(r.get(k), (int, float)) else None
                            for k in ("generate_s", "verify_s", "wait_s", "train_s", "step_s")},
                         "speedup": r.get("speedup"), "machine": found.get("machine", "")})
    return rows


def _task_set(rec: Mapping[str, Any]) -> str:
    """What a record was evaluated on, counted as every part of the page counts it (`tasks_evaluated`)."""
    levels = rec["metrics"].get("by_level", {})
    per = ", ".join(f"Level {lvl}: {m['num_tasks']}" for lvl, m in levels.items())
    source = rec.get("task_source", "?")
    source = TASK_SOURCES.get(source, f"'{source}'")
    return f"{tasks_evaluated(rec)} from {source}; {per}; {rec.get('k', '?')} sample(s) each"


def comparison_table(records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """This run's correct rate and pass@1 by level beside published figures of other models on
    other task sets; every row says which model, which tasks, and where the number comes from."""
    rows = []
    for model_stage, rec in records.items():
        lv = rec["metrics"].get("by_level", {})
        rows.append({"model": f"this run: {model_stage} ({rec.get('model_path', '')})",
                     "task_set": _task_set(rec),
                     "L1 correct %": lv.get("1", {}).get("correct_rate"),
                     "L2 correct %": lv.get("2", {}).get("correct_rate"),
                     "L1 pass@1 %": lv.get("1", {}).get("pass_at_1"),
                     "source": "measured in this run"})
    for p in PUBLISHED:
        rows.append({"model": f"{p['model']} (other model)", "task_set": f"{p['task_set']} (other task set)",
                     "L1 correct %": p["level1"] if p["metric"] == "correct" else None,
                     "L2 correct %": p["level2"] if p["metric"] == "correct" else None,
                     "L1 pass@1 %": p["level1"] if p["metric"] == "pass@1" else None,
                     "source": p["quoted"]})
    return rows


def failure_table(records: Mapping[str, Mapping[str, Any]], top: int = 5) -> list[dict[str, Any]]:
    rows = []
    for model_stage, rec in records.items():
        failed = sum(not r["correct"] for r in rec["detailed_results"])
        for reason, n in M.failure_reasons(rec["detailed_results"], top=top, detail=True):
            rows.append({"stage": model_stage, "reason": reason, "meaning": explain_reason(reason), "samples": n,
                         "share of failures %": round(100 * n / failed, 1) if failed else None})
    return rows


def eval_details_table(records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for model_stage, rec in records.items():
        s = rec.get("sampling", {})
        gen = rec.get("generation", {})
        rows.append({"stage": model_stage, "loaded from": rec.get("model_path", ""), "tasks": rec.get("num_tasks"),
                     "k": rec.get("k"), "temperature": s.get("temperature"), "seed": rec.get("seed"),
                     "device": rec.get("device", ""), "wall_s": rec.get("wall_s"),
                     "gen tokens/s": gen.get("tokens_per_s")})
    return rows  # (the records' notes are said once each, in the page's notes box)


def settings_table(cfg: RunConfig) -> list[dict[str, Any]]:
    flat = cfg.flat()
    keys = ("profile", "run", "seed", "device", "model", "dtype", "task_source", "task_size", "n_sft_examples",
            "epochs", "max_samples", "method", "n_samples", "top_k", "rounds", "tasks_per_round", "eval_tasks",
            "num_tasks", "eval_k", "eval_temperature", "policy", "num_variations", "timing")
    # num_tasks caps each held-out set: said beside it, so it never reads as the total the page counts
    shown = {"num_tasks": "num_tasks (per held-out set)"} if cfg.eval.eval_tasks == "heldout" else {}
    return [{"setting": shown.get(k, k), "value": cfg.run_name if k == "run" else flat.get(k)} for k in keys]


def headline(data: RunData) -> list[str]:
    """A few plain sentences: the correct rate per model and level, the SFT loss, the RL rounds."""
    lines = []
    if data.records:
        any_rec = next(iter(data.records.values()))
        lines.append(f"Evaluated on {_task_set(any_rec)}.")
        for model_stage, rec in data.records.items():
            m = rec["metrics"]
            per = ", ".join(f"Level {lvl} {_pct(mm['correct_rate'])}" for lvl, mm in m.get("by_level", {}).items())
            speed = (f"; faster than PyTorch {_pct(m['fast1_rate'])}, geometric-mean speedup "
                     f"{m['geomean_speedup']:.2f}x" if m.get("geomean_speedup") is not None else "")
            vc = m.get("vs_compile") or {}
            if vc.get("geomean_speedup") is not None:
                speed += (f"; against torch.compile faster {_pct(vc['fast_p'].get('1.0'))}, geometric-mean "
                          f"speedup {vc['geomean_speedup']:.2f}x")
            lines.append(f"{model_stage}: correct {_pct(m['correct_rate'])} of samples ({per}); valid code "
                         f"{_pct(m['valid_rate'])}, compiled {_pct(m['compiled_rate'])}; pass@1 "
                         f"{_pct(m['pass_at_1'])}{speed}.")
    pts = [r["loss"] for r in data.sft_log if r.get("loss") is not None]
    if pts:
        lines.append(f"SFT loss {pts[0]:.3f} -> {pts[-1]:.3f} over {len(pts)} logged steps.")
    if data.rl_log:
        last = data.rl_log[-1]
        cr = last.get("correct_rate")
        unit = "round" if last.get("method", "best_of_n") == "best_of_n" else "step"
        lines.append(f"RL ({_METHOD.get(last.get('method'), last.get('method', '?'))}): {len(data.rl_log)} "
                     f"{unit}(s); in the last, {_pct(100 * cr if cr is not None else None)} of its training "
                     "samples were correct.")
        again = [a for a in seen_before(data.rl_log) if a is not None]
        if again:  # the curriculum keeps each step's rate near its frontier: the same tasks again show change
            a = again[-1]
            lines.append(f"Tasks drawn again: {a['tasks']} in the last {unit} that drew any, correct "
                         f"{_pct(100 * a['now'])} there against {_pct(100 * a['first'])} at their first draw "
                         "(partly regression to the mean: the held-out evaluation is the test).")
    cost = timings_table(data.timings, data.steps)
    if cost and cost[-1]["notebook"] == "total":
        total, n = cost[-1], sum(r["counted"] == "yes" for r in cost)
        gh = total["gpu_hours"]
        lines.append(f"Wall-clock {duration(total['wall_s'])}" + (f", {gh:.3f} GPU-hours" if gh else " (no GPU)")
                     + f": {n} notebook(s), each counted once (the run of it that made what the run folder holds).")
    return lines


_METHOD = {"best_of_n": "best-of-N", "grpo": "GRPO"}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}%"


# --------------------------------------------------------------------------- the report


def draw(cfg: RunConfig, data: RunData, cost: list[dict[str, Any]]) -> dict[str, C.Chart]:
    """Every chart of the report, from the data it shows."""
    return {
        "funnel": C.funnel_chart(data.records),
        "sft_loss": C.sft_loss_chart(data.sft_log),
        "rl_curves": C.rl_chart(data.rl_log),
        "curriculum": C.curriculum_chart(data.curriculum_log, trigger=cfg.rl.curriculum_trigger),
        "speedup": C.speedup_chart(data.records),
        "failures": C.failure_chart(data.records, explain=explain_reason),
        "wall_clock": C.timing_chart(counted_timings(cost)),
    }


def build_report(cfg: RunConfig, paths: RunPaths | None = None) -> Report:
    """Read the run, draw the charts (saved to paths.chart(name)), write paths.report_html."""
    paths = paths or cfg.paths
    data = collect(cfg, paths)
    charts: dict[str, Path] = {}
    pngs: dict[str, bytes] = {}
    no_chart: dict[str, str] = {}
    cost = timings_table(data.timings, data.steps)
    description, demo = run_description(cfg, data.records)
    reference = load_reference() if demo else None  # a real GPU run's tables, beside a demonstration's own
    drawn = draw(cfg, data, cost) | ({"reference": C.reference_chart(reference)} if reference else {})
    for name, chart in drawn.items():
        out = paths.chart(f"report_{name}")
        if isinstance(chart, C.NoChart):
            no_chart[name] = chart.reason
            out.unlink(missing_ok=True)  # an older run's chart must not linger beside this report
            continue
        pngs[name] = C.png_bytes(chart)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(pngs[name])
        charts[name] = out
    kb_split = KB.load_split(paths)
    tables = {
        "kernelbench": KB.headline_table(data.records, cfg.eval.bootstrap_resamples),
        "kernelbench_categories": KB.category_table(data.records, kb_split),
        "kernelbench_split": KB.split_table(kb_split),
        "metrics": metrics_table(data.records),
        "fast_p": M.fast_p_table(data.records),
        "comparison": comparison_table(data.records),
        "failures": failure_table(data.records),
        "evaluation": eval_details_table(data.records),
        "timings": cost,
        # the 7B setup's GPU-hours inform a GPU run (what scaling up costs); a CPU demo's reader can do
        # nothing with them, and they would read as this run's cost
        "scale_cost": scale_cost_table() if on_gpu(cfg, data) else [],
        "multi_gpu_rl": multi_gpu_table() if on_gpu(cfg, data) else [],
        "settings": settings_table(cfg),
    }
    report = Report(paths.report_html, charts, tables, data.missing, KB.headline_lines(data.records, kb_split)
                    + headline(data), data.stale, data.caveats, no_chart, description, demo,
                    reference)
    page = render_html(cfg, paths, data, report, pngs, pick_examples(data.records), KB.answers(data.records))
    paths.report_html.parent.mkdir(parents=True, exist_ok=True)
    tmp = paths.report_html.with_name(f".{paths.report_html.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(paths.report_html)
    return report
