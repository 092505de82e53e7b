"""Run folders for the report's tests, written as the stages and `tritonrl run` write theirs: eval
records through `build_record` (with the baselines note or store `attach_to_record` leaves), the SFT /
RL / curriculum logs, timings.json and the step records (`run_state.write_record`), a KernelBench split.

    cfg, paths = cpu_run(run_dir)     # what `make run` leaves on a 2-core CPU: 4 held-out tasks, all wrong
    cfg, paths = gpu_run(run_dir)     # a gpu-profile run on one H100: held-out + KernelBench rows, timed,
                                      # a baselines file covering some tasks, 6 RL rounds, long paths
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import nbformat
from papermill.engines import NotebookExecutionManager
from papermill.execute import prepare_notebook_metadata
from papermill.iorw import load_notebook_node

from tritonrl_lib.core.config import RunConfig, load_config
from tritonrl_lib.eval import baselines as B
from tritonrl_lib.eval.record import EvalSampling, build_record, write_record
from tritonrl_lib.run import state as run_state
from tritonrl_lib.tasks.kernelbench import KernelBenchSplit
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.reward import compute_reward
from tritonrl_lib.verify.verdict import Verdict

H100 = "1x NVIDIA H100 80GB HBM3"
CPU = "cpu (2 cores, x86_64)"
LONG_LINE = ("    out = tl.where(mask, tl.maximum(x * scale + bias, 0.0) + alpha * tl.minimum(x * scale + bias, 0.0), "
             "other_value_that_keeps_this_line_going_well_past_any_window_width_a_reader_has)  # a long line")


def reply(task: Task, body: str = "") -> str:
    """A model reply as the rollout keeps it: prose, then a fenced module with a long line."""
    return (f"Here is a Triton version of {task.name}.\n```python\nimport torch\nimport triton\n"
            f"import triton.language as tl\n\n@triton.jit\ndef kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
            f"    pid = tl.program_id(0)\n{LONG_LINE}\n{body}\nclass ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n        return x\n```")


def failed(stage: str, reason: str) -> Verdict:
    return Verdict(stage=stage, correct=False, reason=reason, reward=compute_reward(stage, (), None),
                   error=f"{reason}: AssertionError: max abs diff 3.2e+01 at index (0, 17, 255, 1023) "
                         "(tolerance 1e-02) " + "x" * 150)


def timed(kernel_ms: float, ref_ms: float) -> Verdict:
    return Verdict(stage="timing", correct=True, reason="ok", kernel_time_ms=kernel_ms, ref_time_ms=ref_ms,
                   speedup=ref_ms / kernel_ms, reward=compute_reward("timing", (), ref_ms / kernel_ms))


def untimed_correct() -> Verdict:
    return Verdict(stage="full", correct=True, reason="ok", reward=compute_reward("full", (), None),
                   notes=["timing skipped: no GPU"])


def _tasks(spec: list[tuple[str, int, str]]) -> list[Task]:
    return [Task(id=tid, level=level, name=tid.rsplit("/", 1)[-1], source=f"# {tid}\n",
                 meta={"heldout_set": hset}) for tid, level, hset in spec]


def _record(model_stage: str, model_path: str, tasks: list[Task], verdicts: list[Verdict], k: int, device: str,
            wall_s: float, tokens_per_s: float) -> dict[str, Any]:
    rec = build_record(model_stage=model_stage, model_path=model_path, tasks=tasks,
                       completions=[[reply(t, f"# sample {j}") for j in range(k)] for t in tasks], verdicts=verdicts,
                       sampling=EvalSampling(k, 0.2, 0.95, 1024, 8, 0), task_source="heldout", device=device,
                       wall_s=wall_s, extra={"generation": {"tokens_per_s": tokens_per_s}}, resamples=200)
    return rec


def _logs(paths, sft_steps: int, rl_rounds: int, timed_rounds: bool) -> None:
    def jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    jsonl(paths.sft_log, [{"step": s, "loss": 1.6 / (1 + 0.2 * s), "learning_rate": 2e-4 * (1 - s / (sft_steps + 1)),
                           "session": 1} for s in range(1, sft_steps + 1)])
    rounds = []
    for r in range(rl_rounds):
        row = {"method": "best_of_n", "round": r, "mean_reward": 0.2 + 0.05 * r, "correct_rate": 0.1 + 0.04 * r,
               "by_level": {"1": {"correct_rate": 0.15 + 0.05 * r}, "2": {"correct_rate": 0.05 + 0.02 * r}},
               "by_task": {f"builtin/L1/op{r}": [1, 4], "builtin/L1/op0": [min(r, 4), 4]}}
        if timed_rounds:
            row["timing"] = {"generate_s": 80.0, "refine_generate_s": 10.0, "verify_s": 40.0, "verify_wait_s": 6.0,
                             "train_s": 35.0}
            row["signal"] = {"groups": 16, "with_signal": 9 + r % 3, "first_draw_with_signal": 5,
                             "rule": "a correct candidate to keep"}
        rounds.append(row)
    jsonl(paths.rl_log, rounds)
    jsonl(paths.curriculum_log, [{"step": s, "p_level2": 0.1 if s < 2 else 0.3, "running_l1_rate": 0.1 * s,
                                  "triggered_at": 2 if s >= 2 else None} for s in range(max(rl_rounds, 2))])


def finish_steps(cfg: RunConfig, paths, walls: dict[str, float], device: str,
                 finished: str = "2026-11-25T10:00:00") -> None:
    """What `tritonrl run` leaves once each step finished: its step record, then its timing."""
    timings = json.loads(paths.timings.read_text()) if paths.timings.is_file() else {}
    for step, wall in walls.items():
        run_state.write_record(cfg, paths, step, "sha-of-the-notebook", {}, wall)
        timings[step] = {"wall_s": wall, "finished": finished, "device": device}
    paths.timings.parent.mkdir(parents=True, exist_ok=True)
    paths.timings.write_text(json.dumps(timings))


def cpu_run(run_dir: Path, run: str = "cpu") -> tuple[RunConfig, Any]:
    """A finished `make run` of the cpu profile: 2 tasks of each held-out set (4 in all), one sample
    each, nothing correct, no timing, no baselines for this machine (the note in every record)."""
    cfg = load_config("cpu", overrides={"outputs_dir": str(run_dir), "run": run})
    paths = cfg.paths.ensure()
    tasks = _tasks([("builtin/L1/softplus_v2", 1, "tasks"), ("builtin/L2/gemm_bias_gelu_v1", 2, "tasks"),
                    ("builtin/L1/hardsigmoid", 1, "families"), ("builtin/L2/conv_scale_tanh", 2, "families")])
    _, note = B.baselines_for_eval("auto", run_dir, "cpu")
    checkpoints = {"base": "embedded", "sft": str(paths.sft_checkpoint), "rl": str(paths.rl_best_adapter)}
    verdicts = {"base": [failed("none", "no_code"), failed("extract", "static:no_modelnew"),
                         failed("none", "no_code"), failed("static", "compile_error")],
                "sft": [failed("static", "compile_error"), failed("compile", "mismatch:tiny"),
                        failed("extract", "static:no_triton_kernel"), failed("none", "loop")],
                "rl": [failed("static", "compile_error"), failed("compile", "mismatch:tiny"),
                       failed("extract", "static:no_triton_kernel"), failed("none", "loop")]}
    for stage, path in checkpoints.items():
        rec = _record(stage, path, tasks, verdicts[stage], 1, CPU, 95.0, 41.3)
        B.attach_to_record(rec, tasks, None, note)
        if stage == "rl":
            rec["notes"].append(f"reused the evaluation of sft ({checkpoints['sft']}): byte-identical weights")
        write_record(paths.eval_file(stage), rec)
    _logs(paths, sft_steps=3, rl_rounds=1, timed_rounds=False)
    paths.rl_best.parent.mkdir(parents=True, exist_ok=True)
    paths.rl_best.write_text(json.dumps({"method": "best_of_n", "policy": "sft", "metric": "mean_reward",
                                         "value": 0.075}))
    finish_steps(cfg, paths, {"01_data": 41.2, "02_sft": 118.5, "03_rl": 96.0, "04_eval": 190.4, "05_report": 9.1},
                 CPU)
    return cfg, paths


def gpu_run(run_dir: Path,
            run: str = "gpu-h100-lora64-bestofn-8rounds-heldout-and-kernelbench") -> tuple[RunConfig, Any]:
    """A gpu-profile run on one H100, held-out sets plus held-out KernelBench problems at published
    sizes, 8 samples each, correct kernels timed; a baselines file with torch.compile times for all but
    one KernelBench problem; 6 best-of-N rounds with their timing; long run names and paths."""
    cfg = load_config("gpu", overrides={"outputs_dir": str(run_dir), "run": run, "kernelbench": "/data/KernelBench"})
    paths = cfg.paths.ensure()
    kb = [("kernelbench/L1/19_ReLU", 1), ("kernelbench/L1/23_Softmax", 1), ("kernelbench/L1/36_RMSNorm_", 1),
          ("kernelbench/L2/12_Gemm_Multiply_LeakyReLU", 2),
          ("kernelbench/L2/40_Matmul_Scaling_ResidualAdd_Sum_LogSumExp_HardTanh_Mish_And_Some_More_Ops", 2)]
    tasks = _tasks([("builtin/L1/softplus_v2", 1, "tasks"), ("builtin/L2/gemm_bias_gelu_v1", 2, "tasks"),
                    ("builtin/L1/hardsigmoid", 1, "families"), ("builtin/L2/conv_scale_tanh", 2, "families")]
                   + [(tid, level, "kernelbench") for tid, level in kb])
    categories = {"kernelbench/L1/19_ReLU": "activation", "kernelbench/L1/23_Softmax": "normalization",
                  "kernelbench/L1/36_RMSNorm_": "normalization",
                  "kernelbench/L2/12_Gemm_Multiply_LeakyReLU": "gemm+epilogue", kb[4][0]: "gemm+reduction"}
    KernelBenchSplit(checkout="/data/KernelBench", seed=0, heldout_fraction=0.35, categories=categories,
                     train_ids=[f"kernelbench/L1/{i}_Train" for i in range(9)], heldout_ids=[t for t, _ in kb],
                     sources_digest="d" * 64,
                     strata={"L1/activation": {"train": 3, "heldout": 1},
                             "L1/normalization": {"train": 4, "heldout": 2},
                             "L2/gemm+epilogue": {"train": 1, "heldout": 1},
                             "L2/gemm+reduction": {"train": 1, "heldout": 1}}).save(paths.kernelbench_split)
    machine = {"device": "cuda", "name": "NVIDIA H100 80GB HBM3", "cuda": "12.8", "torch": "2.13.0", "triton": "3.6.0"}
    store = B.BaselineFile(B.default_dir(run_dir) / B.file_name(machine), machine)
    for t in tasks[:-1]:
        store.record(t, {"eager": {"ms": 0.40}, "compile": {"ms": 0.31}}, {"warmup": 10, "trials": 50, "trim": 0.1},
                     1.0)
    store.save()
    k = 8  # 9 tasks x 8: 72 samples per model, past the report's demonstration size
    plans = {"base": [0.0, 0.0, 0.0, 0.125], "sft": [0.25, 0.5, 0.0, 0.25], "rl": [0.5, 0.75, 0.25, 0.5]}
    paths_of = {"base": "Qwen/Qwen2.5-Coder-7B-Instruct", "sft": str(paths.sft_checkpoint),
                "rl": str(paths.rl_best_adapter)}
    for stage, shares in plans.items():
        verdicts = []
        for i, _ in enumerate(tasks):
            right = round(shares[i % 4] * k)
            verdicts += [timed(0.15 + 0.1 * j + 0.02 * i, 0.4) for j in range(right)]  # some faster, some slower
            wrong = [failed("compile", "mismatch:seed"), failed("static", "compile_error")]
            verdicts += [wrong[j % 2] for j in range(k - right)]
        rec = _record(stage, paths_of[stage], tasks, verdicts, k, H100, 640.0, 1650.0)
        B.attach_to_record(rec, tasks, store, None)
        write_record(paths.eval_file(stage), rec)
    _logs(paths, sft_steps=60, rl_rounds=6, timed_rounds=True)
    paths.rl_best.parent.mkdir(parents=True, exist_ok=True)
    paths.rl_best.write_text(json.dumps({"method": "best_of_n", "policy": "round-004", "metric": "mean_reward",
                                         "value": 0.41}))
    finish_steps(cfg, paths, {"01_data": 212.0, "02_sft": 611.3, "03_rl": 1204.8, "04_eval": 402.2, "05_report": 14.0},
                 H100)
    return cfg, paths


def started_notebook(paths, step: str, cells_done: int = 1, started_s_ago: float = 125.0,
                     error: str | None = None) -> Path:
    """The copy of a notebook papermill leaves, written by papermill's own execution manager (at the
    start and at each cell): by default a run killed outright (kill -9) in cell `cells_done`, never
    ended; with `error`, a run whose cell raised `error` (papermill then ends the notebook, failed)."""
    source = paths.root.parent / f"{step}.source.ipynb"
    cells = [nbformat.v4.new_code_cell(code) for code in ("x = 1", "y = 2", "train()")]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), source)
    out = paths.executed_notebook(step)
    out.parent.mkdir(parents=True, exist_ok=True)
    nb = prepare_notebook_metadata(load_notebook_node(str(source)), str(source), str(out))  # as papermill does
    manager = NotebookExecutionManager(nb, output_path=str(out), progress_bar=False)
    manager.notebook_start()
    manager.start_time = datetime.fromtimestamp(time.time() - started_s_ago, timezone.utc)
    manager.nb.metadata.papermill["start_time"] = manager.start_time.isoformat()
    for i, cell in enumerate(manager.nb.cells[:cells_done + 1]):
        manager.cell_start(cell, i)
        if i < cells_done:
            manager.cell_complete(cell, i)
    if error is not None:
        cell = manager.nb.cells[cells_done]
        cell.outputs = [nbformat.v4.new_output("error", ename=error, evalue="it went wrong", traceback=[])]
        manager.cell_exception(cell, cells_done)
        manager.cell_complete(cell, cells_done)
        manager.notebook_complete()
        manager.save()
    return out
