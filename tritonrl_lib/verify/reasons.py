"""Every reason a Verdict can give, in one catalogue: where in the funnel it stops a candidate, what
it means, whether a verdict with it may be cached, and which part of the verifier gives it.

A reason is a name (`timeout`) or a family's name, a colon and a suffix (`static:syntax_error`,
`mismatch:scaled`, `crash_signal:SIGSEGV`, `cheat:pytorch_compute:aten.mm.default`,
`timing_failed:timeout`). Code that gives a reason names it through this module: the constants
below, and for families the builders `static`, `mismatch`, `cheat`, `crash_signal` and
`timing_failed`, which refuse a member that is not listed (STATIC_CHECKS, INPUT_SETS,
RUNTIME_FLAGS). A
verdict's reason passes `check` before it leaves the verifier, which refuses one that is not here:
an unknown reason is a bug for the tests to catch (tests/test_verify_reasons.py), never a verdict.
Readers (the verdict cache, metrics) ask `may_cache` and `head`.

The stages are those of verdict.STAGES: the ones at which a verdict with the reason did not get
through (its `stage` is the one before). Cacheable is False for a reason that depends on the
machine's load or health rather than on the candidate (the cache would keep an accident).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class UnknownReason(ValueError):
    """A reason that is not in the catalogue: a bug in the verifier, never the candidate's doing."""


@dataclass(frozen=True)
class Reason:
    name: str  # as written in a verdict; a family's name is written with a suffix: "mismatch:<suffix>"
    stages: tuple[str, ...]  # funnel stages a verdict with it did not get through (() for ok)
    meaning: str  # one line, for people
    cacheable: bool  # a verdict with it may be kept in the verdict cache (cache.py)
    made_by: tuple[str, ...]  # the modules that give it (paths under verify/ without .py; "static" is the package)
    suffix: str = ""  # for a family: what follows the colon, as docs write it ("<input set>")
    uncached_suffixes: frozenset[str] = frozenset()  # members of a cacheable family that are not
    side: str = "candidate"  # whose doing: "candidate", "verifier" (its own limits or failures: a bug or a
    # machine too small, never the candidate's verdict) or "task" (the reference itself cannot be judged)


CATALOGUE: dict[str, Reason] = {}

_AT_EXTRACT, _AT_STATIC, _AT_COMPILE, _AT_TIMING = ("extract",), ("static",), ("compile",), ("timing",)
_AT_OUTPUTS = ("tiny", "full")
_AT_RUN = ("compile", "tiny", "full")  # whatever the candidate's process was running (timing: timing_failed)


def _reason(name: str, stages: tuple[str, ...], meaning: str, made_by: str, cacheable: bool = True,
            suffix: str = "", uncached_suffixes: frozenset[str] = frozenset(), side: str = "candidate") -> str:
    if name in CATALOGUE:
        raise ValueError(f"reason {name!r} is in the catalogue twice")
    if side not in ("candidate", "verifier", "task"):
        raise ValueError(f"reason {name!r}: side must be candidate, verifier or task")
    CATALOGUE[name] = Reason(name, stages, meaning, cacheable, tuple(made_by.split()), suffix, uncached_suffixes,
                             side)
    return name


# --------------------------------------------------------------------------- passed

OK = _reason("ok", (), "passed every stage it ran (timing too, on a GPU)", "worker/judge")

# --------------------------------------------------------------------------- extraction (tritonrl_lib/verify/extract.py)

EMPTY_COMPLETION = _reason("empty_completion", _AT_EXTRACT, "the completion is empty, or only whitespace and "
                           "template tokens", "extract")
NO_CODE = _reason("no_code", _AT_EXTRACT, "the answer holds no code block or module", "extract pool")
THINK_ONLY = _reason("think_only", _AT_EXTRACT, "code appears only inside the reasoning (<think>) section", "extract")

# --------------------------------------------------------------------------- the static check (static/)

