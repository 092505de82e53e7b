"""What an attribute chain of a candidate really reaches, judged in the trusted process.

A candidate can reach a module the import rules deny as an attribute of one they allow
(`logging.sys`, `enum.bltns` is builtins, `torch.cuda.tunable.mp` is multiprocessing,
`random._os`), or a denied function under another name (`dataclasses.builtins.exec`). Names alone
cannot tell: the check follows the chain through the real objects. It imports only modules the
rules allow (stdlib, torch, triton, numpy) and walks module objects only, reading each attribute
from the module's `__dict__`: no `getattr`, so no lazy module `__getattr__`, property or other
code of the module runs. An attribute missing from the dict may be an allowed submodule not yet
imported: it is imported (never a dunder name such as `__main__`), within a time budget per check;
past the budget the rest of the chain is judged by its names. Through a class the walk reads the
namespaces of its MRO the same way; a function, an instance or anything else ends it.

Resolved chains are cached for the life of the process (and attributes that are no importable
submodule), so after the first candidate a chain costs a dict lookup.
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import sys
import time
import types
import warnings
from dataclasses import dataclass

from .rules import ALLOWED_IMPORTS, ALLOWED_INSIDE_DENIED, DENIED_BUILTINS, import_verdict

MAX_DEPTH = 16  # attributes followed in one chain
IMPORT_BUDGET_S = 2.0  # seconds of imports one static check may spend

MISSING = object()  # an attribute the walk could not resolve
_OVER_BUDGET = object()  # an import skipped for time: not cached, judged by name this time

_DENIED_BUILTIN_IDS = {id(getattr(builtins, n)): n for n in DENIED_BUILTINS if hasattr(builtins, n)}
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                   types.WrapperDescriptorType, types.ClassMethodDescriptorType)

# Shared by every check in the process: (module's real name, attribute) pairs that are not an
# importable submodule, and the chains that resolved to the end or to something not a module.
# A chain that stopped at an attribute the module lacks is walked again next time (the module
# may have gained it since), so a verdict never rests on a stale miss.
_NOT_SUBMODULES: set[tuple[str, str]] = set()
_CHAINS: dict[str, tuple[list[tuple[str, object]], list[str]]] = {}
_STARS: dict[str, list[str]] = {}


@dataclass(frozen=True)
class Reached:
    """A chain that reaches something the rules refuse."""
    written: str  # the chain as the candidate wrote it, up to the step that reached it
    target: str  # what that step really is ("sys", "builtins.exec", "posix.system")
    reason: str  # static reason (reasons.py)
    why: str


def is_module(obj: object) -> bool:
    return issubclass(type(obj), types.ModuleType)


def module_name(mod: types.ModuleType) -> str:
    name = mod.__dict__.get("__name__")
    return name if isinstance(name, str) else ""


def _denied_explicitly(name: str) -> tuple[str, str] | None:
    """The DENIED_IMPORTS entry for `name` (not the generic "not on the list")."""
    verdict = import_verdict(name)
    if verdict is None or verdict[1].startswith("not on the list"):
        return None
    return verdict


def is_class(obj: object) -> bool:
    return issubclass(type(obj), type)


def home(obj: object) -> tuple[str, str] | None:
    """(module, qualname) a function or class is defined under, read without running its code."""
    try:
        if is_class(obj):
            mod = type.__dict__["__dict__"].__get__(obj).get("__module__")
            name = type.__dict__["__qualname__"].__get__(obj)
        elif issubclass(type(obj), _FUNCTION_TYPES):
            mod, name = obj.__module__, obj.__qualname__
        else:
            return None
    except (AttributeError, KeyError, TypeError):
        return None
    return (mod, name) if isinstance(mod, str) and isinstance(name, str) else None


def home_name(obj: object) -> str | None:
    """`module.qualname` of a function or class, else None."""
    where = home(obj)
    return f"{where[0]}.{where[1]}" if where else None


def judge_object(obj: object) -> tuple[str, str, str] | None:
    """(target, reason, why) when `obj` is something a solution may not hold: a module outside the
    allow-list (by its real name), a denied builtin, or a function/class of a denied module."""
    if is_module(obj):
        real = module_name(obj)
        verdict = import_verdict(real) if real else None
        return (real, *verdict) if verdict else None
    denied_builtin = _DENIED_BUILTIN_IDS.get(id(obj))
    if denied_builtin is not None and obj is getattr(builtins, denied_builtin, None):
        return (f"builtins.{denied_builtin}", *DENIED_BUILTINS[denied_builtin])
    where = home(obj)
    if where:
        mod, name = where
        if mod != "builtins" and mod.split(".")[0] not in ALLOWED_IMPORTS:
            verdict = _denied_explicitly(mod)
            if verdict:
                return (f"{mod}.{name}", *verdict)
    return None


class Resolver:
    """Resolves chains for one static check (its import budget is per check)."""

    def __init__(self, import_budget_s: float = IMPORT_BUDGET_S):
        self.budget_left = import_budget_s
        self._skipped = False  # an import was skipped for time during the current walk

    # ------------------------------------------------------------------ modules and attributes

    def _import(self, name: str) -> object:
        mod = sys.modules.get(name)
        if mod is not None:
            return mod if is_module(mod) else MISSING
        if import_verdict(name) is not None:
            return MISSING
        if self.budget_left <= 0:
            return _OVER_BUDGET
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if "." in name and importlib.util.find_spec(name) is None:
                    return MISSING
                mod = importlib.import_module(name)
        except Exception:  # an allowed module that fails to import is simply not reached
            return MISSING
        finally:
            self.budget_left -= time.perf_counter() - start
        return mod if is_module(mod) else MISSING

    def root(self, name: str) -> object:
        if name not in ALLOWED_IMPORTS or import_verdict(name) is not None:
            return MISSING
        mod = self._import(name)
        return MISSING if mod is _OVER_BUDGET else mod

    def attr(self, mod: types.ModuleType, attr: str) -> object:
        value = mod.__dict__.get(attr, MISSING)
        if value is not MISSING:
            return value
        real = module_name(mod)
        key = (real, attr)
        if key in _NOT_SUBMODULES or (attr.startswith("__") and attr.endswith("__")) or not real \
                or "__path__" not in mod.__dict__:
            return MISSING
        value = self._import(f"{real}.{attr}")
        if value is _OVER_BUDGET:
            self._skipped = True
            return MISSING  # a later check with budget left resolves it
        if value is MISSING:
            _NOT_SUBMODULES.add(key)
        return value

    # ------------------------------------------------------------------ chains

    def walk(self, qualified: str) -> tuple[list[tuple[str, object]], list[str]]:
        """The steps of `a.b.c` that resolve, each (written prefix, object), and the parts left
        once the walk stopped (at something that is not a module, or could not be resolved)."""
        cached = _CHAINS.get(qualified)
        if cached is not None:
            return cached
        parts = qualified.split(".")
        self._skipped = False
        obj = self.root(parts[0])
        if obj is MISSING:
            return [], parts
        steps = [(parts[0], obj)]
        i = 1
        while i < len(parts) and i <= MAX_DEPTH and (is_module(obj) or is_class(obj)):
            value = self.attr(obj, parts[i]) if is_module(obj) else _class_attr(obj, parts[i])
            if value is MISSING:
                break
            obj = value
            steps.append((".".join(parts[: i + 1]), obj))
            i += 1
        result = (steps, parts[i:])
        stopped_at_a_miss = i < len(parts) and i <= MAX_DEPTH and (is_module(obj) or is_class(obj))
        if len(_CHAINS) < 200_000 and not self._skipped and not stopped_at_a_miss:
            _CHAINS[qualified] = result
        return result

    def judge(self, qualified: str) -> Reached | None:
        """The first step of the chain that reaches a module or function the rules refuse."""
        steps, _ = self.walk(qualified)
        parts = qualified.split(".")
        # an allowed exception inside a denied package (triton.runtime.driver) clears its prefix
        cleared = max((i for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in ALLOWED_INSIDE_DENIED),
                      default=0)
        for n, (written, obj) in enumerate(steps[1:], 2):
            if n <= cleared:
                continue
            hit = judge_object(obj)
            if hit is not None:
                return Reached(written, *hit)
        return None

    def canonical(self, qualified: str) -> str:
        """The chain with its module prefix written by the module's real name
        (`torch.functional.F.relu` -> `torch.nn.functional.relu`)."""
        steps, rest = self.walk(qualified)
        last_module = None
        consumed = 0
        for n, (_, obj) in enumerate(steps):
            if is_module(obj):
                last_module, consumed = obj, n + 1
        if last_module is None:
            return qualified
        parts = qualified.split(".")
        real = module_name(last_module) or ".".join(parts[:consumed])
        return ".".join([real, *parts[consumed:]])

    def obj(self, qualified: str) -> object:
        """The object the whole chain names, or MISSING."""
        steps, rest = self.walk(qualified)
        return MISSING if rest or not steps else steps[-1][1]

    def star_exports(self, module: str) -> list[str]:
        """The names `from module import *` binds (its `__all__`, else its public names)."""
        cached = _STARS.get(module)
        if cached is not None:
            return cached
        mod = self.obj(module)
        names: list[str] = []
        if is_module(mod):
            exported = mod.__dict__.get("__all__")
            if isinstance(exported, (list, tuple)) and all(isinstance(n, str) for n in exported):
                names = list(exported)
            else:
                names = [n for n in mod.__dict__ if isinstance(n, str) and not n.startswith("_")]
            _STARS[module] = names
        return names


def _class_attr(cls: type, attr: str) -> object:
    """`cls.attr` from the class's own namespace or its bases' (a dict read: no descriptor, property
    or metaclass code runs; a staticmethod/classmethod gives its function); else MISSING."""
    if attr.startswith("__") and attr.endswith("__"):
        return MISSING  # dunders are judged by name
    try:
        for base in type.__dict__["__mro__"].__get__(cls):
            namespace = type.__dict__["__dict__"].__get__(base)
            if attr in namespace:
                value = namespace[attr]
                if isinstance(value, (staticmethod, classmethod)):
                    value = value.__func__
                return value
    except (TypeError, KeyError):
        pass
    return MISSING
