"""The compile check: on the CPU, each kernel launch is also compiled for CUDA, at its first
occurrence, before the interpreter runs it, so a kernel the compiler rejects fails here exactly as
it would on a GPU.

Why. On a GPU, Triton compiles each kernel at its first launch; code the compiler rejects ends the
candidate with `compile_error`. On the CPU kernels run under the interpreter (TRITON_INTERPRET=1),
which runs the same Python but checks far less: it accepts `break`, lambdas, f-strings, dicts and
list comprehensions, calls to plain Python functions and non-constexpr globals inside a kernel, a
loop-carried variable that changes type, `if` on a whole tensor, a non-power-of-2 `num_warps`, an
unknown launch keyword, a numpy integer as a kernel argument, ... A verdict must not depend on the
device, so the CPU path compiles what it runs.

What counts as a compile error, one definition for both devices (`compile_failure_kind`): an error
Triton raises while turning a launch into a kernel, before the kernel runs: binding and
specialising its arguments, parsing its launch options, generating code (AST -> TTIR, where the
type and shape rules of triton.language live) and, on a GPU or with compile_check=full, lowering,
ptxas and the shared-memory limit. It ends the candidate with reason `compile_error`, stage
"static" (it did not pass compile) and reward 0, whichever input set made the launch (judge.py).
The interpreter raises some of the same rules itself, as `InterpreterError`s from triton/language
(a type or shape rule) or from its `static_assert`; those count too, also with the check off.

How (CPU). `@triton.jit` decides interpreted or compiled when a function is decorated, and
triton.language decorates its own helpers (tl.sum, tl.cdiv, ...) at import, so a Triton imported
under the interpreter cannot compile. A CPU worker therefore imports Triton's Python modules twice
at start (`stash_compiler_triton`): first with the interpreter off, warmed by one compile of our own
kernel and set aside, then with it on for the candidates. The set-aside copy is never seen by the
interpreter (it patches only the triton.language its kernels' globals name). In the candidate's
process the launch tracker hands each launch to a `LaunchCompiler` before the interpreter runs it.
The first time, it swaps the compiler's copy into `sys.modules` and imports the candidate's file a
second time, compiled (its `@triton.jit` functions are real JITFunctions there); for each launch
it converts the arguments (tl.constexpr, tl.dtype, kernels passed as arguments) to that copy and
does what `JITFunction.run` does before a launch on a GPU, for sm_90 with the real arguments: bind
and specialise, parse options, generate TTIR (`frontend`, the default; it also checks the one
lowering rule the frontend leaves out, that a kernel returns nothing) or build a cubin with
Triton's own ptxas and check the shared memory a block needs (`full`). A failure raises
`CUDACompileError` from the launch, as the GPU raises CompilationError from it. Equal
specialisations are compiled once per candidate.

Exact GPU behaviour that follows from compiling at the launch: an autotune config that fails with
a static_assert, OutOfResources or a ptxas error while being benchmarked is skipped, as the GPU
autotuner skips it (`interpreter_autotune`); a launch the compiler accepts but the interpreter then
rejects for one of its compile rules is the interpreter's limitation, scored as a runtime error
with a note. A launch the check cannot rebuild (a kernel created inside a function, an argument of
another Triton copy's type) is left to the interpreter, with a note: never a failure.

Setting: `verify.compile_check` = auto (frontend on the CPU; nothing on a GPU, whose real compile is
the check) | frontend | full | off.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import traceback
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Callable, Iterator

MODES = ("auto", "frontend", "full", "off")
DEFAULT_MODE = "auto"  # VerifyConfig.compile_check's default
SM = 90  # the CUDA architecture compiled for: an H100, the GPU the project times on
WARP_SIZE = 32
SHARED_MEMORY_LIMIT = 232448  # bytes of shared memory one block may use on an H100 (sm_90)
COMPILED_MODULE = "tritonrl_candidate_compiled"
MAX_DEPTH = 8  # nesting of tuple / constexpr arguments converted
ERROR_CHARS = 2500

# errors the GPU autotuner swallows while benchmarking a config (it skips that config)
BENCH_TOLERATED = ("CompileTimeAssertionFailure", "OutOfResources", "PTXASError")


def resolve_mode(value: str | None, device: str) -> str:
    """The check to run for `device`: "off", "frontend" or "full"."""
    mode = (value or DEFAULT_MODE).strip().lower()
    if mode not in MODES:
        raise ValueError(f"verify.compile_check must be one of {', '.join(MODES)}, got {value!r}")
    if device == "cuda":
        return "off"  # a GPU compiles every launch for real
    return "frontend" if mode == "auto" else mode


class CUDACompileError(RuntimeError):
    """A launch Triton's CUDA compiler rejects (raised on the CPU by the compile check)."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind  # the compiler's exception class name (CompilationError, TypeError, ...)


