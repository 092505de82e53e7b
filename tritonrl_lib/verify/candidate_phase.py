"""The candidate phase: the candidate's module imported and run, stage by stage, after the reference phase.

    compile   import the module, find ModelNew, build it under the reference's seed for every model
              of the plan, copy the reference state_dict where names and shapes match
    tiny      the task at shrunk sizes
    full      original inputs and variations (scaled x2, another seed, larger shape, another dtype)
    timing    GPU only; the worker compares the last full outputs meanwhile and its verdict
              counts the timing only if every output was right (a wrong one ends the process)

Each candidate call runs on a fresh copy of its inputs, with the allocator poisoned, the launch
tracker and op census active (runtime_checks.py); its outputs and those facts go to the worker,
which judges. After tiny and after full the process asks the worker (a gate) whether to go on;
after full, on a GPU, it times while the worker answers, and reads the answer before it reports
the timing. On the CPU every kernel launch is also compiled for CUDA first (compile_check.py).
"""

from __future__ import annotations

import contextlib
import copy
import os
import torch

from .child_context import CANDIDATE_MODULE, Child, classify, excerpt
from .compile_errors import interpreter_only
from .compiler_copy import compiler_available
from . import reasons as R
from . import shared_blobs
from .encoding import release_blanks
from .input_sets import InputSet, ModelSpec, Plan
from .launch_compiler import SM, LaunchCompiler
from .runtime_checks import (LaunchTracker, OpCensus, flatten_outputs, interpreter_autotune, perturb_host_allocator,
                             poison_allocator, same_bits)
from .variations import load_module_file, to_device

MAX_HOLDS_TRACED = 60  # GPU lock holds sent with TRITONRL_TRACE


