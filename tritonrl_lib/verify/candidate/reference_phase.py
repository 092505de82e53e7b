"""The reference phase: everything the verdict compares against, made before the candidate is imported.

The task module is executed (its file removed again once loaded), its `Model` built under the seed,
and for every input set (tiny sizes first, then the original inputs and their variations:
variations.py) the inputs are drawn on the device, the reference runs on them, and its outputs go to
the worker at once, then are overwritten here (`scrub`), so no reference result stays in memory the
candidate could read. Only one set's inputs exist at a time; the candidate phase draws each set again
(input_sets.py). The result is the `Plan` the candidate phase runs. With the worker's copy of this
task's reference phase (reference_cache.py) only the models are built, and checked against it.

A reference that is random (dropout in training mode: two runs on the same inputs differ) is judged
by one rule: both models run in eval mode (`model.eval()`, which turns dropout off), and the verdict
says so; a reference still random in eval mode cannot be judged (`reference_random`).

Only what the task's own code raises (drawing inputs, building or running the reference) is the
reference failing; an error of the verifier's own code here (encoding, sending) is not caught: it
reaches the worker as an `internal_error` naming the exception and where it happened.
"""

from __future__ import annotations

import copy
from typing import Any, Callable

import torch

from ..sandbox import messages as M
from .context import SEED, Child, excerpt
from .encoding import dtype_name, mean_abs, raw_bytes, release_blanks
from .heavy_ops import operand_dtypes, reference_counts
from .input_sets import (InputSet, ModelSpec, Plan, drawer, mapped_input, model_digests, same_values,
                         seed_torch)
from .op_recorder import OpRecorder
from .runtime_checks import flatten_outputs, is_plain_tensor, scrub
from .tf32 import Tf32Operands, tf32_error, uses_float32_heavy_ops
from .variations import (VARIATION_ORDER, cast_floats, describe_inputs, larger_plan, load_task_module, tiny_plans,
                         value_transforms)

TASK_MODULE = "tritonrl_task"
TIMED_SETS = 4  # the timing's checked calls' input sets, where the budget does not say
HALF_DTYPES = (torch.float16, torch.bfloat16)
CPU_HALF_DTYPES = (torch.float16,)  # the interpreter computes tl.dot on bfloat16 from raw bits: GPU only
DEFAULT_SEEDS = {"inputs": SEED, "other": SEED + 1000, "range": SEED + 2000, "timed": SEED + 3000}


class RefFailed(Exception):
    """The task's own code failed: drawing inputs, building the reference or running it."""


def reference_call(what: str, fn: Callable[[], Any]) -> Any:
    """Run a piece of the task's own code; its failure becomes RefFailed (the verifier's own errors pass)."""
    try:
        return fn()
    except RefFailed:
        raise
    except BaseException as e:
        raise RefFailed(f"{what}: {type(e).__name__}: {e}") from e


