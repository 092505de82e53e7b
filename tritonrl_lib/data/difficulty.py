"""Difficulty labels from the source report's heuristics, made precise enough to test.

`label_difficulty(source, description)` reads a KernelBench-format reference and returns a level
with the reasons behind it. What is detected, checked in this order:

Level 3 (custom algorithm / architecture), any of:
- algorithm: a call to a sort / top-k / unique / search style op, a data-dependent-shape op
  (nonzero, masked_select), attention (scaled_dot_product_attention, MultiheadAttention,
  Transformer layers), a recurrence (LSTM / GRU / RNN) or an FFT;
- attention pattern: a dependency chain matmul -> softmax -> matmul in `forward`;
- control flow: a `while` loop, an `if` on a tensor's value, or a `for` loop that applies
  operations (over layers, time steps or chunks) inside the forward computation;
- composition: two or more nn.Module classes in the source, a container submodule
  (Sequential / ModuleList / ModuleDict), or four or more layer submodules.

Level 2 (fusion), any of:
- multiple operations: two or more compute operations in the forward computation (torch / F
  calls, submodule calls, tensor methods, arithmetic on tensors; reshapes and creation don't count);
- sequential chain: three or more operations each consuming the previous one's result;
- keyword: "fused", "fusion" or "combined" in the description, a class name or a docstring;
- long reference: more than 50 Python tokens in the forward computation (the whole module would
  always be longer: the imports and get_inputs alone exceed it).

Otherwise Level 1. The forward computation is `Model.forward` plus the module's own helper
methods and functions it calls.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from ..tasks.task import Task
from .records import DifficultyRecord

LONG_REFERENCE_TOKENS = 50
CHAIN_MIN = 3
MANY_LAYERS = 4
FUSION_WORDS = re.compile(r"fused|fusion|combined", re.IGNORECASE)

# Calls that move, view or create data rather than compute on it.
LAYOUT_OPS = frozenset("""
view reshape permute transpose t contiguous flatten unflatten squeeze unsqueeze expand expand_as
size dim numel shape to float half double bfloat16 int long bool type type_as detach cpu cuda
clone copy cat concat concatenate stack split chunk narrow select index_select gather
repeat repeat_interleave tile flip roll movedim swapaxes
zeros ones empty full zeros_like ones_like empty_like full_like rand randn randint rand_like
randn_like arange linspace tensor as_tensor from_numpy manual_seed no_grad is_contiguous item
""".split())
# Python builtins sharing names with torch ops: only layout when called as bare names.
_BUILTIN_NAMES = frozenset("min max abs sum round len range int float str bool list tuple dict "
                           "enumerate zip isinstance getattr hasattr print super divmod".split())

ALGORITHM_OPS = {
    "sort": "sort", "argsort": "sort", "msort": "sort", "topk": "top-k", "kthvalue": "top-k",
    "median": "selection", "nanmedian": "selection", "mode": "selection", "quantile": "selection",
    "unique": "unique", "unique_consecutive": "unique", "searchsorted": "search", "bucketize": "search",
    "nonzero": "data-dependent shape", "masked_select": "data-dependent shape", "argwhere": "data-dependent shape",
    "scaled_dot_product_attention": "attention", "multiheadattention": "attention",
    "multi_head_attention_forward": "attention", "transformer": "attention",
    "transformerencoder": "attention", "transformerdecoder": "attention",
    "transformerencoderlayer": "attention", "transformerdecoderlayer": "attention",
    "lstm": "recurrence", "gru": "recurrence", "rnn": "recurrence", "lstmcell": "recurrence",
    "grucell": "recurrence", "rnncell": "recurrence",
    "fft": "fft", "rfft": "fft", "ifft": "fft", "irfft": "fft", "fft2": "fft", "rfft2": "fft", "fftn": "fft",
    "histc": "histogram", "bincount": "histogram",
}
MATMUL_OPS = frozenset({"matmul", "mm", "bmm", "einsum", "linear", "baddbmm", "addmm"})
SOFTMAX_OPS = frozenset({"softmax", "log_softmax"})
CONTAINER_MODULES = frozenset({"sequential", "modulelist", "moduledict"})
# nn module classes without weights: they are operations, not layers, for the composition count.
_WEIGHTLESS_HINT = re.compile(r"relu|gelu|silu|sigmoid|tanh|softmax|dropout|pool|identity|flatten|"
                              r"elu|mish|hardswish|hardtanh|softplus|softsign|upsample|pad|shuffle",
                              re.IGNORECASE)

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.MatMult: "matmul",
           ast.Pow: "pow", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_TORCH_ROOTS = frozenset({"torch", "F", "nn", "functional", "special", "linalg", "fft"})


@dataclass
class DifficultyLabel:
    level: int
    reasons: list[str] = field(default_factory=list)
    n_tokens: int = 0
    ops: list[str] = field(default_factory=list)  # compute operations found, in source order


@dataclass
class _Analysis:
    ops: list[str] = field(default_factory=list)
    longest_chain: list[str] = field(default_factory=list)
    chains: list[list[str]] = field(default_factory=list)
    control_flow: list[str] = field(default_factory=list)
    n_tokens: int = 0
    module_classes: list[str] = field(default_factory=list)
    containers: list[str] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    docstrings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- public API


def label_difficulty(source: str, description: str = "", name: str = "",
                     class_name: str = "Model") -> DifficultyLabel:
    """The heuristic level (1, 2 or 3) of a reference module, with the reasons that decided it."""
    try:
        a = _analyse(source, class_name)
    except SyntaxError as e:
        text = " ".join([description, name, source])
        reasons = [f"unparseable: {e.msg} (line {e.lineno})"]
        if FUSION_WORDS.search(text):
            reasons.append(f"keyword: {FUSION_WORDS.search(text).group(0).lower()}")
            return DifficultyLabel(2, reasons)
        return DifficultyLabel(1, reasons)

    level3: list[str] = []
    algos = sorted({f"{ALGORITHM_OPS[op]} ({op})" for op in a.ops if op in ALGORITHM_OPS})
    level3 += [f"algorithm: {x}" for x in algos]
    for chain in a.chains:
        if _has_attention_pattern(chain):
            level3.append("attention pattern: " + " -> ".join(chain))
            break
    level3 += [f"control flow: {c}" for c in a.control_flow]
    if len(a.module_classes) >= 2:
        level3.append(f"composition: {len(a.module_classes)} nn.Module classes ({', '.join(a.module_classes)})")
    if a.containers:
        level3.append(f"composition: container submodule ({', '.join(a.containers)})")
    if len(a.layers) >= MANY_LAYERS:
        level3.append(f"composition: {len(a.layers)} layer submodules")
    if level3:
        return DifficultyLabel(3, level3, a.n_tokens, a.ops)

    level2: list[str] = []
    if len(a.ops) >= 2:
        level2.append(f"multiple ops ({len(a.ops)}): {', '.join(a.ops)}")
    if len(a.longest_chain) >= CHAIN_MIN:
        level2.append("chain: " + " -> ".join(a.longest_chain))
    text = " ".join([description, name, *a.module_classes, *a.docstrings])
    m = FUSION_WORDS.search(text)
    if m:
        level2.append(f"keyword: {m.group(0).lower()}")
    if a.n_tokens > LONG_REFERENCE_TOKENS:
        level2.append(f"long reference: {a.n_tokens} tokens > {LONG_REFERENCE_TOKENS}")
    if level2:
        return DifficultyLabel(2, level2, a.n_tokens, a.ops)
    only = f"single op: {a.ops[0]}" if a.ops else "no compute op found"
    return DifficultyLabel(1, [only], a.n_tokens, a.ops)


def label_task(task: Task) -> DifficultyRecord:
    lab = label_difficulty(task.source, task.description, task.name)
    declared = task.level if task.origin != "kernelbook" else None
    return DifficultyRecord(id=task.id, origin=task.origin, name=task.name, op_family=task.op_family,
                            category=task.category, declared_level=declared, level=lab.level,
                            reasons=lab.reasons, n_tokens=lab.n_tokens)


def label_tasks(tasks: Iterable[Task]) -> list[DifficultyRecord]:
    return [label_task(t) for t in tasks]


def difficulty_counts(labels: Iterable[DifficultyRecord | DifficultyLabel | int]) -> dict[int, int]:
    """How many labels fall on each level; every level 1-3 is present, zeros included."""
    c = Counter(x if isinstance(x, int) else x.level for x in labels)
    return {lvl: c.get(lvl, 0) for lvl in (1, 2, 3)}


def agreement(labels: Iterable[DifficultyRecord]) -> dict[str, int]:
    """Heuristic label vs the level the task's source declared: counts of `declared->labelled`."""
    c = Counter(f"L{r.declared_level}->L{r.level}" for r in labels if r.declared_level is not None)
    return dict(sorted(c.items()))


