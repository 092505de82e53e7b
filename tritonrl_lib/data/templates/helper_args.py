"""A Level-2 epilogue's launch: inline in forward, or in a helper whose parameters are named after what
forward passes them (`helper_launch`, for wrap_launch here and reduce_common.finish).

forward calls `fused_chain(y, self.conv.bias, self.group_norm.weight, self.group_norm.eps)`; the helper's
signature then reads `def fused_chain(y, conv_bias, group_norm_weight, group_norm_eps)`: `self.` dropped,
dots made underscores. Named by role instead (`heavy_bias`, `norm_weight`, `eps`), a parameter gives a small
model nothing to copy, and on held-out KernelBench it wrote the call's expression into the signature
(`def f(y, max_pool2d.stride)`: a syntax error, 4 of 14 in the eighteenth session's Level-2 SFT). One rule,
the same for every parameter, is one it can copy.
"""

from __future__ import annotations

import re

from .base import Style

_SELF_ATTR = re.compile(r"self\.(\w+(?:\.\w+)*)")


def call_name(expr: str) -> str | None:
    """The parameter name for a forward expression `self.a.b` ("a_b"); None for anything else."""
    m = _SELF_ATTR.fullmatch(expr.strip())
    return m.group(1).replace(".", "_") if m else None


def _rename(line: str, old: str, new: str) -> str:
    """`old` as a name in `line` made `new`; an attribute (`x.old`) and a keyword's name (`f(old=...)`) kept."""
    out, pos = [], 0
    for m in re.finditer(rf"(?<![\w.]){re.escape(old)}\b", line):
        before = line[: m.start()].rstrip()
        keyword = re.match(r"\s*=(?!=)", line[m.end():]) and before.endswith(("(", ","))
        out.append(line[pos: m.start()] + (old if keyword else new))
        pos = m.end()
    return "".join(out) + line[pos:]


def named_by_call(params: list[str], exprs: list[str], launch: list[str]) -> tuple[list[str], list[str]]:
    """(params, launch lines) with each parameter whose expression is an attribute of the module named by
    `call_name`, its uses in the launch lines renamed with it. A name already used in the launch lines or
    by another parameter keeps the role name (no clash is ever made)."""
    words = set(re.findall(r"\w+", "\n".join(launch))) | set(params)
    out = list(params)
    for i, (p, e) in enumerate(zip(params, exprs)):
        new = call_name(e)
        if new is None or new == p or new in words:
            continue
        words.add(new)
        out[i] = new
        launch = [_rename(ln, p, new) for ln in launch]
    return out, launch


def helper_launch(style: Style, family: str, kname: str, head: list[str], launch: list[str], params: list[str],
                  exprs: list[str]) -> tuple[list[str], list[str]]:
    """(helpers, forward lines) of a launch in a helper function forward calls after `head`, its parameters
    named by the call (`named_by_call`): what both Level-2 helper builders write (wrap_launch here,
    reduce_common.finish)."""
    fn = style.pick_name(("fused_{}", "launch_{}", "{}_forward", "triton_{}"), salt=3).format(family)
    if fn == kname:
        fn = f"launch_{family}"
    params, launch = named_by_call(params, exprs, launch)  # `self.conv.bias` -> `conv_bias`
    doc = ['    """Runs the fused epilogue over the output of the heavy op."""'] if style.sol_docstrings else []
    helper = f"def {fn}({', '.join(['y', *params])}):\n" + "\n".join(doc + [f"    {ln}" for ln in launch]) + "\n"
    return [helper], head + [f"return {fn}({', '.join(['y', *exprs])})"]


def wrap_launch(style: Style, family: str, kname: str, sol_line: str, launch: list[str], params: list[str],
                exprs: list[str], note: str) -> tuple[list[str], list[str]]:
    """(helpers, forward lines): the launch inline in forward, or in a helper function forward calls."""
    head = ([f"# {note}"] if style.comments else []) + [sol_line]
    if style.launcher != "function":
        subs = dict(zip(params, exprs))
        body = [re.sub(r"\b(\w+)\b", lambda m: subs.get(m.group(1), m.group(1)), ln) if "[grid]" in ln else ln
                for ln in launch]
        return [], head + body
    return helper_launch(style, family, kname, head, launch, params, exprs)
