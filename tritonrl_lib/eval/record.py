"""The eval record (`eval/eval_<model stage>.json`): its sampling settings, its fingerprint, how it is
built from verdicts, written and read, and the comparisons between records (RL minus SFT).

The record has the source's layout (`model_path`, `num_tasks`, `metrics`, `detailed_results`) plus
what is needed to trust and reproduce it: seed, task source and ids, k, sampling settings, device,
wall time, and notes such as "timing skipped: no GPU". Its fingerprint holds everything its numbers
depend on (model weights, tasks, sampling, verifier settings, device kind): a record with the same
fingerprint is reused, never recomputed. Where both an RL and the SFT record exist, the RL record
gets `vs_sft`: RL minus SFT per rate, overall and per held-out set, with the paired interval of the
difference; `eval/comparison.json` holds the same for every stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import metrics as M
from ..core.config import VERIFY_SPEED_ONLY, ConfigError, RunConfig
from ..core.jsonio import DamagedFile, read_json, write_json
from ..core.paths import RunPaths
from ..rollout import SamplingConfig
from ..tasks.task import Task
from ..verify.verdict import Verdict
from .identity import MODEL_STAGES, model_identity

EVAL_FORMAT = 2  # bump when the record's meaning changes: older records are then re-evaluated


# --------------------------------------------------------------------------- sampling


@dataclass
class EvalSampling:
    k: int
    temperature: float
    top_p: float
    max_new_tokens: int
    batch_size: int
    seed: int
    # the rollout's loop stop (SamplingConfig.loop_lines); in the fingerprint, so a record sampled
    # before completions stopped in loops (no such key) is redone rather than reused
    loop_lines: int = SamplingConfig.loop_lines
    notes: list[str] = field(default_factory=list)

    def to_rollout(self):
        return SamplingConfig(n_samples=self.k, temperature=self.temperature, top_p=self.top_p,
                              max_new_tokens=self.max_new_tokens, batch_size=self.batch_size, seed=self.seed,
                              loop_lines=self.loop_lines)


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


# --------------------------------------------------------------------------- records


def device_description(device: str) -> str:
    if device == "cuda":
        try:
            import torch

            return f"{torch.cuda.device_count()}x {torch.cuda.get_device_name(0)}"
        except Exception:
            return "cuda"
    return f"cpu ({os.cpu_count()} cores, {platform.machine()})"


def tasks_digest(tasks: Sequence[Task]) -> str:
    """The task list's identity (ids and sources, in order): kept completions belong to exactly this list."""
    return hashlib.sha256("\n".join(t.id + ":" + hashlib.sha256(t.source.encode()).hexdigest()[:12]
                                    for t in tasks).encode()).hexdigest()[:16]


def fingerprint(*, model_stage: str, spec: str, tasks: Sequence[Task], sampling: EvalSampling, cfg: RunConfig,
                device: str) -> dict[str, Any]:
    """Everything an eval record's numbers depend on."""
    return {"stage": model_stage, "model": model_identity(spec),
            "base_model": cfg.model.model if model_stage != "base" else None,
            **settings_fingerprint(tasks=tasks, sampling=sampling, cfg=cfg), "device": device_fingerprint(device)}


def device_fingerprint(device: str) -> str:
    """The machine in a fingerprint: speedups depend on the GPU model; CPU verdicts do not depend on the machine."""
    return device_description(device) if device == "cuda" else device


def settings_fingerprint(*, tasks: Sequence[Task], sampling: EvalSampling, cfg: RunConfig) -> dict[str, Any]:
    """The part of `fingerprint` that names neither the model nor the machine: what a kept evaluation is
    checked against where its weights are not at hand (eval/resume.py's kept_for_tasks)."""
    sampling_d = {k: v for k, v in dataclasses.asdict(sampling).items() if k != "notes"}
    speed_only = set(VERIFY_SPEED_ONLY) - {"workers_per_gpu", "train_workers_per_gpu"}  # these size large tasks' sets
    verify_d = {k: v for k, v in dataclasses.asdict(cfg.verify).items() if k not in speed_only}
    return {"format": EVAL_FORMAT, "tasks": tasks_digest(tasks), "sampling": sampling_d, "verify": verify_d,
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