# --------------------------------------------------------------------------- analysis


def _has_attention_pattern(chain: list[str]) -> bool:
    state = 0
    for op in chain:
        if state == 0 and op in MATMUL_OPS:
            state = 1
        elif state == 1 and op in SOFTMAX_OPS:
            state = 2
        elif state == 2 and op in MATMUL_OPS:
            return True
    return False


def _is_module_class(node: ast.ClassDef) -> bool:
    for b in node.bases:
        last = b.attr if isinstance(b, ast.Attribute) else b.id if isinstance(b, ast.Name) else ""
        if last == "Module":
            return True
    return False


def _dotted(node: ast.AST) -> list[str]:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return []


def _analyse(source: str, class_name: str) -> _Analysis:
    tree = ast.parse(source)
    a = _Analysis()
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    module_classes = [c for c in classes if _is_module_class(c)]
    a.module_classes = [c.name for c in module_classes]
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    model = next((c for c in module_classes if c.name == class_name), None)
    if model is None:
        model = next((c for c in module_classes
                      if any(isinstance(f, ast.FunctionDef) and f.name == "forward" for f in c.body)), None)
    for c in module_classes:
        doc = ast.get_docstring(c)
        if doc:
            a.docstrings.append(doc)
    if model is None:
        return a

    methods = {f.name: f for f in model.body if isinstance(f, ast.FunctionDef)}
    submodules, params = _init_attributes(methods.get("__init__"))
    a.containers = sorted({k for k in submodules.values() if k in CONTAINER_MODULES})
    a.layers = [attr for attr, kind in submodules.items()
                if kind not in CONTAINER_MODULES and not _WEIGHTLESS_HINT.search(kind)]
    forward = methods.get("forward")
    if forward is None:
        return a
    doc = ast.get_docstring(forward)
    if doc:
        a.docstrings.append(doc)

    # The forward computation: forward plus the helper methods / module functions it reaches.
    bodies = [forward]
    seen = {"forward"}
    i = 0
    while i < len(bodies):
        for node in ast.walk(bodies[i]):
            if isinstance(node, ast.Call):
                tgt = None
                if (isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
                        and node.func.value.id == "self" and node.func.attr in methods):
                    tgt = methods[node.func.attr]
                elif isinstance(node.func, ast.Name) and node.func.id in functions:
                    tgt = functions[node.func.id]
                if tgt is not None and tgt.name not in seen and tgt.name != "__init__":
                    seen.add(tgt.name)
                    bodies.append(tgt)
        i += 1

    flow = _Flow(submodules, params, set(methods) | set(functions))
    for fn in bodies:
        flow.run_function(fn)
        a.n_tokens += _count_tokens(source, fn)
    a.ops = flow.ops
    a.chains = flow.chains
    a.longest_chain = max(flow.chains, key=len, default=[])
    a.control_flow = flow.control_flow
    return a


