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
"""

from __future__ import annotations

import json
import os
import signal
import time
import weakref
from dataclasses import asdict, dataclass
from typing import Any

from .fdwait import wait_fds

PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Footprint:
    input_bytes: int  # the original input set's tensors
    param_bytes: int  # the reference model's parameters and buffers
    output_bytes: int  # the reference's outputs on the original inputs
    work_bytes: int  # the reference's live intermediates at their peak during forward (outputs excluded)
    largest_output_bytes: int  # the largest single output tensor
    complete: bool = True  # False: the meta run failed part-way; outputs and intermediates are guesses
    note: str = ""

    @property
    def peak_bytes(self) -> int:
        """What one input set of the task holds on the device at once: its inputs, the model, the
        reference's outputs and intermediates."""
        return self.input_bytes + self.param_bytes + self.output_bytes + self.work_bytes

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Footprint:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _nbytes(values: Any) -> tuple[int, int]:
    """(total bytes, largest tensor's bytes) of the tensors in a value, a list or a tuple (one level)."""
    import torch

    items = values if isinstance(values, (list, tuple)) else [values]
    sizes = [x.numel() * x.element_size() for x in items if isinstance(x, torch.Tensor)]
    return sum(sizes), max(sizes, default=0)


def measure(source: str) -> Footprint:
    """The task's footprint from a run on the meta device (call it in a process you can throw away: the
    task's module-level code runs here)."""
    import importlib.util
    import tempfile

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

        def _freed(self, n: int) -> None:
            self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
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

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "tritonrl_footprint_task.py")
        with open(path, "w") as f:
            f.write(source)
        spec = importlib.util.spec_from_file_location("tritonrl_footprint_task", path)
        module = importlib.util.module_from_spec(spec)
        with torch.device("meta"):
            spec.loader.exec_module(module)
            inputs = list(module.get_inputs())
            input_bytes, _ = _nbytes(inputs)
            init = list(module.get_init_inputs())
            model = module.Model(*init)
            param_bytes = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
            census = LiveBytes()
            try:
                with torch.no_grad(), census:
                    out = model(*inputs)
                output_bytes, largest = _nbytes(out)
                del out
            except Exception as e:  # an op without a meta kernel: assume outputs and work as large as inputs
                return Footprint(input_bytes, param_bytes, input_bytes, input_bytes, input_bytes, complete=False,
                                 note=f"the meta device could not run forward ({type(e).__name__}: {str(e)[:160]})")
    return Footprint(input_bytes, param_bytes, output_bytes, max(0, census.peak - output_bytes), largest)


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
