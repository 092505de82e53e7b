"""The report's words: what the run was, what a verdict means, and which samples to show.

    run_description(cfg, records)   who/what/how big, and for a demonstration-sized run, that it is one
    explain_reason("static:no_modelnew") -> "the reply defines no `class ModelNew`"
    pick_examples(records)          per model: its best sample and a typical one, with their verdicts

Pure functions of the run's config and eval records, so tests can read the sentences directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from ..core.config import RunConfig
from ..core.config import ConfigError, load_config
from ..core.jsonio import read_json
from ..model.load import MARKER
from ..train.rl.time_budget import stopped_after
from ..verify.verdict import STAGES as FUNNEL

# The verifier's funnel (Verdict.stage is the last step a sample passed), in words.
FUNNEL_WORDS = {
    "none": "no code block found in the reply",
    "extract": "code found, but it failed the static check",
    "static": "passed the static check, but did not import or compile",
    "compile": "compiled and launched, but failed on the first small input",
    "tiny": "right on a small input, wrong on a full-size one",
    "full": "correct on every input variation",
    "timing": "correct, and timed against PyTorch",
}

# A reason's first part (before ":"), and some whole reasons, in words.
REASON_WORDS = {
    "ok": "correct",
    "no_code": "the reply holds no Python code block",
    "loop": "the reply fell into a loop (a line or block repeating) and was stopped",
    "static:no_modelnew": "the reply defines no `class ModelNew`",
    "static:no_forward": "`ModelNew` has no `forward` method",
    "static:no_triton_kernel": "no `@triton.jit` kernel in the code",
    "static:kernel_unreachable": "a Triton kernel is defined but `forward` never launches it",
    "static:syntax_error": "the code is not valid Python",
    "static:pytorch_compute": "the computation is left to PyTorch instead of a Triton kernel",
    "static:host_compute": "the result is computed on the host, outside a kernel",
    "static:reference_model_used": "the code calls the reference model it should replace",
    "static:try_except_fallback": "a try/except falls back to PyTorch when the kernel fails",
    "static:forbidden_import": "the code imports a module the sandbox forbids",
    "static:file_access": "the code reads or writes files",
    "static:dynamic_code": "the code builds and runs code at run time (exec, eval, __import__)",
    "static:monkeypatch": "the code patches PyTorch or the reference at run time",
    "static:introspection": "the code inspects the caller's frames or globals",
    "static:threads": "the code starts threads or processes",
    "static": "the static check refused the code",
    "compile_error": "the code failed to import or compile",
    "runtime_error": "the kernel raised an error when run",
    "shape_mismatch": "the output has the wrong shape",
    "mismatch": "the output differs from PyTorch's",
    "timeout": "it ran past the time limit",
    "cheat": "it passed the checks without launching a Triton kernel in forward",
    "memory": "it used more memory than allowed",
    "worker_lost": "the checking process died while running it",
    "internal_error": "the verifier itself failed on it",
}

# How the profiles shipped with the project are sized (`params/<name>.yaml`).
PROFILE_WORDS = {
    "smoke": ("the `smoke` profile, made for the test suite: a tiny randomly initialised model that has "
              "never seen code, a few training examples and a handful of tasks, seconds per stage. "
              "Its replies are random text; the run checks the plumbing, not the method."),
    "cpu": ("the `cpu` profile, the default on a machine without a GPU: every stage cut to a few minutes "
            "on a CPU (Triton kernels run in Triton's interpreter, nothing is timed). It shows each stage "
            "working end to end; its rates say nothing about the method."),
}
def gpu_run_sentence() -> str:
    """What a run of the `gpu` profile does, read from the profile itself (so it cannot go stale)."""
    try:
        g = load_config("gpu")
    except (ConfigError, OSError):
        return "A run of the `gpu` profile (`make run` on a machine with a GPU) is measured in docs/RESULTS.md."
    head = ("A run of the `gpu` profile (`make run` on a machine with a GPU; its stages, measured one by one, "
            f"add up to about {g.expected_minutes:g} minutes on one H100, params/gpu.yaml says which)")
    rl = (f"{g.rl.rounds} rounds of best-of-N" if g.rl.method == "best_of_n" else f"{g.rl.grpo_steps} GRPO steps")
    return (f"{head} fine-tunes (LoRA r={g.model.lora_r}) on {g.data.n_sft_examples:,} verified examples for "
            f"{g.sft.epochs:g} epochs, runs {rl}, and evaluates {g.eval.eval_k} samples per task on "
            f"{planned_tasks(g)}, with every correct kernel timed. Its measured results are in docs/RESULTS.md.")


TASK_SOURCES = {"heldout": "the run's held-out sets (never trained on)", "builtin": "the built-in suite"}
# The held-out sets (eval/heldout.py) as their tasks are counted: (one, many).
SET_WORDS = {"tasks": ("unseen task of a family trained on", "unseen tasks of families trained on"),
             "families": ("task of an unseen family", "tasks of unseen families"),
             "kernelbench": ("held-out KernelBench problem", "held-out KernelBench problems")}


def _count(n: Any, words: tuple[str, str]) -> str:
    return f"{n} {words[0] if n == 1 else words[1]}"


def tasks_evaluated(rec: Mapping[str, Any]) -> str:
    """How many tasks an eval record covers, counted one way wherever the page says it: all of them,
    then per held-out set ("4 tasks in all (2 unseen tasks of families trained on, 2 tasks of unseen
    families)"). A profile's `eval.num_tasks` caps each set, so it is not the total."""
    n = rec.get("num_tasks", "?")
    sets = {name: ids for name, ids in (rec.get("heldout_sets") or {}).items() if ids}
    parts = [_count(len(ids), SET_WORDS.get(name, (f"task of set {name!r}", f"tasks of set {name!r}")))
             for name, ids in sets.items()]
    if len(parts) == 1:
        only = SET_WORDS.get(next(iter(sets)), ("", "its tasks"))[1]
        return f"{_count(n, ('task', 'tasks'))} in all (one held-out set: {only})"
    return _count(n, ("task", "tasks")) + " in all" + (f" ({', '.join(parts)})" if parts else "")


