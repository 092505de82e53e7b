"""Static stage of the verifier: read a candidate's AST and reject it before anything runs.

Nothing in the candidate is executed or imported here. The checks, in the order a reason is chosen:

1. failures (not cheats, no flag): the code does not parse (`static:syntax_error`), defines no
   `class ModelNew` (`static:no_modelnew`) or no `forward` in it (`static:no_forward`), has no
   `@triton.jit` / `@triton.autotune` function (`static:no_triton_kernel`);
2. cheat flags (any flag means reward 0), each with the line that raised it: try/except fallback,
   the reference `Model` used, PyTorch compute the policy forbids, forbidden imports (and modules
   or functions reached through allowed ones under any name), file access, threads, dynamic code,
   introspection, monkeypatching (timers and libraries patched through any alias, tensor
   subclasses and proxies), host compute (numpy, Python loops over tensor elements, tensors
   rebuilt from host data);
3. `static:kernel_unreachable`: no Triton kernel is launched from code `ModelNew.forward` can
   reach (methods via self, module-level launchers, helper classes, transitively).

Security checks (imports, chains, files, dynamic code, patching) cover the whole module; compute
and host checks cover the code reachable from `forward` (`__init__` may use PyTorch freely to
build weights), never the bodies of Triton kernels. Plain tensor operators (`a + b`) cannot be
typed statically and are left to the runtime op census; `a @ b` is flagged here. The policy
tables come from `policy.py`, so static and runtime judge PyTorch names the same way.

The parts: the rules (rules.py: which imports, calls and names are refused), what names refer to
(names.py: aliases, re-bindings, constant getattr), what a chain of attributes really reaches
(resolve.py: the allowed modules' real objects, walked in this trusted process, cached), the
module's facts (facts.py: definitions, kernels, what ModelNew's attributes hold), the module-wide
security checks (security.py) and patching rules (patching.py), and the reachability pass from
`forward` (reach.py) with its host-compute vocabulary (host.py).

Cost: about 7 ms per candidate (mean over the 198 candidate files of the built-in suite's
solutions, benchmarks/kernelbench_solutions and tests/verifier_cases, on this project's shared
2-core CPU); the first check in a process also imports triton if nothing has (~0.2 s), and each
newly seen attribute chain is resolved once per process.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass, field
from typing import Iterable

from .. import policy as pol
from .. import reasons as R
from ..precision import launched_precision
from .facts import Finding, ModuleFacts, class_fingerprint
from .reach import Reach
from .rules import import_verdict
from .security import check_module

__all__ = ["static_check", "StaticReport", "Finding", "import_verdict"]


@dataclass
class StaticReport:
    ok: bool
    reason: str  # "ok" or "static:<what>" (reasons.py)
    detail: str  # one line per finding, each naming its line
    flags: list[str]  # cheat flags, deduplicated, in order of first appearance
    kernels: list[str]  # every @triton.jit / @triton.autotune function, in source order
    launched: list[str] = field(default_factory=list)  # kernels launched from forward-reachable code
    findings: list[Finding] = field(default_factory=list)
    precision: str = ""  # of the launched kernels' dots (precision.launched_precision): "tf32", "ieee" or ""


def _reference_classes(reference_source: str | None) -> tuple[set[str], dict[str, str]]:
    names = {"Model"}
    prints: dict[str, str] = {}
    if not reference_source:
        return names, prints
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = ast.parse(reference_source)
    except (SyntaxError, ValueError):
        return names, prints
    for stmt in ast.walk(ref):
        if isinstance(stmt, ast.ClassDef):
            names.add(stmt.name)
            prints[stmt.name] = class_fingerprint(stmt)
    return names, prints


def _report(findings: list[Finding], kernels: list[str], launched: list[str],
            failure: Finding | None, precision: str = "") -> StaticReport:
    findings = sorted(findings, key=lambda f: (f.line, f.reason))
    flags = list(dict.fromkeys(f.flag for f in findings if f.flag))
    all_items = ([failure] if failure else []) + findings
    detail = "\n".join(f"line {f.line}: {f.message}" if f.line else f.message for f in all_items)
    if failure is not None:
        reason = failure.reason
    elif flags:
        reason = next(f.reason for f in findings if f.flag)
    else:
        reason = R.OK
    if reason == R.OK:
        detail = (f"ok: {len(kernels)} Triton kernel(s) ({', '.join(kernels)}); launched from "
                  f"forward: {', '.join(launched)}")
    return StaticReport(ok=reason == R.OK, reason=reason, detail=detail, flags=flags,
                        kernels=kernels, launched=launched, findings=all_items, precision=precision)


def static_check(code: str, policy: str, reference_source: str | None = None,
                 extra_heavy_ops: Iterable[str] = ()) -> StaticReport:
    """Judge a candidate module without running it. `policy` is "strict" or "fusion" (resolve
    "auto" first with `policy.resolve_policy`); `reference_source` is the task's module, whose
    class names the candidate must not use; `extra_heavy_ops` extends fusion's heavy-op set."""
    if policy not in pol.POLICIES:
        raise ValueError(f"static_check: unknown policy {policy!r}; pass one of {pol.POLICIES} "
                         "(resolve 'auto' with tritonrl_lib.verify.policy.resolve_policy)")
    extra = frozenset(extra_heavy_ops)
    if not isinstance(code, str) or not code.strip():
        return _report([], [], [], Finding(R.static("syntax_error"), 0, "empty module: no code to check"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except SyntaxError as e:
        msg = f"{type(e).__name__}: {e.msg}"
        return _report([], [], [], Finding(R.static("syntax_error"), e.lineno or 0, msg))
    except (ValueError, RecursionError, MemoryError) as e:
        return _report([], [], [], Finding(R.static("syntax_error"), 0, f"cannot parse: {e}"))

    ref_names, ref_prints = _reference_classes(reference_source)
    try:
        an = ModuleFacts(tree, policy, ref_names, ref_prints, extra)
        check_module(an)
        kernels = list(an.kernels)
        model = an.model_class()
        failure = None
        launched: list[str] = []
        precision = ""
        if model is None:
            assigned = any(isinstance(n, ast.Name) and n.id == "ModelNew" and isinstance(n.ctx, ast.Store)
                           for n in ast.walk(tree))
            how = (" (it is assigned, not defined: write `class ModelNew(nn.Module):`)" if assigned
                   else ": the solution must define `class ModelNew(nn.Module)` at module level")
            failure = Finding(R.static("no_modelnew"), 0, f"no class ModelNew{how}")
        elif "forward" not in an.methods(model):
            failure = Finding(R.static("no_forward"), model.lineno,
                              "ModelNew has no `def forward(self, ...)`")
        elif not kernels:
            failure = Finding(R.static("no_triton_kernel"), 0,
                              "no function decorated with @triton.jit or @triton.autotune: the "
                              "solution must implement its compute as Triton kernels")
        if model is not None and "forward" in an.methods(model):
            reach = Reach(an, model)
            reach.run()
            launched = reach.launched
            precision = launched_precision(an, launched)  # computed here once, carried in the job
            if failure is None and not launched and not any(f.flag for f in an.findings):
                failure = Finding(
                    R.static("kernel_unreachable"), an.methods(model)["forward"].lineno,
                    f"kernel(s) {', '.join(kernels)} defined but none is launched from code "
                    f"ModelNew.forward reaches ({', '.join(reach.functions)}); launch one with "
                    "`kernel[grid](...)`")
            elif failure is None and not launched:
                an.add(R.static("kernel_unreachable"), an.methods(model)["forward"].lineno,
                       f"no Triton kernel is launched from code ModelNew.forward reaches "
                       f"({', '.join(reach.functions)})")
        return _report(an.findings, kernels, launched, failure, precision)
    except RecursionError:
        return _report([], [], [], Finding(R.static("syntax_error"), 0,
                                           "module too deeply nested to analyse"))


def candidate_precision(code: str) -> str:
    """The precision `static_check` finds (its `precision`), for a job made without the pool's static
    check; "" when the module does not parse or has no forward."""
    try:
        return static_check(code, "fusion").precision  # launches do not depend on the policy
    except (ValueError, RecursionError, MemoryError):
        return ""
