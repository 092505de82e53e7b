"""Best-of-N RL (the source's method): sample, verify, keep the best correct, fine-tune, repeat.

Read top to bottom, `train_best_of_n` opens the run (run_frame.py: the SFT adapter, the training
tasks, resume or a fresh start) and does, for each of `rounds` rounds:

1. the curriculum draws `tasks_per_round` training tasks (Level 1 / Level 2 mix, and within a
   level the policy's frontier: curriculum.py);
2. groups.collect_step: the policy writes `n_samples` completions per task (rollout/: batched,
   stops at the end of the code block) in `overlap_chunks` chunks, each chunk verified in the
   verifier pool while the next generates (identical code verified once; candidate code never
   runs in this process); with `refine_turns`, failed candidates get the verifier's feedback and
   are written again; tasks whose group has no correct candidate are replaced by newly drawn
   ones (`redraw_rounds`, dynamic sampling). An optional `extra_candidates(task, round)` hook adds
   candidates of its own (tests add the task's reference solution; they are marked `injected` and
   never count in the policy's statistics or the curriculum). The candidates (candidate.py) and
   their verdicts are written to rounds/round-NNN/samples.jsonl and round.json, so a resumed run
   never verifies a round twice;
3. per task, the top `top_k` candidates by (discounted) reward, correct ones only (ties by
   speedup, then the shorter completion), become prompt/completion pairs (a refined candidate
   keeps its conversation: the first attempt and the verifier's feedback are its prompt);
4. the policy's LoRA adapter is fine-tuned on them with the SFT stage's trainer (train/sft/train.py's
   `build_trainer`, at rl_learning_rate for rl_epochs), and the adapter is saved to the round's
   folder and to checkpoints/rl (what eval loads). With `rl.replay_ratio` > 0, that many examples
   of the run's SFT corpus per kept pair join the fine-tune, every family in turn (`replay_rows`):
   what a round keeps is mostly the tasks the policy already solves, and fine-tuning on those
   alone was measured to unlearn others (docs/RESULTS.md "Issue 17");
5. one line per round goes to logs/rl_log.jsonl: tasks, samples, correct rate by level, mean
   reward, kept, groups with signal, generate / verify / train seconds, verifications per minute,
   rollout tokens/s, the curriculum's P(Level 2) (log.py).

The best policy (highest mean reward on its round's samples; the SFT start counts as round 0's
policy) is saved to checkpoints/rl/best with checkpoints/rl/best.json (best.py). A policy is measured by the
round that samples from it, so the last round's adapter is measured only with `score_final=True`
(one more sampling-and-verification pass, no training).

Several processes (`accelerate launch`, distributed.py): rank 0 draws each round's tasks and every
rank samples and verifies its share of them in its own pool; the round's candidates are gathered
to every rank, so each keeps the same completions and the fine-tune runs data-parallel (the SFT
trainer under accelerate: each rank a share of the rows, gradients averaged). Rank 0 writes the
round's files, the logs, the curriculum and the adapters; the others wait where they must. A round
verified before a kill of any rank is read back by rank 0 and handed to all.
"""

from __future__ import annotations

import dataclasses
import math
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

from ...core.config import ConfigError, RunConfig
from ...core.jsonio import read_json, read_jsonl, write_json, write_jsonl
from ...core.paths import RunPaths
from ...model import load as models
from ...model.answer_layout import laid_out
from ...model.prompts import build_messages, format_completion
from ...rollout import Rollout, SamplingConfig
from ...tasks.task import Task
from ...verify.batch import VerifyAhead, training_verify_config
from .best import maybe_record_best
from .candidate import Candidate, as_candidate
from .curriculum import Curriculum, CurriculumSettings
from .distributed import Ranks
from .groups import StepContext, collect_step, curriculum_results
from .log import append_rl_log, policy_stats, rollout_info, step_timing, trim_rl_log
from .refine import history_messages
from .run_frame import RLResult, RLRun, fingerprint_digest, open_run, verifier_pool
from .time_budget import STOPPED, StepBudget

