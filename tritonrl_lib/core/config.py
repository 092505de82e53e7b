"""One typed configuration for a run (its paths: `paths.py`).

A `RunConfig` is built from `params/<profile>.yaml` plus overrides. Overrides come from a dict,
papermill parameters or `-p key=value` on the command line; a key is either dotted
(`rl.n_samples`) or bare (`n_samples`): every leaf name is unique across sections, so the bare
form is unambiguous. Unknown keys and wrong types are errors that name the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import ConfigError
from .paths import RunPaths, project_root


# --------------------------------------------------------------------------- sections


@dataclass
class ModelConfig:
    model: str = "embedded"  # embedded | tiny | any HF model id | local path
    dtype: str = "auto"  # auto (bf16 on GPU, fp32 on CPU) | float32 | bfloat16 | float16
    load_in_8bit: bool = False
    load_in_4bit: bool = False
    gradient_checkpointing: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    attn_implementation: str = "auto"  # auto | sdpa | eager | flash_attention_2


@dataclass
class DataConfig:
    task_source: str = "builtin"  # builtin | KernelBench checkout dir | parquet/jsonl file | hub name
    task_size: str = "small"  # small (interpreter-friendly) | full (GPU sizes)
    kernelbook_source: str = ""  # "" (none) | hub name (GPUMODE/KernelBook) | local jsonl/parquet
    kernelbook_verify: bool = False  # keep only KernelBook rows whose solution passes the verifier
    kernelbook_max_rows: int = 0  # 0 = all rows
    n_sft_examples: int = 1000
    heldout_fraction: float = 0.25  # fraction of op families held out of training
    heldout_in_family: int = 1  # variant tasks of each train family held out (held-out set a; 0 = none)
    heldout_family_levels: list[int] = field(default_factory=lambda: [1, 2])  # levels whose categories hold
    # families out (set b); [1]: every built-in fusion family trains, Level 2 tested on KernelBench alone
    sft_family_weights: list[str] = field(default_factory=list)  # "family_or_category:N": N of its SFT examples
    # per one of every other family's (data/generate.py); [] = the same number of every train family
    data_verify_device: str = "cpu"  # cpu (interpreter, every core; no timing needed) | auto (GPU if any)
    kernelbench: str = ""  # a KernelBench checkout: its L1/L2 problems split into RL's train part and a held-out
    # part evaluation reports on (tasks/kernelbench.py); "" = the built-in suite alone
    kernelbench_heldout_fraction: float = 0.35  # share of each (level, category) of KernelBench held out


@dataclass
class SFTConfig:
    epochs: float = 1.0
    learning_rate: float = 2e-4
    per_device_batch_size: int = 8
    grad_accum_steps: int = 1
    max_samples: int = 1000
    max_seq_len: int = 1024
    packing: bool = True
    save_steps: int = 50
    save_total_limit: int = 2
    logging_steps: int = 5
    warmup_ratio: float = 0.03
    torch_compile: bool = False  # compile the decoder layers (measure first: benchmarks/sft_throughput.py)
    fused_kernels: bool = False  # Triton RMSNorm + SwiGLU kernels (CUDA)
    eval_fraction: float = 0.0  # a held-out slice of the SFT examples whose loss is logged beside the training loss
    eval_steps: int = 0  # evaluate that slice every this many optimizer steps (0: ten times over the run)
    time_budget_s: float = 0.0  # stop training (and save the adapter) once this much training time is spent; 0 = none
    answer_layout: str = "model_first"  # model_first: ModelNew before its kernels in every target | as_written


@dataclass
class RLConfig:
    method: str = "best_of_n"  # best_of_n | grpo
    n_samples: int = 10
    top_k: int = 3
    rounds: int = 3
    tasks_per_round: int = 16
    rl_tasks: str = "train"  # train | all | level1 | level2 | kernelbench | comma-separated task ids
    temperature: float = 0.8
    top_p: float = 0.95
    max_new_tokens: int = 768
    rollout_batch_size: int = 32
    rl_learning_rate: float = 5e-5
    rl_epochs: float = 1.0
    replay_ratio: float = 0.0  # best-of-N: SFT-corpus examples (every family in turn) per kept pair in each round's fine-tune
    grpo_steps: int = 20
    grpo_beta: float = 0.0
    curriculum_start_p: float = 0.1
    curriculum_end_p: float = 0.5
    curriculum_trigger: float = 0.4
    curriculum_ramp_steps: int = 10
    curriculum_frontier: bool = True  # within each level, draw tasks at the policy's frontier (recent success
    # neither 0 nor 1, curriculum.py) instead of uniformly
    redraw_rounds: int = 1  # dynamic sampling: groups that carry no signal are redrawn this many times (0 = kept)
    refine_turns: int = 0  # multi-turn refinement: a failed candidate's verdict goes back for this many turns (0 = off)
    refine_discount: float = 0.8  # a refined candidate's reward is discounted by this per turn
    overlap_chunks: int = 2  # generation in this many chunks, each verified while the next one generates (1 = none)
    train_task_scale: int = 1  # RL's training tasks with their batch-like input sizes divided by this (prompt and
    # reward alike; train/rl/reward_tasks.py); evaluation keeps the tasks' own sizes. 1 = the tasks as they are
    rl_time_budget_s: float = 0.0  # a call starts no round or step that would end past this many seconds, judged
    # by its longest yet (time_budget.py); 0 = none. The adapter of the last finished one stays; a new call goes on
    train_task_max_mb: int = 0  # and further, until one input set (inputs, outputs, intermediates; weights apart)
    # holds at most this many MB, measured on the meta device (0 = no cap): KernelBench's sizes at /4 still
    # held up to 4.6 GB a set, and such candidates take the GPU one at a time


@dataclass
class VerifyConfig:
    policy: str = "auto"  # auto (strict for Level 1, fusion for Level 2+) | strict | fusion
    policy_extra_ops: list[str] = field(default_factory=list)  # more aten ops `fusion` lets stay in PyTorch
    atol: float = 1e-2  # fp32 tolerances, as KernelBench's published runs used
    rtol: float = 1e-2
    half_atol: float = 5e-2  # fp16 / bf16 tolerances
    half_rtol: float = 5e-2
    num_variations: int = 6  # input sets: original, range, seed, larger, dtype, offset (verify/candidate/variations.py)
    timeout_s: float = 120.0
    workers: int = 0  # 0 = workers_per_gpu per visible GPU, or min(4, cores) on CPU
    workers_per_gpu: int = 4  # candidates checked side by side on one GPU (0 = as the cores allow); each timing alone
    memory_limit_mb: int = 8192
    timing: str = "auto"  # auto (on when a GPU is visible) | on | off
    timing_warmup: int = 10
    timing_trials: int = 50
    timing_trim: float = 0.1
    partial_credit: float = 1.0
    speedup_review: float = 10.0
    compile_check: str = "auto"  # auto (frontend on CPU) | frontend | full (to cubin for sm_90) | off
    verify_cache: bool = False  # reuse verdicts from disk, keyed by task, code and these settings
    reference_cache_mb: int = 4096  # per worker, at most 1/4 of the machine's memory over the pool: tasks'
    # reference outputs and inputs kept for their next candidates, handed between one GPU's workers by the pool
    prestart_child: str = "auto"  # auto (on a GPU) | on | off: each worker starts its next children (CUDA context) ahead
    spare_children: int = 1  # how many children each worker keeps started ahead (with prestart_child on)
    prescreen: str = "auto"  # auto (tasks of 1 GiB or more, or run alone) | on | off: the tiny set first, in a
    # process of its own, so a candidate that fails there never waits for the task's full sizes
    train_workers_per_gpu: int = 0  # RL rewards' pool (for_training): 0 = as many as the host's cores feed
    train_timing_warmup: int = 3  # RL rewards time correct candidates with a budget of their own (for_training)
    train_timing_trials: int = 10
    train_timeout_s: float = 60.0  # RL rewards' time limit per candidate (one hung candidate held a GRPO step 120 s)
    cuda_connections: int = 2  # CUDA_DEVICE_MAX_CONNECTIONS of candidates' processes (0: the driver's 8); fewer
    # make each process's CUDA context cheaper to create, at the cost of concurrency between its streams

    def for_training(self) -> "VerifyConfig":
        """The settings of RL's training rewards: the same verdict rules (input sets, tolerances, checks,
        timing only for candidates already correct), with timing's own smaller trial budget and a pool
        as wide as the host's cores (each candidate's compile is CPU work). Evaluation never uses it."""
        return dataclasses.replace(self, timing_warmup=self.train_timing_warmup,
                                   timing_trials=self.train_timing_trials,
                                   workers_per_gpu=self.train_workers_per_gpu,
                                   timeout_s=min(self.timeout_s, self.train_timeout_s))


# VerifyConfig's settings that change how fast verification runs, never a verdict (a large task's budget
# reads how many workers share its GPU: an evaluation keeps the per-GPU counts in its fingerprint): a
# step's or an evaluation's fingerprint leaves them out, so changing them re-runs nothing
VERIFY_SPEED_ONLY = ("workers", "workers_per_gpu", "train_workers_per_gpu", "reference_cache_mb", "prestart_child",
                     "spare_children", "cuda_connections", "verify_cache")


@dataclass
class EvalConfig:
    eval_tasks: str = "heldout"  # heldout | builtin | KernelBench checkout | parquet | hub name
    num_tasks: int = 20
    eval_k: int = 1
    eval_temperature: float = 0.0
    eval_stages: list[str] = field(default_factory=lambda: ["base", "sft", "rl"])
    heldout_sets: list[str] = field(default_factory=lambda: ["tasks", "families"])  # eval_tasks=heldout: (a) unseen
    # tasks of trained families, (b) unseen families; num_tasks caps each set. With data.kernelbench set, the
    # held-out KernelBench problems join as a third set, `kernelbench`
    kernelbench_num_tasks: int = 0  # held-out KernelBench problems evaluated (0 = all of them, published sizes)
    verify_first: str = ""  # the tasks whose id holds this verified first (e.g. kernelbench/L2/): an evaluation
    # cut short then has judged them whole. "" = the evaluation's own order (set by set, each level by level);
    # a task too large to share the GPU may still wait for the shared ones
    bootstrap_resamples: int = 2000  # 95% intervals: resamples of the tasks (0 = no intervals)
    baselines: str = "auto"  # this machine's eager / torch.compile reference times (`tritonrl baselines`): auto
    # (<outputs_dir>/baselines/) | off | a folder or a file; correct timed samples get their speedup over both
    baselines_measure: str = "off"  # off | solved: after the evaluation, on a GPU, time the tasks some stage answered
    # correctly (the only ones whose times change a fast_p) into eval.baselines' folder, and attach them


@dataclass
class RunConfig:
    profile: str = "cpu"
    run: str = ""  # the run's folder under outputs_dir; "" = the profile's name
    outputs_dir: str = "outputs"
    seed: int = 0
    device: str = "auto"  # auto | cpu | cuda
    gpus: str = "1"  # RL's processes on this host: 1 (one process, as always) | N | all (one per visible GPU); N > 1
    # runs 03_rl under `accelerate launch` (train/rl/launch.py). How fast a step runs, not what the run is
    expected_minutes: float = 0.0  # a whole run of the profile (01 -> 05), measured on the machine its YAML's
    # comment names: what `tritonrl run` announces at the start (0 = not measured). Not a setting of any work
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    # -- derived ----------------------------------------------------------------------

    @property
    def run_name(self) -> str:
        return self.run or self.profile

    @property
    def paths(self) -> "RunPaths":
        root = Path(self.outputs_dir)
        if not root.is_absolute():
            root = project_root() / root
        return RunPaths(root / self.run_name)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def flat(self) -> dict[str, Any]:
        """Every leaf as `bare_name: value` (the names papermill and `-p` use)."""
        return {name: _get(self, path) for name, path in _leaf_paths().items()}

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


SECTIONS = ("model", "data", "sft", "rl", "verify", "eval")


# --------------------------------------------------------------------------- locating things


def params_dir() -> Path:
    return project_root() / "params"


def available_profiles() -> list[str]:
    return sorted(p.stem for p in params_dir().glob("*.yaml"))


def gpu_available() -> bool:
    # NVML-based check: does not initialise CUDA in this process, so forked verifier workers
    # can still use the GPU.
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def default_profile() -> str:
    return "gpu" if gpu_available() else "cpu"


# --------------------------------------------------------------------------- loading


def load_config(profile: str | None = None, overrides: Mapping[str, Any] | None = None,
                cli: list[str] | None = None) -> RunConfig:
    """Build the RunConfig of `profile` (`auto`/None: gpu with a GPU, else cpu), then apply a dict of
    overrides and `key=value` strings from the command line, in that order."""
    if profile in (None, "", "auto"):
        profile = default_profile()
    path = Path(profile)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        name = path.stem
    else:
        name = profile
        path = params_dir() / f"{profile}.yaml"
        if not path.is_file():
            known = available_profiles()
            hint = _closest(profile, known)
            raise ConfigError(
                f"unknown profile {profile!r}" + (f"; did you mean {hint!r}?" if hint else "")
                + f" Profiles in {params_dir()}: {', '.join(known) or '(none)'}"
            )
    cfg = RunConfig(profile=name)
    layers = _profile_layers(path)
    for layer_path, layer in layers:
        apply_overrides(cfg, layer, origin=str(layer_path))
    cfg.profile = layers[-1][1].get("profile", name)  # a base's `profile:` line names the base, not this one
    if overrides:
        apply_overrides(cfg, dict(overrides), origin="overrides")
    if cli:
        apply_overrides(cfg, parse_cli_overrides(cli), origin="command line")
    validate(cfg)
    return cfg


def parse_cli_overrides(items: list[str]) -> dict[str, Any]:
    """`["n_samples=10", "rl.top_k=3"]` -> dict; values are parsed as YAML scalars/lists."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not key=value (for example -p n_samples=10)")
        key, raw = item.split("=", 1)
        try:
            out[key.strip()] = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            out[key.strip()] = raw
    return out


