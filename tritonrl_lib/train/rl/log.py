"""The RL log, logs/rl_log.jsonl: one record per best-of-N round or GRPO step (the tasks drawn, the
verdicts' statistics, rollout and verification speed, the curriculum's state), appended as each
finishes, cut back to the resumed round or step on a resume, and read back as a table."""

from __future__ import annotations

from typing import Any, Sequence

from ...core.jsonio import append_jsonl, read_jsonl, write_jsonl
from ...core.paths import RunPaths
from ...verify.verdict import Verdict
from .candidate import Candidate


def verdict_stats(levels: Sequence[int], verdicts: Sequence[Any],
                  task_ids: Sequence[str] | None = None) -> dict[str, Any]:
    """Correct rate and mean reward overall and by level, and how far candidates got; with
    `task_ids`, each task's [correct, samples] too (`by_task`, what `seen_before` reads)."""
    n = len(verdicts)
    out: dict[str, Any] = {"samples": n, "correct": sum(bool(v.correct) for v in verdicts)}
    out["correct_rate"] = out["correct"] / n if n else None
    out["mean_reward"] = sum(float(v.reward) for v in verdicts) / n if n else None
    by_level: dict[str, dict[str, Any]] = {}
    for lvl in sorted(set(int(x) for x in levels)):
        vs = [v for x, v in zip(levels, verdicts) if int(x) == lvl]
        by_level[str(lvl)] = {"samples": len(vs), "correct": sum(bool(v.correct) for v in vs),
                              "correct_rate": sum(bool(v.correct) for v in vs) / len(vs),
                              "mean_reward": sum(float(v.reward) for v in vs) / len(vs)}
    out["by_level"] = by_level
    if task_ids is not None:
        by_task: dict[str, list[int]] = {}
        for tid, v in zip(task_ids, verdicts):
            row = by_task.setdefault(str(tid), [0, 0])
            row[0] += bool(v.correct)
            row[1] += 1
        out["by_task"] = by_task
    stages: dict[str, int] = {}
    for v in verdicts:
        stages[v.stage] = stages.get(v.stage, 0) + 1
    out["stages"] = stages
    # candidates that got past extraction and the static check, i.e. ran in a worker process
    out["ran_in_workers"] = sum(n for st, n in stages.items() if st not in ("none", "extract"))
    return out


def policy_stats(candidates: Sequence[Candidate]) -> dict[str, Any]:
    """`verdict_stats` of the policy's own first attempts among a round's or step's candidates
    (injected ones and refinements left out): how the policy that sampled them is measured."""
    own = [c for c in candidates if c.policy_first_attempt]
    return verdict_stats([c.level for c in own], [Verdict.from_dict(c.verdict) for c in own], [c.task_id for c in own])