STATIC_CHECKS = {  # static:<what>, and what the static check found
    "syntax_error": "the module is empty, does not parse, or is nested too deeply to analyse",
    "no_modelnew": "no `class ModelNew` at module level",
    "no_forward": "ModelNew has no `def forward`",
    "no_triton_kernel": "no function decorated with @triton.jit or @triton.autotune",
    "kernel_unreachable": "no Triton kernel is launched from code ModelNew.forward reaches",
    "try_except_fallback": "a try statement or contextlib.suppress: a fallback can hide a failing kernel",
    "forbidden_import": "imports or reaches a module a solution may not use (OS, files, network, internals, "
                        "compilers, other kernel libraries)",
    "threads": "starts or imports threads or processes",
    "file_access": "reads or writes files",
    "dynamic_code": "eval, exec, __import__, attributes looked up by string, classes built dynamically",
    "introspection": "dunder attributes or names, private torch / triton internals",
    "monkeypatch": "patches a module, a class, forward, dispatch, global PyTorch state or the RNG",
    "reference_model_used": "uses the task's reference class (subclassed, instantiated or called)",
    "pytorch_compute": "PyTorch compute reachable from forward that the policy leaves to Triton",
    "host_compute": "compute moved to the host (numpy, .tolist(), .numpy()) in code forward reaches",
}
STATIC = _reason("static", _AT_STATIC, "the static check refused the module (STATIC_CHECKS says what each "
                 "<what> means)", "static", suffix="<what>")

# --------------------------------------------------------------------------- the candidate's process (candidate/context.py)

COMPILE_ERROR = _reason("compile_error", _AT_COMPILE, "the module does not import, ModelNew cannot be built, or "
                        "Triton rejects a kernel or launch (at any stage: compilation/errors.py)",
                        "candidate/context candidate/candidate_phase worker/judge")
RUNTIME_ERROR = _reason("runtime_error", _AT_OUTPUTS, "forward raised (or the candidate's process sent an "
                        "error it may not give)", "candidate/context worker/judge")
EXIT_CALLED = _reason("exit_called", _AT_RUN, "the candidate raised SystemExit", "candidate/context")
OUT_OF_MEMORY = _reason("out_of_memory", _AT_RUN, "MemoryError or CUDA out of memory in the candidate's process",
                        "candidate/context", cacheable=False)
CUDA_ERROR = _reason("cuda_error", _AT_RUN, "a CUDA error: illegal memory access, device-side assert, ...",
                     "candidate/context")
# what the candidate's process may report of its own failures; anything else it sends is runtime_error
CHILD_REASONS = frozenset({COMPILE_ERROR, RUNTIME_ERROR, EXIT_CALLED, OUT_OF_MEMORY, CUDA_ERROR})

# --------------------------------------------------------------------------- outputs (compare.py, judge.py)

WRONG_OUTPUT_TYPE = _reason("wrong_output_type", _AT_OUTPUTS, "forward returned something other than a tensor",
                            "worker/compare")
DEVICE_MISMATCH = _reason("device_mismatch", _AT_OUTPUTS, "an output on another device than the reference's",
                          "worker/compare")
DTYPE_MISMATCH = _reason("dtype_mismatch", _AT_OUTPUTS, "an output of another dtype than the reference's", "worker/compare")
SHAPE_MISMATCH = _reason("shape_mismatch", _AT_OUTPUTS, "an output of another shape than the reference's, or "
                         "another number of outputs", "worker/compare worker/judge")
NAN_OUTPUT = _reason("nan_output", _AT_OUTPUTS, "NaN where the reference is finite", "worker/compare")
MISMATCH = _reason("mismatch", _AT_OUTPUTS, "values beyond the tolerances on that input set (an output's own "
                   "reason in Verdict.errors is the bare name)", "worker/compare worker/judge", suffix="<input set>")
CHEAT = _reason("cheat", _AT_OUTPUTS, "a runtime check found a cheat (RUNTIME_FLAGS); reward 0", "worker/judge",
                suffix="<flag>")

# --------------------------------------------------------------------------- the sandbox and the worker

REFERENCE_ERROR = _reason("reference_error", _AT_COMPILE, "the task's reference failed or gave no outputs for the "
                          "original inputs: the candidate never ran", "worker/judge", side="task")
REFERENCE_RANDOM = _reason("reference_random", _AT_COMPILE, "the task's reference gives other outputs for the same "
                           "inputs on every run, even in eval mode (random ops in forward): nothing to compare against",
                           "worker/judge", side="task")
TASK_TOO_LARGE = _reason("task_too_large", _AT_COMPILE, "this machine is too small for the task: its input sets "
                         "and reference need more GPU or host memory than it has (said up front, with the sizes)",
                         "worker/job", cacheable=False, side="verifier")
