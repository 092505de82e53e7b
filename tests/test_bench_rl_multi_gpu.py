"""benchmarks/rl_multi_gpu.py's arithmetic: speedup and per-phase efficiency for fixed work (strong
scaling) and for work that grows with the GPUs (weak scaling), and the replay corpus it writes."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("rl_multi_gpu", ROOT / "benchmarks" / "rl_multi_gpu.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["rl_multi_gpu"] = mod
    spec.loader.exec_module(mod)
    return mod


def _row(gpus, samples, step, generate, verify=10.0, wait=2.0, train=4.0):
    return {"model": "m", "method": "best_of_n", "gpus": gpus, "samples": samples, "step_s": step,
            "generate_s": generate, "verify_s": verify, "wait_s": wait, "train_s": train}


def test_strong_scaling_speedup_and_efficiency(bench):
    table = [_row(1, 128, 60.0, 40.0), _row(4, 128, 20.0, 10.0)]
    bench.add_scaling(table)
    assert table[0]["speedup"] == 1.0 and table[0]["eff_generate"] == 1.0
    assert table[1]["speedup"] == 3.0                 # 60 / 20
    assert table[1]["eff_generate"] == 1.0            # 40 / (4 x 10)
    assert table[1]["eff_verify"] == 0.25             # the same 10 s on 4 GPUs: no scaling


def test_weak_scaling_counts_the_work(bench):
    # four times the samples in the same step time on 4 GPUs: throughput 4x, every phase perfectly scaled
    table = [_row(1, 128, 60.0, 40.0), _row(4, 512, 60.0, 40.0)]
    bench.add_scaling(table)
    assert table[1]["speedup"] == 4.0
    assert table[1]["eff_generate"] == 1.0 and table[1]["eff_step"] == 1.0


def test_rows_of_other_methods_do_not_mix(bench):
    table = [_row(1, 128, 60.0, 40.0), {**_row(2, 128, 30.0, 20.0), "method": "grpo"}]
    bench.add_scaling(table)
    assert table[1]["speedup"] is None                # no 1-GPU grpo row to compare with


def test_replay_corpus_from_the_suite(bench, tmp_path):
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.core.paths import RunPaths

    cfg = load_config("smoke", overrides={"outputs_dir": str(tmp_path), "run": "start"})
    paths = RunPaths(tmp_path / "start").ensure()
    bench.replay_corpus(cfg, paths)
    rows = [json.loads(line) for line in paths.sft_train.read_text().splitlines()]
    assert len(rows) >= 100                           # one pair per built-in task with a reference solution
    assert all(r["completion"] and "ModelNew" in r["solution"] for r in rows)
