"""Issue 17's result in one resumable command: the `gpu` profile's data, SFT, best-of-N and GRPO from
the same SFT adapter, and the evaluation of SFT and both RL adapters on both held-out sets.

    python benchmarks/gpu_rl_session.py RESULTS [--export $OUT] [-p key=value ...]    # GPU, gpu profile
    python benchmarks/gpu_rl_session.py /tmp/s --profile smoke                          # CPU: every path

Run it again and again (each device call: `timeout -s INT 540 python benchmarks/gpu_rl_session.py
RESULTS --export $OUT`): every stage resumes where the last call stopped, or is skipped when it is
done with the same settings (the library's own resume rules: the data stage's split.json, SFT's
trainer checkpoints and marker, RL's rounds and GRPO's trainer checkpoints, evaluation records
with their fingerprints, an evaluation cut off mid-way per sample). An interrupt (SIGINT from
`timeout -s INT`, Ctrl-C) stops the stage at once and still writes the summary and the export.

Stages, in order (`--only a,b` runs some of them, and `select` only when named; the summary is always
written):

    data      01_data: tasks, the split (held-out set (a): one variant task of every train family;
              (b): held-out families), the verified SFT corpus; with rl.train_task_max_mb set,
              RL's training sizes (measured once, on the cores, for both methods)  -> RESULTS/runs/base
    select    SFT variants (`--variants`) trained side by side, each evaluated on the development set
              (tasks/devset/, k=2); the best by correct rate (then valid rate) becomes the run's
              SFT settings                                                -> RESULTS/runs/sft_v<i>
    sft       02_sft on it (held-out slice's loss logged)                 -> RESULTS/runs/base
    best_of_n 03_rl with best-of-N from the SFT adapter                   -> RESULTS/runs/rl_best_of_n
    grpo      03_rl with GRPO from the same adapter, on the same training tasks, samples per task
              and seed (its curriculum then follows its own rewards)     -> RESULTS/runs/rl_grpo
    eval      04_eval: sft, rl_best_of_n, rl_grpo (and base with --with-base) on both held-out sets,
              k samples per task, one verifier pool; RL minus SFT with its interval
                                                                          -> RESULTS/eval/
    summary   RESULTS/summary.md and summary.json: stage times (every call's, from
              RESULTS/session_log.jsonl), SFT's losses, each RL step's time split, groups with
              signal and correct rate with its trend, the evaluation with intervals (`--only summary`
              writes it alone). A stage whose evaluation was cut is read from the
              eval_<stage>.partial.json that eval_from_verdicts.py scored: its rates are lower bounds,
              said so, and RL minus SFT is then taken on the problems judged in both
              (compare_cut_evals.py)

`--export DIR` copies what is small (summary, eval records, logs, split, charts; never weights) to
DIR, e.g. the device call's $OUT; `--export-sft` adds the finished SFT adapter as DIR/sft_adapter.tgz,
which a later session unpacks into RESULTS/runs/base/checkpoints/ to start at RL. The verdict and model caches go to RESULTS/cache unless
$TRITONRL_CACHE says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tritonrl_lib.core.jsonio import append_jsonl, read_json, read_jsonl, write_jsonl  # noqa: E402
from tritonrl_lib.core.processes import signals_held  # noqa: E402

STAGES = ("data", "select", "sft", "best_of_n", "grpo", "eval")
DEFAULT_STAGES = ("data", "sft", "best_of_n", "grpo", "eval")  # `select` runs when asked (--only)
# SFT settings tried side by side on the GPU and chosen by their correct rate on the development set
# (tasks/devset/: written independently of the generator, never KernelBench); `--variants` overrides
DEFAULT_VARIANTS = "lora_r=64,lora_alpha=128,epochs=6;lora_r=16,lora_alpha=32,epochs=3"
EVAL_STAGES = ("sft", "rl_best_of_n", "rl_grpo")


class Session:
    def __init__(self, args):
        self.args = args
        self.root = Path(args.results).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.chosen_path = self.root / "chosen_sft.json"
        self.load_settings()
        self.log_path = self.root / "session_log.jsonl"
        logged = read_jsonl(self.log_path)
        if self.log_path.is_file():
            write_jsonl(self.log_path, logged)  # drops a torn last line (a killed call) before this call appends
        previous = [r for r in logged if "call" in r]
        self.call = max((r["call"] for r in previous), default=0) + 1
        self.t0 = time.perf_counter()

    def load_settings(self) -> None:
        """The session's settings: the command line's, then the SFT settings the development set chose."""
        from tritonrl_lib.core.config import load_config, parse_cli_overrides

        chosen = read_json(self.chosen_path, None) or {}
        self.overrides = {**parse_cli_overrides(self.args.param), **chosen.get("overrides", {})}
        self.base_cfg = load_config(self.args.profile, overrides={**self.overrides, "outputs_dir": str(self.root / "runs"),
                                                                  "run": "base"})
        self.base = self.base_cfg.paths

    def say(self, msg: str) -> None:
        print(f"[call {self.call} +{time.perf_counter() - self.t0:6.1f}s] {msg}", flush=True)

    def record(self, stage: str, status: str, wall: float, **extra) -> None:
        rec = {"call": self.call, "stage": stage, "status": status, "wall_s": round(wall, 1),
               "at": time.strftime("%Y-%m-%dT%H:%M:%S"), **extra}
        append_jsonl(self.log_path, rec)

    def method_cfg(self, method: str):
        from tritonrl_lib.core.config import load_config

        return load_config(self.args.profile, overrides={**self.overrides, "outputs_dir": str(self.root / "runs"),
                                                         "run": f"rl_{method}", "method": method})

    # ---------------------------------------------------------------- stages

    def data(self):
        from tritonrl_lib.data.stage import build_data

        res = build_data(self.base_cfg, self.base.ensure(), progress=False)
        for m in res.messages:
            self.say(m)
        out = {"examples": len(res.examples), "skipped": res.skipped_generation}
        if self.base_cfg.rl.train_task_max_mb:  # RL's training sizes measured here, on the cores, once for both methods
            from tritonrl_lib.train.rl.reward_tasks import training_sizes_note
            from tritonrl_lib.train.rl.start import measure_training_sizes

            tasks = measure_training_sizes(self.base_cfg, self.base)
            self.say(f"data: {training_sizes_note(tasks, self.base_cfg.rl.train_task_max_mb)} "
                     f"({self.base.rl_train_sizes})")
            out["rl_tasks"] = len(tasks)
        return out

    def variants(self) -> list[dict]:
        from tritonrl_lib.core.config import parse_cli_overrides

        return [parse_cli_overrides([kv for kv in v.split(",") if kv]) for v in self.args.variants.split(";") if v]

    def select(self):
        """Train each SFT variant on the run's corpus (side by side: a 135M model leaves the GPU room),
        evaluate each on the development set, keep the best's settings and adapter."""
        from tritonrl_lib.core.config import load_config
        from tritonrl_lib.eval.run import LazyPool, evaluate_model
        from tritonrl_lib.model import load as models
        from tritonrl_lib.tasks import load_tasks

        variants = self.variants()
        cfgs = [load_config(self.args.profile, overrides={**self.overrides, **v, "outputs_dir": str(self.root / "runs"),
                                                           "run": f"sft_v{i}"}) for i, v in enumerate(variants)]
        procs = []
        try:
            for i, cfg in enumerate(cfgs):
                paths = cfg.paths.ensure()
                for name in ("sft_train", "split"):
                    shutil.copy2(getattr(self.base, name), getattr(paths, name))
                if models.checkpoint_complete(paths.sft_checkpoint):
                    continue
                argv = [sys.executable, "-m", "tritonrl_lib.train.sft.train", "--params", self.args.profile,
                        "--run", f"sft_v{i}"] + [x for k, v in {**self.overrides, **variants[i],
                                                                 "outputs_dir": str(self.root / "runs")}.items()
                                                for x in ("-p", f"{k}={v}")]
                with open(self.root / f"sft_v{i}.log", "a") as log:  # the trainer keeps its own copy
                    procs.append((i, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))))
                self.say(f"select: training variant {i} {variants[i]} (log {self.root / f'sft_v{i}.log'})")
            for i, p in procs:
                if p.wait() != 0:
                    raise RuntimeError(f"SFT variant {i} failed: see {self.root / f'sft_v{i}.log'}")
        finally:  # one variant failed, or Ctrl-C: the others leave the GPU too (each resumes next call)
            _stop_all([p for _, p in procs])
        dev = load_tasks("devset", size=self.base_cfg.data.task_size)
        pool = LazyPool(self.base_cfg)
        scores = []
        try:
            for i, cfg in enumerate(cfgs):
                ev = evaluate_model(self.base_cfg, str(cfg.paths.sft_checkpoint), dev, model_stage=f"sft_v{i}",
                                    adapter=cfg.paths.sft_checkpoint, out=self.root / "eval" / f"dev_sft_v{i}.json",
                                    pool=pool, k=self.args.dev_k, task_source="devset", progress=True, log=self.say)
                m = ev.record["metrics"]
                scores.append((m["correct_rate"] or 0.0, m["valid_rate"] or 0.0, -i))
                self.say(f"select: variant {i} {variants[i]}: dev correct {m['correct_rate']}%, valid {m['valid_rate']}%")
        finally:
            pool.close()
        best = -max(scores)[2]
        chosen = {"variant": best, "overrides": variants[best], "scores": [list(s[:2]) for s in scores],
                  "variants": variants}
        self.chosen_path.write_text(json.dumps(chosen, indent=1))
        # the run's SFT is the chosen variant's adapter: same corpus, seed and settings, so 02_sft finds it done
        shutil.rmtree(self.base.sft_checkpoint, ignore_errors=True)
        shutil.copytree(cfgs[best].paths.sft_checkpoint, self.base.sft_checkpoint,
                        ignore=shutil.ignore_patterns("checkpoint-*"))
        for name in ("sft_log",):
            if getattr(cfgs[best].paths, name).is_file():
                self.base.logs_dir.mkdir(parents=True, exist_ok=True)
                shutil.copy2(getattr(cfgs[best].paths, name), getattr(self.base, name))
        self.load_settings()  # the chosen settings from here on
        return chosen

    def sft(self):
        from tritonrl_lib.train.sft.train import train_sft

        res = train_sft(self.base_cfg, self.base, echo=self.say)
        return {"status": res.status, "steps": res.global_step, "final_loss": res.final_loss}

    def rl(self, method: str):
        from tritonrl_lib.model import load as models
        from tritonrl_lib.train.rl.entry import train_rl
        from tritonrl_lib.train.rl.run_frame import adapter_identity

        if not models.checkpoint_complete(self.base.sft_checkpoint):
            raise RuntimeError("no SFT adapter yet: run the sft stage first")
        cfg = self.method_cfg(method)
        paths = cfg.paths.ensure()
        shutil.copy2(self.base.split, paths.split)  # the same split: the same training tasks
        if self.base.kernelbench_split.is_file():  # and the same KernelBench train part
            shutil.copy2(self.base.kernelbench_split, paths.kernelbench_split)
        if self.base.rl_train_sizes.is_file() and not paths.rl_train_sizes.is_file():
            shutil.copy2(self.base.rl_train_sizes, paths.rl_train_sizes)  # measured once (here or ahead), shared
        if method == "best_of_n" and cfg.rl.replay_ratio > 0:  # replay reads the SFT corpus
            shutil.copy2(self.base.sft_train, paths.sft_train)
        if not models.checkpoint_complete(paths.sft_checkpoint) or \
                adapter_identity(paths.sft_checkpoint) != adapter_identity(self.base.sft_checkpoint):
            shutil.rmtree(paths.sft_checkpoint, ignore_errors=True)
            shutil.copytree(self.base.sft_checkpoint, paths.sft_checkpoint,
                            ignore=shutil.ignore_patterns("checkpoint-*"))
        res = train_rl(cfg, paths, echo=self.say)
        try:
            from tritonrl_lib.report import charts
            from tritonrl_lib.train.rl.log import read_rl_log

            chart = charts.rl_chart(read_rl_log(paths))
            if isinstance(chart, charts.Figure):
                charts.save(chart, paths.chart("rl_curves"))
        except Exception as e:  # a chart is not worth failing the session over
            self.say(f"rl curves chart not drawn: {e}")
        return {"status": res.status, "rounds_or_steps": res.rounds_done}

    def eval(self):
        from tritonrl_lib.model import load as models_io
        from tritonrl_lib.eval.run import LazyPool, ModelToEval, evaluate_models, time_solved_tasks
        from tritonrl_lib.eval.record import attach_comparison
        from tritonrl_lib.eval.heldout import load_eval_tasks

        tasks = load_eval_tasks(self.base_cfg, self.base)
        self.say(f"evaluating on {len(tasks)} tasks: " + ", ".join(
            f"{name} {sum(t.meta.get('heldout_set') == name for t in tasks)}"
            for name in ("tasks", "families", "kernelbench")))
        stages = [("sft", self.base.sft_checkpoint)] + [
            (f"rl_{m}", self.method_cfg(m).paths.rl_checkpoint) for m in ("best_of_n", "grpo")]
        if self.args.with_base:
            stages.insert(0, ("base", None))
        if self.args.eval_stages:  # one process per GPU group, each with models of its own
            wanted = {x.strip() for x in self.args.eval_stages.split(",") if x.strip()}
            unknown = wanted - {st for st, _ in stages}
            if unknown:
                raise ValueError(f"--eval-stages: unknown {', '.join(sorted(unknown))}; choose among "
                                 + ", ".join(st for st, _ in stages))
            stages = [(st, folder) for st, folder in stages if st in wanted]
        out_dir = self.root / "eval"
        models = []
        for stage, folder in stages:
            if folder is not None and not models_io.checkpoint_complete(folder):
                self.say(f"eval {stage}: no finished adapter at {folder}; skipped")
                continue
            spec = self.base_cfg.model.model if folder is None else str(folder)
            models.append(ModelToEval(stage, spec, folder, out_dir / f"eval_{stage}.json"))
        # every model generates first, then all are verified in one pass: the largest problems' tail once
        pool = LazyPool(self.base_cfg)  # each model keeps its verdicts as they come: resumable per sample
        try:
            evals = evaluate_models(self.base_cfg, models, tasks, pool=pool, task_source="heldout", progress=True,
                                    log=self.say)  # bars in the call's log: a slow stage shows where
        finally:
            pool.close()
        if self.base_cfg.eval.baselines_measure == "solved":  # the solved problems' torch.compile times, attached
            time_solved_tasks(self.base_cfg, tasks, evals, True, self.say)
        records = {e.model_stage: e.record for e in evals if e.record is not None}
        attach_comparison({st: (rec, out_dir / f"eval_{st}.json") for st, rec in records.items()},
                          out_dir / "comparison.json", self.base_cfg.eval.bootstrap_resamples)
        return {"stages": list(records)}

    # ---------------------------------------------------------------- running

    def run(self, stage: str) -> bool:
        t = time.perf_counter()
        try:  # the stage's first line inside: an interrupt from then on is recorded against it
            self.say(f"stage {stage}")
            info = self.data() if stage == "data" else self.select() if stage == "select" else \
                self.sft() if stage == "sft" else self.eval() if stage == "eval" else self.rl(stage)
        except KeyboardInterrupt:
            self.record(stage, "interrupted", time.perf_counter() - t)
            raise
        except Exception as e:
            self.record(stage, "failed", time.perf_counter() - t, error=f"{type(e).__name__}: {e}")
            self.say(f"stage {stage} failed: {type(e).__name__}: {e}")
            raise
        self.record(stage, "done", time.perf_counter() - t, result=info)
        self.say(f"stage {stage} done in {time.perf_counter() - t:.1f}s: {info}")
        return True


