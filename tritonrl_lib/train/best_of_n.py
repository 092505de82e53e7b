"""Best-of-N RL (the source's method): sample, verify, keep the best correct, fine-tune, repeat.

Read top to bottom, `train_best_of_n` does, for each of `rounds` rounds:

1. the curriculum draws `tasks_per_round` training tasks (Level 1 / Level 2 mix, curriculum.py);
2. the policy writes `n_samples` completions per task (rollout.py: batched, stops at the end of
   the code block); an optional `extra_candidates(task, round)` hook adds candidates of its own
   (tests add the task's reference solution; they are marked `injected` and never count in the
   policy's statistics or the curriculum);
3. the verifier pool checks every candidate in its worker processes (candidate code never runs in
   this process); the candidates and their verdicts are written to rounds/round-NNN/samples.jsonl
   and round.json, so a resumed run never verifies a round twice;
4. per task, the top `top_k` candidates by reward, correct ones only (ties by speedup, then the
   shorter completion), become prompt/completion pairs;
5. the policy's LoRA adapter is fine-tuned on them with the SFT stage's trainer (train/sft.py's
   `build_trainer`, at rl_learning_rate for rl_epochs), and the adapter is saved to the round's
   folder and to checkpoints/rl (what eval loads);
6. one line per round goes to logs/rl_log.jsonl: tasks, samples, correct rate by level, mean
   reward, kept, verifications per minute, rollout tokens/s, the curriculum's P(Level 2).

The best policy (highest mean reward on its round's samples; the SFT start counts as round 0's
policy) is saved to checkpoints/rl/best with checkpoints/rl/best.json. A policy is measured by the
round that samples from it, so the last round's adapter is measured only with `score_final=True`
(one more sampling-and-verification pass, no training).
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import models
from ..config import RunConfig, RunPaths
from ..curriculum import Curriculum, CurriculumSettings
from ..prompts import build_messages, format_completion
from ..rollout import Rollout, SamplingConfig, task_prompts
from ..tasks.task import Task
from ..verify.verdict import Verdict
from . import rl_common as rc

METHOD = "best_of_n"
ExtraCandidates = Callable[[Task, int], Sequence[str]]


def reference_candidates(task: Task, round_index: int) -> list[str]:
    """An `extra_candidates` hook: the task's reference solution as one more candidate (a
    known-correct completion, for tests and for seeding a cold-start policy)."""
    return [format_completion(task.reference_solution)] if task.reference_solution else []


# --------------------------------------------------------------------------- selection


def _rank_key(c: dict[str, Any]) -> tuple:
    v = c["verdict"]
    speed = v.get("speedup")
    speed = speed if isinstance(speed, (int, float)) and math.isfinite(speed) else float("-inf")
    return (-float(v.get("reward", 0.0)), -speed, c.get("num_tokens", 0), c["injected"], c["sample_index"])


def select_top_k(candidates: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The best `k` correct candidates of one task: by reward, then speedup, then the shorter
    completion; identical completions count once."""
    correct = [c for c in candidates if c["verdict"].get("correct")]
    out, seen = [], set()
    for c in sorted(correct, key=_rank_key):
        text = c["text"].strip()
        if text in seen:
            continue
        seen.add(text)
        out.append(c)
        if len(out) == k:
            break
    return out


def training_rows(kept: Sequence[dict[str, Any]], tasks_by_id: dict[str, Task]) -> list[dict[str, Any]]:
    """SFT rows (TRL's conversational prompt/completion) from the kept candidates: the same prompt
    the policy saw, and the completion exactly as it was written."""
    return [{"prompt": build_messages(tasks_by_id[c["task_id"]]),
             "completion": [{"role": "assistant", "content": c["text"].strip()}]} for c in kept]


# --------------------------------------------------------------------------- one round's pieces


def _round_dir(paths: RunPaths, r: int) -> Path:
    return paths.rl_checkpoint / rc.ROUNDS_DIR / f"round-{r:03d}"