def planned_tasks(cfg: RunConfig) -> str:
    """The tasks a profile's evaluation runs, before it has: `eval.num_tasks` caps each held-out set."""
    n = cfg.eval.num_tasks
    cap = f"up to {n}" if n > 0 else "all"
    if cfg.eval.eval_tasks != "heldout":
        return f"{cap} tasks of {TASK_SOURCES.get(cfg.eval.eval_tasks, repr(cfg.eval.eval_tasks))}"
    own = [SET_WORDS.get(name, ("", f"tasks of set {name!r}"))[1] for name in cfg.eval.heldout_sets
           if name != "kernelbench"]
    if len(own) > 1:
        text = f"{cap} task{'s' if n != 1 else ''} from each of {len(own)} held-out sets ({'; '.join(own)})"
        text += f", up to {n * len(own)} in all" if n > 0 else ""
    else:
        text = f"{cap} {own[0]}" if own else ""
    if "kernelbench" in cfg.eval.heldout_sets:
        kb = cfg.eval.kernelbench_num_tasks
        text += (", plus " if text else "") + f"{f'up to {kb}' if kb > 0 else 'all'} held-out KernelBench problems"
    return text


# Fewer evaluated samples per model than this, and one sample moves a rate by more than 2.5 points.
DEMO_SAMPLES = 40


def explain_reason(reason: str) -> str:
    """A verdict reason in words (its head's words when the whole reason is not listed)."""
    if reason in REASON_WORDS:
        return REASON_WORDS[reason]
    head, _, detail = reason.partition(":")
    words = REASON_WORDS.get(head)
    if words is None:
        return f"the verifier's code {reason!r}"
    return f"{words} ({detail})" if detail else words


def verdict_sentence(row: Mapping[str, Any]) -> str:
    """One sample's verdict for a reader: what happened, how far it got, its reward."""
    if row.get("correct"):
        speed = row.get("speedup")
        timed = f", {speed:.2f}x the speed of PyTorch" if speed else " (not timed: no GPU)"
        return f"Correct{timed}. Reward {row.get('reward', 0):.2f}."
    reason = row.get("reason") or "unknown"
    stage = row.get("stage", "none")
    progress = "" if stage == "none" else f" How far it got: {FUNNEL_WORDS.get(stage, stage)}."
    return f"Failed: {explain_reason(reason)} [{reason}].{progress} Reward {row.get('reward', 0):.2f}."


def best_policy_sentence(best: Mapping[str, Any]) -> str:
    """What RL kept as its best policy (`checkpoints/rl/best.json`), in words."""
    value = best.get("value")
    value = f"{value:.3f}" if isinstance(value, (int, float)) else str(value)
    metric = str(best.get("metric", "score")).replace("_", " ")
    policy = str(best.get("policy", "?"))
    if policy == "sft":
        return (f"No RL round beat the fine-tuned (SFT) model it started from on its training samples ({metric} "
                f"{value}), so the best policy kept in `checkpoints/rl/best` is that SFT model.")
    return f"Best RL policy, kept in `checkpoints/rl/best`: {policy}, {metric} {value} on its training samples."


