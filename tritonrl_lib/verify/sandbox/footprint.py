"""How much memory a task needs, known before anything of it runs for real.

KernelBench publishes tasks whose inputs alone are 6-16 GB (a ReLU over 4096 x 393216 floats); a verifier
with fixed budgets cannot judge them at all. So before a task's first candidate, the worker measures the
task on PyTorch's meta device (`probe`, in a throwaway fork: shapes and dtypes only, no data, no GPU):
its inputs, its model's parameters and buffers, its outputs, and the peak of the reference's live
intermediate tensors during forward. `limits.Budget.for_task` turns that into the job's budgets: the
candidate's host memory, file size and GPU share, whether the task must have the GPU to itself, how much
larger the other-size input set may be, and whether the task fits this machine at all.

A task the meta device cannot run (an op without a meta kernel, an input drawn through numpy) gets what
could be measured (inputs and parameters) and `complete=False`: its outputs and intermediates are then
assumed as large as its inputs.

`Footprint.draw_peak` is what drawing one input set holds at its peak: `get_inputs()` with its own
temporaries (measured on meta), and each set's transform (variations.py: the range set's copy and its
chunked factors, the seed and offset sets' copies, the structure kept for small inputs, the dtype set's
casts, the other size). tests/test_verify_budget.py measures every input set's real draw on the CPU and
holds this model to it, so a set that grows its transform cannot outgrow the budget unseen.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import signal
import time
import weakref
from dataclasses import asdict, dataclass
from typing import Any

from ..candidate.heavy_ops import operand_key
from ...tasks.kb_format import rewrite_constants
from ..candidate.variations import RANGE_CHUNK, STRUCTURE_MAX_ELEMENTS, larger_plan, size_constants
from .fdwait import wait_fds

PROBE_TIMEOUT_S = 60.0
# the range set's temporaries per element of its largest chunk (variations.ranged: a float32 factor, a sign
# mask, the masked sign flip's indices and values, a float32 copy of a half chunk), with room to spare; the
# seed set's sort of a chunk (variations.sorted_last_dim: its values and int64 indices) fits within it
RANGE_BYTES_PER_ELEMENT = 28
# keep_structure on an input small enough to look at: a zero mask, the zeros put back (a copy), a symmetric
# matrix made symmetric again (two copies), in units of that input's bytes
STRUCTURE_FACTOR = 3.5
# the input sets whose transform copies every input once (variations.py): range, seed, offset
COPYING_SETS = ("range", "seed", "offset")


@dataclass(frozen=True)
class Footprint:
    input_bytes: int  # the original input set's tensors
    param_bytes: int  # the reference model's parameters and buffers
    output_bytes: int  # the reference's outputs on the original inputs
    work_bytes: int  # the reference's live intermediates at their peak during forward (outputs excluded)
    largest_output_bytes: int  # the largest single output tensor
    complete: bool = True  # False: the meta run failed part-way; outputs and intermediates are guesses
    note: str = ""
    draw_bytes: int = 0  # get_inputs()'s peak: its results and the temporaries it made on the way (0: inputs)
    float_input_bytes: int = -1  # the inputs' floating-point tensors (-1: unknown, all of them)
    structured_bytes: int = -1  # float inputs small enough for keep_structure to look at (-1: all of them)
    largest_float_elements: int = -1  # elements of the largest float input (-1: unknown)
    largest_input_bytes: int = -1  # the largest single input tensor (-1: unknown)
    float_param_bytes: int = -1  # floating-point parameters and buffers (cast by the dtype set; -1: all)
    heavy_float32: bool = True  # forward runs GEMMs or convolutions on float32 operands (a TF32 run too)
    larger_exponent: float = 1.0  # the task's bytes grow as (other-size factor) ** this (measure says)

    @property
    def peak_bytes(self) -> int:
        """What one input set of the task holds on the device at once: its inputs, the model, the
        reference's outputs and intermediates."""
        return self.input_bytes + self.param_bytes + self.output_bytes + self.work_bytes

    # ---------------------------------------------------------------- what drawing a set holds

    @property
    def drawn(self) -> int:
        """get_inputs()'s peak, at least the inputs it returns."""
        return max(self.draw_bytes, self.input_bytes)

    @property
    def largest_block(self) -> int:
        """The largest single tensor the task's sets hold (an input or an output)."""
        largest_in = self.input_bytes if self.largest_input_bytes < 0 else self.largest_input_bytes
        return max(largest_in, self.largest_output_bytes)

    @property
    def floats(self) -> int:
        return self.input_bytes if self.float_input_bytes < 0 else min(self.float_input_bytes, self.input_bytes)

    @property
    def half_params(self) -> int:
        """The parameters and buffers once cast to a half dtype (integer ones keep their size)."""
        fp = self.param_bytes if self.float_param_bytes < 0 else min(self.float_param_bytes, self.param_bytes)
        return self.param_bytes - fp // 2

    def grown(self, factor: float) -> float:
        """How much larger the other-size set's tensors are at `factor` (never counted smaller than 1)."""
        return max(1.0, factor) ** max(1.0, self.larger_exponent)

    def draw_peak(self, name: str, factor: float = 1.0) -> int:
        """The bytes alive at the peak of drawing input set `name` (its inputs included; `factor`: the other
        size's, for "larger"/"resized"), every tensor a transform makes counted while it lives."""
        base = name.split(":", 1)[0]
        drawn, inputs, floats = self.drawn, self.input_bytes, self.floats
        if self.structured_bytes >= 0:
            structured = min(self.structured_bytes, floats)
        else:  # not measured (an older footprint): one float32 input, looked at where it is small enough
            structured = floats if floats // 4 <= STRUCTURE_MAX_ELEMENTS else 0
        if base in COPYING_SETS:
            # the drawn inputs and their transformed copy, then the structure kept on the small ones
            temps = STRUCTURE_FACTOR * structured
            if base in ("range", "seed"):  # the range set's factors, the seed set's sort (values and indices)
                elements = self.largest_float_elements if self.largest_float_elements >= 0 else floats
                temps = max(temps, RANGE_BYTES_PER_ELEMENT * min(elements, RANGE_CHUNK))
            return int(max(drawn, 2 * inputs + temps))
        if base in ("larger", "resized"):
            return int(drawn * self.grown(factor))
        if base == "dtype":
            return int(max(drawn, 2 * inputs))  # the drawn inputs beside their copies (half, or as they were)
        return int(drawn)  # tiny (smaller), original, timed: get_inputs() as the task draws it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Footprint:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _input_facts(values: Any) -> dict[str, int]:
    """The inputs' float bytes, those keep_structure looks at, and the largest float input's elements."""
    import torch

    floats = [x for x in values if isinstance(x, torch.Tensor) and x.is_floating_point()]
    return {"float_input_bytes": sum(x.numel() * x.element_size() for x in floats),
            "structured_bytes": sum(x.numel() * x.element_size() for x in floats
                                    if x.numel() <= STRUCTURE_MAX_ELEMENTS),
            "largest_float_elements": max((x.numel() for x in floats), default=0),
            "largest_input_bytes": max((x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor)),
                                       default=0)}