REFERENCE_TIMEOUT = _reason("reference_timeout", _AT_COMPILE, "the reference phase (drawing inputs, running the "
                            "reference on every input set) did not finish within its own budget",
                            "sandbox/run", cacheable=False, side="verifier")
SETUP_TIMEOUT = _reason("setup_timeout", _AT_COMPILE, "the candidate's process did not get set up (CUDA context) "
                        "within its own budget: the machine's, not the candidate's", "sandbox/run", cacheable=False,
                        side="verifier")
PROTOCOL_ERROR = _reason("protocol_error", _AT_RUN, "the candidate's process broke the protocol: a malformed or "
                         "oversized message, out of order, or it ended without passing every stage",
                         "worker/judge sandbox/run")
INTERNAL_ERROR = _reason("internal_error", _AT_RUN, "the verifier's own code failed (harness, worker, or no "
                         "verdict came back); the error names the exception, its message and where",
                         "worker/judge worker/main pool worker/job", cacheable=False, side="verifier")
TIMEOUT = _reason("timeout", _AT_RUN, "the candidate's own work (CPU time after the reference phase) passed "
                  "verify.timeout_s, or it sat idle past the wall-clock backstop",
                  "sandbox/run", cacheable=False)
MEMORY_LIMIT = _reason("memory_limit", _AT_RUN, "the candidate's processes together held more resident memory "
                       "than verify.memory_limit_mb", "sandbox/run", cacheable=False)
FORK_FLOOD = _reason("fork_flood", _AT_RUN, "more live processes than the limit, or processes left after the "
                     "candidate's process exited (also a cheat flag)", "sandbox/run worker/judge")
POOL_GONE = _reason("pool_gone", _AT_RUN, "the pool closed its connection while the candidate ran", "sandbox/run",
                    cacheable=False, side="verifier")
PROCESS_EXIT = _reason("process_exit", _AT_RUN, "the candidate's process exited (or vanished) without a result",
                       "worker/judge")
CRASH_SIGNAL = _reason("crash_signal", _AT_RUN, "the candidate's process was killed by a signal (SIGKILL is "
                       "often the machine's: not cached)", "worker/judge", suffix="<SIG>",
                       uncached_suffixes=frozenset({"SIGKILL"}))
WORKER_LOST = _reason("worker_lost", _AT_RUN, "the worker died or went silent; it was replaced", "pool",
                      cacheable=False, side="verifier")
TIMING_FAILED = _reason("timing_failed", _AT_TIMING, "correct, but timing failed for <reason>: no speed number",
                        "worker/judge", cacheable=False, suffix="<reason>")

# --------------------------------------------------------------------------- the families' members

# the input sets a mismatch names: tiny, then variations.VARIATION_ORDER ("dtype" is written dtype:<half dtype>),
# and "timed": an output of a timed call (fresh inputs, checked like the full stage's)
INPUT_SETS = ("tiny", "original", "range", "offset", "seed", "larger", "resized", "dtype", "timed")

# the cheat flags the judge raises at run time (written `cheat:<flag>`; some carry `:<what>`)
FOREIGN_KERNEL = "foreign_kernel"  # :<kernel> forward launched a Triton kernel defined outside the solution
NO_TRITON_LAUNCH = "no_triton_launch"  # forward launched no Triton kernel on an input set
PYTORCH_COMPUTE = "pytorch_compute"  # :<aten op> forward ran an op the policy leaves to Triton
INPUT_MUTATED = "input_mutated"  # forward changed its inputs in place
CACHED_OUTPUT = "cached_output"  # bit-identical outputs for two input sets whose reference outputs differ
HOST_COMPUTE = "host_compute"  # forward read tensors into Python or built outputs from Python/numpy data
NOT_PLAIN_OUTPUT = "not_plain_output"  # an output is a tensor subclass or lives in memory torch did not allocate
CENSUS_BYPASSED = "census_bypassed"  # forward ran with the op census switched off, paused, or beside it
MONKEYPATCH = "monkeypatch"  # :<what> a function or class of torch, triton, time, builtins or the verifier replaced
GLOBAL_STATE = "global_state"  # :<what> PyTorch's global settings changed (TF32, SDPA backends, cuDNN, threads, ...)
# the guard's refusals (guard.py): the candidate's process tried what only an attack needs
COMPUTE_WHILE_LOADING = "compute_while_loading"  # aten compute while the reference's weights were loaded
GUARD_FLAGS = frozenset({"threads", "process", "ctypes", "introspection", "network", "environment",
                         "dynamic_code", "forbidden_import", "tampering", COMPUTE_WHILE_LOADING})
