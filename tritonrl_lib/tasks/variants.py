"""Variants of the built-in tasks: each op family gets two more tasks besides its original.

A variant is the original's computation asked another way the issue of in-family generalisation
needs: other shapes (element counts kept at the `full` preset, so every GPU size stays as safe as
the original's), other constants (reduction and scan axes, slopes, epsilons, scales, clamp bounds,
pooling windows, convolution kernels, group counts) and, for tasks whose reference holds no learned
weights, half-precision inputs. Two per family:

    <name>_alt    the same task file, another size/constant preset (a manifest row, no new file)
    <name>_fp16 / <name>_bf16   a copy of the task file whose `get_inputs()` makes half-precision
                  tensors, with the second preset (weight-free tasks only)
    <name>_alt2   the second preset in float32 (tasks with learned weights)

Every variant keeps the original's reference solution (`solution` in its manifest row): the suite's
solutions are written for any shape, axis, constant and dtype. Each one is verified like the
originals (`tests/test_tasks_verified.py`, and `check_suite --compile-sm 90` for the full sizes).

    python -m tritonrl_lib.tasks.variants            # say what would change
    python -m tritonrl_lib.tasks.variants --write    # write the half-precision files and the manifest rows
    python -m tritonrl_lib.tasks.variants --check    # exit 1 when the manifest differs from the rules here

The rules are deterministic: re-running `--write` rewrites the same rows and files.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from typing import Any

from .builtin_suite import BUILTIN_DIR, MANIFEST_PATH
from .kb_format import rewrite_constants

# Constants that are sizes (their value can change freely, within a preset's element budget).
SIZE_NAMES = {"batch_size", "dim", "seq_len", "hidden", "channels", "height", "width", "length", "features", "M",
              "N", "K", "dim1", "dim2", "num_features", "in_features", "out_features", "in_channels",
              "out_channels", "num_classes"}
AXIS_NAMES = ("reduce_dim", "scan_dim")
HALF = ("float16", "bfloat16")

# Per-family presets that the generic rules cannot know (pooling windows, group counts, kernels):
# family -> (v2 overrides, v3 overrides), each {preset: {constant: value}} applied after the rules.
OVERRIDES: dict[str, tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]] = {
    "max_pool1d": ({"*": {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 1}},
                   {"*": {"kernel_size": 5, "stride": 3, "padding": 2, "dilation": 2}}),
    "max_pool2d": ({"*": {"kernel_size": 2, "stride": 2, "padding": 0, "dilation": 1}},
                   {"*": {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 1}}),
    "avg_pool1d": ({"*": {"kernel_size": 4, "stride": 4, "padding": 1}},
                   {"*": {"kernel_size": 3, "stride": 1, "padding": 1}}),
    "avg_pool2d": ({"*": {"kernel_size": 2, "stride": 2, "padding": 0}},
                   {"*": {"kernel_size": 5, "stride": 3, "padding": 2}}),
    "group_norm": ({"small": {"num_groups": 2, "num_channels": 10},
                    "full": {"batch_size": 64, "num_groups": 16, "num_channels": 128, "height": 64, "width": 32}},
                   {"small": {"num_groups": 4, "num_channels": 8},
                    "full": {"batch_size": 16, "num_groups": 4, "num_channels": 256, "height": 32, "width": 64}}),
    "group_norm_relu": ({"small": {"num_groups": 2, "num_channels": 10},
                         "full": {"batch_size": 64, "num_groups": 32, "num_channels": 256, "height": 32, "width": 16}},
                        {"small": {"num_groups": 4, "num_channels": 8},
                         "full": {"batch_size": 16, "num_groups": 8, "num_channels": 512, "height": 16, "width": 32}}),
    "conv1d_gelu": ({"*": {"kernel_size": 3}}, {"*": {"kernel_size": 7}}),
    "conv2d_bias_relu": ({"*": {"kernel_size": 5}}, {"*": {"kernel_size": 1}}),
    "conv2d_scale_tanh": ({"*": {"kernel_size": 5}}, {"*": {"kernel_size": 1}}),
    "conv2d_hardswish": ({"*": {"kernel_size": 5}}, {"*": {"kernel_size": 1}}),
    "conv2d_add_sigmoid": ({"*": {"kernel_size": 5}}, {"*": {"kernel_size": 1}}),
    "conv2d_bn_relu": ({"*": {"kernel_size": 5}}, {"*": {"kernel_size": 1}}),
    # Level-1 convolutions: other kernels, strides, paddings and dilations; channel counts kept divisible
    # by the groups, and the 3D tasks' small sizes kept small (the interpreter pays per kernel offset)
    "conv1d": ({"*": {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 1},
                "small": {"batch_size": 3, "in_channels": 5, "out_channels": 6, "length": 30}},
               {"*": {"kernel_size": 7, "stride": 3, "padding": 0, "dilation": 1},
                "small": {"batch_size": 2, "in_channels": 4, "out_channels": 3, "length": 36}}),
    "conv2d": ({"small": {"batch_size": 3, "in_channels": 6, "out_channels": 4, "height": 8, "width": 6}},
               {"*": {"groups": 4},
                "small": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 6, "width": 7}}),
    "conv3d": ({"*": {"kernel_size": 2, "padding": 0},
                "small": {"batch_size": 2, "in_channels": 4, "out_channels": 4, "depth": 4, "height": 7, "width": 6}},
               {"*": {"kernel_size": 3, "padding": 0},
                "small": {"batch_size": 2, "in_channels": 2, "out_channels": 6, "depth": 6, "height": 5, "width": 5}}),
    "conv_transpose1d": ({"*": {"kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0, "dilation": 1},
                          "small": {"batch_size": 3, "in_channels": 5, "out_channels": 4, "length": 16}},
                         {"*": {"kernel_size": 5, "stride": 3, "padding": 2, "output_padding": 2, "dilation": 1},
                          "small": {"batch_size": 2, "in_channels": 3, "out_channels": 5, "length": 10}}),
    "conv_transpose2d": ({"*": {"kernel_size": 3, "stride": 1, "padding": 1},
                          "small": {"batch_size": 2, "in_channels": 6, "out_channels": 4, "height": 6, "width": 7}},
                         {"*": {"kernel_size": 2, "stride": 2, "padding": 0, "groups": 4},
                          "small": {"batch_size": 3, "in_channels": 4, "out_channels": 8, "height": 4, "width": 5}}),
    "conv_transpose3d": ({"*": {"kernel_size": 2, "stride": 2, "padding": 0, "output_padding": 0},
                          "small": {"batch_size": 2, "in_channels": 4, "out_channels": 3, "depth": 3, "height": 3,
                                    "width": 5}},
                         {"*": {"kernel_size": 3, "stride": 1, "padding": 1, "output_padding": 0},
                          "small": {"batch_size": 2, "in_channels": 2, "out_channels": 4, "depth": 4, "height": 5,
                                    "width": 4}}),
    "conv_depthwise2d": ({"*": {"kernel_size": 5, "stride": 2, "padding": 2},
                          "small": {"batch_size": 3, "in_channels": 6, "height": 8, "width": 7}},
                         {"*": {"kernel_size": 3, "stride": 2, "padding": 0},
                          "small": {"batch_size": 2, "in_channels": 5, "height": 7, "width": 6}}),
    "conv_pointwise2d": ({"small": {"batch_size": 3, "in_channels": 5, "out_channels": 6, "height": 7, "width": 8}},
                         {"small": {"batch_size": 2, "in_channels": 8, "out_channels": 4, "height": 6, "width": 5}}),
    "conv_depthwise_separable2d": ({"*": {"kernel_size": 5, "stride": 2, "padding": 2, "dilation": 1},
                                    "small": {"batch_size": 3, "in_channels": 5, "out_channels": 6, "height": 8,
                                              "width": 7}},
                                   {"*": {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 1},
                                    "small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 6,
                                              "width": 8}}),
    # 3-D input (batch, length, features): the scan may run over the features too
    "exclusive_cumsum": ({"*": {"scan_dim": 2}}, {"*": {"scan_dim": 0}}),
    "matmul_scalar": ({"*": {"alpha": 0.5}}, {"*": {"alpha": 2.0}}),
    # Level-2 reductions after a heavy op: another stride / kernel, and group counts that divide the channels
    "conv_global_pool": ({"*": {"stride": 2}}, {"*": {"kernel_size": 5, "padding": 2}}),
    "conv_group_norm": ({"small": {"num_groups": 4}, "full": {"num_groups": 16}},
                        {"small": {"num_groups": 5}, "full": {"num_groups": 4}}),
}

# Families kept in float32 although their reference holds no weights: their reference is not
# meaningful in half precision at the full sizes (products of many factors under- and overflow).
NO_HALF = {"prod_dim", "cumprod"}
# Families whose solutions compute in the input's dtype (no fp32 upcast): Triton's interpreter gets
# bfloat16 arithmetic wrong on the CPU (verified: every value of a bf16 relu / mul / tl.dot differs),
# so their half-precision variant is float16, which the interpreter computes right.
FP16_ONLY = {"mul", "relu", "matmul", "bmm", "matmul_transposed", "outer"}


def _float_rule(name: str, value: float, which: int) -> float:
    """Another value of a float constant: which = 2 (first variant) or 3 (second)."""
    if name == "eps":
        return {1e-6: (1e-5, 1e-4), 1e-5: (1e-6, 1e-4)}.get(value, (value * 10, value / 10))[which - 2]
    if name == "negative_slope":
        return {0.01: (0.2, 0.05), 0.1: (0.01, 0.3)}.get(value, (value * 2, value / 2))[which - 2]
    if name in ("min_val", "max_val"):  # bounds around zero: the first variant widens below, the second above
        lo = name == "min_val"
        return value * (2.0 if lo else 0.5) if which == 2 else value * (0.5 if lo else 2.0)
    if name == "shift":
        return (0.5, -1.0)[which - 2]
    if name == "add_value":
        return (-0.25, 1.0)[which - 2]
    # scale, alpha, beta and the like: halve or double
    return value * (2.0 if which == 2 else 0.5)


def _small_size(value: int, which: int) -> int:
    return value + max(2, value // 2) if which == 2 else value + max(1, value // 4)


def _axis(name: str, value: int, which: int) -> int:
    """Another axis of a 3-D input (reduce_dim) or of a 2-D one (scan_dim)."""
    if name == "reduce_dim":
        return {1: (2, 0), 2: (1, 0), 0: (1, 2)}[value][which - 2]
    return {1: (1, 0), 0: (0, 1)}[value][which - 2]


def variant_sizes(family: str, sizes: dict[str, dict[str, Any]], which: int) -> dict[str, dict[str, Any]]:
    """The (small, full) presets of variant `which` (2 or 3) from the original's presets."""
    out: dict[str, dict[str, Any]] = {}
    for preset in ("small", "full"):
        vals = dict(sizes[preset])
        sized = [k for k in vals if k in SIZE_NAMES and isinstance(vals[k], int)]
        for k in sized:
            if preset == "small":
                vals[k] = _small_size(vals[k], which)
        if preset == "full" and sized:
            # the same element count: one size doubled, another halved (a square matmul: halved only)
            grow, shrink = (sized[0], sized[-1]) if which == 2 else (sized[-1], sized[0])
            if grow != shrink:
                vals[grow] *= 2
                vals[shrink] = max(16, vals[shrink] // 2)
            else:
                vals[grow] = vals[grow] // 2 if which == 2 else vals[grow] * 3 // 4
        for k in AXIS_NAMES:
            if k in vals:
                vals[k] = _axis(k, vals[k], which)
        for k, v in list(vals.items()):
            if isinstance(v, float):
                vals[k] = _float_rule(k, v, which)
        over = OVERRIDES.get(family, ({}, {}))[which - 2]
        vals.update(over.get("*", {}))
        vals.update(over.get(preset, {}))
        out[preset] = vals
    return out


# --------------------------------------------------------------------------- half-precision files


def holds_weights(source: str) -> bool:
    """Does the reference carry learned weights or integer inputs (not made half by a dtype swap)?"""
    markers = ("nn.Linear", "nn.Parameter", "nn.Conv", "nn.BatchNorm", "nn.LayerNorm", "nn.GroupNorm",
               "nn.InstanceNorm", "register_buffer", "torch.randint")
    return any(m in source for m in markers)


def half_source(source: str, dtype: str) -> str:
    """`source` with every `torch.randn(...)` / `torch.rand(...)` call of `get_inputs()` given
    `dtype=torch.<dtype>` (located through the AST; nothing else changes)."""
    tree = ast.parse(source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        raise ValueError("no get_inputs() to make half precision")
    calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("randn", "rand") and isinstance(n.func.value, ast.Name) and n.func.value.id == "torch"]
    if not calls:
        raise ValueError("get_inputs() makes no tensor with torch.randn / torch.rand")
    lines = source.splitlines(keepends=True)
    # insert before each call's closing parenthesis, last first so earlier offsets stay valid
    for call in sorted(calls, key=lambda c: (c.end_lineno, c.end_col_offset), reverse=True):
        if any(k.arg == "dtype" for k in call.keywords):
            raise ValueError("get_inputs() already sets a dtype")
        line = lines[call.end_lineno - 1].encode()
        at = call.end_col_offset - 1  # the ")"
        lines[call.end_lineno - 1] = (line[:at] + f", dtype=torch.{dtype}".encode() + line[at:]).decode()
    return "".join(lines)


# --------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class Variant:
    row: dict[str, Any]
    file_text: str | None  # a new task file's text (half precision), None when the row reuses the original's


def _describe(sizes: dict[str, Any], original: dict[str, Any]) -> str:
    changed = [f"{k}={v}" for k, v in sizes.items() if original.get(k) != v]
    return ", ".join(changed) if changed else "the same sizes"


def variants_of(row: dict[str, Any], index: int) -> list[Variant]:
    """The two variants of one original manifest row (`index`: its place in the suite, which picks
    float16 or bfloat16 for a half-precision variant)."""
    name, level, family = row["name"], row["level"], row["op_family"]
    src = (BUILTIN_DIR / row["file"]).read_text()
    out = []
    for which in (2, 3):
        sizes = variant_sizes(family, row["sizes"], which)
        half = which == 3 and not holds_weights(src) and family not in NO_HALF
        dtype = ("float16" if family in FP16_ONLY else HALF[index % 2]) if half else None
        suffix = "alt" if which == 2 else (("fp16" if dtype == "float16" else "bf16") if dtype else "alt2")
        vname = f"{name}_{suffix}"
        file_rel = f"level{level}/{vname}.py" if dtype else row["file"]
        what = _describe(sizes["full"], row["sizes"]["full"])
        if dtype:
            what = f"{dtype} inputs; {what}"
        new = {**{k: row[k] for k in ("level", "op_family", "category")},
               "id": f"builtin/L{level}/{vname}", "name": vname, "file": file_rel, "solution": row["solution"],
               "description": f"{row['description']} (Variant of {name}: {what}.)",
               "sizes": sizes, "variant_of": name}
        new = {k: new[k] for k in ("id", "level", "name", "file", "solution", "op_family", "category",
                                   "description", "sizes", "variant_of")}
        # a new file holds its own full preset, as every task file on disk does
        text = half_source(rewrite_constants(src, sizes["full"]), dtype) if dtype else None
        out.append(Variant(new, text))
    return out


def planned_manifest(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the manifest with every original followed by its two variants, {file: text} to write)."""
    originals = [r for r in manifest["tasks"] if not r.get("variant_of")]
    rows, files = [], {}
    for i, row in enumerate(originals):
        rows.append(row)
        for v in variants_of(row, i):
            rows.append(v.row)
            if v.file_text is not None:
                files[v.row["file"]] = v.file_text
    return {**manifest, "tasks": rows}, files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tritonrl_lib.tasks.variants", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write the files and the manifest")
    ap.add_argument("--check", action="store_true", help="exit 1 when the manifest or files differ from the rules")
    args = ap.parse_args(argv)
    manifest = json.loads(MANIFEST_PATH.read_text())
    planned, files = planned_manifest(manifest)
    stale = [f for f, text in files.items() if not (BUILTIN_DIR / f).is_file() or (BUILTIN_DIR / f).read_text() != text]
    same_rows = planned["tasks"] == manifest["tasks"]
    print(f"{len(planned['tasks'])} tasks planned ({len(manifest['tasks'])} in the manifest); "
          f"{len(files)} half-precision files, {len(stale)} to write; manifest {'current' if same_rows else 'differs'}")
    if args.check:
        return 0 if same_rows and not stale else 1
    if args.write:
        for f in stale:
            (BUILTIN_DIR / f).write_text(files[f])
        MANIFEST_PATH.write_text(json.dumps(planned, indent=1) + "\n")
        print(f"wrote {len(stale)} files and {MANIFEST_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