METHOD = "best_of_n"
ExtraCandidates = Callable[[Task, int], Sequence[str]]
C = TypeVar("C", Candidate, Mapping[str, Any])


def reference_candidates(task: Task, round_index: int) -> list[str]:
    """An `extra_candidates` hook: the task's reference solution as one more candidate (a
    known-correct completion, for tests and for seeding a cold-start policy)."""
    return [format_completion(task.reference_solution)] if task.reference_solution else []


# --------------------------------------------------------------------------- the loop


def train_best_of_n(cfg: RunConfig, paths: RunPaths | None = None, *, pool=None,
                    extra_candidates: ExtraCandidates | None = None, tasks: Sequence[Task] | None = None,
                    force: bool = False, score_final: bool = False, engine: str = "auto",
                    echo: Callable[[str], None] | None = None, ranks: Ranks | None = None) -> RLResult:
    """Run (or resume, or find finished) best-of-N RL from the run's SFT adapter; see the module doc.

    `pool`: a VerifierPool to use (default: one made from cfg.verify, closed at the end).
    `tasks`: the task universe to select from (default: cfg.data.task_source).
    `extra_candidates(task, round) -> completions`: candidates added beside the policy's samples.
    `score_final`: sample and verify once more after the last round to measure the final adapter.
    `ranks`: this process among several (default: from the launcher's environment; one process alone).
    """
    ranks = ranks or Ranks.from_env(models.resolve_device(cfg.device))
    say = ranks.say(echo)
    _check_replay_corpus(cfg, paths)
    run = open_run(cfg, paths, METHOD, tasks=tasks, force=force, say=say, ranks=ranks)
    done = ranks.agree(rounds_finished(run.paths), "the rounds finished")
    if ranks.from_main(lambda: _finished_before(run, done, score_final)):
        return run.result("already_done", cfg.rl.rounds)
    s = _set_up(run, done, engine)
    budget = StepBudget(cfg.rl.rl_time_budget_s, ranks, start=run.t_start)
    stopped_after = None  # the rounds finished when the time budget stopped the run
    with verifier_pool(cfg, pool, ranks) as pool, VerifyAhead(pool, training_verify_config(cfg)) as ahead:
        ctx = StepContext(cfg, METHOD, s.sampler, s.sampling, ahead, s.curriculum, run.by_level, extra_candidates,
                          "append", say, ranks)
        for r in range(done, cfg.rl.rounds + (1 if score_final else 0)):
            if r > done and not budget.another_fits():  # the scoring pass is a round's work too
                stopped_after = r
                break
            t_round = time.perf_counter()
            scoring = r >= cfg.rl.rounds  # the extra pass that only measures the final adapter
            p_used = s.curriculum.p_level2
            cands, info = _round_candidates(run, ctx, r, scoring)  # drawn, sampled, verified (or read back)
            stats = policy_stats(cands)  # the policy that sampled this round, by its own first attempts
            record: dict[str, Any] = {}
            if ranks.is_main:  # the curriculum, the best policy and the log are rank 0's
                results, per_task = curriculum_results(cands)
                cur = s.curriculum.update(results, task_results=per_task, method=METHOD, round=r)
                maybe_record_best(run.paths, s.model, s.tokenizer, run.base_spec, method=METHOD, stats=stats,
                                  where={"round": r, "policy": "sft" if r == 0 else f"round-{r - 1:03d}"})
                record = _round_record(r, scoring, cands, info, stats, p_used, cur)
            train_s = 0.0
            if scoring:
                if ranks.is_main:
                    _mark(run.paths, scored=True)
            else:
                t_train = time.perf_counter()
                record.update(_keep_and_train(run, s, r, cands))  # each task's best, fine-tuned on
                _save_round_adapter(run, s.model, s.tokenizer, r, to_round_folder=True)
                train_s = time.perf_counter() - t_train
            record["timing"] = step_timing(info["timing"], train_s, time.perf_counter() - t_round,
                                           reused=info.get("reused", False))
            if ranks.is_main:
                append_rl_log(run.paths, record)
                s.history.append(record)
                say(_round_words(r, stats, record, p_used))
            ranks.barrier()  # the round's files are written before any rank starts the next
            budget.step_done(counts=not info.get("reused", False))
    if stopped_after is not None and stopped_after >= cfg.rl.rounds:  # every round trained: only scoring is left
        say(f"RL best-of-N: time budget: the final adapter's scoring pass would end past {budget.budget_s:.0f} s; "
            "run it again to score it")
    elif stopped_after is not None:
        say(f"RL best-of-N: {budget.words(stopped_after, cfg.rl.rounds, 'rounds')}")
        if ranks.is_main:
            _mark(run.paths, stopped=STOPPED)
        ranks.barrier()
    # the log is rank 0's; the other ranks' results carry no history
    result = run.result(STOPPED if stopped_after is not None else "resumed" if done else "trained",
                        min(cfg.rl.rounds, stopped_after if stopped_after is not None else cfg.rl.rounds),
                        s.history if ranks.is_main else [])
    say(result.summary())
    return result