TIMED_OUTPUT = "timed_output_wrong"  # an output of a timed call was wrong on its (never seen before) inputs
UNORDERED_STREAM = "unordered_stream"  # GPU work not ordered with the caller's stream (a race; before the timer's start)
HEAVY_OP_DTYPE = "heavy_op_dtype"  # :<family>_<dtypes> a GEMM/convolution kept in PyTorch on other operand dtypes
RUNTIME_FLAGS = frozenset({FOREIGN_KERNEL, NO_TRITON_LAUNCH, PYTORCH_COMPUTE, INPUT_MUTATED, CACHED_OUTPUT,
                           HOST_COMPUTE, NOT_PLAIN_OUTPUT, CENSUS_BYPASSED, MONKEYPATCH, GLOBAL_STATE, TIMED_OUTPUT,
                           UNORDERED_STREAM, HEAVY_OP_DTYPE, *GUARD_FLAGS})

_SUFFIX = re.compile(r"^[A-Za-z0-9_.:\-]{1,160}$")  # what a suffix may hold (kernel and op names are sanitised)
_SIGNAL = re.compile(r"^SIG[A-Z0-9+\-]+$")


def _member_ok(family: str, suffix: str) -> bool:
    if not _SUFFIX.match(suffix):
        return False
    if family == MISMATCH:
        name, colon, dtype = suffix.partition(":")
        return name in INPUT_SETS and bool(colon) == (name == "dtype") and (not colon or dtype.isalnum())
    if family == CHEAT:
        return suffix.split(":", 1)[0] in RUNTIME_FLAGS
    if family == STATIC:
        return suffix in STATIC_CHECKS
    if family == CRASH_SIGNAL:
        return bool(_SIGNAL.match(suffix))
    if family == TIMING_FAILED:  # any failure but another timing failure
        inner = entry(suffix)
        return inner is not None and inner.name not in (OK, TIMING_FAILED)
    return False


def entry(reason: str) -> Reason | None:
    """The catalogue's entry for a reason as written (a family's for its members); None if unknown."""
    if not isinstance(reason, str):
        return None
    found = CATALOGUE.get(reason)
    if found is not None:
        return None if found.suffix else found  # a family's name alone is no verdict reason
    family, sep, suffix = reason.partition(":")
    found = CATALOGUE.get(family)
    if sep and found is not None and found.suffix and _member_ok(family, suffix):
        return found
    return None


def check(reason: str) -> str:
    """`reason` itself if the catalogue knows it; UnknownReason (a bug of the verifier) if not."""
    if entry(reason) is None:
        raise UnknownReason(f"verdict reason {reason!r} is not in the catalogue: add it to "
                            "tritonrl_lib/verify/reasons.py, or give one that is there")
    return reason


def may_cache(reason: str) -> bool:
    """Whether a verdict with this reason may be kept (an unknown reason never is)."""
    found = entry(reason)
    if found is None or not found.cacheable:
        return False
    return reason.partition(":")[2] not in found.uncached_suffixes


def side(reason: str) -> str:
    """Whose doing a verdict's reason is: "candidate", "verifier" or "task" (catalogue's `side`)."""
    found = entry(reason)
    if found is None:
        return "verifier"  # an unknown reason is a bug of the verifier's
    if found.name == TIMING_FAILED:
        return side(reason.partition(":")[2])
    return found.side


def head(reason: str) -> str:
    """A reason's first word: its family (`mismatch` for mismatch:scaled), `static` for every static
    reason, the reason itself when it has no colon."""
    return reason.split(":", 1)[0]


# --------------------------------------------------------------------------- the families, built


def static(what: str) -> str:
    return check(f"{STATIC}:{what}")


def mismatch(input_set: str) -> str:
    return check(f"{MISMATCH}:{input_set}")


def cheat(flag: str) -> str:
    return check(f"{CHEAT}:{flag}")


def crash_signal(name: str) -> str:
    return check(f"{CRASH_SIGNAL}:{name}")


def timing_failed(reason: str) -> str:
    return check(f"{TIMING_FAILED}:{reason}")

