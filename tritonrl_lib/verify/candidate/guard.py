"""The candidate's process fenced in from the inside: installed right before its module is imported.

What the verdict relies on in that process (the op census, the launch count, the timer, the messages to
the worker) is Python, and Python lets code reach almost anything: threads the census does not watch,
the garbage collector and the call stack (where the verifier's objects live), ctypes (raw memory), new
processes, patched functions. The static check rejects the usual spellings; this layer does not care how
a route was spelled:

- an audit hook (`sys.addaudithook`: nothing can remove it, nothing can list it) refuses, while the
  candidate's code is on the call stack, what only an attack needs: the garbage collector's object walks,
  frames (`sys._getframe` from the candidate or from inspect/traceback, `tb_frame`, `gi_frame`, ...),
  tracing hooks, ctypes, new processes (Triton's compiler running ptxas excepted), signals to other
  processes, sockets, environment changes, /proc/<pid>/mem and /proc/<pid>/fd, modules on the static
  deny list, code the candidate compiles or unmarshals itself;
- threads cannot be started at all: every function that starts one is replaced by a refusal that keeps
  no reference to anything;
- the counters of the op census and the launch tracker live here, fed through `sys.audit` events that only
  the verifier's own files may raise: nothing the candidate can reach holds them;
- the callables of the namespaces a timing or a check relies on (torch, torch.cuda and its Event and
  Stream, torch.Tensor, triton, time, builtins, gc, the verifier's own modules, ...) are recorded at
  install, so a later replacement, however made (alias, setattr, `__dict__`, a builtin reached by
  attribute), shows in `changed()`;
- the namespaces the verifier's own code in this process looks its globals up in (its modules, builtins,
  the standard library modules they use) must not change at all once the candidate runs: their dicts'
  version tags (PEP 509, bumped by every write) are recorded at install and `tampered()` names any that
  moved. A snapshot compared after a call misses a patch put back before the call returns (the census's
  reporting function silenced for one call); a version tag never goes back.

A refusal raises in the candidate (which may catch it) and is recorded: the facts go to the worker with
the candidate's outputs, and any of them is a cheat flag.
"""

from __future__ import annotations

import os
import sys
import types
from collections import Counter
from typing import Any, Callable, Iterable

MAX_DETAILS = 20

# modules that call sys._getframe for their own bookkeeping and hand no frame back
_TRANSPARENT = ("typing", "typing_extensions", "warnings", "logging", "collections", "enum", "dataclasses",
                "abc", "functools", "re", "copy", "string", "numbers", "contextlib", "importlib", "threading",
                "torch", "triton", "numpy")
# modules whose point is handing frames (or code that walks them) to their caller
_FRAME_TOOLS = ("inspect", "traceback", "pdb", "bdb", "cgitb", "code", "faulthandler", "tracemalloc")
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "gi_yieldfrom", "cr_await"})
_VERIFIER = ("tritonrl_lib",)  # its code may run while the candidate's is on the stack (the compile check)
# tools Triton's CUDA backend runs when it compiles a kernel at its first launch
_COMPILER_TOOLS = frozenset({"ptxas", "cuobjdump", "nvdisasm", "ldconfig", "nvcc", "fatbinary"})
# read-only probes the standard library runs for Triton or torch (platform.architecture runs `file`,
# platform.processor `uname`): they tell the caller about the machine and do nothing else
_PROBE_TOOLS = frozenset({"file", "uname"})

# audit event -> cheat flag: refused whenever the candidate's code is on the stack
_DENY = {
    "gc.get_objects": "introspection:gc", "gc.get_referrers": "introspection:gc",
    "gc.get_referents": "introspection:gc", "gc.freeze": "introspection:gc",
    "sys._current_frames": "introspection:frames", "sys.settrace": "introspection:trace",
    "sys.setprofile": "introspection:trace", "sys._settraceallthreads": "introspection:trace",
    "sys._setprofileallthreads": "introspection:trace", "sys.monitoring.register_callback": "introspection:trace",
    "sys.monitoring.use_tool_id": "introspection:trace", "sys.addaudithook": "introspection:audit",
    "sys.unraisablehook": "introspection:hook", "sys.excepthook": "introspection:hook",
    "sys.remote_exec": "introspection:debugger",
    "os.fork": "process", "os.forkpty": "process", "os.spawn": "process",
    "os.system": "process", "pty.spawn": "process", "os.kill": "process",
    "os.killpg": "process", "os.putenv": "environment", "os.unsetenv": "environment", "os.chdir": "environment",
    "socket.socket": "network", "socket.connect": "network", "socket.bind": "network",
    "socket.getaddrinfo": "network", "socket.sendto": "network",
}
# events the import machinery raises for every module it loads (judged by the "import" event instead)
_IMPORTING = frozenset({"open", "exec", "compile", "marshal.loads", "marshal.load", "os.listdir", "os.scandir"})
_WATCHED = frozenset(_DENY) | _IMPORTING | {
    "sys._getframe", "object.__getattr__", "object.__setattr__", "object.__delattr__", "import",
    "subprocess.Popen", "os.posix_spawn", "os.exec", "mmap.__new__"}

