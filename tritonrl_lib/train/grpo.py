"""GRPO with TRL's GRPOTrainer: LoRA policy, rewards from the verifier pool, curriculum-chosen prompts.

Read top to bottom, `train_grpo`:

1. opens the run as best-of-N does (rl_run.py: the SFT adapter, the training tasks, resume or a
   fresh start) and loads the adapter as a trainable PeftModel;
2. builds a GRPOTrainer whose optimizer step is one *group batch*: `tasks_per_round` prompts x
   `n_samples` completions (num_generations = n_samples; per-device batch = one group;
   gradient accumulation over the groups, so they are generated together in one rollout);
3. generates through `rollout_func` with our rollout engine (rollout/: the same fast sampler and
   stop-at-the-closing-fence rule as best-of-N). The curriculum chooses the tasks *at generation
   time*: the trainer's dataset only holds `tasks_per_round` numbered slots, and each step's slots
   are filled with the tasks the curriculum draws for that step (prompts built by prompts.py
   through the chat template) - so the mix follows the latest rewards with no lag;
4. scores each completion in the verifier pool (`verifier_reward`: candidate code never runs in
   this process), updates the curriculum, records the best policy, and logs one line per step
   to logs/rl_log.jsonl (with TRL's loss, KL and reward statistics merged in);
5. saves resumable Trainer checkpoints in checkpoints/rl/checkpoint-N and the final adapter in
   checkpoints/rl itself. A killed run resumes from the newest complete checkpoint; the
   curriculum and the log are cut back to that step and continue.

One process (one GPU, or the CPU): the curriculum's state lives in this process.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import models
from ..config import RunConfig, RunPaths
from ..curriculum import Curriculum, CurriculumSettings
from ..prompts import format_prompt
from ..rollout import Rollout, SamplingConfig
from ..tasks.task import Task
from .rl_best import maybe_record_best
from .rl_log import append_rl_log, rollout_info, trim_rl_log, verdict_stats, verify_info
from .rl_run import RLResult, open_run, verifier_pool
from .trainer_checkpoints import checkpoint_step, latest_complete_checkpoint, trainer_checkpoints

METHOD = "grpo"
_SLOT = re.compile(r"^curriculum slot (\d+)$")


def slot_dataset(n_slots: int):
    """The trainer's dataset: `n_slots` numbered placeholder prompts the rollout fills with tasks."""
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [[{"role": "user", "content": f"curriculum slot {i}"}]
                                         for i in range(n_slots)], "slot": list(range(n_slots))})


def _slot_of(prompt: Any) -> int:
    text = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
    m = _SLOT.match(text.strip())
    if m is None:
        raise ValueError(f"unexpected GRPO prompt {text[:60]!r}: the dataset must come from slot_dataset()")
    return int(m.group(1))


