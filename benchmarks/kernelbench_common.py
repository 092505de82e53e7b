"""What kernelbench_check.py and kernelbench_sweep.py share: the honest solutions, shrinking a real
KernelBench problem to sizes the Triton interpreter runs in seconds, building a problem's
reference and a solution side by side in this process, and sorting verdicts into the candidate's
and the verifier's.

Shrinking reads more forms of size constants than the verifier's own helpers do today
(`height = width = 128`, `N = 2048 * 2`, `input_shape = (32768,)`, `h, w = 128, 128`), since a real
checkout writes all of them. Only a copy in a temporary folder is ever rewritten.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tritonrl_lib.tasks import kernelbench_level_dirs, parse_kb_source  # noqa: E402
from tritonrl_lib.verify.candidate.variations import is_batch_like  # noqa: E402

SOLUTIONS_DIR = Path(__file__).resolve().parent / "kernelbench_solutions"
SEED = 42  # the verifier's: models are built and inputs drawn under it

# What each honest solution is, for the tables (problem file stem -> category).
CATEGORIES = {
    "19_ReLU": "elementwise", "20_LeakyReLU": "elementwise", "26_GELU_": "elementwise",
    "47_Sum_reduction_over_a_dimension": "reduction", "48_Mean_reduction_over_a_dimension": "reduction",
    "53_Min_reduction_over_a_dimension": "reduction",
    "36_RMSNorm_": "norm", "39_L2Norm_": "norm", "40_LayerNorm": "norm",
    "23_Softmax": "softmax",
    "1_Square_matrix_multiplication_": "matmul", "2_Standard_matrix_multiplication_": "matmul",
    "94_MSELoss": "loss", "96_HuberLoss": "loss",
    "89_cumsum": "scan",
    "1_Conv2D_ReLU_BiasAdd": "conv + epilogue", "4_Conv2d_Mish_Mish": "conv + epilogue",
    "71_Conv2d_Divide_LeakyReLU": "conv + epilogue", "67_Conv2d_GELU_GlobalAvgPool": "conv + row reduction",
    "12_Gemm_Multiply_LeakyReLU": "gemm + epilogue", "76_Gemm_Add_ReLU": "gemm + epilogue",
    "99_Matmul_GELU_Softmax": "gemm + row softmax", "56_Matmul_Sigmoid_Sum": "gemm + row reduction",
}

# aten ops of the GEMM family: the lead is changing the `fusion` policy so these may stay in PyTorch
GEMM_OPS = ("mm", "addmm", "linear", "matmul", "bmm", "baddbmm")


# --------------------------------------------------------------------------- problems and solutions


@dataclass(frozen=True)
class Problem:
    level: int
    name: str  # the file's stem, e.g. "19_ReLU"
    path: Path

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def task_id(self) -> str:
        return f"kernelbench/L{self.level}/{self.name}"


def list_problems(kernelbench: str | Path, levels: set[int] | None = None) -> list[Problem]:
    """Every problem file of a KernelBench checkout, by level then problem number."""
    dirs = kernelbench_level_dirs(kernelbench)
    if not dirs:
        raise SystemExit(f"{kernelbench} is not a KernelBench checkout: expected KernelBench/level1/ ... "
                         "(clone https://github.com/ScalingIntelligence/KernelBench and pass its root)")
    out = []
    for level, folder in dirs.items():
        if levels is not None and level not in levels:
            continue
        for path in folder.glob("*.py"):
            if not path.name.startswith("__"):
                out.append(Problem(level, path.stem, path))
    return sorted(out, key=lambda p: (p.level, _number(p.name), p.name))


def _number(name: str) -> int:
    m = re.match(r"^(\d+)_", name)
    return int(m.group(1)) if m else 10**9


def list_solutions(solutions: str | Path = SOLUTIONS_DIR,
                   levels: set[int] | None = None) -> dict[tuple[int, str], Path]:
    """(level, problem stem) -> the honest solution's file, from `<solutions>/level<N>/<stem>.py`."""
    out = {}
    for folder in sorted(Path(solutions).glob("level*")):
        m = re.match(r"^level(\d+)$", folder.name)
        if not m or (levels is not None and int(m.group(1)) not in levels):
            continue
        for path in folder.glob("*.py"):
            out[(int(m.group(1)), path.stem)] = path
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0], _number(kv[0][1]), kv[0][1])))