# the verifier's own events (raised by runtime_checks.py): only its files may raise them
EV_LAUNCH, EV_FOREIGN, EV_OP, EV_PAUSE, EV_HOST_READ, EV_HOST_MADE, EV_NOTE, EV_THREADS, EV_BYPASS = (
    "tritonrl.launch", "tritonrl.foreign_launch", "tritonrl.op", "tritonrl.pause", "tritonrl.host_read",
    "tritonrl.host_made", "tritonrl.note", "tritonrl.threads", "tritonrl.census_bypassed")
# a heavy op's operand dtypes (heavy_ops.operand_key), GPU work not ordered with the caller's stream (gpu_work.py)
EV_HEAVY, EV_UNORDERED = "tritonrl.heavy_operands", "tritonrl.unordered"
_REFUSAL_FILE = "<tritonrl: threads refused>"  # the thread refusal's code (compiled by _deny_threads)
# the census may be paused only by these functions of the trusted files (the interpreter's own argument
# copies, the compile check): a candidate that calls the reporting function itself cannot pause it
PAUSERS = frozenset({"paused", "run"})


class Facts:
    """What one candidate call did: the guard's counters, reset by `Guard.begin()`."""

    def __init__(self) -> None:
        self.launches = 0
        self.kernels: Counter[str] = Counter()
        self.foreign: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()
        self.host_read = 0  # elements read into Python (tolist, numpy, item, iteration)
        self.host_made = 0  # elements made from Python or numpy data (torch.tensor(list), from_numpy)
        self.bypassed: list[str] = []  # torch functions called while the op census was off the stack
        self.heavy: Counter[str] = Counter()  # heavy calls by operand key ("gemm:float16")
        self.unordered: list[str] = []  # launches not ordered with the caller's stream, described


