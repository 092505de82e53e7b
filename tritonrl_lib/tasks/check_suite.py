"""A direct check of the built-in suite's reference solutions, without the verifier.

For each task it builds `Model` and `ModelNew` from the same seed, copies the reference state_dict
into the solution and compares outputs (torch.allclose) on: the original inputs, inputs x2, another
seed, batch_size doubled, every size constant doubled, eval mode, and each extra dtype asked for.
With `--compile-sm 90` it also compiles, for that CUDA architecture, every kernel launch it saw plus
the launches made at full sizes in float32, float16 and bfloat16 (recorded on the meta device, so
nothing is computed), with the same argument types and constexprs (ptxas ships with Triton, so no
GPU is needed): the interpreter accepts code the compiler rejects, and this catches it.

It is the suite author's quick loop and a GPU smoke test at full sizes; the verifier remains the
judge of record (tests/test_tasks_verified.py).

    python -m tritonrl_lib.tasks.check_suite                      # small sizes; interpreter if no GPU
    python -m tritonrl_lib.tasks.check_suite --only relu,matmul   # a few tasks (names or ids)
    python -m tritonrl_lib.tasks.check_suite --compile-sm 90      # + compile every launch for sm_90
    python -m tritonrl_lib.tasks.check_suite --size full --dtypes float32,float16,bfloat16  # on a GPU
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from ..core.env import env_set
from .builtin_suite import load_builtin
from .kb_format import init_constant_names, module_constants, rewrite_constants
from .task import Task

TOLERANCE = {"float32": 1e-2, "float16": 5e-2, "bfloat16": 5e-2}
SHARED_MEMORY_LIMIT = 232448  # bytes of shared memory one block may use on an H100 (sm_90)


@dataclass
class CheckResult:
    task_id: str
    ok: bool
    seconds: float
    first_seconds: float  # the original-inputs variation alone (includes first-call JIT work)
    failures: list[str] = field(default_factory=list)
    launches: list["Launch"] = field(default_factory=list)


@dataclass(frozen=True)
class Launch:
    """One kernel launch as the compiler sees it: kernel name, argument types, constexprs, options."""

    kernel: str
    signature: tuple[tuple[str, str], ...]
    constexprs: tuple[tuple[str, Any], ...]
    options: tuple[tuple[str, int], ...]


_TORCH_TO_TRITON = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int64": "i64",
                    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}
_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")


def _arg_type(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "*" + _TORCH_TO_TRITON[str(value.dtype).removeprefix("torch.")]
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    if isinstance(value, float):
        return "fp32"
    if value is None:
        return "constexpr"
    raise TypeError(f"cannot type kernel argument {value!r}")


class _LaunchRecorder:
    """Records the interpreter's kernel launches (names, argument types, constexprs) while active.

    With execute=False the kernels are not run at all, so tensors may live on the meta device:
    that is how full-size launches are recorded on a machine without a GPU.
    """

    def __init__(self, execute: bool = True) -> None:
        self.launches: list[Launch] = []
        self.execute = execute

    def __enter__(self) -> "_LaunchRecorder":
        from triton.runtime.interpreter import InterpretedFunction

        self._cls, self._orig = InterpretedFunction, InterpretedFunction.run
        recorder, orig = self, InterpretedFunction.run

        def run(fn_self, *args, grid, warmup, **kwargs):
            options = {k: kwargs.pop(k) for k in list(kwargs) if k in _LAUNCH_OPTIONS}
            params = inspect.signature(fn_self.fn).parameters
            bound = inspect.signature(fn_self.fn).bind(*args, **kwargs)
            bound.apply_defaults()
            sig, consts = [], []
            for name, value in bound.arguments.items():
                if "constexpr" in str(params[name].annotation) or value is None:
                    sig.append((name, "constexpr"))
                    consts.append((name, value))
                else:
                    sig.append((name, _arg_type(value)))
            recorder.launches.append(Launch(fn_self.fn.__name__, tuple(sig), tuple(consts),
                                            tuple(sorted(options.items()))))
            if recorder.execute:
                return orig(fn_self, *args, grid=grid, warmup=warmup, **kwargs, **options)
            return None

        InterpretedFunction.run = run
        return self

    def __exit__(self, *exc) -> None:
        self._cls.run = self._orig


def _import_source(source: str, tag: str, workdir: Path) -> ModuleType:
    """Import a module from source text through a real file, so Triton can read kernel sources."""
    path = workdir / f"{tag}_{uuid.uuid4().hex[:8]}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def _doubled(source: str, names: list[str]) -> str:
    consts = module_constants(source)
    return rewrite_constants(source, {n: consts[n] * 2 for n in names})


def _size_names(source: str) -> list[str]:
    fixed = init_constant_names(source)
    return [n for n, v in module_constants(source).items()
            if isinstance(v, int) and not isinstance(v, bool) and n not in fixed]


def _run_case(ref_mod: ModuleType, new_mod: ModuleType, *, seed: int, scale: float, dtype: Any, device: str,
              eval_mode: bool) -> str | None:
    """One comparison; returns a failure description or None."""
    import torch

    torch.manual_seed(seed)
    init = ref_mod.get_init_inputs()
    torch.manual_seed(seed)
    inputs = ref_mod.get_inputs()
    torch.manual_seed(seed)
    ref = ref_mod.Model(*init)
    new = new_mod.ModelNew(*init)
    missing = new.load_state_dict(ref.state_dict(), strict=False)
    if missing.missing_keys or missing.unexpected_keys:
        return f"state_dict mismatch: missing {missing.missing_keys}, unexpected {missing.unexpected_keys}"
    ref, new = ref.to(device=device, dtype=dtype), new.to(device=device, dtype=dtype)
    tol = TOLERANCE[str(dtype).removeprefix("torch.")]
    moved = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            x = x.to(device)
            if x.is_floating_point():
                x = (x * scale).to(dtype)
        moved.append(x)
    if eval_mode:
        # one training-mode call first, so that running statistics (BatchNorm) move away from their
        # initial values; the buffers must then agree, and eval mode must use them
        with torch.no_grad():
            ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in moved])
            new(*[x.clone() if isinstance(x, torch.Tensor) else x for x in moved])
        new_buffers = dict(new.named_buffers())
        for name, buf in ref.named_buffers():
            if name not in new_buffers or not torch.allclose(buf.float(), new_buffers[name].float(), atol=tol,
                                                              rtol=tol):
                return f"buffer {name} differs after a training-mode call"
        ref.eval()
        new.eval()
    originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in moved]
    with torch.no_grad():
        expected = ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in moved])
        got = new(*moved)
    for before, after in zip(originals, moved):
        if isinstance(before, torch.Tensor) and not torch.equal(before, after):
            return "the solution modified its input"
    if not isinstance(got, torch.Tensor):
        return f"returned {type(got).__name__}, expected a tensor"
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"output {tuple(got.shape)} {got.dtype} vs reference {tuple(expected.shape)} {expected.dtype}"
    if not torch.allclose(got.float(), expected.float(), atol=tol, rtol=tol):
        diff = (got.float() - expected.float()).abs()
        if dtype in (torch.float16, torch.bfloat16):
            # as the verifier does: PyTorch's half kernels (CUDA scans) may accumulate in half; the
            # same model widened to float32 on the same rounded inputs is an equally valid answer
            import copy

            with torch.no_grad():
                wide = copy.deepcopy(ref).float()(*[x.float() if isinstance(x, torch.Tensor) and x.is_floating_point()
                                                    else x for x in originals])
            if isinstance(wide, torch.Tensor) and torch.allclose(got.float(), wide.to(dtype).float(), atol=tol,
                                                                 rtol=tol):
                return None
        return f"max abs error {diff.max().item():.3g}"
    return None


def dry_launches(task: Task, dtype: str = "float32", workdir: Path | None = None) -> list[Launch]:
    """The launches the reference solution makes at the task's own sizes, without computing.

    Models and inputs are built on the meta device (no memory, no data) and the kernels are only
    recorded, so full GPU sizes cost nothing here. Nothing runs, so any process will do.
    """
    import torch

    own_dir = tempfile.TemporaryDirectory() if workdir is None else None
    wd = Path(own_dir.name) if own_dir else workdir
    try:
        # the solution's kernels are made interpreted so a launch needs no GPU driver to be recorded
        with env_set("TRITON_INTERPRET", "1"):
            ref_mod = _import_source(task.source, "task", wd)
            new_mod = _import_source(task.reference_solution or "", "solution", wd)
        with _LaunchRecorder(execute=False) as recorder, torch.device("meta"), torch.no_grad():
            init = ref_mod.get_init_inputs()
            inputs = ref_mod.get_inputs()
            model = new_mod.ModelNew(*init).to(getattr(torch, dtype))
            inputs = [x.to(getattr(torch, dtype)) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                      for x in inputs]
            model(*inputs)
        return recorder.launches
    finally:
        if own_dir:
            own_dir.cleanup()


def _compile_in_this_process(jobs: list[tuple[str, str, list[Launch]]], sm: int) -> dict[str, list[str]]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    assert os.environ.get("TRITON_INTERPRET", "0") in ("", "0"), "compile checks need a process without the interpreter"
    results: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as wd:
        for task_id, solution_source, launches in jobs:
            failures = results.setdefault(task_id, [])
            try:
                module = _import_source(solution_source, "compiled", Path(wd))
            except Exception as e:
                failures.append(f"import for compilation failed: {type(e).__name__}: {e}")
                continue
            for launch in dict.fromkeys(launches):
                src = ASTSource(fn=getattr(module, launch.kernel), signature=dict(launch.signature),
                                constexprs=dict(launch.constexprs))
                try:
                    compiled = triton.compile(src, target=GPUTarget("cuda", sm, 32), options=dict(launch.options))
                    if compiled.metadata.shared > SHARED_MEMORY_LIMIT:
                        failures.append(f"compile sm_{sm} {launch.kernel} {dict(launch.constexprs)}: needs "
                                        f"{compiled.metadata.shared} bytes of shared memory, more than the "
                                        f"{SHARED_MEMORY_LIMIT} an H100 block can have")
                except Exception as e:  # the compiler's message is the finding
                    msg = " ".join(str(e).split())[-400:]
                    failures.append(f"compile sm_{sm} {launch.kernel} {dict(launch.constexprs)}: "
                                    f"{type(e).__name__}: {msg}")
    return results


def compile_launches(jobs: list[tuple[str, str, list[Launch]]], *, sm: int = 90) -> dict[str, list[str]]:
    """Compile each distinct recorded launch for CUDA sm_<sm>; return {task_id: failures}.

    `jobs` holds (task_id, solution source, launches). Runs in a fresh Python process: the
    interpreter patches triton.language in any process that used it, so compiling there would
    fail spuriously.
    """
    payload = [{"task_id": tid, "source": src,
                "launches": [[ln.kernel, ln.signature, ln.constexprs, ln.options] for ln in dict.fromkeys(launches)]}
               for tid, src, launches in jobs]
    with tempfile.TemporaryDirectory() as wd:
        job_file, result_file = Path(wd) / "jobs.json", Path(wd) / "results.json"
        job_file.write_text(json.dumps({"sm": sm, "jobs": payload}))
        env = {**os.environ, "TRITON_INTERPRET": "0"}
        code = ("import sys; from tritonrl_lib.tasks.check_suite import _compile_job_file; "
                "_compile_job_file(*sys.argv[1:])")
        proc = subprocess.run([sys.executable, "-c", code, str(job_file), str(result_file)], env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0 or not result_file.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise RuntimeError("the compile-check process failed: " + " | ".join(tail))
        return json.loads(result_file.read_text())


def _compile_job_file(job_path: str, result_path: str) -> None:
    data = json.loads(Path(job_path).read_text())
    jobs = [(j["task_id"], j["source"],
             [Launch(k, tuple(map(tuple, sig)), tuple(map(tuple, consts)), tuple(map(tuple, opts)))
              for k, sig, consts, opts in j["launches"]]) for j in data["jobs"]]
    Path(result_path).write_text(json.dumps(_compile_in_this_process(jobs, data["sm"])))


def _require_interpreter() -> None:
    # Triton's own helpers (tl.sum, tl.max, ...) are @triton.jit functions made when triton.language
    # is first imported; made without the interpreter, a CPU kernel calling them fails with a
    # misleading "outside of the scope of a kernel", so refuse early with the fix instead.
    import triton.language as tl

    if type(tl.sum).__name__ != "InterpretedFunction":
        raise RuntimeError("check_task on CPU needs TRITON_INTERPRET=1 set before triton is first imported "
                           "in this process; run it in a fresh process "
                           "(python -m tritonrl_lib.tasks.check_suite sets it for you)")


def check_task(task: Task, *, dtypes: tuple[str, ...] = ("float32",), device: str = "cpu",
               workdir: Path | None = None) -> CheckResult:
    """Run every variation of one task against its reference solution, recording its launches."""
    import torch

    assert task.reference_solution, f"{task.id} has no reference solution"
    if device == "cpu":
        _require_interpreter()
    own_dir = tempfile.TemporaryDirectory() if workdir is None else None
    wd = Path(own_dir.name) if own_dir else workdir
    start = time.perf_counter()
    failures: list[str] = []
    first = 0.0
    recorder = _LaunchRecorder() if device == "cpu" else None
    try:
        if recorder:
            recorder.__enter__()
        new_mod = _import_source(task.reference_solution, "solution", wd)
        sources = {"original": task.source}
        sizes = _size_names(task.source)
        if "batch_size" in sizes:
            sources["batch_x2"] = _doubled(task.source, ["batch_size"])
        if sizes:
            sources["sizes_x2"] = _doubled(task.source, sizes)
        mods = {k: _import_source(s, "task", wd) for k, s in sources.items()}
        cases: list[tuple[str, dict[str, Any]]] = [
            ("original", dict(mod="original", seed=0, scale=1.0, dtype="float32", eval_mode=False)),
            ("values_x2", dict(mod="original", seed=0, scale=2.0, dtype="float32", eval_mode=False)),
            ("seed_1", dict(mod="original", seed=1, scale=1.0, dtype="float32", eval_mode=False)),
            ("eval_mode", dict(mod="original", seed=2, scale=1.0, dtype="float32", eval_mode=True)),
        ]
        cases += [(k, dict(mod=k, seed=3, scale=1.0, dtype="float32", eval_mode=False))
                  for k in mods if k != "original"]
        cases += [(d, dict(mod="original", seed=4, scale=1.0, dtype=d, eval_mode=False))
                  for d in dtypes if d != "float32"]
        for name, c in cases:
            t0 = time.perf_counter()
            try:
                why = _run_case(mods[c["mod"]], new_mod, seed=c["seed"], scale=c["scale"],
                                dtype=getattr(torch, c["dtype"]), device=device, eval_mode=c["eval_mode"])
            except Exception as e:  # a crash is a failure of this case, reported with its message
                why = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:300] if str(e).strip() else ''}"
            if name == "original":
                first = time.perf_counter() - t0
            if why:
                failures.append(f"{name}: {why}")
        if recorder and not recorder.launches:
            failures.append("no Triton kernel was launched")
    finally:
        if recorder:
            recorder.__exit__()
        if own_dir:
            own_dir.cleanup()
    return CheckResult(task.id, not failures, time.perf_counter() - start, first, failures,
                       recorder.launches if recorder else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="small", choices=("small", "full"))
    ap.add_argument("--only", default="", help="comma-separated task names or ids")
    ap.add_argument("--levels", default="", help="comma-separated levels, e.g. 1,2")
    ap.add_argument("--dtypes", default="float32", help="comma-separated: float32,float16,bfloat16")
    ap.add_argument("--compile-sm", type=int, default=None,
                    help="also compile every kernel launch for this CUDA arch (e.g. 90); CPU runs only")
    args = ap.parse_args(argv)

    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # must be set before any @triton.jit function is created

    levels = [int(x) for x in args.levels.split(",") if x] or None
    tasks = load_builtin(args.size, levels=levels)
    if args.only:
        wanted = set(args.only.split(","))
        tasks = [t for t in tasks if t.name in wanted or t.id in wanted]
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    failed: set[str] = set()
    total = time.perf_counter()
    jobs = []
    with tempfile.TemporaryDirectory() as wd:
        for task in tasks:
            r = check_task(task, dtypes=dtypes, device=device, workdir=Path(wd))
            jobs.append((task.id, task.reference_solution, r.launches))
            if not r.ok:
                failed.add(task.id)
            status = "ok  " if r.ok else "FAIL"
            print(f"{status} {r.seconds:6.2f}s (first {r.first_seconds:5.2f}s)  {task.id}", flush=True)
            for f in r.failures:
                print(f"       {f}", flush=True)
    print(f"{len(tasks) - len(failed)}/{len(tasks)} passed on {device} in {time.perf_counter() - total:.1f}s")
    if args.compile_sm is not None and device == "cpu":
        # add the launches made at full sizes in every dtype, recorded without running anything
        t0 = time.perf_counter()
        full = {t.id: t for t in load_builtin("full", levels=levels)}
        with tempfile.TemporaryDirectory() as wd:
            for task_id, _, launches in jobs:
                for dtype in ("float32", "float16", "bfloat16"):
                    launches += dry_launches(full[task_id], dtype, workdir=Path(wd))
        results = compile_launches(jobs, sm=args.compile_sm)
        n_launches = len({(tid, launch) for tid, _, ls in jobs for launch in ls})
        for task_id, failures in results.items():
            for f in failures:
                failed.add(task_id)
                print(f"FAIL {task_id}: {f}", flush=True)
        n_bad = sum(len(f) for f in results.values())
        print(f"compiled {n_launches} distinct launches (checked sizes, and full"
              f" sizes in float32/float16/bfloat16) for sm_{args.compile_sm}: {n_bad} failed "
              f"({time.perf_counter() - t0:.1f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