# --------------------------------------------------------------------------- set-up and resume


@dataclass
class _Rounds:
    """What every round of this call shares: the policy and its sampler, the curriculum, the log."""

    model: Any
    tokenizer: Any
    sampling: SamplingConfig
    sampler: Rollout
    curriculum: Curriculum
    history: list[dict[str, Any]]  # the rl_log records: the finished rounds', then this call's


def _check_replay_corpus(cfg: RunConfig, paths: RunPaths | None) -> None:
    corpus = (paths or cfg.paths).sft_train
    if cfg.rl.replay_ratio > 0 and not corpus.is_file():
        raise ConfigError(f"rl.replay_ratio={cfg.rl.replay_ratio} replays the SFT corpus, and there is none at {corpus}: "
                          "run 01_data in this run (or copy its sft_train.jsonl there), or set replay_ratio=0")


def rounds_finished(paths: RunPaths) -> int:
    """How many rounds have their adapter saved (the rounds a resumed run skips)."""
    done = 0
    while models.checkpoint_complete(paths.rl_round(done).adapter):
        done += 1
    return done


def _finished_before(run: RLRun, done: int, score_final: bool) -> bool:
    """A resumed run with nothing left to do: every round trained, the final adapter in
    checkpoints/rl (and scored, when asked)."""
    marker = run.finished_adapter()
    if run.resuming and done >= run.cfg.rl.rounds and marker and marker.get("final") \
            and (not score_final or marker.get("scored")):
        run.say(f"RL best-of-N already finished: {run.cfg.rl.rounds} rounds, adapter at {run.paths.rl_checkpoint}")
        return True
    return False


def _set_up(run: RLRun, done: int, engine: str) -> _Rounds:
    """The log and the curriculum cut back to the `done` finished rounds, and the policy they left
    (the SFT adapter on a fresh start) loaded with its sampler."""
    cfg, paths, say = run.cfg, run.paths, run.say
    settings = CurriculumSettings.from_config(cfg.rl)
    if run.ranks.is_main:  # the log and the curriculum are rank 0's; the others never draw
        history = trim_rl_log(paths, "round", done)
        curriculum = Curriculum.resume(settings, cfg.seed, paths.curriculum_log, upto_step=done)
    else:
        history, curriculum = [], Curriculum(settings, cfg.seed)
    if done:
        say(f"RL best-of-N: resuming after round {done - 1} of {cfg.rl.rounds}")
    levels = ", ".join(f"L{k}: {len(v)}" for k, v in sorted(run.by_level.items()))
    say(f"RL best-of-N: {len(run.tasks)} training tasks ({levels}), "
        f"{cfg.rl.rounds} rounds x {cfg.rl.tasks_per_round} tasks x {cfg.rl.n_samples} samples, keep top {cfg.rl.top_k}")
    model, tokenizer = models.load_policy(cfg, adapter=paths.rl_round(done - 1).adapter if done else run.start,
                                          trainable=True)
    if done:
        _restore_latest_adapter(run, model, tokenizer, done - 1)
    sampling = SamplingConfig.from_config(cfg, engine=engine)
    sampler = Rollout(model, tokenizer, engine=engine)
    if sampler.note:
        say(f"RL: {sampler.note}")
    return _Rounds(model, tokenizer, sampling, sampler, curriculum, history)