class Guard:
    """One per candidate process; `install()` once, right before the candidate's module is imported.

    `trusted_files`: the files allowed to raise the verifier's own events (runtime_checks.py).
    `watched`: names -> objects (modules, classes) whose callables are recorded at install.
    `denied_import`: module name -> a reason when a solution may not import it (static.import_verdict).
    """

    def __init__(self, candidate_file: str, trusted_files: Iterable[str], watched: dict[str, Any] | None = None,
                 denied_import: Callable[[str], Any] | None = None, enforce: bool = True):
        self.candidate_file = os.path.abspath(candidate_file)
        self.candidate_module = os.path.splitext(os.path.basename(candidate_file))[0]
        self.trusted = frozenset(os.path.abspath(f) for f in trusted_files)
        self.watched = dict(watched or {})
        self.denied_import = denied_import
        self.flags: list[str] = []  # cheat flags, in order, deduplicated
        self.details: list[str] = []  # one line per refusal, for people
        self.enforce = enforce  # False: count the verifier's events only (tests of the census)
        self.facts = Facts()
        self.notes: list[str] = []  # what the verifier's code in this process had to say (EV_NOTE)
        self.counting = False  # inside a candidate call (between begin and end)
        self.paused = 0
        self.installed = False
        self._busy = False
        self._snapshot: dict[tuple[str, str], Any] = {}
        self._strict: list[tuple[str, dict, int]] = []  # (name, namespace, version tag at install)
        self._tampered: list[str] = []
        self._read_version: Callable[[Any], Any] | None = None

    # ---------------------------------------------------------------- facts

    def record(self, flag: str, detail: str) -> None:
        if flag not in self.flags:
            self.flags.append(flag)
        if len(self.details) < MAX_DETAILS:
            self.details.append(detail[:300])

    def begin(self) -> None:
        self.facts = Facts()
        self.counting = True

    def end(self) -> Facts:
        self.counting = False
        return self.facts

    def changed(self) -> list[str]:
        """Recorded callables replaced or removed since `install()` (`owner.name`, sorted)."""
        out = []
        spaces: dict[str, dict[str, Any] | None] = {}  # one look per owner: a class's is a copy of its mappingproxy
        for (owner, name), value in self._snapshot.items():
            if owner not in spaces:
                spaces[owner] = _namespace(self.watched[owner])
            ns = spaces[owner]
            if ns is None or ns.get(name, _MISSING) is not value:
                out.append(f"{owner}.{name}")
        return sorted(out)

    # ---------------------------------------------------------------- install

    def install(self) -> None:
        if self.installed:
            return
        import builtins

        if self.enforce:
            _deny_threads()  # before the record: the refusals are what the record holds
        self.watched.setdefault("builtins", builtins)
        for owner, obj in self.watched.items():
            for name, value in (_namespace(obj) or {}).items():
                if _is_behaviour(value):
                    self._snapshot[(owner, name)] = value  # held: its identity cannot be reused
        self._record_versions()
        sys.addaudithook(self._hook)
        self.installed = True

    def _record_versions(self) -> None:
        reader = _version_reader()
        if reader is None:
            return
        import builtins

        at, offset = reader
        self._read_version, self._offset, self._id = at, offset, id  # bound now: nothing looked up later
        for name, ns in [("builtins", vars(builtins))] + _strict_namespaces():
            self._strict.append((name, ns, at(id(ns) + offset).value))

    def tampered(self) -> list[str]:
        """Namespaces the verifier's code relies on that changed since `install()` (kept once seen). Uses
        only what `install` bound on this object (the guard is out of the candidate's reach): no global
        or builtin the candidate could have rebound is looked up here."""
        seen, strict = self._tampered, self._strict
        if not strict:
            return seen
        at, offset, ident = self._read_version, self._offset, self._id
        for name, ns, version in strict:
            if at(ident(ns) + offset).value != version and name not in seen:
                seen.append(name)
        return seen

    def drain_notes(self) -> list[str]:
        out, self.notes = self.notes, []
        return out

    # ---------------------------------------------------------------- the audit hook

    def _hook(self, event: str, args: tuple) -> None:
        if self._busy:
            return
        if event.startswith("tritonrl."):
            self._own_event(event, args)
            return
        if not self.enforce or (event not in _WATCHED and not event.startswith("ctypes.")):
            return
        self._busy = True
        try:
            refusal = self._judge(event, args)
        finally:
            self._busy = False
        if refusal is not None:
            flag, detail = refusal
            self.record(flag, detail)
            raise PermissionError(f"not allowed in a candidate's process: {detail}")

    def _own_event(self, event: str, args: tuple) -> None:
        self._busy = True
        try:
            reporter = sys._getframe(2)  # the function that called sys.audit
            caller = reporter.f_back  # and the one that called it
            trusted = reporter.f_code.co_filename in self.trusted
            if event == EV_THREADS:
                trusted = reporter.f_code.co_filename == _REFUSAL_FILE
            elif event == EV_PAUSE and int(args[0]) > 0:
                trusted = trusted and caller is not None and caller.f_code.co_filename in self.trusted \
                    and caller.f_code.co_name in PAUSERS
        finally:
            self._busy = False
        if not trusted:
            self.record("tampering", f"{event} raised from {reporter.f_code.co_filename}")
            raise PermissionError("not allowed in a candidate's process: the verifier's own events")
        f = self.facts
        if event == EV_THREADS:
            self.record("threads", "a thread was started")
        elif event == EV_NOTE:
            if len(self.notes) < MAX_DETAILS:
                self.notes.append(str(args[0])[:300])
        elif event == EV_PAUSE:
            self.paused = max(0, self.paused + int(args[0]))
        elif not self.counting:
            return
        elif event == EV_OP:
            if not self.paused:
                f.ops[str(args[0])] += 1
        elif event == EV_LAUNCH:
            f.launches += 1
            f.kernels[str(args[0])] += 1
        elif event == EV_FOREIGN:
            f.foreign[str(args[0])] += 1
        elif event == EV_HOST_READ:
            if not self.paused:
                f.host_read += int(args[0])
        elif event == EV_HOST_MADE:
            if not self.paused:
                f.host_made += int(args[0])
        elif event == EV_BYPASS:
            if len(f.bypassed) < 8:
                f.bypassed.append(str(args[0])[:60])
        elif event == EV_HEAVY:
            if not self.paused:
                f.heavy[str(args[0])[:80]] += 1
        elif event == EV_UNORDERED:
            if len(f.unordered) < 8:
                f.unordered.append(str(args[0])[:200])

    def _judge(self, event: str, args: tuple) -> tuple[str, str] | None:
        stack = _stack(sys._getframe(1))
        if not any(filename == self.candidate_file for filename, _ in stack):
            return None  # the candidate's code is not running: the verifier's own work
        caller_file, caller_module, importing = _first_caller(stack)
        if importing and event in _IMPORTING:
            return None  # a module being loaded: the "import" event judges it
        by_candidate = caller_file == self.candidate_file
        library_module = _first_caller(stack, skip_stdlib=True)[1]
        if _within(library_module, _VERIFIER):
            return None  # the verifier's own code, called during a launch (the compile check)
        if event in _DENY:
            return _DENY[event], f"{event}{_short(args)}"
        if event.startswith("ctypes."):
            return "ctypes", f"{event}{_short(args)}"
        if event == "sys._getframe":
            if by_candidate or _within(caller_module, _FRAME_TOOLS) or not _within(caller_module, _TRANSPARENT):
                return "introspection:frames", f"sys._getframe called from {caller_module or caller_file}"
            return None
        if event == "object.__getattr__":
            name = args[1] if len(args) > 1 else ""
            if name in _FRAME_ATTRS and (by_candidate or _within(caller_module, _FRAME_TOOLS)):
                return "introspection:frames", f"the {name} attribute read"
            return None
        if event in ("object.__setattr__", "object.__delattr__"):
            target = args[0] if args else None
            if by_candidate and getattr(target, "__module__", None) != self.candidate_module:
                return "monkeypatch", f"{event} on {_describe(target)}.{args[1] if len(args) > 1 else '?'}"
            return None
        if event in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
            # Triton's CUDA backend runs ptxas at a kernel's first launch: a compiler tool, asked for by
            # Triton itself (past the standard library's own frames), is the one process allowed
            exe = args[0] if args and args[0] else (args[1][0] if len(args) > 1 and args[1] else "")
            exe = os.path.basename(os.fsdecode(exe) if isinstance(exe, (str, bytes)) else str(exe))
            library_file, library_module = _first_caller(stack, skip_stdlib=True)[:2]
            if library_file != self.candidate_file and _within(library_module, ("triton",)) and \
                    exe.split("-", 1)[0] in _COMPILER_TOOLS:  # ptxas, ptxas-blackwell, ...
                return None
            if library_file != self.candidate_file and _within(library_module, ("triton", "torch")) and \
                    exe in _PROBE_TOOLS:
                return None
            argv = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else []
            shown = " ".join(os.fsdecode(a) if isinstance(a, (str, bytes)) else str(a) for a in list(argv)[:4])[:160]
            return "process", f"{event}: {exe or '?'} ({shown}; asked by {library_module or library_file or '?'})"
        if event in ("os.listdir", "os.scandir"):
            path = os.path.normpath(str(args[0])) if args and args[0] is not None else ""
            if _proc_part(path) in ("fd", "fdinfo"):
                return "introspection:descriptors", f"{event}({path})"
            return None
        if event == "open":
            path = os.path.normpath(str(args[0])) if args and isinstance(args[0], (str, bytes)) else ""
            if path in ("/dev/mem", "/dev/kmem", "/dev/port") or _proc_part(path) in ("mem", "pagemap", "fd"):
                return "introspection:memory", f"open({path})"
            return None
        if event == "mmap.__new__":
            return ("introspection:memory", "mmap by the candidate") if by_candidate else None
        if event == "import":
            name = str(args[0]) if args else ""
            if by_candidate and self.denied_import is not None and self.denied_import(name) is not None:
                return "forbidden_import", f"import of {name}"
            return None
        if event in ("compile", "exec", "marshal.loads", "marshal.load"):
            return ("dynamic_code", f"{event} called by the candidate") if by_candidate else None
        return None


