"""Row families at any row length (data/templates/rowwise.py, rowwise_reduce.py, rowwise_loop.py).

KernelBench Level 1 publishes softmax, reductions, norms and scans over rows of 16K-393K elements: a
kernel that loads a row in one tile (BLOCK = next_power_of_2(n_cols)) cannot compile there. These tests
run each solution's launcher on meta tensors (nothing allocated, the kernel launch recorded instead of
run) at the prompt's published shape and at a 393,216-long row, run the looping kernels under the
Triton interpreter on rows spanning several tiles, and send drawn and broken examples to the verifier.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import types
from pathlib import Path
from unittest import mock

import pytest
import torch

from tritonrl_lib.data.templates import render_example, rowwise
from source_modules import import_source

ROW_FAMILIES = [f.family for f in rowwise.FAMILIES]
REDUCE_ANY_DIM = {f.family for f in rowwise.FAMILIES if f.output == "reduce" and f.dim_param}
CAP = 8192  # the most elements one program's tile may hold
LONG = 393_216  # KernelBench's longest published row
N = 24  # drawn examples per family (index 0 is the house style at small sizes)
GRID_YZ = 65_535  # CUDA's limit on a grid's second and third dimensions


def _row_axes(family: str, init: list) -> tuple[int, ...]:
    """The axes of the first input a program walks (its row)."""
    if family in REDUCE_ANY_DIM:
        return (init[0] % 3,)
    return (-2, -1) if family == "instance_norm" else (-1,)


def _meta_inputs(ref: types.ModuleType, axes: tuple[int, ...], row_len: int | None) -> list:
    """get_inputs() drawn as meta tensors (shapes only); `row_len`: the row axes resized to it."""
    real = {"randn": torch.randn, "rand": torch.rand}

    def fake(name):
        def draw(*size, dtype=None, **_):
            if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
                size = tuple(size[0])
            size = list(size)
            if row_len is not None:
                if len(axes) == 2:
                    size[axes[0]], size[axes[1]] = 512, row_len // 512
                else:
                    size[axes[0]] = row_len
            return real[name](*size, dtype=dtype, device="meta")
        return draw

    with mock.patch.object(torch, "randn", fake("randn")), mock.patch.object(torch, "rand", fake("rand")):
        return ref.get_inputs()


class _Recorder:
    """A jitted kernel's stand-in: `kernel[grid](...)` records the launch instead of running it."""

    def __init__(self, fn, log: list):
        self.fn, self.log = fn, log

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            bound = dict(zip(self.fn.arg_names, args)) | kwargs
            consts = {p.name: bound[p.name] for p in self.fn.params if p.is_constexpr and p.name in bound}
            dims = grid(bound) if callable(grid) else grid
            self.log.append({"consts": consts, "grid": tuple(int(d) for d in dims)})
        return launch


def _launch_log(ex, tmp_path: Path, published: bool, row_len: int | None = None) -> tuple[list[dict], int]:
    """The kernel launches of the solution's forward on meta inputs of the published (or verified)
    reference's shapes, and the row length it walked."""
    import triton

    tag = f"{ex.family}_{abs(hash((ex.solution, published, row_len)))}"
    ref = import_source(ex.published_reference if published else ex.reference, tmp_path / f"ref_{tag}.py")
    sol = import_source(ex.solution, tmp_path / f"sol_{tag}.py")
    init = ref.get_init_inputs()
    axes = _row_axes(ex.family, init)
    inputs = _meta_inputs(ref, axes, row_len)
    log: list[dict] = []
    for name, obj in list(vars(sol).items()):
        if isinstance(obj, triton.runtime.JITFunction):
            setattr(sol, name, _Recorder(obj, log))
    model = sol.ModelNew(*init)
    with torch.no_grad():
        model(*inputs)
    assert log, ex.solution
    return log, math.prod(inputs[0].shape[a] for a in axes)


def _tile(launch: dict) -> int:
    """Elements of one program's tile: the product of the block sizes it was launched with."""
    return math.prod(v for v in launch["consts"].values() if isinstance(v, int))


def _grid_ok(launch: dict) -> bool:
    g = launch["grid"]
    return g[0] < 2**31 and all(d <= GRID_YZ for d in g[1:])


@pytest.mark.parametrize("family", ROW_FAMILIES)
def test_tiles_stay_capped_at_the_published_shape_and_at_any_row_length(family, tmp_path):
    """At the prompt's published shape every launch's tile holds at most CAP elements and its grid is
    launchable; at a 393,216-long row most examples' launchers still cap the tile (the looping form), and
    every example whose prompt shows a row past 4096 elements is one of them."""
    generic = 0
    for index in range(1, N + 1):
        ex = render_example(family, 0, index)
        long_row = False
        if ex.published_reference:
            log, row = _launch_log(ex, tmp_path, published=True)
            assert all(_tile(x) <= CAP for x in log), (family, index, row, log)
            assert all(_grid_ok(x) for x in log), (family, index, log)
            long_row = row > 4096
        log, row = _launch_log(ex, tmp_path, published=False, row_len=LONG)
        assert row == LONG
        capped = all(_tile(x) <= CAP for x in log)
        assert capped or not long_row, (family, index, "a long published row launched as one tile", log)
        generic += capped
    assert generic >= 0.6 * N, (family, generic)


