"""What runs inside a candidate's process: reference first, then the candidate, stage by stage.

Order matters for trust. Everything the verdict compares against is produced BEFORE the
candidate's module is imported: the task module is executed, inputs for every variation are built,
the reference runs on clones of them, and its outputs go to the worker at once (then are
overwritten here). Only then (`ref_done`) is the candidate imported and run:

    compile   import the module, find ModelNew, build it under the reference's seed, copy the
              reference state_dict where names and shapes match
    tiny      the task at shrunk sizes
    full      original inputs and variations (scaled x2, another seed, larger shape, another dtype)
    timing    GPU only; the worker compares the last full outputs meanwhile and its verdict
              counts the timing only if every output was right (a wrong one ends the process)

Each candidate call runs under a fresh copy of its inputs, with the allocator poisoned, the launch
tracker and op census active; its outputs and those facts go to the worker, which judges. After
tiny and after full the child asks the worker (a gate) whether to go on; after full, on a GPU, it
times while the worker answers, and reads the answer before it reports the timing.

On the CPU every kernel launch is also compiled for CUDA before the interpreter runs it
(compile_check.py), as a GPU compiles it at its first launch: a launch that does not compile ends
the candidate with `compile_error`, and the judge counts it as not passing compile, whichever stage
made the launch.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
import mmap
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .compile_check import SM, LaunchCompiler, compile_failure_kind, compiler_available, interpreter_only
from .runtime_checks import (LaunchTracker, OpCensus, flatten_outputs, interpreter_autotune, is_plain_tensor,
                             perturb_host_allocator,
                             poison_allocator, same_bits, scrub)
from . import native_builds, shared_blobs
from .gpu_lock import GpuLock
from .protocol import ChildChannel
from .spares import inherited_fd
from .variations import (VARIATION_ORDER, cast_floats, cpu_copies, describe_inputs, larger_plan,
                         load_module_file, load_task_module, scaled, tiny_plans, to_device)

SEED = 42
OTHER_SEED = SEED + 1000
TASK_MODULE = "tritonrl_task"
CANDIDATE_MODULE = "tritonrl_candidate"
GPU_MEMORY_FRACTION = 0.9
HALF_DTYPES = (torch.float16, torch.bfloat16)
ERROR_CHARS = 3000
MAX_HOLDS_TRACED = 60  # GPU lock holds sent with TRITONRL_TRACE


@dataclass
class ModelSpec:
    """One model configuration both sides are built with."""

    init_inputs: list[Any]
    state: dict[str, torch.Tensor]  # the reference's initial weights (CPU copies)
    ref: torch.nn.Module | None  # None where it never runs (a cached half-precision set)
    dtype: torch.dtype | None = None  # cast after building (the dtype variation)


@dataclass
class InputSet:
    name: str  # tiny | original | scaled | seed | larger | dtype:float16 ...
    stage: str  # tiny | full
    model_key: str
    inputs: list[Any]  # CPU copies; every call gets fresh device copies
    out_specs: list[tuple[tuple[int, ...], torch.dtype]]


@dataclass
class Plan:
    models: dict[str, ModelSpec] = field(default_factory=dict)
    sets: list[InputSet] = field(default_factory=list)


class RefFailed(Exception):
    pass


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def classify(exc: BaseException, stage: str) -> str:
    """A machine reason for an exception raised by candidate code during `stage`."""
    msg = f"{type(exc).__name__}: {exc}"
    low = msg.lower()
    if isinstance(exc, SystemExit):
        return "exit_called"
    if isinstance(exc, MemoryError) or isinstance(exc, getattr(torch.cuda, "OutOfMemoryError", ())) \
            or "out of memory" in low or "can't allocate memory" in low or "cannot allocate memory" in low:
        return "out_of_memory"
    accel = getattr(torch, "AcceleratorError", None)
    if (accel is not None and isinstance(exc, accel)) or "cuda error" in low or "illegal memory access" in low \
            or "device-side assert" in low or "cudaerror" in low:
        return "cuda_error"
    # Triton rejected a kernel or a launch before running it (the same rule on both devices; the
    # interpreter's version of a compiler rule counts too): see compile_check
    if compile_failure_kind(exc) is not None:
        return "compile_error"
    return "compile_error" if stage == "compile" else "runtime_error"


def _excerpt(exc: BaseException) -> str:
    """The traceback from the candidate's first frame on (the harness frames above it say nothing)."""
    tb = exc.__traceback__
    walk = tb
    while walk is not None and not walk.tb_frame.f_code.co_filename.endswith(CANDIDATE_MODULE + ".py"):
        walk = walk.tb_next
    text = "".join(traceback.format_exception(type(exc), exc, walk or tb))
    return text[-ERROR_CHARS:]


