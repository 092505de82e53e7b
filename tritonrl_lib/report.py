"""The results report of a run: tables and charts from whatever the run wrote, as one HTML page.

    report = build_report(cfg, paths)     # reads outputs/<run>/..., writes report.html + charts/*.png
    report.html_path, report.tables, report.charts, report.missing

Reads only files (eval records, the SFT / RL / curriculum logs, timings.json, best.json), so it
works on any run at any point: what a stage has not produced yet is listed under "missing" with the
notebook that produces it, and the rest is reported. The page is self-contained (charts embedded
as base64 PNG, tables as HTML, no code) and written by this module directly: no nbconvert needed.

Published figures appear only in their own table, labelled as other models on other task sets,
with where each number was quoted from. They are context, not a like-for-like comparison.
"""

from __future__ import annotations

import base64
import html
import json
import re
import time
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Mapping, Sequence

from . import charts as C
from . import metrics as M
from .config import RunConfig, RunPaths
from .evaluate import STAGE_NOTEBOOK, load_records, metrics_table

# Figures published by others, for context only: other models, other task sets (KernelBench).
PUBLISHED: list[dict[str, Any]] = [
    {"model": "TritonRL", "metric": "correct", "level1": 63.0, "level2": 7.0,
     "task_set": "KernelBench Level 1 / Level 2",
     "quoted": "as quoted in our source report (beyond-tritonrl-report.md, section 5, 'Published results')"},
    {"model": "KernelLLM", "metric": "pass@1", "level1": 20.2, "level2": None,
     "task_set": "KernelBench Level 1",
     "quoted": "as quoted in the project's issue 7 brief; our source report does not state it"},
]

METRIC_LABELS = {"valid_rate": "valid %", "compiled_rate": "compiled %", "correct_rate": "correct %",
                 "fast1_rate": "fast_1 %", "fast2_rate": "fast_2 %", "geomean_speedup": "geomean speedup",
                 "pass_at_1": "pass@1 %", "pass_at_k": "pass@k %"}


# --------------------------------------------------------------------------- reading the run


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSONL log; a torn last line (a killed writer) and blank lines are skipped."""
    if not Path(path).is_file():
        return []
    out = []
    for line in Path(path).read_text(errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return None


@dataclass
class RunData:
    records: dict[str, dict[str, Any]]
    sft_log: list[dict[str, Any]]
    rl_log: list[dict[str, Any]]
    curriculum_log: list[dict[str, Any]]
    timings: dict[str, dict[str, Any]]
    rl_best: dict[str, Any] | None
    missing: list[str] = field(default_factory=list)


def collect(cfg: RunConfig, paths: RunPaths) -> RunData:
    """Everything the report reads, plus a note for each thing that is not there yet."""
    data = RunData(records=load_records(paths), sft_log=read_jsonl(paths.sft_log), rl_log=read_jsonl(paths.rl_log),
                   curriculum_log=read_jsonl(paths.curriculum_log), timings=read_json(paths.timings) or {},
                   rl_best=read_json(paths.rl_best))
    from .models import checkpoint_complete

    for stage in cfg.eval.eval_stages:
        if stage in data.records:
            continue
        if stage in STAGE_NOTEBOOK and not checkpoint_complete(paths.checkpoint(stage)):
            nb = STAGE_NOTEBOOK[stage]
            data.missing.append(f"{stage}: no checkpoint at {paths.checkpoint(stage)}, so no evaluation "
                                f"(run {nb}, then 04_eval)")
        else:
            data.missing.append(f"{stage}: no eval record at {paths.eval_file(stage)} (run 04_eval)")
    if not data.sft_log:
        data.missing.append(f"SFT loss: no log at {paths.sft_log} (run 02_sft)")
    if not data.rl_log:
        data.missing.append(f"RL curves: no log at {paths.rl_log} (run 03_rl)")
    if not data.curriculum_log:
        data.missing.append(f"curriculum: no log at {paths.curriculum_log} (run 03_rl)")
    if not data.timings:
        data.missing.append(f"wall-clock: no {paths.timings} (written when notebooks run through "
                            "`tritonrl run` / `make run`)")
    rows = [r for rec in data.records.values() for r in rec["detailed_results"]]
    if rows and not any(r.get("speedup") for r in rows):
        why = ("no sample was correct, and only correct ones are timed" if not any(r.get("correct") for r in rows)
               else "no correct sample was timed (timing runs only on a GPU)")
        data.missing.append(f"speedups: {why}, so the speedup distribution is not measured")
    return data


# --------------------------------------------------------------------------- tables


def _gpus(device: str) -> int:
    m = re.match(r"^\s*(\d+)x ", device or "")
    return int(m.group(1)) if m else 0


def timings_table(timings: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per notebook: wall-clock, device and GPU-hours (wall x GPUs); a total row last."""
    rows = []
    for name, t in sorted(timings.items()):
        wall = float(t.get("wall_s") or 0.0)
        gpus = _gpus(str(t.get("device", "")))
        rows.append({"notebook": name, "wall_s": round(wall, 1), "minutes": round(wall / 60, 2),
                     "device": t.get("device", ""), "gpus": gpus, "gpu_hours": round(wall * gpus / 3600, 4),
                     "finished": t.get("finished", "")})
    if rows:
        wall = sum(r["wall_s"] for r in rows)
        rows.append({"notebook": "total", "wall_s": round(wall, 1), "minutes": round(wall / 60, 2),
                     "device": "", "gpus": max(r["gpus"] for r in rows),
                     "gpu_hours": round(sum(r["gpu_hours"] for r in rows), 4), "finished": ""})
    return rows


