"""A verdict is about its candidate alone: the same honest candidate gets the same verdict in a
fresh (cold) pool on its own and in one batch with hostile neighbours (a hang, a memory flood, a
fork flood, a memory-hungry process tree), with the static check and the guard out of the way so
the hostile ones really run. On a GPU machine the same batch runs on the GPU too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig, gpu_available
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.pool import VerifierPool

CASES = Path(__file__).parent / "verifier_cases"
HOSTILE = ["adv_infinite_loop", "adv_memory_blowup", "adv_fork_flood", "adv_memory_tree"]
HONEST = [("relu", 1, "relu_ok"), ("conv_bias_relu", 2, "conv_bias_relu_ok")]


def _task(name: str, level: int) -> Task:
    return Task(id=f"test/{name}", level=level, name=name, source=(CASES / "tasks" / f"{name}.py").read_text())


def _code(name: str) -> str:
    code = (CASES / "candidates" / f"{name}.py").read_text()
    if name == "adv_memory_blowup":
        # memory it really touches (1 GiB at a time): untouched torch.empty(64 GiB) costs nothing on a
        # machine that overcommits, and the candidate is then an honest ReLU
        code = code.replace("torch.empty(1 << 34)", "torch.ones(1 << 28)")
    return code


def _summary(v) -> tuple:
    return v.correct, v.reason, v.stage, tuple(v.cheat_flags)


@pytest.mark.slow
@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[
    pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")])])
def test_an_honest_verdict_does_not_depend_on_its_neighbours_or_a_cold_pool(device, monkeypatch):
    monkeypatch.setenv("TRITONRL_UNSAFE_NO_GUARD", "1")  # the hostile ones must run, not be refused
    # the hang and the sleeping memory tree cost their timeout in CPU time and its wall-clock backstop
    # (4 x timeout_s): 10 s, as the pool tests give the same hostile candidates, keeps this test short
    cfg = VerifyConfig(timeout_s=10, memory_limit_mb=2500)
    alone = {}
    for name, level, cand in HONEST:
        with VerifierPool(cfg, workers=2, device=device, cache=False, progress=False) as cold:
            alone[name] = cold.verify(_task(name, level), _code(cand), static=False)
        assert alone[name].correct, (name, alone[name].reason, alone[name].error)

    tasks, codes, honest_at = [], [], {}
    relu = _task("relu", 1)
    for i, hostile in enumerate(HOSTILE):  # hostile, honest, hostile, honest, ...
        tasks.append(relu)
        codes.append(_code(hostile))
        name, level, cand = HONEST[i % len(HONEST)]
        honest_at[len(codes)] = name
        tasks.append(_task(name, level))
        codes.append(_code(cand))
    with VerifierPool(cfg, workers=2, device=device, cache=False, progress=False) as cold:
        verdicts = cold.map(tasks, codes, static=False)
    for i, name in honest_at.items():
        assert _summary(verdicts[i]) == _summary(alone[name]), (i, name, verdicts[i].reason, verdicts[i].error)
    hostile_verdicts = [v for i, v in enumerate(verdicts) if i not in honest_at]
    assert not any(v.correct for v in hostile_verdicts), [v.reason for v in hostile_verdicts]
    # the hang is the candidate's own timeout, never blamed on a neighbour
    assert hostile_verdicts[0].reason == "timeout", hostile_verdicts[0].reason