def samples_per_model(records: Mapping[str, Mapping[str, Any]]) -> int:
    return min((len(r.get("detailed_results", [])) for r in records.values()), default=0)


def is_demonstration(cfg: RunConfig, records: Mapping[str, Mapping[str, Any]]) -> bool:
    """A run too small for its rates to mean anything: a demonstration profile, or too few samples."""
    n = samples_per_model(records)
    return cfg.profile in PROFILE_WORDS or (bool(records) and n < DEMO_SAMPLES)


def rl_stopped_words(cfg: RunConfig) -> str:
    """", stopped by its time budget after N rounds" where the RL adapter's marker says the budget ended it early."""
    try:
        marker = read_json(cfg.paths.rl_checkpoint / MARKER, None)
    except Exception:  # a damaged marker: the report does not fail over it
        return ""
    done = stopped_after(marker)
    return f", stopped by its time budget (rl_time_budget_s) after {done}" if done else ""


def run_description(cfg: RunConfig, records: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], bool]:
    """(sentences saying what the run was, whether it is demonstration-sized)."""
    demo = is_demonstration(cfg, records)
    rl = (f"{cfg.rl.rounds} round(s) of best-of-N ({cfg.rl.tasks_per_round} tasks x {cfg.rl.n_samples} samples)"
          if cfg.rl.method == "best_of_n" else
          f"{cfg.rl.grpo_steps} GRPO step(s) ({cfg.rl.tasks_per_round} tasks x groups of {cfg.rl.n_samples})")
    rl += rl_stopped_words(cfg)
    # what was evaluated, counted as the headline counts it; before any evaluation, what the settings plan
    if records:
        rec = next(iter(records.values()))
        tasks = (f"{tasks_evaluated(rec)} of {TASK_SOURCES.get(rec.get('task_source'), repr(rec.get('task_source')))}"
                 f" x {rec.get('k', '?')} sample(s)")
    else:
        tasks = f"{planned_tasks(cfg)} x {cfg.eval.eval_k} sample(s)"
    what = (f"Model {cfg.model.model!r}; supervised fine-tuning (LoRA) on up to {cfg.sft.max_samples} examples "
            f"for {cfg.sft.epochs:g} epoch(s); reinforcement learning: {rl}; evaluation on {tasks} per model.")
    lines = []
    if demo:
        n = samples_per_model(records)
        per = f" With {n} evaluated samples per model, one sample moves a rate by {100 / n:.0f} points." if n else ""
        intro = PROFILE_WORDS.get(cfg.profile, f"the `{cfg.profile}` settings, sized as a demonstration.")
        lines.append(f"A demonstration, not a measurement. This run used {intro}{per}")
        lines.append(what)
        lines.append(gpu_run_sentence())
    else:
        lines.append(what)
    return lines, demo


@dataclass
class Example:
    model_stage: str
    kind: str  # "best" | "typical"
    row: Mapping[str, Any]

    @property
    def title(self) -> str:
        task = self.row.get("name") or self.row.get("id", "?")
        return f"{self.model_stage}, {self.kind} sample: task {task} (Level {self.row.get('level', '?')})"


def _rank(row: Mapping[str, Any]) -> tuple:
    stage = row.get("stage", "none")
    return (bool(row.get("correct")), float(row.get("reward") or 0.0),
            FUNNEL.index(stage) if stage in FUNNEL else 0, row.get("speedup") or 0.0)


def pick_examples(records: Mapping[str, Mapping[str, Any]]) -> list[Example]:
    """Per model stage: the best sample (correct first, then reward, then how far it got) and a
    typical one (among the other failed samples, one that failed for their most common reason)."""
    out: list[Example] = []
    for model_stage, rec in records.items():
        rows = [r for r in rec.get("detailed_results", []) if r.get("completion") is not None]
        if not rows:
            continue
        best = max(rows, key=_rank)
        out.append(Example(model_stage, "best", best))
        failed = [r for r in rows if not r.get("correct") and r is not best]
        if not failed:
            continue
        counts: dict[str, int] = {}
        for r in failed:
            counts[r.get("reason") or "unknown"] = counts.get(r.get("reason") or "unknown", 0) + 1
        common = max(counts, key=lambda k: counts[k])
        typical = [r for r in failed if (r.get("reason") or "unknown") == common]
        out.append(Example(model_stage, "typical", typical[len(typical) // 2]))
    return out