# --------------------------------------------------------------------------- encoding


def encode_outputs(outs: list[Any], seal: bool = False, blanks: dict[int, list[shared_blobs.BlankBlob]] | None = None
                   ) -> tuple[list[dict[str, Any]], list[Any]]:
    """Each output's description and raw bytes. With `seal` (a channel that passes memfds), outputs
    of SHARE_MIN_BYTES and more are copied from wherever they live (the GPU) straight into a sealed
    memfd, one copy instead of device -> host buffer -> memfd (shared_blobs.SealedBlob), into one of
    `blanks` (memfds made ahead, by size: see blanks_for) where one of the right size is left."""
    metas, blobs = [], []
    for o in outs:
        device = None
        if isinstance(o, (bool, int, float)) and not isinstance(o, torch.Tensor):
            o, device = torch.tensor(o), "any"  # a Python number lives on no device
        if not is_plain_tensor(o):
            metas.append({"kind": "other", "type": type(o).__name__})
            continue
        t = o.detach()
        metas.append({"kind": "tensor", "dtype": dtype_name(t.dtype), "shape": list(t.shape),
                      "device": device or o.device.type})
        if t.is_complex():
            t = torch.view_as_real(t)
        nbytes = t.numel() * t.element_size()
        if seal and nbytes >= shared_blobs.SHARE_MIN_BYTES:
            flat = t.contiguous().reshape(-1).view(torch.uint8)

            def fill(view: memoryview, flat: torch.Tensor = flat) -> None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # frombuffer over a mapping: written once, here
                    torch.frombuffer(view, dtype=torch.uint8).copy_(flat)

            ready = (blanks or {}).get(nbytes)
            blank = ready.pop() if ready else shared_blobs.BlankBlob(nbytes)
            blobs.append(blank.seal(fill))
            continue
        t = t.to("cpu").contiguous()
        blobs.append(raw_bytes(t))
    return metas, blobs


def blanks_for(specs: list[tuple[tuple[int, ...], torch.dtype]]) -> dict[int, list[shared_blobs.BlankBlob]]:
    """Memfds, with their pages populated, for the outputs these specs describe that will travel
    as memfds: made before the GPU section that fills them (release_blanks frees those not used)."""
    out: dict[int, list[shared_blobs.BlankBlob]] = {}
    for shape, dtype in specs:
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if nbytes >= shared_blobs.SHARE_MIN_BYTES:
            try:
                blank = shared_blobs.BlankBlob(nbytes)
            except OSError:
                break  # no memory for it now: encoding makes its own, where a failure is the candidate's
            out.setdefault(nbytes, []).append(blank)
    return out


def release_blanks(blanks: dict[int, list[shared_blobs.BlankBlob]]) -> None:
    for ready in blanks.values():
        for blank in ready:
            blank.close()
    blanks.clear()