class ReferencePhase:
    """Builds the plan of one candidate's process; `run` returns it, or None after sending
    `ref_error` (or `ref_random`) when the task's reference itself cannot be judged (an input set
    whose reference fails is skipped with a note instead)."""

    def __init__(self, child: Child):
        self.child = child
        self.ch = child.ch
        self.device = child.device
        self.budget = child.budget
        self.sent_bytes = 0  # reference outputs sent to the worker so far (it holds them all)
        self.original_out_bytes = 0
        self.seeds = {**DEFAULT_SEEDS, **(child.job.get("seeds") or {})}
        self.collect = False  # send the inputs too, for the worker's reference cache
        self.tiny_overrides: dict[str, int] | None = None
        self.eval_mode = False
        self.keep_inputs = False  # get_inputs does not repeat itself: every set's inputs are held as drawn
        self.peak_bytes = 0  # the largest GPU memory an input set of the reference took (measured)

    # ---------------------------------------------------------------- the phase

    def run(self) -> Plan | None:
        cached = self.child.job.get("reference_cache")
        if cached:
            plan = self.cached(cached)
            if plan is not None:
                return plan
            self.ch.send({"type": M.REF_RESET})  # the worker's copy does not fit: compute our own
        plan = Plan()
        if self.child.prescreen:
            return self.prescreen_plan(plan)
        self.collect = bool(self.child.job.get("collect_reference")) and (
            self.budget is None or self.budget.cacheable_inputs)
        try:
            base = self.load(TASK_MODULE)
            plan.models["base"] = self.reference_model(base)
            self.child.mark("ref_model")
            original = InputSet("original", "full", "base", self.drawer(base, self.seeds["inputs"]), None, [])
            if not same_values(original.draw(self.device), original.draw(self.device)):
                self.keep_inputs = True
                self.child.note("get_inputs() draws other values on every call (not from the seeded generators): "
                                "every input set is held as first drawn")
            tiny = self.tiny_set(plan)
            if not self.deterministic(plan, tiny or original):
                return None
            if tiny is not None:
                self.run_set(plan, tiny)
            original_outs_finite = self.run_set(plan, original)
        except RefFailed as e:
            self.ch.send({"type": M.REF_ERROR, "error": _cause(e)})
            return None
        if tiny is None:
            self.child.note("tiny: no size constant could shrink; ran the task's own sizes")
            self.run_set(plan, InputSet("tiny", "tiny", "base", original.make, None, []))
        wanted = VARIATION_ORDER[: max(1, int(self.child.settings.num_variations))]
        for name in wanted[1:]:
            if name != "range" and not self.room_for(name):
                continue
            try:
                if name == "range":
                    self.range_set(plan, base, original_outs_finite)
                elif name == "offset":
                    transform, _ = value_transforms("offset", self.seeds["inputs"])[0]
                    self.value_set(plan, "offset", self.drawer(base, self.seeds["inputs"], transform),
                                   original_outs_finite)
                elif name == "seed":
                    self.seed_set(plan, base, original_outs_finite)
                elif name == "larger":
                    self.larger_set(plan)
                elif name == "dtype":
                    self.dtype_set(plan, base)
            except RefFailed as e:
                self.child.note(f"variation {name} skipped: the reference failed on it ({_cause(e)[:200]})")
        plan.fresh = self.fresh_drawer(base)
        if self.child.timing_wanted():
            self.timed_sets(plan, base)
        if self.collect:
            self.ch.send({"type": M.REF_MODELS, "tiny_overrides": self.tiny_overrides,
                          "digests": model_digests(plan.models), "eval_mode": self.eval_mode})
        plan.eval_mode = self.eval_mode
        self.ch.send({"type": M.REF_FOOTPRINT, "peak_bytes": int(self.peak_bytes)})
        return plan

    def prescreen_plan(self, plan: Plan) -> Plan | None:
        """A prescreen's plan (worker/job.py): the tiny set alone, drawn and checked as the full run draws
        and checks it (the same seeds, the same shrink), and nothing at the task's own sizes. A task
        that no size constant shrinks gets no set: the prescreen then only imports and builds. The tiny
        inputs are held as first drawn: the candidate gets the very values the reference ran on, never
        stricter than the full run (which holds them only where the task's own draws differ)."""
        try:
            base = self.load(TASK_MODULE)
            plan.models["base"] = self.reference_model(base)
            tiny = self.tiny_set(plan)
            if tiny is not None:
                self.keep_inputs = True
                if not self.deterministic(plan, tiny):
                    return None
                self.run_set(plan, tiny)
        except RefFailed as e:
            self.ch.send({"type": M.REF_ERROR, "error": _cause(e)})
            return None
        plan.fresh = self.fresh_drawer(base)
        plan.eval_mode = self.eval_mode
        self.ch.send({"type": M.REF_FOOTPRINT, "peak_bytes": int(self.peak_bytes)})
        return plan

    def cached(self, cached: dict[str, Any]) -> Plan | None:
        """The plan from the worker's copy of this task's reference phase (reference_cache.py):
        inputs mapped read-only from the sealed files it kept, reference outputs already with the
        worker. The models are built here as always and must match the cached ones bit for bit
        (a task whose weights are not reproducible gets its own reference run); None if not."""
        try:
            plan = Plan(eval_mode=bool(cached.get("eval_mode")))
            base = self.load(TASK_MODULE)
            plan.fresh = self.fresh_drawer(base)
            plan.models["base"] = self.reference_model(base)
            overrides = cached.get("tiny_overrides")
            digests = cached["digests"]
            if "tiny" in digests and overrides:
                module = self.load(TASK_MODULE + "_tiny", overrides)
                plan.models["tiny"] = self.reference_model(module)
            for key in digests:
                if "@" in key:  # the half-precision reference never runs here: its outputs are cached
                    spec = plan.models["base"]
                    plan.models[key] = ModelSpec(spec.init_inputs, spec.state, None,
                                                 getattr(torch, key.split("@", 1)[1]))
            if model_digests(plan.models) != digests:
                return None
            if plan.eval_mode:
                for spec in plan.models.values():
                    if spec.ref is not None:
                        spec.ref.eval()
            for entry in cached["sets"]:
                inputs = [mapped_input(d) for d in entry["inputs"]]
                specs = [(tuple(shape), getattr(torch, dtype)) for shape, dtype in entry["out_specs"]]
                plan.sets.append(InputSet(entry["name"], entry["stage"], entry["model_key"], None, inputs, specs))
            return plan
        except BaseException as e:
            self.child.note(f"the worker's cached reference was not usable ({type(e).__name__}: "
                            f"{str(e)[:200]}); ran the reference here")
            return None

    # ---------------------------------------------------------------- the task's code

    def load(self, name: str, overrides: dict[str, int] | None = None) -> Any:
        return reference_call("loading the task module",
                              lambda: load_task_module(self.child.source, self.child.workdir, name, overrides))

    def reference_model(self, module: Any, init: list[Any] | None = None) -> ModelSpec:
        """The task module's Model built from its init inputs under the seed, on the device, with a
        CPU copy of its initial weights (for the candidate's)."""
        with self.child.off_gpu():  # a KernelBench Model initialises its weights on the CPU (no GPU hold for that)
            init = reference_call("get_init_inputs()", lambda: list(module.get_init_inputs())) if init is None else init
            ref = reference_call("building the reference Model", lambda: self.child.build(module.Model, init))
            state = {k: v.detach().to("cpu", copy=True) for k, v in ref.state_dict().items()}
        return ModelSpec(init, state, ref.to(self.device))

    def fresh_drawer(self, module: Any) -> Callable[[int], list[Any]]:
        """The task's inputs drawn afresh under any seed (the timing's unseen values)."""
        get_inputs, device = module.get_inputs, self.device
        return lambda seed: drawer(get_inputs, seed, device)()

    def drawer(self, module: Any, seed: int, transform: Callable[[list[Any]], list[Any]] | None = None
               ) -> Callable[[], list[Any]]:
        get_inputs = module.get_inputs
        make = drawer(get_inputs, seed, self.device, transform)
        return lambda: reference_call("get_inputs()", make)

    def run_ref(self, model: torch.nn.Module, inputs: list[Any]) -> list[Any]:
        out = reference_call("the reference's forward", lambda: flatten_outputs(model(*inputs)))
        reference_call("the reference's forward", self.child.sync)
        bad = [type(o).__name__ for o in out if not isinstance(o, (torch.Tensor, bool, int, float))]
        if bad:
            raise RefFailed(f"the reference returned {', '.join(bad)}, not tensors")
        return out

    # ---------------------------------------------------------------- input sets

    def run_set(self, plan: Plan, s: InputSet, require_finite: bool = False, alt_dtype: torch.dtype | None = None
                ) -> bool:
        """Draw the set's inputs, run the reference, send its outputs; False (nothing sent) when
        `require_finite` and the outputs are not finite, or the half-precision reference (`alt_dtype`)
        gives outputs of another dtype. Returns whether the outputs were finite."""
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        inputs = s.draw(self.device)
        if self.keep_inputs and s.inputs is None:
            s.keep(inputs)
            inputs = s.draw(self.device)  # the reference may change its inputs: it gets a copy
        self.child.mark(f"drawn:{s.name}")
        recorder = OpRecorder()
        with recorder:  # the reference's GEMM and convolution calls: a fusion candidate may make no more
            outs = self.run_ref(plan.models[s.model_key].ref, inputs)
        s.heavy_ops = reference_counts(recorder.ops)
        # and on the same operand dtypes: the reference's, or the set's own inputs' (a half set asks for half)
        own = sorted({dtype_name(x.dtype) for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()})
        s.heavy_dtypes = {fam: sorted(set(dtypes) | set(own)) for fam, dtypes in operand_dtypes(recorder.heavy).items()}
        finite = self.finite(outs)
        self.child.mark(f"ran:{s.name}")
        wrong_dtype = alt_dtype is not None and not all(
            o.dtype == alt_dtype for o in outs if isinstance(o, torch.Tensor) and o.is_floating_point())
        if (require_finite and not finite) or wrong_dtype:
            scrub(outs, set())
            return False
        # half outputs (a half-precision set, or a task in half precision): PyTorch's half kernels may
        # accumulate in half, so the float32-accumulated result is a second, equally valid reference
        half_outs = any(isinstance(o, torch.Tensor) and o.dtype in (torch.float16, torch.bfloat16) for o in outs)
        want_alt = alt_dtype is not None or half_outs
        # float32 outputs of float32 GEMMs or convolutions: how far TF32 math is from them (precision.py)
        want_tf32 = uses_float32_heavy_ops(recorder.heavy) and any(
            isinstance(o, torch.Tensor) and o.dtype == torch.float32 for o in outs)
        if want_alt or want_tf32 or self.collect:
            # a reference may change its inputs in place (`x.mul_(2)`): the float32 reference and the
            # inputs the worker caches for later candidates are the set's own values, drawn again,
            # never the copy the reference ran on (its outputs belong to the values before the call)
            del inputs
            inputs = s.draw(self.device)
        alt = self.float32_reference(plan.models[s.model_key].ref, inputs, outs) if want_alt else None
        tf32 = self.tf32_reference(plan.models[s.model_key].ref, inputs, outs) if want_tf32 else None
        if want_tf32 and self.collect:
            del inputs
            inputs = s.draw(self.device)  # the TF32 run may have changed them: the worker caches the set's own
        if self.device == "cuda":
            self.peak_bytes = max(self.peak_bytes, torch.cuda.max_memory_allocated())
        self.child.mark(f"alt:{s.name}")
        self.send_ref(plan, s, inputs, outs, alt, tf32)
        return finite

    def tf32_reference(self, model: torch.nn.Module, inputs: list[Any], outs: list[Any]) -> list[Any] | None:
        """TF32's error on this set's outputs (tf32.py): the reference once more, its heavy ops' float32
        operands rounded to TF32, on the set's own values (drawn again after the reference's run)."""
        try:
            with Tf32Operands():
                rounded = self.run_ref(model, inputs)
        except RefFailed:
            return None
        error = tf32_error(outs, rounded)
        del rounded
        return error

    def tiny_set(self, plan: Plan) -> InputSet | None:
        init = plan.models["base"].init_inputs
        for label, overrides in tiny_plans(self.child.source):
            try:
                module = self.load(TASK_MODULE + "_tiny", overrides)
                tinit = reference_call("get_init_inputs()", lambda: list(module.get_init_inputs()))
                key = "base"
                if not same_values(tinit, init):
                    plan.models["tiny"] = self.reference_model(module, tinit)
                    key = "tiny"
                s = InputSet("tiny", "tiny", key, self.drawer(module, self.seeds["inputs"]), None, [])
                self.run_ref(plan.models[key].ref, s.draw(self.device))  # the reference takes these sizes
            except RefFailed as e:
                plan.models.pop("tiny", None)
                self.child.note(f"tiny: {label} rejected by the reference ({_cause(e)[:120]}); trying fewer shrinks")
                continue
            self.child.note(f"tiny: {label}")
            self.tiny_overrides = overrides if key == "tiny" else None
            return s
        return None

    def deterministic(self, plan: Plan, s: InputSet) -> bool:
        """Whether the reference gives the same outputs for the same inputs; a random one (dropout in
        training mode) switches both models to eval mode, one still random fails the task (False)."""
        if self.outputs_repeat(plan, s):
            return True
        for spec in plan.models.values():
            if spec.ref is not None:
                # the training-mode runs moved its buffers (batch norm's running statistics), which eval
                # mode reads: back to the initial state the candidate is built from
                spec.ref.load_state_dict(spec.state)
                spec.ref.eval()
        if self.outputs_repeat(plan, s):
            self.eval_mode = True
            self.child.note("random reference: two runs on the same inputs differed in training mode (dropout), "
                            "so both the reference and the candidate run in eval mode (model.eval())")
            return True
        self.ch.send({"type": M.REF_RANDOM, "error": "the reference gives other outputs on every run for the same "
                      "inputs, even in eval mode: its forward draws random numbers (torch.rand, dropout with "
                      "training=True, ...), so no output can be compared against it"})
        return False

    def outputs_repeat(self, plan: Plan, s: InputSet) -> bool:
        model = plan.models[s.model_key].ref
        if self.keep_inputs and s.inputs is None:
            s.keep(s.draw(self.device))  # both runs on the very same inputs
        runs = []
        for seed in (1, 2):
            inputs = s.draw(self.device)
            seed_torch(seed)  # a random forward draws differently under another seed
            runs.append([o.detach().clone() if isinstance(o, torch.Tensor) else o
                         for o in self.run_ref(model, inputs)])
        for a, b in zip(*runs):
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                if a.shape != b.shape or not torch.allclose(a.double(), b.double(), rtol=1e-3, atol=1e-5,
                                                            equal_nan=True):
                    return False
            elif isinstance(a, torch.Tensor):
                if not torch.equal(a, b):
                    return False
            elif a != b:
                return False
        return True

    def value_set(self, plan: Plan, name: str, make: Callable[[], list[Any]], originally_finite: bool) -> bool:
        ok = self.run_set(plan, InputSet(name, "full", "base", make, None, []), require_finite=originally_finite)
        if not ok:
            self.child.note(f"variation {name} skipped: the reference gives non-finite outputs on it")
        return ok

    def seed_set(self, plan: Plan, base: Any, originally_finite: bool) -> None:
        """Other values from another secret seed, negated, each row (along the first dimension) at a scale
        of its own (`row_scaled`), sorted ascending along the last dimension (`sorted_last_dim`); where the
        reference is not finite there, the forms with less of that (variations.SEED_STEPS), then the values
        as drawn: whichever is kept does not depend on the secret seed's draws more than it must (a kernel
        right only on one sign fails whenever negation is kept)."""
        other = self.seeds["other"]
        for transform, said in value_transforms("seed", other):
            if self.run_set(plan, InputSet("seed", "full", "base", self.drawer(base, other, transform), None, []),
                            require_finite=originally_finite):
                self.child.note(f"variation seed: {said}")
                return
        self.child.note("variation seed skipped: the reference gives non-finite outputs on it")

    def range_set(self, plan: Plan, base: Any, originally_finite: bool) -> None:
        """Random signs and magnitudes, the widest range on which the reference stays finite; where it
        is not finite on negative values (the operation does not take them), magnitudes alone."""
        for transform, said in value_transforms("range", self.seeds["range"]):
            make = self.drawer(base, self.seeds["inputs"], transform)
            if self.run_set(plan, InputSet("range", "full", "base", make, None, []), require_finite=originally_finite):
                if said:
                    self.child.note(f"variation range: {said}")
                return
        self.child.note("variation range skipped: the reference gives non-finite outputs on it")

    def larger_set(self, plan: Plan) -> None:
        factor = self.budget.larger_factor if self.budget is not None else 2.0
        choice = larger_plan(self.child.source, factor)
        if choice is None:
            self.child.note("variation larger skipped: no size constant outside get_init_inputs() to resize")
            return
        const, value = choice
        name = "larger" if factor >= 1 else "resized"
        module = self.load(TASK_MODULE + "_larger", {const: value})
        self.run_set(plan, InputSet(name, "full", "base", self.drawer(module, self.seeds["inputs"]), None, []))
        self.child.note(f"variation {name}: {const}={value}" + (
            "" if factor >= 1 else " (the task is too large to double on this machine)"))

    def timed_sets(self, plan: Plan, base: Any) -> None:
        """The timing's checked calls' inputs (timed_inputs.py): fresh draws of the task's own inputs from
        seeds of their own, never run by the candidate before it is timed on them; as many as the budget
        says (the last timed call and three others), each left out where the worker cannot hold its
        reference outputs."""
        count = self.budget.timed_checks if self.budget is not None else None
        count = TIMED_SETS if count is None else max(0, int(count))
        for k in range(count):
            if not self.room_for("timed"):
                break
            try:
                make = self.drawer(base, self.seeds["timed"] + 7919 * k)
                self.run_set(plan, InputSet(f"timed:{k}", "timed", "base", make, None, []))
            except RefFailed as e:
                self.child.note(f"timed inputs {k} skipped: the reference failed on them ({_cause(e)[:200]})")
                break

    def dtype_set(self, plan: Plan, base: Any) -> None:
        halves = HALF_DTYPES if self.device == "cuda" else CPU_HALF_DTYPES
        make = self.drawer(base, self.seeds["inputs"])
        probe = make()
        if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in probe):
            self.child.note("variation dtype skipped: the task has no floating-point inputs")
            return
        del probe
        ref = plan.models["base"].ref
        if self.device == "cpu":
            self.child.note("variation dtype: float16 only on the CPU (the interpreter has no bfloat16 matmul)")
        for dtype in halves:
            key = f"base@{dtype_name(dtype)}"
            try:
                plan.models[key] = ModelSpec(plan.models["base"].init_inputs, plan.models["base"].state,
                                             copy.deepcopy(ref).to(dtype), dtype)
                s = InputSet(f"dtype:{dtype_name(dtype)}", "full", key,
                             self.drawer(base, self.seeds["inputs"], lambda xs, d=dtype: cast_floats(xs, d)), None, [])
                if self.run_set(plan, s, require_finite=True, alt_dtype=dtype):
                    plan.models[key].ref = None  # the candidate phase never runs it: its memory is the candidate's
                    return
                self.child.note(f"variation dtype: the reference gives non-finite or non-{dtype_name(dtype)} outputs "
                                f"in {dtype_name(dtype)}")
            except RefFailed as e:
                self.child.note(f"variation dtype: the reference does not run in {dtype_name(dtype)} ({_cause(e)[:120]})")
            plan.models.pop(key, None)
        self.child.note("variation dtype skipped: the reference runs in no half dtype with finite outputs")

    def float32_reference(self, href: torch.nn.Module, inputs: list[Any], outs: list[Any]) -> list[Any] | None:
        """The half-precision model's weights and inputs, widened and run in float32, outputs rounded
        back: what a kernel that accumulates in float32 computes. None where it does not apply."""
        try:
            r32 = copy.deepcopy(href).to(torch.float32)
            raw = self.run_ref(r32, cast_floats(inputs, torch.float32))
            del r32
        except RefFailed:
            return None
        if len(raw) != len(outs) or not all(isinstance(a, torch.Tensor) for a in raw + outs):
            return None
        # a copy always: .to() hands back the same tensor where the dtype already matches (bool, integer
        # outputs), and scrubbing `raw` would then wipe the float32 reference before it is sent
        alt = [a.to(o.dtype, copy=True) for a, o in zip(raw, outs)]
        scrub(raw, set())
        if not self.finite(alt) or any(a.shape != o.shape for a, o in zip(alt, outs)):
            return None
        return alt

    # ---------------------------------------------------------------- to the worker

    # how many original-sized outputs each set adds to what the worker holds
    SET_SIZES = {"seed": 1.0, "offset": 1.0, "dtype": 2.0, "timed": 1.0}  # dtype: a half set and its float32 reference

    def room_for(self, name: str) -> bool:
        """Whether the worker can hold set `name`'s reference outputs beside those sent so far
        (Budget.reference_bytes); if not, the set is left out with a note."""
        if self.budget is not None and name in self.budget.skip_sets:
            self.child.note(f"variation {name} skipped: with it the task would not fit this machine's memory "
                            f"({self.budget.note})")
            return False
        limit = self.budget.reference_bytes if self.budget is not None else 0
        if not limit or not self.original_out_bytes:
            return True
        size = (self.budget.larger_growth or self.budget.larger_factor) if name == "larger" \
            else self.SET_SIZES.get(name, 1.0)
        need = int(size * self.original_out_bytes)
        if self.sent_bytes + need <= limit:
            return True
        self.child.note(f"variation {name} skipped: its reference outputs ({need / 2**30:.1f} GiB) would not fit "
                        f"beside the {self.sent_bytes / 2**30:.1f} GiB held already (this job may hold "
                        f"{limit / 2**30:.1f} GiB of the host's memory)")
        return False

    def send_ref(self, plan: Plan, s: InputSet, inputs: list[Any], outs: list[Any],
                 alt: list[Any] | None = None, tf32: list[Any] | None = None) -> None:
        blanks = self.child.blanks([(tuple(o.shape), o.dtype) for o in [*outs, *(alt or [])] if is_plain_tensor(o)])
        try:
            metas, blobs = self.child.encode(outs, blanks)
            out_bytes = sum(o.numel() * o.element_size() for o in outs if is_plain_tensor(o))
            if s.name == "original":
                self.original_out_bytes = out_bytes
            self.sent_bytes += out_bytes * (2 if alt else 1)
            header: M.RefFrame = {"type": M.REF, "name": s.name, "stage": s.stage, "outputs": metas,
                                  "inputs": describe_inputs(inputs), "magnitudes": [mean_abs(o) for o in outs],
                                  "heavy_ops": s.heavy_ops, "heavy_dtypes": s.heavy_dtypes}
            if tf32 is not None:
                header["tf32_error"] = tf32
            if alt is not None:
                header["alt_outputs"], alt_blobs = self.child.encode(alt, blanks)
                blobs = blobs + alt_blobs
        finally:
            release_blanks(blanks)
        self.child.mark(f"encoded:{s.name}")
        self.ch.send(header, blobs)
        del blobs
        self.child.mark(f"sent:{s.name}")
        keep = {p.untyped_storage().data_ptr() for m in plan.models.values() if m.ref is not None
                for p in m.ref.state_dict().values()}
        keep |= {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        scrub(outs, keep)
        if alt is not None:
            scrub(alt, keep)  # no reference result stays behind in memory a candidate could read
        s.out_specs = [(tuple(o.shape), o.dtype) for o in outs if isinstance(o, torch.Tensor)]
        plan.sets.append(s)
        if self.collect:
            with self.child.off_gpu():
                self.send_inputs(s, inputs)
        self.child.mark(f"ref:{s.name}")

    def send_inputs(self, s: InputSet, inputs: list[Any]) -> None:
        """An input set, for the worker to keep with its reference outputs (reference_cache.py);
        anything a sealed file cannot hold exactly (a strided view, a tensor subclass, a nested
        list) makes the task one the worker does not cache."""
        metas, blobs = [], []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                if not (is_plain_tensor(x) and x.layout == torch.strided and x.is_contiguous()
                        and not x.requires_grad and not x.is_complex()):
                    self.collect = False
                    self.ch.send({"type": M.REF_UNCACHEABLE, "why": f"input {describe_inputs([x])}"})
                    return
                metas.append({"kind": "tensor", "dtype": dtype_name(x.dtype), "shape": list(x.shape)})
                blobs.append(raw_bytes(x.detach().to("cpu")))
            elif x is None or isinstance(x, (bool, int, float, str)):
                metas.append({"kind": "value", "value": x})
            else:
                self.collect = False
                self.ch.send({"type": M.REF_UNCACHEABLE, "why": f"input of type {type(x).__name__}"})
                return
        self.ch.send({"type": M.REF_INPUTS, "name": s.name, "model_key": s.model_key, "inputs": metas,
                      "out_specs": [[list(shape), dtype_name(dtype)] for shape, dtype in s.out_specs]}, blobs)

    @staticmethod
    def finite(outs: list[Any]) -> bool:
        return all(bool(torch.isfinite(o).all()) for o in outs
                   if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()))


def _cause(e: RefFailed) -> str:
    """What the task's code raised: the traceback from its own frames when there is one."""
    inner = e.__cause__
    if inner is not None and inner.__traceback__ is not None:
        return f"{e}\n{excerpt(inner)}"
    return str(e)
