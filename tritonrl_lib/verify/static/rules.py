"""The static check's rules: which modules a solution may import, and which calls and names it may not use.

Imports: `ALLOWED_IMPORTS` (a module or anything under it) unless a prefix is in `DENIED_IMPORTS`,
each with the static reason it gives and why; `import_verdict` applies both. Calls and names: the
builtins, file calls, global-state switches, RNG reseeds, dunder hooks and tensor bases the
security checks refuse (security.py), and the vocabulary the reachability pass needs to tell
PyTorch compute from bookkeeping (reach.py). The PyTorch compute tables themselves live in
verify/policy.py, shared with the runtime op census.
"""

from __future__ import annotations

from .. import reasons as R

# --------------------------------------------------------------------------- import rules

# Modules a solution may import (the module itself or anything under it), unless denied below.
ALLOWED_IMPORTS = frozenset({
    "torch", "triton", "math", "cmath", "numbers", "typing", "typing_extensions", "functools",
    "itertools", "collections", "dataclasses", "enum", "abc", "operator", "warnings", "copy",
    "numpy", "__future__", "random", "time", "string", "logging",
})

# module prefix -> (reason, why). A denied prefix wins over an allowed one (torch.utils.cpp_extension).
_PROCESS = "process / OS access"
_FILES = "file system access"
_INTRO = "interpreter internals (introspection, import machinery)"
_NET = "network access"
COMPILE_WHY = "compiles PyTorch or native code instead of Triton"
_TRITON_INTERNAL = "Triton internals (reaching other kernels or the compiler)"
_OTHER_KERNELS = "another kernel / compute library instead of Triton"
_DISPATCH = "intercepts PyTorch's dispatch (can rewrite what ops do)"