# --------------------------------------------------------------------------- what counts as a compile error


def _innermost(tb: Any) -> Any:
    frame = None
    while tb is not None:
        frame = tb.tb_frame
        tb = tb.tb_next
    return frame


def _in_package(filename: str, *parts: str) -> bool:
    return (os.sep + os.path.join("triton", *parts) + os.sep) in filename


def _interpreter_root(exc: BaseException) -> BaseException | None:
    """The error an InterpreterError wraps (through nested ones), or None if exc is not one."""
    try:
        from triton.runtime.errors import InterpreterError
    except ImportError:
        return None
    if not isinstance(exc, InterpreterError):
        return None
    root: BaseException = exc
    for _ in range(20):
        if not isinstance(root, InterpreterError) or root.__cause__ is None:
            break
        root = root.__cause__
    return None if root is exc else root


def interpreter_static_assert(exc: BaseException) -> bool:
    """True when the interpreter raised `exc` for a failed `tl.static_assert`."""
    root = _interpreter_root(exc)
    frame = _innermost(root.__traceback__) if root is not None else None
    return frame is not None and frame.f_code.co_name == "_new_static_assert" \
        and _in_package(frame.f_code.co_filename, "runtime")


def _dependency_finder_methods() -> frozenset[str]:
    try:
        from triton.runtime.jit import DependenciesFinder
    except ImportError:
        return frozenset()
    return frozenset(n for n, v in vars(DependenciesFinder).items() if callable(v))


def compile_failure_kind(exc: BaseException) -> str | None:
    """Whether Triton rejected a kernel or a launch before running it.

    "compiler": the compiler or its launch preparation raised (either device, or the CPU's compile
    check). "interpreter": the interpreter raised for a rule the compiler checks too (a
    triton.language type or shape rule, a static_assert), unless the compile check accepted that
    launch. None: anything else (a runtime error, the candidate's own Python).
    """
    if isinstance(exc, CUDACompileError):
        return "compiler"
    try:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources, PTXASError
    except ImportError:
        return None
    if isinstance(exc, (CompilationError, OutOfResources, PTXASError)):
        return "compiler"
    root = _interpreter_root(exc)
    if root is not None:
        if getattr(exc, "tritonrl_compiles", False):
            return None  # the compiler accepted this very launch: an interpreter limitation
        frame = _innermost(root.__traceback__)
        if frame is not None and (_in_package(frame.f_code.co_filename, "language")
                                  or interpreter_static_assert(exc)):
            return "interpreter"
        return None
    frame = _innermost(exc.__traceback__)
    if frame is None:
        return None
    name, func = frame.f_code.co_filename, frame.f_code.co_name
    if _in_package(name, "language") or _in_package(name, "compiler"):
        return "compiler"
    if re.search(r"[\\/]triton[\\/]backends[\\/][^\\/]+[\\/]compiler\.py$", name):
        return "compiler"  # option parsing and the lowering passes
    if name.endswith(os.path.join("triton", "runtime", "jit.py")) and (
            func in ("_pack_args", "create_binder", "_do_compile") or func in _dependency_finder_methods()):
        # a launch keyword the kernel does not have; or, while hashing the kernel before its first
        # compile, a call to a plain Python function ("Unsupported function referenced")
        return "compiler"
    if name == "<string>" and func == "dynamic_func":
        return "compiler"  # Triton's argument binder: an argument it cannot bind or specialise
    return None


