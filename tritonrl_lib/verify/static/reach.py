"""The static check's reachability pass: what ModelNew.forward can reach (its methods, helper
classes, module-level functions, transitively), which Triton kernels it launches, and the PyTorch
compute on the way that the policy leaves to Triton (verify/policy.py), and the host compute
(numpy reached any way, Python loops over tensor elements, tensors rebuilt from host data:
host.py says what counts).
"""

from __future__ import annotations

import ast
import builtins
import functools
from typing import Iterable

from .. import policy as pol
from .. import reasons as R
from .facts import AttrKind, ModuleFacts, walk_skip
from .host import (FROM_HOST, FROM_HOST_UNLESS_LITERAL, ITERATING_BUILTINS, SCALAR_READS, TensorNames,
                   forward_tensor_params, is_literal, loop_body_ids)
from .rules import AMBIGUOUS_METHODS, MODULE_BOOKKEEPING, NUMPY_SCALAR_OK, RNG_CALLS, TORCH_SAFE_SUBMODULES


# dunders of a reached class that forward's work does not run (printing, pickling hooks are
# flagged on their own)
_NOT_CALLED_IMPLICITLY = frozenset({"__init__", "__new__", "__repr__", "__str__", "__format__", "__init_subclass__",
                                    "__class_getitem__",
                                    "__set_name__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
                                    "__del__", "__dir__", "__sizeof__", "__hash__"})


@functools.lru_cache(maxsize=1)
def _tensor_methods() -> frozenset[str]:
    import torch  # the policy tables import it already

    return frozenset(n for n in dir(torch.Tensor) if not n.startswith("_"))