class GRPOPieces:
    """The rollout function, the reward function and the log callback, sharing one step's state."""

    def __init__(self, cfg: RunConfig, paths: RunPaths, model, tokenizer, by_level: dict[int, list[Task]],
                 curriculum: Curriculum, pool, engine: str, base_spec: str, say: Callable[[str], None],
                 extra_candidates: Callable[[Task, int], Sequence[str]] | None = None):
        self.cfg, self.paths, self.model, self.tokenizer = cfg, paths, model, tokenizer
        self.extra_candidates = extra_candidates
        self.by_level, self.curriculum, self.pool, self.say = by_level, curriculum, pool, say
        self.tasks_by_id = {t.id: t for ts in by_level.values() for t in ts}
        self.base_spec = base_spec
        self.sampler = Rollout(model, tokenizer, engine=engine)
        self.sampling = SamplingConfig.from_config(cfg, engine=engine)
        self.pending: dict[str, Any] | None = None  # this step's record, completed by on_log
        self.history: list[dict[str, Any]] = []
        self.__name__ = "verifier_reward"

    # -- generation -------------------------------------------------------------------

    def rollout(self, prompts: list, trainer) -> dict[str, Any]:
        step = int(trainer.state.global_step)
        slots = [_slot_of(p) for p in prompts]
        uniq = list(dict.fromkeys(slots))
        tasks = self.curriculum.sample_tasks(self.by_level, len(uniq), rng=self.curriculum.rng(step))
        task_of = dict(zip(uniq, tasks))
        counts = {s: slots.count(s) for s in uniq}
        texts = [format_prompt(self.tokenizer, task_of[s]) for s in uniq]
        self.sampler.refresh()  # the optimizer changed the weights since the last step
        sampling = dataclasses.replace(self.sampling, n_samples=max(counts.values()),
                                       seed=self.cfg.seed * 1000 + step)
        t0 = time.perf_counter()
        res = self.sampler.generate(texts, sampling)
        rollout_s = time.perf_counter() - t0
        prompt_ids = {s: self.tokenizer(t, add_special_tokens=False)["input_ids"] for s, t in zip(uniq, texts)}
        # The extra_candidates hook (tests) puts known completions in place of a group's first samples;
        # they are scored like the rest but marked `injected` and left out of the policy's statistics.
        injected = {s: [self.tokenizer(text, add_special_tokens=False)["input_ids"]
                        for text in self.extra_candidates(task_of[s], step)][:counts[s]]
                    for s in uniq} if self.extra_candidates else {s: [] for s in uniq}
        used = {s: 0 for s in uniq}
        out: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "task_id": [], "finish_reason": [],
                                "injected": []}
        for s in slots:
            k = used[s]
            used[s] += 1
            if k < len(injected[s]):
                ids, reason, inj = injected[s][k], "injected", True
            else:
                c = res.completions[uniq.index(s)][k]
                ids, reason, inj = c.token_ids, c.finish_reason, False
            out["prompt_ids"].append(prompt_ids[s])
            # an empty completion would give TRL nothing to score; keep at least one token
            out["completion_ids"].append(ids or [self.tokenizer.eos_token_id])
            out["task_id"].append(task_of[s].id)
            out["finish_reason"].append(reason)
            out["injected"].append(inj)
        self.pending = {"method": METHOD, "step": step, "tasks": [task_of[s].id for s in uniq],
                        "curriculum_p": self.curriculum.p_level2, "rollout": rollout_info(res.stats, rollout_s)}
        self.pending["rollout_tokens_per_s"] = self.pending["rollout"]["tokens_per_s"]
        # TRL reads sampling log-probs only for vLLM importance sampling; we generate on-policy.
        out["logprobs"] = None  # type: ignore[assignment]
        return out

    # -- reward -------------------------------------------------------------------------

    def __call__(self, prompts, completions, completion_ids=None, task_id=None, trainer_state=None,
                 injected=None, **kwargs) -> list[float]:
        """The reward function: each completion's verdict reward from the verifier pool."""
        if task_id is None:
            raise ValueError("verifier_reward needs the task_id of each completion (from the rollout)")
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        tasks = [self.tasks_by_id[t] for t in task_id]
        t0 = time.perf_counter()
        verdicts = self.pool.map(tasks, texts, desc="verify")
        verify_s = time.perf_counter() - t0
        rewards = [float(v.reward) for v in verdicts]
        step = int(trainer_state.global_step) if trainer_state is not None else self.curriculum.step
        own = [i for i in range(len(tasks)) if not (injected and injected[i])]
        stats = verdict_stats([tasks[i].level for i in own], [verdicts[i] for i in own])
        cur = self.curriculum.update([(tasks[i].level, bool(verdicts[i].correct)) for i in own],
                                     method=METHOD, step=step)
        rec = self.pending if self.pending is not None and self.pending.get("step") == step else \
            {"method": METHOD, "step": step}
        rec.update(stats)
        rec["injected"] = len(tasks) - len(own)
        rec["rewards"] = rewards
        rec["verify"] = verify_info(len(texts), verify_s)
        rec["verifications_per_min"] = rec["verify"]["per_minute"]
        rec["curriculum_running_l1"] = cur.running_l1_rate
        rec["curriculum_triggered_at"] = cur.triggered_at
        self.pending = rec
        maybe_record_best(self.paths, self.sampler.model, self.tokenizer, self.base_spec, method=METHOD,
                          where={"step": step, "policy": "sft" if step == 0 else f"step-{step}"}, stats=stats)
        mean = stats["mean_reward"] if stats["mean_reward"] is not None else float("nan")
        self.say(f"grpo step {step}: correct {stats['correct']}/{stats['samples']}, "
                 f"mean reward {mean:.3f}, P(L2)={rec.get('curriculum_p', float('nan')):.2f}")
        return rewards

    # -- logging ------------------------------------------------------------------------

    def callback(self):
        from transformers import TrainerCallback

        pieces = self

        class _Log(TrainerCallback):
            def on_log(self, args, state, control, logs=None, **kw):
                if pieces.pending is None or not logs or "loss" not in logs:
                    return
                rec = pieces.pending
                rec["trl"] = {k: v for k, v in logs.items() if isinstance(v, (int, float))}
                append_rl_log(pieces.paths, rec)
                pieces.history.append(rec)
                pieces.pending = None

        return _Log()