def interpreter_only(exc: BaseException) -> bool:
    """An interpreter error for a compiler rule, raised by a launch the compiler accepted."""
    if not getattr(exc, "tritonrl_compiles", False):
        return False
    try:
        exc.tritonrl_compiles = False  # type: ignore[attr-defined]
        return compile_failure_kind(exc) == "interpreter"
    finally:
        exc.tritonrl_compiles = True  # type: ignore[attr-defined]


def mark_compiled(exc: BaseException) -> None:
    """Record on an interpreter error that the compiler accepted the launch that raised it."""
    if _interpreter_root(exc) is not None:
        try:
            exc.tritonrl_compiles = True  # type: ignore[attr-defined]
        except AttributeError:
            pass


# --------------------------------------------------------------------------- the compiler's copy of Triton


_COMPILER_TRITON: dict[str, ModuleType] | None = None
_STASH_ERROR: str | None = None
_FULL_WARMED = False

# touches the helpers kernels use most, so their one-time setup happens once per worker
_WARM_SOURCE = '''
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _helper(x):
    return tl.maximum(x, 0.0)


@triton.jit
def warm_kernel(x_ptr, out_ptr, idx_ptr, n, stride, BLOCK: tl.constexpr, K: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * stride, mask=mask, other=0.0)
    y = tl.where(x > 0, x, -x) + tl.abs(x) + tl.sqrt(tl.abs(x)) + tl.rsqrt(tl.abs(x) + 1.0)
    y += tl.exp(x) + tl.log(tl.abs(x) + 1.0) + tl.sigmoid(x) + libdevice.tanh(x) + libdevice.erf(x)
    y += tl.minimum(x, 1.0) + _helper(x) + tl.cumsum(x, 0) + tl.softmax(x)
    s = tl.sum(x, axis=0) + tl.max(x, axis=0) + tl.min(x, axis=0)
    i = tl.argmax(x, axis=0) + tl.argmin(x, axis=0)
    acc = tl.zeros((K, K), dtype=tl.float32)
    rk = tl.arange(0, K)
    for k in range(0, tl.cdiv(n, K)):
        a = tl.load(x_ptr + rk[:, None] * K + rk[None, :] + k)
        acc += tl.dot(a, a)
    tl.store(out_ptr + offs, (y + s).to(tl.float16).to(tl.float32), mask=mask)
    tl.store(out_ptr + rk[:, None] * K + rk[None, :], acc)
    tl.store(idx_ptr + pid, i)
    tl.atomic_add(out_ptr, s)
'''


def _is_triton_python(name: str) -> bool:
    # the compiled extension (triton._C) is loaded once and shared by both copies
    return (name == "triton" or name.startswith("triton.")) and not (name == "triton._C"
                                                                      or name.startswith("triton._C."))


def compiler_available() -> tuple[bool, str]:
    return _COMPILER_TRITON is not None, _STASH_ERROR or ""


def stash_compiler_triton() -> None:
    """In a CPU worker, before anything imports Triton: import it with the interpreter off, warm its
    CUDA frontend with one compile of our own kernel, and set those modules aside. The caller then
    imports Triton again, interpreted, for the candidates."""
    global _COMPILER_TRITON, _STASH_ERROR
    if any(_is_triton_python(m) for m in sys.modules):
        _STASH_ERROR = "Triton was imported before the compiler's copy could be set aside"
        return
    modules: dict[str, ModuleType] = {}
    with env_set("TRITON_INTERPRET", "0"):
        try:
            _warm("frontend")
        except Exception:
            _STASH_ERROR = "the CUDA frontend does not run here:\n" + traceback.format_exc()[-1500:]
        finally:
            modules = {k: m for k, m in sys.modules.items() if _is_triton_python(k)}
            for k in modules:
                del sys.modules[k]
    if _STASH_ERROR is None:
        _COMPILER_TRITON = modules