def _restore_latest_adapter(run: RLRun, model, tokenizer, r: int) -> None:
    """A kill between saving round `r`'s adapter to its folder and to checkpoints/rl leaves the
    latter behind: save the loaded one (round `r`'s) there."""
    marker = run.finished_adapter() if run.ranks.is_main else None
    if run.ranks.from_main(lambda: not (marker and marker.get("round") == r)):
        _save_round_adapter(run, model, tokenizer, r, to_round_folder=False)


def _mark(paths: RunPaths, **fields) -> None:
    """Add `fields` to the marker of the adapter in checkpoints/rl: `scored` (the final adapter has been
    measured, `score_final`: a later call finds the run finished) or `stopped` (it is the last finished
    round's, the time budget having ended the call)."""
    root = paths.rl_checkpoint
    write_json(root / models.MARKER, {**(read_json(root / models.MARKER, None) or {}), **fields})


# --------------------------------------------------------------------------- one round's pieces


def _round_candidates(run: RLRun, ctx: StepContext, r: int, scoring: bool) -> tuple[list[Candidate], dict]:
    """The round's candidates with their verdicts: read back when the round was verified before
    (a resumed run; rank 0 reads them and hands them to every rank), otherwise drawn, sampled,
    verified and written to the round's folder."""
    reused = run.ranks.from_main(lambda: _reuse_round(run, ctx, r))
    return reused if reused is not None else _collect_round(run, ctx, r, scoring)


def _reuse_round(run: RLRun, ctx: StepContext, r: int) -> tuple[list[Candidate], dict] | None:
    """A round verified before (its round.json says so, and the curriculum draws the same tasks
    again): its candidates from samples.jsonl; None when it must be collected afresh."""
    files = run.paths.rl_round(r)
    meta = read_json(files.meta, None)
    if not (meta and meta.get("verified")):
        return None
    # open the curriculum's step as the first run did: the same draw, the same redraw count
    drawn = ctx.curriculum.sample_tasks(ctx.by_level, run.cfg.rl.tasks_per_round, rng=ctx.curriculum.rng(r))
    if meta.get("drawn") != [t.id for t in drawn]:
        return None
    ctx.curriculum.count_redrawn(int(meta["info"]["signal"].get("drawn", 0)) - len(drawn))
    cands = [Candidate.from_dict(d) for d in read_jsonl(files.samples)]
    run.say(f"round {r}: reusing its {len(cands)} verified candidates")
    return cands, {**meta["info"], "reused": True}


def _collect_round(run: RLRun, ctx: StepContext, r: int, scoring: bool) -> tuple[list[Candidate], dict]:
    """Draw, sample, verify (groups.collect_step) and write samples.jsonl and round.json."""
    files = run.paths.rl_round(r)
    if run.ranks.is_main:
        shutil.rmtree(files.dir, ignore_errors=True)
    ctx.sampler.refresh()
    step = collect_step(ctx, r, run.cfg.rl.tasks_per_round)
    cands = step.candidates
    gen_s = step.timing["generate_s"] + step.timing["refine_generate_s"]
    info = {"tasks": [t.id for t in step.tasks], "signal": step.signal, "refine": step.refine,
            "timing": step.timing, "verify": step.verify, "rollout": rollout_info(step.rollout, gen_s)}
    if step.per_rank:
        info["ranks"] = step.per_rank
    if not run.ranks.is_main:
        return cands, info
    write_jsonl(files.samples, cands)
    write_json(files.meta, {"round": r, "verified": True, "drawn": [t.id for t in step.drawn],
                            "task_ids": info["tasks"], "scoring_only": scoring, "info": info})
    v = step.verify
    run.say(f"round {r}: {step.rollout.sequences} samples, {step.rollout.generated_tokens} tokens in {gen_s:.1f}s "
            f"({info['rollout']['tokens_per_s']} tok/s, {step.rollout.engine}); verified {v['unique']} distinct of "
            f"{v['candidates']} candidates in {v['seconds']:.1f}s")
    return cands, info