def apply_overrides(cfg: RunConfig, overrides: Mapping[str, Any], origin: str = "overrides") -> RunConfig:
    for key, value in overrides.items():
        path = resolve_key(key, origin)
        _set(cfg, path, _coerce(value, _type_of(path), ".".join(path), origin))
    return cfg


def resolve_key(key: str, origin: str = "overrides") -> tuple[str, ...]:
    """`n_samples` or `rl.n_samples` -> ("rl", "n_samples"); unknown keys name the closest one."""
    leaves = _leaf_paths()
    dotted = {".".join(p): p for p in leaves.values()}
    if key in leaves:
        return leaves[key]
    if key in dotted:
        return dotted[key]
    if key in SECTIONS and key not in leaves:
        raise ConfigError(f"{origin}: {key!r} is a section; set one of its keys, e.g. "
                          f"{next(k for k, p in leaves.items() if p[0] == key)}=...")
    hint = _closest(key.split(".")[-1], list(leaves)) or _closest(key, list(dotted))
    raise ConfigError(
        f"{origin}: unknown setting {key!r}" + (f"; did you mean {hint!r}?" if hint else "")
        + " (`tritonrl config --list` shows every setting)"
    )


def validate(cfg: RunConfig) -> None:
    """Cross-field checks that types alone cannot express."""
    choices = {
        ("model", "dtype"): ("auto", "float32", "bfloat16", "float16"),
        ("model", "attn_implementation"): ("auto", "sdpa", "eager", "flash_attention_2"),
        ("data", "task_size"): ("small", "full"),
        ("data", "data_verify_device"): ("cpu", "auto"),
        ("rl", "method"): ("best_of_n", "grpo"),
        ("sft", "answer_layout"): ("model_first", "as_written"),
        ("verify", "policy"): ("auto", "strict", "fusion"),
        ("verify", "timing"): ("auto", "on", "off"),
        ("verify", "compile_check"): ("auto", "frontend", "full", "off"),
        ("verify", "prestart_child"): ("auto", "on", "off"),
        ("verify", "prescreen"): ("auto", "on", "off"),
        ("eval", "baselines_measure"): ("off", "solved"),
        ("device",): ("auto", "cpu", "cuda"),
    }
    for path, allowed in choices.items():
        v = _get(cfg, path)
        if v not in allowed:
            hint = _closest(str(v), list(allowed))
            raise ConfigError(f"{'.'.join(path)}={v!r} is not one of {', '.join(allowed)}"
                              + (f"; did you mean {hint!r}?" if hint else ""))
    if cfg.model.load_in_8bit and cfg.model.load_in_4bit:
        raise ConfigError("load_in_8bit and load_in_4bit are both set; choose one")
    positive = [("rl", "n_samples"), ("rl", "top_k"), ("rl", "rounds"), ("model", "lora_r"),
                ("sft", "per_device_batch_size"), ("verify", "timing_trials"),
                ("verify", "train_timing_trials"), ("verify", "train_timeout_s"), ("rl", "train_task_scale"),
                ("verify", "spare_children"),
                ("eval", "eval_k")]
    for path in positive:
        if _get(cfg, path) < 1:
            raise ConfigError(f"{'.'.join(path)} must be at least 1, got {_get(cfg, path)}")
    if cfg.rl.train_task_max_mb < 0:
        raise ConfigError(f"rl.train_task_max_mb must be 0 (no cap) or a size in MB, got {cfg.rl.train_task_max_mb}")
    if not 0 <= cfg.verify.cuda_connections <= 32:
        raise ConfigError(f"verify.cuda_connections={cfg.verify.cuda_connections} must lie between 0 (the "
                          "driver's default) and 32")
    for path in (("verify", "workers_per_gpu"), ("verify", "train_workers_per_gpu"), ("verify", "train_timing_warmup"),
                 ("rl", "redraw_rounds"), ("rl", "refine_turns"), ("rl", "replay_ratio"),
                 ("data", "heldout_in_family"), ("sft", "eval_steps"), ("eval", "bootstrap_resamples")):
        if _get(cfg, path) < 0:
            raise ConfigError(f"{'.'.join(path)} must be 0 or more, got {_get(cfg, path)}")
    if cfg.rl.overlap_chunks < 1:
        raise ConfigError(f"rl.overlap_chunks must be at least 1 (1 = no overlap), got {cfg.rl.overlap_chunks}")
    unknown_sets = [s for s in cfg.eval.heldout_sets if s not in ("tasks", "families", "kernelbench")]
    if unknown_sets or not cfg.eval.heldout_sets:
        raise ConfigError(f"eval.heldout_sets={cfg.eval.heldout_sets}: name one or more of tasks (unseen tasks of "
                          "trained families), families (unseen families) and kernelbench (held-out KernelBench "
                          "problems, with data.kernelbench set)")
    if "kernelbench" in cfg.eval.heldout_sets and not cfg.data.kernelbench.strip():
        raise ConfigError("eval.heldout_sets names kernelbench, and data.kernelbench names no checkout: set "
                          "data.kernelbench (-p kernelbench=PATH) or leave kernelbench out of the sets")
    gpus = cfg.gpus.strip().lower()
    if gpus != "all" and not (gpus.isdigit() and int(gpus) >= 1):
        raise ConfigError(f"gpus={cfg.gpus!r}: expected a number of processes (1, 2, ...) or all (one per visible GPU)")
    if cfg.expected_minutes < 0:
        raise ConfigError(f"expected_minutes={cfg.expected_minutes} must be 0 (not measured) or more")
    if cfg.sft.time_budget_s < 0:
        raise ConfigError(f"sft.time_budget_s={cfg.sft.time_budget_s} must be 0 (none) or more")
    if cfg.rl.rl_time_budget_s < 0:
        raise ConfigError(f"rl_time_budget_s={cfg.rl.rl_time_budget_s} must be 0 (none) or more seconds")
    if cfg.rl.top_k > cfg.rl.n_samples:
        raise ConfigError(f"top_k={cfg.rl.top_k} exceeds n_samples={cfg.rl.n_samples}; "
                          "keep at most as many samples as are drawn")
    bad_levels = [lv for lv in cfg.data.heldout_family_levels if lv not in (1, 2)]
    if bad_levels:
        raise ConfigError(f"heldout_family_levels={cfg.data.heldout_family_levels}: levels are 1 and 2 "
                          "(e.g. -p 'heldout_family_levels=[1]'; [] holds no family out)")
    try:
        family_weight_entries(cfg.data.sft_family_weights)
    except ValueError as e:
        raise ConfigError(f"{e}, e.g. -p sft_family_weights=epilogue_chain:3,reduce_epilogue:3") from None
    for name in ("curriculum_start_p", "curriculum_end_p", "curriculum_trigger", "heldout_fraction",
                 "timing_trim", "eval_fraction", "refine_discount"):
        path = _leaf_paths()[name]
        v = _get(cfg, path)
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"{name}={v} must lie between 0 and 1")
    if "/" in cfg.run_name or cfg.run_name in (".", ".."):
        raise ConfigError(f"run={cfg.run_name!r} must be a plain folder name (it goes under outputs/)")