_MISSING = object()


def _version_reader() -> tuple[Callable[[int], Any], int] | None:
    """(c_uint64.from_address, offset of a dict's version tag) where this interpreter keeps one that
    every write bumps (CPython 3.8 to 3.13; checked on a dict of our own), else None."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 14):
        return None
    try:
        import ctypes

        at, offset = ctypes.c_uint64.from_address, 3 * ctypes.sizeof(ctypes.c_ssize_t)  # refcnt, type, ma_used
        probe: dict[str, int] = {}
        before = at(id(probe) + offset).value
        probe["x"] = 1
        after = at(id(probe) + offset).value
        probe["x"] = 2
        return (at, offset) if before != after != at(id(probe) + offset).value else None
    except Exception:
        return None


def _strict_namespaces() -> list[tuple[str, dict]]:
    """The verifier's own modules and the standard library modules (and classes' modules) they refer to:
    the dicts its code in this process looks globals up in. None of them changes once the candidate
    runs, unless the candidate writes into it. Packages are left out (importing a submodule writes it
    into its package's dict); third-party modules are too (torch and triton set lazy globals)."""
    own = [(n, m) for n, m in list(sys.modules.items())
           if m is not None and n.startswith("tritonrl_lib.") and not hasattr(m, "__path__")]
    out = {n: vars(m) for n, m in own}
    for _, module in own:
        for value in list(vars(module).values()):
            ref = value if isinstance(value, types.ModuleType) else sys.modules.get(
                getattr(value, "__module__", None) or "") if callable(value) else None
            name = getattr(ref, "__name__", None)
            if isinstance(ref, types.ModuleType) and name not in out and _is_stdlib(ref) and \
                    not hasattr(ref, "__path__") and name not in _SELF_WRITING:
                out[name] = vars(ref)
    return sorted(out.items())


# standard library modules that write their own globals in ordinary use (warnings.catch_warnings swaps
# warnings.filters and back, tempfile.gettempdir sets tempfile.tempdir, shutil turns its sendfile path off)
_SELF_WRITING = frozenset({"warnings", "tempfile", "shutil"})


def _is_stdlib(module: types.ModuleType) -> bool:
    path = getattr(module, "__file__", None)
    if path is None:
        return module.__name__ in sys.builtin_module_names
    return path.startswith(_STDLIB_DIR) and "site-packages" not in path and "dist-packages" not in path


def _namespace(obj: Any) -> dict[str, Any] | None:
    try:
        ns = obj.__dict__
    except AttributeError:
        return None
    return ns if isinstance(ns, dict) else dict(ns)


def _is_behaviour(value: Any) -> bool:
    """Callables and classes: what a patch replaces to change behaviour (plain data changes legitimately)."""
    if isinstance(value, types.ModuleType):
        return False
    return isinstance(value, (type, staticmethod, classmethod, property)) or callable(value)


def _stack(frame: Any) -> list[tuple[str, str]]:
    out = []
    while frame is not None:
        out.append((frame.f_code.co_filename, str(frame.f_globals.get("__name__", ""))))
        frame = frame.f_back
    return out


def _first_caller(stack: list[tuple[str, str]], skip_stdlib: bool = False) -> tuple[str, str, bool]:
    """(file, module) of the frame that asked for the audited action, past this file and the import
    machinery (and with `skip_stdlib`, the standard library's own frames: subprocess, tempfile, ...), and
    whether the import machinery was in between (a module being loaded)."""
    importing = False
    for filename, module in stack:
        if filename == __file__ or (skip_stdlib and filename.startswith(_STDLIB)):
            continue
        if filename.startswith("<frozen importlib"):
            importing = True
            continue
        return filename, module, importing
    return "", "", importing


_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep
_STDLIB = tuple({_STDLIB_DIR, "<frozen"})


def _within(module: str, roots: tuple[str, ...]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in roots)


def _describe(obj: Any) -> str:
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or type(obj).__name__
    module = getattr(obj, "__module__", None)
    return f"{module}.{name}" if module else str(name)


def _short(args: tuple) -> str:
    text = repr(args)
    return text if len(text) <= 120 else text[:117] + "..."


def _proc_part(path: str) -> str:
    """'mem', 'fd', ... for /proc/<pid>/mem, /proc/self/task/<tid>/fd/3, ...; '' for anything else."""
    parts = path.split("/")
    if len(parts) < 4 or parts[1] != "proc":
        return ""
    rest = parts[3:]
    if rest and rest[0] == "task" and len(rest) >= 3:
        rest = rest[2:]
    return rest[0] if rest else ""


def _deny_threads() -> None:
    """Replace every function Python starts a thread with by a refusal whose globals hold nothing but
    the exception it raises and `sys.audit` (to tell the guard): no route from it to the originals or to
    the verifier."""
    import _thread
    import threading

    code = compile("def refuse(*args, **kwargs):\n"
                   "    audit('tritonrl.threads')\n"
                   "    raise RuntimeError(\"starting a thread is not allowed in a candidate's process (the \"\n"
                   "                       \"verifier's op census watches the calling thread only)\")\n",
                   _REFUSAL_FILE, "exec")
    scope: dict[str, Any] = {"__builtins__": {"RuntimeError": RuntimeError}, "audit": sys.audit}
    exec(code, scope)
    refuse = scope["refuse"]
    for module, names in ((_thread, ("start_new_thread", "start_new", "start_joinable_thread")),
                          (threading, ("_start_new_thread", "_start_joinable_thread"))):
        for name in names:
            if hasattr(module, name):
                setattr(module, name, refuse)
