"""What only runtime can see, measured inside a candidate's process during `forward`.

- `LaunchTracker` reports Triton kernel launches by wrapping `JITFunction.run` and the interpreter's
  `InterpretedFunction.run` (autotuned and heuristic kernels end in one of these), with where each
  launched kernel was defined: only kernels from the candidate's own file count. On the CPU it
  also hands every launch (inside `forward` or not) to `on_launch`, the compile check, before the
  interpreter runs it.
- `OpCensus` reports the aten ops run during `forward` (a TorchDispatchMode), the operand dtypes of its
  heavy ops (heavy_ops.operand_key), and with `host_read_hooks` the values read into Python or brought
  from host data. It is paused only while the interpreter copies a launch's arguments to and from the
  host (with torch ops of its own). On a GPU it also tells gpu_work.py which stream each op's work goes
  to (stream order), and records the ops of a CUDA graph captured during forward.
- Both report through the verifier's own audit events: the guard (guard.py) counts them, so nothing
  the candidate can reach holds a count it could reset.
- Stale memory: an output that a kernel never wrote must not inherit correct values from memory the
  reference left behind. On the GPU `poison_allocator` fills freed blocks of the output's size with
  NaN, so the caching allocator hands poison back out; on the CPU `perturb_host_allocator` makes
  glibc wipe every block it frees and fill every block it hands out.
- `same_bits` compares inputs before/after `forward` bit for bit (NaN-aware by construction).

The verdict is not decided here: these facts travel to the worker, which judges them.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

import torch
import torch.utils.dlpack
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._python_dispatch import _get_current_dispatch_mode as _current_dispatch_mode

from . import guard
from ..compilation.errors import BENCH_TOLERATED, CUDACompileError, interpreter_static_assert, mark_compiled
from .gpu_work import WATCH, note_captured_op
from .heavy_ops import operand_key


def _audit(event: str, *args: Any) -> None:
    # the verifier's own audit events: counted by the guard (guard.py), which only these files may raise
    # them and nothing the candidate can reach holds the counts
    sys.audit(event, *args)


_HOST_MADE_OPS = frozenset({"aten.lift_fresh.default", "aten.lift_fresh_copy.default"})
_READ_OPS = frozenset({"aten._local_scalar_dense.default"})
_COPY_OPS = frozenset({"aten._to_copy.default", "aten.copy_.default", "aten._copy_from.default",
                       "aten._copy_from_and_resize.default"})


class OpCensus(TorchDispatchMode):
    """Reports every aten op dispatched while active (and not paused, see guard.py) to the guard, with
    the elements it reads into Python (`item`) or brings over from host data: a tensor made from a
    Python list or a numpy array (`torch.tensor(list)`, `from_numpy`), a copy of host data not owned by
    torch onto the device or into a torch tensor, a device tensor copied to the host."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Otherwise torch wraps __torch_dispatch__ to disable dynamo, which imports torch._dynamo
        # (seconds) at the first op. Nothing is compiled under the census, so leave it unwrapped.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        _audit(guard.EV_OP, name)
        key = operand_key(func, args)
        if key is not None:
            _audit(guard.EV_HEAVY, key)
        record = WATCH.capture()
        if record is not None:  # a CUDA graph being captured: its replays report this op
            note_captured_op(record, func, args)
        elif WATCH.order is not None and WATCH.order.active:
            _order_op(func, name, args, kwargs)
        out = func(*args, **(kwargs or {}))
        if name in _HOST_MADE_OPS and args and isinstance(args[0], torch.Tensor):
            _audit(guard.EV_HOST_MADE, int(args[0].numel()))
        elif name in _READ_OPS:
            _audit(guard.EV_HOST_READ, 1)
        elif name in _COPY_OPS and args and isinstance(args[0], torch.Tensor):
            src = args[1] if name != "aten._to_copy.default" and len(args) > 1 else args[0]
            dst = out if isinstance(out, torch.Tensor) else args[0]
            if isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor):
                if src.device.type != "cpu" and dst.device.type == "cpu":
                    _audit(guard.EV_HOST_READ, int(src.numel()))
                elif src.device.type == "cpu" and not _torch_owned(src):
                    _audit(guard.EV_HOST_MADE, int(src.numel()))
        return out


