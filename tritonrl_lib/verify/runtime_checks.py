"""What only runtime can see, measured inside a candidate's process during `forward`.

- `LaunchTracker` counts Triton kernel launches by wrapping `JITFunction.run` and the interpreter's
  `InterpretedFunction.run` (autotuned and heuristic kernels end in one of these), and records where
  each launched kernel was defined: only kernels from the candidate's own file count. On the CPU it
  also hands every launch (inside `forward` or not) to `on_launch`, the compile check, before the
  interpreter runs it.
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

from .compile_errors import CUDACompileError, mark_compiled


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
        self.on_launch: Any = None  # (kernel, args, kwargs) -> compiled? Called before every launch
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
            if tracker.on_launch is None or kwargs.get("warmup"):
                return original(fn_self, *args, **kwargs)
            try:
                compiled = tracker._check(fn_self, args, kwargs)
            except CUDACompileError as e:
                # the compiler's message is the error; the check's own frames tell the reader nothing
                raise e.with_traceback(None) from None
            if not compiled:
                return original(fn_self, *args, **kwargs)
            try:
                return original(fn_self, *args, **kwargs)
            except Exception as e:
                mark_compiled(e)  # Triton's compiler accepted this launch: see compile_errors.py
                raise

        run.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = run

    def _check(self, kernel: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
        # the compile check's own work (a second import of the module, the compiler) is not the
        # candidate's compute: the census does not count it
        census = self.census
        if census is not None:
            census.paused += 1
        try:
            return bool(self.on_launch(kernel, args, kwargs))
        finally:
            if census is not None:
                census.paused -= 1

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
    config still fails the candidate) and all report the same time, so the first config is kept. A
    config that fails to compile with a static_assert, OutOfResources or a ptxas error is skipped
    (infinite time), as the GPU autotuner skips it.
    """
    from triton.runtime.autotuner import Autotuner

    from .compile_errors import BENCH_TOLERATED, CUDACompileError, interpreter_static_assert

    def run_each_config_once(kernel_call, quantiles=None, **_):
        try:
            kernel_call()
            time = 1.0
        except Exception as e:
            skipped = (isinstance(e, CUDACompileError) and e.kind in BENCH_TOLERATED) \
                or interpreter_static_assert(e)
            if not skipped:
                raise
            time = float("inf")
        return [time] * len(quantiles) if quantiles else time

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