# --------------------------------------------------------------------------- summary


def _stop_all(procs: list[subprocess.Popen], grace_s: float = 30.0) -> None:
    """SIGTERM to each process still running, up to `grace_s` for them all to end, then SIGKILL; a
    second Ctrl-C waits until they are gone."""
    with signals_held():
        running = [p for p in procs if p.poll() is None]
        for p in running:
            p.terminate()
        deadline = time.monotonic() + grace_s
        for p in running:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _raise_interrupt(*_) -> None:
    raise KeyboardInterrupt


def interrupt_on_sigterm() -> None:
    """SIGTERM (`timeout`, a scheduler) stops the process as Ctrl-C does: the stage records that it was
    interrupted, the verifier pool closes its workers, and every verdict reached stays kept."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def trend(values: list[float | None]) -> float | None:
    """Least-squares slope per step of a series (None values left out; None when under 2 points)."""
    from tritonrl_lib.report.charts import linear_trend

    fit = linear_trend(list(range(len(values))), values)
    return None if fit is None else fit[0]


def _pct(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def md_table(rows: list[dict], title: str) -> str:
    """A Markdown table of dict rows (the first row's keys are the columns), under a bold title."""
    if not rows:
        return f"**{title}**: none"
    cols = list(rows[0])
    lines = [f"**{title}**", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join("-" if r.get(c) is None else str(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def _interval(iv) -> str:
    return "" if not iv else f" [{iv[0]:.1f}, {iv[1]:.1f}]"


def summarize(s: Session) -> dict:
    from compare_cut_evals import eval_record, judged_vs_sft
    from rl_step import markdown, table

    from tritonrl_lib.eval.resume import judged
    from tritonrl_lib.model import load as models
    from tritonrl_lib.report import kernelbench as KB
    from tritonrl_lib.train.rl.log import read_rl_log, seen_before

    md = [f"# RL session: {s.args.profile} profile", ""]
    out: dict = {"profile": s.args.profile, "overrides": s.overrides, "calls": s.call}
    log = read_jsonl(s.log_path)
    done = [r for r in log if r.get("status") == "done"]
    spent: dict[str, float] = {}
    for r in log:
        spent[r["stage"]] = spent.get(r["stage"], 0.0) + r["wall_s"]
    out["stage_seconds"] = spent
    md += ["## Time per stage (all calls)", "", "| stage | seconds | finished in call |", "|---|---:|---:|"]
    for st in STAGES:
        fin = next((r["call"] for r in done if r["stage"] == st), None)
        md.append(f"| {st} | {spent.get(st, 0.0):.1f} | {fin if fin is not None else '-'} |")
    md.append(f"| **total** | **{sum(spent.values()):.1f}** | |")
    split = read_json(s.base.split, None) or {}
    counts = split.get("counts", {})
    gen = counts.get("generated", {})
    out["data"] = {"examples": counts.get("sft_examples"), "candidates": gen.get("candidates"),
                   "failed": gen.get("failed"), "families": gen.get("families"), "wall_s": gen.get("wall_s"),
                   "heldout_in_family": len(split.get("heldout_in_family_ids", [])),
                   "heldout_families": len(split.get("heldout_task_ids", []))}
    md += ["", "## Data", "", f"{out['data']}"]
    marker = read_json(s.base.sft_checkpoint / models.MARKER, None) or {}
    sft_log = read_jsonl(s.base.sft_log)
    evals = [r for r in sft_log if r.get("eval_loss") is not None]
    train = [r for r in sft_log if r.get("loss") is not None]
    out["sft"] = {k: marker.get(k) for k in ("global_step", "planned_steps", "final_loss", "eval_loss", "train_loss",
                                             "tokens_per_s", "stopped_by_time_budget", "plan")}
    out["sft"]["eval_loss_curve"] = [(r["step"], round(r["eval_loss"], 4)) for r in evals]
    out["sft"]["train_loss_first_last"] = [train[0]["loss"], train[-1]["loss"]] if train else None
    md += ["", "## SFT", "", f"steps {marker.get('global_step')} of {marker.get('planned_steps')} planned, "
           f"training loss {out['sft']['train_loss_first_last']}, held-out slice's loss "
           f"{out['sft']['eval_loss_curve']}, stopped by the time budget: {marker.get('stopped_by_time_budget')}"]
    out["rl"] = {}
    for m in ("best_of_n", "grpo"):
        rl_log = read_rl_log(s.method_cfg(m).paths)
        rows = table(rl_log)
        rates = [r.get("correct_rate") for r in rl_log]
        again = seen_before(rl_log)  # the frontier holds each step's rate mid-way; the same tasks again do not
        out["rl"][m] = {"rows": rows, "correct_rate_trend_per_step": trend(rates), "tasks_drawn_again": again}
        md += ["", markdown(rows, f"RL {m}: per step (seconds, candidates, groups with signal)"),
               f"correct rate on training tasks per step: {[None if x is None else round(x, 3) for x in rates]}, "
               f"trend {trend(rates) if trend(rates) is None else f'{trend(rates):+.4f}'} per step",
               "tasks drawn again, per step (how many: rate at first draw -> now): " + ", ".join(
                   "-" if a is None else f"{a['tasks']}: {a['first']:.2f} -> {a['now']:.2f}" for a in again)]
    out["eval"] = {}
    md += ["", "## Evaluation (correct % with 95% task-bootstrap interval)", "",
           "| stage | set | tasks | k | correct % | compiled % | valid % |", "|---|---|---:|---:|---|---|---|"]
    records, cut = {}, {}
    for stage in ("base", *EVAL_STAGES):
        rec, partial = eval_record(s.root, stage)
        if not rec:
            continue
        records[stage] = rec
        m = rec["metrics"]
        groups = [("all", m)] + sorted((m.get("by_set") or {}).items())
        out["eval"][stage] = {"metrics": m, "vs_sft": rec.get("vs_sft")}
        unjudged = sum(not judged(r) for r in rec["detailed_results"]) if partial else 0
        if unjudged:  # a cut pass that judged everything after all is a whole evaluation
            cut[stage] = out["eval"][stage]["unverified"] = unjudged
        label = f"{stage} (cut: {cut[stage]} unverified)" if stage in cut else stage
        for name, mm in groups:
            iv = mm.get("intervals") or {}
            md.append(f"| {label} | {name} | {mm.get('num_tasks')} | {rec.get('k')} | "
                      f"{_pct(mm.get('correct_rate'))}{_interval(iv.get('correct_rate'))} | "
                      f"{_pct(mm.get('compiled_rate'))}{_interval(iv.get('compiled_rate'))} | "
                      f"{_pct(mm.get('valid_rate'))}{_interval(iv.get('valid_rate'))} |")
    chosen = read_json(s.chosen_path, None)
    if chosen:  # the SFT variants on the development set
        rows = []
        for i, v in enumerate(chosen["variants"]):
            rec = read_json(s.root / "eval" / f"dev_sft_v{i}.json", None) or {}
            m = rec.get("metrics") or {}
            iv = (m.get("intervals") or {}).get("correct_rate")
            rows.append({"SFT variant": ", ".join(f"{k}={val}" for k, val in v.items())
                         + (" (chosen)" if i == chosen["variant"] else ""),
                         "dev correct % [95% CI]": f"{m.get('correct_rate')}" + (f" [{iv[0]}, {iv[1]}]" if iv else ""),
                         **{f"L{lvl} correct %": mm.get("correct_rate") for lvl, mm in (m.get("by_level") or {}).items()},
                         "valid %": m.get("valid_rate"), "compiled %": m.get("compiled_rate")})
        out["dev_set"] = rows
        md += ["", md_table(rows, "SFT variants on the development set")]
    if cut:  # lower bounds, labelled; RL against SFT only where both were judged
        compared = [st for st in EVAL_STAGES[1:] if st in records and "sft" in records and cut.keys() & {st, "sft"}]
        for st in compared:  # replaces a whole record's vs_sft, which counted the other's unjudged samples wrong
            out["eval"][st]["vs_sft"] = None
            out["eval"][st]["vs_sft_judged"] = judged_vs_sft(records[st], records["sft"],
                                                             s.base_cfg.eval.bootstrap_resamples)
        n = sum(len(records[st]["detailed_results"]) for st in cut)
        out["partial"] = (f"the evaluation's verification was cut (device time): {sum(cut.values())} of {n} samples "
                          f"of {', '.join(cut)} never judged, counted wrong, so their correct rates are lower bounds"
                          + ("; RL minus SFT is taken on the problems whose every sample was judged in both"
                             if compared else ""))
        md += ["", f"**Cut.** {out['partial']}."]
    labelled = {(f"{st} (lower bound: {cut[st]} unverified)" if st in cut else st): rec for st, rec in records.items()}
    kb_split = KB.load_split(s.base)
    kb_rows = KB.headline_table(labelled, s.base_cfg.eval.bootstrap_resamples)
    if kb_rows:
        out["kernelbench"] = {"headline": kb_rows, "categories": KB.category_table(labelled, kb_split),
                              "split": KB.split_table(kb_split)}
        md += ["", md_table(kb_rows, "Held-out KernelBench problems (published sizes; percent, 95% interval "
                            "over problems)"),
               "", md_table(out["kernelbench"]["categories"], "Held-out KernelBench problems per category"),
               "", md_table(out["kernelbench"]["split"], "The KernelBench split (problems per stratum)")]
    diffs = [(st, v["vs_sft"]) for st, v in out["eval"].items() if v.get("vs_sft")]
    if diffs:
        md += ["", "## RL minus SFT (percentage points, paired 95% interval over tasks)", "",
               "| stage | set | correct | interval | above zero |", "|---|---|---:|---|---|"]
        for st, d in diffs:
            for name, per in [("all", d["all"])] + sorted((d.get("by_set") or {}).items()):
                c = per.get("correct_rate") or {}
                md.append(f"| {st} | {name} | {c.get('difference')} | {c.get('interval')} | {c.get('above_zero')} |")
    judged_rows = [(st, v["vs_sft_judged"]) for st, v in out["eval"].items() if v.get("vs_sft_judged")]
    if judged_rows:
        md += ["", "## RL minus SFT on held-out KernelBench where both were judged (points, 95% interval over "
               "problems)", "", "| stage | level | problems | judged in both | RL % | SFT % | RL - SFT | interval |",
               "|---|---|---:|---:|---:|---:|---:|---|"]
        for st, rows in judged_rows:
            md += [f"| {st} | L{r['level']} | {r['problems']} | {r['judged in both']} | {r['RL correct %']} | "
                   f"{r['SFT correct %']} | {r['difference']} | {r['interval']} |" for r in rows]
    (s.root / "summary.md").write_text("\n".join(md) + "\n")
    (s.root / "summary.json").write_text(json.dumps(out, indent=1, default=str))
    return out


def export(s: Session, dest: Path) -> None:
    """The small files of the session (no weights, no trainer checkpoints, no caches) to `dest`."""
    from tritonrl_lib.eval.resume import is_resume_folder

    dest.mkdir(parents=True, exist_ok=True)
    keep = (".json", ".jsonl", ".md", ".png", ".yaml")
    for p in s.root.rglob("*"):
        rel = p.relative_to(s.root)
        if not p.is_file() or p.suffix not in keep or rel.parts[0] == "cache" \
                or any(part.startswith("checkpoint-") or part in ("adapter", "best", "trainer") for part in rel.parts) \
                or any(is_resume_folder(part) for part in rel.parts) \
                or p.name in ("adapter_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            continue
        if p.stat().st_size > 15 << 20:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)


def export_sft_adapter(s: Session, dest: Path) -> str:
    """The finished SFT adapter as dest/sft_adapter.tgz (~10 MB for the embedded model), so a later
    session can bring it along and start at RL: unpacked into RESULTS/runs/base/checkpoints/ beside
    the same data, the sft stage finds it finished (its marker's fingerprint: model, settings, seed,
    data). Trainer checkpoints stay behind."""
    import tarfile

    from tritonrl_lib.model import load as models

    folder = s.base.sft_checkpoint
    if not models.checkpoint_complete(folder):
        return f"no finished SFT adapter at {folder} to export"
    target = dest / "sft_adapter.tgz"
    with tarfile.open(target, "w:gz") as tar:
        tar.add(folder, arcname=folder.name, filter=lambda ti: None if "/checkpoint-" in f"/{ti.name}" else ti)
    return (f"exported the SFT adapter to {target} ({target.stat().st_size / 1e6:.1f} MB): unpack it into "
            f"RESULTS/runs/base/checkpoints/ of a later session to start at RL")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="the session's folder: runs, evaluation, summary (resumed when it exists)")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--only", default="", help=f"comma-separated stages among {', '.join(STAGES)}; `summary` alone "
                    "writes the summary and runs no stage")
    ap.add_argument("--with-base", action="store_true", help="evaluate the base model too")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help="SFT variants the select stage tries: ';'-separated, each comma-separated key=value")
    ap.add_argument("--eval-stages", default="", help="evaluate only these models (sft, rl_best_of_n, rl_grpo, "
                    "base with --with-base); default: every finished one")
    ap.add_argument("--dev-k", type=int, default=2, help="samples per development-set task in the select stage")
    ap.add_argument("--reference", metavar="MACHINE", default="",
                    help="write the summary's tables to docs/benchmarks/reference_gpu_run.json, measured on MACHINE "
                         "(what a demonstration's report shows beside its own; no weights)")
    ap.add_argument("--reference-command", default="",
                    help="with --reference: the commands that produced the run, where it was not this script's "
                         "stages alone (e.g. kernelbench_session.sh, then eval_from_verdicts.py for a cut pass)")
    ap.add_argument("--export-sft", action="store_true",
                    help="with --export: also the finished SFT adapter, as sft_adapter.tgz (a later session starts at RL)")
    ap.add_argument("--export", default=os.environ.get("OUT", ""), help="copy the small results here ($OUT)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                    help="override a setting of every stage, e.g. -p rounds=2 -p num_tasks=12")
    args = ap.parse_args(argv)
    wanted = [x for x in args.only.split(",") if x] or list(DEFAULT_STAGES)
    wanted = [x for x in wanted if x != "summary"]  # the summary is always written: `--only summary` writes it alone
    bad = [x for x in wanted if x not in STAGES]
    if bad:
        ap.error(f"--only: unknown stage(s) {', '.join(bad)}; choose among {', '.join(STAGES)}")
    os.environ.setdefault("TRITONRL_CACHE", str(Path(args.results).resolve() / "cache"))
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    s = Session(args)
    s.say(f"session call {s.call}: stages {', '.join(wanted)} in {s.root}")
    interrupt_on_sigterm()
    rc = 0
    try:
        for stage in wanted:
            s.run(stage)
    except KeyboardInterrupt:
        s.say("interrupted: the next call resumes here")
        rc = 130
    except Exception:
        rc = 1
        import traceback

        traceback.print_exc()
    finally:  # a second Ctrl-C or SIGTERM waits until the summary and the export are written
        with signals_held():
            try:
                out = summarize(s)
                s.say(f"summary: {s.root / 'summary.md'}")
                if args.reference:
                    from tritonrl_lib.report.reference_run import REFERENCE_FILE, reference_from_summary

                    ref = reference_from_summary(out, measured=time.strftime("%Y-%m-%d"), machine=args.reference,
                                                 command=args.reference_command or (
                                                     "python benchmarks/gpu_rl_session.py RESULTS " + " ".join(
                                                         f"-p {k}={v}" for k, v in s.overrides.items()
                                                         if k != "kernelbench") + " -p kernelbench=PATH"))
                    (ROOT / REFERENCE_FILE).write_text(json.dumps(ref, indent=1, default=str) + "\n")
                    s.say(f"reference tables: {ROOT / REFERENCE_FILE}")
            except Exception as e:  # the summary must not hide the stage's own outcome
                s.say(f"summary not written: {type(e).__name__}: {e}")
            if args.export:
                export(s, Path(args.export))
                s.say(f"exported the small files to {args.export}")
                if args.export_sft:
                    s.say(export_sft_adapter(s, Path(args.export)))
    return rc


if __name__ == "__main__":
    sys.exit(main())