@contextmanager
def env_set(key: str, value: str) -> Iterator[None]:
    """`os.environ[key] = value` for the duration of the block, then as it was (unset included)."""
    before = os.environ.get(key)
    os.environ[key] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def _warm(mode: str) -> None:
    """Compile a small kernel of ours (never a candidate's) so that forked children start warm."""
    import warnings

    from .variations import load_module_file

    with tempfile.TemporaryDirectory(prefix="tritonrl-warm-") as wd, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Triton's one-time notices belong to no candidate
        path = os.path.join(wd, "tritonrl_warm_kernel.py")
        with open(path, "w") as f:
            f.write(_WARM_SOURCE)
        with env_set("TRITON_CACHE_DIR", os.path.join(wd, "cache")):
            try:
                import torch

                module = load_module_file(path, "tritonrl_warm_kernel")
                compiler = LaunchCompiler(mode, path)
                x, idx = torch.zeros(64), torch.zeros(4, dtype=torch.int32)
                compiler.compile_launch(module.warm_kernel, (x, x, idx, 17, 1), {"BLOCK": 128, "K": 16})
            finally:
                sys.modules.pop("tritonrl_warm_kernel", None)


@contextmanager
def compiler_triton() -> Iterator[None]:
    """Make the compiler's copy of Triton the one `import triton` finds, and the interpreter off,
    for the duration of the block; then put everything back."""
    if _COMPILER_TRITON is None:
        raise RuntimeError(_STASH_ERROR or "the worker did not set the compiler's Triton aside")
    current = {k: m for k, m in sys.modules.items() if _is_triton_python(k)}
    for k in current:
        del sys.modules[k]
    sys.modules.update(_COMPILER_TRITON)
    with env_set("TRITON_INTERPRET", "0"):
        try:
            yield
        finally:
            for k in [k for k in sys.modules if _is_triton_python(k)]:
                module = sys.modules.pop(k)
                if k not in _COMPILER_TRITON:
                    _COMPILER_TRITON[k] = module  # imported lazily by the compiler: keep it with its copy
            sys.modules.update(current)


def warm_gpu_compiler() -> str | None:
    """In a GPU worker, before its first fork: pay Triton's once-per-process costs of a compile here,
    so every child inherits them instead of paying them itself: the hash of Triton's own library
    that every cache key includes (it reads all of libtriton, ~500 MB: 0.4 s on a CPU core), the
    ptxas version, LLVM's set-up. Our own kernel, compiled for sm_90 without any driver call, so
    CUDA stays uninitialised here. None, or why it did not work (a cold child is slower, not wrong)."""
    try:
        from triton.runtime.cache import triton_key

        triton_key()
        _warm("full")
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"
    return None


def warm_full_pipeline() -> None:
    """Once per worker, before its first `full` check: run the whole pipeline (LLVM, ptxas) on our
    own kernel here, so forked children start warm."""
    global _FULL_WARMED
    if _FULL_WARMED or _COMPILER_TRITON is None:
        return
    _FULL_WARMED = True
    try:
        with compiler_triton():
            _warm("full")
    except Exception:
        pass  # a cold child is slower, not wrong


# --------------------------------------------------------------------------- compiling launches (candidate's process)


class _Skip(Exception):
    pass


class _BindError(Exception):
    """The launch's arguments do not fit the kernel's signature (a Python TypeError, not Triton's)."""