DENIED_IMPORTS: dict[str, tuple[str, str]] = {
    **{m: (R.static("forbidden_import"), _PROCESS) for m in (
        "os", "sys", "subprocess", "signal", "resource", "pty", "posix", "nt", "platform",
        "sysconfig", "site", "atexit", "faulthandler", "tracemalloc", "ctypes", "cffi", "mmap",
        "fcntl", "_posixsubprocess", "pwd", "grp", "termios", "_signal", "_ctypes", "_posixshmem",
        "_tracemalloc", "_winapi", "msvcrt", "winreg", "numpy.ctypeslib", "torch.utils.collect_env",
        "torch.utils.bottleneck")},
    **{m: (R.static("threads"), "threads / processes") for m in (
        "threading", "_thread", "multiprocessing", "_multiprocessing", "concurrent",
        "torch.multiprocessing", "asyncio", "_asyncio", "sched", "queue", "_queue",
        "logging.handlers", "logging.config", "torch.distributed", "torch.utils.data",
        "torch.utils.throughput_benchmark", "numpy.testing")},
    **{m: (R.static("forbidden_import"), _FILES) for m in (
        "io", "_io", "pathlib", "shutil", "tempfile", "glob", "fnmatch", "shelve", "pickle",
        "_pickle", "dill", "cloudpickle", "marshal", "dbm", "sqlite3", "zipfile", "tarfile", "gzip",
        "bz2", "lzma", "csv", "json", "h5py", "safetensors", "torch.serialization", "torch.package",
        "torch.hub", "torch.utils.model_zoo", "torch.utils.tensorboard", "torch.utils.hipify",
        "torch.utils.model_dump", "torch.utils.show_pickle", "torch.utils.file_baton", "numpy.lib.npyio",
        "numpy.lib._npyio_impl", "numpy.lib._datasource", "numpy.lib.format", "linecache", "fileinput")},
    **{m: (R.static("forbidden_import"), _INTRO) for m in (
        "importlib", "_imp", "_frozen_importlib", "_frozen_importlib_external", "builtins", "gc",
        "inspect", "types", "weakref", "_weakref", "code", "codeop", "runpy", "zipimport",
        "pkgutil", "traceback", "dis", "_opcode", "ast", "_ast", "symtable", "_symtable",
        "contextlib", "sysconfig", "ctypes.util", "torch._C", "torch._ops", "torch._guards",
        "torch._jit_internal", "torch._utils_internal", "triton._C")},
    **{m: (R.static("forbidden_import"), _NET) for m in (
        "socket", "_socket", "ssl", "_ssl", "requests", "urllib", "urllib3", "http", "httpx", "aiohttp", "ftplib",
        "smtplib", "xmlrpc", "websocket", "websockets")},
    **{m: (R.static("forbidden_import"), COMPILE_WHY) for m in (
        "torch.utils.cpp_extension", "torch._dynamo", "torch._inductor", "torch.compiler",
        "torch._compile", "torch.jit", "torch.fx", "torch.export", "torch._export",
        "torch._prims", "torch._refs", "torch._decomp", "torch._functorch", "torch.func",
        "torch._higher_order_ops", "torch.cuda.jiterator", "torch._VF", "torch._vmap_internals",
        "torch.onnx", "torch.ao", "torch.quantization", "torch.cuda.tunable", "torch.utils.jit",
        "torch.utils.mobile_optimizer", "numba", "cython", "setuptools", "distutils", "numpy.f2py",
        "numpy.distutils")},
    **{m: (R.static("dynamic_code"), "runs code given as strings") for m in ("torch.utils.benchmark",)},
    **{m: (R.static("forbidden_import"), _TRITON_INTERNAL) for m in (
        "triton.runtime", "triton.compiler", "triton.backends", "triton.tools", "triton.ops",
        "triton.testing", "triton.knobs", "triton.experimental", "triton.profiler")},
    **{m: (R.static("forbidden_import"), _OTHER_KERNELS) for m in (
        "cupy", "pycuda", "cuda", "nvidia", "jax", "jaxlib", "tensorflow", "tvm", "tilelang",
        "cutlass", "apex", "xformers", "flash_attn", "liger_kernel", "transformer_engine",
        "torchvision", "torchaudio", "scipy", "sklearn", "einops", "thunder", "tensorrt",
        "torch_tensorrt", "deepspeed", "bitsandbytes", "vllm", "sgl_kernel", "kernels")},
    **{m: (R.static("monkeypatch"), _DISPATCH) for m in (
        "torch.utils._python_dispatch", "torch.overrides", "torch.library", "torch._library",
        "torch._subclasses", "torch._custom_op", "torch._custom_ops", "torch._dispatch",
        "torch.testing._internal", "torch.utils.backend_registration", "torch.utils.deterministic")},
}

# Exceptions inside a denied prefix: `triton.runtime.driver` gives device properties (the fused
# softmax tutorial uses it to size its grid) and reaches no kernel.
ALLOWED_INSIDE_DENIED = frozenset({"triton.runtime.driver"})

# Top-level module names that torch re-exports as attributes (`torch.os`, `torch.sys`, ...); an
# attribute chain through one of them is judged like an import of it. (`torch.cuda` is torch's
# own, so the kernel-library names are not part of this check.)
REEXPORT_CHECK = frozenset(m for m, (_, why) in DENIED_IMPORTS.items()
                           if "." not in m and why != _OTHER_KERNELS)


def import_verdict(module: str) -> tuple[str, str] | None:
    """None if a solution may import `module`, else (reason, why)."""
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in ALLOWED_INSIDE_DENIED:
            return None
        if prefix in DENIED_IMPORTS:
            return DENIED_IMPORTS[prefix]
    if parts[0] in ALLOWED_IMPORTS:
        return None
    return (R.static("forbidden_import"), "not on the list of modules a solution may import "
            f"({', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))})")


# --------------------------------------------------------------------------- call rules