class Child:
    def __init__(self, job: dict[str, Any], ch: ChildChannel):
        self.job = job
        self.collect = False  # send the inputs too, for the worker's reference cache
        self.tiny_overrides: dict[str, int] | None = None
        self.ch = ch
        self.s = job["settings"]
        self.device = "cuda" if job["device"] == "cuda" else "cpu"
        self.workdir = os.getcwd()
        self.source = job["task_source"]
        self.compiler: LaunchCompiler | None = None
        self.gpu_lock: GpuLock | None = None
        self.tracing = bool(os.environ.get("TRITONRL_TRACE"))  # a diagnostic: see mark()

    # ---------------------------------------------------------------- setup

    def setup(self) -> None:
        self.gpu_lock = None
        if self.device == "cuda":
            torch.cuda.set_device(0)
            sharers = max(1, int(os.environ.get("TRITONRL_GPU_SHARERS", "1")))
            torch.cuda.set_per_process_memory_fraction(GPU_MEMORY_FRACTION / sharers)
            if os.environ.get("TRITONRL_GPU_LOCK"):
                self.gpu_lock = GpuLock(os.environ["TRITONRL_GPU_LOCK"])
            # Triton's C helper modules come built from the worker, not compiled again here
            native_builds.install(self.ch.request, self.note, around=self.off_gpu)
        else:
            torch.set_num_threads(max(1, int(self.job.get("threads", 1))))

    def gpu_section(self) -> Any:
        """Hold the GPU shared while this process may have work on it (gpu_lock.py)."""
        return self.gpu_lock.shared() if self.gpu_lock else contextlib.nullcontext()

    @contextlib.contextmanager
    def off_gpu(self) -> Any:
        """CPU-only work inside a GPU section (drawing inputs on the CPU, copying them for the worker):
        the shared hold is given up meanwhile, after a device-wide sync, so a timer elsewhere waits
        for GPU work in flight and not for this (gpu_lock.py)."""
        if self.gpu_lock is None or self.gpu_lock.held != "shared":
            yield
            return
        torch.cuda.synchronize()
        with self.gpu_lock.released():
            yield

    def release_gpu_while_compiling(self) -> None:
        """A kernel compile is CPU work: give the shared hold up meanwhile, after a device-wide sync,
        so a timer elsewhere need not wait for it."""
        from triton.runtime.jit import JITFunction

        original = getattr(JITFunction, "_do_compile", None)
        if original is None or self.gpu_lock is None:
            return

        def _do_compile(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            with self.off_gpu():
                return original(fn_self, *args, **kwargs)

        JITFunction._do_compile = _do_compile

    def note(self, text: str) -> None:
        self.ch.send({"type": "note", "text": text})

    def mark(self, label: str, t: float | None = None) -> None:
        """With TRITONRL_TRACE set (benchmarks/verifier.py --trace): tell the worker when this point
        was reached (`t`, else now) and how long this process has waited for the GPU lock so far."""
        if self.tracing:
            self.ch.send({"type": "mark", "label": label, "t": time.monotonic() if t is None else t,
                          "lock_wait": self.gpu_lock.waited_s if self.gpu_lock else 0.0})

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def build(self, cls: type, init_inputs: list[Any]) -> torch.nn.Module:
        torch.manual_seed(SEED)
        return cls(*init_inputs)

    def reference_model(self, module: Any, init: list[Any] | None = None) -> ModelSpec:
        """The task module's Model built from its init inputs under the seed, on the device, with a
        CPU copy of its initial weights (for the candidate's)."""
        with self.off_gpu():  # a KernelBench Model initialises its weights on the CPU (no GPU hold for that)
            init = list(module.get_init_inputs()) if init is None else init
            ref = self.build(module.Model, init)
            state = {k: v.detach().to("cpu", copy=True) for k, v in ref.state_dict().items()}
        return ModelSpec(init, state, ref.to(self.device))

    def make_inputs(self, module: Any, seed: int) -> list[Any]:
        # KernelBench-format tasks draw their inputs on the CPU: no GPU hold for that (a task that
        # draws them on the GPU only shares it unannounced with a timer for that long)
        with self.off_gpu():
            torch.manual_seed(seed)
            return cpu_copies(list(module.get_inputs()))

    def run_ref(self, model: torch.nn.Module, inputs: list[Any]) -> list[Any]:
        out = flatten_outputs(model(*to_device(inputs, self.device)))
        self.sync()
        bad = [type(o).__name__ for o in out if not isinstance(o, (torch.Tensor, bool, int, float))]
        if bad:
            raise RefFailed(f"the reference returned {', '.join(bad)}, not tensors")
        return out

    def encode(self, outs: list[Any], blanks: dict[int, list[shared_blobs.BlankBlob]] | None = None
               ) -> tuple[list[dict[str, Any]], list[Any]]:
        """encode_outputs, large outputs sealed straight from the device where the channel passes memfds."""
        return encode_outputs(outs, seal=self.ch.blob_sock is not None, blanks=blanks)

    def blanks(self, specs: list[tuple[tuple[int, ...], torch.dtype]]) -> dict[int, list[shared_blobs.BlankBlob]]:
        """blanks_for these output specs where outputs travel as memfds, made off the GPU lock."""
        if self.ch.blob_sock is None or self.device != "cuda":
            return {}
        with self.off_gpu():
            return blanks_for(specs)

    def send_ref(self, plan: Plan, name: str, stage: str, key: str, inputs: list[Any], outs: list[Any],
                 alt: list[Any] | None = None) -> None:
        blanks = self.blanks([(tuple(o.shape), o.dtype) for o in [*outs, *(alt or [])] if is_plain_tensor(o)])
        try:
            metas, blobs = self.encode(outs, blanks)
            header = {"type": "ref", "name": name, "stage": stage, "outputs": metas,
                      "inputs": describe_inputs(inputs), "magnitudes": [_mean_abs(o) for o in outs]}
            if alt is not None:
                header["alt_outputs"], alt_blobs = self.encode(alt, blanks)
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
            with self.off_gpu():
                self.send_inputs(name, key, inputs, specs)
        self.mark(f"ref:{name}")

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

    # ---------------------------------------------------------------- reference phase

    def reference_phase(self) -> Plan | None:
        cached = self.job.get("reference_cache")
        if cached:
            plan = self.cached_reference_phase(cached)
            if plan is not None:
                return plan
            self.ch.send({"type": "ref_reset"})  # the worker's copy does not fit: compute our own
        plan = Plan()
        self.collect = bool(self.job.get("collect_reference"))
        try:
            base = load_task_module(self.source, self.workdir, TASK_MODULE)
            plan.models["base"] = self.reference_model(base)
            self.mark("ref_model")
            original = self.make_inputs(base, SEED)
            original_outs = self.run_ref(plan.models["base"].ref, original)
        except BaseException as e:
            self.ch.send({"type": "ref_error", "error": _excerpt(e)})
            return None

        self.tiny_reference(plan, plan.models["base"].init_inputs, original)

        wanted = VARIATION_ORDER[: max(1, int(self.s.get("num_variations", 5)))]
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
                self.note(f"variation {name} skipped: the reference failed on it "
                          f"({type(e).__name__}: {str(e)[:200]})")
        if self.collect:
            self.ch.send({"type": "ref_models", "tiny_overrides": self.tiny_overrides,
                          "digests": model_digests(plan.models)})
        return plan

    def cached_reference_phase(self, cached: dict[str, Any]) -> Plan | None:
        """The plan from the worker's copy of this task's reference phase (reference_cache.py):
        inputs mapped read-only from the sealed files it kept, reference outputs already with the
        worker. The models are built here as always and must match the cached ones bit for bit
        (a task whose weights are not reproducible gets its own reference run); None if not."""
        try:
            plan = Plan()
            base = load_task_module(self.source, self.workdir, TASK_MODULE)
            plan.models["base"] = self.reference_model(base)
            overrides = cached.get("tiny_overrides")
            digests = cached["digests"]
            if "tiny" in digests and overrides:
                module = load_task_module(self.source, self.workdir, TASK_MODULE + "_tiny", overrides)
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
            self.note(f"the worker's cached reference was not usable ({type(e).__name__}: {str(e)[:200]}); "
                      "ran the reference here")
            return None

    def tiny_reference(self, plan: Plan, init: list[Any], original: list[Any]) -> None:
        for label, overrides in tiny_plans(self.source):
            try:
                module = load_task_module(self.source, self.workdir, TASK_MODULE + "_tiny", overrides)
                tinit = list(module.get_init_inputs())
                key = "base"
                if not _same_values(tinit, init):
                    plan.models["tiny"] = self.reference_model(module, tinit)
                    key = "tiny"
                inputs = self.make_inputs(module, SEED)
                outs = self.run_ref(plan.models[key].ref, inputs)
            except BaseException as e:
                plan.models.pop("tiny", None)
                self.note(f"tiny: {label} rejected by the reference ({type(e).__name__}); trying fewer shrinks")
                continue
            self.note(f"tiny: {label}")
            self.tiny_overrides = overrides if key == "tiny" else None
            self.send_ref(plan, "tiny", "tiny", key, inputs, outs)
            return
        self.note("tiny: no size constant could shrink; ran the task's own sizes")
        self.send_ref(plan, "tiny", "tiny", "base", original, self.run_ref(plan.models["base"].ref, original))

    def value_variation(self, plan: Plan, name: str, inputs: list[Any], originally_finite: bool) -> None:
        outs = self.run_ref(plan.models["base"].ref, inputs)
        if originally_finite and not self.finite(outs):
            self.note(f"variation {name} skipped: the reference gives non-finite outputs on it")
            return
        self.send_ref(plan, name, "full", "base", inputs, outs)

    def larger_variation(self, plan: Plan) -> None:
        choice = larger_plan(self.source)
        if choice is None:
            self.note("variation larger skipped: no size constant outside get_init_inputs() to enlarge")
            return
        const, value = choice
        module = load_task_module(self.source, self.workdir, TASK_MODULE + "_larger", {const: value})
        inputs = self.make_inputs(module, SEED)
        outs = self.run_ref(plan.models["base"].ref, inputs)
        self.send_ref(plan, "larger", "full", "base", inputs, outs)
        self.note(f"variation larger: {const}={value}")

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
            self.note("variation dtype skipped: no GPU (the interpreter has no bf16)")
            return
        if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in original):
            self.note("variation dtype skipped: the task has no floating-point inputs")
            return
        for dtype in HALF_DTYPES:
            try:
                href = copy.deepcopy(ref).to(dtype)
                inputs = cast_floats(original, dtype)
                outs = self.run_ref(href, inputs)
            except BaseException as e:
                self.note(f"variation dtype: the reference does not run in {dtype_name(dtype)} ({type(e).__name__})")
                continue
            if not self.finite(outs) or not all(o.dtype == dtype for o in outs
                                                 if isinstance(o, torch.Tensor) and o.is_floating_point()):
                self.note(f"variation dtype: the reference gives non-finite or non-{dtype_name(dtype)} outputs "
                          f"in {dtype_name(dtype)}")
                continue
            key = f"base@{dtype_name(dtype)}"
            base = plan.models["base"]
            plan.models[key] = ModelSpec(base.init_inputs, base.state, href, dtype)
            self.send_ref(plan, f"dtype:{dtype_name(dtype)}", "full", key, inputs, outs,
                          alt=self.float32_reference(href, inputs, outs, dtype))
            return
        self.note("variation dtype skipped: the reference runs in no half dtype with finite outputs")

    # ---------------------------------------------------------------- candidate phase

    def candidate_phase(self, plan: Plan) -> None:
        path = os.path.join(self.workdir, CANDIDATE_MODULE + ".py")
        census = OpCensus()
        tracker = LaunchTracker(path, census)
        tracker.install()
        mode = self.s.get("compile_check")
        if self.device == "cpu" and mode in ("frontend", "full"):
            # every launch is compiled for CUDA before the interpreter runs it, as a GPU would
            available, why = compiler_available()
            if available:
                self.compiler = LaunchCompiler(mode, path, self.note)
                tracker.on_launch = self.compiler.check
            else:
                self.note(f"compile check skipped: {why.splitlines()[0] if why else 'no compiler'}")
        if self.device == "cpu":
            interpreter_autotune()
            # outputs live in host memory: from here on glibc fills every block it hands out, so an
            # output a kernel never wrote cannot hold a freed reference result (GPU: see call_candidate)
            perturb_host_allocator()
        elif self.device == "cuda":
            self.release_gpu_while_compiling()
        with self.gpu_section():  # module-level code may already use the GPU
            models = self.import_and_build(path, plan)
        if models is None:
            return
        self.mark("built")
        self.ch.send({"type": "stage", "stage": "compile"})

        for stage in ("tiny", "full"):
            for s in plan.sets:
                if s.stage != stage:
                    continue
                blanks = self.blanks(s.out_specs)  # the expected outputs' memfds, made off the GPU lock
                try:
                    with self.gpu_section():
                        ok = self.call_candidate(models[s.model_key], s, tracker, census, blanks)
                finally:
                    release_blanks(blanks)
                if not ok:
                    return
                self.mark(f"cand:{s.name}")
            if stage == "full" and self.timing_wanted():
                # the worker compares the last outputs while this process times: timing sends nothing
                # before the answer, and a wrong output ends this process where it is (GPU lock and all)
                self.ch.ask(stage)
                break
            if not self.ch.gate(stage):  # the worker judges meanwhile; this process holds no GPU
                return
            self.mark(f"gate:{stage}")
        if self.compiler is not None and self.compiler.compiled:
            self.note(f"compile check: {self.compiler.compiled} distinct launch(es) compiled for CUDA "
                      f"sm_{SM} ({self.compiler.mode})")
        if self.timing_wanted():
            if not self.timing(plan, models):
                return
        if self.tracing and self.gpu_lock is not None and self.gpu_lock.holds:
            self.ch.send({"type": "mark", "label": "holds", "holds": self.gpu_lock.holds[-MAX_HOLDS_TRACED:]})
        self.ch.send({"type": "done"})

    def import_and_build(self, path: str, plan: Plan) -> dict[str, torch.nn.Module] | None:
        """The candidate's module imported and ModelNew built for every model spec; None (after saying
        why) when that fails."""
        try:
            with open(path, "w") as f:
                f.write(self.job["code"])
            module = load_module_file(path, CANDIDATE_MODULE)
            cls = getattr(module, "ModelNew", None)
            if not isinstance(cls, type):
                self.ch.send({"type": "error", "stage": "compile", "reason": "compile_error",
                              "error": "the module defines no class ModelNew"})
                return None
        except BaseException as e:
            self.ch.send({"type": "error", "stage": "compile", "reason": classify(e, "compile"), "error": _excerpt(e)})
            return None
        models: dict[str, torch.nn.Module] = {}
        try:
            for key, spec in plan.models.items():
                models[key] = self.build_candidate(cls, spec)
        except BaseException as e:
            reason = classify(e, "compile")
            self.ch.send({"type": "error", "stage": "compile", "reason": reason,
                          "error": f"ModelNew(*get_init_inputs()) failed:\n{_excerpt(e)}"})
            return None
        return models

    def build_candidate(self, cls: type, spec: ModelSpec) -> torch.nn.Module:
        model = self.build(cls, copy.deepcopy(spec.init_inputs))
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
            self.ch.send({"type": "error", "stage": stage, "reason": classify(e, stage), "error": _excerpt(e)})
            return False
        tracker.begin()
        try:
            with census:
                out = model(*inputs)
            self.sync()
        except BaseException as e:
            tracker.end()
            if interpreter_only(e):
                self.note("the interpreter rejected a launch that compiles for CUDA (an interpreter limitation): "
                          "scored as a runtime error")
            self.ch.send({"type": "error", "stage": stage, "variation": s.name, "reason": classify(e, stage),
                          "error": _excerpt(e)})
            return False
        tracker.end()
        try:
            outs = flatten_outputs(out)
            unchanged = len(inputs) == len(before) and all(same_bits(a, b) for a, b in zip(inputs, before))
            metas, blobs = self.encode(outs, blanks)
        except BaseException as e:
            self.ch.send({"type": "error", "stage": stage, "variation": s.name, "reason": classify(e, stage),
                          "error": _excerpt(e)})
            return False
        self.ch.send({"type": "cand", "name": s.name, "outputs": metas, "launches": tracker.launches,
                      "kernels": dict(tracker.kernels), "foreign": dict(tracker.foreign),
                      "ops": dict(census.ops), "inputs_unchanged": bool(unchanged)}, blobs)
        return True

    def timing_wanted(self) -> bool:
        return bool(self.s.get("timing_enabled")) and self.device == "cuda"

    def timing(self, plan: Plan, models: dict[str, torch.nn.Module]) -> bool:
        """Time the candidate against the reference, the full stage's gate asked and not yet
        answered; False where that answer is no (nothing more is sent then)."""
        from .timing import time_pair

        original = next(s for s in plan.sets if s.name == "original")
        ref, cand = plan.models["base"].ref, models["base"]
        try:
            ref_in = to_device(original.inputs, self.device)
            cand_in = to_device(original.inputs, self.device)
            with self.gpu_lock.alone() if self.gpu_lock else contextlib.nullcontext():
                self.mark("timing_lock")
                times = time_pair(lambda: ref(*ref_in), lambda: cand(*cand_in),
                                  int(self.s.get("timing_warmup", 10)), int(self.s.get("timing_trials", 50)))
            failure = None
        except BaseException as e:
            failure = {"type": "error", "stage": "timing", "reason": classify(e, "timing"), "error": _excerpt(e)}
        if not self.ch.answer():
            return False
        self.mark("judged")
        if failure is not None:
            self.ch.send(failure)
            return False
        self.ch.send({"type": "timing", "ref_ms": times["ref"], "cand_ms": times["cand"],
                      "device_name": torch.cuda.get_device_name(0),
                      "gpu_wait_s": self.gpu_lock.waited_alone_s if self.gpu_lock else 0.0})
        return True