def _round_record(r: int, scoring: bool, cands: Sequence[Candidate], info: dict[str, Any], stats: dict[str, Any],
                  p_used: float, cur) -> dict[str, Any]:
    """The round's rl_log record, before its kept / train entries and timing."""
    return {"method": METHOD, "round": r, "scoring_only": scoring, "tasks": info["tasks"], **stats,
            "injected": sum(c.injected for c in cands),
            "signal": info["signal"], "refine": info.get("refine") or None,
            "rollout": info["rollout"], "verify": info["verify"],
            "verifications_per_min": info["verify"]["per_minute"],
            "rollout_tokens_per_s": info["rollout"]["tokens_per_s"],
            "curriculum_p": p_used, "curriculum_running_l1": cur.running_l1_rate,
            "curriculum_triggered_at": cur.triggered_at,
            **({"ranks": info["ranks"]} if info.get("ranks") else {})}


def _round_words(r: int, stats: dict[str, Any], record: dict[str, Any], p_used: float) -> str:
    sig, t = record["signal"], record["timing"]
    nan = float("nan")
    rate = stats["correct_rate"] if stats["correct_rate"] is not None else nan
    mean = stats["mean_reward"] if stats["mean_reward"] is not None else nan
    return (f"round {r}: correct {stats['correct']}/{stats['samples']} (rate {rate:.3f}), mean reward {mean:.3f}, "
            f"kept {record.get('kept', '-')}, groups with signal {sig['with_signal']}/{sig['groups']}, "
            f"P(L2)={p_used:.2f}; generate {t['generate_s']:.1f}s, verify {t['verify_s']:.1f}s "
            f"(waited {t['verify_wait_s']:.1f}s), train {t['train_s']:.1f}s")


def _keep_and_train(run: RLRun, s: _Rounds, r: int, cands: list[Candidate]) -> dict[str, Any]:
    """Keep each task's top_k correct candidates (kept.jsonl) and fine-tune the policy on them;
    -> the record's kept / train entries."""
    import torch

    kept: list[Candidate] = []
    for tid in dict.fromkeys(c.task_id for c in cands):  # a task drawn twice is one pool of candidates
        kept += select_top_k([c for c in cands if c.task_id == tid], run.cfg.rl.top_k, run.cfg.rl.refine_discount)
    files = run.paths.rl_round(r)
    if run.ranks.is_main:
        write_jsonl(files.kept, (c.kept_record() for c in kept))
    out: dict[str, Any] = {"kept": len(kept), "kept_injected": sum(c.injected for c in kept),
                           "kept_by_task": {tid: sum(c.task_id == tid for c in kept)
                                            for tid in dict.fromkeys(c.task_id for c in kept)}}
    s.sampler.release()
    if kept:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        rows = training_rows(kept, {t.id: t for t in run.tasks})
        replay = replay_rows(run.paths.sft_train, round(run.cfg.rl.replay_ratio * len(kept)), run.cfg.seed + r,
                             run.cfg.sft.answer_layout) \
            if run.cfg.rl.replay_ratio > 0 else []
        out["replayed"] = len(replay)
        out["train"] = _fine_tune(run.cfg, s.model, s.tokenizer, rows + replay, files.trainer_dir,
                                  seed=run.cfg.seed + 1000 * (r + 1), ranks=run.ranks)
        also = f" and {len(replay)} replayed SFT examples" if replay else ""
        run.say(f"round {r}: fine-tuned on {len(kept)} kept completions{also} (loss {out['train'].get('train_loss')})")
    else:
        out["train"] = None
        run.say(f"round {r}: no correct completion to keep; the adapter is unchanged")
    return out


