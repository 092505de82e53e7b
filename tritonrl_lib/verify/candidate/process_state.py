"""PyTorch's process-wide state, recorded before the candidate's import and checked after each of its calls.

A candidate can change how fast or how exactly *other* code runs without touching that code: turn off
TF32 or turn on deterministic algorithms (the reference gets slower), enable autograd (every op of the
reference records a graph), add a global forward hook to every nn.Module, leave a dispatch or function
mode on the stack (every op of the verifier's goes through the candidate's code), hang a callback on the
garbage collector. `ProcessState.capture()` reads all of it through PyTorch's C getters, taken before the
candidate's module runs (rebinding `torch.backends...` in Python cannot fool them); `changes()` lists what
differs now. Any change is a cheat flag: a solution has no business with the process's global state.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

_C_GETTERS = ("_get_cudnn_enabled", "_get_cudnn_benchmark", "_get_cudnn_deterministic", "_get_cudnn_allow_tf32",
              "_get_cublas_allow_tf32", "_get_cublas_allow_fp16_reduced_precision_reduction",
              "_get_cublas_allow_bf16_reduced_precision_reduction", "_get_float32_matmul_precision",
              "_get_deterministic_algorithms", "_get_mkldnn_enabled")
_HOOK_DICTS = ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_pre_hooks",
               "_global_backward_hooks", "_global_buffer_registration_hooks", "_global_module_registration_hooks",
               "_global_parameter_registration_hooks", "_global_forward_hooks_with_kwargs")


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

        getters: dict[str, Callable[[], Any]] = {name: getattr(torch._C, name) for name in _C_GETTERS
                                                 if hasattr(torch._C, name)}
        getters.update({"num_threads": torch.get_num_threads, "grad_enabled": torch.is_grad_enabled,
                        "default_dtype": torch.get_default_dtype,
                        "inference_mode": torch.is_inference_mode_enabled})
        state = cls(getters=getters, hook_dicts={n: getattr(module_mod, n) for n in _HOOK_DICTS
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
                out[name] = get()
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
