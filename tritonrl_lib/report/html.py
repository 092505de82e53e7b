"""The report's HTML page: self-contained (charts embedded as base64 PNG, tables as HTML, no script),
written directly (no nbconvert). `parse_table` reads one of its tables back (tests, scripts)."""

from __future__ import annotations

import base64
import html
import os
import re
import time
from html.parser import HTMLParser
from typing import Any, Mapping, Sequence

from ..core.config import RunConfig
from ..core.paths import RunPaths, project_root
from ..eval.baselines import NOTE_PREFIX
from .contents import Report, RunData
from .text import Example, best_policy_sentence, verdict_sentence


# the most of one reply the page shows (a reply can run to the token limit)
EXAMPLE_LINES, EXAMPLE_CHARS = 80, 6000
# column names as a reader sees them
LABELS = {"task_set": "tasks", "wall_s": "wall-clock s", "gpus": "GPUs", "gpu_hours": "GPU-hours",
          "gen tokens/s": "generated tokens/s", "stage": "model"}
METRIC_LABELS = {"valid_rate": "valid %", "compiled_rate": "compiled %", "correct_rate": "correct %",
                 "fast1_rate": "fast_1 %", "fast2_rate": "fast_2 %", "geomean_speedup": "geomean speedup",
                 "pass_at_1": "pass@1 %", "pass_at_k": "pass@k %"}


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
       color: #222; line-height: 1.45; padding: 0 1em; overflow-wrap: break-word; }
