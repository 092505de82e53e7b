"""The candidate phase: the candidate's module imported and run, stage by stage, after the reference phase.

    compile   import the module, find ModelNew, build it under the reference's seed for every model
              of the plan, copy the reference state_dict where names and shapes match
    tiny      the task at shrunk sizes
    full      original inputs and variations (other value ranges, another seed, another size,
              another dtype)
    timing    GPU only; the worker compares the last full outputs meanwhile and its verdict
              counts the timing only if every output was right (a wrong one ends the process)

Before the import, the process is fenced in (guard.py: threads refused, the routes to the verifier's
objects closed, callables of torch, triton, time and the verifier recorded), the timer's functions are
captured (timing.Clock) and PyTorch's global state recorded (process_state.py). Each candidate call
runs on freshly drawn inputs, with the allocator poisoned and the launch tracker and op census
reporting to the guard (runtime_checks.py); its outputs and those facts go to the worker, which
judges. After tiny and after full the process asks the worker (a gate) whether to go on; after full,
on a GPU, it times while the worker answers, and reads the answer before it reports the timing: every
timed call on inputs the candidate has never seen (timed_inputs.py), its stream order and the global
state checked after it, a solution computing in TF32 also timed against the reference with TF32 allowed.
On the CPU every kernel launch is also compiled for CUDA first (compilation/check.py).
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from typing import Any

import torch

from . import guard as guard_mod
from . import gpu_work, interpreter_compat, interpreter_libdevice, runtime_checks
from .. import reasons as R
from ..compilation.compiler_copy import compiler_available
from ..compilation.errors import interpreter_only
from ..compilation.launch_compiler import SM, LaunchCompiler
from ..precision import TF32
from ..sandbox import messages as M
from ..sandbox import shared_blobs
from ..sandbox.limits import REUSE_MAX_BYTES, TIMED_KEEP_BYTES
from ..static.rules import import_verdict
from .context import CANDIDATE_MODULE, Child, classify, excerpt
from .encoding import release_blanks, spec_bytes
from .gpu_work import WATCH
from .input_sets import InputSet, ModelSpec, Plan
from .loading_watch import computed_while_loading, relaid_out
from .op_recorder import OpRecorder
from .process_state import ProcessState
from .runtime_checks import (CensusWatch, LaunchTracker, OpCensus, _torch_owned, flatten_outputs,
                             interpreter_autotune, perturb_host_allocator, poison_allocator, same_bits)
from .timed_inputs import TimedCalls, TimedInputs
from .timing import Clock
from .timing import time_pair
from .variations import load_module_file

MAX_HOLDS_TRACED = 60  # GPU lock holds sent with TRITONRL_TRACE
UNSAFE_NO_GUARD = "TRITONRL_UNSAFE_NO_GUARD"  # tests of the sandbox's own limits only: the guard counts, refuses nothing
# namespaces whose callables the guard records (a replacement of any is a cheat flag)
WATCHED_MODULES = ("torch", "torch.cuda", "torch.nn", "torch.nn.functional", "torch.nn.modules.module",
                   "torch.utils._python_dispatch", "torch.overrides", "torch.autograd", "torch.backends.cudnn",
                   "torch.backends.cuda", "triton", "triton.language", "triton.testing", "triton.runtime.jit",
                   "triton.runtime.autotuner", "time", "gc", "threading", "_thread", "os", "sys", "signal",
                   "numpy", "math", "importlib", "functools", "torch.cuda.graphs")


def same_layout(a: list[Any], b: list[Any], values_too: bool = False) -> bool:
    """Whether `b`'s tensors can be copied into `a`'s in place and stand for `b`: the same tensors
    (shape, dtype, device, strides) at the same places, and with `values_too` the same plain values
    (a refill copies tensors only)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(y, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device or x.stride() != y.stride():
                return False
        elif values_too:
            try:
                equal = type(x) is type(y) and bool(x == y)
            except Exception:  # a nested list of tensors, an array: not something a refill reproduces
                equal = False
            if not equal:
                return False
    return True


class CandidatePhase:
    """Runs the candidate through its stages on the reference phase's `plan`; everything it learns
    goes to the worker, which decides (judge.py)."""

    def __init__(self, child: Child, plan: Plan):
        self.child = child
        self.ch = child.ch
        self.device = child.device
        self.plan = plan
        self.compiler: LaunchCompiler | None = None
        self.guard: guard_mod.Guard | None = None
        self.clock = None
        self.state: ProcessState | None = None
        self.census = OpCensus()
        self.watch = CensusWatch(self.census)
        self.held: list[Any] | None = None  # the last call's inputs: the next set of their shapes goes into them

    def timing_wanted(self) -> bool:
        return self.child.timing_wanted()

    # ---------------------------------------------------------------- the phase

    def run(self) -> None:
        plan = self.plan
        path = os.path.join(self.child.workdir, CANDIDATE_MODULE + ".py")
        tracker = LaunchTracker(path)
        tracker.install()
        runtime_checks.host_read_hooks()
        runtime_checks.dispatch_switch_hooks(path)
        if self.device == "cpu":
            interpreter_libdevice.install()  # libdevice's math, which the interpreter lacks (a GPU has it)
            interpreter_compat.install()  # scalar loop bounds under Triton 3.6's interpreter with NumPy >= 2.4
        mode = self.child.settings.compile_check
        if self.device == "cpu" and mode in ("frontend", "full"):
            # every launch is compiled for CUDA before the interpreter runs it, as a GPU would
            available, why = compiler_available()
            if available:
                self.compiler = LaunchCompiler(mode, path, runtime_checks.report_note)
                tracker.on_launch = self.compiler.check
            else:
                self.child.note(f"compile check skipped: {why.splitlines()[0] if why else 'no compiler'}")
        if self.device == "cpu":
            interpreter_autotune()
            # outputs live in host memory: from here on glibc fills every block it hands out, so an
            # output a kernel never wrote cannot hold a freed reference result (GPU: see call_candidate)
            perturb_host_allocator()
        elif self.device == "cuda":
            WATCH.install()  # stream order and CUDA graphs (gpu_work.py), before the guard records torch.cuda
            self.child.release_gpu_while_compiling()
            if self.timing_wanted():
                with self.child.gpu_section():
                    self.clock = Clock.capture()
        self.install_guard(path)
        with self.child.gpu_section():  # module-level code may already use the GPU
            models = self.import_and_build(path, plan)
        if models is None:
            return
        self.child.mark("built")
        self.ch.send({"type": M.STAGE, "stage": "compile"})

        for stage in ("tiny", "full"):
            if self.child.prescreen and (stage == "full" or not any(s.stage == stage for s in plan.sets)):
                break  # a prescreen ends after the tiny set (worker/job.py)
            for s in plan.sets:
                if s.stage != stage:
                    continue
                blanks = self.child.blanks(s.out_specs)  # the expected outputs' memfds, made off the GPU lock
                try:
                    with self.child.gpu_section():
                        ok = self.call_candidate(models[s.model_key], s, blanks)
                finally:
                    release_blanks(blanks)
                if not ok:
                    return
                self.child.mark(f"cand:{s.name}")
            if stage == "full" and self.timing_wanted():
                # the worker compares the last outputs while this process times: timing sends nothing
                # before the answer, and a wrong output ends this process where it is (GPU lock and all)
                self.ch.ask(stage)
                break
            if not self.ch.gate(stage):  # the worker judges meanwhile; this process holds no GPU
                return
            self.child.mark(f"gate:{stage}")
        self.send_notes()
        if self.compiler is not None and self.compiler.compiled:
            self.child.note(f"compile check: {self.compiler.compiled} distinct launch(es) compiled for CUDA "
                            f"sm_{SM} ({self.compiler.mode})")
        if self.timing_wanted():
            if not self.timing(plan, models):
                return
        if self.child.tracing and self.child.gpu_lock is not None and self.child.gpu_lock.holds:
            self.ch.send({"type": M.MARK, "label": "holds", "holds": self.child.gpu_lock.holds[-MAX_HOLDS_TRACED:]})
        self.ch.send({"type": M.DONE})

    def install_guard(self, path: str) -> None:
        """The fence, the recorded callables and the global state, right before the import."""
        watched: dict[str, Any] = {name: sys.modules[name] for name in WATCHED_MODULES if name in sys.modules}
        watched.update({name: module for name, module in sys.modules.items()
                        if name.startswith("tritonrl_lib.verify") and module is not None})
        # the timer's classes too on the CPU: patching a timer is a cheat on any device
        watched.update({"torch.Tensor": torch.Tensor, "torch._C.TensorBase": torch._C.TensorBase,
                        "torch.nn.Module": torch.nn.Module, "torch.cuda.Event": torch.cuda.Event,
                        "torch.cuda.Stream": torch.cuda.Stream, "torch.cuda.CUDAGraph": torch.cuda.CUDAGraph})
        from triton.runtime.jit import JITFunction

        watched["triton.runtime.jit.JITFunction"] = JITFunction
        self.state = ProcessState.capture()
        enforce = os.environ.get(UNSAFE_NO_GUARD) != "1"
        if not enforce:
            self.child.note(f"the guard is off ({UNSAFE_NO_GUARD}=1: for testing the sandbox's own limits alone)")
        self.guard = guard_mod.Guard(path, trusted_files=[runtime_checks.__file__, gpu_work.__file__], watched=watched,
                                     denied_import=import_verdict, enforce=enforce)
        self.guard.install()
        if enforce:
            self.ch.integrity = self.guard.tampered  # asked before every frame from here on (protocol.py)

    def uses_inline_asm(self) -> bool:
        """Whether the solution writes inline PTX, which the CPU interpreter cannot run."""
        try:
            with open(os.path.join(self.child.workdir, CANDIDATE_MODULE + ".py"), encoding="utf-8",
                      errors="replace") as f:
                return "inline_asm_elementwise" in f.read()
        except OSError:
            return False

    def send_notes(self) -> None:
        if self.guard is not None:
            for text in self.guard.drain_notes():
                self.child.note(text)

    # ---------------------------------------------------------------- compile

    def import_and_build(self, path: str, plan: Plan) -> dict[str, torch.nn.Module] | None:
        """The candidate's module imported and ModelNew built for every model spec; None (after saying
        why) when that fails."""
        try:
            with open(path, "w") as f:
                f.write(self.child.job["code"])
            module = load_module_file(path, CANDIDATE_MODULE)
            cls = getattr(module, "ModelNew", None)
            if not isinstance(cls, type):
                self.ch.send({"type": M.ERROR, "stage": "compile", "reason": R.COMPILE_ERROR,
                              "error": "the module defines no class ModelNew"})
                return None
        except BaseException as e:
            self.ch.send({"type": M.ERROR, "stage": "compile", "reason": classify(e, "compile"),
                          "error": excerpt(e), **self.guard_facts()})
            return None
        models: dict[str, torch.nn.Module] = {}
        try:
            for key, spec in plan.models.items():
                models[key] = self.build_candidate(cls, spec)
        except BaseException as e:
            reason = classify(e, "compile")
            self.ch.send({"type": M.ERROR, "stage": "compile", "reason": reason,
                          "error": f"ModelNew(*get_init_inputs()) failed:\n{excerpt(e)}", **self.guard_facts()})
            return None
        return models

    def build_candidate(self, cls: type, spec: ModelSpec) -> torch.nn.Module:
        model = self.child.build(cls, copy.deepcopy(spec.init_inputs))
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"ModelNew(...) built a {type(model).__name__}, not an nn.Module")
        loading = OpRecorder()  # the candidate's hooks run in these blocks, outside forward's census
        with loading:
            own = model.state_dict()
        # the reference's weights where a name and shape match, except a weight the solution laid out anew
        # from the same values (transposed, flipped) under that name: copying would undo its layout
        matching = {k: v for k, v in spec.state.items() if k in own and tuple(own[k].shape) == tuple(v.shape)
                    and not relaid_out(own[k], v)}
        with loading:
            if matching:
                model.load_state_dict(matching, strict=False)
            model = model.to(self.device)
            if spec.dtype is not None:
                model = model.to(spec.dtype)
            if self.plan.eval_mode:
                model.eval()  # the reference is random in training mode: both judged in eval mode
        computed = computed_while_loading(loading.ops)
        if computed and self.guard is not None and R.COMPUTE_WHILE_LOADING not in self.guard.flags:
            self.guard.record(R.COMPUTE_WHILE_LOADING, f"loading the reference's weights into ModelNew ran "
                              f"{', '.join(computed)[:200]}: compute on the weights outside forward")
        return model

    # ---------------------------------------------------------------- one call

    def guard_facts(self) -> M.GuardFacts:
        """The guard's refusals and the recorded callables replaced so far, for the worker."""
        if self.guard is None:
            return {}
        state = self.state.changes() if self.state is not None else []
        return {"guard_flags": list(self.guard.flags), "guard_details": list(self.guard.details),
                "patched": self.guard.changed()[:20], "global_state": state[:20]}

    def call_candidate(self, model: torch.nn.Module, s: InputSet,
                       blanks: dict[int, list[shared_blobs.BlankBlob]] | None = None) -> bool:
        stage = s.stage
        try:
            inputs = self.in_place(s.draw(self.device))
            if self.device == "cuda":
                poison_allocator(s.out_specs, self.device, budget_bytes=self.poison_room(inputs))
        except BaseException as e:
            self.ch.send({"type": M.ERROR, "stage": stage, "reason": R.INTERNAL_ERROR,
                          "error": f"drawing the {s.name} inputs failed: {type(e).__name__}: {e}"[:2000]})
            return False
        g = self.guard
        census = self.census
        intact = True
        g.begin()
        try:
            with census, self.watch:
                WATCH.begin_call()
                try:
                    out = model(*inputs)
                finally:
                    WATCH.end_call()  # its GPU work ordered with this stream? (before the sync below)
                intact = _current_mode() is census
            self.child.sync()
        except BaseException as e:
            g.end()
            if s.name.startswith("dtype:") and not g.flags and isinstance(e, Exception):
                # a kernel written for the task's own dtype need not run in half precision: the set is
                # left out (the verdict says so); outputs it does return must match
                self.ch.send({"type": M.CAND_SKIP, "name": s.name, "error": excerpt(e)[-400:], **self.guard_facts()})
                return True
            if interpreter_only(e):
                self.child.note("the interpreter rejected a launch that compiles for CUDA (an interpreter limitation): "
                                "scored as a runtime error")
            elif self.device == "cpu" and self.uses_inline_asm():
                self.child.note("the kernel uses inline_asm_elementwise, PTX that the interpreter cannot run (a GPU "
                                "runs it): scored as a runtime error on the CPU")
            self.ch.send({"type": M.ERROR, "stage": stage, "variation": s.name, "reason": classify(e, stage),
                          "error": excerpt(e), **self.guard_facts()})
            return False
        facts = g.end()
        if facts.bypassed:
            intact = False
        if g.paused:
            intact = False  # ended with the census paused: its pauses did not come from the verifier's own copies
            g.paused = 0
        try:
            outs = flatten_outputs(out)
            del out
            foreign_memory = [i for i, o in enumerate(outs) if isinstance(o, torch.Tensor) and not _torch_owned(o)]
            metas, blobs = self.child.encode(outs, blanks)
            del outs
            unchanged = self.inputs_unchanged(s, inputs)
        except BaseException as e:
            self.ch.send({"type": M.ERROR, "stage": stage, "variation": s.name, "reason": classify(e, stage),
                          "error": excerpt(e), **self.guard_facts()})
            return False
        self.send_notes()
        frame: M.CandFrame = {
            "type": M.CAND, "name": s.name, "outputs": metas, "launches": facts.launches,
            "kernels": dict(facts.kernels), "foreign": dict(facts.foreign), "ops": dict(facts.ops),
            "host_read": facts.host_read, "host_made": facts.host_made, "census_intact": bool(intact),
            "heavy": dict(facts.heavy), "unordered": list(facts.unordered),
            "foreign_memory": foreign_memory, "inputs_unchanged": bool(unchanged), **self.guard_facts()}
        self.ch.send(frame, blobs)
        return True

    def in_place(self, inputs: list[Any]) -> list[Any]:
        """The new set's values copied into the last call's input tensors where they have the same
        shapes (small sets): an answer remembered by the inputs' address, not their values, is stale."""
        tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
        small = sum(t.numel() * t.element_size() for t in tensors) <= REUSE_MAX_BYTES
        # a large set's inputs are never refilled: holding them would only double the next set's draw
        held, self.held = self.held, (inputs if small else None)
        if held is None or not small or not same_layout(held, inputs):
            return inputs
        out = []
        for old, new in zip(held, inputs):
            if isinstance(new, torch.Tensor):
                old.copy_(new)
                out.append(old)
            else:
                out.append(new)
        self.held = out
        return out

    def inputs_unchanged(self, s: InputSet, inputs: list[Any]) -> bool:
        """The inputs after the call against the set drawn again (or the cached originals)."""
        fresh = s.draw(self.device)
        same = len(inputs) == len(fresh) and all(same_bits(a, b) for a, b in zip(inputs, fresh))
        del fresh
        return same

    def poison_room(self, inputs: list[Any]) -> int:
        """GPU memory the allocator's poisoning may take now: half of what this process's share leaves (and
        the device has free), at most 4 GiB."""
        free, total = torch.cuda.mem_get_info()
        budget = self.child.budget
        fraction = budget.gpu_fraction if budget is not None and budget.gpu_fraction > 0 else 1.0
        left = int(fraction * total) - torch.cuda.memory_allocated()
        return max(0, min(free, left, 4 << 30) // 2)

    # ---------------------------------------------------------------- timing

    def timing(self, plan: Plan, models: dict[str, torch.nn.Module]) -> bool:
        """Time the candidate against the reference, the full stage's gate asked and not yet answered;
        False where that answer is no (nothing more is sent then). Every candidate call gets inputs it has
        never seen (timed_inputs.py); the checked calls' outputs go to the worker, held to their sets'
        references. A candidate whose `tl.dot` runs in TF32 is also timed against the reference with TF32
        allowed (precision.py)."""
        original = next(s for s in plan.sets if s.name == "original")
        checks = [s for s in plan.sets if s.stage == "timed"]
        ref, cand = plan.models["base"].ref, models["base"]
        settings = self.child.settings
        trials, warmup = int(settings.timing_trials), int(settings.timing_warmup)
        calls: TimedCalls | None = None
        try:
            tampered = self.guard.changed() + (self.state.changes() if self.state is not None else [])
            ref_in = original.draw(self.device)
            rand = self.clock.urandom if self.clock is not None else os.urandom
            supply = TimedInputs(plan.fresh, checks, original, trials, self.device, rand)
            clone = self.clock.clone if self.clock is not None else torch.Tensor.clone
            sync = self.clock.sync if self.clock is not None else torch.cuda.synchronize
            calls = TimedCalls(supply, WATCH, self.state, trials - 1, clone, sync)
            # every kept output stays on the device until timing ends: a task with 8 GiB outputs keeps one
            out_bytes = sum(spec_bytes(shape, dtype) for shape, dtype in (original.out_specs or []))
            chosen = supply.checked if out_bytes * len(supply.checked) <= TIMED_KEEP_BYTES else {trials - 1}
            supply.by_trial = {t: s for t, s in supply.by_trial.items() if t in chosen}
            ref_tf32 = None
            if self.child.job.get("precision") == TF32 and self.clock is not None:  # the pool's (worker/job.py)
                tf32 = self.clock.tf32
                ref_tf32 = lambda: tf32.run(lambda: ref(*ref_in))  # noqa: E731

            with self.child.gpu_lock.alone() if self.child.gpu_lock else contextlib.nullcontext():
                self.child.mark("timing_lock")
                times = time_pair(lambda: ref(*ref_in), lambda: cand(*calls.inputs), warmup, trials, clock=self.clock,
                                  on_output=calls.keep, chosen=chosen, before_cand=calls.before,
                                  after_cand=calls.after, ref_tf32_fn=ref_tf32)
            tampered += [x for x in self.guard.changed() + (self.state.changes() if self.state else [])
                         if x not in tampered]
            tampered += [x for x in calls.state_changes if x not in tampered]
            failure: M.ErrorFrame | None = None
        except BaseException as e:
            failure = {"type": M.ERROR, "stage": "timing", "reason": classify(e, "timing"), "error": excerpt(e)}
        if not self.ch.answer():
            return False
        self.child.mark("judged")
        if failure is not None:
            self.ch.send({**failure, **self.guard_facts()})
            return False
        for trial, name, output in calls.kept:
            outs = flatten_outputs(output)
            metas, blobs = self.child.encode(outs)
            self.ch.send({"type": M.TIMED, "trial": trial, "set": name, "outputs": metas}, blobs)
            del blobs, outs
        frame: M.TimingFrame = {
            "type": M.TIMING, "ref_ms": times["ref"], "cand_ms": times["cand"],
            "device_name": torch.cuda.get_device_name(0), "tampered": tampered[:20],
            "unordered": calls.unordered,
            "gpu_wait_s": self.child.gpu_lock.waited_alone_s if self.child.gpu_lock else 0.0, **self.guard_facts()}
        if "ref_tf32" in times:
            frame["ref_tf32_ms"] = times["ref_tf32"]
        self.ch.send(frame)
        return True


_current_mode = getattr(__import__("torch.utils._python_dispatch", fromlist=["_get_current_dispatch_mode"]),
                        "_get_current_dispatch_mode")