def _sample_and_verify(r: int, tasks: list[Task], sampler: Rollout, sampling: SamplingConfig, pool,
                       cfg: RunConfig, extra: ExtraCandidates | None, say) -> tuple[list[dict], dict]:
    prompts = task_prompts(sampler.tokenizer, tasks)
    t0 = time.perf_counter()
    result = sampler.generate(prompts, dataclasses.replace(sampling, seed=cfg.seed * 1000 + r), progress=True)
    rollout_s = time.perf_counter() - t0
    cands: list[dict[str, Any]] = []
    for task, group in zip(tasks, result.completions):
        for c in group:
            cands.append({"task_id": task.id, "level": task.level, "sample_index": c.sample_index,
                          "injected": False, "text": c.text, "num_tokens": c.num_tokens,
                          "finish_reason": c.finish_reason, "seconds": c.seconds})
        for j, text in enumerate(extra(task, r) if extra else []):
            cands.append({"task_id": task.id, "level": task.level, "sample_index": sampling.n_samples + j,
                          "injected": True, "text": text, "num_tokens": 0, "finish_reason": "injected",
                          "seconds": 0.0})
    by_id = {t.id: t for t in tasks}
    t1 = time.perf_counter()
    verdicts = pool.map([by_id[c["task_id"]] for c in cands], [c["text"] for c in cands],
                        desc=f"verify round {r}")
    verify_s = time.perf_counter() - t1
    for c, v in zip(cands, verdicts):
        c["verdict"] = v.to_dict()
    st = result.stats
    info = {"rollout": {"engine": st.engine, "tokens": st.generated_tokens, "seconds": round(rollout_s, 3),
                        "tokens_per_s": round(st.generated_tokens / rollout_s, 1) if rollout_s > 0 else None,
                        "finish_reasons": st.finish_reasons, "sequences": st.sequences,
                        "cuda_graphs": st.cuda_graphs, "note": st.note},
            "verify": {"candidates": len(cands), "seconds": round(verify_s, 3),
                       "per_minute": round(60 * len(cands) / verify_s, 1) if verify_s > 0 else None}}
    say(f"round {r}: {st.sequences} samples, {st.generated_tokens} tokens in {rollout_s:.1f}s "
        f"({info['rollout']['tokens_per_s']} tok/s, {st.engine}); verified {len(cands)} in {verify_s:.1f}s")
    return cands, info


def _fine_tune(cfg: RunConfig, model, tokenizer, rows: list[dict[str, Any]], workdir: Path, seed: int) -> dict:
    """One pass of the SFT trainer over the kept pairs (the adapter keeps training)."""
    from datasets import Dataset
    from transformers import set_seed

    from .sft import build_trainer, fit_to_length

    set_seed(seed)
    # Rows are as long as the policy wrote them (prompt + up to max_new_tokens): fit them whole.
    longest = max(len(tokenizer(tokenizer.apply_chat_template(r["prompt"] + r["completion"], tokenize=False),
                                add_special_tokens=False)["input_ids"]) for r in rows)
    tuned = dataclasses.replace(
        cfg, seed=seed,
        sft=dataclasses.replace(cfg.sft, learning_rate=cfg.rl.rl_learning_rate, epochs=cfg.rl.rl_epochs,
                                save_steps=10 ** 9, save_total_limit=1, logging_steps=1, warmup_ratio=0.0,
                                max_seq_len=max(cfg.sft.max_seq_len, longest + 8),
                                per_device_batch_size=max(1, min(cfg.sft.per_device_batch_size, len(rows)))))
    dataset, fit = fit_to_length(Dataset.from_list(rows), tokenizer, tuned.sft.max_seq_len)
    t0 = time.perf_counter()
    trainer, plan = build_trainer(tuned, dataset, model, tokenizer, workdir)
    out = trainer.train()
    metrics = dict(out.metrics or {})
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    info = {"examples": len(dataset), "steps": trainer.state.global_step, "train_loss": metrics.get("train_loss"),
            "final_loss": losses[-1] if losses else None, "seconds": round(time.perf_counter() - t0, 3),
            "cut": fit["cut"], "dropped": fit["dropped"], "plan": plan}
    del trainer
    shutil.rmtree(workdir, ignore_errors=True)
    return info


# --------------------------------------------------------------------------- the loop