class LaunchCompiler:
    """Compiles launches for CUDA sm_90 the way `JITFunction.run` does before a launch on a GPU.

    `check` is the launch tracker's hook in the candidate's (interpreted) process; everything it
    imports from Triton it imports inside `compiler_triton()`, from the compiler's copy.
    """

    def __init__(self, mode: str, candidate_file: str, note: Callable[[str], None] | None = None):
        self.mode = mode
        self.candidate_file = candidate_file
        self.note = note or (lambda text: None)
        self.outcomes: dict[str, BaseException | None] = {}  # one compile per distinct specialisation
        self.compiled = 0
        self.registry: dict[tuple[str, int], Any] | None = None  # (qualname, first line) -> JITFunction
        self.import_error: str | None = None
        self.binders: dict[int, Callable] = {}
        self.context: Any = None
        self._noted: set[str] = set()
        self.broken = False
        self.seen: dict[tuple, bool | CUDACompileError] = {}  # answers by exact launch arguments
        self._tools: dict[str, Any] | None = None
        self._interp: dict[str, Any] | None = None

    # ------------------------------------------------------------ the hook

    def check(self, kernel: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
        """Compile one launch of an interpreted kernel before it runs. True: it compiles; False:
        not checked (not the candidate's kernel, or not rebuildable here); raises CUDACompileError."""
        fn = getattr(kernel, "fn", None)
        code = getattr(fn, "__code__", None)
        if code is None or code.co_filename != self.candidate_file or self.broken:
            return False
        key = _launch_key(kernel, args, kwargs)
        seen = self.seen.get(key) if key is not None else None
        if seen is not None:  # the same arguments as an earlier launch: the same answer
            if isinstance(seen, CUDACompileError):
                raise CUDACompileError(str(seen), seen.kind)
            return seen
        try:
            answer = self._check(fn, code, args, kwargs)
        except CUDACompileError as e:
            if key is not None:
                self.seen[key] = e
            raise
        if key is not None:
            self.seen[key] = answer
        return answer

    def _check(self, fn: Any, code: Any, args: tuple, kwargs: dict[str, Any]) -> bool:
        try:
            if self._interp is None:
                self._interp = _interpreter_types()
            with compiler_triton():
                if self.registry is None:
                    self._import_compiled()
                target = (self.registry or {}).get((fn.__qualname__, code.co_firstlineno))
                if target is None:
                    raise _Skip(self.import_error or "it is not created when the module is imported (defined "
                                "inside a function?)")
                c_args = tuple(self._convert(a, 0) for a in args)
                c_kwargs = {k: self._convert(v, 0) for k, v in kwargs.items() if k not in ("grid", "warmup")}
                self.compile_launch(target, c_args, c_kwargs)
        except CUDACompileError:
            raise
        except _Skip as e:
            self._skip(fn.__qualname__, str(e))
            return False
        except _BindError:
            return False  # a Python call error (wrong arguments): the interpreter raises it, as a GPU does
        except Exception as e:  # a fault of the check itself: never let it decide the verdict
            self.broken = True
            self.note(f"compile check stopped: {type(e).__name__}: {str(e)[:300]}")
            return False
        return True

    def _skip(self, kernel: str, why: str) -> None:
        if kernel not in self._noted:
            self._noted.add(kernel)
            self.note(f"compile check: launches of {kernel} were not compiled for CUDA: {why[:300]}")

    def _import_compiled(self) -> None:
        """Import the candidate's file again under the compiler's Triton, collecting its JITFunctions."""
        from triton.runtime.jit import JITFunction

        from .variations import load_module_file

        registry: dict[tuple[str, int], Any] = {}
        original_init = JITFunction.__init__
        path = self.candidate_file

        def registering_init(jit_self, fn, *a, **kw):
            original_init(jit_self, fn, *a, **kw)
            c = getattr(fn, "__code__", None)
            if c is not None and c.co_filename == path:
                registry[(fn.__qualname__, c.co_firstlineno)] = jit_self

        JITFunction.__init__ = registering_init
        rng = _rng_states()
        try:
            load_module_file(path, COMPILED_MODULE)
        except Exception as e:
            self.import_error = f"the module does not import without the interpreter ({type(e).__name__}: " \
                                f"{str(e)[:200]})"
        finally:
            JITFunction.__init__ = original_init
            _restore_rng(rng)  # module-level random draws must not shift the candidate's own
        self.registry = registry

    # ------------------------------------------------------------ arguments

    def _convert(self, v: Any, depth: int) -> Any:
        """An interpreted launch's argument as the compiler's copy of Triton sees it."""
        if depth > MAX_DEPTH:
            raise _Skip("an argument nested too deeply")
        it = self._interp or {}
        import triton.language as tl

        if it.get("constexpr") is not None and isinstance(v, it["constexpr"]):
            return tl.constexpr(self._convert(v.value, depth + 1))
        if it.get("dtype") is not None and isinstance(v, it["dtype"]):
            if type(v) is not it["dtype"]:
                raise _Skip(f"a {type(v).__name__} argument")
            return tl.dtype(v.name)
        if it.get("tensor_wrapper") is not None and isinstance(v, it["tensor_wrapper"]):
            from triton.runtime.jit import TensorWrapper

            return TensorWrapper(v.base, self._convert(v.dtype, depth + 1))
        inner = getattr(v, "fn", None)
        if type(v).__name__ in ("InterpretedFunction", "JITFunction") and getattr(inner, "__code__", None):
            target = (self.registry or {}).get((inner.__qualname__, inner.__code__.co_firstlineno))
            if target is None:
                raise _Skip(f"the Triton function {inner.__qualname__} passed as an argument is not defined "
                            "at module level of the solution")
            return target
        if isinstance(v, tuple):
            items = [self._convert(x, depth + 1) for x in v]
            if type(v) is tuple:
                return tuple(items)
            if hasattr(type(v), "_fields"):  # a namedtuple
                return type(v)(*items)
            return type(v)(items)
        if type(v).__module__.split(".")[0] == "triton":
            raise _Skip(f"an argument of type {type(v).__name__} from the interpreter's Triton")
        return v  # tensors, numbers, strings, None, anything else: the binder decides, as on a GPU

    # ------------------------------------------------------------ one launch

    def _load_tools(self) -> dict[str, Any]:
        if self._tools is None:
            import triton
            from triton import knobs
            from triton._C.libtriton import ir
            from triton.backends.compiler import GPUTarget
            from triton.compiler import ASTSource, make_backend
            from triton.compiler.code_generator import ast_to_ttir
            from triton.runtime.errors import OutOfResources
            from triton.runtime.jit import create_function_from_signature

            target = GPUTarget("cuda", SM, WARP_SIZE)
            self._tools = {"compile": triton.compile, "knobs": knobs, "ir": ir, "target": target,
                           "backend": make_backend(target), "ASTSource": ASTSource, "ast_to_ttir": ast_to_ttir,
                           "binder": create_function_from_signature, "OutOfResources": OutOfResources}
        return self._tools

    def compile_launch(self, fn: Any, args: tuple, kwargs: dict[str, Any]) -> None:
        """Bind, specialise and compile one launch of a JITFunction (or an autotuner/heuristics
        wrapping one) of the compiler's copy; raises CUDACompileError with the compiler's message."""
        while not hasattr(fn, "params") and hasattr(fn, "fn"):
            fn = fn.fn
        t = self._load_tools()
        name = getattr(getattr(fn, "fn", None), "__qualname__", "kernel")
        kwargs = dict(kwargs)
        knobs = t["knobs"]
        # what JITFunction.run adds before binding (triton 3.x)
        kwargs["debug"] = kwargs.get("debug", getattr(fn, "debug", None)) or knobs.runtime.debug
        for option in ("instrumentation_mode", "fpsan_homomorphic_casts"):
            if hasattr(knobs.compilation, option):
                kwargs[option] = getattr(knobs.compilation, option)
        try:
            binder = self.binders.get(id(fn))
            if binder is None:
                binder = self.binders[id(fn)] = t["binder"](fn.signature, fn.params, t["backend"])
            bound_args, specialization, options = binder(*args, **kwargs)
        except Exception as e:
            frame = _innermost(e.__traceback__)
            if frame is None or frame.f_code.co_name != "dynamic_func":
                raise _BindError(str(e)) from None  # raised by the call itself: missing or extra arguments
            # raised inside the binder: an argument Triton cannot specialise
            raise _failure(name, "cannot be launched with these arguments", e) from None
        # the frontend's verdict depends on types and constexpr values, not on alignment attributes,
        # so launches that differ only there are generated once
        shape = specialization if self.mode == "full" else [_without_attrs(s) for s in specialization]
        key = repr((id(fn), shape, sorted(options.items(), key=lambda kv: kv[0])))
        if key not in self.outcomes:
            self.outcomes[key] = self._compile(t, fn, kwargs, bound_args, specialization, options)
            self.compiled += 1
        error = self.outcomes[key]
        if error is not None:
            raise _failure(name, "does not compile", error) from None

    def _compile(self, t: dict[str, Any], fn: Any, kwargs: dict[str, Any], bound_args: Any, specialization: Any,
                 options: Any) -> BaseException | None:
        try:
            options, signature, constexprs, attrs = fn._pack_args(t["backend"], kwargs, bound_args, specialization,
                                                                 options)
            src = t["ASTSource"](fn, signature, constexprs, attrs)
            if self.mode == "full":
                kernel = t["compile"](src, target=t["target"], options=options.__dict__)
                shared = int(getattr(kernel.metadata, "shared", 0) or 0)
                if shared > SHARED_MEMORY_LIMIT:
                    raise t["OutOfResources"](shared, SHARED_MEMORY_LIMIT, "shared memory")
            else:
                if self.context is None:
                    self.context = t["ir"].context()
                    t["ir"].load_dialects(self.context)
                    t["backend"].load_dialects(self.context)
                backend = t["backend"]
                module = t["ast_to_ttir"](fn, src, context=self.context, options=options,
                                          codegen_fns=backend.get_codegen_implementation(options),
                                          module_map=backend.get_module_map())
                _check_returns_nothing(module)
        except Exception as e:  # the compiler's message is the finding
            return e
        return None


def _check_returns_nothing(module: Any) -> None:
    """A kernel that returns a value passes code generation but not CUDA's lowering (a GPU fails
    with "PassManager::run failed"); the frontend check catches it here, from the TTIR signature."""
    header = module.get_function(module.get_entry_func_name()).str_nodebug().split("\n", 1)[0]
    if re.search(r"\)\s*->", header):
        raise RuntimeError("the kernel returns a value; a Triton kernel must return nothing (CUDA lowering "
                           "fails: PassManager::run failed)")


def _rng_states() -> tuple:
    import random

    import numpy
    import torch

    return random.getstate(), numpy.random.get_state(), torch.random.get_rng_state()


def _restore_rng(states: tuple) -> None:
    import random

    import numpy
    import torch

    random.setstate(states[0])
    numpy.random.set_state(states[1])
    torch.random.set_rng_state(states[2])


def _failure(kernel: str, what: str, e: BaseException) -> CUDACompileError:
    kind = type(e).__name__
    text = str(e).strip() or kind
    head = f"{kernel} {what} for CUDA sm_{SM}" + ("" if kind == "CompilationError" else f" ({kind})")
    return CUDACompileError(f"{head}:\n{text}"[-ERROR_CHARS:], kind)


def _without_attrs(entry: Any) -> Any:
    """A specialisation entry (type, attribute) with the attribute dropped unless it is a constexpr value."""
    if not isinstance(entry, tuple) or len(entry) != 2:
        return entry
    ty, attr = entry
    if ty == "constexpr":
        return entry
    if isinstance(ty, tuple) and isinstance(attr, tuple):  # a tuple argument: one entry per element
        return tuple(_without_attrs((t, a)) for t, a in zip(ty, attr))
    return ty


_SCALARS = (int, bool, float, str, type(None))


def _launch_key(kernel: Any, args: tuple, kwargs: dict[str, Any]) -> tuple | None:
    """A key at least as fine as Triton's specialisation of a launch (tensors by dtype and 16-byte
    alignment, everything else by exact value), or None when an argument has no cheap key."""
    try:
        return (id(kernel), tuple(_value_key(a, 0) for a in args),
                tuple(sorted((k, _value_key(v, 0)) for k, v in kwargs.items() if k not in ("grid", "warmup"))))
    except (KeyError, TypeError):
        return None


def _value_key(v: Any, depth: int) -> Any:
    import torch

    t = type(v)
    if t in _SCALARS:
        return t.__name__, v
    if t is torch.Tensor or t is torch.nn.Parameter:
        return "tensor", str(v.dtype), v.data_ptr() % 16 == 0
    if t is tuple and depth < MAX_DEPTH:
        return ("tuple",) + tuple(_value_key(x, depth + 1) for x in v)
    raise KeyError(t.__name__)


def _interpreter_types() -> dict[str, Any]:
    """The interpreted copy's classes that arguments are converted from (taken outside the swap)."""
    import triton.language as tl
    from triton.runtime import jit

    return {"constexpr": tl.constexpr, "dtype": tl.dtype, "tensor_wrapper": getattr(jit, "TensorWrapper", None)}