WATCH.census_type = OpCensus  # gpu_work records a capture's ops itself only outside the census

# ops that queue no GPU work (allocation, bookkeeping), besides views (every return an alias, nothing written)
_NO_WORK = frozenset({"aten.empty.memory_format", "aten.empty_like.default", "aten.empty_strided.default",
                      "aten.new_empty.default", "aten.new_empty_strided.default", "aten.lift_fresh.default",
                      "aten.record_stream.default", "aten.set_.source_Storage", "aten.set_.source_Storage_storage_offset",
                      "aten.resize_.default", "aten.is_pinned.default", "aten.sym_size.int", "aten.sym_stride.int",
                      "aten.sym_numel.default", "aten.sym_storage_offset.default"})
_WORKLESS: dict[Any, bool] = {}


def _queues_no_work(func: Any, name: str) -> bool:
    known = _WORKLESS.get(func)
    if known is None:
        schema = getattr(func, "_schema", None)
        returns = list(getattr(schema, "returns", ()))
        written = any(a.alias_info is not None and a.alias_info.is_write for a in getattr(schema, "arguments", ()))
        known = name in _NO_WORK or (bool(returns) and all(r.alias_info is not None for r in returns)
                                     and not written)
        _WORKLESS[func] = known
    return known


def _order_op(func: Any, name: str, args: tuple, kwargs: dict | None) -> None:
    """An op of forward on the GPU: the stream its work goes to (gpu_work.StreamOrder); a device value
    read into the host (`item`, a blocking copy to the host) also makes the host wait for that stream."""
    order = WATCH.order
    first = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if first is None or first.device.type != "cuda":
        if name in _COPY_OPS and len(args) > 1 and isinstance(args[1], torch.Tensor) and args[1].is_cuda:
            order.launch(f"PyTorch op {name}")
            order.host_waits_stream(order.current())  # a device tensor copied into a host one
        return
    if name in _READ_OPS:
        order.host_waits_stream(order.current())
    elif not _queues_no_work(func, name):
        order.launch(f"PyTorch op {name}")
        to = (kwargs or {}).get("device")
        if name == "aten._to_copy.default" and to is not None and str(to) == "cpu" \
                and not (kwargs or {}).get("non_blocking"):
            order.host_waits_stream(order.current())


class CensusWatch(TorchFunctionMode):
    """A second, independent look: every torch function called during forward checks that the op
    census is still on top of the dispatch-mode stack. A candidate that switches it off for a while
    (PyTorch's own `_disable_current_modes`, a mode of its own pushed above it) calls torch functions
    meanwhile, and each such call is reported (guard.EV_BYPASS). Calls made by the census itself, whose
    handler runs with its own mode popped, are not the candidate's."""

    def __init__(self, census: OpCensus):
        super().__init__()
        self.census = census

    def __torch_function__(self, func, types, args=(), kwargs=None):
        # cheap checks first: this runs on every torch call of forward (the interpreter's included)
        if (_current_dispatch_mode() is not self.census or _python_dispatch_excluded()) \
                and not _inside_census(sys._getframe(1)):
            _audit(guard.EV_BYPASS, getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))


def _python_dispatch_excluded() -> bool:
    """Whether dispatch modes are switched off for this thread with the census still on the stack
    (`torch._C._DisableTorchDispatch`, which public helpers such as the sparse semi-structured
    fallback use, or an excluded Python dispatch key): ops then skip every mode, the census too."""
    return bool(_KEY_EXCLUDED(_PYTHON_KEY))


_KEY_EXCLUDED = torch._C._dispatch_tls_is_dispatch_key_excluded  # bound before any candidate code runs
_PYTHON_KEY = torch._C.DispatchKey.Python


# What switches the dispatch side off for the calls inside it (so ops skip the census): the Python
# dispatch key excluded, or the census popped off its stack. Each alone is seen by CensusWatch; with
# torch functions switched off as well it would not be, so calls to these from the candidate's code
# (directly or through a library helper) report a bypass themselves.
_DISPATCH_SWITCHES = ("_DisableTorchDispatch", "_ExcludeDispatchKeyGuard", "_ForceDispatchKeyGuard",
                      "_dispatch_tls_set_dispatch_key_excluded", "_pop_torch_dispatch_stack",
                      "_unset_dispatch_mode", "_set_dispatch_mode")