def train_best_of_n(cfg: RunConfig, paths: RunPaths | None = None, *, pool=None,
                    extra_candidates: ExtraCandidates | None = None, tasks: Sequence[Task] | None = None,
                    force: bool = False, score_final: bool = False, engine: str = "auto",
                    echo: Callable[[str], None] | None = None) -> rc.RLResult:
    """Run (or resume, or find finished) best-of-N RL from the run's SFT adapter; see the module doc.

    `pool`: a VerifierPool to use (default: one made from cfg.verify, closed at the end).
    `tasks`: the task universe to select from (default: cfg.data.task_source).
    `extra_candidates(task, round) -> completions`: candidates added beside the policy's samples.
    `score_final`: sample and verify once more after the last round to measure the final adapter.
    """
    import torch

    say = echo or (lambda s: print(s, flush=True))
    t_start = time.perf_counter()
    paths = (paths or cfg.paths).ensure()
    start = rc.start_adapter(paths)
    train_tasks = rc.select_rl_tasks(cfg, paths, tasks)
    by_level = rc.pool_by_level(train_tasks)
    tasks_by_id = {t.id: t for t in train_tasks}
    fp = rc.fingerprint(cfg, METHOD, start, [t.id for t in train_tasks])
    resuming = rc.prepare_state(cfg, paths, METHOD, fp, force, say)
    root = paths.rl_checkpoint
    base_spec = rc.base_model_spec(cfg)

    done = 0
    while models.checkpoint_complete(_round_dir(paths, done) / "adapter"):
        done += 1
    rounds = cfg.rl.rounds
    final_marker = rc.read_json(root / models.MARKER) if models.checkpoint_complete(root) else None
    if resuming and done >= rounds and final_marker and final_marker.get("final") \
            and (not score_final or final_marker.get("scored")):
        say(f"RL best-of-N already finished: {rounds} rounds, adapter at {root}")
        return rc.RLResult(METHOD, root, "already_done", rounds_done=rounds, best=rc.read_best(paths),
                           log=paths.rl_log, curriculum_log=paths.curriculum_log,
                           wall_s=time.perf_counter() - t_start, history=rc.read_rl_log(paths))
    history = rc.trim_log(paths.rl_log, "round", done)
    curriculum = Curriculum.resume(CurriculumSettings.from_config(cfg.rl), cfg.seed, paths.curriculum_log,
                                   upto_step=done)
    if done:
        say(f"RL best-of-N: resuming after round {done - 1} of {rounds}")
    say(f"RL best-of-N: {len(train_tasks)} training tasks ({', '.join(f'L{k}: {len(v)}' for k, v in sorted(by_level.items()))}), "
        f"{rounds} rounds x {cfg.rl.tasks_per_round} tasks x {cfg.rl.n_samples} samples, keep top {cfg.rl.top_k}")

    adapter = _round_dir(paths, done - 1) / "adapter" if done else start
    model, tokenizer = models.load_policy(cfg, adapter=adapter, trainable=True)
    if done:  # a kill between saving a round's adapter and checkpoints/rl leaves the latter behind
        marker = rc.read_json(root / models.MARKER) if models.checkpoint_complete(root) else None
        if not (marker and marker.get("round") == done - 1):
            models.save_checkpoint(model, tokenizer, root, base_model=base_spec, extra={
                "stage": "rl", "method": METHOD, "round": done - 1, "rounds": rounds, "final": done == rounds,
                "fingerprint_start": fp["start"]})
    sampling = SamplingConfig.from_config(cfg, engine=engine)
    sampler = Rollout(model, tokenizer, engine=engine)
    if sampler.note:
        say(f"RL: {sampler.note}")

    own_pool = pool is None
    if own_pool:
        from ..verify.pool import VerifierPool

        pool = VerifierPool(cfg.verify)
    try:
        last = rounds + (1 if score_final else 0)
        for r in range(done, last):
            scoring = r >= rounds  # the extra pass that only measures the final adapter
            rdir = _round_dir(paths, r)
            drawn = curriculum.sample_tasks(by_level, cfg.rl.tasks_per_round, rng=curriculum.rng(r))
            p_used = curriculum.p_level2
            meta = rc.read_json(rdir / "round.json")
            if meta and meta.get("verified") and meta.get("task_ids") == [t.id for t in drawn]:
                cands = rc.read_jsonl(rdir / "samples.jsonl")
                info = meta["info"]
                say(f"round {r}: reusing its {len(cands)} verified candidates")
            else:
                shutil.rmtree(rdir, ignore_errors=True)
                sampler.refresh()
                cands, info = _sample_and_verify(r, drawn, sampler, sampling, pool, cfg, extra_candidates, say)
                rc.write_jsonl(rdir / "samples.jsonl", cands)
                rc.write_json(rdir / "round.json", {"round": r, "verified": True, "task_ids": [t.id for t in drawn],
                                                    "scoring_only": scoring, "info": info})
            policy = [c for c in cands if not c["injected"]]
            pv = [Verdict.from_dict(c["verdict"]) for c in policy]
            stats = rc.verdict_stats([c["level"] for c in policy], pv)
            cur_rec = curriculum.update([(c["level"], bool(c["verdict"]["correct"])) for c in policy],
                                        method=METHOD, round=r)
            where = {"round": r, "policy": "sft" if r == 0 else f"round-{r - 1:03d}"}
            if stats["mean_reward"] is not None:
                rc.maybe_record_best(paths, model, tokenizer, base_spec, method=METHOD, where=where,
                                     metric="mean_reward", value=stats["mean_reward"],
                                     extra={"correct_rate": stats["correct_rate"], "samples": stats["samples"]})
            record: dict[str, Any] = {"method": METHOD, "round": r, "scoring_only": scoring,
                                      "tasks": [t.id for t in drawn], **stats,
                                      "injected": sum(c["injected"] for c in cands),
                                      "rollout": info["rollout"], "verify": info["verify"],
                                      "verifications_per_min": info["verify"]["per_minute"],
                                      "rollout_tokens_per_s": info["rollout"]["tokens_per_s"],
                                      "curriculum_p": p_used, "curriculum_running_l1": cur_rec.running_l1_rate,
                                      "curriculum_triggered_at": cur_rec.triggered_at}
            if not scoring:
                kept: list[dict[str, Any]] = []
                for tid in dict.fromkeys(t.id for t in drawn):  # a task drawn twice is one pool of candidates
                    kept += select_top_k([c for c in cands if c["task_id"] == tid], cfg.rl.top_k)
                rc.write_jsonl(rdir / "kept.jsonl", ({k: c[k] for k in ("task_id", "sample_index", "injected", "text")}
                                                     | {"reward": c["verdict"]["reward"],
                                                        "speedup": c["verdict"].get("speedup")} for c in kept))
                record["kept"] = len(kept)
                record["kept_injected"] = sum(c["injected"] for c in kept)
                record["kept_by_task"] = {tid: sum(c["task_id"] == tid for c in kept) for tid in dict.fromkeys(
                    c["task_id"] for c in kept)}
                sampler.release()
                if kept:
                    if torch.cuda.is_available():
                        torch.cuda.empty_cache()
                    record["train"] = _fine_tune(cfg, model, tokenizer, training_rows(kept, tasks_by_id),
                                                 rdir / "trainer", seed=cfg.seed + 1000 * (r + 1))
                    say(f"round {r}: fine-tuned on {len(kept)} kept completions "
                        f"(loss {record['train'].get('train_loss')})")
                else:
                    record["train"] = None
                    say(f"round {r}: no correct completion to keep; the adapter is unchanged")
                extra = {"stage": "rl", "method": METHOD, "round": r, "rounds": rounds, "final": r == rounds - 1,
                         "fingerprint_start": fp["start"]}
                models.save_checkpoint(model, tokenizer, rdir / "adapter", base_model=base_spec, extra=extra)
                models.save_checkpoint(model, tokenizer, root, base_model=base_spec, extra=extra)
            else:
                marker = rc.read_json(root / models.MARKER) or {}
                rc.write_json(root / models.MARKER, {**marker, "scored": True})
            rc.append_log(paths.rl_log, record)
            history.append(record)
            say(f"round {r}: correct {stats['correct']}/{stats['samples']} "
                f"(rate {stats['correct_rate'] if stats['correct_rate'] is not None else float('nan'):.3f}), "
                f"mean reward {stats['mean_reward'] if stats['mean_reward'] is not None else float('nan'):.3f}, "
                f"kept {record.get('kept', '-')}, P(L2)={p_used:.2f}")
    finally:
        if own_pool and pool is not None:
            pool.close()
    result = rc.RLResult(METHOD, root, "resumed" if done else "trained", rounds_done=rounds,
                         best=rc.read_best(paths), log=paths.rl_log, curriculum_log=paths.curriculum_log,
                         wall_s=time.perf_counter() - t_start, history=history)
    say(result.summary())
    return result