def _save_round_adapter(run: RLRun, model, tokenizer, r: int, to_round_folder: bool) -> None:
    """The adapter after round `r`: to the round's folder (when asked), then to checkpoints/rl."""
    rounds = run.cfg.rl.rounds
    extra = {"stage": "rl", "method": METHOD, "round": r, "rounds": rounds, "final": r == rounds - 1,
             "fingerprint_start": run.fingerprint["start"], "fingerprint": fingerprint_digest(run.fingerprint),
             "processes": run.ranks.world}
    if run.ranks.is_main:  # every rank holds the same weights (DDP): rank 0 writes them
        if to_round_folder:
            models.save_checkpoint(model, tokenizer, run.paths.rl_round(r).adapter, base_model=run.base_spec,
                                   extra=extra)
        models.save_checkpoint(model, tokenizer, run.paths.rl_checkpoint, base_model=run.base_spec, extra=extra)
    run.ranks.barrier()


# --------------------------------------------------------------------------- selection and fine-tuning


def _rank_key(c: Candidate, discount: float = 1.0) -> tuple:
    speed = c.verdict.get("speedup")
    speed = speed if isinstance(speed, (int, float)) and math.isfinite(speed) else float("-inf")
    reward = float(c.verdict.get("reward", 0.0)) * discount ** c.turn  # a refinement earns less than a first try
    return (-reward, -speed, c.num_tokens, c.injected, c.turn, c.sample_index)


def select_top_k(candidates: Sequence[C], k: int, discount: float = 1.0) -> list[C]:
    """The best `k` correct candidates of one task: by reward (a refinement's discounted per
    turn), then speedup, then the shorter completion; identical completions count once.
    Candidates or their samples.jsonl dicts; what comes back is what was given."""
    correct = [(c, cand) for c in candidates if (cand := as_candidate(c)).correct]
    out, seen = [], set()
    for c, cand in sorted(correct, key=lambda pair: _rank_key(pair[1], discount)):
        text = cand.text.strip()
        if text in seen:
            continue
        seen.add(text)
        out.append(c)
        if len(out) == k:
            break
    return out


def training_rows(kept: Sequence[Candidate | Mapping[str, Any]], tasks_by_id: dict[str, Task]) -> list[dict[str, Any]]:
    """SFT rows (TRL's conversational prompt/completion) from the kept candidates: the same prompt
    the policy saw (for a refinement, the conversation up to it), and the completion exactly as it
    was written."""
    rows = []
    for c in map(as_candidate, kept):
        history = history_messages([(text, verdict) for text, verdict in c.history or []])
        rows.append({"prompt": build_messages(tasks_by_id[c.task_id]) + history,
                     "completion": [{"role": "assistant", "content": c.text.strip()}]})
    return rows


def replay_rows(corpus: Path, n: int, seed: int, layout: str = "as_written") -> list[dict[str, Any]]:
    """`n` examples of the SFT corpus (01_data's sft_train.jsonl) as prompt/completion rows, the
    families taken in turn (a seeded order of families, and of examples within each), so a small
    `n` still reaches many families. At most the whole corpus. `layout`: as SFT laid them out."""
    by_family: dict[str, list[dict[str, Any]]] = {}
    for rec in read_jsonl(corpus):
        by_family.setdefault(str(rec.get("op_family") or ""), []).append(
            {"prompt": rec["prompt"], "completion": laid_out(rec, layout)})
    rng = random.Random(seed)
    families = sorted(by_family)
    rng.shuffle(families)
    for name in families:
        rng.shuffle(by_family[name])
    rows: list[dict[str, Any]] = []
    depth = 0
    while len(rows) < n and any(depth < len(v) for v in by_family.values()):
        rows += [by_family[f][depth] for f in families if depth < len(by_family[f])][:n - len(rows)]
        depth += 1
    return rows


def _fine_tune(cfg: RunConfig, model, tokenizer, rows: list[dict[str, Any]], workdir: Path, seed: int,
               ranks: Ranks | None = None) -> dict:
    """One pass of the SFT trainer over the kept pairs (the adapter keeps training); with several
    ranks, data-parallel: the Trainer joins accelerate's process group and shares the rows out."""
    from datasets import Dataset
    from transformers import set_seed

    from ..trainer import build_trainer, fit_to_length  # imports transformers: only when a round trains

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
    if ranks is not None:
        ranks.barrier()
    if ranks is None or ranks.is_main:
        shutil.rmtree(workdir, ignore_errors=True)
    return info
