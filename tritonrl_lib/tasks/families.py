"""The shared vocabulary of operation families.

A family is one operation (Level 1) or one fusion pattern (Level 2); a category groups families.
The built-in suite tags every task with its family, the SFT generator draws examples per family,
and the train / held-out split is made over families, so held-out tasks measure generalisation
to an operation the model never saw in training rather than recall of one it did.
"""

from __future__ import annotations

FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    # Level 1: single operations
    "level1": {
        "elementwise": ("add", "mul", "sub", "div", "scale_shift", "clamp", "abs", "square", "where_positive"),
        "activation": ("relu", "leaky_relu", "gelu", "silu", "sigmoid", "tanh", "elu", "softplus",
                       "hardtanh", "hardsigmoid", "hardswish", "selu", "mish", "softsign"),
        "reduction": ("sum_dim", "mean_dim", "max_dim", "min_dim", "argmax_dim", "argmin_dim", "prod_dim",
                      "norm_dim"),
        "softmax": ("softmax", "log_softmax"),
        "normalization": ("layer_norm", "rms_norm", "l2_normalize", "batch_norm", "instance_norm", "group_norm"),
        "matmul": ("matmul", "matmul_rect", "bmm", "matvec", "matmul_transposed", "matmul_scalar", "outer"),
        "pooling": ("max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d"),
        # direct convolutions in Triton (data/templates/conv.py): a third of KernelBench's Level 1
        "convolution": ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                        "conv_depthwise2d", "conv_pointwise2d", "conv_depthwise_separable2d"),
        "cumulative": ("cumsum", "cumprod", "reverse_cumsum", "exclusive_cumsum"),
        "loss": ("mse_loss", "l1_loss", "smooth_l1_loss", "cross_entropy", "kl_div", "hinge_loss",
                 "cosine_similarity"),
    },
    # Level 2: fusions
    "level2": {
        "gemm_epilogue": ("gemm_bias_relu", "gemm_bias_gelu", "gemm_scale_sigmoid", "gemm_bias_leaky_relu",
                          "gemm_bias_tanh", "gemm_bias_silu", "gemm_clamp"),
        "matmul_residual": ("matmul_scale_residual", "matmul_add_relu_residual", "bmm_scale_add"),
        "conv_epilogue": ("conv2d_bias_relu", "conv2d_scale_tanh", "conv2d_hardswish", "conv2d_add_sigmoid",
                          "conv1d_gelu", "conv2d_bn_relu"),
        "norm_activation": ("layer_norm_gelu", "rms_norm_silu", "group_norm_relu", "layer_norm_residual",
                            "l2_normalize_scale"),
        "elementwise_chain": ("scale_bias_tanh", "mul_add_clamp", "sigmoid_gate", "swiglu", "residual_relu_scale"),
        "reduction_chain": ("softmax_scale", "logsumexp_relu", "sum_div", "max_subtract_exp", "mean_square_sqrt"),
        # a GEMM or a convolution kept in PyTorch, then a random chain of 1-6 cheap ops (and, in
        # chain_reduce, a reduction at the end) in one Triton kernel: data/templates/epilogue.py
        "epilogue_chain": ("gemm_chain", "matmul_chain", "conv_chain", "convtranspose_chain", "chain_reduce"),
        # a GEMM or a convolution kept in PyTorch, then a chain, a reduction or normaliser (over the features,
        # the channels, the spatial dims or groups of channels) and a chain after it, in one Triton kernel:
        # data/templates/reduce_rows.py, reduce_conv.py, reduce_norm.py
        "reduce_epilogue": ("gemm_reduce", "gemm_softmax", "conv_channel_reduce", "conv_global_pool",
                            "conv_group_norm"),
    },
}


def level_of_category(category: str) -> int:
    for level_key, cats in FAMILIES.items():
        if category in cats:
            return int(level_key[-1])
    raise KeyError(f"unknown category {category!r}; known: {', '.join(all_categories())}")


def all_categories() -> list[str]:
    return [c for cats in FAMILIES.values() for c in cats]


def category_of(family: str) -> str:
    for cats in FAMILIES.values():
        for cat, fams in cats.items():
            if family in fams:
                return cat
    raise KeyError(f"unknown op family {family!r}; see tritonrl_lib.tasks.families.FAMILIES")


def all_families(level: int | None = None) -> list[str]:
    out = []
    for level_key, cats in FAMILIES.items():
        if level is not None and int(level_key[-1]) != level:
            continue
        for fams in cats.values():
            out.extend(fams)
    return out
