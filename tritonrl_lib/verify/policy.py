"""Which PyTorch work a solution may keep: the single table behind the static and runtime checks.

A solution must do its compute in Triton. What it may still run through PyTorch during
`forward` depends on a named policy:

- ``strict`` (default for Level 1): only bookkeeping — allocating outputs, views, metadata
  queries, layout copies and dtype casts. Every arithmetic op must be a Triton kernel.
- ``fusion`` (default for Level 2+): bookkeeping, plus data movement (``cat``/``stack``/``pad``)
  and the heavy ops a fusion task may leave to PyTorch, as KernelBench's Level-2 fusions do: the
  convolution family and the GEMM family (``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``,
  ``linear`` and its ``mv``/``dot`` forms; ``nn.Linear``), so the model is judged on fusing
  the rest (the epilogue: bias, activations, reductions, normalisations). Fused library forms
  that do part of that epilogue (cudnn conv+bias+relu, ``_addmm_activation``) stay excluded.
  Tasks or users that want more pass ``extra_heavy_ops`` (e.g. ``("einsum",)``); it never
  loosens ``strict``, where a GEMM or a convolution is itself the task.

Dtype promotion questions (``promote_types``, ``result_type``, ``can_cast``) are metadata under
every policy: they read dtypes, never tensor data.

The runtime census (a TorchDispatchMode around ``forward``) sees aten op names such as
``aten.relu.default``; the static check sees Python names such as ``torch.relu``,
``F.conv2d``, ``nn.Conv2d`` or ``x.sum()``. Both are mapped to an aten *base name* (``relu``,
``convolution``, ``sum``) and judged by `op_allowed`, so the two stages cannot disagree.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

import torch
import torch.nn as nn
import torch.nn.functional as F

POLICIES = ("strict", "fusion")

# --------------------------------------------------------------------------- the policy table
# Aten base names (namespace and overload stripped; a trailing "_" marks the in-place form and is
# kept, so "relu_" is not "relu"). Composite names that never reach a dispatch mode (reshape,
# contiguous, flatten, ...) are listed too: the static check maps Python calls onto them.

ALLOCATION_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "new", "scalar_tensor", "tensor", "new_tensor", "lift_fresh", "lift_fresh_copy",
    # filling a buffer (zero-init of an output before an atomic-add kernel, for example); writes
    # into the *inputs* are caught by the runtime's inputs-unchanged check, not here.
    "zero_", "fill_",
})

VIEW_OPS = frozenset({
    "view", "view_as", "_unsafe_view", "reshape", "reshape_as", "_reshape_alias", "flatten",
    "unflatten", "ravel", "permute", "movedim", "moveaxis", "transpose", "transpose_", "swapaxes",
    "swapdims", "t", "t_", "expand", "expand_as", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_",
    "slice", "select", "narrow", "as_strided", "alias", "detach", "detach_", "diagonal", "unfold",
    "split", "split_with_sizes", "tensor_split", "chunk", "unbind", "view_as_real",
    "view_as_complex", "real", "imag", "broadcast_to", "broadcast_tensors", "atleast_1d",
    "atleast_2d", "atleast_3d",
})

METADATA_OPS = frozenset({
    "size", "sym_size", "stride", "sym_stride", "numel", "sym_numel", "storage_offset",
    "sym_storage_offset", "dim", "is_contiguous", "is_non_overlapping_and_dense", "is_same_size",
    "is_floating_point", "is_complex", "element_size", "data_ptr",
    # .item() reads one element back to Python; it computes nothing (a loop of them is host
    # compute, which the static check judges).
    "_local_scalar_dense", "item",
    # dtype promotion questions: they read dtypes, never data
    "promote_types", "result_type", "can_cast",
})

# Copies that change layout, dtype or device but compute nothing.
COPY_OPS = frozenset({"clone", "contiguous", "copy_", "copy", "_to_copy", "to", "_copy_from",
                      "_copy_from_and_resize"})

# Always allowed, whatever the policy: bookkeeping, no arithmetic.
ALWAYS_ALLOWED_OPS = ALLOCATION_OPS | VIEW_OPS | METADATA_OPS | COPY_OPS

# Data movement that assembles new tensors without arithmetic. Under `strict` a Level-1 task may
# *be* a concatenation or a pad, so these must be Triton there; `fusion` lets them stay.
DATA_MOVEMENT_OPS = frozenset({"cat", "stack", "hstack", "vstack", "constant_pad_nd", "pad",
                               "repeat", "tile"})

# Heavy ops a fusion task may leave to PyTorch. The convolution family, plain convolution only
# (the cudnn conv+bias+relu fusions would do part of the fused work, so they are excluded).
CONV_OPS = frozenset({
    "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution_overrideable", "cudnn_convolution",
    "cudnn_convolution_transpose", "miopen_convolution", "miopen_convolution_transpose",
    "miopen_depthwise_convolution", "mkldnn_convolution", "_mps_convolution",
    "_mps_convolution_transpose", "_slow_conv2d_forward", "thnn_conv2d", "slow_conv3d",
    "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d", "slow_conv_transpose2d",
    "slow_conv_transpose3d", "_conv_depthwise2d", "conv_depthwise3d",
    "_nnpack_spatial_convolution",
})

# The GEMM family: what `torch.matmul`, `F.linear` / `nn.Linear`, `torch.mm`/`bmm`/`addmm`/
# `baddbmm` and `@` dispatch to (a 1-D operand makes `matmul` an `mv` or a `dot`). The bias of
# `addmm`/`baddbmm` is the Linear layer's own; `_addmm_activation` (GEMM + GELU/ReLU) is excluded.
GEMM_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "mv", "addmv", "dot"})

HEAVY_OPS = CONV_OPS | GEMM_OPS

POLICY_TABLE: dict[str, frozenset[str]] = {
    "strict": ALWAYS_ALLOWED_OPS,
    "fusion": ALWAYS_ALLOWED_OPS | DATA_MOVEMENT_OPS | HEAVY_OPS,
}

# Namespaces whose ops the census judges; an op from any other namespace (a custom op from
# torch.library, quantized, ...) runs PyTorch-side code we cannot see, so it is never allowed.
_JUDGED_NAMESPACES = ("aten", "prims")


# --------------------------------------------------------------------------- policy names

def resolve_policy(setting: str, level: int) -> str:
    """`auto` -> `strict` for Level 1, `fusion` for Level 2 and up; a named policy passes through."""
    name = (setting or "").strip().lower()
    if name == "auto":
        return "strict" if int(level) <= 1 else "fusion"
    if name in POLICIES:
        return name
    raise ValueError(
        f"unknown verify policy {setting!r}: choose one of 'auto', {', '.join(repr(p) for p in POLICIES)} "
        "(set verify.policy in the profile or pass -p policy=...)"
    )


def _check_policy(policy: str) -> None:
    if policy not in POLICY_TABLE:
        raise ValueError(f"unknown policy {policy!r}: choose one of {', '.join(POLICIES)} "
                         "(call resolve_policy first to turn 'auto' into one)")


# --------------------------------------------------------------------------- runtime side

def aten_base_name(aten_op: object) -> str:
    """`aten.relu.default`, `aten::mm`, `aten::add.Tensor`, `torch.ops.aten.mm.default` or an
    OpOverload -> the base name (`relu`, `mm`, `add`). The namespace, if any, is kept apart by
    `split_op_name`."""
    return split_op_name(aten_op)[1]


def split_op_name(aten_op: object) -> tuple[str, str]:
    """-> (namespace, base name); namespace is "" when the name carries none (`relu`)."""
    name = str(aten_op).strip()
    if name.startswith("torch.ops."):
        name = name[len("torch.ops."):]
    if "::" in name:
        ns, rest = name.split("::", 1)
        return ns, rest.split(".", 1)[0]
    parts = name.split(".")
    if len(parts) >= 2:
        return parts[0], parts[1]
    return "", parts[0]


def op_allowed(policy: str, base_name: str, extra_heavy_ops: Iterable[str] = ()) -> bool:
    """May an op with this aten base name run during `forward` under `policy`?

    `extra_heavy_ops` extends the heavy-op set of the `fusion` policy (base names such as
    "einsum"); it never loosens `strict`, whose point is that every arithmetic op is Triton.
    """
    _check_policy(policy)
    if base_name in POLICY_TABLE[policy]:
        return True
    return policy == "fusion" and base_name in frozenset(extra_heavy_ops)


def runtime_op_allowed(policy: str, aten_op: object, extra_heavy_ops: Iterable[str] = ()) -> bool:
    """The runtime census's question: may this dispatched op run during `forward`?

    Accepts "aten.relu.default", "aten::relu", "aten::relu.out", "relu" or an OpOverload.
    Ops outside the aten/prims namespaces (custom ops) are never allowed.
    """
    ns, base = split_op_name(aten_op)
    if ns and ns not in _JUDGED_NAMESPACES:
        _check_policy(policy)
        return False
    return op_allowed(policy, base, extra_heavy_ops)


# --------------------------------------------------------------------------- static side
# Python surface names -> aten base names, where they differ. Everything not listed maps to
# itself (torch.relu -> relu, x.sum() -> sum, F.conv2d -> conv2d).

SURFACE_TO_OP: dict[str, str] = {
    # dtype / device casts are `_to_copy`
    **{m: "_to_copy" for m in ("to", "type", "float", "double", "half", "bfloat16", "int", "long",
                                "short", "char", "byte", "bool", "cfloat", "cdouble", "cuda",
                                "cpu", "type_as")},
    "as_tensor": "_to_copy", "asarray": "_to_copy", "from_numpy": "alias",
    "contiguous": "contiguous", "clone": "clone", "item": "_local_scalar_dense",
    "nelement": "numel", "ndimension": "dim", "concat": "cat", "concatenate": "cat",
}

# torch.nn.functional names whose op differs from the same name elsewhere (F.unfold is im2col,
# Tensor.unfold is a view).
FUNCTIONAL_TO_OP: dict[str, str] = {"unfold": "im2col", "fold": "col2im", "pad": "constant_pad_nd"}

# nn module classes -> the aten base op their forward runs (only the ones a policy can allow are
# needed; any other nn class with a forward counts as compute).
NN_MODULE_OPS: dict[str, str] = {
    "Conv1d": "conv1d", "Conv2d": "conv2d", "Conv3d": "conv3d",
    "LazyConv1d": "conv1d", "LazyConv2d": "conv2d", "LazyConv3d": "conv3d",
    "ConvTranspose1d": "conv_transpose1d", "ConvTranspose2d": "conv_transpose2d",
    "ConvTranspose3d": "conv_transpose3d", "LazyConvTranspose1d": "conv_transpose1d",
    "LazyConvTranspose2d": "conv_transpose2d", "LazyConvTranspose3d": "conv_transpose3d",
    "Flatten": "flatten", "Unflatten": "unflatten", "Identity": "alias", "Unfold": "im2col",
    "Fold": "col2im",
    "ZeroPad1d": "constant_pad_nd", "ZeroPad2d": "constant_pad_nd", "ZeroPad3d": "constant_pad_nd",
    "ConstantPad1d": "constant_pad_nd", "ConstantPad2d": "constant_pad_nd",
    "ConstantPad3d": "constant_pad_nd",
    "Linear": "linear", "Bilinear": "bilinear", "LazyLinear": "linear",
}

# nn names that hold parameters or modules and run no compute of their own. Calling a container
# (`self.seq(x)`) runs its members, which the static check judges one by one.
NN_CONTAINERS = frozenset({
    "Module", "ModuleList", "ModuleDict", "Sequential", "Parameter", "ParameterList",
    "ParameterDict", "Buffer", "UninitializedParameter", "UninitializedBuffer",
})

# torch.* callables that are not tensor ops at all (grad modes, dtype info, devices, RNG seeding
# for initialisation). Seeding and global switches inside forward are judged separately by the
# static check (as monkeypatching), not as compute.
TORCH_NON_OPS = frozenset({
    "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
    "is_inference_mode_enabled", "autocast", "finfo", "iinfo", "Size", "device", "dtype",
    "is_tensor", "is_storage", "is_floating_point", "is_complex", "is_nonzero",
    "get_default_dtype", "get_default_device", "promote_types", "result_type", "can_cast",
    "broadcast_shapes", "manual_seed", "seed", "initial_seed", "Generator", "typename",
    "Tensor", "get_num_threads", "is_autocast_enabled", "layout", "memory_format",
    "sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "numel",
})

# Tensor methods that are not ops (hooks, autograd flags, dtype/shape questions, storage info).
TENSOR_NON_OPS = frozenset({
    "register_hook", "requires_grad_", "retain_grad", "is_contiguous", "is_floating_point",
    "is_complex", "is_signed", "is_pinned", "is_shared", "is_set_to", "data_ptr", "element_size",
    "size", "stride", "storage_offset", "dim", "ndimension", "numel", "nelement", "get_device",
    "dim_order", "type", "is_inference", "share_memory_", "pin_memory", "record_stream",
    "has_names", "refine_names", "rename", "align_to", "is_meta", "is_sparse",
})

# Tensor methods whose result leaves PyTorch for Python or numpy, where no census can see the
# compute that follows. The static check flags them inside forward as host compute.
TENSOR_TO_HOST = frozenset({"tolist", "numpy", "__array__", "__dlpack__"})


def surface_op(name: str) -> str:
    """A torch/F/tensor-method surface name -> the aten base name it runs."""
    return SURFACE_TO_OP.get(name, name)


def functional_op(name: str) -> str:
    """A torch.nn.functional name -> the aten base name it runs."""
    return FUNCTIONAL_TO_OP.get(name, surface_op(name))


def functional_allowed(policy: str, name: str, extra_heavy_ops: Iterable[str] = ()) -> bool:
    """Static check: may `F.<name>(...)` run in forward under `policy`?"""
    return op_allowed(policy, functional_op(name), extra_heavy_ops)


def nn_module_op(class_name: str) -> str | None:
    """nn class name -> aten base op of its forward; None for containers and parameters."""
    if class_name in NN_CONTAINERS:
        return None
    if class_name in NN_MODULE_OPS:
        return NN_MODULE_OPS[class_name]
    # CamelCase -> snake_case: ReLU -> re_lu; the exact name does not matter for compute
    # modules, they are never in a policy's allowed set.
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def surface_allowed(policy: str, name: str, extra_heavy_ops: Iterable[str] = ()) -> bool:
    """Static check: may `torch.<name>` / `F.<name>` / `x.<name>()` run in forward under `policy`?"""
    if name in TORCH_NON_OPS or name in TENSOR_NON_OPS:
        return True
    return op_allowed(policy, surface_op(name), extra_heavy_ops)


def nn_module_allowed(policy: str, class_name: str, extra_heavy_ops: Iterable[str] = ()) -> bool:
    """Static check: may an `nn.<class_name>` module be *called* in forward under `policy`?"""
    op = nn_module_op(class_name)
    return op is None or op_allowed(policy, op, extra_heavy_ops)


def _public_callables(obj: object) -> list[str]:
    names = []
    for n in dir(obj):
        if n.startswith("_"):
            continue
        try:
            v = getattr(obj, n)
        except Exception:  # some lazy attributes raise on access; they are not ops
            continue
        if callable(v):
            names.append(n)
    return names


@functools.lru_cache(maxsize=None)
def torch_compute_functions(policy: str) -> frozenset[str]:
    """Names `n` such that calling `torch.n(...)` in forward counts as PyTorch compute."""
    _check_policy(policy)
    out = set()
    for n in _public_callables(torch):
        if n[0].isupper() or isinstance(getattr(torch, n, None), type(torch)):
            continue  # classes (dtypes, Size, storages) and submodules are judged elsewhere
        if not surface_allowed(policy, n):
            out.add(n)
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def functional_compute_functions(policy: str) -> frozenset[str]:
    """Names `n` such that `torch.nn.functional.n(...)` in forward counts as PyTorch compute."""
    _check_policy(policy)
    return frozenset(n for n in _public_callables(F)
                     if not isinstance(getattr(F, n, None), type(F)) and n[0].islower()
                     and not functional_allowed(policy, n))


@functools.lru_cache(maxsize=None)
def nn_compute_modules(policy: str) -> frozenset[str]:
    """nn.Module subclasses in `torch.nn` whose call in forward counts as PyTorch compute."""
    _check_policy(policy)
    out = set()
    for n in dir(nn):
        v = getattr(nn, n, None)
        if isinstance(v, type) and issubclass(v, nn.Module) and not nn_module_allowed(policy, n):
            out.add(n)
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def tensor_compute_methods(policy: str) -> frozenset[str]:
    """Tensor method names whose call in forward counts as PyTorch compute (dunders excluded:
    the static check flags any dunder access on its own)."""
    _check_policy(policy)
    return frozenset(n for n in dir(torch.Tensor)
                     if not n.startswith("_") and callable(getattr(torch.Tensor, n, None))
                     and n not in TENSOR_TO_HOST and not surface_allowed(policy, n))


def allowed_ops(policy: str, extra_heavy_ops: Iterable[str] = ()) -> frozenset[str]:
    """Every aten base name `policy` lets forward run (for documentation and reports)."""
    _check_policy(policy)
    extra = frozenset(extra_heavy_ops) if policy == "fusion" else frozenset()
    return POLICY_TABLE[policy] | extra
