"""Every global switch PyTorch offers that changes how the reference runs is recorded before the candidate
loads and seen when changed (candidate/process_state.py): each flipped through its public API, in a fresh
process, after a capture; the candidate-level verdicts are in tests/test_verify_candidate_rules.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# switch flipped through PyTorch's public API -> the name `changes()` gives it
FLIPS = {  # the new precision API first: mixed with the legacy one, PyTorch refuses to read either
    "torch.backends.cuda.matmul.fp32_precision = 'tf32'": "torch.fp32_precision[cuda.matmul]",
    "torch.backends.cuda.enable_flash_sdp(False)": "torch._get_flash_sdp_enabled",
    "torch.backends.cuda.enable_mem_efficient_sdp(False)": "torch._get_mem_efficient_sdp_enabled",
    "torch.backends.cuda.enable_math_sdp(False)": "torch._get_math_sdp_enabled",
    "torch.backends.cuda.enable_cudnn_sdp(False)": "torch._get_cudnn_sdp_enabled",
    "torch.backends.cudnn.enabled = False": "torch._get_cudnn_enabled",
    "torch.backends.cudnn.benchmark = True": "torch._get_cudnn_benchmark",
    "torch.backends.cudnn.deterministic = True": "torch._get_cudnn_deterministic",
    "torch.backends.cudnn.allow_tf32 = False": "torch._get_cudnn_allow_tf32",
    "torch.backends.cuda.matmul.allow_tf32 = True": "torch._get_cublas_allow_tf32",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False":
        "torch._get_cublas_allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False":
        "torch._get_cublas_allow_bf16_reduced_precision_reduction",
    "torch.set_float32_matmul_precision('medium')": "torch._get_float32_matmul_precision",
    "torch.use_deterministic_algorithms(True)": "torch._get_deterministic_algorithms",
    "torch.set_num_threads(torch.get_num_threads() + 1)": "torch.num_threads",
    "torch.set_num_interop_threads(torch.get_num_interop_threads() + 1)": "torch.num_interop_threads",
    "torch.backends.mkldnn.enabled = False": "torch._get_mkldnn_enabled",
    "torch.backends.nnpack.set_flags(False)": "torch._get_nnpack_enabled",
    "torch.set_grad_enabled(not torch.is_grad_enabled())": "torch.grad_enabled",
    "torch.autograd.set_detect_anomaly(True)": "torch.anomaly_enabled",
    "torch.backends.mha.set_fastpath_enabled(False)": "torch.mha_fastpath",
    "torch.set_default_dtype(torch.float64)": "torch.default_dtype",
    "torch.set_warn_always(True)": "torch._get_warnAlways",
    "torch.backends.cuda.preferred_blas_library('cublaslt')": "torch._get_blas_preferred_backend",
    "torch.backends.cuda.preferred_linalg_library('magma')": "torch._get_linalg_preferred_backend",
}


def test_every_global_switch_changed_is_seen():
    code = textwrap.dedent(f"""
        import json, torch
        from tritonrl_lib.verify.candidate.process_state import ProcessState
        seen = {{}}
        for flip in {list(FLIPS)!r}:
            state = ProcessState.capture()  # each flip against the state as it is then
            try:
                exec(flip, {{"torch": torch}})
            except Exception as e:  # a switch this build cannot change here
                seen[flip] = "cannot: " + type(e).__name__
                continue
            seen[flip] = state.changes()
        print(json.dumps(seen))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    flipped = {f: v for f, v in seen.items() if not isinstance(v, str)}
    # a CPU build may refuse a few (the linear-algebra library, interop threads once used): never most
    assert len(flipped) >= len(FLIPS) - 3, seen
    for flip, changes in flipped.items():
        assert FLIPS[flip] in changes, (flip, changes)


def test_nothing_is_seen_when_nothing_changed():
    code = textwrap.dedent("""
        import json, torch
        from tritonrl_lib.verify.candidate.process_state import ProcessState
        state = ProcessState.capture()
        with torch.backends.cuda.sdp_kernel(enable_flash=False):  # changed and put back inside a call
            pass
        torch.relu(torch.randn(8))
        print(json.dumps({"changes": state.changes(), "read": len(state.values)}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["changes"] == [] and got["read"] >= 40