h1 { margin-bottom: 0.1em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.8em; }
.sub { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-size: 0.88em; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
td.t { overflow-wrap: anywhere; } /* a long path or sentence wraps: the page never scrolls sideways */
th { background: #f3f3f3; } td.t, th.t { text-align: left; }
tr.other td { background: #fbf7ee; color: #555; }
.na { color: #999; } .note { background: #fff8e1; border-left: 4px solid #f0c000; padding: 0.5em 0.9em; }
.missing { background: #f6f6f6; border-left: 4px solid #bbb; padding: 0.5em 0.9em; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.4em 0; }
.demo { background: #eef4fb; border-left: 4px solid #3b78c2; padding: 0.6em 1em; }
.stale { background: #fdecea; border-left: 4px solid #c62828; padding: 0.5em 0.9em; }
.nochart { color: #555; font-style: italic; background: #fafafa; border: 1px dashed #ccc; padding: 0.5em 0.9em; }
details { margin: 0.5em 0; } summary { cursor: pointer; font-weight: 600; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 0.6em; overflow-x: auto; font-size: 0.8em;
      max-height: 28em; }
.verdict { margin: 0.2em 0 0.4em; }
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
    return words(str(v)), "t"


def html_table(rows: Sequence[Mapping[str, Any]], table_id: str, row_class: Any = None,
               labels: Mapping[str, str] | None = None) -> str:
    if not rows:
        return '<p class="missing">nothing to show yet</p>'
    cols = list(rows[0])
    labels = {**LABELS, **(labels or {})}
    # a column of text reads from the left, a column of numbers from the right
    text = {c for c in cols if any(_cell(r.get(c))[1] == "t" for r in rows)}
    head = "".join(f'<th class="t">{html.escape(labels.get(c, c))}</th>' if c in text else
                   f"<th>{html.escape(labels.get(c, c))}</th>" for c in cols)
    body = []
    for r in rows:
        cls = row_class(r) if row_class else ""
        cells = []
        for c in cols:
            text, kind = _cell(r.get(c))
            cells.append(f'<td class="{kind}">{text}</td>' if kind else f"<td>{text}</td>")
        body.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>" if cls else "<tr>" + "".join(cells) + "</tr>")
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _img(pngs: Mapping[str, bytes], no_chart: Mapping[str, str], name: str, alt: str) -> str:
    """The chart, or the sentence saying why there is none."""
    if name in pngs:
        b64 = base64.b64encode(pngs[name]).decode("ascii")
        return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'
    if name in no_chart:
        return f"<p class='nochart'>No {html.escape(alt)} chart: {words(no_chart[name])}.</p>"
    return ""


def _results_link(paths: RunPaths) -> str:
    """docs/RESULTS.md of the checkout, as a link relative to the page (text only when absent)."""
    target = project_root() / "docs" / "RESULTS.md"
    if not target.is_file():
        return "docs/RESULTS.md"
    rel = os.path.relpath(target, paths.report_html.parent)
    return f"<a href='{html.escape(rel)}'>docs/RESULTS.md</a>"


def _example(ex: Example) -> str:
    text = str(ex.row.get("completion", ""))
    lines = text.splitlines()
    shown = "\n".join(lines[:EXAMPLE_LINES])[:EXAMPLE_CHARS]
    cut = len(shown) < len(text.rstrip("\n"))
    more = f"\n... ({len(lines)} lines in all; the rest is not shown)" if cut else ""
    empty = "(the reply is empty)" if not text.strip() else ""
    return (f"<details><summary>{html.escape(ex.title)}</summary>"
            f"<p class='verdict'>{words(verdict_sentence(ex.row))}</p>"
            f"<pre>{html.escape(shown + more) or empty}</pre></details>")


def words(text: str) -> str:
    """Plain text as HTML: escaped, with `code` spans as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _box(css: str, title: str, items: Sequence[str]) -> str:
    return (f"<div class='{css}'><b>{html.escape(title)}</b><ul>"
            + "".join(f"<li>{words(m)}</li>" for m in items) + "</ul></div>")


FAST_P_LABELS = {"fast_0": "fast_0 %", "fast_1.0": "fast_1.0 %", "fast_1.5": "fast_1.5 %", "fast_2.0": "fast_2.0 %",
                 "geomean_speedup": "geomean speedup"}


def speed_section(data: RunData, rows: Sequence[Mapping[str, Any]]) -> str:
    """fast_p at 0 / 1.0 / 1.5 / 2.0 and the geometric-mean speedup, against the verifier's own eager
    timing and, where this machine's baselines were attached, against stored eager and torch.compile
    times; a sentence where torch.compile was not measured."""
    parts = ["<h3>Speed: fast_p</h3>",
             "<p><i>fast_p</i>: percent of samples that are correct and more than p times faster than the "
             "reference (fast_0 is the correct rate). <i>geomean</i>: geometric mean of the speedups of the correct "
             "samples that were timed. <i>eager (verifier)</i>: the PyTorch reference, timed by the verifier beside "
             "each sample; <i>eager baseline</i> and <i>torch.compile</i>: the reference's times measured once per "
             "task on this machine (<code>tritonrl baselines</code>), over the tasks that have one. n/a: not "
             "timed (no GPU).</p>"]
    if not any(r["against"] == "torch.compile" for r in rows) and data.records:
        said = any(n.startswith(NOTE_PREFIX) for rec in data.records.values() for n in rec.get("notes", []))
        parts.append("<p class='missing'>Against torch.compile: not measured for this machine"
                     + (" (why: in the notes from the evaluation below)" if said else "") + "; run "
                     "<code>tritonrl baselines --tasks &lt;the evaluation's tasks&gt;</code> on the machine that "
                     "evaluates, then evaluate again (the verdicts are reused).</p>")
    parts.append(html_table(rows, "fast_p", labels=FAST_P_LABELS))
    return "\n".join(parts)


def notes_box(records: Mapping[str, Mapping[str, Any]]) -> str:
    """Every distinct note of the eval records, once, naming the models it concerns when not all."""
    who: dict[str, list[str]] = {}
    for model_stage, rec in records.items():
        for note in rec.get("notes", []):
            if model_stage not in who.setdefault(note, []):
                who[note].append(model_stage)
    if not who:
        return ""
    items = [note if len(stages) == len(records) else f"{note} ({', '.join(stages)} only)"
             for note, stages in sorted(who.items())]
    return _box("note", "Notes from the evaluation" + (" (each applies to every model unless it names some)"
                                                         if len(records) > 1 else ""), items)


COST_LABELS = {"run": "which run", "counted": "in the total"}
MULTI_GPU_LABELS = {"gpus": "GPUs", "generate_s": "generate s", "verify_s": "verify s", "wait_s": "wait s",
                    "train_s": "train s", "step_s": "step s", "speedup": "speedup vs 1 GPU"}
SCALE_LABELS = {"sft_h": "SFT h", "rl_h": "RL h", "eval_h": "eval h", "wall_h": "wall h",
                "source_gpu_hours": "published GPU-hours"}


def cost_section(tables: Mapping[str, Any], pngs: Mapping[str, bytes], no_chart: Mapping[str, str]) -> list[str]:
    """The run's own wall-clock and GPU-hours; on a GPU run, the 7B setup's, measured elsewhere."""
    parts = ["<h2>Cost: wall-clock and GPU-hours</h2>",
             "<p>Measured per notebook by the pipeline runner (<code>tritonrl run</code>); GPU-hours = wall-clock x "
             "GPUs used. A notebook run again replaces its earlier time, so the total counts each notebook once: the "
             "run of it that made what the run folder holds now (an interrupted run counts: a resumed run picks up "
             "its work). A run whose work a later run replaced is shown, marked, and not counted. The report "
             "notebook's own time is recorded after it finishes, so it shows in the next report.</p>",
             html_table(tables["timings"], "timings", labels=COST_LABELS), _img(pngs, no_chart, "wall_clock",
                                                                                "wall-clock")]
    if tables.get("scale_cost"):
        parts += ["<h3>The published setup at 7B: figures measured elsewhere, not by this run</h3>",
                  "<p>What the <code>qwen7b</code> profile would cost (SFT on 1,000 examples, its RL budget, its "
                  "evaluation), computed from rates measured on one H100 with a random-weight stand-in of "
                  "Qwen2.5-Coder-7B-Instruct (<code>benchmarks/qwen7b_standin.py</code>; docs/PERFORMANCE.md, "
                  "\"A 7B-class policy on one GPU\"), for scaling this run up. Every sample is counted at its full "
                  "token limit: upper bounds. The published run of this setup took 64 GPU-hours.</p>",
                  html_table(tables["scale_cost"], "scale_cost", labels=SCALE_LABELS)]
    if tables.get("multi_gpu_rl"):
        parts += ["<h3>RL on several GPUs of one host: measured elsewhere, not by this run</h3>",
                  "<p>One RL step of fixed size (16 tasks x 8 samples, each group with its reference solution) on "
                  "1, 2 and 4 GPUs of one host, one process per GPU (<code>benchmarks/rl_multi_gpu.py</code>; "
                  "docs/MULTI_GPU.md); seconds of the slowest process. Decoding and one candidate's verification set "
                  "the step's length, so more GPUs speed a step of this size up little: they pay off as more tasks "
                  "per step.</p>",
                  html_table(tables["multi_gpu_rl"], "multi_gpu_rl", labels=MULTI_GPU_LABELS)]
    return parts


def reference_section(ref: Mapping[str, Any], pngs: Mapping[str, bytes], no_chart: Mapping[str, str]) -> list[str]:
    """A real GPU run's tables, kept in the repository, shown beside a demonstration: another run's,
    and said so before anything else."""
    t = ref["tables"]
    parts = ["<h2>What a real GPU run gave (another run, kept in the repository)</h2>",
             f"<p class='note'><b>Not this run.</b> Measured {html.escape(str(ref['measured']))} on "
             f"{html.escape(str(ref['machine']))} with <code>{html.escape(str(ref['command']))}</code>; its tables are "
             f"kept as JSON in <code>docs/benchmarks/reference_gpu_run.json</code> (no weights) so that a demonstration "
             "shows what the method does at a size where its numbers mean something. This run's own figures are "
             "above and below.</p>"]
    if ref.get("partial"):
        parts.append(f"<p class='note'><b>Partial.</b> {html.escape(str(ref['partial']))}</p>")
    parts.append(_img(pngs, no_chart, "reference", "kept run"))
    for key, title in (("dev_set", "SFT settings chosen on the development set (hand-written tasks)"),
                       ("kernelbench", "Held-out KernelBench problems (published sizes)"),
                       ("kernelbench_categories", "Held-out KernelBench problems per category"),
                       ("builtin", "The built-in held-out sets"), ("vs_sft", "RL minus SFT"),
                       ("rl_rounds", "RL, step by step (training tasks)")):
        if t.get(key):
            parts += [f"<h3>{title}</h3>", html_table(t[key], f"reference_{key}")]
    return parts


def kernelbench_section(tables: Mapping[str, Any], answers: Sequence[Example]) -> list[str]:
    """The held-out KernelBench problems first: the benchmark this project reports on."""
    parts = ["<h2>Held-out KernelBench problems</h2>",
             "<p>KernelBench problems (ScalingIntelligence/KernelBench, read from the checkout at run time) that "
             "RL never trained on, at their published sizes, split by level and category before training "
             "(<code>data/kernelbench_split.json</code>). Percent of samples, with the 95% interval from "
             "resampling problems. <i>fast_1</i>: correct and faster than the reference, against eager PyTorch "
             "(timed by the verifier) and against <code>torch.compile</code> (this machine's stored baselines, "
             "<code>tritonrl baselines</code>; n/a without them).</p>",
             html_table(tables["kernelbench"], "kernelbench")]
    if tables.get("kernelbench_categories"):
        parts += ["<h3>Which kinds of problem each model solves</h3>",
                  html_table(tables["kernelbench_categories"], "kernelbench_categories")]
    if answers:
        parts.append("<h3>Answers on held-out KernelBench problems</h3>")
        parts.extend(_example(ex) for ex in answers)
    if tables.get("kernelbench_split"):
        parts += ["<h3>The split</h3>", "<p>Problems per level and category: RL's train part, and the held-out "
                  "part only evaluation sees.</p>", html_table(tables["kernelbench_split"], "kernelbench_split")]
    return parts


def render_html(cfg: RunConfig, paths: RunPaths, data: RunData, report: Report,
                pngs: Mapping[str, bytes], examples: Sequence[Example],
                kernelbench_answers: Sequence[Example] = ()) -> str:
    esc = html.escape
    tables, no_chart = report.tables, report.no_chart
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>tritonrl report: {esc(cfg.run_name)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>tritonrl results: run <code>{esc(cfg.run_name)}</code></h1>",
             f"<p class='sub'>profile {esc(cfg.profile)} &middot; model {esc(cfg.model.model)} &middot; "
             f"generated {time.strftime('%Y-%m-%d %H:%M')} &middot; {esc(str(paths.root))}</p>",
             "<p>tritonrl teaches a language model to rewrite PyTorch modules as Triton GPU kernels: supervised "
             "fine-tuning (SFT) on verified examples, then reinforcement learning (RL) rewarded by a verifier that "
             "runs every reply in a sandbox and compares it with PyTorch. Each model below (<i>base</i>: before "
             "training, <i>sft</i>, <i>rl</i>) writes replies for tasks it never trained on.</p>"]
    desc = [words(s) for s in report.description]
    if report.demonstration:
        desc[-1] = desc[-1].replace("docs/RESULTS.md", _results_link(paths))
        parts.append("<div class='demo'><b>" + desc[0] + "</b><br>" + "<br>".join(desc[1:]) + "</div>")
    else:
        parts.append("<p>" + " ".join(desc) + "</p>")
    if report.stale:
        parts.append(_box("stale", "Out of date, and left out of this report", report.stale))
    if report.caveats:
        parts.append(_box("note", "Made otherwise than this report's settings say", report.caveats))
    parts.append("<h2>Headline</h2>")
    parts.append("<ul>" + "".join(f"<li>{words(s)}</li>" for s in report.headline) + "</ul>" if report.headline
                 else "<p class='missing'>No results yet.</p>")
    if report.missing:
        parts.append(_box("missing", "Not in this report yet", report.missing))
    if tables.get("kernelbench"):
        parts.extend(kernelbench_section(tables, kernelbench_answers))
    if report.demonstration and report.reference:
        parts.extend(reference_section(report.reference, pngs, no_chart))

    parts.append("<h2>Evaluation metrics</h2>")
    parts.append("<p>Percent of samples per model and task level (Level 1: one operation; Level 2: several fused). "
                 "<i>valid</i>: passed the static check (a <code>ModelNew</code> class that launches a Triton kernel, "
                 "nothing forbidden); <i>compiled</i>: imported and compiled; <i>correct</i>: matched PyTorch on every "
                 "input variation with no sign of cheating; <i>fast_1 / fast_2</i>: correct and more than 1x / 2x "
                 "faster than PyTorch (timed on a GPU only; n/a where not measured); <i>pass@k</i>: the chance that "
                 "at least one of k samples of a task is correct, averaged over tasks.</p>")
    parts.append(html_table(tables["metrics"], "metrics", labels=METRIC_LABELS))
    parts.append(_img(pngs, no_chart, "funnel", "evaluation funnel"))
    parts.append(speed_section(data, tables["fast_p"]))
    parts.append(notes_box(data.records))  # the one place a record's notes are said

    parts.append("<h2>What the models wrote</h2>")
    if examples:
        parts.append("<p>A few of each model's own replies, with the verifier's verdict: its best sample, and a "
                     "typical one (failed for the model's most common reason). Click to open.</p>")
        parts.extend(_example(ex) for ex in examples)
    else:
        parts.append("<p class='missing'>No evaluated replies yet (run 04_eval).</p>")

    parts.append("<h2>Beside published figures</h2>")
    parts.append("<p class='note'><b>Not a like-for-like comparison.</b> The rows marked <i>other model</i> are "
                 "figures published for other models on other task sets (KernelBench), as stated in the "
                 "<i>source</i> column; this run's rows are measured on this run's own tasks and sizes.</p>")
    parts.append(html_table(tables["comparison"], "comparison",
                            row_class=lambda r: "other" if r["source"] != "measured in this run" else ""))

    parts.append("<h2>Training</h2>")
    parts.append(_img(pngs, no_chart, "sft_loss", "SFT loss"))
    parts.append(_img(pngs, no_chart, "rl_curves", "RL progress"))
    if data.rl_best:
        parts.append(f"<p>{words(best_policy_sentence(data.rl_best))}</p>")
    parts.append(_img(pngs, no_chart, "curriculum", "curriculum"))

    parts.append("<h2>Speed and failures</h2>")
    parts.append(_img(pngs, no_chart, "speedup", "speedup"))
    parts.append(_img(pngs, no_chart, "failures", "failure reasons"))
    parts.append(html_table(tables["failures"], "failures"))

    parts.extend(cost_section(tables, pngs, no_chart))

    parts.append("<h2>Evaluation details</h2>")
    parts.append(html_table(tables["evaluation"], "evaluation"))
    parts.append("<h2>Settings</h2>")
    parts.append(html_table(tables["settings"], "settings"))
    parts.append("</body></html>")
    return "\n".join(parts)

