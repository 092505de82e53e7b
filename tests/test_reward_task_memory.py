"""RL's training tasks under a memory cap (rl.train_task_max_mb): KernelBench-sized tasks are shrunk
until one input set fits, measured on the meta device in a fresh process (probe_batch), the
measurements kept in the run's data folder; a task that cannot be measured or shrunk keeps its scaled
sizes. The sources here are written in KernelBench's layout (module-level sizes, get_inputs)."""

from __future__ import annotations

import pytest

from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.core.jsonio import read_json
from tritonrl_lib.tasks.kb_format import module_constants
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.train.rl.reward_tasks import set_bytes, tasks_for_training, training_sizes_note
from tritonrl_lib.train.rl.run_frame import fingerprint
from tritonrl_lib.verify.sandbox.footprint import Footprint
from tritonrl_lib.verify.sandbox.probe_batch import probe_sources

MB = 2**20

RELU = '''import torch
import torch.nn as nn

class Model(nn.Module):
    """Applies ReLU to the input."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
'''

# 8192 x 8192 float32 weights: 256 MB that no input size can shrink; its input set is small
WIDE_LINEAR = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.fc(x))

batch_size = 128
in_features = 8192
out_features = 8192

def get_inputs():
    return [torch.randn(batch_size, in_features)]

def get_init_inputs():
    return [in_features, out_features]
'''

# nothing shrinkable: its only size shapes the model
ONLY_MODEL_SIZES = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        return x.repeat(self.n, 1) * 2

n = 4096

def get_inputs():
    return [torch.randn(4096, 4096)]

def get_init_inputs():
    return [n]
'''


def task(name: str, source: str) -> Task:
    return Task(id=f"kernelbench/L1/{name}", name=name, level=1, source=source, op_family="test")


def test_a_kernelbench_sized_task_is_brought_under_the_cap_and_measured_again_there(tmp_path):
    relu, wide = task("19_ReLU", RELU), task("wide_linear", WIDE_LINEAR)
    out = tasks_for_training([relu, wide], 4, 256, cache=tmp_path / "sizes.json")
    small_relu, same_wide = out
    # /4 alone leaves 1024 x 393216 floats, 1.5 GB in and 1.5 GB out: halved until the set fits
    sizes = module_constants(small_relu.source)
    assert sizes["dim"] == 393216 and sizes["batch_size"] < 4096 // 4
    assert small_relu.meta["training_sizes"] == {"batch_size": sizes["batch_size"]}
    assert 0 < small_relu.meta["train_task_set_mb"] <= 256
    # not halved further than needed: twice the batch would not fit
    assert sizes["batch_size"] * 2 * 393216 * 4 * 2 > 256 * MB
    again = probe_sources([small_relu.source])[0]
    assert again is not None and set_bytes(again) <= 256 * MB
    # the weights are not the set's: the wide layer keeps its /4 batch and its features
    assert module_constants(same_wide.source) == {**module_constants(WIDE_LINEAR), "batch_size": 32}
    assert same_wide.meta["train_task_set_mb"] < 256
    assert again.param_bytes == 0 and probe_sources([same_wide.source])[0].param_bytes >= 256 * MB
    assert (small_relu.id, same_wide.id) == (relu.id, wide.id)


def fake_probe(calls: list, per_element: int = 8, fail: bool = False):
    """Measures a source as its batch_size x dim floats, in and out (what the meta run would say)."""
    def probe(sources):
        calls.append(list(sources))
        out = []
        for s in sources:
            c = module_constants(s)
            n = c.get("batch_size", 1) * c.get("dim", 1)
            out.append(None if fail else Footprint(input_bytes=n * per_element // 2, param_bytes=0,
                                                   output_bytes=n * per_element // 2, work_bytes=0,
                                                   largest_output_bytes=n * per_element // 2))
        return out
    return probe


def test_measurements_are_kept_and_a_resumed_run_measures_nothing(tmp_path):
    cache = tmp_path / "rl_train_sizes.json"
    calls: list = []
    first = tasks_for_training([task("19_ReLU", RELU)], 4, 256, cache=cache, probe=fake_probe(calls))
    assert len(calls) >= 2 and all(len(c) == 1 for c in calls)  # measured, shrunk, measured again
    assert len(read_json(cache)) == len(calls)
    calls.clear()
    second = tasks_for_training([task("19_ReLU", RELU)], 4, 256, cache=cache, probe=fake_probe(calls))
    assert calls == [] and [t.source for t in second] == [t.source for t in first]


def test_a_task_that_cannot_be_measured_or_shrunk_keeps_its_sizes_and_the_note_says_so(tmp_path):
    calls: list = []
    [unmeasured] = tasks_for_training([task("19_ReLU", RELU)], 4, 256, probe=fake_probe(calls, fail=True))
    assert module_constants(unmeasured.source)["batch_size"] == 1024 and "train_task_set_mb" not in unmeasured.meta
    assert "1 not measurable" in training_sizes_note([unmeasured], 256)
    [stuck] = tasks_for_training([task("repeat", ONLY_MODEL_SIZES)], 4, 32)
    assert stuck.source == ONLY_MODEL_SIZES and stuck.meta["train_task_set_mb"] > 32
    assert "1 stay above it" in training_sizes_note([stuck], 32)


def test_no_cap_measures_nothing_and_leaves_old_fingerprints_alone(tmp_path):
    calls: list = []
    [t] = tasks_for_training([task("19_ReLU", RELU)], 4, 0, probe=fake_probe(calls))
    assert calls == [] and module_constants(t.source)["batch_size"] == 1024
    cfg = load_config("smoke", overrides={"outputs_dir": str(tmp_path)})
    assert "train_task_max_mb" not in fingerprint(cfg, "best_of_n", tmp_path, ["a"])["rl"]
    capped = load_config("smoke", overrides={"outputs_dir": str(tmp_path), "train_task_max_mb": 256})
    assert fingerprint(capped, "best_of_n", tmp_path, ["a"])["rl"]["train_task_max_mb"] == 256
    assert load_config("gpu").rl.train_task_max_mb == 256
    with pytest.raises(ConfigError, match="train_task_max_mb"):
        load_config("smoke", overrides={"train_task_max_mb": -1})
