"""Evaluation: a model's k samples per task, verified, summarised as an eval record.

    evaluate_run(cfg, paths)            base, sft and rl of a run -> eval/eval_<stage>.json each
    evaluate_model(cfg, spec, tasks, ...)  one model (any `load_policy` spec) -> one record

For each model stage: load the policy (base model, or base + the stage's LoRA adapter), write
`eval_k` completions per task with the same prompt every stage uses (rollout/, batched), free
the model, then verify every completion in the verifier pool's worker processes. The record
(`eval_<stage>.json`) has the source's layout (`model_path`, `num_tasks`, `metrics`,
`detailed_results`) plus what is needed to trust and reproduce it: seed, task source and ids, k,
sampling settings, device, wall time, and notes such as "timing skipped: no GPU".

Held-out sets (`eval_tasks=heldout`): the run's split gives two, named by `eval.heldout_sets`:
`tasks` = (a) unseen tasks of families trained on, `families` = (b) unseen families; `num_tasks`
caps each set. Every row says which set it is in (`heldout_set`); the record's metrics give each
set under `metrics.by_set`, and every rate a 95% interval from resampling tasks
(`metrics.intervals`, `eval.bootstrap_resamples`). Where both an RL and the SFT record exist,
the RL record gets `vs_sft`: RL minus SFT per rate, overall and per set, with the paired
interval of the difference; `eval/comparison.json` holds the same for every stage.

Speed: every record's metrics give fast_p (p = 0, 1.0, 1.5, 2.0) and the geometric-mean speedup
against the verifier's own eager timing; where this machine has stored reference times
(`tritonrl baselines`, eval.baselines; baselines.py) each correct timed row also gets its speedup over
eager PyTorch and over `torch.compile`, and the metrics `vs_eager_baseline` and `vs_compile` (null,
with a note, where there are none). A reused record gets baselines measured since attached.

Identical code is verified once per record (train/verify_batch.py): at a low temperature the k
samples of a task often repeat, and a repeat would only get the same verdict again.

Resumable: a record holds a fingerprint of everything its numbers depend on (model weights,
tasks, sampling, verifier settings, device kind); a model whose record exists with the same
fingerprint is not evaluated again. One cut off before its record is written resumes per sample:
its completions (once generated) and each verdict (as it comes in) wait in a hidden folder beside
the record (eval_resume.py). A model stage whose checkpoint is missing is skipped with a note
naming the notebook that makes it (the base model always exists).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from . import metrics as M
from .config import ConfigError, RunConfig, RunPaths
from .digests import file_sha256
from .eval_resume import clear_resume, partial_path, read_partial, resume_dir, verdicts_dir, write_partial
from .jsonio import DamagedFile, read_json, write_json
from .tasks.task import Task
from .verify.verdict import Verdict

EVAL_FORMAT = 2  # bump when the record's meaning changes: older records are then re-evaluated
# "stage" alone means a verifier funnel step (Verdict.stage); a model stage is base, sft or rl.
MODEL_STAGES = ("base", "sft", "rl")
TRAINING_NOTEBOOK = {"sft": "02_sft", "rl": "03_rl"}  # the notebook that trains each model stage


class EvalError(RuntimeError):
    """An evaluation that cannot run as asked; the message says what to do."""


class MissingCheckpoint(EvalError, FileNotFoundError):
    """A model stage's checkpoint is not there (or its save did not finish)."""

    def __init__(self, model_stage: str, path: Path):
        self.model_stage, self.path = model_stage, path
        nb = TRAINING_NOTEBOOK.get(model_stage, "")
        super().__init__(f"no finished {model_stage} checkpoint at {path}: train it first "
                         f"(notebooks/{nb}.ipynb, or `tritonrl run --only {nb}` with the same --params and --run)")


# --------------------------------------------------------------------------- tasks