def _init_attributes(init: ast.FunctionDef | None) -> tuple[dict[str, str], set[str]]:
    """`self.<attr> = nn.Conv2d(...)` -> {attr: "conv2d"}; Parameters and buffers -> params."""
    submodules: dict[str, str] = {}
    params: set[str] = set()
    if init is None:
        return submodules, params
    for node in ast.walk(init):
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif (isinstance(node, ast.Call) and _dotted(node.func)[-1:] == ["register_buffer"]
              and node.args and isinstance(node.args[0], ast.Constant)):
            params.add(str(node.args[0].value))
            continue
        for t in targets:
            if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
                continue
            if isinstance(value, ast.Call):
                name = _dotted(value.func)
                last = name[-1] if name else ""
                if last in ("Parameter", "randn", "zeros", "ones", "empty", "rand", "tensor", "full"):
                    params.add(t.attr)
                elif last and last[0].isupper():
                    submodules[t.attr] = _canonical_module(last)
    return submodules, params


def _canonical_module(cls: str) -> str:
    """nn.Conv2d -> conv2d, nn.BatchNorm2d -> batch_norm, nn.LayerNorm -> layer_norm, nn.ReLU -> relu."""
    low = cls.lower()
    for pat, canon in (("batchnorm", "batch_norm"), ("layernorm", "layer_norm"), ("groupnorm", "group_norm"),
                       ("instancenorm", "instance_norm"), ("rmsnorm", "rms_norm")):
        if low.startswith(pat):
            return canon
    return low