def family_weight_entries(entries: list[str]) -> list[tuple[str, int]]:
    """`data.sft_family_weights` read: (family or category name, N) per "name:N" entry; ValueError naming the
    first entry that is not a name and a whole number N >= 1 (which names exist is the data stage's to say)."""
    out = []
    for entry in entries:
        name, _, n = str(entry).partition(":")
        if not name.strip() or not n.strip().isdigit() or int(n) < 1:
            raise ValueError(f"sft_family_weights entry {entry!r}: expected family_or_category:N with N >= 1")
        out.append((name.strip(), int(n)))
    return out


# --------------------------------------------------------------------------- internals


def _section_types() -> dict[str, type]:
    hints = typing.get_type_hints(RunConfig)
    return {s: hints[s] for s in SECTIONS}


def _leaf_paths() -> dict[str, tuple[str, ...]]:
    """bare name -> path; also asserts bare names are unique (a test checks this too)."""
    out: dict[str, tuple[str, ...]] = {}
    for f in dataclasses.fields(RunConfig):
        if f.name in SECTIONS:
            continue
        out[f.name] = (f.name,)
    for sec, typ in _section_types().items():
        for f in dataclasses.fields(typ):
            if f.name in out:
                raise AssertionError(f"setting name {f.name!r} is used twice")
            out[f.name] = (sec, f.name)
    return out