def _task_set(rec: Mapping[str, Any]) -> str:
    levels = rec["metrics"].get("by_level", {})
    per = ", ".join(f"L{lvl}: {m['num_tasks']}" for lvl, m in levels.items())
    return f"{rec['num_tasks']} tasks from '{rec.get('task_source', '?')}' ({per}), k={rec.get('k', '?')}"


def comparison_table(records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """This run's correct rate and pass@1 by level beside published figures of other models on
    other task sets; every row says which model, which tasks, and where the number comes from."""
    rows = []
    for stage, rec in records.items():
        lv = rec["metrics"].get("by_level", {})
        rows.append({"model": f"this run: {stage} ({rec.get('model_path', '')})",
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
    for stage, rec in records.items():
        failed = sum(not r["correct"] for r in rec["detailed_results"])
        for reason, n in M.failure_reasons(rec["detailed_results"], top=top, detail=True):
            rows.append({"stage": stage, "reason": reason, "samples": n,
                         "share of failures %": round(100 * n / failed, 1) if failed else None})
    return rows


def eval_details_table(records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for stage, rec in records.items():
        s = rec.get("sampling", {})
        gen = rec.get("generation", {})
        rows.append({"stage": stage, "model": rec.get("model_path", ""), "tasks": rec.get("num_tasks"),
                     "k": rec.get("k"), "temperature": s.get("temperature"), "seed": rec.get("seed"),
                     "device": rec.get("device", ""), "wall_s": rec.get("wall_s"),
                     "gen tokens/s": gen.get("tokens_per_s"), "notes": "; ".join(rec.get("notes", []))})
    return rows


def settings_table(cfg: RunConfig) -> list[dict[str, Any]]:
    flat = cfg.flat()
    keys = ("profile", "run", "seed", "device", "model", "dtype", "task_source", "task_size", "n_sft_examples",
            "epochs", "max_samples", "method", "n_samples", "top_k", "rounds", "tasks_per_round", "eval_tasks",
            "num_tasks", "eval_k", "eval_temperature", "policy", "num_variations", "timing")
    return [{"setting": k, "value": cfg.run_name if k == "run" else flat.get(k)} for k in keys]


def headline(data: RunData) -> list[str]:
    """A few plain sentences: the correct rate per stage and level, the SFT loss, the RL rounds."""
    lines = []
    if data.records:
        any_rec = next(iter(data.records.values()))
        lines.append(f"Evaluated on {_task_set(any_rec)}.")
        for stage, rec in data.records.items():
            m = rec["metrics"]
            per = ", ".join(f"L{lvl} {_pct(mm['correct_rate'])}" for lvl, mm in m.get("by_level", {}).items())
            speed = (f"; fast_1 {_pct(m['fast1_rate'])}, geomean speedup {m['geomean_speedup']:.2f}x"
                     if m.get("geomean_speedup") is not None else "")
            lines.append(f"{stage}: correct {_pct(m['correct_rate'])} of samples ({per}); valid "
                         f"{_pct(m['valid_rate'])}, compiled {_pct(m['compiled_rate'])}; pass@1 "
                         f"{_pct(m['pass_at_1'])}{speed}.")
    pts = [r["loss"] for r in data.sft_log if r.get("loss") is not None]
    if pts:
        lines.append(f"SFT loss {pts[0]:.3f} -> {pts[-1]:.3f} over {len(pts)} logged steps.")
    if data.rl_log:
        last = data.rl_log[-1]
        cr = last.get("correct_rate")
        lines.append(f"RL ({last.get('method', '?')}): {len(data.rl_log)} round(s)/step(s) logged; last correct rate "
                     f"on training samples {_pct(100 * cr if cr is not None else None)}.")
    if data.timings:
        total = sum(float(t.get("wall_s") or 0) for t in data.timings.values())
        gh = sum(r["gpu_hours"] for r in timings_table(data.timings)[:-1])
        lines.append(f"Wall-clock {C._duration(total)} over {len(data.timings)} notebook(s)"
                     + (f", {gh:.3f} GPU-hours." if gh else " (no GPU)."))
    return lines


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}%"


# --------------------------------------------------------------------------- the report


@dataclass
class Report:
    html_path: Path
    charts: dict[str, Path]
    tables: dict[str, list[dict[str, Any]]]
    missing: list[str]
    headline: list[str]

    def frames(self):
        """The tables as pandas DataFrames (for display in a notebook)."""
        import pandas as pd

        return {name: pd.DataFrame(rows) for name, rows in self.tables.items()}


def build_report(cfg: RunConfig, paths: RunPaths | None = None) -> Report:
    """Read the run, draw the charts (saved to paths.chart(name)), write paths.report_html."""
    paths = paths or cfg.paths
    data = collect(cfg, paths)
    figures = {
        "funnel": C.funnel_chart(data.records) if data.records else None,
        "sft_loss": C.sft_loss_chart(data.sft_log),
        "rl_curves": C.rl_chart(data.rl_log),
        "curriculum": C.curriculum_chart(data.curriculum_log, trigger=cfg.rl.curriculum_trigger),
        "speedup": C.speedup_chart(data.records) if data.records else None,
        "failures": C.failure_chart(data.records) if data.records else None,
        "wall_clock": C.timing_chart(data.timings),
    }
    charts: dict[str, Path] = {}
    pngs: dict[str, bytes] = {}
    for name, fig in figures.items():
        if fig is None:
            continue
        pngs[name] = C.png_bytes(fig)
        out = paths.chart(f"report_{name}")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(pngs[name])
        charts[name] = out
    tables = {
        "metrics": metrics_table(data.records),
        "comparison": comparison_table(data.records),
        "failures": failure_table(data.records),
        "evaluation": eval_details_table(data.records),
        "timings": timings_table(data.timings),
        "settings": settings_table(cfg),
    }
    lines = headline(data)
    page = render_html(cfg, paths, data, tables, pngs, lines)
    paths.report_html.parent.mkdir(parents=True, exist_ok=True)
    tmp = paths.report_html.with_name(f".{paths.report_html.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(paths.report_html)
    return Report(paths.report_html, charts, tables, data.missing, lines)


# --------------------------------------------------------------------------- HTML


class _TableReader(HTMLParser):
    """Reads one table of a report page back (tests, and scripts that compare runs)."""

    def __init__(self, table_id: str):
        super().__init__()
        self.table_id, self.inside, self.cell = table_id, False, None
        self.rows: list[list[str]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "table" and dict(attrs).get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


def parse_table(page: str, table_id: str) -> list[dict[str, str]]:
    """The rows of the report table `table_id` as {header: text} dicts ([] when absent)."""
    reader = _TableReader(table_id)
    reader.feed(page)
    if not reader.rows:
        return []
    head, *body = reader.rows
    return [dict(zip(head, r)) for r in body]


CSS = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1150px;
       color: #222; line-height: 1.45; padding: 0 1em; }
h1 { margin-bottom: 0.1em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.8em; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.t, th.t { text-align: left; }
tr.other td { background: #fbf7ee; color: #555; }
.na { color: #999; } .note { background: #fff8e1; border-left: 4px solid #f0c000; padding: 0.5em 0.9em; }
.missing { background: #f6f6f6; border-left: 4px solid #bbb; padding: 0.5em 0.9em; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.4em 0; }
"""


def _cell(v: Any) -> tuple[str, str]:
    """(html, css class) of a table cell."""
    if v is None:
        return '<span class="na">n/a</span>', ""
    if isinstance(v, bool):
        return ("yes" if v else "no"), ""
    if isinstance(v, float):
        if 0 < abs(v) < 0.1:
            return f"{v:.2g}", ""  # small GPU-hours stay visible instead of rounding to 0.00
        return (f"{v:.2f}" if abs(v) < 100 else f"{v:.1f}"), ""
    if isinstance(v, int):
        return str(v), ""
    return html.escape(str(v)), "t"


def html_table(rows: Sequence[Mapping[str, Any]], table_id: str, row_class: Any = None,
               labels: Mapping[str, str] | None = None) -> str:
    if not rows:
        return '<p class="missing">nothing to show yet</p>'
    cols = list(rows[0])
    labels = labels or {}
    head = "".join(f'<th class="t">{html.escape(labels.get(c, c))}</th>' if i < 2 else
                   f"<th>{html.escape(labels.get(c, c))}</th>" for i, c in enumerate(cols))
    body = []
    for r in rows:
        cls = row_class(r) if row_class else ""
        cells = []
        for c in cols:
            text, kind = _cell(r.get(c))
            cells.append(f'<td class="{kind}">{text}</td>' if kind else f"<td>{text}</td>")
        body.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>" if cls else "<tr>" + "".join(cells) + "</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _img(pngs: Mapping[str, bytes], name: str, alt: str) -> str:
    if name not in pngs:
        return ""
    b64 = base64.b64encode(pngs[name]).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def render_html(cfg: RunConfig, paths: RunPaths, data: RunData, tables: Mapping[str, list[dict[str, Any]]],
                pngs: Mapping[str, bytes], lines: Sequence[str]) -> str:
    esc = html.escape
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>tritonrl report: {esc(cfg.run_name)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>tritonrl results: run <code>{esc(cfg.run_name)}</code></h1>",
             f"<p class='sub'>profile {esc(cfg.profile)} &middot; model {esc(cfg.model.model)} &middot; "
             f"generated {time.strftime('%Y-%m-%d %H:%M')} &middot; {esc(str(paths.root))}</p>"]
    parts.append("<h2>Headline</h2>")
    parts.append("<ul>" + "".join(f"<li>{esc(s)}</li>" for s in lines) + "</ul>" if lines
                 else "<p class='missing'>No results yet.</p>")
    if data.missing:
        parts.append("<div class='missing'><b>Not in this report yet</b><ul>"
                     + "".join(f"<li>{esc(m)}</li>" for m in data.missing) + "</ul></div>")

    parts.append("<h2>Evaluation metrics</h2>")
    parts.append("<p>Percent of samples per model stage and level. <i>valid</i>: passed the static check; "
                 "<i>compiled</i>: imported and compiled; <i>correct</i>: matched the reference on every input "
                 "variation with no cheat flag; <i>fast_1 / fast_2</i>: correct and more than 1x / 2x faster than "
                 "the PyTorch reference (GPU timing only; n/a where not measured); <i>pass@k</i>: the unbiased "
                 "estimator over each task's samples, averaged over tasks.</p>")
    parts.append(html_table(tables["metrics"], "metrics", labels=METRIC_LABELS))
    parts.append(_img(pngs, "funnel", "evaluation funnel per stage and level"))
    notes = sorted({n for rec in data.records.values() for n in rec.get("notes", [])})
    if notes:
        parts.append("<div class='note'><b>Notes from the evaluation</b><ul>"
                     + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul></div>")

    parts.append("<h2>Beside published figures</h2>")
    parts.append("<p class='note'><b>Not a like-for-like comparison.</b> The rows marked <i>other model</i> are "
                 "figures published for other models on other task sets (KernelBench), quoted as stated in the "
                 "<i>source</i> column; this run's rows are measured on this run's own tasks and sizes.</p>")
    parts.append(html_table(tables["comparison"], "comparison",
                            row_class=lambda r: "other" if r["source"] != "measured in this run" else ""))

    parts.append("<h2>Training</h2>")
    parts.append(_img(pngs, "sft_loss", "SFT loss curve") or "<p class='missing'>No SFT log yet.</p>")
    parts.append(_img(pngs, "rl_curves", "RL reward and correct rate") or "<p class='missing'>No RL log yet.</p>")
    if data.rl_best:
        b = data.rl_best
        value = b.get("value")
        value = f"{value:.3f}" if isinstance(value, float) else str(value)
        parts.append(f"<p>Best RL policy (checkpoints/rl/best): {esc(str(b.get('policy', '?')))}, "
                     f"{esc(str(b.get('metric', '')))} = {esc(value)} on its round's training samples.</p>")
    parts.append(_img(pngs, "curriculum", "curriculum schedule")
                 or "<p class='missing'>No curriculum log yet.</p>")

    parts.append("<h2>Speed and failures</h2>")
    parts.append(_img(pngs, "speedup", "speedup distribution")
                 or "<p class='missing'>No measured speedups (timing runs only on a GPU).</p>")
    parts.append(_img(pngs, "failures", "failure reasons"))
    parts.append(html_table(tables["failures"], "failures"))

    parts.append("<h2>Cost: wall-clock and GPU-hours</h2>")
    parts.append("<p>Measured per notebook by the pipeline runner; GPU-hours = wall-clock x GPUs used. "
                 "The report notebook's own time is recorded after it finishes, so it shows in the next "
                 "report.</p>")
    parts.append(html_table(tables["timings"], "timings"))
    parts.append(_img(pngs, "wall_clock", "wall-clock per notebook"))

    parts.append("<h2>Evaluation details</h2>")
    parts.append(html_table(tables["evaluation"], "evaluation"))
    parts.append("<h2>Settings</h2>")
    parts.append(html_table(tables["settings"], "settings"))
    parts.append("</body></html>")
    return "\n".join(parts)
