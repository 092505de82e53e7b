"""GRPO with TRL's GRPOTrainer: LoRA policy, rewards from the verifier pool, curriculum-chosen prompts.

Read top to bottom, `train_grpo`:

1. opens the run as best-of-N does (run_frame.py: the SFT adapter, the training tasks, resume or a
   fresh start) and loads the adapter as a trainable PeftModel;
2. builds a GRPOTrainer whose optimizer step is one *group batch*: `tasks_per_round` prompts x
   `n_samples` completions (num_generations = n_samples; per-device batch = one group;
   gradient accumulation over the groups, so they are generated together in one rollout);
3. generates and scores through `rollout_func` (rl_groups.collect_step, shared with best-of-N):
   the curriculum chooses the tasks *at generation time* (the trainer's dataset only holds
   `tasks_per_round` numbered slots, filled each step with the tasks the curriculum draws, at
   the policy's frontier); our rollout engine writes the completions in `overlap_chunks` chunks,
   each verified in the verifier pool while the next generates (identical code once; candidate
   code never runs in this process); with `refine_turns` a failed completion's reward is the
   best discounted reward of its refinements; groups whose rewards are all equal (no advantage,
   no gradient) are replaced by groups of newly drawn tasks (`redraw_rounds`) before TRL sees
   them. TRL's loop leaves no room to verify step N while step N+1 generates: the next step's
   completions must come from the policy this step's update makes (on-policy), so the overlap is
   within a step, between its chunks;
4. the reward function hands TRL the rewards computed in the rollout (`verifier_reward`: the fast
   path; completions without one are verified through rewards.py's plain `reward`); the
   rollout updates the curriculum and records the best policy, and one line per step goes to
   logs/rl_log.jsonl (with TRL's loss, KL and reward statistics, and the generate / verify /
   train seconds, merged in);
5. saves resumable Trainer checkpoints in checkpoints/rl/checkpoint-N and the final adapter in
   checkpoints/rl itself. A killed run resumes from the newest complete checkpoint; the
   curriculum and the log are cut back to that step and continue.

Several processes (`accelerate launch`, distributed.py): TRL's own multi-process path. Each process
gets its share of the step's slots from TRL's sampler (`tasks_per_round / N` groups, whole), and
its rollout samples, verifies (in the rank's own pool, on its GPU) and rewards exactly those;
TRL gathers the rewards of all processes to compute each group's advantages, and the update is
data-parallel (DDP). The curriculum is rank 0's: rank 0 draws the step's `tasks_per_round` tasks
(slot i gets the i-th), every rank receives the same ids, and the step's candidates are gathered
to rank 0, which updates the curriculum, records the best policy and writes the log (with each
rank's share and seconds in `ranks`). The Trainer's checkpoints hold every rank's RNG state; a
kill of any rank stops the launch, and the same command resumes from the newest complete one.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ...core.config import RunConfig
from ...core.paths import RunPaths
from ...model import load as models
from ...model.prompts import format_prompt
from ...rollout import Rollout, SamplingConfig
from ...tasks.task import Task
from ...verify.batch import VerifyAhead, training_verify_config
from ..trainer_checkpoints import checkpoint_step, latest_complete_checkpoint, trainer_checkpoints
from .best import maybe_record_best
from .curriculum import Curriculum, CurriculumSettings
from .distributed import SINGLE, Ranks, check_grpo_split
from .groups import StepContext, collect_step, curriculum_results
from .log import append_rl_log, policy_stats, rollout_info, step_timing, trim_rl_log
from .rewards import completion_text
from .rewards import reward as plain_reward
from .run_frame import RLResult, RLRun, fingerprint_digest, open_run, verifier_pool
from .time_budget import STOPPED, StepBudget

METHOD = "grpo"
_SLOT = re.compile(r"^curriculum slot (\d+)$")


def slot_dataset(n_slots: int):
    """The trainer's dataset: `n_slots` numbered placeholder prompts the rollout fills with tasks."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [[{"role": "user", "content": f"curriculum slot {i}"}]
                                         for i in range(n_slots)], "slot": list(range(n_slots))})