def _grpo_args(cfg: RunConfig, output_dir: Path, device: str):
    from trl import GRPOConfig

    from .sft import trainer_run_args

    rl = cfg.rl
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    kw: dict[str, Any] = dict(
        **trainer_run_args(cfg, device),
        output_dir=str(output_dir),
        max_steps=rl.grpo_steps,
        per_device_train_batch_size=rl.n_samples,  # one group of completions per micro-batch
        gradient_accumulation_steps=rl.tasks_per_round,  # the step's groups, generated together
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
               engine: str = "auto", echo: Callable[[str], None] | None = None) -> RLResult:
    """Run (or resume, or find finished) GRPO from the run's SFT adapter; see the module doc.

    `extra_candidates(task, step) -> completions` replaces the first samples of each group with
    known completions (the task's reference solution in the tests: best_of_n.reference_candidates);
    they are verified and rewarded like the rest, and marked `injected` in the statistics."""
    import torch
    from transformers import set_seed
    from trl import GRPOTrainer

    say = echo or (lambda s: print(s, flush=True))
    run = open_run(cfg, paths, METHOD, tasks=tasks, force=force, say=say)
    paths, root = run.paths, run.paths.rl_checkpoint
    final = run.finished_adapter()
    if run.resuming and final and final.get("final") and final.get("method") == METHOD:
        say(f"RL GRPO already finished: {final.get('steps')} steps, adapter at {root}")
        return run.result("already_done", int(final.get("steps", 0)))
    resume = latest_complete_checkpoint(root) if run.resuming else None
    step0 = checkpoint_step(resume) if resume else 0
    for step, folder in trainer_checkpoints(root):
        if resume is None or step > step0:
            shutil.rmtree(folder, ignore_errors=True)  # half-written, or newer than what we resume
    trim_rl_log(paths, "step", step0)
    curriculum = Curriculum.resume(CurriculumSettings.from_config(cfg.rl), cfg.seed, paths.curriculum_log,
                                   upto_step=step0)
    say(f"RL GRPO: {len(run.tasks)} training tasks, {cfg.rl.grpo_steps} steps x {cfg.rl.tasks_per_round} tasks "
        f"x {cfg.rl.n_samples} completions" + (f"; resuming from {resume.name}" if resume else ""))

    set_seed(cfg.seed)
    model, tokenizer = models.load_policy(cfg, adapter=run.start, trainable=True)
    device = str(_device_of(model))
    with verifier_pool(cfg, pool) as pool:
        pieces = GRPOPieces(cfg, paths, model, tokenizer, run.by_level, curriculum, pool, engine, run.base_spec, say,
                            extra_candidates=extra_candidates)
        if pieces.sampler.note:
            say(f"RL: {pieces.sampler.note}")
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental
        try:
            trainer = GRPOTrainer(model=model, reward_funcs=[pieces], args=_grpo_args(cfg, root, device),
                                  train_dataset=slot_dataset(cfg.rl.tasks_per_round), processing_class=tokenizer,
                                  callbacks=[pieces.callback()], rollout_func=pieces.rollout)
            trainer.train(resume_from_checkpoint=str(resume) if resume else None)
            steps = int(trainer.state.global_step)
            policy = trainer.accelerator.unwrap_model(trainer.model)
            models.save_checkpoint(policy, tokenizer, root, base_model=run.base_spec, extra={
                "stage": "rl", "method": METHOD, "steps": steps, "final": True,
                "fingerprint_start": run.fingerprint["start"], "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
            del trainer
        finally:
            pieces.sampler.release()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    result = run.result("resumed" if resume else "trained", steps, pieces.history)
    say(result.summary())
    return result


def _device_of(model):
    import torch

    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")