def _mean_abs(out: Any) -> float:
    """Mean absolute value of an output's finite entries, on its own device (the judge scales its
    absolute tolerance by how much this grows on an input set; 0 for anything else)."""
    if not isinstance(out, torch.Tensor) or not (out.is_floating_point() or out.is_complex()) or out.numel() == 0:
        return 0.0
    mag = out.detach().abs()
    total = float(mag.sum(dtype=torch.float64))
    if not math.isfinite(total):
        mag = mag[torch.isfinite(mag)]
        total = float(mag.sum(dtype=torch.float64))
    return total / mag.numel() if mag.numel() else 0.0


def raw_bytes(t: torch.Tensor) -> memoryview | bytes:
    """A contiguous CPU tensor's bytes, without a copy."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy()) if t.numel() else b""


def model_digests(models: dict[str, ModelSpec]) -> dict[str, str]:
    """Identity of each built reference model: its init inputs, weights (names, dtypes, shapes,
    bytes) and the dtype it is cast to. Models that share their weights (the dtype variation's and
    the base) hash them once."""
    state_hashes: dict[int, bytes] = {}
    out = {}
    for key, spec in models.items():
        if id(spec.state) not in state_hashes:
            h = hashlib.sha256()
            for k, v in spec.state.items():
                h.update(f"{k}:{dtype_name(v.dtype)}:{list(v.shape)}".encode())
                h.update(raw_bytes(v.detach().contiguous()))
            state_hashes[id(spec.state)] = h.digest()
        h = hashlib.sha256(repr((dtype_name(spec.dtype) if spec.dtype else None,
                                 [x if not isinstance(x, torch.Tensor) else None for x in spec.init_inputs])).encode())
        for x in spec.init_inputs:
            if isinstance(x, torch.Tensor):
                h.update(raw_bytes(x.detach().to("cpu").contiguous()))
        h.update(state_hashes[id(spec.state)])
        out[key] = h.hexdigest()
    return out


def mapped_input(desc: dict[str, Any]) -> Any:
    """One input of a cached set: a read-only tensor over the worker's sealed file, or a value."""
    if desc["kind"] == "value":
        return desc["value"]
    dtype = getattr(torch, desc["dtype"])
    shape = tuple(desc["shape"])
    if desc.get("fd") is None:
        return torch.empty(shape, dtype=dtype)  # no elements
    # mapped with its pages at once: faulting 4 KiB at a time costs ~10 ms per 32 MB on first use
    mm = mmap.mmap(inherited_fd(desc["fd"]), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                   prot=mmap.PROT_READ)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "buffer is not writable": nothing writes it, copies are made
        return torch.frombuffer(mm, dtype=dtype).reshape(shape)