def _slot_of(prompt: Any) -> int:
    text = completion_text(prompt)  # TRL passes prompts as it passes completions: text or messages
    m = _SLOT.match(text.strip())
    if m is None:
        raise ValueError(f"unexpected GRPO prompt {text[:60]!r}: the dataset must come from slot_dataset()")
    return int(m.group(1))


class GRPOPieces:
    """The rollout function, the reward function and the log callback, sharing one step's state."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, model, tokenizer, by_level: dict[int, list[Task]],
                 curriculum: Curriculum, pool, engine: str, base_spec: str, say: Callable[[str], None],
                 extra_candidates: Callable[[Task, int], Sequence[str]] | None = None, ranks: Ranks = SINGLE):
        self.cfg, self.paths, self.model, self.tokenizer = cfg, paths, model, tokenizer
        self.by_level, self.curriculum, self.pool, self.say = by_level, curriculum, pool, say
        self.ranks = ranks
        self.tasks_by_id = {t.id: t for ts in by_level.values() for t in ts}
        self.base_spec = base_spec
        self.sampler = Rollout(model, tokenizer, engine=engine)
        self.verify_config = training_verify_config(cfg)
        self.ahead = VerifyAhead(pool, self.verify_config)
        self.ctx = StepContext(cfg, METHOD, self.sampler, SamplingConfig.from_config(cfg, engine=engine), self.ahead,
                               curriculum, by_level, extra_candidates, "replace", say, ranks)
        self._prompt_ids: dict[str, list[int]] = {}
        self.pending: dict[str, Any] | None = None  # this step's record, completed by on_log
        self.history: list[dict[str, Any]] = []
        self.budget: StepBudget | None = None  # rl_time_budget_s: checked after every optimizer step
        self.stopped_at: int | None = None  # the step after which the budget stopped the run
        self.__name__ = "verifier_reward"

    def close(self, drop_queued: bool = False) -> None:
        self.ahead.close(drop_queued=drop_queued)
        self.sampler.release()

    def _prompt(self, task: Task) -> list[int]:
        if task.id not in self._prompt_ids:
            self._prompt_ids[task.id] = self.tokenizer(format_prompt(self.tokenizer, task),
                                                       add_special_tokens=False)["input_ids"]
        return self._prompt_ids[task.id]

    # -- generation and scoring -------------------------------------------------------

    def rollout(self, prompts: list, trainer) -> dict[str, Any]:
        t_step = time.perf_counter()
        step = int(trainer.state.global_step)
        slots = [_slot_of(p) for p in prompts]
        uniq = list(dict.fromkeys(slots))
        counts = {s: slots.count(s) for s in uniq}
        if set(counts.values()) != {self.cfg.rl.n_samples}:
            raise ValueError(f"GRPO rollout: each slot should come {self.cfg.rl.n_samples} times (num_generations), "
                             f"got {sorted(set(counts.values()))}")
        p_used = self.curriculum.p_level2
        self.sampler.refresh()  # the optimizer changed the weights since the last step
        # slot s gets the s-th task of rank 0's draw; this process samples the slots TRL handed it
        got = collect_step(self.ctx, step, self.cfg.rl.tasks_per_round, share=uniq)
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "task_id": [], "finish_reason": [],
                                "injected": [], "reward": []}
        used = {s: 0 for s in uniq}
        for s in slots:
            group = got.by_slot[s]
            c = group[used[s]]
            used[s] += 1
            out["prompt_ids"].append(self._prompt(self.tasks_by_id[c.task_id]))
            # an empty completion would give TRL nothing to score; keep at least one token
            out["completion_ids"].append(c.token_ids or [self.tokenizer.eos_token_id])
            out["task_id"].append(c.task_id)
            out["finish_reason"].append(c.finish_reason)
            out["injected"].append(c.injected)
            out["reward"].append(float(c.reward))
        # TRL reads sampling log-probs only for vLLM importance sampling; we generate on-policy.
        out["logprobs"] = None  # type: ignore[assignment]
        if self.ranks.is_main:  # the curriculum, the best policy and the log are rank 0's
            self._close_step(step, got, p_used, t_step)
        return out

    def _close_step(self, step: int, got, p_used: float, t_step: float) -> None:
        """The step's statistics (the policy's own first attempts, every group drawn, replaced ones
        too, of every rank), the curriculum's update, the best policy, and the log record that the
        callback completes with TRL's numbers."""
        stats = policy_stats(got.candidates)
        results, per_task = curriculum_results(got.candidates)
        cur = self.curriculum.update(results, task_results=per_task, method=METHOD, step=step)
        maybe_record_best(self.paths, self.sampler.model, self.tokenizer, self.base_spec, method=METHOD,
                          where={"step": step, "policy": "sft" if step == 0 else f"step-{step}"}, stats=stats)
        gen_s = got.timing["generate_s"] + got.timing["refine_generate_s"]
        rec: dict[str, Any] = {"method": METHOD, "step": step, "tasks": [t.id for t in got.tasks], **stats,
                               "injected": sum(c.injected for c in got.candidates),
                               "rewards": [float(c.reward) for g in got.groups for c in g],
                               "signal": got.signal, "refine": got.refine or None,
                               "rollout": rollout_info(got.rollout, gen_s), "verify": got.verify,
                               "verifications_per_min": got.verify["per_minute"], "curriculum_p": p_used,
                               "curriculum_running_l1": cur.running_l1_rate,
                               "curriculum_triggered_at": cur.triggered_at}
        if got.per_rank:
            rec["ranks"] = got.per_rank
        rec["rollout_tokens_per_s"] = rec["rollout"]["tokens_per_s"]
        rec["_collect_timing"], rec["_t_step"], rec["_t_collected"] = got.timing, t_step, time.perf_counter()
        self.pending = rec
        mean = stats["mean_reward"] if stats["mean_reward"] is not None else float("nan")
        self.say(f"grpo step {step}: correct {stats['correct']}/{stats['samples']}, mean reward {mean:.3f}, "
                 f"groups with signal {got.signal['with_signal']}/{got.signal['groups']}, P(L2)={p_used:.2f}")

    # -- reward -------------------------------------------------------------------------

    def __call__(self, prompts, completions, completion_ids=None, task_id=None, trainer_state=None,
                 injected=None, reward=None, **kwargs) -> list[float]:
        """The reward function: each completion's reward, computed with its verdict in the rollout
        (the fast path: verified while the next chunk generated); verified here through the plain
        `rewards.reward` only when a caller gives completions without one."""
        if reward is not None:
            return [float(r) for r in reward]
        if task_id is None:
            raise ValueError("verifier_reward needs the task_id of each completion (from the rollout)")
        return plain_reward(completions, [self.tasks_by_id[t] for t in task_id], pool=self.pool,
                            config=self.verify_config)

    # -- logging ------------------------------------------------------------------------

    def callback(self):
        from transformers import TrainerCallback

        pieces = self

        class _Log(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                if pieces.pending is None or not logs or "loss" not in logs:
                    return
                rec = pieces.pending
                now = time.perf_counter()
                rec["timing"] = step_timing(rec.pop("_collect_timing"), now - rec.pop("_t_collected"),
                                            now - rec.pop("_t_step"))
                rec["trl"] = {k: v for k, v in logs.items() if isinstance(v, (int, float))}
                append_rl_log(pieces.paths, rec)
                pieces.history.append(rec)
                pieces.pending = None

            def on_step_end(self, args, state, control, **kw):
                budget = pieces.budget
                if budget is None or not budget.active:
                    return
                budget.step_done()
                if state.global_step < state.max_steps and not budget.another_fits():  # every rank: rank 0's answer
                    control.should_training_stop = True
                    control.should_save = True  # this step's Trainer checkpoint: the next call resumes from it
                    pieces.stopped_at = int(state.global_step)

        return _Log()


def _grpo_args(cfg: RunConfig, output_dir: Path, device: str, world: int = 1):
    from trl import GRPOConfig

    from ..trainer import trainer_run_args  # imports transformers: only when GRPO is set up

    rl = cfg.rl
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    kw: dict[str, Any] = dict(
        **trainer_run_args(cfg, device),
        output_dir=str(output_dir),
        max_steps=rl.grpo_steps,
        per_device_train_batch_size=rl.n_samples,  # one group of completions per micro-batch
        # the step's groups, generated together: tasks_per_round over all processes, each its share
        gradient_accumulation_steps=rl.tasks_per_round // world,
        ddp_find_unused_parameters=False,  # every LoRA weight gets a gradient every step
        num_generations=rl.n_samples,
        max_completion_length=rl.max_new_tokens,
        temperature=rl.temperature,
        top_p=rl.top_p,
        learning_rate=rl.rl_learning_rate,
        beta=rl.grpo_beta,
        logging_steps=1,
        save_steps=max(1, rl.grpo_steps // 10),
        save_total_limit=2,
        remove_unused_columns=False,
        warmup_steps=0,
    )
    return GRPOConfig(**{k: v for k, v in kw.items() if k in fields})


def train_grpo(cfg: RunConfig, paths: RunPaths | None = None, *, pool=None, tasks: Sequence[Task] | None = None,
               extra_candidates: Callable[[Task, int], Sequence[str]] | None = None, force: bool = False,
               engine: str = "auto", echo: Callable[[str], None] | None = None,
               ranks: Ranks | None = None) -> RLResult:
    """Run (or resume, or find finished) GRPO from the run's SFT adapter; see the module doc.

    `extra_candidates(task, step) -> completions` replaces the first samples of each group with
    known completions (the task's reference solution in the tests: best_of_n.reference_candidates);
    they are verified and rewarded like the rest, and marked `injected` in the statistics.
    `ranks`: this process among several (default: from the launcher's environment; one process alone)."""
    import torch
    from transformers import set_seed

    ranks = ranks or Ranks.from_env(models.resolve_device(cfg.device))
    check_grpo_split(cfg, ranks.world)
    say = ranks.say(echo)
    run = open_run(cfg, paths, METHOD, tasks=tasks, force=force, say=say, ranks=ranks)
    finished = ranks.from_main(lambda: _finished_steps(run))
    if finished is not None:
        return run.result("already_done", finished)
    resume, curriculum = _resume_point(run)
    set_seed(cfg.seed)
    model, tokenizer = models.load_policy(cfg, adapter=run.start, trainable=True)
    with verifier_pool(cfg, pool, ranks) as pool:
        pieces = GRPOPieces(cfg, run.paths, model, tokenizer, run.by_level, curriculum, pool, engine, run.base_spec,
                            say, extra_candidates=extra_candidates, ranks=ranks)
        if pieces.sampler.note:
            say(f"RL: {pieces.sampler.note}")
        pieces.budget = StepBudget(cfg.rl.rl_time_budget_s, ranks, start=run.t_start)
        try:
            trainer = grpo_trainer(cfg, model, tokenizer, pieces, run.paths.rl_checkpoint, world=ranks.world)
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
            steps = _save_final_adapter(run, trainer, tokenizer, stopped=pieces.stopped_at is not None)
            if pieces.stopped_at is not None:
                say(f"RL GRPO: {pieces.budget.words(steps, cfg.rl.grpo_steps, 'steps')}")
            del trainer
        except BaseException:
            pieces.close(drop_queued=True)  # an interrupt: no verifying of batches nobody will read
            raise
        else:
            pieces.close()
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    # the log is rank 0's; the other ranks' results carry no history
    status = STOPPED if pieces.stopped_at is not None else "resumed" if resume else "trained"
    result = run.result(status, steps, pieces.history if ranks.is_main else [])
    say(result.summary())
    return result


def grpo_trainer(cfg: RunConfig, model, tokenizer, pieces: GRPOPieces, output_dir: Path, world: int = 1):
    """TRL's GRPOTrainer as this run sets it up: the dataset (`tasks_per_round` numbered slots the
    rollout fills with the tasks the curriculum draws), the config (one group batch per optimizer
    step, checkpoints in `output_dir`), the reward function (`pieces`: the verifier's rewards,
    computed in the rollout), our rollout function and the rl_log callback."""
    from trl import GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
    args = _grpo_args(cfg, output_dir, str(_device_of(model)), world)
    dataset = slot_dataset(cfg.rl.tasks_per_round)
    return GRPOTrainer(model=model, reward_funcs=[pieces], args=args, train_dataset=dataset,
                       processing_class=tokenizer, callbacks=[pieces.callback()], rollout_func=pieces.rollout)


def _finished_steps(run: RLRun) -> int | None:
    """The steps of a resumed GRPO run that already finished (its final adapter saved); None otherwise."""
    final = run.finished_adapter()
    if run.resuming and final and final.get("final") and final.get("method") == METHOD:
        run.say(f"RL GRPO already finished: {final.get('steps')} steps, adapter at {run.paths.rl_checkpoint}")
        return int(final.get("steps", 0))
    return None


def _resume_point(run: RLRun) -> tuple[Path | None, Curriculum]:
    """The newest complete Trainer checkpoint to resume from (None: a fresh start); checkpoints
    past it, or half-written, removed; the log and the curriculum cut back to its step. With several
    ranks rank 0 does all that, and every rank resumes from the checkpoint it chose."""
    ranks = run.ranks
    curriculum = None

    def on_main() -> str | None:
        nonlocal curriculum
        resume, curriculum = _resume_on_main(run)
        return str(resume) if resume else None

    resume = ranks.from_main(on_main)
    if curriculum is None:  # the curriculum is rank 0's: the others never draw
        curriculum = Curriculum(CurriculumSettings.from_config(run.cfg.rl), run.cfg.seed)
    return (Path(resume) if resume else None), curriculum


def _resume_on_main(run: RLRun) -> tuple[Path | None, Curriculum]:
    cfg, root = run.cfg, run.paths.rl_checkpoint
    resume = latest_complete_checkpoint(root) if run.resuming else None
    step0 = checkpoint_step(resume) if resume else 0
    for step, folder in trainer_checkpoints(root):
        if resume is None or step > step0:
            shutil.rmtree(folder, ignore_errors=True)  # half-written, or newer than what we resume
    trim_rl_log(run.paths, "step", step0)
    curriculum = Curriculum.resume(CurriculumSettings.from_config(cfg.rl), cfg.seed, run.paths.curriculum_log,
                                   upto_step=step0)
    run.say(f"RL GRPO: {len(run.tasks)} training tasks, {cfg.rl.grpo_steps} steps x {cfg.rl.tasks_per_round} tasks "
            f"x {cfg.rl.n_samples} completions" + (f"; resuming from {resume.name}" if resume else ""))
    return resume, curriculum


def _save_final_adapter(run: RLRun, trainer, tokenizer, stopped: bool = False) -> int:
    """The trained adapter to checkpoints/rl, marked final (or, `stopped` by the time budget, marked so: a
    later call resumes from the Trainer checkpoint saved beside it), by rank 0 (every rank holds the same
    weights under DDP); -> the optimizer steps taken."""
    steps = int(trainer.state.global_step)
    if run.ranks.is_main:
        policy = trainer.accelerator.unwrap_model(trainer.model)
        more = {"stopped": STOPPED} if stopped else {}
        models.save_checkpoint(policy, tokenizer, run.paths.rl_checkpoint, base_model=run.base_spec, extra={
            **more, "stage": "rl", "method": METHOD, "steps": steps, "final": not stopped,
            "processes": run.ranks.world,
            "fingerprint_start": run.fingerprint["start"], "fingerprint": fingerprint_digest(run.fingerprint),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    run.ranks.barrier()
    return steps


def _device_of(model):
    import torch

    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")