def _nbytes(values: Any) -> tuple[int, int]:
    """(total bytes, largest tensor's bytes) of the tensors in a value, a list or a tuple (one level)."""
    import torch

    items = values if isinstance(values, (list, tuple)) else [values]
    sizes = [x.numel() * x.element_size() for x in items if isinstance(x, torch.Tensor)]
    return sum(sizes), max(sizes, default=0)


@functools.cache
def live_bytes_class() -> type:
    """A dispatch mode counting the bytes of the tensors ops allocate while they live (`live`) and their
    peak (`peak`): the footprint's measure on the meta device, and the budget test's on real tensors. Made
    on first use (it imports torch)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class LiveBytes(TorchDispatchMode):
        """Bytes of the tensors ops allocated and that are still alive, and their peak."""

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

        def __init__(self) -> None:
            super().__init__()
            self.live = 0
            self.peak = 0
            self.heavy_float32 = False

        def _freed(self, n: int) -> None:
            self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            key = operand_key(func, args)
            if key is not None and "float32" in key:
                self.heavy_float32 = True
            if "loss" in str(func):
                # PyTorch's fused losses (mse, smooth_l1, huber, ...) write the elementwise loss into a
                # temporary of their input's size before reducing it: no dispatch shows it
                hidden = max((a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor)), default=0)
                self.peak = max(self.peak, self.live + hidden)
            returns = getattr(getattr(func, "_schema", None), "returns", ())
            fresh = [r.alias_info is None for r in returns] or [True]
            items = out if isinstance(out, (list, tuple)) else [out]
            for i, t in enumerate(items):
                if isinstance(t, torch.Tensor) and (fresh[i] if i < len(fresh) else fresh[-1]):
                    n = t.numel() * t.element_size()
                    self.live += n
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(t, self._freed, n)
            return out
    return LiveBytes


def measure(source: str) -> Footprint:
    """The task's footprint from a run on the meta device (call it in a process you can throw away: the
    task's module-level code runs here), with how its sizes grow with the other-size set's constant
    (`larger_exponent`: measured at twice it, a square matrix's N grows them 4 times)."""
    fp = _measure(source)
    choice = larger_plan(source, 2.0)
    if choice is None or not fp.complete:
        return fp
    const, value = choice
    old = size_constants(source).values.get(const)
    try:
        bigger = _measure(rewrite_constants(source, {const: value}))
    except Exception:  # the resized task does not even build: the larger set will not run either
        return fp
    if not old or value <= old or not bigger.complete:  # not measured: as if a cube's side grew
        return dataclasses.replace(fp, larger_exponent=3.0)
    ratio = max(bigger.input_bytes / max(1, fp.input_bytes), bigger.output_bytes / max(1, fp.output_bytes),
                (bigger.work_bytes + 1) / (fp.work_bytes + 1), bigger.drawn / max(1, fp.drawn))
    return dataclasses.replace(fp, larger_exponent=max(1.0, math.log(ratio) / math.log(value / old)))


def _measure(source: str) -> Footprint:
    """The footprint of one source on the meta device."""
    import importlib.util
    import tempfile

    import torch

    LiveBytes = live_bytes_class()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "tritonrl_footprint_task.py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("tritonrl_footprint_task", path)
        module = importlib.util.module_from_spec(spec)
        with torch.device("meta"):
            spec.loader.exec_module(module)
            drawing = LiveBytes()
            with drawing:
                inputs = list(module.get_inputs())
            input_bytes, _ = _nbytes(inputs)
            facts = {"draw_bytes": max(drawing.peak, input_bytes), **_input_facts(inputs)}
            init = list(module.get_init_inputs())
            model = module.Model(*init)
            weights = (*model.parameters(), *model.buffers())
            param_bytes = sum(t.numel() * t.element_size() for t in weights)
            facts["float_param_bytes"] = sum(t.numel() * t.element_size() for t in weights if t.is_floating_point())
            census = LiveBytes()
            try:
                with torch.no_grad(), census:
                    out = model(*inputs)
                output_bytes, largest = _nbytes(out)
                del out
            except Exception as e:  # an op without a meta kernel: assume outputs and work as large as inputs
                return Footprint(input_bytes, param_bytes, input_bytes, input_bytes, input_bytes, complete=False,
                                 note=f"the meta device could not run forward ({type(e).__name__}: {str(e)[:160]})",
                                 **facts)
    return Footprint(input_bytes, param_bytes, output_bytes, max(0, census.peak - output_bytes), largest,
                     heavy_float32=census.heavy_float32, **facts)


_WARM_TASK = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2
def get_inputs():
    return [torch.rand(4, 8)]
def get_init_inputs():
    return []
"""


def warm() -> None:
    """Measure a trivial task once in the worker (meta device only: CUDA stays untouched), so the
    imports a measurement needs (~3 s) are paid once and every probe's fork starts warm."""
    measure(_WARM_TASK)


def probe(source: str, timeout_s: float = PROBE_TIMEOUT_S) -> Footprint | None:
    """`measure` in a forked child of this (the worker's) process, which never touches the GPU; None when
    the child fails or takes longer than `timeout_s` (the job then runs with the configured budgets)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # ---- the child
        code = 0
        try:
            os.close(r)
            os.setsid()
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
            data = json.dumps(measure(source).to_json()).encode()
            os.write(w, data)
        except BaseException as e:
            try:
                os.write(w, json.dumps({"error": f"{type(e).__name__}: {str(e)[:300]}"}).encode())
            except BaseException:
                pass
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                return None
            ready, _ = wait_fds([r], timeout_s=left)
            if not ready:
                continue
            data = os.read(r, 1 << 16)
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(r)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    try:
        found = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return None
    return Footprint.from_json(found) if "input_bytes" in found else None
