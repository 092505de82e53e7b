"""The suite's proof: every built-in reference solution passes the real verifier.

All tasks at "small" size go through one VerifierPool (workers in parallel; on the CPU the kernels
run under Triton's interpreter, on a GPU for real, with the extra dtype variation). Each must be
`correct` with no cheat flag: the same funnel a model's candidate goes through, with the level's
default policy (strict for Level 1, fusion for Level 2).
"""

from __future__ import annotations

import time

import pytest

from tritonrl_lib.tasks import load_builtin
from tritonrl_lib.verify import VerifierPool


@pytest.mark.slow
def test_every_builtin_solution_passes_the_verifier():
    tasks = load_builtin("small")
    started = time.perf_counter()
    with VerifierPool(cache=False, progress=False) as pool:
        verdicts = pool.map(tasks, [t.reference_solution for t in tasks])
    wall = time.perf_counter() - started

    failures = [f"{t.id}: stage={v.stage} reason={v.reason} flags={v.cheat_flags} {v.error[:300]}"
                for t, v in zip(tasks, verdicts) if not v.correct or v.cheat_flags]
    assert not failures, f"{len(failures)} reference solution(s) rejected:\n" + "\n".join(failures)

    # every variation really ran, the larger-shape one included (each task has a size to double)
    for t, v in zip(tasks, verdicts):
        names = [e["name"] for e in v.errors]
        assert {"tiny", "original", "range", "seed", "larger"} <= set(names), (t.id, names)
        assert all(e["ok"] for e in v.errors), (t.id, v.errors)

    slowest = sorted(zip(verdicts, tasks), key=lambda p: -p[0].duration_s)[:5]
    print(f"\n{len(tasks)} tasks verified in {wall:.1f}s on {pool.size} worker(s); slowest: "
          + ", ".join(f"{t.name} {v.duration_s:.1f}s" for v, t in slowest))