def _same_values(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and same_bits(x, y)):
                return False
        elif x != y:
            return False
    return True


WARMED: dict[str, float] = {}  # in a spare: when its warm-up started and ended (for TRITONRL_TRACE)


def warm_child(device: str, job_waiting: Callable[[], bool] = lambda: False) -> None:
    """What every child on this device does before anything of its job, done by a spare while it
    waits for one (spares.Spare): on a GPU, create the CUDA context (as `Child.setup` does, outside
    the GPU lock) and the cuBLAS and cuDNN handles (their GPU work under the shared lock, like a
    candidate's). Nothing of it is a candidate's or a reference's: the memory it used holds ones.
    The handles are made at first use anyway, so once a job waits (`job_waiting()`) they are left
    to it: most tasks need neither, and making them can wait on the GPU lock behind a timer."""
    WARMED["spare_forked"] = time.monotonic()
    if device != "cuda":
        return
    torch.cuda.set_device(0)
    torch.cuda.init()
    torch.cuda.mem_get_info()  # the context exists from here on
    WARMED["spare_context"] = time.monotonic()
    if job_waiting():
        return
    lock = GpuLock(os.environ["TRITONRL_GPU_LOCK"]) if os.environ.get("TRITONRL_GPU_LOCK") else None
    try:
        with lock.shared() if lock is not None else contextlib.nullcontext(), torch.no_grad():
            x = torch.ones(64, 64, device="cuda")
            y = x @ x
            z = torch.nn.functional.conv2d(torch.ones(1, 4, 8, 8, device="cuda"), torch.ones(4, 4, 3, 3, device="cuda"))
            torch.cuda.synchronize()
            del x, y, z
        WARMED["spare_warm"] = time.monotonic()
    finally:
        if lock is not None:
            lock.close()


def child_main(job: dict[str, Any], ch: ChildChannel) -> None:
    """Entry point of a candidate's process (called by the sandbox after fork). With
    TRITONRL_PROFILE_DIR set (a diagnostic: benchmarks/verifier_profile.py --cprofile), the whole
    of it runs under cProfile, saved there as child-<pid>.prof."""
    folder = os.environ.get("TRITONRL_PROFILE_DIR")
    if not folder:
        return _child_main(job, ch)
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.runcall(_child_main, job, ch)
    finally:
        prof.dump_stats(os.path.join(folder, f"child-{os.getpid()}.prof"))


def _child_main(job: dict[str, Any], ch: ChildChannel) -> None:
    child = Child(job, ch)
    for label, t in WARMED.items():
        child.mark(label, t)
    child.setup()
    child.mark("setup")
    with torch.no_grad():
        with child.gpu_section():
            plan = child.reference_phase()
        if plan is None:
            return
        for name in [m for m in sys.modules if m.startswith(TASK_MODULE)]:
            sys.modules.pop(name, None)
        ch.send({"type": "ref_done"})
        child.candidate_phase(plan)