def dispatch_switch_hooks(candidate_file: str | None = None) -> None:
    """Wrap the switches above, in torch._C and wherever a loaded torch module holds them under another
    name (`torch.utils._mode_utils.no_dispatch`), to report guard.EV_BYPASS when called with the
    candidate's code on the stack (the guard counts it only during forward). The wrapping is done once,
    in the worker before it forks (scanning every torch module costs a child ~20 ms); each child then
    only names its candidate's file."""
    _SWITCH_FILE[0] = candidate_file
    if _SWITCH_FILE[1]:
        return
    originals = {id(getattr(torch._C, n)): n for n in _DISPATCH_SWITCHES if hasattr(torch._C, n)}
    wrappers: dict[int, Any] = {}
    for module in [torch._C, *(m for name, m in list(sys.modules.items())
                               if name.startswith("torch.") and m is not None)]:
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, value in items:
            key = id(value)
            if key in originals:
                if key not in wrappers:
                    wrappers[key] = _switch_wrapper(value, originals[key])
                setattr(module, attr, wrappers[key])
    _SWITCH_FILE[1] = True


_SWITCH_FILE: list[Any] = [None, False]  # [the candidate's file in this process, wrappers installed]


def _switch_wrapper(original: Any, name: str) -> Any:
    def switch(*args, **kwargs):
        candidate_file = _SWITCH_FILE[0]
        frame = sys._getframe(1) if candidate_file else None
        while frame is not None:
            if frame.f_code.co_filename == candidate_file:
                _audit(guard.EV_BYPASS, name)
                break
            frame = frame.f_back
        return original(*args, **kwargs)

    switch.__name__ = name
    return switch


def _inside_census(frame: Any, depth: int = 4) -> bool:
    """Whether a call comes from the census's own handler (which runs with its mode popped), within a
    few frames (an op called through torch's OpOverload wrapper is one frame further)."""
    for _ in range(depth):
        if frame is None:
            return False
        if frame.f_code.co_filename == __file__ and frame.f_code.co_name == "__torch_dispatch__":
            return True
        frame = frame.f_back
    return False


def _torch_owned(t: torch.Tensor) -> bool:
    """Whether a tensor's memory was allocated by torch (a numpy array's or a foreign buffer's is not)."""
    try:
        return bool(t.untyped_storage().resizable())
    except RuntimeError:
        return False


def host_read_hooks() -> None:
    """What hands a tensor's values to Python or numpy without dispatching an op, wrapped to report the
    elements it exposes (guard.EV_HOST_READ): the tensor methods `tolist`, `numpy`, `__array__`,
    `__dlpack__` (numpy's `from_dlpack` shares the memory), the DLPack export functions, and a storage's
    values (`tolist`, indexing, iteration, serialisation's `_write_file`). Installed before the
    candidate's import; the wrappers hold nothing but the originals."""
    def tensor_size(obj: Any, *_: Any) -> int:
        return int(obj.numel()) if isinstance(obj, torch.Tensor) else 0

    def storage_size(obj: Any, *_: Any) -> int:
        return int(obj.nbytes()) if hasattr(obj, "nbytes") else int(obj.size())

    def indexed(obj: Any, index: Any = None, *_: Any) -> int:
        return storage_size(obj) if isinstance(index, slice) else 1

    for owner, names, size in ((torch.Tensor, ("tolist", "numpy", "__array__", "__dlpack__"), tensor_size),
                               (torch._C, ("_to_dlpack", "_to_dlpack_versioned"), tensor_size),
                               (torch.utils.dlpack, ("to_dlpack",), tensor_size),
                               (torch.UntypedStorage, ("tolist", "__iter__", "_write_file"), storage_size),
                               (torch.UntypedStorage, ("__getitem__",), indexed),
                               (torch.TypedStorage, ("tolist", "__iter__", "_write_file"), storage_size),
                               (torch.TypedStorage, ("__getitem__",), indexed)):
        for name in names:
            original = getattr(owner, name, None)
            if original is None or getattr(original, "_host_read_wrapped", False):
                continue
            _wrap_host_read(owner, name, original, size)