def seen_before(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Per record, the tasks drawn again: their correct rate now and at their first draw.

    The curriculum draws tasks at the policy's frontier, so each step's correct rate stays near the
    middle whether or not the policy learns; the same tasks met again show the change. One entry
    per record: None when none of its tasks was drawn before (or `by_task` was not logged), else
    {"tasks": how many, "first": their mean rate when first drawn, "now": their mean rate now}
    (means over tasks, each task's rate over its samples). Tasks at the frontier when first drawn
    are near 0.5 then, so some of a change is regression to the mean: read it beside held-out
    evaluation, not instead."""
    first: dict[str, float] = {}
    out: list[dict[str, Any] | None] = []
    for r in rows:
        by_task = r.get("by_task") or {}
        rates = {t: c / n for t, (c, n) in by_task.items() if n}
        again = sorted(t for t in rates if t in first)
        out.append({"tasks": len(again), "first": sum(first[t] for t in again) / len(again),
                    "now": sum(rates[t] for t in again) / len(again)} if again else None)
        for t, rate in rates.items():
            first.setdefault(t, rate)
    return out


def rollout_info(stats, seconds: float) -> dict[str, Any]:
    """A record's `rollout` entry from the sampler's RolloutStats and the call's wall time."""
    return {"engine": stats.engine, "tokens": stats.generated_tokens, "seconds": round(seconds, 3),
            "tokens_per_s": round(stats.generated_tokens / seconds, 1) if seconds > 0 else None,
            "finish_reasons": stats.finish_reasons, "sequences": stats.sequences,
            "cuda_graphs": stats.cuda_graphs, "note": stats.note}


def verify_info(candidates: int, seconds: float) -> dict[str, Any]:
    """A record's `verify` entry: how many candidates the pool checked, and how fast."""
    return {"candidates": candidates, "seconds": round(seconds, 3),
            "per_minute": round(60 * candidates / seconds, 1) if seconds > 0 else None}


def step_timing(collect: dict[str, Any], train_s: float, step_s: float, reused: bool = False) -> dict[str, Any]:
    """A record's `timing` entry: where a round's or step's wall time went (seconds).

    generate_s      the policy writing first attempts (and redrawn groups)
    refine_generate_s  the policy writing refinements
    verify_s        the verifier pool busy with this step's candidates (partly hidden behind generation)
    verify_wait_s   generation finished, waiting for verdicts: verification not hidden
    train_s         the update (best-of-N: the fine-tune and saving the adapter; GRPO: TRL's loss,
                    backward and optimizer step)
    step_s          the whole round or step
    reused          the candidates and verdicts were read back from disk (a resumed round)
    """
    keys = ("generate_s", "refine_generate_s", "verify_s", "verify_wait_s", "collect_s")
    out = {k: round(float(collect.get(k, 0.0)), 3) for k in keys}
    out["train_s"] = round(train_s, 3)
    out["step_s"] = round(step_s, 3)
    if reused:
        out["reused"] = True
    return out


def append_rl_log(paths: RunPaths, record: dict[str, Any]) -> None:
    append_jsonl(paths.rl_log, record)


def trim_rl_log(paths: RunPaths, key: str, upto: int) -> list[dict[str, Any]]:
    """Keep the records whose `key` (round or step) < upto: work that finished; rewrite the file;
    return them."""
    path = paths.rl_log
    kept = [r for r in read_jsonl(path) if int(r.get(key, -1)) < upto]
    if path.is_file():
        write_jsonl(path, kept)
    return kept


def read_rl_log(paths: RunPaths) -> list[dict[str, Any]]:
    return read_jsonl(paths.rl_log)


def rl_table(paths: RunPaths) -> str:
    """The rl_log as a plain-text table, one row per round (best-of-N) or step (GRPO)."""
    log = read_rl_log(paths)
    if not log:
        return "(no RL rounds or steps logged yet)"
    key = "round" if "round" in log[0] else "step"

    def pct(x):
        return "-" if x is None else f"{100 * x:.0f}%"

    def num(x, fmt="{:.3f}"):
        return "-" if x is None else fmt.format(x)

    head = f"{key:>5} {'tasks':>5} {'samples':>7} {'correct':>7} {'L1':>5} {'L2':>5} {'reward':>6} " \
           f"{'kept':>4} {'signal':>6} {'gen s':>6} {'ver s':>6} {'wait s':>6} {'train s':>7} " \
           f"{'verif/min':>9} {'tok/s':>8} {'P(L2)':>5}"
    rows = [head]
    for r in log:
        lv = r.get("by_level") or {}
        sig = r.get("signal") or {}
        t = r.get("timing") or {}
        signal = f"{sig['with_signal']}/{sig['groups']}" if sig else "-"
        rows.append(f"{r.get(key):>5} {len(r.get('tasks', [])):>5} {r.get('samples', 0):>7} "
                    f"{pct(r.get('correct_rate')):>7} {pct(lv.get('1', {}).get('correct_rate')):>5} "
                    f"{pct(lv.get('2', {}).get('correct_rate')):>5} {num(r.get('mean_reward')):>6} "
                    f"{str(r.get('kept', '-')):>4} {signal:>6} {num(t.get('generate_s'), '{:.1f}'):>6} "
                    f"{num(t.get('verify_s'), '{:.1f}'):>6} {num(t.get('verify_wait_s'), '{:.1f}'):>6} "
                    f"{num(t.get('train_s'), '{:.1f}'):>7} {num(r.get('verifications_per_min'), '{:.0f}'):>9} "
                    f"{num(r.get('rollout_tokens_per_s'), '{:.0f}'):>8} {num(r.get('curriculum_p'), '{:.2f}'):>5}")
    return "\n".join(rows)