def test_published_prompts_show_long_rows(tmp_path):
    """Of the published-scale prompts of every row family, a good share walk rows of 16,384 elements or
    more (up to KernelBench's 393,216); the rows' count stays realistic and the input under ~2**31."""
    from tritonrl_lib.data.templates.scale import INT32_SAFE

    rows_by_family: dict[str, list[int]] = {}
    for family in ROW_FAMILIES:
        for index in range(1, N + 1):
            ex = render_example(family, 0, index)
            if not ex.published_reference:
                continue
            ref = import_source(ex.published_reference, tmp_path / f"ref_{family}_{index}.py")
            init = ref.get_init_inputs()
            x = _meta_inputs(ref, _row_axes(family, init), None)[0]
            axes = _row_axes(family, init)
            row = math.prod(x.shape[a] for a in axes)
            rows_by_family.setdefault(family, []).append(row)
            assert x.numel() // row >= 16 or family in REDUCE_ANY_DIM, (family, tuple(x.shape))
            assert x.numel() <= 2**31, (family, tuple(x.shape))
            if x.numel() >= INT32_SAFE:
                assert ".to(tl.int64)" in ex.solution, (family, tuple(x.shape), ex.solution)
    every = [r for rows in rows_by_family.values() for r in rows]
    assert sum(r >= 16384 for r in every) >= 0.3 * len(every), sorted(every)
    for family, rows in rows_by_family.items():
        assert sum(r >= 16384 for r in rows) >= 0.2 * len(rows), (family, rows)
    assert max(every) >= 262144


def _tiles_walked(ex, tmp_path: Path) -> int:
    """Tiles a program walks along its row at the verified sizes (1: the row in one tile)."""
    log, row = _launch_log(ex, tmp_path, published=False)
    consts = log[0]["consts"]
    block = consts["BLOCK_R"] if ex.family in REDUCE_ANY_DIM else max(consts.values())
    return math.ceil(row / block)


def _looping(family: str, tmp_path: Path, want: int, start: int = 1) -> list[int]:
    """Indices of `want` examples of `family` whose verified rows span several tiles."""
    found = []
    for index in range(start, start + 80):
        ex = render_example(family, 0, index)
        if _tiles_walked(ex, tmp_path) >= 2:  # a one-tile kernel's block holds the whole row
            found.append(index)
            if len(found) == want:
                return found
    raise AssertionError(f"{family}: fewer than {want} looping examples")


_CHILD = """
import sys, types, warnings, torch
warnings.simplefilter("ignore")
from tritonrl_lib.data.templates import render_example
bad = []
for arg in sys.argv[1:]:
    fam, index, kind = arg.split(":")
    ex = render_example(fam, 0, int(index))
    ref, sol = types.ModuleType("ref"), types.ModuleType("sol")
    exec(compile(ex.reference, "ref", "exec"), ref.__dict__)
    exec(compile(ex.solution, "sol", "exec"), sol.__dict__)
    torch.manual_seed(int(index))
    m = ref.Model(*ref.get_init_inputs())
    new = sol.ModelNew(*ref.get_init_inputs())
    new.load_state_dict(m.state_dict())
    inputs = ref.get_inputs()
    if kind == "ties":  # few distinct values: the first index of the max / min must win, across tiles too
        inputs = [torch.randint(0, 3, x.shape).to(x.dtype) for x in inputs]
    with torch.no_grad():
        a, b = m(*inputs), new(*inputs)
    tol = 1e-3 if ex.dtype == "float32" else 2e-2
    if kind == "ties":
        ok = a.shape == b.shape and torch.equal(a, b)
    else:
        ok = a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a.float(), b.float(), atol=tol, rtol=tol)
    if not ok:
        bad.append(arg)
print("bad", bad)
"""


def _run_child(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=900,
                          check=False, env={**os.environ, "TRITON_INTERPRET": "1"})


@pytest.mark.slow
def test_looping_kernels_match_torch_on_rows_of_several_tiles(tmp_path):
    """Two looping examples of every row family, their verified rows 2-4 tiles long (the last one
    partial), against the reference under Triton's interpreter; argmax / argmin again on inputs full of
    ties (the first index wins, as in torch, also when the tie spans two tiles)."""
    args = []
    for family in ROW_FAMILIES:
        for index in _looping(family, tmp_path, 2):
            args.append(f"{family}:{index}:randn")
            if family in ("argmax_dim", "argmin_dim"):
                args.append(f"{family}:{index}:ties")
    proc = _run_child(args)
    assert proc.returncode == 0 and proc.stdout.strip() == "bad []", (proc.stdout[-2000:], proc.stderr[-3000:])