def _wrap_host_read(owner: Any, name: str, original: Any, size: Any) -> None:
    def wrapped(*args, **kwargs):
        try:
            n = size(*args)
        except Exception:
            n = 0
        if n:
            _audit(guard.EV_HOST_READ, n)
        return original(*args, **kwargs)

    wrapped.__name__ = name
    wrapped._host_read_wrapped = True  # type: ignore[attr-defined]
    setattr(owner, name, wrapped)


class LaunchTracker:
    """Reports launches of Triton kernels (guard.EV_LAUNCH for the candidate's own kernels,
    EV_FOREIGN for any other) by wrapping `JITFunction.run` and the interpreter's
    `InterpretedFunction.run` (autotuned and heuristic kernels end in one of these).

    The census stays on during a launch (a grid function or a launch hook computing with torch is
    still seen); it is paused only around the interpreter's own copies of the arguments to and
    from the host, which are Triton's bookkeeping, not the candidate's compute, and only when every
    argument is a plain tensor or a plain value (an object of the candidate's own would run its code
    there, unseen). On the CPU it also hands every launch to `on_launch`, the compile check, before
    the interpreter runs it (the census does not count the check's own work).
    """

    def __init__(self, candidate_file: str):
        self.candidate_file = candidate_file
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
            _pause_census(GridExecutor, "_init_args_hst", lambda args, kwargs: (*args[0], *args[1].values()))
            _pause_census(GridExecutor, "_restore_args_dev",
                          lambda args, kwargs: (*args[0], *args[1], *args[2].values(), *args[3].values()))
        self._installed = True

    def _count(self, cls: type) -> None:
        original = cls.run
        candidate_file = self.candidate_file
        tracker = self

        def run(fn_self, *args, **kwargs):
            if not kwargs.get("warmup"):
                # counted now; while a CUDA graph is captured, also recorded with it (its replays report
                # it again); else ordered as work on the current stream (gpu_work.py)
                WATCH.kernel_launched(*_report_launch(fn_self, candidate_file))
            if tracker.on_launch is None or kwargs.get("warmup"):
                return original(fn_self, *args, **kwargs)
            # the compile check's own work is not the candidate's compute; but converting an argument of
            # the candidate's own type (a property, a tuple subclass rebuilt) would run its code: then
            # the census stays on
            try:
                pause = all(_plain_argument(v) for v in (*args, *(v for k, v in kwargs.items() if k != "grid")))
            except Exception:
                pause = False
            if pause:
                _audit(guard.EV_PAUSE, 1)
            try:
                compiled = bool(tracker.on_launch(fn_self, args, kwargs))
            except CUDACompileError as e:
                # the compiler's message is the error; the check's own frames tell the reader nothing
                raise e.with_traceback(None) from None
            finally:
                if pause:
                    _audit(guard.EV_PAUSE, -1)
            if not compiled:
                return original(fn_self, *args, **kwargs)
            try:
                return original(fn_self, *args, **kwargs)
            except Exception as e:
                mark_compiled(e)  # Triton's compiler accepted this launch: see compilation/errors.py
                raise

        run.__wrapped__ = original  # type: ignore[attr-defined]
        cls.run = run


def _report_launch(kernel: Any, candidate_file: str) -> tuple[str, str]:
    """Report a launch to the guard; (the event, the kernel's name as reported)."""
    fn = getattr(kernel, "fn", None)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__qualname__", None) or getattr(kernel, "__name__", "?")
    if getattr(code, "co_filename", "?") == candidate_file:
        event, shown = guard.EV_LAUNCH, str(name)
    else:
        event, shown = guard.EV_FOREIGN, f"{getattr(fn, '__module__', '?')}.{name}"
    _audit(event, shown)
    return event, shown


