"""What only runtime can see, measured inside a candidate's process during `forward`.

- `LaunchTracker` counts Triton kernel launches by wrapping `JITFunction.run` and the interpreter's
  `InterpretedFunction.run` (autotuned and heuristic kernels end in one of these), and records where
  each launched kernel was defined: only kernels from the candidate's own file count.
- `OpCensus` lists the aten ops run during `forward` (a TorchDispatchMode). It is paused only while
  the interpreter copies a launch's arguments to and from the host (with torch ops of its own).
- Stale memory: an output that a kernel never wrote must not inherit correct values from memory the
  reference left behind. On the GPU `poison_allocator` fills freed blocks of the output's size with
  NaN, so the caching allocator hands poison back out; on the CPU `perturb_host_allocator` makes
  glibc wipe every block it frees and fill every block it hands out.
- `same_bits` compares inputs before/after `forward` bit for bit (NaN-aware by construction).

The verdict is not decided here: these facts travel to the worker, which judges them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class OpCensus(TorchDispatchMode):
    """Counts every aten op dispatched while active and not paused."""

    def __init__(self):
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.paused = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ to disable dynamo, which imports torch._dynamo
        # (seconds) at the first op. Nothing is compiled under the census, so leave it unwrapped.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


class LaunchTracker:
    """Counts launches of Triton kernels between `begin()` and `end()`.

    The census stays on during a launch (a grid function or a launch hook computing with torch is
    still seen); it is paused only around the interpreter's own copies of the arguments to and
    from the host, which are Triton's bookkeeping, not the candidate's compute.
    """

    def __init__(self, candidate_file: str, census: OpCensus | None = None):
        self.candidate_file = candidate_file
        self.census = census
        self.active = False
        self.launches = 0
        self.kernels: Counter[str] = Counter()
        self.foreign: Counter[str] = Counter()
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        from triton.runtime.jit import JITFunction

        self._count(JITFunction)
        try:
            from triton.runtime.interpreter import GridExecutor, InterpretedFunction
        except ImportError:
            GridExecutor = InterpretedFunction = None
        if InterpretedFunction is not None:
            self._count(InterpretedFunction)
            self._pause_census(GridExecutor, "_init_args_hst")
            self._pause_census(GridExecutor, "_restore_args_dev")
        self._installed = True

    def _count(self, cls: type) -> None:
        original = cls.run
        tracker = self

        def run(fn_self, *args, **kwargs):
            if tracker.active and not kwargs.get("warmup"):
                tracker._record(fn_self)
            return original(fn_self, *args, **kwargs)

        run.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = run

    def _pause_census(self, cls: type, name: str) -> None:
        original = getattr(cls, name)
        tracker = self

        def paused(*args, **kwargs):
            census = tracker.census
            if census is None:
                return original(*args, **kwargs)
            census.paused += 1
            try:
                return original(*args, **kwargs)
            finally:
                census.paused -= 1

        paused.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(cls, name, paused)

    def _record(self, kernel: Any) -> None:
        fn = getattr(kernel, "fn", None)
        code = getattr(fn, "__code__", None)
        name = getattr(fn, "__qualname__", None) or getattr(kernel, "__name__", "?")
        where = getattr(code, "co_filename", "?")
        if where == self.candidate_file:
            self.launches += 1
            self.kernels[name] += 1
        else:
            self.foreign[f"{getattr(fn, '__module__', '?')}.{name}"] += 1

    def begin(self) -> None:
        self.launches = 0
        self.kernels.clear()
        self.foreign.clear()
        if self.census is not None:
            self.census.ops.clear()
        self.active = True

    def end(self) -> None:
        self.active = False


def interpreter_autotune() -> None:
    """Let `@triton.autotune` kernels run under TRITON_INTERPRET.

    The autotuner times its configs through the GPU driver, which the interpreter does not have,
    so a correct autotuned kernel would fail on the CPU. Here each config still runs once (a broken
    config still fails the candidate) and all report the same time, so the first config is kept.
    """
    from triton.runtime.autotuner import Autotuner

    def run_each_config_once(kernel_call, quantiles=None, **_):
        kernel_call()
        return [1.0] * len(quantiles) if quantiles else 1.0

    Autotuner.do_bench = property(lambda self: run_each_config_once)


def flatten_outputs(out: Any) -> list[Any]:
    """A forward's result as a list: a tensor, or the items of a tuple/list (one level)."""
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


def is_plain_tensor(x: Any) -> bool:
    # a Tensor subclass could run code when we read it outside the census, so only plain ones pass
    return type(x) is torch.Tensor or type(x) is torch.nn.Parameter


def _fill_value(dtype: torch.dtype) -> Any:
    if dtype.is_floating_point or dtype.is_complex:
        return float("nan")
    if dtype == torch.bool:
        return True
    return torch.iinfo(dtype).max if dtype != torch.uint8 else 0xA5


M_PERTURB = -6
PERTURB_BYTE = 0x01  # freed memory becomes 0x01 bytes; fresh memory 0xFE bytes (-1.7e38 as float32)


def perturb_host_allocator() -> bool:
    """Turn on glibc's malloc perturbation for this process (Linux/glibc; False elsewhere)."""
    import ctypes
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None).mallopt(M_PERTURB, PERTURB_BYTE) == 1
    except (OSError, AttributeError):
        return False


POISON_BUDGET_BYTES = 4 << 30


def poison_allocator(specs: list[tuple[tuple[int, ...], torch.dtype]], device: str, copies: int = 4) -> None:
    """Allocate up to `copies` blocks of each (shape, dtype), fill them with NaN/sentinel, free them.

    The CUDA caching allocator hands the best-fitting free block back out for the next request of
    that size: taking (and poisoning) several of them covers the reference's freed temporaries too,
    so an output a kernel never wrote holds poison, not stale results.
    """
    blocks = []
    for shape, dtype in specs:
        nbytes = max(1, torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size())
        for _ in range(max(1, min(copies, POISON_BUDGET_BYTES // nbytes))):
            try:
                t = torch.empty(shape, dtype=dtype, device=device)
                t.fill_(_fill_value(dtype))
                blocks.append(t)
            except (RuntimeError, TypeError):
                break
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    del blocks


def scrub(tensors: list[Any], keep_storages: set[int]) -> None:
    """Overwrite tensors we are done with (reference outputs), unless they share storage with
    something still in use (a parameter, an input)."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel() and t.untyped_storage().data_ptr() not in keep_storages:
            try:
                with torch.no_grad():
                    t.fill_(_fill_value(t.dtype))
            except RuntimeError:
                pass


_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


def same_bits(a: Any, b: Any) -> bool:
    """True when two tensors hold identical bits (NaN payloads included); non-tensors compare ==."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        try:
            return bool(a == b)
        except Exception:
            return False
    if a.dtype != b.dtype or a.shape != b.shape or a.device != b.device:
        return False
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.dtype == torch.bool:
        return torch.equal(a, b)
    view = _INT_VIEW.get(a.element_size())
    if view is None:
        return torch.equal(a, b)
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))