class Reach:
    """Follows forward through methods, helper classes and module-level functions, collecting
    kernel launches and judging PyTorch compute on the way."""

    def __init__(self, an: ModuleFacts, model: ast.ClassDef):
        self.an = an
        self.model = model
        self.methods = an.methods(model)
        self.attrs = an.attr_kinds(model)
        self.queue: list[tuple[str, ast.AST, dict[str, ast.AST], dict[str, AttrKind]]] = []
        self.done: set[int] = set()
        self.launched: list[str] = []
        self.kernel_refs: list[str] = []
        self.generic_launches = 0
        self.functions: list[str] = []
        # `helper.softmax(x)` on an instance of a module-local class is not Tensor.softmax. Only
        # methods count here: a module-level `def softmax` does not make `x.softmax()` Triton.
        self.local_method_names = {f.name for c in an.index.of(ast.ClassDef)
                                   for f in c.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.roots = {id(self.methods[r]) for r in ("forward", "__call__") if r in self.methods}
        # per visited function: its own aliases, its loop bodies, its tensors
        self.local: dict[str, str] = {}
        self.in_loop: set[int] = set()
        self.tensors: TensorNames | None = None

    def enqueue(self, label: str, fn: ast.AST, methods: dict, attrs: dict) -> None:
        if id(fn) in self.done or id(fn) in self.an.kernel_nodes:
            return
        self.done.add(id(fn))
        self.queue.append((label, fn, methods, attrs))
        # a decorator's wrapper is what a call of the decorated function runs
        for d in getattr(fn, "decorator_list", []):
            for n in ast.walk(d):
                if isinstance(n, ast.Name) and n.id in self.an.module_funcs:
                    self.enqueue(f"{n.id} (decorator)", self.an.module_funcs[n.id], {}, {})

    def enqueue_class(self, cls_name: str, which: Iterable[str]) -> None:
        cls = self.an.classes.get(cls_name)
        if cls is None:
            return
        methods = self.an.methods(cls)
        attrs = self.an.attr_kinds(cls)
        # Python calls an object's dunder methods itself (operators, conversions, iteration)
        implicit = [m for m in methods if m.startswith("__") and m.endswith("__") and m not in _NOT_CALLED_IMPLICITLY]
        for m in [*which, *implicit]:
            if m in methods:
                self.enqueue(f"{cls_name}.{m}", methods[m], methods, attrs)

    def run(self) -> None:
        for root in ("forward", "__call__"):
            if root in self.methods:
                self.enqueue(f"ModelNew.{root}", self.methods[root], self.methods, self.attrs)
        for d in self.model.decorator_list:
            for n in ast.walk(d):
                if isinstance(n, ast.Name) and n.id in self.an.module_funcs:
                    self.enqueue(n.id, self.an.module_funcs[n.id], {}, {})
        while self.queue:
            label, fn, methods, attrs = self.queue.pop(0)
            self.functions.append(label)
            self.visit(label, fn, methods, attrs)
        if not self.launched and self.kernel_refs and self.generic_launches:
            self.launched = list(dict.fromkeys(self.kernel_refs))

    def _launch(self, name: str) -> None:
        if name not in self.launched:
            self.launched.append(name)

    def _torch_function(self, func: ast.AST) -> str | None:
        """`torch.reshape` -> "reshape" (for telling tensors), else None."""
        q = self.an.canonical(func, self.local) if isinstance(func, (ast.Name, ast.Attribute)) else None
        return q.split(".", 1)[1] if q and q.startswith("torch.") and q.count(".") == 1 else None

    def visit(self, label: str, fn: ast.AST, methods: dict, attrs: dict) -> None:
        an = self.an
        fn_nodes = list(walk_skip(fn, an.kernel_nodes - {id(fn)}))
        self.local = an.bindings.local_aliases(fn_nodes)
        self.in_loop = loop_body_ids(fn_nodes)
        params = forward_tensor_params(fn) if id(fn) in self.roots else set()
        self.tensors = TensorNames(fn_nodes, params, self._torch_function, _tensor_methods())
        for node in fn_nodes:
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                self.host_reference(label, node)
            if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and self.tensors.is_tensor(node.iter):
                self.host(node.iter, label, "iteration",
                          f"`for ... in {ast.unparse(node.iter)}` iterates a tensor in Python")
            elif isinstance(node, ast.Starred) and self.tensors.is_tensor(node.value) \
                    or isinstance(node, ast.Assign) and isinstance(node.targets[0], (ast.Tuple, ast.List)) \
                    and self.tensors.is_tensor(node.value):
                self.host(node, label, "iteration", f"`{ast.unparse(node)}` unpacks a tensor in Python")
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in an.kernels:
                    self.kernel_refs.append(node.id)
                elif node.id in an.global_kernel_holders:
                    self.kernel_refs.extend(sorted(an.global_kernel_holders[node.id]))
                elif node.id in an.module_funcs:
                    self.enqueue(node.id, an.module_funcs[node.id], {}, {})
                elif node.id in an.global_code and node.id not in self.local:
                    for n, code in enumerate(an.global_code[node.id]):
                        self.enqueue(f"{node.id}[{n}]", code, {}, {})
                elif node.id in an.classes:
                    self.enqueue_class(node.id, ("__init__", "forward", "__call__"))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                base = node.value.id
                if base in ("self", "cls") and node.attr in methods:
                    self.enqueue(f"{label.split('.')[0]}.{node.attr}", methods[node.attr], methods, attrs)
                elif base in ("self", "cls") and node.attr in an.kernels:
                    self.kernel_refs.append(node.attr)
                elif base in an.classes:
                    self.enqueue_class(base, (node.attr,) if node.attr != "apply" else ("forward",))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "self":
                k = attrs.get(node.value.attr)
                if k and k.kind == "local":
                    self.enqueue_class(k.names[0], (node.attr,))
            if isinstance(node, ast.Call):
                self.visit_call(label, node, attrs)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) \
                    or isinstance(node, ast.AugAssign) and isinstance(node.op, ast.MatMult):
                if not pol.op_allowed(an.policy, "matmul", an.extra):
                    self.compute(node, label, "@", "the `@` operator runs torch.matmul")
            elif isinstance(node, ast.For):
                self.visit_for(label, node, attrs)

    def host_reference(self, label: str, node: ast.Name | ast.Attribute) -> None:
        """numpy compute named anywhere (`partial(np.exp)`, `map(np.exp, rows)`, a module-level
        name holding it), and a tensor's numpy/tolist method taken without a call."""
        an = self.an
        if isinstance(node, ast.Name) and node.id in an.numpy_holders and node.id not in self.local:
            self.host(node, label, an.numpy_holders[node.id],
                      f"`{node.id}` holds numpy compute (`{an.numpy_holders[node.id]}`)")
            return
        if id(node) in an.call_funcs:
            return  # calls are judged by visit_call
        q = an.numpy_compute(node, self.local)
        if q:
            self.host(node, label, q, f"`{ast.unparse(node)}` is numpy compute")
        elif isinstance(node, ast.Attribute) and node.attr in pol.TENSOR_TO_HOST:
            self.host(node, label, f"Tensor.{node.attr}", f"`.{node.attr}` takes the tensor's data to the host")

    def host(self, node: ast.AST, label: str, what: str, how: str) -> None:
        self.an.add(R.static("host_compute"), node, f"{how} in {label}: compute on the host escapes Triton "
                    "and the op census; do it in a Triton kernel", f"host_compute:{what}")

    def host_call(self, label: str, node: ast.Call) -> None:
        """Element reads in a loop, tensors iterated by a builtin."""
        func, tensors = node.func, self.tensors
        in_loop = id(node) in self.in_loop
        if in_loop and isinstance(func, ast.Attribute) and func.attr == "item" and not node.args:
            self.host(node, label, "Tensor.item", "`.item()` in a loop reads tensor elements one by one")
        elif isinstance(func, ast.Name) and func.id not in self.an.bound:
            args = [a.value if isinstance(a, ast.Starred) else a for a in node.args]
            if in_loop and func.id in SCALAR_READS and args and tensors.is_tensor(args[0]):
                self.host(node, label, func.id, f"`{func.id}({ast.unparse(args[0])})` in a loop reads tensor "
                          "elements one by one")
            elif func.id in ITERATING_BUILTINS and any(tensors.is_tensor(a) for a in args):
                self.host(node, label, "iteration", f"`{func.id}(...)` iterates a tensor in Python")

    def visit_for(self, label: str, node: ast.For, attrs: dict) -> None:
        """`for layer in self.layers: x = layer(x)` calls every module in the container."""
        held = [n.attr for n in ast.walk(node.iter) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name) and n.value.id == "self" and n.attr in attrs]
        if not held:
            return
        loop_vars = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in loop_vars:
                for attr in held:
                    self.call_attr(label, sub, attr, attrs)

    def call_attr(self, label: str, node: ast.Call, attr: str, attrs: dict) -> None:
        k = attrs.get(attr)
        if k is None:
            return
        if k.kind == "local":
            self.enqueue_class(k.names[0], ("forward", "__call__"))
        elif k.kind == "kernel":
            self._launch(k.names[0])
        elif k.kind == "func" and k.node is not None:
            self.enqueue(f"{label}: self.{attr}", k.node, self.methods, attrs)
        elif k.kind == "torch":
            self.judge_qualified(label, node, k.names[0])
        elif k.kind == "nn":
            for name in k.names:
                if name.startswith("local:"):
                    self.enqueue_class(name[len("local:"):], ("forward", "__call__"))
                elif not pol.nn_module_allowed(self.an.policy, name, self.an.extra):
                    self.compute(node, label, f"torch.nn.{name}",
                                 f"`self.{attr}` ({name}) is called")

    def visit_call(self, label: str, node: ast.Call, attrs: dict) -> None:
        an = self.an
        func = node.func
        self.host_call(label, node)
        # kernel[grid](...) and direct kernel calls
        if isinstance(func, ast.Subscript):
            target = func.value
            if isinstance(target, ast.Name) and target.id in an.kernels:
                self._launch(target.id)
            elif isinstance(target, ast.Attribute) and target.attr in an.kernels:
                self._launch(target.attr)
            elif (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                  and target.value.id == "self" and target.attr in attrs):
                self.call_attr(label, node, target.attr, attrs)  # self.layers[i](x)
            else:
                self.generic_launches += 1
            return
        if isinstance(func, ast.Name) and func.id in an.kernels:
            self._launch(func.id)
            return
        if isinstance(func, ast.Attribute) and func.attr == "run" and self.run_launch(func.value, attrs):
            return  # `kernel.run(*args, grid=..., warmup=False)`: Triton's own launch API
        if isinstance(func, ast.Name) and func.id in an.global_holders:
            self.call_attr(label, node, func.id, an.global_holders)
            return
        # self.attr(...) / self.attr.forward(...) / self.conv._conv_forward(...)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            if func.attr in attrs and func.attr not in self.methods:
                self.call_attr(label, node, func.attr, attrs)
            return
        if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute)
                and isinstance(func.value.value, ast.Name) and func.value.value.id == "self"
                and func.value.attr in attrs and attrs[func.value.attr].kind == "nn"):
            if func.attr not in MODULE_BOOKKEEPING:
                self.call_attr(label, node, func.value.attr, attrs)
            return
        if id(node) in an.main_guard_nodes:
            return
        q = an.canonical(func, self.local)
        if q is not None:
            self.judge_qualified(label, node, q)
            return
        if isinstance(func, ast.Name) and an.star_imports and func.id not in an.defined_names \
                and not hasattr(builtins, func.id):
            for mod in an.star_imports:
                if mod in ("torch", "torch.nn.functional"):
                    self.judge_qualified(label, node, f"{mod}.{func.id}")
            return
        if isinstance(func, ast.Attribute):
            self.judge_method(label, node, func)

    def run_launch(self, target: ast.AST, attrs: dict) -> bool:
        """Whether `target.run(...)` launches a kernel of the module (by its name, a module-level holder of
        it, `self.<kernel>` or `<module>.<kernel>`); the launch is recorded."""
        an = self.an
        if isinstance(target, ast.Name) and target.id in an.kernels:
            self._launch(target.id)
        elif isinstance(target, ast.Name) and target.id in an.global_kernel_holders:
            for name in sorted(an.global_kernel_holders[target.id]):
                self._launch(name)
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id == "self" and target.attr in attrs and attrs[target.attr].kind == "kernel":
            self._launch(attrs[target.attr].names[0])
        elif isinstance(target, ast.Attribute) and target.attr in an.kernels:
            self._launch(target.attr)
        else:
            return False
        return True

    def judge_qualified(self, label: str, node: ast.Call, q: str) -> None:
        an, policy, extra = self.an, self.an.policy, self.an.extra
        parts = q.split(".")
        root = parts[0]
        if q in RNG_CALLS:
            an.add(R.static("monkeypatch"), node, f"`{q}(...)` in {label} reseeds the global RNG "
                   "during forward", f"monkeypatch:{q}")
            return
        if root == "numpy":
            if len(parts) == 2 and parts[1] in NUMPY_SCALAR_OK:
                return
            an.add(R.static("host_compute"), node, f"`{q}(...)` in {label}: numpy computes outside "
                   "Triton and outside the op census", f"host_compute:{q}")
            return
        if q in ("operator.matmul", "operator.imatmul"):
            if not pol.op_allowed(policy, "matmul", extra):
                self.compute(node, label, q, "operator.matmul runs torch.matmul")
            return
        if root != "torch" or len(parts) < 2:
            return
        sub = parts[1]
        if len(parts) == 2 and self.from_host(label, node, sub, q):
            return
        if sub == "nn":
            if len(parts) == 3 and parts[2][:1].isupper():
                if not pol.nn_module_allowed(policy, parts[2], extra):
                    self.compute(node, label, q, f"builds and runs `{parts[2]}` inside forward")
                return
            if len(parts) == 4 and parts[2] == "functional":
                if not pol.functional_allowed(policy, parts[3], extra):
                    self.compute(node, label, q, "")
                return
            if len(parts) >= 3 and parts[2] in ("init", "utils"):
                if parts[2] == "init":
                    self.compute(node, label, q, "weight initialisation inside forward")
                return
            self.compute(node, label, q, "")
            return
        if sub == "ops" and len(parts) >= 4:
            op_name = ".".join(parts[2:])
            if not pol.runtime_op_allowed(policy, op_name, extra):
                self.compute(node, label, q, "a direct aten call")
            return
        if sub == "Tensor" and len(parts) == 3:
            self.judge_method_name(label, node, parts[2], q)
            return
        if len(parts) > 2 or sub in TORCH_SAFE_SUBMODULES:
            if sub in TORCH_SAFE_SUBMODULES:
                return
            self.compute(node, label, q, f"torch.{sub} runs PyTorch compute")
            return
        if sub[:1].isupper():
            if sub.endswith("Tensor") and node.args and isinstance(node.args[0], (ast.List, ast.Tuple, ast.ListComp,
                                                                                  ast.GeneratorExp)) \
                    and not is_literal(node.args[0], an.module_constants):
                self.host(node, label, q, f"`{q}(...)` builds a tensor from host data")
            return  # classes: torch.Size, torch.Generator, torch.FloatTensor(n) allocations
        if not pol.surface_allowed(policy, sub, extra):
            self.compute(node, label, q, "")

    def judge_method(self, label: str, node: ast.Call, func: ast.Attribute) -> None:
        recv = func.value
        if isinstance(recv, (ast.Constant, ast.JoinedStr, ast.List, ast.Dict, ast.Set, ast.Tuple,
                             ast.ListComp, ast.DictComp, ast.SetComp)):
            return
        if isinstance(recv, ast.Name) and (recv.id in ("self", "cls", "super") or recv.id in self.an.classes):
            return
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and recv.func.id == "super":
            return
        self.judge_method_name(label, node, func.attr, f"Tensor.{func.attr}")

    def from_host(self, label: str, node: ast.Call, name: str, shown: str) -> bool:
        """`torch.tensor(values)`, `torch.as_tensor(a)`, `x.new_tensor(list)`: a tensor built from
        host data (a literal constant is fine)."""
        data = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "data"), None)
        if name in FROM_HOST or (name in FROM_HOST_UNLESS_LITERAL and data is not None
                                 and not is_literal(data, self.an.module_constants)):
            self.host(node, label, shown, f"`{shown}(...)` builds a tensor from host data (a literal "
                      "constant such as torch.tensor(0.5) is fine; pass scalars to the kernel)")
            return True
        return False

    def judge_method_name(self, label: str, node: ast.Call, name: str, shown: str) -> None:
        policy = self.an.policy
        if name in FROM_HOST_UNLESS_LITERAL and self.from_host(label, node, name, shown):
            return
        if name in pol.TENSOR_TO_HOST:
            self.an.add(R.static("host_compute"), node, f"`.{name}()` in {label} moves tensor data into "
                        "Python/numpy, where compute escapes Triton and the op census",
                        f"host_compute:Tensor.{name}")
            return
        if name in AMBIGUOUS_METHODS or name in self.local_method_names:
            return
        if name in pol.tensor_compute_methods(policy) and not pol.surface_allowed(policy, name, self.an.extra):
            self.compute(node, label, shown, "")

    def compute(self, node: ast.AST, label: str, what: str, why: str) -> None:
        extra = f" ({why})" if why else ""
        self.an.add(R.static("pytorch_compute"), node,
                    f"`{what}` in {label}{extra}: PyTorch compute is not allowed under policy "
                    f"'{self.an.policy}'; do this work in a Triton kernel",
                    f"pytorch_compute:{what}")