def _plain_argument(x: Any) -> bool:
    if isinstance(x, tuple):  # a subclass is rebuilt by calling its class: only namedtuple's own code is plain
        return _plain_tuple_type(type(x)) and all(_plain_argument(v) for v in tuple.__iter__(x))
    if is_plain_tensor(x):
        return True
    base = getattr(x, "base", None)
    if type(x).__name__ == "TensorDescriptor" and is_plain_tensor(base):
        return True
    return not hasattr(x, "data_ptr") and (x is None or isinstance(x, (bool, int, float, str, torch.dtype))
                                           or type(x).__module__.split(".")[0] == "triton")


_TUPLE_HOOKS = ("__init__", "__iter__", "__getitem__", "__len__", "__getattribute__", "__getattr__",
                "__init_subclass__")


def _plain_tuple_type(cls: type) -> bool:
    """A tuple, or a namedtuple class as `collections.namedtuple` / `typing.NamedTuple` make it: its
    `__new__` generated (compiled from a string), nothing of the candidate's that rebuilding or
    iterating it would run."""
    if cls is tuple:
        return True
    own = vars(cls)
    code = getattr(cls.__new__, "__code__", None) if "__new__" in own else None
    return (cls.__bases__ == (tuple,) and isinstance(own.get("_fields"), tuple) and code is not None
            and code.co_filename == "<string>" and not any(name in own for name in _TUPLE_HOOKS))


def _pause_census(cls: type, name: str, arguments: Any) -> None:
    original = getattr(cls, name)

    def paused(self, *args, **kwargs):
        try:
            plain = all(_plain_argument(x) for x in arguments(args, kwargs))
        except Exception:
            plain = False
        if not plain:
            return original(self, *args, **kwargs)
        _audit(guard.EV_PAUSE, 1)
        try:
            return original(self, *args, **kwargs)
        finally:
            _audit(guard.EV_PAUSE, -1)

    paused.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(cls, name, paused)


def interpreter_autotune() -> None:
    """Let `@triton.autotune` kernels run under TRITON_INTERPRET.

    The autotuner times its configs through the GPU driver, which the interpreter does not have,
    so a correct autotuned kernel would fail on the CPU. Here each config still runs once (a broken
    config still fails the candidate) and all report the same time, so the first config is kept. A
    config that fails to compile with a static_assert, OutOfResources or a ptxas error is skipped
    (infinite time), as the GPU autotuner skips it.
    """
    from triton.runtime.autotuner import Autotuner


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


NO_TCACHE = "glibc.malloc.tcache_count=0"


def without_malloc_tcache(env: dict[str, str]) -> dict[str, str]:
    """`env` for a process whose malloc has no per-thread cache (GLIBC_TUNABLES, read at its start
    and kept by its forks): blocks from that cache skip the perturbation, so a freed result could
    come back unwritten in a fresh output (seen for 256-byte blocks, glibc 2.36)."""
    tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":")
                if t and not t.startswith("glibc.malloc.tcache_count")]
    return {**env, "GLIBC_TUNABLES": ":".join(tunables + [NO_TCACHE])}


def perturb_host_allocator() -> bool:
    """Turn on glibc's malloc perturbation for this process (Linux/glibc; False elsewhere). It covers
    every block only in a process started without malloc's per-thread cache (`without_malloc_tcache`:
    the pool starts its workers so)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None).mallopt(M_PERTURB, PERTURB_BYTE) == 1
    except (OSError, AttributeError):
        return False


POISON_BUDGET_BYTES = 4 << 30


def poison_allocator(specs: list[tuple[tuple[int, ...], torch.dtype]], device: str, copies: int = 4,
                     budget_bytes: int = POISON_BUDGET_BYTES) -> None:
    """Allocate up to `copies` blocks of each (shape, dtype), fill them with NaN/sentinel, free them.

    The CUDA caching allocator hands the best-fitting free block back out for the next request of
    that size: taking (and poisoning) several of them covers the reference's freed temporaries too,
    so an output a kernel never wrote holds poison, not stale results.
    """
    blocks = []
    for shape, dtype in specs:
        nbytes = max(1, torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size())
        for _ in range(max(1, min(copies, budget_bytes // nbytes))):
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


def report_note(text: str) -> None:
    """A note of the verifier's own code in the candidate's process (the compile check's), for the worker:
    collected by the guard, which the candidate phase drains (no route from a patched function to the
    channel)."""
    _audit(guard.EV_NOTE, str(text))
