"""The compile check: on the CPU a kernel the CUDA compiler rejects gets the verdict a GPU gives it.

On a GPU Triton compiles each kernel at its first launch; on the CPU kernels run under the
interpreter, which accepts much the compiler refuses. With `verify.compile_check` on (the CPU
default) every launch is also compiled for sm_90 before the interpreter runs it. Each candidate
below goes through a real pool; the expected verdicts are what a GPU gives (checked on one by
`test_gpu_gives_the_same_verdicts`, run by the lead on a GPU machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig, gpu_available
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.settings import JobSettings
from tritonrl_lib.verify.settings import resolve_compile_check as resolve_mode

from verifier_fixtures import CASES, candidate, task

ROOT = Path(__file__).resolve().parents[1]

# candidate -> (task, last stage passed, reason, reward, text the error must contain)
EXPECTED = {
    "compile_arange_not_pow2": ("relu", "static", "compile_error", 0.0, "arange's range must be a power of 2"),
    "compile_autotune_bad_config": ("relu", "static", "compile_error", 0.0, "arange's range must be a power of 2"),
    "compile_autotune_num_warps": ("relu", "static", "compile_error", 0.0, "num_warps must be a power of 2"),
    "compile_nonconstexpr_block": ("relu", "static", "compile_error", 0.0, "must be of type tl.constexpr"),
    "compile_python_helper": ("relu", "static", "compile_error", 0.0, "Cannot access global variable positive_part"),
    "compile_python_dict": ("relu", "static", "compile_error", 0.0, "unsupported AST node type: Dict"),
    "compile_list_comprehension": ("relu", "static", "compile_error", 0.0, "only tuple comprehensions"),
    "compile_unsupported_op": ("relu", "static", "compile_error", 0.0, "unsupported operand type(s) for **"),
    "compile_global_not_constexpr": ("relu", "static", "compile_error", 0.0, "global variable NEGATIVE_SLOPE"),
    "compile_launch_keyword_typo": ("relu", "static", "compile_error", 0.0, "num_warp was specified but unrecognised"),
    "compile_numpy_int_arg": ("relu", "static", "compile_error", 0.0, "int64"),
    "compile_loop_type_change": ("row_sum", "static", "compile_error", 0.0, "Loop-carried variable total"),
    "compile_fails_on_larger": ("relu", "static", "compile_error", 0.0, "unsupported AST node type: Break"),
    "compile_kernel_returns_value": ("relu", "static", "compile_error", 0.0, "the kernel returns a value"),
    # correct: a static_assert that rules out one autotune config skips that config, as a GPU does
    "compile_autotune_static_assert_ok": ("relu", "full", "ok", 0.7, ""),
    # correct: the check's second import of the module is not forward's compute
    "compile_module_state_ok": ("relu", "full", "ok", 0.7, ""),
    # genuine runtime errors stay runtime errors
    "runtime_grid_error": ("relu", "compile", "runtime_error", 0.3, "ZeroDivisionError"),
    "relu_raises_forward": ("relu", "compile", "runtime_error", 0.3, "this solution gives up"),
    "relu_ok": ("relu", "full", "ok", 0.7, ""),
    "row_sum_ok": ("row_sum", "full", "ok", 0.7, ""),
    "matmul_ok": ("matmul", "full", "ok", 0.7, ""),
}

# what the interpreter alone makes of them (compile_check=off): it accepts most of what the
# compiler refuses; the two rules it shares with the compiler are compile errors already
INTERPRETER_ALONE = {
    "compile_python_dict": ("full", "ok"),
    "compile_python_helper": ("full", "ok"),
    "compile_loop_type_change": ("full", "ok"),
    "compile_launch_keyword_typo": ("full", "ok"),
    "compile_autotune_num_warps": ("full", "ok"),
    "compile_fails_on_larger": ("full", "ok"),
    "compile_unsupported_op": ("compile", "runtime_error"),
    "compile_arange_not_pow2": ("static", "compile_error"),
    "compile_nonconstexpr_block": ("static", "compile_error"),
}


def config(mode: str | None = None, **over) -> VerifyConfig:
    cfg = VerifyConfig(timeout_s=60, **over)
    if mode is not None:
        # read with getattr by the pool until VerifyConfig has the field (default "auto")
        object.__setattr__(cfg, "compile_check", mode)
    return cfg


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(config(), workers=2, device="cpu", cache=False, progress=False) as p:
        yield p


def _assert_verdict(name, v, stage, reason, reward, text):
    got = (v.stage, v.reason, v.reward)
    assert got == (stage, reason, reward), (name, got, v.error[-800:])
    assert text in v.error, (name, v.error[-800:])
    assert v.correct == (reason == "ok"), name


def test_cpu_verdicts_are_the_gpu_verdicts(pool):
    names = list(EXPECTED)
    verdicts = pool.map([task(EXPECTED[n][0]) for n in names], [candidate(n) for n in names])
    for name, v in zip(names, verdicts):
        _assert_verdict(name, v, *EXPECTED[name][1:])
        if v.reason == "compile_error":
            # the compiler's own message, for the architecture a GPU run would use
            assert "for CUDA sm_90" in v.error and not v.cheat_flags, name
        if v.correct:
            assert any(n.startswith("compile check:") and "sm_90" in n for n in v.notes), (name, v.notes)
    larger = verdicts[names.index("compile_fails_on_larger")]
    # the small input sets ran (and were right) before the launch that does not compile
    assert [e["name"] for e in larger.errors][:2] == ["tiny", "original"] and all(e["ok"] for e in larger.errors)
    assert "larger" not in [e["name"] for e in larger.errors] and "on the larger inputs" in larger.error


def test_the_interpreter_alone_accepts_what_the_check_rejects(pool):
    names = list(INTERPRETER_ALONE)
    tasks = [task(EXPECTED[n][0]) for n in names]
    verdicts = pool.map(tasks, [candidate(n) for n in names], config=config("off"))
    for name, v in zip(names, verdicts):
        assert (v.stage, v.reason) == INTERPRETER_ALONE[name], (name, v.stage, v.reason, v.error[-500:])
        assert not any(n.startswith("compile check") for n in v.notes), name


def test_a_kernel_made_at_run_time_is_left_to_the_interpreter(pool):
    # the static check cannot see the launch (it is made through an attribute), so it runs without it
    v = pool.verify(task("relu"), candidate("compile_kernel_in_function_ok"), static=False)
    assert v.correct, (v.reason, v.error[-800:])
    assert any("make_relu_kernel.<locals>.relu_kernel were not compiled" in n for n in v.notes), v.notes


def test_full_mode_also_checks_shared_memory():
    # frontend code generation accepts the tiles; a cubin for sm_90 needs more shared memory than
    # a block may have (a GPU raises OutOfResources at that launch)
    big = candidate("compile_shared_memory_full")
    with VerifierPool(config("full"), workers=1, device="cpu", cache=False, progress=False) as p:
        full = p.verify(task("matmul"), big)
        front = p.verify(task("matmul"), big, config=config("frontend"))
    _assert_verdict("full", full, "static", "compile_error", 0.0, "shared memory")
    assert "OutOfResources" in full.error
    assert front.correct, front.error[-800:]


def test_modes_resolve_per_device():
    assert resolve_mode("auto", "cpu") == "frontend"
    assert resolve_mode("full", "cpu") == "full" and resolve_mode("OFF", "cpu") == "off"
    assert all(resolve_mode(m, "cuda") == "off" for m in ("auto", "frontend", "full", "off"))
    with pytest.raises(ValueError, match="compile_check must be one of"):
        resolve_mode("strict", "cpu")


def _run_python(code: str, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_a_plain_python_call_found_while_hashing_the_kernel_is_a_compile_error(tmp_path):
    # On a GPU, Triton hashes a kernel's dependencies before its first compile and refuses a call
    # to a plain Python function there ("Unsupported function referenced", a RuntimeError raised
    # in triton/runtime/jit.py); it must get the compile verdict, as the CPU's compile check gives.
    script = tmp_path / "hashing.py"  # a file: triton.jit reads the kernel's source
    script.write_text(textwrap.dedent("""
        import triton, triton.language as tl
        from tritonrl_lib.verify.compilation.errors import compile_failure_kind
        from tritonrl_lib.verify.candidate.context import classify

        def positive_part(x):
            return tl.maximum(x, 0.0)

        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, positive_part(tl.load(x_ptr + offs)))

        try:
            k.cache_key  # what a launch computes first
        except RuntimeError as e:
            print(compile_failure_kind(e), classify(e, "compile"), classify(e, "tiny"), "Unsupported function" in str(e))
    """))
    got = _run_python(f"import runpy; runpy.run_path({str(script)!r})", env={"TRITON_INTERPRET": "0"})
    assert got.split() == ["compiler", "compile_error", "compile_error", "True"]


def test_a_worker_holds_an_uninterpreted_copy_of_triton():
    got = json.loads(_run_python("""
        import json, os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        from tritonrl_lib.verify.worker.main import _worker_imports
        from tritonrl_lib.verify.compilation import compiler_copy
        _worker_imports("cpu")
        import triton, triton.language as tl
        before = type(tl.sum).__name__
        with compiler_copy.compiler_triton():
            import triton.language as ctl
            inside = (type(ctl.sum).__name__, os.environ["TRITON_INTERPRET"], ctl is not tl)
        import triton.language as after
        print(json.dumps({"available": compiler_copy.compiler_available()[0], "before": before,
                          "inside": inside, "restored": after is tl and os.environ["TRITON_INTERPRET"] == "1"}))
    """))
    assert got["available"] and got["before"] == "InterpretedFunction"
    assert got["inside"] == ["JITFunction", "0", True] and got["restored"]


def test_interpreter_errors_for_compiler_rules_are_compile_errors(tmp_path):
    # a real interpreted launch each: the interpreter's own version of a compiler rule (arange of 100),
    # the same error once the compiler has accepted the launch (an interpreter limitation), and a
    # genuine error in the candidate's kernel code
    path = tmp_path / "kernels.py"
    path.write_text(textwrap.dedent('''
        import triton
        import triton.language as tl


        @triton.jit
        def arange_kernel(out_ptr, BLOCK: tl.constexpr):
            tl.store(out_ptr + tl.arange(0, BLOCK), 1.0)


        @triton.jit
        def raising_kernel(out_ptr, BLOCK: tl.constexpr):
            if BLOCK > 1:
                raise ValueError("not a compiler rule")
            tl.store(out_ptr, 1.0)
    '''))
    got = json.loads(_run_python(f"""
        import json, torch
        from tritonrl_lib.verify.compilation.errors import compile_failure_kind, interpreter_only, mark_compiled
        from tritonrl_lib.verify.candidate.context import classify
        from tritonrl_lib.verify.candidate.variations import load_module_file
        m = load_module_file({str(path)!r}, "kernels")
        out = {{}}
        for name, kernel in (("arange", m.arange_kernel), ("raising", m.raising_kernel)):
            try:
                kernel[(1,)](torch.zeros(128), BLOCK=100)
            except Exception as e:
                out[name] = [compile_failure_kind(e), classify(e, "tiny")]
                mark_compiled(e)
                out[name + "_compiled"] = [compile_failure_kind(e), classify(e, "tiny"), interpreter_only(e)]
        print(json.dumps(out))
    """, env={"TRITON_INTERPRET": "1"}))
    assert got["arange"] == ["interpreter", "compile_error"]
    assert got["arange_compiled"] == [None, "runtime_error", True]
    assert got["raising"] == [None, "runtime_error"] and got["raising_compiled"] == [None, "runtime_error", False]


def test_the_gpu_side_classifies_the_compilers_own_errors(tmp_path):
    # a GPU child classifies what JITFunction.run raises before a launch; the same steps (bind,
    # pack options, compile) run here without a GPU and must give the same reasons as the CPU path
    (tmp_path / "kernels.py").write_text(textwrap.dedent('''
        import triton
        import triton.language as tl


        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)


        @triton.jit
        def returns(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
            return offs
    '''))
    got = json.loads(_run_python(f"""
        import json, sys
        import numpy as np, torch, triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource, make_backend
        from triton.runtime.jit import create_function_from_signature
        from tritonrl_lib.verify.candidate.context import classify
        sys.path.insert(0, {str(tmp_path)!r})
        import kernels
        target = GPUTarget("cuda", 90, 32)
        backend = make_backend(target)

        def launch(*args, kernel="k", **kwargs):
            fn = getattr(kernels, kernel)
            binder = create_function_from_signature(fn.signature, fn.params, backend)
            bound, spec, opts = binder(*args, **kwargs)
            options, sig, consts, attrs = fn._pack_args(backend, kwargs, bound, spec, opts)
            triton.compile(ASTSource(fn, sig, consts, attrs), target=target, options=options.__dict__)

        x, out = torch.zeros(8), {{}}
        for name, args, kwargs in [("numpy_arg", (x, np.int64(5)), {{"BLOCK": 8}}),
                                   ("num_warps", (x, 5), {{"BLOCK": 8, "num_warps": 3}}),
                                   ("typo", (x, 5), {{"BLOCK": 8, "num_warp": 4}}),
                                   ("arange", (x, 5), {{"BLOCK": 6}}),
                                   ("missing_arg", (x,), {{"BLOCK": 8}}),
                                   ("returns", (x, 5), {{"BLOCK": 8, "kernel": "returns"}})]:
            try:
                launch(*args, **kwargs)
                out[name] = "compiled"
            except Exception as e:
                out[name] = classify(e, "tiny")
        print(json.dumps(out))
    """, env={"TRITON_INTERPRET": "0"}))
    assert got == {"numpy_arg": "compile_error", "num_warps": "compile_error", "typo": "compile_error",
                   "arange": "compile_error", "missing_arg": "runtime_error", "returns": "compile_error"}


def test_a_compile_error_in_the_full_stage_fails_compile():
    # what a GPU child sends when a launch first made on the larger inputs does not compile
    import torch

    from tritonrl_lib.verify.worker.judge import Judge
    from tritonrl_lib.verify.sandbox.run import SandboxOutcome
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    settings = JobSettings.for_device(VerifyConfig(), "cpu").to_json()
    judge = Judge({"task_id": "t", "settings": settings, "policy": "strict"})

    def send(header, tensors=()):
        metas, blobs = encode_outputs(list(tensors))
        if tensors:
            header = {**header, "outputs": metas}
        return judge.on_message(header, [bytearray(b) for b in blobs])

    tiny, full = torch.randn(4), torch.randn(64)
    send({"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny])
    send({"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [full])
    send({"type": "ref", "name": "larger", "stage": "full", "inputs": "x"}, [torch.randn(128)])
    send({"type": "ref_done"})
    send({"type": "stage", "stage": "compile"})
    cand = {"type": "cand", "launches": 1, "kernels": {"k": 1}, "foreign": {}, "ops": {}, "inputs_unchanged": True}
    assert send({**cand, "name": "tiny"}, [tiny.clone()]) is None
    assert send({"type": "gate", "stage": "tiny"}) == "go"
    assert send({**cand, "name": "original"}, [full.clone()]) is None
    assert send({"type": "error", "stage": "full", "variation": "larger", "reason": "compile_error",
                 "error": "CompilationError: at 3:4: unsupported AST node type: Break"}) == "stop"
    v = judge.finalize(SandboxOutcome(0, "judged", 0, "", 0.0))
    assert (v["stage"], v["reason"], v["reward"], v["correct"]) == ("static", "compile_error", 0.0, False)
    assert "on the larger inputs" in v["error"]


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_gpu_gives_the_same_verdicts():
    """The table above, on a GPU (real compiles, timing on): the same failures with the same stage,
    reason and reward; the correct ones correct."""
    names = list(EXPECTED) + ["compile_shared_memory_full"]
    tasks = [task(EXPECTED[n][0] if n in EXPECTED else "matmul") for n in names]
    with VerifierPool(VerifyConfig(timeout_s=180), device="cuda", cache=False, progress=False) as gpu:
        verdicts = gpu.map(tasks, [candidate(n) for n in names])
    for name, v in zip(names, verdicts):
        stage, reason, reward, _ = EXPECTED.get(name, ("matmul", "static", "compile_error", 0.0, ""))[1:]
        if reason == "ok":
            assert v.correct and v.stage == "timing", (name, v.stage, v.reason, v.error[-800:])
        else:
            assert (v.stage, v.reason, v.reward) == (stage, reason, reward), (name, v.stage, v.reason,
                                                                              v.error[-800:])