def stable_order(tasks: Sequence[Task]) -> list[Task]:
    """Tasks interleaved across levels, each level in an order fixed by a hash of the task id: a
    cap of n then keeps every level represented, and picks the same tasks in every run and stage
    (the seed is deliberately not involved, so runs with different seeds share their eval set)."""
    by_level: dict[int, list[Task]] = {}
    for t in tasks:
        by_level.setdefault(int(t.level), []).append(t)
    for lvl in by_level:
        by_level[lvl].sort(key=lambda t: hashlib.sha256(t.id.encode()).hexdigest())
    out: list[Task] = []
    queues = [by_level[lvl] for lvl in sorted(by_level)]
    i = 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


def cap_tasks(tasks: Sequence[Task], num_tasks: int) -> list[Task]:
    """At most `num_tasks` tasks (0 or less: all), chosen by `stable_order`, then sorted by level
    and id for reading."""
    chosen = stable_order(tasks)
    if num_tasks > 0:
        chosen = chosen[:num_tasks]
    return sorted(chosen, key=lambda t: (t.level, t.id))


def heldout_task_ids(paths: RunPaths, tasks: Sequence[Task]) -> list[Task]:
    """The tasks the run's split holds out of training (by id or op family)."""
    from .data.split import SplitUnavailable, is_heldout, load_run_split

    try:
        split = load_run_split(paths.split)
    except SplitUnavailable as e:
        raise EvalError(f"eval_tasks=heldout needs the run's split: {e}; or evaluate on eval_tasks=builtin") from None
    held = [t for t in tasks if is_heldout(split, t)]
    if not held:
        raise EvalError(f"the split at {paths.split} holds out none of the {len(tasks)} tasks loaded from "
                        f"{paths.split.parent}; was 01_data run with another task_source? Use eval_tasks=builtin")
    return held


HELDOUT_SETS = {"tasks": "(a) unseen tasks of trained families", "families": "(b) unseen families"}


def heldout_sets(paths: RunPaths, tasks: Sequence[Task], names: Sequence[str]) -> dict[str, list[Task]]:
    """The run's held-out evaluation sets among `tasks`: name -> tasks, each task tagged with its
    set in `meta["heldout_set"]`. A set the split does not hold (an older split, or
    heldout_in_family=0) is left out; none at all is an EvalError."""
    from .data.split import SplitUnavailable, heldout_set_of, load_run_split

    try:
        split = load_run_split(paths.split)
    except SplitUnavailable as e:
        raise EvalError(f"eval_tasks=heldout needs the run's split: {e}; or evaluate on eval_tasks=builtin") from None
    out: dict[str, list[Task]] = {}
    for name in names:
        if name not in HELDOUT_SETS:
            raise ConfigError(f"held-out set {name!r}: expected one of {', '.join(HELDOUT_SETS)}")
        chosen = [dataclasses.replace(t, meta={**t.meta, "heldout_set": name}) for t in tasks
                  if heldout_set_of(split, t) == name]
        if chosen:
            out[name] = chosen
    if not out:
        raise EvalError(f"the split at {paths.split} holds none of the {len(tasks)} tasks in the held-out sets "
                        f"{', '.join(names)}; was 01_data run with another task_source? Use eval_tasks=builtin")
    return out


def load_eval_tasks(cfg: RunConfig, paths: RunPaths | None = None, source: str | None = None,
                    num_tasks: int | None = None) -> list[Task]:
    """The evaluation tasks: `source` (default cfg.eval.eval_tasks) is `heldout` (the run's held-out
    sets of data.task_source, eval.heldout_sets, each capped to `num_tasks`), `builtin`, a
    KernelBench checkout, a table file or a hub name; capped to `num_tasks` (default
    cfg.eval.num_tasks) deterministically."""
    from .tasks.loaders import TaskSourceError, load_tasks

    source = (source or cfg.eval.eval_tasks).strip()
    n = cfg.eval.num_tasks if num_tasks is None else num_tasks
    try:
        if source == "heldout":
            paths = paths or cfg.paths
            sets = heldout_sets(paths, load_tasks(cfg.data.task_source, size=cfg.data.task_size),
                                cfg.eval.heldout_sets)
            return [t for name in sets for t in cap_tasks(sets[name], n)]
        else:
            tasks = load_tasks(source, size=cfg.data.task_size)
    except TaskSourceError as e:
        raise EvalError(f"eval tasks {source!r}: {e}") from None
    if not tasks:
        raise EvalError(f"no tasks in {source!r}")
    return cap_tasks(tasks, n)