# --------------------------------------------------------------------------- shrinking sizes

SIZE_FLOOR = 8  # constants at or below this (kernel sizes, strides, reduced dims) are kept
SMALL_BATCH = 4
DIVISORS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 16384)


@dataclass(frozen=True)
class SizeSite:
    """One integer in the source that sizes the problem: its names and where its expression sits."""

    names: tuple[str, ...]  # `a = b = 4` -> ("a", "b"); `shape = (4, 5)` -> ("shape[0]",) for its first item
    value: int
    span: tuple[int, int, int, int]  # lineno, col, end_lineno, end_col of the value's expression


_INT_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
            ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b}


def _int_value(node: ast.expr) -> int | None:
    """The value of an integer literal or of arithmetic on integer literals (`2048 * 2`)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _INT_OPS:
        a, b = _int_value(node.left), _int_value(node.right)
        if a is None or b is None or (isinstance(node.op, ast.Pow) and not 0 <= b <= 64):
            return None
        try:
            return _INT_OPS[type(node.op)](a, b)
        except ZeroDivisionError:
            return None
    return None


def size_sites(source: str) -> list[SizeSite]:
    """Module-level integer constants read by get_inputs()/get_init_inputs(), in every form a real
    checkout writes them: `n = 4`, `n = 2048 * 2`, `h = w = 128`, `h, w = 128, 128`,
    `input_shape = (32768,)`."""
    tree = ast.parse(source)
    info = parse_kb_source(source)
    read = info.input_names | info.init_input_names
    sites: list[SizeSite] = []

    def add(names: tuple[str, ...], node: ast.expr) -> None:
        value = _int_value(node)
        if value is not None and value > 0 and any(n.split("[")[0] in read for n in names):
            sites.append(SizeSite(names, value, (node.lineno, node.col_offset, node.end_lineno or node.lineno,
                                                 node.end_col_offset or node.col_offset)))

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        names = tuple(t.id for t in targets if isinstance(t, ast.Name))
        if len(names) == len(targets):
            if isinstance(value, ast.Tuple):  # `input_shape = (32768,)`
                for k, elt in enumerate(value.elts):
                    add(tuple(f"{n}[{k}]" for n in names), elt)
            else:  # `n = 4`, `n = 2048 * 2`, `h = w = 128`
                add(names, value)
        elif len(targets) == 1 and isinstance(targets[0], ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(targets[0].elts) == len(value.elts):  # `h, w = 128, 128`
            for t, v in zip(targets[0].elts, value.elts):
                if isinstance(t, ast.Name):
                    add((t.id,), v)
    return sites


def rewrite_sites(source: str, new_values: dict[SizeSite, int]) -> str:
    """`source` with each site's expression replaced by its new integer; everything else unchanged."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode("utf-8")))
    data = source.encode("utf-8")
    edits = []
    for site, value in new_values.items():
        lineno, col, end_lineno, end_col = site.span
        edits.append((starts[lineno - 1] + col, starts[end_lineno - 1] + end_col, repr(int(value)).encode()))
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text + data[end:]
    return data.decode("utf-8")