DYNAMIC_BUILTINS = frozenset({"eval", "exec", "compile", "__import__", "globals", "locals",
                              "vars", "breakpoint", "input", "memoryview"})
ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# Builtins a solution may not hold under any name (`enum.bltns.exec`, `g = getattr`): the
# attribute-chain resolution (resolve.py) knows them by identity.
DENIED_BUILTINS: dict[str, tuple[str, str]] = {
    **{n: (R.static("dynamic_code"), "runs or exposes code dynamically") for n in DYNAMIC_BUILTINS},
    **{n: (R.static("dynamic_code"), "looks attributes up or patches them by string")
       for n in ("getattr", "setattr", "delattr")},
    "open": (R.static("file_access"), "reads or writes files"),
    **{n: (R.static("introspection"), "interpreter helpers (pydoc, site files)")
       for n in ("help", "license", "credits", "copyright")},
}
# Callables reached through allowed modules that the rules refuse. Keys are prefixes of the name a
# callable is defined under (`module.qualname`, so any route to it counts) or of the chain as
# written with its module's real name (`torch.ops.load_library`: a method, it has no home).
DENIED_CALLABLES: dict[str, tuple[str, str]] = {
    "logging.currentframe": (R.static("introspection"), "returns the caller's frame"),
    "torch.ops.load_library": (R.static("forbidden_import"), "loads native code"),
    "torch.ops.import_module": (R.static("forbidden_import"), "imports a module by name"),
    "torch.classes.load_library": (R.static("forbidden_import"), "loads native code"),
    "torch.nn.modules.module.register_module_": (
        R.static("monkeypatch"), "a global hook on every nn.Module, the reference's included"),
    "operator.attrgetter": (R.static("dynamic_code"), "looks attributes up by string"),
    "operator.methodcaller": (R.static("dynamic_code"), "looks attributes up by string"),
    "string.Formatter": (R.static("dynamic_code"), "looks attributes up by string (format fields)"),
    # evaluate annotation strings (eval)
    **{k: (R.static("dynamic_code"), "evaluates strings as code") for k in (
        "typing.get_type_hints", "typing.ForwardRef", "typing._eval_type", "typing.evaluate_forward_ref",
        "typing_extensions.get_type_hints", "typing_extensions.get_annotations",
        "typing_extensions.evaluate_forward_ref")},
    "triton.compiler.": (R.static("forbidden_import"), "Triton's compiler driven by hand (triton.compile)"),
    "torch.cuda.cudart": (R.static("forbidden_import"), "the CUDA runtime's own bindings"),
    "torch.utils.swap_tensors": (R.static("monkeypatch"), "swaps two tensors' contents and classes"),
    # files through allowed modules: log files, and source lines read back by warnings (linecache)
    **{k: (R.static("file_access"), "reads or writes files") for k in (
        "logging.FileHandler", "logging.basicConfig", "warnings.formatwarning", "warnings.showwarning",
        "warnings.warn_explicit", "warnings._showwarnmsg", "torch.profiler.tensorboard_trace_handler")},
}


def denied_callable(*names: str | None) -> tuple[str, str, str] | None:
    """(key, reason, why) when any of `names` falls under DENIED_CALLABLES."""
    for name in names:
        if name:
            for key, (reason, why) in DENIED_CALLABLES.items():
                if name.startswith(key):
                    return key, reason, why
    return None


# Attributes of frames, tracebacks, generators, coroutines and code objects (reached from any
# object: `logging.currentframe().f_back.f_locals`), and numpy's raw-memory interface.
INTROSPECTION_ATTRS = frozenset({
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next",
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
    "ag_code", "co_code", "co_consts", "co_names", "func_globals", "func_code", "ctypes",
})
# Ways to make a tensor of a candidate's own class (lazy or self-comparing results).
TENSOR_SUBCLASS_ATTRS = frozenset({"as_subclass", "_make_subclass", "_make_wrapper_subclass"})
# Methods that make an object of another class pass for a tensor at a kernel launch (the launcher
# calls them; under the interpreter, while the op census is paused).
TENSOR_PROXY_METHODS = frozenset({"data_ptr", "untyped_storage", "__cuda_array_interface__",
                                  "__array_interface__", "__dlpack__", "__dlpack_device__"})
