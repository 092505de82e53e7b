"""KernelBench as a source of the pipeline (tasks/kernelbench.py): categories read from the
problems, a deterministic stratified split written by the data stage, RL drawing only from its
train part, evaluation and the report on its held-out part. The checkout here is one this test
writes itself in KernelBench's layout (no KernelBench file is copied into the project)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.data.stage import write_kernelbench_split
from tritonrl_lib.eval.errors import EvalError
from tritonrl_lib.eval.heldout import load_eval_tasks
from tritonrl_lib.report import kernelbench as KB
from tritonrl_lib.tasks.kernelbench import (KernelBenchSplit, category, load_kernelbench, make_kernelbench_split)
from tritonrl_lib.tasks.loaders import TaskSourceError
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.train.rl.start import RLStartError, select_rl_tasks

ELEMENTWISE = "return torch.{op}(x)"


def _module(forward: str, init: str = "", params: str = "", init_inputs: str = "", sizes: str = "",
            inputs: str = "torch.rand(batch_size, dim)") -> str:
    return f'''import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A problem written by the test.
    """
    def __init__(self{params}):
        super(Model, self).__init__()
{init or "        pass"}

    def forward(self, x):
        {forward}


batch_size = 16
dim = 393216
{sizes}

def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return [{init_inputs}]  # what the constructor takes
'''


# level, file stem, source: several problems per category, as KernelBench has
PROBLEMS = [
    *[(1, f"{i}_{name}", _module(ELEMENTWISE.format(op=op)))
      for i, (name, op) in enumerate([("ReLU", "relu"), ("Sigmoid", "sigmoid"), ("Tanh", "tanh"),
                                      ("Swish", "sigmoid"), ("GELU_", "relu")], start=19)],
    *[(1, f"{i}_{name}", _module("return torch.matmul(x, x.T)"))
      for i, name in enumerate(["Square_matrix_multiplication_", "Standard_matrix_multiplication_",
                                "Matmul_with_large_K_dimension_", "Tall_skinny_matrix_multiplication_"], start=1)],
    *[(1, f"{i}_{name}", _module("return torch.sum(x, dim=1, keepdim=True)"))
      for i, name in enumerate(["Sum_reduction_over_a_dimension", "Mean_reduction_over_a_dimension",
                                "Argmax_over_a_dimension"], start=47)],
    *[(1, f"{i}_{name}", _module("return torch.cumsum(x, dim=1)")) for i, name in enumerate(["cumsum", "cumprod"],
                                                                                        start=89)],
    *[(1, f"{i}_{name}", _module("return self.conv(x)", init="        self.conv = nn.Conv2d(3, 8, 3)",
                                 inputs="torch.rand(batch_size, 3, 32, 32)"))
      for i, name in enumerate(["conv_standard_2D__square_input__square_kernel", "conv_depthwise_2D_square_input",
                                "conv_transposed_2D__square_input"], start=50)],
    (1, "96_Thing_of_its_own", _module("return torch.cumsum(x.flip(1), dim=1).flip(1)")),  # name says nothing
    *[(2, f"{i}_{name}", _module("x = self.gemm(x)\n        return torch.relu(x * 2.0)",
                                 init="        self.gemm = nn.Linear(dim, 64)"))
      for i, name in enumerate(["Gemm_Multiply_LeakyReLU", "Matmul_Mish_Mish", "Gemm_ReLU_Divide"], start=12)],
    *[(2, f"{i}_{name}", _module("x = self.gemm(x)\n        return torch.sum(x, dim=1)",
                                 init="        self.gemm = nn.Linear(dim, 64)"))
      for i, name in enumerate(["Gemm_Divide_Sum_Scaling", "Matmul_Sigmoid_Sum", "Gemm_GroupNorm_Hardtanh"], start=14)],
    *[(2, f"{i}_{name}", _module("return torch.tanh(self.conv(x))", init="        self.conv = nn.Conv2d(3, 8, 3)",
                                 inputs="torch.rand(batch_size, 3, 32, 32)"))
      for i, name in enumerate(["Conv2d_Mish_Mish", "Conv3d_Mish_Tanh", "ConvTranspose2d_Subtract_Tanh"], start=4)],
    *[(2, f"{i}_{name}", _module("return self.conv(x).mean(dim=1)", init="        self.conv = nn.Conv2d(3, 8, 3)",
                                 inputs="torch.rand(batch_size, 3, 32, 32)"))
      for i, name in enumerate(["Conv3d_GroupNorm_Mean", "Conv2d_AvgPool_Sigmoid_Sum", "ConvTranspose3d_BatchNorm"],
                               start=23)],
    (3, "1_MLP", _module("return torch.relu(x)")),  # Level 3: never split, never used
]


def write_checkout(root: Path, problems=PROBLEMS) -> Path:
    for level, stem, source in problems:
        folder = root / "KernelBench" / f"level{level}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{stem}.py").write_text(source)
    return root


@pytest.fixture
def checkout(tmp_path) -> Path:
    return write_checkout(tmp_path / "kb")


def cfg_for(tmp_path, checkout, **over):
    return load_config("smoke", overrides={"outputs_dir": str(tmp_path / "runs"), "run": "r",
                                           "kernelbench": str(checkout), **over})


# --------------------------------------------------------------------------- categories and the split


def test_categories_come_from_names_and_when_a_name_says_nothing_from_the_calls():
    t = lambda level, name, src="": Task(id=f"kernelbench/L{level}/{name}", level=level, name=name,  # noqa: E731
                                         source=src or _module("return x"))
    assert category(t(1, "19_ReLU")) == "elementwise"
    assert category(t(1, "5_Matrix_scalar_multiplication")) == "elementwise"
    assert category(t(1, "1_Square_matrix_multiplication_")) == "matmul"
    assert category(t(1, "63_conv_standard_2D__square_input__square_kernel")) == "conv"
    assert category(t(1, "23_Softmax")) == "softmax" and category(t(1, "24_LogSoftmax")) == "softmax"
    assert category(t(1, "94_MSELoss")) == "loss" and category(t(1, "42_Max_Pooling_2D")) == "pooling"
    assert category(t(1, "40_LayerNorm")) == "normalization" and category(t(1, "89_cumsum")) == "cumulative"
    assert category(t(1, "51_Argmax_over_a_dimension")) == "reduction"
    assert category(t(1, "7_Odd", _module("return torch.cumsum(x, dim=0)"))) == "cumulative"
    assert category(t(1, "8_Odd", _module("return nn.functional.max_pool2d(x, 2)"))) == "pooling"
    assert category(t(2, "12_Gemm_Multiply_LeakyReLU")) == "gemm_epilogue"
    assert category(t(2, "18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp")) == "gemm_reduction"
    assert category(t(2, "4_Conv2d_Mish_Mish")) == "conv_epilogue"
    assert category(t(2, "11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm")) == "conv_reduction"
    assert category(t(2, "9_Odd", _module("return self.fc(x).relu()", init="        self.fc = nn.Linear(4, 4)"))) \
        == "gemm_epilogue"


def test_the_split_is_stratified_deterministic_and_never_crossed(checkout):
    tasks = load_kernelbench(checkout)
    assert {t.level for t in tasks} == {1, 2}  # Level 3 is not the pipeline's
    split = make_kernelbench_split(tasks, seed=0, heldout_fraction=0.35)
    assert not set(split.train_ids) & set(split.heldout_ids)
    assert set(split.train_ids) | set(split.heldout_ids) == {t.id for t in tasks}
    for stratum, n in split.strata.items():  # every kind measured, every kind trained on
        assert n["heldout"] >= 1 and n["train"] >= 1, stratum
    # the order files come in changes nothing; the seed does
    again = make_kernelbench_split(list(reversed(tasks)), seed=0, heldout_fraction=0.35)
    assert sorted(again.heldout_ids) == sorted(split.heldout_ids)
    other_seeds = {tuple(sorted(make_kernelbench_split(tasks, seed=s, heldout_fraction=0.35).heldout_ids))
                   for s in range(1, 6)}
    assert len(other_seeds | {tuple(sorted(split.heldout_ids))}) > 1
    with pytest.raises(ValueError, match="between 0 and 1"):
        make_kernelbench_split(tasks, seed=0, heldout_fraction=1.0)


def test_the_data_stage_writes_the_split_to_the_run_and_names_a_bad_checkout(tmp_path, checkout):
    cfg = cfg_for(tmp_path, checkout)
    paths = cfg.paths.ensure()
    split = write_kernelbench_split(cfg, paths)
    on_disk = json.loads(paths.kernelbench_split.read_text())
    assert on_disk["heldout_ids"] == split.heldout_ids and on_disk["categories"]
    assert KernelBenchSplit.load(paths.kernelbench_split).side(split.heldout_ids[0]) == "heldout"
    # unset: the run's split goes, so nothing reads a stale one
    assert write_kernelbench_split(cfg_for(tmp_path, checkout, kernelbench=""), paths) is None
    assert not paths.kernelbench_split.exists()
    with pytest.raises(TaskSourceError, match="no such folder"):
        write_kernelbench_split(cfg_for(tmp_path, tmp_path / "nowhere"), paths)


# --------------------------------------------------------------------------- RL and evaluation


def test_rl_trains_on_the_train_part_and_never_on_a_heldout_problem(tmp_path, checkout):
    cfg = cfg_for(tmp_path, checkout, rl_tasks="all")
    paths = cfg.paths.ensure()
    split = write_kernelbench_split(cfg, paths)
    chosen = {t.id for t in select_rl_tasks(cfg, paths)}
    assert set(split.train_ids) <= chosen and not set(split.heldout_ids) & chosen
    assert any(i.startswith("builtin/") for i in chosen)  # beside the built-in suite
    # even when the task source itself is the checkout
    also = cfg_for(tmp_path, checkout, rl_tasks="all", task_source=str(checkout))
    assert not set(split.heldout_ids) & {t.id for t in select_rl_tasks(also, paths)}
    with pytest.raises(ConfigError, match="held out for evaluation"):
        select_rl_tasks(cfg_for(tmp_path, checkout, rl_tasks=split.heldout_ids[0]), paths)
    # a checkout edited after the split: RL refuses rather than train on problems the split never saw
    (checkout / "KernelBench" / "level1" / "19_ReLU.py").write_text(_module("return torch.relu(x) * 1.0"))
    with pytest.raises(RLStartError, match="changed since 01_data split it; run the data stage again"):
        select_rl_tasks(cfg, paths)


def test_rl_tasks_kernelbench_draws_the_train_part_alone(tmp_path, checkout):
    cfg = cfg_for(tmp_path, checkout, rl_tasks="kernelbench")
    paths = cfg.paths.ensure()
    split = write_kernelbench_split(cfg, paths)
    chosen = [t.id for t in select_rl_tasks(cfg, paths)]
    assert sorted(chosen) == sorted(split.train_ids)  # every train problem, no built-in task, no held-out one
    assert {t.level for t in select_rl_tasks(cfg, paths)} == {1, 2}  # both levels: the curriculum mixes them
    with pytest.raises(ConfigError, match="set data.kernelbench"):
        select_rl_tasks(cfg_for(tmp_path, checkout, rl_tasks="kernelbench", kernelbench=""), paths)


def test_evaluation_adds_the_heldout_part_at_published_sizes(tmp_path, checkout):
    cfg = cfg_for(tmp_path, checkout, eval_tasks="heldout", num_tasks=2)
    paths = cfg.paths.ensure()
    from tritonrl_lib.data.split import make_split
    from tritonrl_lib.tasks import load_tasks

    make_split(cfg.seed, cfg.data.heldout_fraction, load_tasks("builtin", size="small"), in_family=1).save(paths.split)
    split = write_kernelbench_split(cfg, paths)
    tasks = load_eval_tasks(cfg, paths)
    kb = [t for t in tasks if t.meta.get("heldout_set") == "kernelbench"]
    assert {t.id for t in kb} == set(split.heldout_ids)  # all of them: num_tasks caps the built-in sets only
    published = {t.id: t.source for t in load_kernelbench(checkout)}
    assert all(t.source == published[t.id] for t in kb) and all(t.meta["category"] for t in kb)
    assert {t.meta.get("heldout_set") for t in tasks} >= {"tasks", "kernelbench"}
    # a checkout edited after the split: the held-out part may no longer be the one RL never saw
    (checkout / "KernelBench" / "level1" / "19_ReLU.py").write_text(_module("return torch.relu(x) * 1.0"))
    with pytest.raises(EvalError, match="changed since 01_data split it"):
        load_eval_tasks(cfg, paths)
    with pytest.raises(ConfigError, match="data.kernelbench names no checkout"):
        load_eval_tasks(cfg_for(tmp_path, checkout, kernelbench="", heldout_sets=["tasks", "kernelbench"]), paths)


# --------------------------------------------------------------------------- the report


def _row(tid: str, level: int, correct: bool, speedup=None, vs_compile=None, completion="```python\nx\n```",
         compile_ms=1.0):
    return {"id": tid, "name": tid.rsplit("/", 1)[-1], "level": level, "sample": 0, "stage": "full" if correct else
            "compile", "reason": "ok" if correct else "mismatch:original", "correct": correct, "speedup": speedup,
            "speedup_vs_compile": vs_compile, "baseline_compile_ms": compile_ms, "heldout_set": "kernelbench",
            "completion": completion, "reward": 0.7}


def test_the_report_tables_read_the_heldout_rows(checkout):
    split = make_kernelbench_split(load_kernelbench(checkout), seed=0, heldout_fraction=0.35)
    l1 = [i for i in split.heldout_ids if "/L1/" in i]
    l2 = [i for i in split.heldout_ids if "/L2/" in i]
    rows = [_row(l1[0], 1, True, 1.5, 0.9), _row(l1[0], 1, False), _row(l1[1], 1, False), _row(l1[1], 1, False),
            _row(l2[0], 2, False), _row(l2[0], 2, False),
            {**_row("builtin/L1/relu", 1, True), "heldout_set": "tasks"}]  # another set: not counted
    records = {"sft": {"detailed_results": rows}}
    table = KB.headline_table(records, resamples=200)
    assert [(r["level"], r["problems"], r["samples"]) for r in table] == [("L1", 2, 4), ("L2", 1, 2)]
    assert table[0]["correct % [95% CI]"].startswith("25.0 [")
    assert table[0]["fast_1 vs eager % [95% CI]"].startswith("25.0")
    assert table[0]["fast_1 vs torch.compile % [95% CI]"].startswith("0.0")  # correct, slower than compiled
    # nothing correct on L2: fast_1 is 0, as eval/metrics records it, not "not measured"
    assert table[1]["fast_1 vs torch.compile % [95% CI]"].startswith("0.0") and table[1]["problems solved"] == 0
    assert table[1]["fast_1 vs eager % [95% CI]"].startswith("0.0")
    cats = KB.category_table(records, split)
    assert sum(r["samples"] for r in cats) == 6 and any(r["solved"] != "-" for r in cats)
    assert KB.split_table(split)[-1] == {"stratum": "all", "train (RL)": len(split.train_ids),
                                         "held out (evaluation)": len(split.heldout_ids)}
    lines = KB.headline_lines(records, split)
    assert "held out of" in lines[0] and "Level 1 25.0%" in lines[1]
    assert [ex.row["id"] for ex in KB.answers(records, per_stage=1)] == [l1[0]]


def test_fast1_vs_compile_counts_only_problems_with_a_stored_baseline(checkout):
    split = make_kernelbench_split(load_kernelbench(checkout), seed=0, heldout_fraction=0.35)
    a, b = [i for i in split.heldout_ids if "/L1/" in i][:2]
    # a: correct and 2x faster than torch.compile; b: no compile baseline stored on this machine
    rows = [_row(a, 1, True, 3.0, 2.0), _row(a, 1, True, 3.0, 2.0), _row(b, 1, True, 1.5, None, compile_ms=None),
            _row(b, 1, False, compile_ms=None)]
    table = KB.headline_table({"rl": {"detailed_results": rows}}, resamples=50)
    assert table[0]["fast_1 vs torch.compile % [95% CI]"].startswith("100.0")  # 2 of the 2 covered samples
    assert table[0]["fast_1 vs eager % [95% CI]"].startswith("75.0")  # 3 of 4: every sample has eager timing
    # a problem never solved needs no baseline: its samples count, none fast (2 of 4)
    c = [i for i in split.heldout_ids if "/L1/" in i][2]
    unsolved = rows + [_row(c, 1, False, compile_ms=None), _row(c, 1, False, compile_ms=None)]
    assert KB.headline_table({"rl": {"detailed_results": unsolved}}, resamples=50)[0][
        "fast_1 vs torch.compile % [95% CI]"].startswith("50.0")
    # stages side by side count the same problems: c solved by "sft" without a compile time is left out of
    # "rl"'s column too (2 of 2 fast there, not 2 of 4)
    solved_c = [_row(c, 1, True, 1.5, None, compile_ms=None), _row(c, 1, False, compile_ms=None)]
    both = KB.headline_table({"sft": {"detailed_results": rows + solved_c},
                              "rl": {"detailed_results": unsolved}}, resamples=50)
    assert both[1]["stage"] == "rl" and both[1]["fast_1 vs torch.compile % [95% CI]"].startswith("100.0")
    # a level with nothing solved and no time stored, in a record that has times: 0, not n/a
    l2 = [i for i in split.heldout_ids if "/L2/" in i][0]
    table = KB.headline_table({"rl": {"detailed_results": rows + [_row(l2, 2, False, compile_ms=None)]}},
                              resamples=50)
    assert table[1]["level"] == "L2" and table[1]["fast_1 vs torch.compile % [95% CI]"].startswith("0.0")
    # no baseline anywhere: not measured, never 0
    bare = [{**r, "baseline_compile_ms": None, "speedup_vs_compile": None} for r in rows]
    assert KB.headline_table({"rl": {"detailed_results": bare}}, resamples=50)[0][
        "fast_1 vs torch.compile % [95% CI]"] == "n/a"
    # correct on a CPU (no timing): n/a, not 0
    cpu = [{**r, "speedup": None} for r in rows]
    assert KB.headline_table({"rl": {"detailed_results": cpu}}, resamples=50)[0]["fast_1 vs eager % [95% CI]"] == "n/a"


def test_training_sizes_are_measured_once_ahead_of_rl_and_read_back(tmp_path, checkout, monkeypatch):
    """The data stage's cores measure RL's training sizes (gpu_rl_session's data stage): every train problem,
    kept in the data folder; a later call reads them back instead of probing again; no cap, nothing measured."""
    import tritonrl_lib.train.rl.reward_tasks as rt
    from tritonrl_lib.train.rl.start import measure_training_sizes

    cfg = cfg_for(tmp_path, checkout, rl_tasks="kernelbench", train_task_max_mb=1)
    paths = cfg.paths.ensure()
    split = write_kernelbench_split(cfg, paths)
    tasks = measure_training_sizes(cfg, paths)
    assert sorted(t.id for t in tasks) == sorted(split.train_ids)
    assert len(json.loads(paths.rl_train_sizes.read_text())) == len(split.train_ids)
    assert all(t.meta.get("train_task_set_mb") is not None for t in tasks)
    monkeypatch.setattr(rt, "probe_sources", None)  # a probe now would fail loudly: only the kept sizes are read
    again = measure_training_sizes(cfg, paths)
    assert [(t.id, t.source) for t in again] == [(t.id, t.source) for t in tasks]
    assert measure_training_sizes(cfg_for(tmp_path, checkout, rl_tasks="kernelbench"), paths) == []
