"""PyTorch's process-wide state, recorded before the candidate's import and checked after each of its calls.

A candidate can change how fast or how exactly *other* code runs without touching that code: turn off
TF32 or turn on deterministic algorithms (the reference gets slower), switch off the flash and
memory-efficient attention backends (the reference's scaled-dot-product attention falls back to the
math path), turn off cuDNN or its autotuner, prefer another BLAS or linear-algebra library, take threads
away, enable autograd or anomaly detection (every op of the reference records a graph, or checks for
NaN), start the profiler, add a global forward hook to every nn.Module, leave a dispatch or function
mode on the stack (every op of the verifier's goes through the candidate's code), hang a callback on the
garbage collector, change the current CUDA stream or its synchronisation debug mode.
`ProcessState.capture()` reads all of it through PyTorch's own getters, bound before the candidate's
module runs (rebinding `torch.backends...` in Python cannot fool them); `changes()` lists what differs
now. It is read after every call of the candidate (the timing included: after each timed call, so a
switch flipped for the reference's trial and put back at the candidate's next call still shows). Any
change is a cheat flag (`global_state`): a solution has no business with the process's global state.

The list is every switch PyTorch offers that changes how other code runs (`SWITCHES`, read where this
build has it); tests/test_verify_global_state.py flips each one and checks it is seen.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

# zero-argument getters of torch._C, one per switch (those this build lacks are skipped)
_C_GETTERS = (
    # cuDNN, oneDNN, NNPACK, MIOpen: enabled, autotuned, deterministic, TF32
    "_get_cudnn_enabled", "_get_cudnn_benchmark", "_get_cudnn_deterministic", "_get_cudnn_allow_tf32",
    "_get_cudnn_depthwise_kernel", "_get_mkldnn_enabled", "_get_mkldnn_deterministic", "_get_onednn_allow_tf32",
    "_get_nnpack_enabled", "_get_miopen_immediate",
    # cuBLAS: TF32, reduced-precision reductions, half accumulation, SM carve-out, the BLAS and linalg libraries
    "_get_cublas_allow_tf32", "_get_cublas_allow_fp16_reduced_precision_reduction",
    "_get_cublas_allow_bf16_reduced_precision_reduction", "_get_cublas_allow_fp16_accumulation",
    "_get_float32_matmul_precision", "_get_sm_carveout_experimental", "_get_blas_preferred_backend",
    "_get_linalg_preferred_backend", "_get_rocm_fa_preferred_backend",
    # scaled-dot-product attention's backends and their order
    "_get_flash_sdp_enabled", "_get_fa3_sdp_enabled", "_get_mem_efficient_sdp_enabled", "_get_math_sdp_enabled",
    "_get_cudnn_sdp_enabled", "_get_overrideable_sdp_enabled", "_get_math_sdp_allow_fp16_bf16_reduction",
    "_get_sdp_priority_order",
    # determinism, warnings, the quantized engine, the default device
    "_get_deterministic_algorithms", "_get_deterministic_algorithms_warn_only",
    "_get_deterministic_fill_uninitialized_memory", "_get_warnAlways", "_get_qengine", "_get_default_device",
)
# torch.backends.*.fp32_precision: (backend, op) pairs of torch._C._get_fp32_precision_getter
_FP32_PRECISION = (("generic", "all"), ("cuda", "all"), ("cuda", "matmul"), ("cuda", "conv"), ("cuda", "rnn"),
                   ("mkldnn", "all"), ("mkldnn", "matmul"), ("mkldnn", "conv"), ("mkldnn", "rnn"))
_HOOK_DICTS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
               "_global_backward_hooks", "_global_buffer_registration_hooks", "_global_module_registration_hooks",
               "_global_parameter_registration_hooks", "_global_forward_hooks_with_kwargs")


def switches() -> dict[str, Callable[[], Any]]:
    """Every global switch this build of PyTorch has, name -> getter (bound now)."""
    out: dict[str, Callable[[], Any]] = {name: getattr(torch._C, name) for name in _C_GETTERS
                                         if hasattr(torch._C, name)}
    get_precision = getattr(torch._C, "_get_fp32_precision_getter", None)
    if get_precision is not None:
        for backend, op in _FP32_PRECISION:
            out[f"fp32_precision[{backend}.{op}]"] = (lambda b=backend, o=op: get_precision(b, o))
    out.update({"num_threads": torch.get_num_threads, "num_interop_threads": torch.get_num_interop_threads,
                "grad_enabled": torch.is_grad_enabled, "default_dtype": torch.get_default_dtype,
                "inference_mode": torch.is_inference_mode_enabled, "anomaly_enabled": torch.is_anomaly_enabled,
                "anomaly_check_nan": torch.is_anomaly_check_nan_enabled,
                "autocast_enabled[cuda]": lambda: torch.is_autocast_enabled("cuda"),
                "autocast_enabled[cpu]": lambda: torch.is_autocast_enabled("cpu")})
    profiler = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    if profiler is not None:
        out["autograd_profiler"] = profiler
    mha = getattr(getattr(torch.backends, "mha", None), "get_fastpath_enabled", None)
    if mha is not None:
        out["mha_fastpath"] = mha
    einsum = getattr(torch.backends, "opt_einsum", None)
    if einsum is not None:
        out["opt_einsum.enabled"] = lambda m=einsum: m.enabled
        out["opt_einsum.strategy"] = lambda m=einsum: m.strategy
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        device = torch.cuda.current_device()
        raw_stream = torch._C._cuda_getCurrentRawStream
        out["cuda.current_stream"] = lambda: raw_stream(device)
        sync_mode = getattr(torch._C, "_cuda_get_sync_debug_mode", None)
        if sync_mode is not None:
            out["cuda.sync_debug_mode"] = sync_mode
    return out


@dataclass
class ProcessState:
    getters: dict[str, Callable[[], Any]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    hook_dicts: dict[str, dict] = field(default_factory=dict)
    gc_callbacks: list = field(default_factory=list)
    dispatch_depth: Callable[[], int] | None = None
    function_depth: Callable[[], int] | None = None

    @classmethod
    def capture(cls) -> ProcessState:
        import torch.nn.modules.module as module_mod

        state = cls(getters=switches(), hook_dicts={n: getattr(module_mod, n) for n in _HOOK_DICTS
                                                    if isinstance(getattr(module_mod, n, None), dict)},
                    gc_callbacks=gc.callbacks,
                    dispatch_depth=getattr(torch._C, "_len_torch_dispatch_stack", None),
                    function_depth=getattr(torch._C, "_len_torch_function_stack", None))
        state.values = state._read()
        return state

    def _read(self) -> dict[str, Any]:
        out = {}
        for name, get in self.getters.items():
            try:
                value = get()
                out[name] = value if isinstance(value, (bool, int, float, str, tuple, list, type(None))) else str(value)
            except Exception as e:  # a getter that cannot answer on this build: record that, compare that
                out[name] = f"<{type(e).__name__}>"
        return out

    def changes(self, dispatch_modes: int = 0) -> list[str]:
        """What differs from the capture (`dispatch_modes`: how many dispatch modes the verifier itself
        has on the stack right now, its census)."""
        import torch.nn.modules.module as module_mod

        now = self._read()
        out = [f"torch.{name}" for name, value in self.values.items() if now.get(name) != value]
        for name, d in self.hook_dicts.items():
            if getattr(module_mod, name, None) is not d or len(d):
                out.append(f"torch.nn.modules.module.{name}")
        if gc.callbacks is not self.gc_callbacks or len(self.gc_callbacks):
            out.append("gc.callbacks")
        if self.dispatch_depth is not None and self.dispatch_depth() != dispatch_modes:
            out.append("torch dispatch mode stack")
        if self.function_depth is not None and self.function_depth() != 0:
            out.append("torch function mode stack")
        return out
