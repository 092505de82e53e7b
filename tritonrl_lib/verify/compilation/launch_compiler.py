"""Compiling a candidate's kernel launches for CUDA on the CPU, as a GPU compiles them at their first launch.

In the candidate's process the launch tracker (runtime_checks.py) hands each launch to a
`LaunchCompiler` before the interpreter runs it. The first time, it swaps the compiler's copy of
Triton into `sys.modules` (compiler_copy.py) and imports the candidate's file a second time,
compiled (its `@triton.jit` functions are real JITFunctions there); for each launch it converts
the arguments (tl.constexpr, tl.dtype, kernels passed as arguments) to that copy and does what
`JITFunction.run` does before a launch on a GPU, for sm_90 with the real arguments: bind and
specialise, parse options, generate TTIR (`frontend`, the default; it also checks the one lowering
rule the frontend leaves out, that a kernel returns nothing) or build a cubin with Triton's own
ptxas and check the shared memory a block needs (`full`). A failure raises `CUDACompileError` from
the launch, as the GPU raises CompilationError from it. Equal specialisations are compiled once
per candidate. A launch the check cannot rebuild (a kernel created inside a function, an argument
of another Triton copy's type) is left to the interpreter, with a note: never a failure.
"""

from __future__ import annotations

import random
import re
from typing import Any, Callable

from .compiler_copy import compiler_triton
from .errors import CUDACompileError, innermost_frame
from ..candidate.variations import load_module_file

SM = 90  # the CUDA architecture compiled for: an H100, the GPU the project times on
WARP_SIZE = 32
SHARED_MEMORY_LIMIT = 232448  # bytes of shared memory one block may use on an H100 (sm_90)
COMPILED_MODULE = "tritonrl_candidate_compiled"
MAX_DEPTH = 8  # nesting of tuple / constexpr arguments converted
ERROR_CHARS = 2500


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
            frame = innermost_frame(e.__traceback__)
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
    import numpy
    import torch

    return random.getstate(), numpy.random.get_state(), torch.random.get_rng_state()


def _restore_rng(states: tuple) -> None:
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