def shrink_plan(sites: list[SizeSite], divisor: int, batch: int | None = SMALL_BATCH) -> dict[SizeSite, int]:
    """Batch-like constants to `batch`, every other one above SIZE_FLOOR divided by `divisor`
    (never below the floor); constants at or below the floor stay. With `batch` None the batch-like
    ones are divided too: equal constants stay equal (a problem may broadcast one against the other)."""
    plan = {}
    for s in sites:
        if batch is not None and any(is_batch_like(n.split("[")[0]) for n in s.names):
            if s.value > batch:
                plan[s] = batch
        elif s.value > SIZE_FLOOR and divisor > 1:
            plan[s] = max(SIZE_FLOOR, s.value // divisor)
    return plan


def load_source(source: str, name: str, folder: str | Path) -> Any:
    """Execute a module's source from a file in `folder` (tracebacks show its lines)."""
    safe = re.sub(r"\W", "_", name)
    path = Path(folder) / f"{safe}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(safe, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[safe] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(safe, None)
    return module


@dataclass(frozen=True)
class Footprint:
    """A problem's sizes, worked out without running it for real."""

    elements: int  # of its inputs and of its model's parameters and buffers
    inputs: list[tuple[tuple[int, ...], str] | None]  # (shape, dtype) of each forward argument; None: not a tensor
    outputs: list[tuple[int, ...]] | None  # shape of each output; None where the forward has no meta kernel


def footprint(source: str, run_forward: bool = True) -> Footprint:
    """The problem's Footprint on PyTorch's meta device: nothing is allocated, so it is safe at
    published sizes. Raises where the module, its inputs or its model cannot be built."""
    import torch

    with tempfile.TemporaryDirectory() as tmp, torch.device("meta"):
        module = load_source(source, "kb_footprint", tmp)
        torch.manual_seed(SEED)
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
        n = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))
        n += sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
        described = [(tuple(x.shape), str(x.dtype).replace("torch.", "")) if isinstance(x, torch.Tensor) else None
                     for x in inputs]
        shapes = None
        if run_forward:
            try:
                with torch.no_grad():
                    out = model(*inputs)
                outs = out if isinstance(out, (tuple, list)) else [out]
                shapes = [tuple(o.shape) if isinstance(o, torch.Tensor) else () for o in outs]
            except Exception:  # an op with no meta kernel: the caller decides without the shapes
                shapes = None
    return Footprint(n, described, shapes)


