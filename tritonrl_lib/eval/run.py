"""Evaluation: a model's k samples per task, verified, summarised as an eval record.

    evaluate_run(cfg, paths)            base, sft and rl of a run -> eval/eval_<stage>.json each
    evaluate_models(cfg, models, tasks)  several models: each generates, then all verified in one pass
    evaluate_model(cfg, spec, tasks, ...)  one model (any `load_policy` spec) -> one record

For each model stage: load the policy (base model, or base + the stage's LoRA adapter), write
`eval_k` completions per task with the same prompt every stage uses (rollout/, batched), free
the model, then verify every completion in the verifier pool's worker processes: the completions of
all the models evaluated together in one pass, task by task, so the slowest problems (KernelBench's
largest, each alone on its GPU) are waited for once, not once per model. The record
(`eval_<stage>.json`) has the source's layout (`model_path`, `num_tasks`, `metrics`,
`detailed_results`) plus what is needed to trust and reproduce it: seed, task source and ids, k,
sampling settings, device, wall time, and notes such as "timing skipped: no GPU".

The tasks come from `heldout.py` (the run's held-out sets, or any task source); the record's
format, fingerprint and the RL-minus-SFT comparison from `record.py`; which checkpoint a model
stage is, named by its weights' bytes, from `identity.py`. The record's metrics give each held-out
set under `metrics.by_set`, and every rate a 95% interval from resampling tasks
(`metrics.intervals`, `eval.bootstrap_resamples`).

Speed: every record's metrics give fast_p (p = 0, 1.0, 1.5, 2.0) and the geometric-mean speedup
against the verifier's own eager timing; where this machine has stored reference times
(`tritonrl baselines`, eval.baselines; baselines.py) each correct timed row also gets its speedup over
eager PyTorch and over `torch.compile`, and the metrics `vs_eager_baseline` and `vs_compile` (null,
with a note, where there are none). A reused record gets baselines measured since attached.

Identical code is verified once per record (verify/batch.py): at a low temperature the k
samples of a task often repeat, and a repeat would only get the same verdict again.

Resumable: a model whose record exists with the same fingerprint is not evaluated again. One cut off before its record is written resumes per sample:
its completions (once generated) and each verdict (as it comes in) wait in a hidden folder beside
the record (`resume.py`). A model stage whose checkpoint is missing is skipped with a note
naming the notebook that makes it (the base model always exists).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..core.config import ConfigError, RunConfig
from ..core.paths import RunPaths
from ..model.load import explain_oom, load_policy, resolve_device
from ..rollout import Rollout, task_prompts
from ..tasks.task import Task
from ..verify.batch import VerifyStats, dedupe_key, verify_unique
from ..verify.cache import VerdictCache
from .baselines import (NOTE_PREFIX, BaselineError, attach_to_record, baselines_for_eval, measure_for_solved,
                        timing_settings)
from .heldout import load_eval_tasks
from .identity import MODEL_STAGES, MissingCheckpoint, model_of, weights_identity
from .record import (EvalSampling, attach_comparison, build_record, device_description, eval_sampling, fingerprint,
                     read_record, write_record)
from .resume import clear_resume, partial_path, read_partial, resume_dir, verdicts_dir, write_partial


def generate_completions(model, tokenizer, tasks: Sequence[Task], sampling: EvalSampling,
                         progress: bool = True, log: Callable[[str], None] | None = None
                         ) -> tuple[list[list[Any]], dict[str, Any]]:
    """k completions per task (rollout.Completion objects, [task][sample]) and the rollout's stats.
    `log` hears the engine's choice before generating: the hf fallback is several times slower,
    and a long generation should say why it is long while it runs."""
    prompts = task_prompts(tokenizer, tasks)
    sampler = Rollout(model, tokenizer)
    if log is not None:
        log(f"generating with the {sampler.engine_name} engine" + (f" ({sampler.note})" if sampler.note else ""))
    result = sampler.generate(prompts, sampling.to_rollout(), progress=progress)
    sampler.release()
    return result.completions, result.stats.to_dict()


def _free(model) -> None:
    del model
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:
        pass


# --------------------------------------------------------------------------- evaluating


@dataclass
class ModelEval:
    model_stage: str
    status: str  # evaluated | reused | skipped
    path: Path | None = None
    record: dict[str, Any] | None = None
    note: str = ""


@dataclass
class EvalRunResult:
    evals: list[ModelEval]

    def records(self) -> dict[str, dict[str, Any]]:
        return {s.model_stage: s.record for s in self.evals if s.record is not None}

    def summary(self) -> str:
        lines = []
        for s in self.evals:
            if s.record is None:
                lines.append(f"{s.model_stage:5s} {s.status}: {s.note}")
                continue
            m = s.record["metrics"]
            lines.append(f"{s.model_stage:5s} {s.status}: {s.record['num_tasks']} tasks x k={s.record['k']}: "
                         f"valid {_fmt(m['valid_rate'])}  compiled {_fmt(m['compiled_rate'])}  "
                         f"correct {_fmt(m['correct_rate'])}  fast_1 {_fmt(m['fast1_rate'])}  "
                         f"pass@1 {_fmt(m['pass_at_1'])}  -> {s.path}")
        return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}%"


class VerdictFolders:
    """Verdict caches in several folders read as one (verify/cache.py's keys): a verdict is found in any
    of them and stored in each, so every model of a joint verification can resume from its own folder."""

    def __init__(self, folders: Sequence[Path]):
        self.caches = [VerdictCache(f) for f in folders]

    def get(self, key: str):
        return next((v for v in (c.get(key) for c in self.caches) if v is not None), None)

    def put(self, key: str, verdict) -> None:
        for c in self.caches:
            c.put(key, verdict)


class LazyPool:
    """Starts the verifier pool on first use, so a fully resumed evaluation starts no workers.

    `keep_verdicts_in(folder or folders)`: the pool it starts (now or later) stores each verdict there as it
    comes in and finds it there again (verify/cache.py's keys and rules), so an evaluation cut off
    mid-verification redoes only what it had not verified (eval/resume.py). With verify.verify_cache
    on the user's own cache serves instead, unless the evaluation is forced. A pool handed in by the
    caller is used as it is."""

    def __init__(self, cfg: RunConfig, pool=None):
        self.cfg, self.pool, self.own = cfg, pool, pool is None
        self._cache = self._default_cache()

    def _default_cache(self):
        return VerdictCache() if self.cfg.verify.verify_cache else None

    def keep_verdicts_in(self, folder: Path | Sequence[Path] | None, force: bool = False) -> None:
        folders = [] if folder is None else [folder] if isinstance(folder, Path) else list(folder)
        use_own = bool(folders) and (force or not self.cfg.verify.verify_cache)
        self._cache = VerdictFolders(folders) if use_own else self._default_cache()
        if self.own and self.pool is not None:
            self.pool.cache = self._cache

    def get(self):
        if self.pool is None:
            from ..verify.pool import VerifierPool  # deferred: imports torch, which a resumed evaluation never needs

            self.pool = VerifierPool(self.cfg.verify, device=self.cfg.device, cache=False)
            self.pool.cache = self._cache
        return self.pool

    def map(self, *args, **kwargs):
        """VerifierPool.map, so a lazy pool can be handed on where a pool is expected (the receiver
        wraps it again, does not own it, and so never closes it)."""
        return self.get().map(*args, **kwargs)

    def close(self) -> None:
        if self.own and self.pool is not None:
            self.pool.close()
            self.pool = None


def sample_model(cfg: RunConfig, spec: str, tasks: Sequence[Task], sampling: EvalSampling, *,
                 adapter: Path | None = None, progress: bool = True, log: Callable[[str], None] | None = None
                 ) -> tuple[list[list[Any]], dict[str, Any]]:
    """Load a policy (frozen), write `sampling.k` completions per task, free the model again."""
    t0 = time.perf_counter()
    model, tok = load_policy(cfg, adapter=adapter, trainable=False, spec=None if adapter else spec)
    try:
        with explain_oom("eval", cfg):  # out of GPU memory: which setting to lower
            completions, stats = generate_completions(model, tok, tasks, sampling, progress=progress, log=log)
    finally:
        _free(model)
    return completions, {**stats, "wall_s": round(time.perf_counter() - t0, 2)}


def score_completions(cfg: RunConfig, tasks: Sequence[Task], completions: Sequence[Sequence[Any]],
                      sampling: EvalSampling, *, model_stage: str, model_path: str, pool=None, task_source: str = "",
                      device: str = "cpu", progress: bool = True, started: float | None = None,
                      extra: dict[str, Any] | None = None, baselines: tuple[Any, str | None] | None = None
                      ) -> dict[str, Any]:
    """Verify completions ([task][sample]: rollout Completions or strings) in the verifier pool
    and build the eval record, with speedups over this machine's stored baselines where there are
    some (`baselines`: what find_baselines returned; found here when not given)."""
    flat_tasks = [t for t, cs in zip(tasks, completions) for _ in cs]
    flat_text = [c if isinstance(c, str) else c.text for cs in completions for c in cs]
    lazy = LazyPool(cfg, pool)
    t1 = time.perf_counter()
    try:
        verdicts, vstats = verify_unique(lazy.get(), flat_tasks, flat_text, desc=f"verify {model_stage}",
                                         progress=progress)
    finally:
        lazy.close()
    return record_of(cfg, tasks, completions, verdicts, vstats, sampling, model_stage=model_stage,
                     model_path=model_path, task_source=task_source, device=device, verify_started=t1,
                     started=started, extra=extra, baselines=baselines)


def record_of(cfg: RunConfig, tasks: Sequence[Task], completions: Sequence[Sequence[Any]], verdicts: Sequence[Any],
              vstats: VerifyStats, sampling: EvalSampling, *, model_stage: str, model_path: str, task_source: str,
              device: str, verify_started: float, started: float | None = None,
              extra: dict[str, Any] | None = None, baselines: tuple[Any, str | None] | None = None) -> dict[str, Any]:
    """The eval record of completions and their verdicts (flat, in [task][sample] order)."""
    now = time.perf_counter()
    record = build_record(model_stage=model_stage, model_path=model_path, tasks=tasks, completions=completions,
                          verdicts=verdicts, sampling=sampling, task_source=task_source or cfg.eval.eval_tasks,
                          device=device_description(device),
                          wall_s=now - (started if started is not None else verify_started),
                          extra={"verify_wall_s": round(now - verify_started, 2), "verify": vstats.to_dict(),
                                 "run": cfg.run_name, "profile": cfg.profile, **(extra or {})},
                          resamples=cfg.eval.bootstrap_resamples)
    store, note = baselines if baselines is not None else find_baselines(cfg, device)
    attach_to_record(record, tasks, store, note, cfg.eval.bootstrap_resamples)
    return record


def find_baselines(cfg: RunConfig, device: str) -> tuple[Any, str | None]:
    """This machine's baselines file for the evaluation (eval.baselines), or None and why not. A file
    that cannot be read is a note, not a failed evaluation; a path that does not exist is a ConfigError."""
    try:
        return baselines_for_eval(cfg.eval.baselines, cfg.outputs_dir, device)
    except BaselineError as e:
        return None, f"{NOTE_PREFIX}{e}"


def _same_work(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Fingerprints that differ at most in which stage and which folder the model came from."""
    drop = ("stage", "model")
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def twin_record(out: Path, spec: str, fp: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """Another record beside `out` made by a model with byte-identical weights on the same tasks with
    the same sampling and verifier settings, relabelled as this evaluation's; None when there is none."""
    mine = weights_identity(spec)
    if mine is None:
        return None
    for other in sorted(out.parent.glob("eval_*.json")):
        if other == out:
            continue
        rec = read_record(other)
        if not rec or not isinstance(rec.get("fingerprint"), dict) or not _same_work(rec["fingerprint"], fp):
            continue
        if weights_identity(str(rec.get("model_path", ""))) != mine:
            continue
        source = rec.get("stage", other.stem[5:])
        return source, relabelled(rec, source, spec, fp)
    return None


def relabelled(rec: dict[str, Any], source: str, spec: str, fp: dict[str, Any]) -> dict[str, Any]:
    """`rec` (of model stage `source`) as the record of a model with byte-identical weights (`spec`, `fp`)."""
    stage = fp["stage"]
    rows = [{**r, "model_stage": stage} for r in rec["detailed_results"]]
    note = f"reused the evaluation of {source} ({rec.get('model_path')}): byte-identical weights"
    return {**rec, "detailed_results": rows, "stage": stage, "model_path": spec, "fingerprint": fp,
            "notes": [*rec.get("notes", []), note], "reused_from": source}


@dataclass
class ModelToEval:
    """One model of an evaluation: its stage name, `load_policy` spec, LoRA folder and record path."""
    model_stage: str
    spec: str
    adapter: Path | None = None
    out: Path | None = None


@dataclass
class _Sampled:
    """A model whose completions wait for verification."""
    model: ModelToEval
    fp: dict[str, Any]
    resume: Path | None
    completions: list[list[Any]]
    gen_stats: dict[str, Any]
    started: float


@dataclass
class _Twin:
    """A model whose weights are byte for byte those of a model evaluated beside it (`of`): its record is
    that one's, relabelled, and it is neither generated nor verified again."""
    model: ModelToEval
    fp: dict[str, Any]
    of: _Sampled


def evaluate_model(cfg: RunConfig, spec: str, tasks: Sequence[Task], *, model_stage: str = "custom",
                   adapter: Path | None = None, out: Path | None = None, pool=None, k: int | None = None,
                   task_source: str = "", force: bool = False, progress: bool = True,
                   log: Callable[[str], None] = print) -> ModelEval:
    """Evaluate one model on `tasks`, write the record to `out` (when given) and return it.
    With `out` holding a record of the same fingerprint (and not `force`), that record is reused."""
    return evaluate_models(cfg, [ModelToEval(model_stage, spec, adapter, out)], tasks, pool=pool, k=k,
                           task_source=task_source, force=force, progress=progress, log=log)[0]


def evaluate_models(cfg: RunConfig, models: Sequence[ModelToEval], tasks: Sequence[Task], *, pool=None,
                    k: int | None = None, task_source: str = "", force: bool = False, progress: bool = True,
                    log: Callable[[str], None] = print) -> list[ModelEval]:
    """Evaluate several models on the same `tasks`: each writes its completions first (or reuses its
    record), then all their completions are verified in one pass, task by task. One pass because a
    KernelBench evaluation's time is its tail (the largest problems, each alone on its GPU): verified
    one model after another, every model pays that tail; together, once, and a reference phase the
    pool keeps serves every model's samples of that task. Each model keeps its own record, resume
    folder (every verdict is stored in each waiting model's folder) and fingerprint."""
    if not models:
        return []
    device = resolve_device(cfg.device)
    sampling = eval_sampling(cfg, k)
    baselines = find_baselines(cfg, device)  # before generating: a wrong eval.baselines path fails at once
    hashed: dict[str, str | None] = {}  # each folder's weights hashed once, however many models it is compared with

    def identity(spec: str) -> str | None:
        if spec not in hashed:
            hashed[spec] = weights_identity(spec)
        return hashed[spec]

    done: list[ModelEval | _Sampled | _Twin] = []
    for m in models:
        done.append(_reuse_or_sample(cfg, m, tasks, sampling, device, baselines, force, progress, log,
                                     [d for d in done if isinstance(d, _Sampled)], identity))
    waiting = [d for d in done if isinstance(d, _Sampled)]
    evals: dict[int, ModelEval] = {}
    if waiting:
        scored = _verify_together(cfg, tasks, waiting, sampling, pool, task_source, device, baselines, force,
                                  progress, log)
        evals = {id(w): e for w, e in zip(waiting, scored)}
    out: list[ModelEval] = []
    for d in done:
        if isinstance(d, _Twin):
            source = evals[id(d.of)]
            rec = relabelled(source.record, source.model_stage, d.model.spec, d.fp)
            if d.model.out is not None:
                write_record(d.model.out, rec)
            out.append(ModelEval(d.model.model_stage, "reused", d.model.out, rec))
        else:
            out.append(evals[id(d)] if isinstance(d, _Sampled) else d)
    return out


def _reuse_or_sample(cfg: RunConfig, m: ModelToEval, tasks: Sequence[Task], sampling: EvalSampling, device: str,
                     baselines: tuple[Any, str | None], force: bool, progress: bool, log: Callable[[str], None],
                     beside: Sequence[_Sampled] = (), identity: Callable[[str], str | None] = weights_identity
                     ) -> ModelEval | _Sampled | _Twin:
    """The model's finished record (its own, or a byte-identical twin's), else a model evaluated `beside` it
    with byte-identical weights, else its completions: generated now or by an earlier call that was cut off
    before verifying them."""
    model_stage, out = m.model_stage, m.out
    fp = fingerprint(model_stage=model_stage, spec=m.spec, tasks=tasks, sampling=sampling, cfg=cfg, device=device)
    if out is not None and not force:
        old = read_record(out)
        if old is not None and old.get("fingerprint") == fp:
            # the verdicts stand; speedups over baselines measured (or changed) since are attached
            if attach_to_record(old, tasks, *baselines, cfg.eval.bootstrap_resamples):
                write_record(out, old)
                log(f"{model_stage}: reusing {out} (same model, tasks and settings); baselines attached again")
            else:
                log(f"{model_stage}: reusing {out} (same model, tasks and settings)")
            return ModelEval(model_stage, "reused", out, old)
        twin = twin_record(out, m.spec, fp)
        if twin is not None:
            name, rec = twin
            attach_to_record(rec, tasks, *baselines, cfg.eval.bootstrap_resamples)  # as for its own record
            write_record(out, rec)
            log(f"{model_stage}: its weights are byte for byte those of {name}, evaluated on the same tasks with "
                f"the same settings: {name}'s record reused as {out.name}, not generated again")
            return ModelEval(model_stage, "reused", out, rec)
    mine = identity(m.spec) if beside else None
    twin = next((b for b in beside if mine is not None and _same_work(b.fp, fp) and identity(b.model.spec) == mine),
                None)
    if twin is not None:
        log(f"{model_stage}: its weights are byte for byte those of {twin.model.model_stage}, evaluated beside it: "
            "its record will be that one's, not generated again")
        return _Twin(m, fp, twin)
    t0 = time.perf_counter()
    resume = resume_dir(out, fp) if out is not None else None
    if resume is not None and force:
        clear_resume(out)  # forced: from scratch, and resumable from there
    partial = partial_path(resume) if resume is not None else None
    saved = read_partial(partial, fp, tasks, sampling.k) if partial is not None else None
    if saved is not None:
        completions, gen_stats = saved
        log(f"{model_stage}: {sum(len(c) for c in completions)} completions generated by an earlier call "
            f"({resume.name}); resuming at verification")
    else:
        log(f"{model_stage}: generating {sampling.k} sample(s) for each of {len(tasks)} tasks with {m.spec}")
        completions, gen_stats = sample_model(cfg, m.spec, tasks, sampling, adapter=m.adapter, progress=progress,
                                              log=lambda msg: log(f"{model_stage}: {msg}"))
        log(f"{model_stage}: generated in {gen_stats.get('wall_s')} s "
            f"({gen_stats.get('tokens_per_s')} tokens/s, {gen_stats.get('engine')} engine)")
        if partial is not None:
            write_partial(partial, fp, completions, gen_stats)
    return _Sampled(m, fp, resume, [list(cs) for cs in completions], gen_stats, t0)


def interleaved(tasks: Sequence[Task], per_model: Sequence[Sequence[Sequence[Any]]]
                ) -> tuple[list[Task], list[str], list[tuple[int, int]], list[int]]:
    """Several models' completions ([model][task][sample]: Completions or texts) as one list, task by task:
    (tasks, texts, (model, index within that model's completions) of each, each model's count). A task's
    samples of every model come together, so its cached reference serves them all and a cut-off leaves the
    same tasks unverified in each (benchmarks/verify_kept.py verifies kept completions in this order too)."""
    where: list[tuple[int, int]] = []
    flat_tasks: list[Task] = []
    flat_text: list[str] = []
    offsets = [0] * len(per_model)
    for t_index, task in enumerate(tasks):
        for m_index, completions in enumerate(per_model):
            for c in completions[t_index]:
                where.append((m_index, offsets[m_index]))
                offsets[m_index] += 1
                flat_tasks.append(task)
                flat_text.append(c if isinstance(c, str) else c.text)
    return flat_tasks, flat_text, where, offsets


def first_order(flat_tasks: Sequence[Task], first: str) -> list[int]:
    """The verification order with the tasks whose id holds `first` ahead (eval.verify_first), each part in
    its own order (a task's samples stay together); every index once ("" = as they are)."""
    return sorted(range(len(flat_tasks)), key=lambda i: bool(first) and first not in flat_tasks[i].id)


def _verify_together(cfg: RunConfig, tasks: Sequence[Task], waiting: Sequence[_Sampled], sampling: EvalSampling,
                     pool, task_source: str, device: str, baselines: tuple[Any, str | None], force: bool,
                     progress: bool, log: Callable[[str], None]) -> list[ModelEval]:
    """Verify every waiting model's completions in one pass, interleaved task by task (a cut-off leaves
    each model's same tasks unverified, and a task's samples meet its cached reference together); write
    each model's record and clear its resume folder."""
    names = [w.model.model_stage for w in waiting]
    flat_tasks, flat_text, where, offsets = interleaved(tasks, [w.completions for w in waiting])
    order = first_order(flat_tasks, cfg.eval.verify_first)  # a cut-off then leaves the others unverified
    flat_tasks, flat_text, where = ([xs[i] for i in order] for xs in (flat_tasks, flat_text, where))
    log(f"{' + '.join(names)}: verifying {len(flat_text)} completions" + (" in one pass" if len(waiting) > 1 else ""))
    lazy = pool if isinstance(pool, LazyPool) else LazyPool(cfg) if pool is None else None
    folders = [verdicts_dir(w.resume) for w in waiting if w.resume is not None]
    if lazy is not None and folders:
        lazy.keep_verdicts_in(folders, force=force)
    t1 = time.perf_counter()
    try:
        verdicts, joint = verify_unique(pool if lazy is None else lazy.get(), flat_tasks, flat_text,
                                        desc=f"verify {'+'.join(names)}", progress=progress)
    finally:
        if lazy is not None:
            lazy.keep_verdicts_in(None)
            if pool is None:
                lazy.close()
    mine: list[list[Any]] = [[None] * n for n in offsets]
    for (m_index, i), v in zip(where, verdicts):
        mine[m_index][i] = v
    out: list[ModelEval] = []
    for m_index, w in enumerate(waiting):
        texts = [c if isinstance(c, str) else c.text for cs in w.completions for c in cs]
        own = [t for t, cs in zip(tasks, w.completions) for _ in cs]
        stats = VerifyStats(len(texts), len({dedupe_key(t, x) for t, x in zip(own, texts)}), joint.seconds)
        extra: dict[str, Any] = {"generation": w.gen_stats, "fingerprint": w.fp}
        if len(waiting) > 1:
            extra["verified_with"] = [n for n in names if n != w.model.model_stage]
        record = record_of(cfg, tasks, w.completions, mine[m_index], stats, sampling,
                           model_stage=w.model.model_stage, model_path=w.model.spec, task_source=task_source,
                           device=device, verify_started=t1, started=w.started, extra=extra, baselines=baselines)
        if w.model.out is not None:
            write_record(w.model.out, record)
            clear_resume(w.model.out)  # the record holds every completion and verdict now
        out.append(ModelEval(w.model.model_stage, "evaluated", w.model.out, record))
    return out


def evaluate_run(cfg: RunConfig, paths: RunPaths | None = None, model_stages: Sequence[str] | None = None, *,
                 pool=None, force: bool = False, progress: bool = True,
                 log: Callable[[str], None] = print) -> EvalRunResult:
    """Evaluate the run's model stages (default cfg.eval.eval_stages) on cfg.eval.eval_tasks, writing
    paths.eval_file(model_stage) for each. Missing checkpoints are skipped with a note; finished
    records with the same fingerprint are reused."""
    paths = paths or cfg.paths
    model_stages = list(model_stages or cfg.eval.eval_stages)
    unknown = [s for s in model_stages if s not in MODEL_STAGES]
    if unknown:
        raise ConfigError(f"eval_stages: {', '.join(unknown)} not among {', '.join(MODEL_STAGES)}")
    tasks = load_eval_tasks(cfg, paths)
    log(f"evaluating {', '.join(model_stages)} on {len(tasks)} task(s) from {cfg.eval.eval_tasks!r} "
        f"(levels: {', '.join(f'L{l}: {sum(t.level == l for t in tasks)}' for l in sorted({t.level for t in tasks}))})")
    lazy = LazyPool(cfg, pool)  # started only when a model actually needs verifying
    results: list[ModelEval] = []
    found: list[ModelToEval] = []
    for model_stage in model_stages:
        try:
            spec, adapter = model_of(cfg, paths, model_stage)
        except MissingCheckpoint as e:
            log(f"{model_stage}: skipped: {e}")
            results.append(ModelEval(model_stage, "skipped", None, None, str(e)))
            continue
        found.append(ModelToEval(model_stage, spec, adapter, paths.eval_file(model_stage)))
    try:
        results += evaluate_models(cfg, found, tasks, pool=lazy, task_source=cfg.eval.eval_tasks, force=force,
                                   progress=progress, log=log)
    finally:
        lazy.close()
    results.sort(key=lambda r: model_stages.index(r.model_stage))
    if cfg.eval.baselines_measure == "solved":
        time_solved_tasks(cfg, tasks, results, progress, log)
    attach_comparison({s.model_stage: (s.record, s.path) for s in results
                       if s.record is not None and s.path is not None},
                      paths.eval_comparison, cfg.eval.bootstrap_resamples)
    return EvalRunResult(results)


def time_solved_tasks(cfg: RunConfig, tasks: Sequence[Task], results: Sequence[ModelEval], progress: bool,
                      log: Callable[[str], None]) -> None:
    """eval.baselines_measure=solved: eager and torch.compile times of the tasks some stage solved, attached to
    every record (each rewritten where that changed it), so its fast_p against torch.compile is known."""
    device = resolve_device(cfg.device)
    if device != "cuda":  # no sample is timed without a GPU: no speedup could be set against these times
        log("baselines: eval.baselines_measure=solved times on a GPU only; none here, nothing measured")
        return
    done = [r for r in results if r.record is not None]
    try:
        store = measure_for_solved([r.record for r in done], tasks, setting=cfg.eval.baselines,
                                   outputs_dir=cfg.outputs_dir, device=device,
                                   timing=timing_settings(cfg.verify), progress=progress, log=log)
    except BaselineError as e:  # e.g. the folder's file is another machine's: the evaluation stands without them
        log(f"baselines: not measured: {e}")
        return
    if store is None:
        return
    for r in done:
        if attach_to_record(r.record, tasks, store, None, cfg.eval.bootstrap_resamples) and r.path is not None:
            write_record(r.path, r.record)
