"""The reference phase: everything the verdict compares against, made before the candidate is imported.

The task module is executed, its `Model` built under the seed, and for every input set (tiny
sizes first, then the original inputs and their variations: variations.py) the inputs are drawn,
the reference runs on fresh copies of them and its outputs go to the worker at once, then are
overwritten here (`scrub`), so no reference result stays in memory the candidate could read. The
result is the `Plan` (input_sets.py) the candidate phase runs. With the worker's copy of this
task's reference phase (reference_cache.py) only the models are built, and checked against it.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from .child_context import SEED, Child, excerpt
from .encoding import dtype_name, mean_abs, raw_bytes, release_blanks
from .input_sets import InputSet, ModelSpec, Plan, mapped_input, model_digests, same_values
from .runtime_checks import flatten_outputs, is_plain_tensor, scrub
from .variations import (VARIATION_ORDER, cast_floats, cpu_copies, describe_inputs, larger_plan, load_task_module,
                         scaled, tiny_plans, to_device)

OTHER_SEED = SEED + 1000  # the "seed" input set's
TASK_MODULE = "tritonrl_task"
HALF_DTYPES = (torch.float16, torch.bfloat16)


class RefFailed(Exception):
    """The reference returned something the verifier cannot compare (not tensors)."""


class ReferencePhase:
    """Builds the plan of one candidate's process; `run` returns it, or None after sending
    `ref_error` when the task's reference itself fails (an input set whose reference fails is
    skipped with a note instead)."""

    def __init__(self, child: Child):
        self.child = child
        self.ch = child.ch
        self.device = child.device
        self.collect = False  # send the inputs too, for the worker's reference cache
        self.tiny_overrides: dict[str, int] | None = None

    def run(self) -> Plan | None:
        cached = self.child.job.get("reference_cache")
        if cached:
            plan = self.cached(cached)
            if plan is not None:
                return plan
            self.ch.send({"type": "ref_reset"})  # the worker's copy does not fit: compute our own
        plan = Plan()
        self.collect = bool(self.child.job.get("collect_reference"))
        try:
            base = load_task_module(self.child.source, self.child.workdir, TASK_MODULE)
            plan.models["base"] = self.reference_model(base)
            self.child.mark("ref_model")
            original = self.make_inputs(base, SEED)
            original_outs = self.run_ref(plan.models["base"].ref, original)
        except BaseException as e:
            self.ch.send({"type": "ref_error", "error": excerpt(e)})
            return None

        self.tiny_reference(plan, plan.models["base"].init_inputs, original)

        wanted = VARIATION_ORDER[: max(1, int(self.child.settings.num_variations))]
        originally_finite = self.finite(original_outs)
        self.send_ref(plan, "original", "full", "base", original, original_outs)
        ref = plan.models["base"].ref
        for name in wanted[1:]:
            try:
                if name == "scaled":
                    self.value_variation(plan, "scaled", scaled(original, 2.0), originally_finite)
                elif name == "seed":
                    self.value_variation(plan, "seed", self.make_inputs(base, OTHER_SEED), originally_finite)
                elif name == "larger":
                    self.larger_variation(plan)
                elif name == "dtype":
                    self.dtype_variation(plan, ref, original)
            except BaseException as e:
                self.child.note(f"variation {name} skipped: the reference failed on it "
                                f"({type(e).__name__}: {str(e)[:200]})")
        if self.collect:
            self.ch.send({"type": "ref_models", "tiny_overrides": self.tiny_overrides,
                          "digests": model_digests(plan.models)})
        return plan

    def cached(self, cached: dict[str, Any]) -> Plan | None:
        """The plan from the worker's copy of this task's reference phase (reference_cache.py):
        inputs mapped read-only from the sealed files it kept, reference outputs already with the
        worker. The models are built here as always and must match the cached ones bit for bit
        (a task whose weights are not reproducible gets its own reference run); None if not."""
        try:
            plan = Plan()
            base = load_task_module(self.child.source, self.child.workdir, TASK_MODULE)
            plan.models["base"] = self.reference_model(base)
            overrides = cached.get("tiny_overrides")
            digests = cached["digests"]
            if "tiny" in digests and overrides:
                module = load_task_module(self.child.source, self.child.workdir, TASK_MODULE + "_tiny", overrides)
                plan.models["tiny"] = self.reference_model(module)
            for key in digests:
                if "@" in key:  # the half-precision reference never runs here: its outputs are cached
                    spec = plan.models["base"]
                    plan.models[key] = ModelSpec(spec.init_inputs, spec.state, None,
                                                 getattr(torch, key.split("@", 1)[1]))
            if model_digests(plan.models) != digests:
                return None
            for entry in cached["sets"]:
                inputs = [mapped_input(d) for d in entry["inputs"]]
                specs = [(tuple(shape), getattr(torch, dtype)) for shape, dtype in entry["out_specs"]]
                plan.sets.append(InputSet(entry["name"], entry["stage"], entry["model_key"], inputs, specs))
            return plan
        except BaseException as e:
            self.child.note(f"the worker's cached reference was not usable ({type(e).__name__}: "
                            f"{str(e)[:200]}); ran the reference here")
            return None

    def tiny_reference(self, plan: Plan, init: list[Any], original: list[Any]) -> None:
        for label, overrides in tiny_plans(self.child.source):
            try:
                module = load_task_module(self.child.source, self.child.workdir, TASK_MODULE + "_tiny", overrides)
                tinit = list(module.get_init_inputs())
                key = "base"
                if not same_values(tinit, init):
                    plan.models["tiny"] = self.reference_model(module, tinit)
                    key = "tiny"
                inputs = self.make_inputs(module, SEED)
                outs = self.run_ref(plan.models[key].ref, inputs)
            except BaseException as e:
                plan.models.pop("tiny", None)
                self.child.note(f"tiny: {label} rejected by the reference ({type(e).__name__}); trying fewer shrinks")
                continue
            self.child.note(f"tiny: {label}")
            self.tiny_overrides = overrides if key == "tiny" else None
            self.send_ref(plan, "tiny", "tiny", key, inputs, outs)
            return
        self.child.note("tiny: no size constant could shrink; ran the task's own sizes")
        self.send_ref(plan, "tiny", "tiny", "base", original, self.run_ref(plan.models["base"].ref, original))

    def value_variation(self, plan: Plan, name: str, inputs: list[Any], originally_finite: bool) -> None:
        outs = self.run_ref(plan.models["base"].ref, inputs)
        if originally_finite and not self.finite(outs):
            self.child.note(f"variation {name} skipped: the reference gives non-finite outputs on it")
            return
        self.send_ref(plan, name, "full", "base", inputs, outs)

    def larger_variation(self, plan: Plan) -> None:
        choice = larger_plan(self.child.source)
        if choice is None:
            self.child.note("variation larger skipped: no size constant outside get_init_inputs() to enlarge")
            return
        const, value = choice
        module = load_task_module(self.child.source, self.child.workdir, TASK_MODULE + "_larger", {const: value})
        inputs = self.make_inputs(module, SEED)
        outs = self.run_ref(plan.models["base"].ref, inputs)
        self.send_ref(plan, "larger", "full", "base", inputs, outs)
        self.child.note(f"variation larger: {const}={value}")

    def float32_reference(self, href: torch.nn.Module, inputs: list[Any], outs: list[Any],
                          dtype: torch.dtype) -> list[Any] | None:
        """The half-precision model's weights and inputs, widened and run in float32, outputs rounded
        back: what a kernel that accumulates in float32 computes. None where it does not apply."""
        try:
            r32 = copy.deepcopy(href).to(torch.float32)
            raw = self.run_ref(r32, cast_floats(inputs, torch.float32))
            del r32
        except BaseException:
            return None
        if len(raw) != len(outs) or not all(isinstance(a, torch.Tensor) for a in raw + outs):
            return None
        alt = [a.to(o.dtype) for a, o in zip(raw, outs)]
        scrub(raw, set())
        if not self.finite(alt) or any(a.shape != o.shape for a, o in zip(alt, outs)):
            return None
        return alt

    def dtype_variation(self, plan: Plan, ref: torch.nn.Module, original: list[Any]) -> None:
        if self.device != "cuda":
            self.child.note("variation dtype skipped: no GPU (the interpreter has no bf16)")
            return
        if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in original):
            self.child.note("variation dtype skipped: the task has no floating-point inputs")
            return
        for dtype in HALF_DTYPES:
            try:
                href = copy.deepcopy(ref).to(dtype)
                inputs = cast_floats(original, dtype)
                outs = self.run_ref(href, inputs)
            except BaseException as e:
                self.child.note(f"variation dtype: the reference does not run in {dtype_name(dtype)} "
                                f"({type(e).__name__})")
                continue
            if not self.finite(outs) or not all(o.dtype == dtype for o in outs
                                                 if isinstance(o, torch.Tensor) and o.is_floating_point()):
                self.child.note(f"variation dtype: the reference gives non-finite or non-{dtype_name(dtype)} "
                                f"outputs in {dtype_name(dtype)}")
                continue
            key = f"base@{dtype_name(dtype)}"
            base = plan.models["base"]
            plan.models[key] = ModelSpec(base.init_inputs, base.state, href, dtype)
            self.send_ref(plan, f"dtype:{dtype_name(dtype)}", "full", key, inputs, outs,
                          alt=self.float32_reference(href, inputs, outs, dtype))
            return
        self.child.note("variation dtype skipped: the reference runs in no half dtype with finite outputs")

    def reference_model(self, module: Any, init: list[Any] | None = None) -> ModelSpec:
        """The task module's Model built from its init inputs under the seed, on the device, with a
        CPU copy of its initial weights (for the candidate's)."""
        with self.child.off_gpu():  # a KernelBench Model initialises its weights on the CPU (no GPU hold for that)
            init = list(module.get_init_inputs()) if init is None else init
            ref = self.child.build(module.Model, init)
            state = {k: v.detach().to("cpu", copy=True) for k, v in ref.state_dict().items()}
        return ModelSpec(init, state, ref.to(self.device))

    def make_inputs(self, module: Any, seed: int) -> list[Any]:
        # KernelBench-format tasks draw their inputs on the CPU: no GPU hold for that (a task that
        # draws them on the GPU only shares it unannounced with a timer for that long)
        with self.child.off_gpu():
            torch.manual_seed(seed)
            return cpu_copies(list(module.get_inputs()))

    def run_ref(self, model: torch.nn.Module, inputs: list[Any]) -> list[Any]:
        out = flatten_outputs(model(*to_device(inputs, self.device)))
        self.child.sync()
        bad = [type(o).__name__ for o in out if not isinstance(o, (torch.Tensor, bool, int, float))]
        if bad:
            raise RefFailed(f"the reference returned {', '.join(bad)}, not tensors")
        return out

    def send_ref(self, plan: Plan, name: str, stage: str, key: str, inputs: list[Any], outs: list[Any],
                 alt: list[Any] | None = None) -> None:
        blanks = self.child.blanks([(tuple(o.shape), o.dtype) for o in [*outs, *(alt or [])] if is_plain_tensor(o)])
        try:
            metas, blobs = self.child.encode(outs, blanks)
            header = {"type": "ref", "name": name, "stage": stage, "outputs": metas,
                      "inputs": describe_inputs(inputs), "magnitudes": [mean_abs(o) for o in outs]}
            if alt is not None:
                header["alt_outputs"], alt_blobs = self.child.encode(alt, blanks)
                blobs = blobs + alt_blobs
        finally:
            release_blanks(blanks)
        self.ch.send(header, blobs)
        del blobs
        keep = {p.untyped_storage().data_ptr() for m in plan.models.values() if m.ref is not None
                for p in m.ref.state_dict().values()}
        keep |= {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        scrub(outs, keep)
        if alt is not None:
            scrub(alt, keep)  # no reference result stays behind in memory a candidate could read
        specs = [(tuple(o.shape), o.dtype) for o in outs if isinstance(o, torch.Tensor)]
        plan.sets.append(InputSet(name, stage, key, inputs, specs))
        if self.collect:
            with self.child.off_gpu():
                self.send_inputs(name, key, inputs, specs)
        self.child.mark(f"ref:{name}")

    def send_inputs(self, name: str, key: str, inputs: list[Any], specs: list[tuple[tuple[int, ...], Any]]) -> None:
        """An input set, for the worker to keep with its reference outputs (reference_cache.py);
        anything a sealed file cannot hold exactly (a strided view, a tensor subclass, a nested
        list) makes the task one the worker does not cache."""
        metas, blobs = [], []
        for x in inputs:
            if isinstance(x, torch.Tensor):
                if not (is_plain_tensor(x) and x.layout == torch.strided and x.is_contiguous()
                        and not x.requires_grad and not x.is_complex() and x.device.type == "cpu"):
                    self.collect = False
                    self.ch.send({"type": "ref_uncacheable", "why": f"input {describe_inputs([x])}"})
                    return
                metas.append({"kind": "tensor", "dtype": dtype_name(x.dtype), "shape": list(x.shape)})
                blobs.append(raw_bytes(x))
            elif x is None or isinstance(x, (bool, int, float, str)):
                metas.append({"kind": "value", "value": x})
            else:
                self.collect = False
                self.ch.send({"type": "ref_uncacheable", "why": f"input of type {type(x).__name__}"})
                return
        self.ch.send({"type": "ref_inputs", "name": name, "model_key": key, "inputs": metas,
                      "out_specs": [[list(shape), dtype_name(dtype)] for shape, dtype in specs]}, blobs)

    @staticmethod
    def finite(outs: list[Any]) -> bool:
        return all(bool(torch.isfinite(o).all()) for o in outs
                   if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()))