# Calls that read or write files, by qualified name.
FILE_CALLS = frozenset({
    "numpy.load", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.loadtxt",
    "numpy.savetxt", "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap", "numpy.fromregex",
    "numpy.lib.format.open_memmap", "torch.load", "torch.save", "torch.from_file",
    "torch.UntypedStorage.from_file", "torch.TypedStorage.from_file", "torch.Storage.from_file",
})
FILE_METHODS = frozenset({"read_text", "read_bytes", "write_text", "write_bytes", "tofile",
                          "from_file", "open", "readlines", "readline"})
# Global switches that change how the *reference* computes (precision, determinism, dtype).
GLOBAL_STATE_PREFIXES = ("torch.set_", "torch.backends.", "torch.use_deterministic_algorithms",
                         "torch.cuda.set_", "torch.random.set_", "torch.cuda.memory.set_")
GLOBAL_STATE_ALLOWED = frozenset({"torch.set_grad_enabled", "torch.set_printoptions"})
# Reseeding inside forward can make the verifier's "fresh" inputs predictable.
RNG_CALLS = frozenset({"torch.manual_seed", "torch.seed", "torch.cuda.manual_seed",
                       "torch.cuda.manual_seed_all", "torch.random.manual_seed",
                       "torch.random.seed", "numpy.random.seed", "random.seed",
                       "torch.set_rng_state", "torch.cuda.set_rng_state"})
DANGEROUS_DUNDER_DEFS = frozenset({
    "__torch_function__", "__torch_dispatch__", "__cuda_array_interface__", "__array_interface__",
    "__dlpack__", "__dlpack_device__", "__getattr__", "__getattribute__",
    "__setattr__", "__delattr__", "__del__", "__reduce__", "__reduce_ex__", "__array__",
    "__array_function__", "__array_ufunc__", "__instancecheck__", "__subclasscheck__",
    "__init_subclass__", "__class_getitem__", "__set_name__", "__get__", "__set__", "__delete__",
    "__new__", "__eq__", "__ne__", "__bool__", "__call__", "__getstate__", "__setstate__",
})
SAFE_DUNDER_ATTRS = frozenset({"__init__", "__name__", "__qualname__", "__doc__", "__version__"})
SAFE_DUNDER_NAMES = frozenset({"__name__", "__doc__", "__debug__"})
TENSOR_BASES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase",
                          "torch.utils._python_dispatch.TorchDispatchMode",
                          "torch.overrides.TorchFunctionMode"})
# torch submodules a launcher may use that run no tensor compute.
TORCH_SAFE_SUBMODULES = frozenset({"cuda", "backends", "version", "types", "amp", "autocast",
                                   "accelerator", "Size", "finfo", "iinfo", "dtype", "device",
                                   "random", "profiler", "testing", "utils"})
# Method names shared by tensors and Python containers/strings: `s.add(x)` on a set or
# `d.values()` on a dict must not count as PyTorch compute. The runtime census judges them.
AMBIGUOUS_METHODS = frozenset({"add", "index", "indices", "sort", "values", "real", "imag",
                               "split", "count", "copy", "pop", "update", "clear", "remove",
                               "insert", "extend", "append", "get", "items", "keys", "format"})
NUMPY_SCALAR_OK = frozenset({"prod", "dtype", "finfo", "iinfo", "result_type", "promote_types",
                             "float32", "float16", "int32", "int64"})
# nn.Module methods that run no forward compute (anything else called on an nn attribute counts
# as calling the module: `self.conv._conv_forward(x, w, b)` is a convolution).
MODULE_BOOKKEEPING = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children",
    "modules", "named_modules", "state_dict", "load_state_dict", "train", "eval", "to", "cuda",
    "cpu", "half", "float", "double", "bfloat16", "type", "requires_grad_", "zero_grad",
    "extra_repr", "register_buffer", "register_parameter", "get_parameter", "get_buffer",
    "get_submodule",
})
# Decorators that make a function a Triton kernel (`@triton.heuristics` alone does not).
KERNEL_MARKERS = frozenset({"triton.jit", "triton.autotune"})
