"""How varied the generated references are: shares of docstring styles, layouts, names and sizes.

`survey(n, seed)` renders `n` examples (families in turn, each example's index drawn from the first
`per_family`, as in a corpus of that many examples per family) and classifies the reference each
prompt shows by reading its text, not the style that made it. `python -m
tritonrl_lib.data.templates.survey [n] [seed] [family,...]` prints the table docs/DATA.md quotes.
"""

from __future__ import annotations

import ast
import random
import re
import sys
from collections import Counter
from typing import Sequence

from . import TEMPLATES, render_example
from ...tasks.kb_format import module_constants
from .scale import INT32_SAFE, expr_numel, magnitude

# stateless op modules: holding one as an attribute is the "layer as attribute" way to write an op
_OP_MODULES = re.compile(r"self\.\w+ = nn\.(ReLU|GELU|SiLU|Sigmoid|Tanh|Softmax|LogSoftmax|LeakyReLU|ELU|Softplus|"
                         r"Hardtanh|Hardsigmoid|Hardswish|SELU|Mish|Softsign|MSELoss|L1Loss|SmoothL1Loss|"
                         r"CrossEntropyLoss|KLDivLoss|CosineSimilarity|MaxPool\dd|AvgPool\dd)\(")


def _docstring_kind(tree: ast.Module) -> str:
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    methods = {f.name: f for f in model.body if isinstance(f, ast.FunctionDef)}
    forward_doc = ast.get_docstring(methods["forward"]) or ""
    text = "\n".join(ast.get_docstring(f) or "" for f in methods.values())
    if "----------" in text:
        return "NumPy Parameters/Returns"
    if "Args:" in text:
        return "Google Args/Returns (typed)" if re.search(r"\w+ \([\w.]+\): ", text) else "Args/Returns (untyped)"
    class_doc = ast.get_docstring(model, clean=False)
    if class_doc is None:
        return "none"
    if forward_doc.startswith("Returns: "):
        return "class block + forward Returns (house)"
    node = model.body[0].value  # the docstring's string node
    return "class one-line" if node.lineno == node.end_lineno else "class block"


def _hints(tree: ast.Module) -> str:
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    methods = {f.name: f for f in model.body if isinstance(f, ast.FunctionDef)}
    fwd = methods["forward"].returns is not None
    init = methods["__init__"]
    init_hinted = init.returns is not None or any(a.annotation is not None for a in init.args.args[1:])
    if fwd and init_hinted:
        return "forward and __init__"
    return "forward only" if fwd else ("__init__ only" if init_hinted else "none")