def _type_of(path: tuple[str, ...]) -> Any:
    owner: type = RunConfig
    for part in path[:-1]:
        owner = typing.get_type_hints(owner)[part]
    return typing.get_type_hints(owner)[path[-1]]


def _get(cfg: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        cfg = getattr(cfg, part)
    return cfg


def _set(cfg: Any, path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        cfg = getattr(cfg, part)
    setattr(cfg, path[-1], value)


def _type_name(t: Any) -> str:
    if typing.get_origin(t) is list:
        return f"list of {typing.get_args(t)[0].__name__}"
    return getattr(t, "__name__", str(t))


def _coerce(value: Any, expected: Any, key: str, origin: str) -> Any:
    def bad() -> ConfigError:
        return ConfigError(f"{origin}: {key} expects {_type_name(expected)}, "
                           f"got {type(value).__name__} {value!r}")

    if typing.get_origin(expected) is list:
        inner = typing.get_args(expected)[0]
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise bad()
        return [_coerce(v, inner, key, origin) for v in value]
    if expected is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise bad()
    if expected is int:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
            return int(value)  # an item of a comma-separated list of ints (-p heldout_family_levels=1,2)
        raise bad()
    if expected is float:
        if isinstance(value, bool):
            raise bad()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise bad() from None
        raise bad()
    if expected is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a run named 2024 or a model path that YAML read as a number
        if isinstance(value, bool):  # YAML 1.1 reads off/on/yes/no unquoted as booleans
            raise ConfigError(f"{origin}: {key} expects a word, got {value!r}: YAML reads off, on, yes and no "
                              f"as booleans; quote it ({key}: \"{'on' if value else 'off'}\")")
        raise bad()
    raise bad()


def _profile_layers(path: Path, _chain: tuple[Path, ...] = ()) -> list[tuple[Path, dict[str, Any]]]:
    """A profile's settings, base first: `base: gpu` (a profile name, or a YAML path relative to this
    file) takes every setting of that profile, then this file's own on top."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    base = data.pop("base", None)
    layers: list[tuple[Path, dict[str, Any]]] = []
    if base is not None:
        if not isinstance(base, str) or not base:
            raise ConfigError(f"{path}: base must name a profile (for example base: gpu), got {base!r}")
        base_path = (path.parent / base) if base.endswith((".yaml", ".yml")) else params_dir() / f"{base}.yaml"
        if not base_path.is_file():
            hint = _closest(base, available_profiles())
            raise ConfigError(f"{path}: base profile {base!r} not found ({base_path})"
                              + (f"; did you mean {hint!r}?" if hint else ""))
        chain = (*_chain, path.resolve())
        if base_path.resolve() in chain:
            names = " -> ".join(p.name for p in (*chain, base_path.resolve()))
            raise ConfigError(f"{path}: profiles name each other as base in a loop ({names})")
        layers = _profile_layers(base_path, chain)
    return [*layers, (path, _flatten_yaml(data, str(path)))]


def _flatten_yaml(data: dict, origin: str) -> dict[str, Any]:
    """Profiles may nest by section (`rl: {n_samples: 4}`) or use bare/dotted keys."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, dict):
            for sub, v in value.items():
                path = resolve_key(f"{key}.{sub}", origin)
                out[".".join(path)] = v
        elif key in SECTIONS and key not in _leaf_paths():  # `model: tiny` is the leaf model.model
            raise ConfigError(f"{origin}: section {key!r} must be a mapping of settings")
        else:
            out[key] = value
    return out


def _closest(word: str, options: list[str]) -> str | None:
    m = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return m[0] if m else None