def io_shapes(source: str, budget: int = 1 << 16) -> tuple[list[tuple[tuple[int, ...], str] | None],
                                                            list[tuple[int, ...]]]:
    """(inputs as (shape, dtype) or None, output shapes) at the problem's own sizes, from the meta
    device; where its forward has no meta kernel, from a run on the CPU of a copy shrunk to
    `budget` elements (the shapes then are the shrunk copy's: equal or not as the originals are)."""
    import torch

    fp = footprint(source)
    if fp.outputs is not None:
        return fp.inputs, fp.outputs
    small = shrink(source, budget=budget)
    if not small.fits:
        raise ValueError("no meta kernel for the forward, and the problem cannot shrink to run on the CPU")
    with tempfile.TemporaryDirectory() as tmp:
        module = load_source(small.source, "kb_shapes", tmp)
        torch.manual_seed(SEED)
        model = module.Model(*module.get_init_inputs())
        xs = list(module.get_inputs())
        with torch.no_grad():
            out = model(*xs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    inputs = [(tuple(x.shape), str(x.dtype).replace("torch.", "")) if isinstance(x, torch.Tensor) else None
              for x in xs]
    return inputs, [tuple(o.shape) if isinstance(o, torch.Tensor) else () for o in outs]


def runs_on_cpu(source: str) -> bool:
    """Whether the problem's reference builds and runs on the CPU at these sizes (a shrunk problem
    can break a constraint of its own, like a kernel larger than its input)."""
    import torch

    try:
        with tempfile.TemporaryDirectory() as tmp:
            module = load_source(source, "kb_cpu_check", tmp)
            torch.manual_seed(SEED)
            model = module.Model(*module.get_init_inputs())
            with torch.no_grad():
                model(*module.get_inputs())
        return True
    except Exception:
        return False


@dataclass(frozen=True)
class Shrunk:
    source: str
    what: str  # "batch_size: 4096->4, dim: 393216->24576" or "unchanged"
    fits: bool  # within the budget, and the reference runs on the CPU


def shrink(source: str, budget: int = 1 << 17, batch: int = SMALL_BATCH) -> Shrunk:
    """The problem at the largest sizes whose inputs and weights hold at most `budget` elements
    (batch-like constants at `batch`, the others divided by a power of two) and whose reference
    runs on the CPU. `fits` is False when no such sizes exist (the source is then the most a
    shrink could do, or the original if even that breaks the reference)."""
    sites = size_sites(source)
    for batch_rule in (batch, None):  # then every constant divided alike, for problems that need it
        for divisor in DIVISORS:
            plan = shrink_plan(sites, divisor, batch_rule)
            candidate = rewrite_sites(source, plan)
            try:
                n = footprint(candidate, run_forward=False).elements
            except Exception:  # these sizes break the problem's own constraints: try smaller ones
                continue
            if n <= budget and runs_on_cpu(candidate):
                return Shrunk(candidate, _describe(plan), True)
    for batch_rule in (batch, None):  # the most a shrink can do, if it runs and is not huge
        plan = shrink_plan(sites, DIVISORS[-1], batch_rule)
        candidate = rewrite_sites(source, plan)
        try:
            n = footprint(candidate, run_forward=False).elements
        except Exception:
            continue
        if n <= 64 * budget and runs_on_cpu(candidate):
            return Shrunk(candidate, _describe(plan), False)
    return Shrunk(source, "unchanged", False)


def _describe(plan: dict[SizeSite, int]) -> str:
    return ", ".join(f"{'='.join(s.names)}: {s.value}->{v}" for s, v in plan.items()) or "unchanged"


# --------------------------------------------------------------------------- the pair in this process


def build_pair(problem_source: str, solution_source: str, device: str, folder: str | Path,
               dtype: Any = None, input_seed: int = SEED, draw_on_device: bool = False) -> tuple[Any, Any, list[Any]]:
    """(reference Model, ModelNew, inputs) built as the verifier builds them: both models under the
    seed from the same init inputs, the reference's weights copied where names and shapes match,
    inputs drawn under `input_seed` on the CPU, then moved to `device` (and cast to `dtype`).
    `draw_on_device` draws them on `device` instead: the same shapes and distributions, not the same
    values, in a fraction of the time (1.6e9 values take the CPU's generator ~10 s)."""
    import contextlib

    import torch

    task = load_source(problem_source, "kb_problem", folder)
    sol = load_source(solution_source, "kb_solution", folder)
    torch.manual_seed(SEED)
    init = list(task.get_init_inputs())
    ref = task.Model(*copy.deepcopy(init))
    torch.manual_seed(SEED)
    new = sol.ModelNew(*copy.deepcopy(init))
    own = new.state_dict()
    matching = {k: v for k, v in ref.state_dict().items() if k in own and own[k].shape == v.shape}
    new.load_state_dict(matching, strict=False)
    torch.manual_seed(input_seed)
    with torch.device(device) if draw_on_device else contextlib.nullcontext():
        inputs = list(task.get_inputs())
    ref, new = ref.to(device), new.to(device)
    if dtype is not None:
        ref, new = ref.to(dtype), new.to(dtype)
    moved = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if dtype is not None and x.is_floating_point():
                x = x.to(dtype)
        moved.append(x)
    return ref.eval(), new.eval(), moved


def max_errors(out: Any, ref: Any) -> dict[str, float]:
    """max |out - ref|, max |out - ref| / max |ref| (the error at the reference's own scale) and
    whether allclose-style closeness needs (atol, rtol) per dtype; finite entries only."""
    import torch

    o, r = out.detach().double().reshape(-1), ref.detach().double().reshape(-1)
    fin = torch.isfinite(r)
    o, r = o[fin], r[fin]
    if r.numel() == 0:
        return {"max_abs": 0.0, "rel_to_scale": 0.0}
    diff = (o - r).abs()
    scale = float(r.abs().max())
    return {"max_abs": float(diff.max()), "rel_to_scale": float(diff.max()) / scale if scale > 0 else float(diff.max())}


def close(out: Any, ref: Any, atol: float, rtol: float, chunk: int = 1 << 26) -> bool:
    """allclose in float32, a chunk at a time (a published output can be 6 GB: no float64 copy
    of it), with the same shape and dtype required."""
    import torch

    if not isinstance(out, torch.Tensor) or out.shape != ref.shape or out.dtype != ref.dtype:
        return False
    a, b = out.detach().reshape(-1), ref.detach().reshape(-1)
    for start in range(0, a.numel(), chunk):
        if not torch.allclose(a[start:start + chunk].float(), b[start:start + chunk].float(), atol=atol, rtol=rtol,
                              equal_nan=True):
            return False
    return True


# --------------------------------------------------------------------------- verdicts

# Reasons that judge the candidate (its code, its outputs, its use of PyTorch). Every other reason
# (internal_error, protocol_error, worker_lost, reference_error, memory_limit, out_of_memory,
# timeout, crash_signal:*, process_exit, runtime_error, compile_error, timing_failed:*) is an error
# of the run; for the candidates these sweeps send (the reference itself, a one-line Triton kernel,
# honest solutions checked on the CPU) it is the verifier's own: a budget or a bug.
CANDIDATE_REASONS = ("ok", "shape_mismatch", "dtype_mismatch", "nan_output", "wrong_output_type", "device_mismatch")
CANDIDATE_PREFIXES = ("static:", "cheat:", "mismatch:")
# variations the verifier dropped because the *reference* failed on them (the file-size budget
# dropped the larger set of 20 tasks silently): not an error verdict, but the candidate was judged
# on fewer input sets than the task has
DROPPED_SET = re.compile(r"^variation (\w+) skipped: the reference failed on it \((.*)$")


def verifier_side(reason: str) -> bool:
    """Whether a verdict's reason is an error of the run rather than a judgement of the candidate."""
    return not (reason in CANDIDATE_REASONS or reason.startswith(CANDIDATE_PREFIXES))


def dropped_sets(notes: list[str]) -> list[str]:
    """The input sets a verdict's notes say were dropped because the reference failed on them."""
    out = []
    for note in notes:
        m = DROPPED_SET.match(note)
        if m:
            out.append(f"{m.group(1)} ({m.group(2)[:120]}")
    return out


_EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit|Interrupt))\b:?(.*)$")


def error_cause(text: str) -> str:
    """The exception a verdict's error text ends in ("OSError: [Errno 27] File too large"), else
    its first line: what a verifier error table should show (a traceback's start says nothing)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = _EXCEPTION_LINE.match(ln)
        if m:
            return f"{m.group(1)}:{m.group(2)}".strip()[:200]
    return lines[0][:200] if lines else ""


def only_gemm_flags(flags: list[str]) -> bool:
    """Whether every cheat flag is PyTorch compute of the GEMM family (what the pending `fusion`
    policy change allows), e.g. cheat:pytorch_compute:aten.addmm.default or a static flag on nn.Linear."""
    if not flags:
        return False
    for f in flags:
        # runtime flags name the aten op (pytorch_compute:aten.addmm.default), static ones the
        # Python name (pytorch_compute:torch.nn.Linear, pytorch_compute:torch.matmul)
        m = re.match(r"^pytorch_compute:(?:aten\.(\w+)(?:\.\w+)?|[\w.]*?(\w+))$", f)
        if m and (m.group(1) or m.group(2)).lower() in GEMM_OPS:
            continue
        return False
    return True


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    import time

    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0