def classify(reference: str) -> dict[str, str]:
    """One reference's surface, read from its text."""
    tree = ast.parse(reference)
    first_class = next(i for i, n in enumerate(tree.body) if isinstance(n, ast.ClassDef))
    consts_before = any(isinstance(n, ast.Assign) for n in tree.body[:first_class])
    consts_after = any(isinstance(n, ast.Assign) for n in tree.body[first_class:])
    get_inputs = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs")
    inputs_src = ast.get_source_segment(reference, get_inputs) or ""
    literal_dims = any(isinstance(a, ast.Constant) and type(a.value) is int
                       for c in ast.walk(get_inputs) if isinstance(c, ast.Call)
                       and ast.unparse(c.func) in ("torch.rand", "torch.randn") for a in c.args)
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    fwd = next(f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "forward")
    args = [a.arg for a in fwd.args.args[1:]]
    fwd_src = ast.get_source_segment(reference, fwd) or ""
    if _OP_MODULES.search(reference):
        op_style = "op held as an attribute (self.act = nn.ReLU())"
    elif re.search(r"\bF\.\w+\(|torch\.nn\.functional\.", fwd_src):
        op_style = "functional (F.* / torch.nn.functional.*)"
    elif any(re.search(rf"\b{re.escape(a)}\)?\.(?!shape|contiguous|T\b|t\(|transpose|chunk|flip)\w+\(", fwd_src)
             for a in args):
        op_style = "tensor method (x.relu())"
    else:
        op_style = "torch.* call or operator"
    init = next((f for f in model.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    defaults = init.args.defaults if init else []
    return {
        "docstring": _docstring_kind(tree),
        "constructor defaults": "a tuple among them" if any(isinstance(d, ast.Tuple) for d in defaults)
        else "numbers" if defaults else "none",
        "module docstring": "yes" if ast.get_docstring(tree) else "no",
        "comments": "yes" if "#" in reference else "no",
        "constants": "before the class" if consts_before else ("after the class" if consts_after else "none"),
        "sizes inline in get_inputs": "yes" if literal_dims else "no",
        "get_inputs": "returns the list directly" if re.search(r"return \[\s*torch\.", inputs_src)
        else "assigns, then returns",
        "input draw": "torch.rand" if "torch.rand(" in inputs_src else "torch.randn / other",
        "super()": "super(Model, self)" if "super(Model, self)" in reference else "super()",
        "type hints": _hints(tree),
        "blank lines between blocks": "one" if "\n\n\nclass Model" not in reference
        and "\n\n\ndef get_inputs" not in reference else "two",
        "op written as": op_style,
        "forward args": ", ".join(args),
    }


def helper_params(solution: str) -> str:
    """How the launch helpers forward calls name the module attributes passed to them: as the call's chain
    (`self.conv.bias` -> `conv_bias`), otherwise, or "no helper"."""
    tree = ast.parse(solution)
    helpers = {f.name: [a.arg for a in f.args.args] for f in tree.body if isinstance(f, ast.FunctionDef)}
    pairs = [(p, ast.unparse(e)) for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id in helpers
             for p, e in zip(helpers[node.func.id], node.args)]
    chains = [(p, e) for p, e in pairs if re.fullmatch(r"self(\.\w+){2,}", e)]
    if not pairs:
        return "no helper"
    if not chains:
        return "no attribute chain passed"
    return "chains named by the call" if all(p == e[5:].replace(".", "_") for p, e in chains) else "chains named otherwise"


def input_numel(reference: str) -> int:
    """Elements of the largest tensor `get_inputs()` draws, sizes read from the module's constants."""
    tree = ast.parse(reference)
    values = module_constants(reference)
    get_inputs = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs")
    calls = [ast.unparse(c) for c in ast.walk(get_inputs) if isinstance(c, ast.Call)]
    return max((expr_numel(c, values) for c in calls), default=0)


def survey(n: int = 300, seed: int = 0, families: Sequence[str] | None = None,
           per_family: int = 60) -> dict[str, Counter]:
    """Counts of each surface feature over `n` rendered examples, plus their sizes and offsets."""
    fams = list(families or TEMPLATES)
    rng = random.Random(f"survey:{seed}")
    out: dict[str, Counter] = {}
    for k in range(n):
        fam = fams[k % len(fams)]
        ex = render_example(fam, seed, rng.randrange(per_family))
        feats = classify(ex.prompt_reference)
        constants = [n.targets[0].id for n in ast.parse(ex.prompt_reference).body
                     if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)]
        numel = input_numel(ex.prompt_reference)
        feats |= {
            "house surface (today's style)": "yes" if ex.style.house_surface else "no",
            "sizes shown": "published scale" if ex.published_reference else "verified (small)",
            "largest input, elements": magnitude(numel),
            "over 2**31 elements": "yes" if numel >= INT32_SAFE else "no",
            "1D offsets in int64": "yes" if "tl.int64" in ex.solution else "no",
            "launch helper's parameters": helper_params(ex.solution),
        }
        for key, value in feats.items():
            out.setdefault(key, Counter())[value] += 1
        for name in constants:
            out.setdefault("size-constant names", Counter())[name] += 1
    return out


def format_survey(counts: dict[str, Counter], n: int, top: int = 8) -> str:
    lines = []
    for key, c in counts.items():
        total = n if key != "size-constant names" else sum(c.values())
        shares = ", ".join(f"{v} {100 * k / total:.0f}%" for v, k in c.most_common(top))
        more = f" (+{len(c) - top} more)" if len(c) > top else ""
        lines.append(f"{key}: {shares}{more}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> None:
    n = int(argv[0]) if argv else 300
    seed = int(argv[1]) if len(argv) > 1 else 0
    families = argv[2].split(",") if len(argv) > 2 else None  # e.g. gemm_chain,conv_group_norm
    print(f"{n} examples, seed {seed}, {len(families or TEMPLATES)} families")
    print(format_survey(survey(n, seed, families), n))


if __name__ == "__main__":
    main(sys.argv[1:])