# --------------------------------------------------------------------------- models


def model_of(cfg: RunConfig, paths: RunPaths, model_stage: str) -> tuple[str, Path | None]:
    """(model spec, adapter folder or None) of a run's model stage; MissingCheckpoint when not trained."""
    from .models import checkpoint_complete

    if model_stage == "base":
        return cfg.model.model, None
    if model_stage not in MODEL_STAGES:
        raise ConfigError(f"eval stage {model_stage!r} is not one of {', '.join(MODEL_STAGES)}")
    folder = paths.checkpoint(model_stage)
    if not checkpoint_complete(folder):
        raise MissingCheckpoint(model_stage, folder)
    return str(folder), folder


_WEIGHT_DIGESTS: dict[tuple[str, int, int], str] = {}


def _weights_digest(f: Path) -> str:
    """The SHA-256 of a weights file, hashed once per process while its size and mtime hold."""
    st = f.stat()
    key = (str(f.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _WEIGHT_DIGESTS:
        _WEIGHT_DIGESTS[key] = file_sha256(f)
    return _WEIGHT_DIGESTS[key]


def model_identity(spec: str) -> str:
    """A hash of what a spec loads: a folder's config/marker and weights' bytes, or the spec string
    itself (`embedded`, `tiny`, a hub id: their content is fixed by name). The weights' content, not
    their mtime: a checkpoint copied to another machine (tar, cp, rsync keep mtimes to the second at
    best) is the same model, and its evaluation records still hold."""
    p = Path(spec).expanduser()
    if spec in ("embedded", "tiny") or not p.is_dir():
        return spec
    h = hashlib.sha256()
    for name in ("tritonrl_model.json", "adapter_config.json", "config.json"):
        f = p / name
        if f.is_file():
            h.update(f.read_bytes())
    for f in sorted(p.glob("*.safetensors")) + sorted(p.glob("*.bin")):
        h.update(f"{f.name}:{_weights_digest(f)}".encode())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------- sampling


@dataclass
class EvalSampling:
    k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    seed: int
    notes: list[str] = field(default_factory=list)

    def to_rollout(self):
        from .rollout import SamplingConfig

        return SamplingConfig(n_samples=self.k, temperature=self.temperature, top_p=self.top_p,
                              max_new_tokens=self.max_new_tokens, batch_size=self.batch_size, seed=self.seed)


def eval_sampling(cfg: RunConfig, k: int | None = None) -> EvalSampling:
    """The sampling settings of an evaluation. Greedy (eval_temperature 0) gives k identical
    samples, so with k > 1 the samples are drawn at rl.temperature instead, and the record says so."""
    k = cfg.eval.eval_k if k is None else int(k)
    if k < 1:
        raise ConfigError(f"eval_k must be at least 1, got {k}")
    temperature, top_p, notes = cfg.eval.eval_temperature, cfg.rl.top_p, []
    if temperature <= 0:
        if k > 1:
            temperature = cfg.rl.temperature
            notes.append(f"eval_temperature=0 (greedy) would give {k} identical samples per task; "
                         f"sampled at temperature {temperature} (rl.temperature), top_p {top_p} instead")
        else:
            temperature, top_p = 0.0, 1.0
    return EvalSampling(k=k, temperature=float(temperature), top_p=float(top_p),
                        max_new_tokens=cfg.rl.max_new_tokens, batch_size=cfg.rl.rollout_batch_size,
                        seed=cfg.seed, notes=notes)


def generate_completions(model, tokenizer, tasks: Sequence[Task], sampling: EvalSampling,
                         progress: bool = True, log: Callable[[str], None] | None = None
                         ) -> tuple[list[list[Any]], dict[str, Any]]:
    """k completions per task (rollout.Completion objects, [task][sample]) and the rollout's stats.
    `log` hears the engine's choice before generating: the hf fallback is several times slower,
    and a long generation should say why it is long while it runs."""
    from .rollout import Rollout, task_prompts

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


# --------------------------------------------------------------------------- records


def device_description(device: str) -> str:
    if device == "cuda":
        try:
            import torch

            return f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
        except Exception:
            return "cuda"
    return f"cpu ({os.cpu_count()} cores, {platform.machine()})"


def fingerprint(*, model_stage: str, spec: str, tasks: Sequence[Task], sampling: EvalSampling, cfg: RunConfig,
                device: str) -> dict[str, Any]:
    """Everything an eval record's numbers depend on."""
    sampling_d = {k: v for k, v in dataclasses.asdict(sampling).items() if k != "notes"}
    verify_d = {k: v for k, v in dataclasses.asdict(cfg.verify).items() if k != "workers"}  # speed, not results
    return {"format": EVAL_FORMAT, "stage": model_stage, "model": model_identity(spec),
            "base_model": cfg.model.model if model_stage != "base" else None,
            "tasks": hashlib.sha256("\n".join(t.id + ":" + hashlib.sha256(t.source.encode()).hexdigest()[:12]
                                              for t in tasks).encode()).hexdigest()[:16],
            "sampling": sampling_d, "verify": verify_d,
            # speedups depend on the GPU model; CPU verdicts do not depend on the machine
            "device": device_description(device) if device == "cuda" else device,
            "dtype": cfg.model.dtype, "quant": [cfg.model.load_in_8bit, cfg.model.load_in_4bit]}


def build_record(*, model_stage: str, model_path: str, tasks: Sequence[Task], completions: Sequence[Sequence[Any]],
                 verdicts: Sequence[Verdict], sampling: EvalSampling, task_source: str,
                 device: str = "", wall_s: float = 0.0, extra: dict[str, Any] | None = None,
                 resamples: int = 0) -> dict[str, Any]:
    """The eval record from tasks, their completions ([task][sample]: rollout Completions or plain
    strings) and one verdict per completion, in the same task-major order. `resamples` > 0 adds
    the rates' 95% task-bootstrap intervals."""
    flat = [(t, j, c) for t, cs in zip(tasks, completions) for j, c in enumerate(cs)]
    if len(flat) != len(verdicts):
        raise ValueError(f"{len(verdicts)} verdicts for {len(flat)} completions")
    rows = []
    for (task, j, comp), verdict in zip(flat, verdicts):
        text = comp if isinstance(comp, str) else comp.text
        gen = {} if isinstance(comp, str) else {"finish_reason": comp.finish_reason, "num_tokens": comp.num_tokens}
        if task.meta.get("heldout_set"):
            gen["heldout_set"] = task.meta["heldout_set"]
        rows.append(M.sample_row(verdict, task_id=task.id, level=task.level, sample=j, model_stage=model_stage, name=task.name,
                                 completion=text, extra=gen))
    notes = list(sampling.notes)
    timing_notes = sorted({n for v in verdicts for n in v.notes if n.startswith("timing skipped")})
    notes += timing_notes
    if any(v.correct for v in verdicts) and not any(r["speedup"] is not None for r in rows if r["correct"]):
        notes.append("speed not measured (no timing): fast1_rate, fast2_rate and geomean_speedup are null")
    flagged = sum(bool(v.cheat_flags) for v in verdicts)
    if flagged:
        notes.append(f"{flagged} sample(s) carried cheat flags and count as incorrect")
    record = {
        "model_path": model_path,
        "num_tasks": len(tasks),
        "metrics": M.compute_metrics(rows, sampling.k, resamples=resamples),
        "detailed_results": rows,
        "stage": model_stage,
        "task_source": task_source,
        "task_ids": [t.id for t in tasks],
        "k": sampling.k,
        "sampling": {k: v for k, v in dataclasses.asdict(sampling).items() if k != "notes"},
        "seed": sampling.seed,
        "device": device,
        "wall_s": round(wall_s, 2),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "notes": notes,
    }
    if any(task.meta.get("heldout_set") for task in tasks):
        record["heldout_sets"] = {name: [t.id for t in tasks if t.meta.get("heldout_set") == name]
                                  for name in dict.fromkeys(t.meta["heldout_set"] for t in tasks
                                                            if t.meta.get("heldout_set"))}
    if extra:
        record.update(extra)
    return record


def write_record(path: Path, record: dict[str, Any]) -> Path:
    return write_json(path, record, indent=1)  # atomic: a kill mid-write never leaves a half record


def read_record(path: Path) -> dict[str, Any] | None:
    """An eval record, or None when missing or unreadable (an unreadable one is redone)."""
    try:
        data = read_json(path, None)
    except (OSError, DamagedFile):
        return None
    return data if isinstance(data, dict) and "metrics" in data else None


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


class LazyPool:
    """Starts the verifier pool on first use, so a fully resumed evaluation starts no workers.

    `keep_verdicts_in(folder)`: the pool it starts (now or later) stores each verdict there as it
    comes in and finds it there again (verify/cache.py's keys and rules), so an evaluation cut off
    mid-verification redoes only what it had not verified (eval_resume.py). With verify.verify_cache
    on the user's own cache serves instead, unless the evaluation is forced. A pool handed in by the
    caller is used as it is."""

    def __init__(self, cfg: RunConfig, pool=None):
        self.cfg, self.pool, self.own = cfg, pool, pool is None
        self._cache = self._default_cache()

    def _default_cache(self):
        from .verify.cache import VerdictCache

        return VerdictCache() if self.cfg.verify.verify_cache else None

    def keep_verdicts_in(self, folder: Path | None, force: bool = False) -> None:
        from .verify.cache import VerdictCache

        use_own = folder is not None and (force or not self.cfg.verify.verify_cache)
        self._cache = VerdictCache(folder) if use_own else self._default_cache()
        if self.own and self.pool is not None:
            self.pool.cache = self._cache

    def get(self):
        if self.pool is None:
            from .verify.pool import VerifierPool

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
    from .models import explain_oom, load_policy

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
    from .train.verify_batch import verify_unique

    flat_tasks = [t for t, cs in zip(tasks, completions) for _ in cs]
    flat_text = [c if isinstance(c, str) else c.text for cs in completions for c in cs]
    lazy = LazyPool(cfg, pool)
    t1 = time.perf_counter()
    try:
        verdicts, vstats = verify_unique(lazy.get(), flat_tasks, flat_text, desc=f"verify {model_stage}",
                                         progress=progress)
    finally:
        lazy.close()
    record = build_record(model_stage=model_stage, model_path=model_path, tasks=tasks, completions=completions,
                          verdicts=verdicts, sampling=sampling, task_source=task_source or cfg.eval.eval_tasks,
                          device=device_description(device),
                          wall_s=time.perf_counter() - (started if started is not None else t1),
                          extra={"verify_wall_s": round(time.perf_counter() - t1, 2), "verify": vstats.to_dict(),
                                 "run": cfg.run_name, "profile": cfg.profile, **(extra or {})},
                          resamples=cfg.eval.bootstrap_resamples)
    from .baselines import attach_to_record

    store, note = baselines if baselines is not None else find_baselines(cfg, device)
    attach_to_record(record, tasks, store, note, cfg.eval.bootstrap_resamples)
    return record


def find_baselines(cfg: RunConfig, device: str) -> tuple[Any, str | None]:
    """This machine's baselines file for the evaluation (eval.baselines), or None and why not. A file
    that cannot be read is a note, not a failed evaluation; a path that does not exist is a ConfigError."""
    from .baselines import NOTE_PREFIX, BaselineError, baselines_for_eval

    try:
        return baselines_for_eval(cfg.eval.baselines, cfg.outputs_dir, device)
    except BaselineError as e:
        return None, f"{NOTE_PREFIX}{e}"


def evaluate_model(cfg: RunConfig, spec: str, tasks: Sequence[Task], *, model_stage: str = "custom",
                   adapter: Path | None = None, out: Path | None = None, pool=None, k: int | None = None,
                   task_source: str = "", force: bool = False, progress: bool = True,
                   log: Callable[[str], None] = print) -> ModelEval:
    """Evaluate one model on `tasks`, write the record to `out` (when given) and return it.
    With `out` holding a record of the same fingerprint (and not `force`), that record is reused."""
    from .models import resolve_device

    device = resolve_device(cfg.device)
    sampling = eval_sampling(cfg, k)
    fp = fingerprint(model_stage=model_stage, spec=spec, tasks=tasks, sampling=sampling, cfg=cfg, device=device)
    baselines = find_baselines(cfg, device)  # before generating: a wrong eval.baselines path fails at once
    if out is not None and not force:
        old = read_record(out)
        if old is not None and old.get("fingerprint") == fp:
            from .baselines import attach_to_record

            # the verdicts stand; speedups over baselines measured (or changed) since are attached
            if attach_to_record(old, tasks, *baselines, cfg.eval.bootstrap_resamples):
                write_record(out, old)
                log(f"{model_stage}: reusing {out} (same model, tasks and settings); baselines attached again")
            else:
                log(f"{model_stage}: reusing {out} (same model, tasks and settings)")
            return ModelEval(model_stage, "reused", out, old)
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
        log(f"{model_stage}: generating {sampling.k} sample(s) for each of {len(tasks)} tasks with {spec}")
        completions, gen_stats = sample_model(cfg, spec, tasks, sampling, adapter=adapter, progress=progress,
                                              log=lambda m: log(f"{model_stage}: {m}"))
        log(f"{model_stage}: generated in {gen_stats.get('wall_s')} s "
            f"({gen_stats.get('tokens_per_s')} tokens/s, {gen_stats.get('engine')} engine)")
        if partial is not None:
            write_partial(partial, fp, completions, gen_stats)
    log(f"{model_stage}: verifying {sum(len(c) for c in completions)} completions")
    lazy = pool if isinstance(pool, LazyPool) else LazyPool(cfg) if pool is None else None
    if lazy is not None and resume is not None:
        lazy.keep_verdicts_in(verdicts_dir(resume), force=force)
    try:
        record = score_completions(cfg, tasks, completions, sampling, model_stage=model_stage, model_path=spec,
                                   pool=pool if pool is not None else lazy, task_source=task_source, device=device,
                                   progress=progress, started=t0, extra={"generation": gen_stats, "fingerprint": fp},
                                   baselines=baselines)
    finally:
        if lazy is not None:
            lazy.keep_verdicts_in(None)
            if pool is None:
                lazy.close()
    if out is not None:
        write_record(out, record)
        clear_resume(out)  # the record holds every completion and verdict now
    return ModelEval(model_stage, "evaluated", out, record)


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
    lazy = LazyPool(cfg, pool)
    results: list[ModelEval] = []
    try:
        for model_stage in model_stages:
            try:
                spec, adapter = model_of(cfg, paths, model_stage)
            except MissingCheckpoint as e:
                log(f"{model_stage}: skipped: {e}")
                results.append(ModelEval(model_stage, "skipped", None, None, str(e)))
                continue
            # the pool is started only when a model actually needs verifying
            results.append(evaluate_model(cfg, spec, tasks, model_stage=model_stage, adapter=adapter,
                                          out=paths.eval_file(model_stage), pool=lazy, task_source=cfg.eval.eval_tasks,
                                          force=force, progress=progress, log=log))
    finally:
        lazy.close()
    attach_comparison({s.model_stage: (s.record, s.path) for s in results
                       if s.record is not None and s.path is not None},
                      paths.eval_comparison, cfg.eval.bootstrap_resamples)
    return EvalRunResult(results)


# --------------------------------------------------------------------------- RL minus SFT

DIFFERENCE_KEYS = ("correct_rate", "compiled_rate", "valid_rate")


def difference(record: dict[str, Any], baseline: dict[str, Any], resamples: int = 2000) -> dict[str, Any]:
    """`record` minus `baseline` on the tasks both evaluated, per rate in percentage points with its
    paired 95% interval (metrics.paired_difference): overall under `all`, per held-out set under
    `by_set`. Both records should come from the same tasks, k and seed (the same evaluation)."""
    rows, base = record["detailed_results"], baseline["detailed_results"]
    out: dict[str, Any] = {"baseline_stage": baseline.get("stage"), "k": record.get("k"),
                           "baseline_k": baseline.get("k"),
                           "all": {key: M.paired_difference(rows, base, key, resamples) for key in DIFFERENCE_KEYS}}
    sets = sorted({r["heldout_set"] for r in rows if r.get("heldout_set")})
    if sets:
        out["by_set"] = {name: {key: M.paired_difference([r for r in rows if r.get("heldout_set") == name],
                                                         [r for r in base if r.get("heldout_set") == name],
                                                         key, resamples)
                                for key in DIFFERENCE_KEYS} for name in sets}
    return out


def compare_stages(records: dict[str, dict[str, Any]], baseline: str = "sft",
                   resamples: int = 2000) -> dict[str, dict[str, Any]]:
    """Every stage that is not the baseline nor `base`, minus the baseline stage: stage -> difference()."""
    if baseline not in records:
        return {}
    return {stage: difference(rec, records[baseline], resamples) for stage, rec in records.items()
            if stage not in (baseline, "base")}


def attach_comparison(records: dict[str, tuple[dict[str, Any], Path]], comparison_path: Path,
                      resamples: int = 2000, baseline: str = "sft") -> dict[str, dict[str, Any]]:
    """Each stage minus the baseline (compare_stages) written into that stage's record file as
    `vs_<baseline>` and, all together, to `comparison_path`; records: stage -> (record, its file)."""
    comparison = compare_stages({stage: rec for stage, (rec, _) in records.items()}, baseline, resamples)
    for stage, diff in comparison.items():
        rec, path = records[stage]
        rec[f"vs_{baseline}"] = diff
        write_record(path, rec)
    if comparison:
        write_record(comparison_path, {"baseline": baseline, "stages": comparison})
    return comparison


# --------------------------------------------------------------------------- reading results


def load_records(paths: RunPaths) -> dict[str, dict[str, Any]]:
    """Every readable eval record of a run, base / sft / rl first, then any others by name."""
    found: dict[str, dict[str, Any]] = {}
    if not paths.eval_dir.is_dir():
        return found
    files = sorted(paths.eval_dir.glob("eval_*.json"))
    rank = {s: i for i, s in enumerate(MODEL_STAGES)}
    files.sort(key=lambda f: (rank.get(f.stem[5:], len(MODEL_STAGES)), f.stem))
    for f in files:
        rec = read_record(f)
        if rec is not None:
            found[f.stem[5:]] = rec
    return found


def metrics_table(records: dict[str, dict[str, Any]], levels: bool = True) -> list[dict[str, Any]]:
    """One row per model stage (and per model stage and level): the headline metrics, for tables and
    printing (the column keeps the name `stage`, as in the tables users read)."""
    keys = ("valid_rate", "compiled_rate", "correct_rate", "fast1_rate", "fast2_rate", "geomean_speedup",
            "pass_at_1", "pass_at_k")
    rows = []
    for model_stage, rec in records.items():
        m = rec["metrics"]
        groups = [("all", m)] + ([(f"L{lvl}", mm) for lvl, mm in m.get("by_level", {}).items()] if levels else [])
        for label, mm in groups:
            rows.append({"stage": model_stage, "level": label, "tasks": mm.get("num_tasks"), "samples": mm.get("num_samples"),
                         "k": rec.get("k"), **{key: mm.get(key) for key in keys}})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width text table of `metrics_table` rows (for the terminal)."""
    if not rows:
        return "(no eval records)"
    cols = list(rows[0])
    heads = {"valid_rate": "valid%", "compiled_rate": "compiled%", "correct_rate": "correct%",
             "fast1_rate": "fast_1%", "fast2_rate": "fast_2%", "geomean_speedup": "geomean x",
             "pass_at_1": "pass@1%", "pass_at_k": "pass@k%"}

    def cell(v: Any) -> str:
        if v is None:
            return "n/a"
        if isinstance(v, float):
            return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"
        return str(v)

    table = [[heads.get(c, c) for c in cols]] + [[cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    return "\n".join("  ".join(v.rjust(w) if j > 1 else v.ljust(w) for j, (v, w) in enumerate(zip(row, widths)))
                     for row in table)