# ----------------------------------------------------------------------------- the verifier


def _kernel_text(solution: str) -> str:
    return solution.split("class ModelNew")[0]


def _stop_a_tile_early(solution: str) -> str:
    """Every loop over a row's tiles stops one tile short."""
    out = re.sub(r"range\(0, (\w+), (\w+)\)", r"range(0, \1 - \2, \2)", solution)
    return re.sub(r"range\(0, tl\.cdiv\((\w+), (\w+)\)\)", r"range(0, tl.cdiv(\1, \2) - 1)", out)


def _drop_rescale(solution: str) -> str:
    """The online softmax adds each tile's sum without rescaling the sum so far to the new maximum."""
    return solution.replace("denom = denom * tl.exp(row_max - new_max) + ", "denom = denom + ")


def _drop_carry(solution: str) -> str:
    """Each tile's scan without the prefix of the tiles before it."""
    return re.sub(r"(= tl\.cumsum\(\w+, axis=0\)(?: - \w+)?) \+ carry", r"\1", solution)


def _drop_tile_start(solution: str) -> str:
    """argmax / argmin's index within its tile, not within the row."""
    return solution.replace(", axis=0) + start", ", axis=0)")


def _first(family: str, tmp_path: Path, pred, start: int = 1):
    """The first looping example of `family` from `start` on (rows of several tiles) that `pred` accepts."""
    from tritonrl_lib.data.generate import make_candidate

    for index in range(start, start + 200):
        ex = render_example(family, 0, index)
        if pred(ex) and _tiles_walked(ex, tmp_path) >= 2:
            return make_candidate(family, 0, index)
    raise AssertionError(f"no looping example of {family} fits")


@pytest.mark.slow
def test_the_verifier_passes_looping_examples_and_refuses_broken_ones(tmp_path):
    """A looping example of every row family (rows of several tiles at the verified sizes) through the real
    verifier; then looping kernels broken the ways a loop goes wrong (stopping a tile early, the online
    softmax's rescale dropped, a scan's carry dropped, argmax's tile offset dropped): every one refused.
    (Without the rescale, logsumexp and half-precision log-softmax are off by less than the tolerance on
    values in random order, where the first tile's max is already close to the row's and the log shrinks
    the error: the seed set's rows, sorted ascending, are what refuse them.)"""
    from tritonrl_lib.core.config import load_config
    from tritonrl_lib.data.generate import make_candidate
    from tritonrl_lib.model.prompts import format_completion
    from tritonrl_lib.verify import VerifierPool

    good = [make_candidate(f, 0, _looping(f, tmp_path, 1, start=5)[0]) for f in ROW_FAMILIES]
    online = "denom = denom * tl.exp(row_max - new_max)"
    breaks = [
        ("softmax", lambda e: online in e.solution, _drop_rescale),
        ("softmax_scale", lambda e: online in e.solution, _drop_rescale),
        ("log_softmax", lambda e: online in e.solution and e.dtype == "float32", _drop_rescale),
        ("log_softmax", lambda e: online in e.solution and e.dtype == "float16", _drop_rescale),
        ("logsumexp_relu", lambda e: online in e.solution, _drop_rescale),
        ("softmax", lambda e: "range(0, tl.cdiv(" in e.solution, _stop_a_tile_early),
        ("softmax", lambda e: online not in e.solution, _stop_a_tile_early),
        ("layer_norm", lambda e: True, _stop_a_tile_early),
        ("rms_norm", lambda e: True, _stop_a_tile_early),
        ("sum_dim", lambda e: True, _stop_a_tile_early),
        ("mean_square_sqrt", lambda e: True, _stop_a_tile_early),
        ("cumsum", lambda e: True, _stop_a_tile_early),
        ("cumsum", lambda e: True, _drop_carry),
        ("exclusive_cumsum", lambda e: True, _drop_carry),
        ("argmax_dim", lambda e: True, _drop_tile_start),
        ("argmin_dim", lambda e: True, _drop_tile_start),
    ]
    broken = []
    for family, pred, breaker in breaks:
        cand = _first(family, tmp_path, pred)
        bad = breaker(cand.task.reference_solution)
        assert _kernel_text(bad) != _kernel_text(cand.task.reference_solution), (family, breaker.__name__)
        broken.append((cand, bad, breaker.__name__))
    tasks = [c.task for c in good] + [c.task for c, _, _ in broken]
    sols = [c.completion for c in good] + [format_completion(s) for _, s, _ in broken]
    with VerifierPool(load_config("smoke").verify, cache=False, progress=False) as pool:
        verdicts = pool.map(tasks, sols, progress=False)
    failed = [(c.task.id, v.reason, v.error[-300:]) for c, v in zip(good, verdicts) if not v.correct]
    assert not failed, failed
    assert all(v.stage == "full" and not v.cheat_flags for v in verdicts[: len(good)])
    passed = [(c.task.name, how) for (c, _, how), v in zip(broken, verdicts[len(good):]) if v.correct]
    assert not passed, passed