class _Flow:
    """Walks forward's statements in order, tracking which names hold tensors and the chain of
    operations that produced each one."""

    def __init__(self, submodules: dict[str, str], params: set[str], callables: set[str]):
        self.submodules = submodules
        self.params = params
        self.callables = callables
        self.ops: list[str] = []
        self.chains: list[list[str]] = []
        self.control_flow: list[str] = []
        self.env: dict[str, list[str]] = {}

    def run_function(self, fn: ast.FunctionDef) -> None:
        for arg in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
            if arg.arg != "self":
                self.env.setdefault(arg.arg, [])
        if fn.args.vararg:
            self.env.setdefault(fn.args.vararg.arg, [])
        self._block(fn.body, in_loop=False)

    # statements
    def _block(self, stmts: list[ast.stmt], in_loop: bool) -> None:
        for s in stmts:
            self._stmt(s, in_loop)

    def _stmt(self, s: ast.stmt, in_loop: bool) -> None:
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            value = s.value
            if value is None:
                return
            chain = self._expr(value)
            if isinstance(s, ast.AugAssign):
                op = _BINOPS.get(type(s.op), "binop")
                prev = self._expr(s.target)
                if prev is not None or chain is not None:
                    chain = self._op(op, [prev, chain])
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self._bind(t, chain)
        elif isinstance(s, (ast.Return, ast.Expr)):
            if s.value is not None:
                self._expr(s.value)
        elif isinstance(s, ast.While):
            self.control_flow.append("while loop")
            self._expr(s.test)
            self._block(s.body + s.orelse, in_loop=True)
        elif isinstance(s, ast.For):
            before = len(self.ops)
            it = self._expr(s.iter)
            self._bind(s.target, it if it is not None else None)
            self._block(s.body + s.orelse, in_loop=True)
            if len(self.ops) > before and not in_loop:
                self.control_flow.append("for loop applying ops")
        elif isinstance(s, ast.If):
            if self._expr(s.test) is not None or _mentions_item(s.test):
                self.control_flow.append("if on a tensor value")
            self._block(s.body + s.orelse, in_loop)
        elif isinstance(s, ast.With):
            self._block(s.body, in_loop)
        elif isinstance(s, ast.Try):
            self._block(s.body + s.orelse + s.finalbody, in_loop)

    def _bind(self, target: ast.expr, chain: list[str] | None) -> None:
        if isinstance(target, ast.Name):
            if chain is None:
                self.env.pop(target.id, None)
            else:
                self.env[target.id] = chain
        elif isinstance(target, (ast.Tuple, ast.List)):
            for el in target.elts:
                self._bind(el, chain)

    # expressions: return the op chain producing a tensor value, or None for non-tensors
    def _op(self, name: str, inputs: list[list[str] | None]) -> list[str]:
        self.ops.append(name)
        longest = max((c for c in inputs if c is not None), key=len, default=[])
        chain = [*longest, name]
        self.chains.append(chain)
        return chain

    def _expr(self, e: ast.expr) -> list[str] | None:
        if isinstance(e, ast.Name):
            return self.env.get(e.id)
        if isinstance(e, ast.Constant):
            return None
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "self":
                return [] if e.attr in self.params else None
            if e.attr in ("shape", "dtype", "device", "ndim", "T", "mT"):
                base = self._expr(e.value)
                return base if e.attr in ("T", "mT") else None
            return self._expr(e.value)
        if isinstance(e, ast.Subscript):
            self._expr(e.slice)
            return self._expr(e.value)
        if isinstance(e, ast.BinOp):
            left, right = self._expr(e.left), self._expr(e.right)
            if left is None and right is None:
                return None
            return self._op(_BINOPS.get(type(e.op), "binop"), [left, right])
        if isinstance(e, ast.UnaryOp):
            inner = self._expr(e.operand)
            if inner is not None and isinstance(e.op, ast.USub):
                return self._op("neg", [inner])
            return inner
        if isinstance(e, ast.Compare):
            parts = [self._expr(x) for x in [e.left, *e.comparators]]
            tensors = [p for p in parts if p is not None]
            return self._op("compare", tensors) if tensors else None
        if isinstance(e, ast.BoolOp):
            parts = [self._expr(x) for x in e.values]
            return next((p for p in parts if p is not None), None)
        if isinstance(e, ast.IfExp):
            self._expr(e.test)
            a, b = self._expr(e.body), self._expr(e.orelse)
            return a if a is not None else b
        if isinstance(e, (ast.Tuple, ast.List)):
            parts = [self._expr(x) for x in e.elts]
            tensors = [p for p in parts if p is not None]
            return max(tensors, key=len) if tensors else None
        if isinstance(e, ast.Call):
            return self._call(e)
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                self._expr(child)
        return None

    def _call(self, e: ast.Call) -> list[str] | None:
        args = [self._expr(x) for x in e.args] + [self._expr(k.value) for k in e.keywords]
        tensor_args = [x for x in args if x is not None]
        func = e.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in self.submodules:
                return self._op(self.submodules[func.attr], tensor_args)
            if func.attr in self.callables:  # a helper method: its own ops are walked separately
                return max(tensor_args, key=len) if tensor_args else []
            return self._op(func.attr, tensor_args)
        dotted = _dotted(func)
        if dotted and dotted[0] in _TORCH_ROOTS:
            name = dotted[-1]
            if name in LAYOUT_OPS:
                return max(tensor_args, key=len) if tensor_args else None
            if name[:1].isupper():  # an nn module built inline, e.g. nn.ReLU()(x)
                return self._op(_canonical_module(name), tensor_args)
            return self._op(name.lower(), tensor_args)
        if isinstance(func, ast.Attribute):
            receiver = self._expr(func.value)
            name = func.attr
            if receiver is None and not tensor_args:
                return None
            if name in LAYOUT_OPS:
                if name in ("size", "dim", "numel", "item", "is_contiguous"):
                    return None
                return receiver if receiver is not None else max(tensor_args, key=len)
            return self._op(name.rstrip("_"), [receiver, *tensor_args])
        if isinstance(func, ast.Name):
            if func.id in _BUILTIN_NAMES:
                return max(tensor_args, key=len) if tensor_args and func.id in ("min", "max", "abs", "sum") else None
            if func.id in self.callables:
                return max(tensor_args, key=len) if tensor_args else []
            if tensor_args:
                return self._op(func.id.lower(), tensor_args)
            return None
        if isinstance(func, ast.Call):  # nn.ReLU()(x): the inner call names the op
            inner = _dotted(func.func)
            if inner and inner[-1][:1].isupper():
                return self._op(_canonical_module(inner[-1]), tensor_args)
        return max(tensor_args, key=len) if tensor_args else None


def _mentions_item(e: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("item", "any", "all", "tolist")
               for n in ast.walk(e))


def _count_tokens(source: str, fn: ast.FunctionDef) -> int:
    """Python tokens of a function's body, without its docstring, comments and layout tokens."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    lines = source.splitlines()
    start, end = body[0].lineno, max(getattr(s, "end_lineno", s.lineno) or s.lineno for s in body)
    text = "\n".join(lines[start - 1:end])
    skip = {tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.COMMENT,
            tokenize.ENDMARKER, tokenize.ENCODING}
    try:
        toks = tokenize.generate_tokens(io.StringIO(textwrap.dedent(text)).readline)
        return sum(1 for t in toks if t.type not in skip)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return len(re.findall(r"\w+|[^\w\s]", text))