class CandidatePhase:
    """Runs the candidate through its stages on the reference phase's `plan`; everything it learns
    goes to the worker, which decides (judge.py)."""

    def __init__(self, child: Child, plan: Plan):
        self.child = child
        self.ch = child.ch
        self.device = child.device
        self.plan = plan
        self.compiler: LaunchCompiler | None = None

    def run(self) -> None:
        plan = self.plan
        path = os.path.join(self.child.workdir, CANDIDATE_MODULE + ".py")
        census = OpCensus()
        tracker = LaunchTracker(path, census)
        tracker.install()
        mode = self.child.settings.compile_check
        if self.device == "cpu" and mode in ("frontend", "full"):
            # every launch is compiled for CUDA before the interpreter runs it, as a GPU would
            available, why = compiler_available()
            if available:
                self.compiler = LaunchCompiler(mode, path, self.child.note)
                tracker.on_launch = self.compiler.check
            else:
                self.child.note(f"compile check skipped: {why.splitlines()[0] if why else 'no compiler'}")
        if self.device == "cpu":
            interpreter_autotune()
            # outputs live in host memory: from here on glibc fills every block it hands out, so an
            # output a kernel never wrote cannot hold a freed reference result (GPU: see call_candidate)
            perturb_host_allocator()
        elif self.device == "cuda":
            self.child.release_gpu_while_compiling()
        with self.child.gpu_section():  # module-level code may already use the GPU
            models = self.import_and_build(path, plan)
        if models is None:
            return
        self.child.mark("built")
        self.ch.send({"type": "stage", "stage": "compile"})

        for stage in ("tiny", "full"):
            for s in plan.sets:
                if s.stage != stage:
                    continue
                blanks = self.child.blanks(s.out_specs)  # the expected outputs' memfds, made off the GPU lock
                try:
                    with self.child.gpu_section():
                        ok = self.call_candidate(models[s.model_key], s, tracker, census, blanks)
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
        if self.compiler is not None and self.compiler.compiled:
            self.child.note(f"compile check: {self.compiler.compiled} distinct launch(es) compiled for CUDA "
                            f"sm_{SM} ({self.compiler.mode})")
        if self.timing_wanted():
            if not self.timing(plan, models):
                return
        if self.child.tracing and self.child.gpu_lock is not None and self.child.gpu_lock.holds:
            self.ch.send({"type": "mark", "label": "holds", "holds": self.child.gpu_lock.holds[-MAX_HOLDS_TRACED:]})
        self.ch.send({"type": "done"})

    def import_and_build(self, path: str, plan: Plan) -> dict[str, torch.nn.Module] | None:
        """The candidate's module imported and ModelNew built for every model spec; None (after saying
        why) when that fails."""
        try:
            with open(path, "w") as f:
                f.write(self.child.job["code"])
            module = load_module_file(path, CANDIDATE_MODULE)
            cls = getattr(module, "ModelNew", None)
            if not isinstance(cls, type):
                self.ch.send({"type": "error", "stage": "compile", "reason": R.COMPILE_ERROR,
                              "error": "the module defines no class ModelNew"})
                return None
        except BaseException as e:
            self.ch.send({"type": "error", "stage": "compile", "reason": classify(e, "compile"), "error": excerpt(e)})
            return None
        models: dict[str, torch.nn.Module] = {}
        try:
            for key, spec in plan.models.items():
                models[key] = self.build_candidate(cls, spec)
        except BaseException as e:
            reason = classify(e, "compile")
            self.ch.send({"type": "error", "stage": "compile", "reason": reason,
                          "error": f"ModelNew(*get_init_inputs()) failed:\n{excerpt(e)}"})
            return None
        return models

    def build_candidate(self, cls: type, spec: ModelSpec) -> torch.nn.Module:
        model = self.child.build(cls, copy.deepcopy(spec.init_inputs))
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"ModelNew(...) built a {type(model).__name__}, not an nn.Module")
        own = model.state_dict()
        matching = {k: v for k, v in spec.state.items() if k in own and tuple(own[k].shape) == tuple(v.shape)}
        if matching:
            model.load_state_dict(matching, strict=False)
        model = model.to(self.device)
        if spec.dtype is not None:
            model = model.to(spec.dtype)
        return model

    def call_candidate(self, model: torch.nn.Module, s: InputSet, tracker: LaunchTracker, census: OpCensus,
                       blanks: dict[int, list[shared_blobs.BlankBlob]] | None = None) -> bool:
        stage = s.stage
        try:
            inputs = to_device(s.inputs, self.device)
            before = [x.clone() if isinstance(x, torch.Tensor) else copy.copy(x) for x in inputs]
            if self.device == "cuda":
                poison_allocator(s.out_specs, self.device)
        except BaseException as e:
            self.ch.send({"type": "error", "stage": stage, "reason": classify(e, stage), "error": excerpt(e)})
            return False
        tracker.begin()
        try:
            with census:
                out = model(*inputs)
            self.child.sync()
        except BaseException as e:
            tracker.end()
            if interpreter_only(e):
                self.child.note("the interpreter rejected a launch that compiles for CUDA (an interpreter limitation): "
                                "scored as a runtime error")
            self.ch.send({"type": "error", "stage": stage, "variation": s.name, "reason": classify(e, stage),
                          "error": excerpt(e)})
            return False
        tracker.end()
        try:
            outs = flatten_outputs(out)
            unchanged = len(inputs) == len(before) and all(same_bits(a, b) for a, b in zip(inputs, before))
            metas, blobs = self.child.encode(outs, blanks)
        except BaseException as e:
            self.ch.send({"type": "error", "stage": stage, "variation": s.name, "reason": classify(e, stage),
                          "error": excerpt(e)})
            return False
        self.ch.send({"type": "cand", "name": s.name, "outputs": metas, "launches": tracker.launches,
                      "kernels": dict(tracker.kernels), "foreign": dict(tracker.foreign),
                      "ops": dict(census.ops), "inputs_unchanged": bool(unchanged)}, blobs)
        return True

    def timing_wanted(self) -> bool:
        return bool(self.child.settings.timing_enabled) and self.device == "cuda"

    def timing(self, plan: Plan, models: dict[str, torch.nn.Module]) -> bool:
        """Time the candidate against the reference, the full stage's gate asked and not yet
        answered; False where that answer is no (nothing more is sent then)."""
        from .timing import time_pair

        original = next(s for s in plan.sets if s.name == "original")
        ref, cand = plan.models["base"].ref, models["base"]
        try:
            ref_in = to_device(original.inputs, self.device)
            cand_in = to_device(original.inputs, self.device)
            with self.child.gpu_lock.alone() if self.child.gpu_lock else contextlib.nullcontext():
                self.child.mark("timing_lock")
                settings = self.child.settings
                times = time_pair(lambda: ref(*ref_in), lambda: cand(*cand_in), int(settings.timing_warmup),
                                  int(settings.timing_trials))
            failure = None
        except BaseException as e:
            failure = {"type": "error", "stage": "timing", "reason": classify(e, "timing"), "error": excerpt(e)}
        if not self.ch.answer():
            return False
        self.child.mark("judged")
        if failure is not None:
            self.ch.send(failure)
            return False
        self.ch.send({"type": "timing", "ref_ms": times["ref"], "cand_ms": times["cand"],
                      "device_name": torch.cuda.get_device_name(0),
                      "gpu_wait_s": self.child.gpu_lock.waited_alone_s if self.child.gpu_lock else 0.0})
        return True
