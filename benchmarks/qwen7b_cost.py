"""GPU-hours of the source's full run from measured rates, on one GPU and on eight.

The run is the `qwen7b` profile's: SFT on its 1,000 examples, its RL budget (best-of-N: `rounds` x
`tasks_per_round` tasks x `n_samples` samples of up to `max_new_tokens`, the top `top_k` correct per
task fine-tuned on; or `grpo_steps` GRPO steps), and its evaluation (`eval_stages` x `num_tasks` x
`eval_k` samples). The rates come from `benchmarks/qwen7b_standin.py` (SFT tokens/s, rollout
tokens/s, verifications per minute, GRPO training seconds per token). The source reports 64
GPU-hours for its own run.

On eight GPUs: SFT runs data-parallel (docs/MULTI_GPU.md; `sft_scaling` is the fraction of linear
speed-up assumed), verification spreads over every GPU's workers, and RL's generation and
fine-tuning stay in one process on one GPU (the project's RL is single-process) while the other
seven wait: GPU-hours there are wall hours x 8.

    python benchmarks/qwen7b_cost.py RESULTS.json     # recompute from a benchmark's results.json
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

SOURCE_GPU_HOURS = 64.0
SFT_TOKENS_PER_EXAMPLE = 906.0  # 01_data's examples, embedded tokenizer (docs/PERFORMANCE.md, "Wall time of the stage")


@dataclass
class Workload:
    """What the run does (from the profile), and the lengths assumed for it."""

    sft_examples: int
    sft_epochs: float
    sft_tokens_per_example: float
    rl_method: str  # best_of_n | grpo
    rounds: int
    grpo_steps: int
    tasks_per_round: int
    n_samples: int
    top_k: int
    prompt_tokens: float
    completion_tokens: float  # per sample; max_new_tokens is the upper bound (a stand-in always reaches it)
    eval_samples: int

    @classmethod
    def from_config(cls, cfg, prompt_tokens: float, completion_tokens: float | None = None,
                    sft_tokens_per_example: float = SFT_TOKENS_PER_EXAMPLE) -> "Workload":
        return cls(sft_examples=min(cfg.data.n_sft_examples, cfg.sft.max_samples), sft_epochs=float(cfg.sft.epochs),
                   sft_tokens_per_example=float(sft_tokens_per_example), rl_method=cfg.rl.method,
                   rounds=cfg.rl.rounds, grpo_steps=cfg.rl.grpo_steps, tasks_per_round=cfg.rl.tasks_per_round,
                   n_samples=cfg.rl.n_samples, top_k=cfg.rl.top_k, prompt_tokens=float(prompt_tokens),
                   completion_tokens=float(completion_tokens if completion_tokens is not None else cfg.rl.max_new_tokens),
                   eval_samples=len(cfg.eval.eval_stages) * cfg.eval.num_tasks * cfg.eval.eval_k)


@dataclass
class Rates:
    sft_tokens_per_s: float
    rollout_tokens_per_s: float
    verify_per_min: float
    grpo_train_s_per_token: float | None = None  # GRPO's training part of a step, per prompt+completion token


def estimate(w: Workload, r: Rates, gpus: int = 1, sft_scaling: float = 1.0) -> dict:
    """Seconds per part, wall hours and GPU-hours of the run on `gpus` GPUs of one machine."""
    sft_par = gpus * sft_scaling if gpus > 1 else 1.0
    seqs = w.tasks_per_round * w.n_samples
    sft = w.sft_examples * w.sft_epochs * w.sft_tokens_per_example / r.sft_tokens_per_s / sft_par
    generate = seqs * w.completion_tokens / r.rollout_tokens_per_s
    verify = seqs / r.verify_per_min * 60 / gpus
    if w.rl_method == "grpo":
        if r.grpo_train_s_per_token is None:
            raise ValueError("GRPO's cost needs grpo_train_s_per_token (the benchmark's grpo phase measures it)")
        steps = w.grpo_steps
        train = seqs * (w.prompt_tokens + w.completion_tokens) * r.grpo_train_s_per_token
    else:
        steps = w.rounds
        kept = w.tasks_per_round * w.top_k  # at most: the top_k correct completions of each task
        train = kept * (w.prompt_tokens + w.completion_tokens) / r.sft_tokens_per_s
    rl = steps * (generate + verify + train)
    evaluation = w.eval_samples * w.completion_tokens / r.rollout_tokens_per_s + w.eval_samples / r.verify_per_min * 60 / gpus
    wall = sft + rl + evaluation
    return {"gpus": gpus, "sft_s": round(sft, 1), "rl_s": round(rl, 1), "eval_s": round(evaluation, 1),
            "rl_step": {"generate_s": round(generate, 1), "verify_s": round(verify, 1), "train_s": round(train, 1),
                        "steps": steps},
            "wall_hours": round(wall / 3600, 3), "gpu_hours": round(wall * gpus / 3600, 3),
            "source_gpu_hours": SOURCE_GPU_HOURS}


def cost_table(cases: dict[str, tuple[Workload, Rates]], sft_scaling: float = 1.0) -> tuple[list[dict], str]:
    """Rows for each named case on one GPU and on eight, and the same as a markdown table."""
    rows = []
    for name, (w, r) in cases.items():
        for gpus in (1, 8):
            rows.append({"case": name, **estimate(w, r, gpus, sft_scaling), "workload": asdict(w), "rates": asdict(r)})
    lines = ["| case | GPUs | SFT h | RL h | eval h | wall h | GPU-hours | source |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['case']} | {row['gpus']} | {row['sft_s'] / 3600:.2f} | {row['rl_s'] / 3600:.2f} | "
                     f"{row['eval_s'] / 3600:.2f} | {row['wall_hours']:.2f} | {row['gpu_hours']:.2f} | "
                     f"{SOURCE_GPU_HOURS:.0f} |")
    return rows, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__)
        return 2
    cost = json.loads(Path(argv[0]).read_text()).get("cost")
    if not cost:
        print(f"{argv[0]} holds no cost section (the benchmark's summary writes it once SFT and rollout are measured)")
        return 1
    cases = {row["case"]: (Workload(**row["workload"]), Rates(**row["rates"])) for row in cost["rows"]}
    print(cost_table(cases, cost.get("sft_scaling", 1.0))[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
