"""KernelBook (GPUMODE/KernelBook) rows -> KernelBench-style tasks with a `ModelNew` solution.

A KernelBook row pairs a PyTorch module found on GitHub (`python_code`, class `entry_point`, with
`get_inputs()` and `get_init_inputs()`) with Triton code for it (`triton_code`, class
`<entry_point>New`; most rows are TorchInductor output). Normalising a row:

- the `entry_point` class is renamed `Model` everywhere it is referenced (attribute names such as
  `nn.ReLU` are left alone even when the entry point is called `ReLU`);
- KernelBook's `get_init_inputs()` returns `[args, kwargs]`; KernelBench calls
  `Model(*get_init_inputs())`, so the pair is rewritten as the positional list the constructor takes;
- the solution class is renamed `ModelNew`, and TorchInductor output is made self-contained
  (inductor.py: its runtime imports replaced by plain PyTorch / Triton, so the verifier can judge it).

A row that cannot be normalised is skipped and counted under a reason (`SKIP_REASONS`). Loading
goes through `datasets` from a hub name or a local jsonl / parquet file (or a folder of them).
"""

from __future__ import annotations

import ast
import hashlib
import io
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..tasks.task import Task
from .difficulty import label_difficulty
from .inductor import deinductor, is_inductor_code

KERNELBOOK_HUB = "GPUMODE/KernelBook"
COLUMNS = ("python_code", "triton_code", "entry_point", "repo_name", "module_name", "synthetic", "uuid",
           "licenses", "stars", "sha", "repo_link")
REQUIRED_COLUMNS = ("python_code", "triton_code", "entry_point")
SKIP_REASONS = {
    "missing_field": "python_code, triton_code or entry_point is empty",
    "python_syntax_error": "python_code does not parse",
    "triton_syntax_error": "triton_code does not parse",
    "entry_point_not_found": "python_code defines no class named entry_point",
    "name_collision": "the code already defines a different Model / ModelNew",
    "no_get_inputs": "python_code has no get_inputs()",
    "no_get_init_inputs": "python_code has no get_init_inputs()",
    "init_inputs_unmappable": "get_init_inputs() kwargs do not map onto the constructor's arguments",
    "no_triton_kernel": "triton_code launches no @triton.jit kernel",
    "solution_class_not_found": "triton_code defines no <entry_point>New class",
    "duplicate": "same reference and solution as an earlier row",
}


class NormaliseError(ValueError):
    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail or SKIP_REASONS.get(reason, '')}")
        self.reason = reason
        self.detail = detail


@dataclass
class KernelBookLoad:
    tasks: list[Task]  # normalised rows; Task.reference_solution holds the ModelNew module
    skipped: Counter = field(default_factory=Counter)  # reason -> rows skipped
    n_rows: int = 0  # rows read

    @property
    def n_kept(self) -> int:
        return len(self.tasks)

    def summary(self) -> dict[str, Any]:
        return {"rows": self.n_rows, "kept": self.n_kept, "skipped": dict(self.skipped)}


# --------------------------------------------------------------------------- loading


def read_kernelbook_rows(source: str | Path, split: str = "train", limit: int | None = None) -> list[dict]:
    """Rows of a KernelBook dataset: a hub name, a local .jsonl/.json/.parquet file, or a folder of them."""
    import datasets

    src = str(source)
    path = Path(src).expanduser()
    if path.exists():
        files = [path] if path.is_file() else sorted([*path.glob("*.parquet"), *path.glob("*.jsonl"),
                                                      *path.glob("*.json")])
        if not files:
            raise FileNotFoundError(f"{path} holds no .parquet, .jsonl or .json file of KernelBook rows")
        kinds = {_file_kind(f) for f in files}
        if len(kinds) > 1:
            raise ValueError(f"{path} mixes parquet and json files; point kernelbook_source at one file")
        ds = datasets.load_dataset(kinds.pop(), data_files=[str(f) for f in files], split="train")
    elif src.startswith((".", "/", "~")) or src.endswith((".jsonl", ".json", ".parquet")):
        raise FileNotFoundError(f"KernelBook file {src} does not exist")
    else:
        try:
            ds = datasets.load_dataset(src, split=split)
        except Exception as e:  # offline, unknown name, gated: one message that says what to do
            raise RuntimeError(
                f"could not load KernelBook {src!r} from the hub ({type(e).__name__}: {str(e)[:200]}). "
                "Without hub access, download it elsewhere and set kernelbook_source to the local "
                ".parquet or .jsonl file"
            ) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in ds.column_names]
    if missing:
        raise ValueError(f"{src}: not KernelBook rows, columns {', '.join(missing)} are missing "
                         f"(found {', '.join(ds.column_names)}); expected {', '.join(COLUMNS)}")
    if limit is not None:
        ds = ds.select(range(min(limit, len(ds))))
    return [dict(r) for r in ds]


def _file_kind(f: Path) -> str:
    return "parquet" if f.suffix == ".parquet" else "json"


def load_kernelbook(source: str | Path, limit: int | None = None, split: str = "train") -> KernelBookLoad:
    """Read and normalise KernelBook rows; unusable rows are counted by reason, duplicates dropped."""
    rows = read_kernelbook_rows(source, split=split, limit=limit)
    return normalise_rows(rows)


def normalise_rows(rows: Iterable[Mapping[str, Any]]) -> KernelBookLoad:
    out = KernelBookLoad(tasks=[])
    seen: set[str] = set()
    for row in rows:
        out.n_rows += 1
        try:
            task = normalise_row(row)
        except NormaliseError as e:
            out.skipped[e.reason] += 1
            continue
        key = hashlib.sha256(f"{task.source}\0{task.reference_solution}".encode()).hexdigest()
        if key in seen:
            out.skipped["duplicate"] += 1
            continue
        seen.add(key)
        out.tasks.append(task)
    return out


# --------------------------------------------------------------------------- one row


def normalise_row(row: Mapping[str, Any]) -> Task:
    """One KernelBook row -> a Task (source: `class Model`; reference_solution: `class ModelNew`)."""
    python_code = _text(row.get("python_code"))
    triton_code = _text(row.get("triton_code"))
    entry = _text(row.get("entry_point")).strip()
    if not python_code.strip() or not triton_code.strip() or not entry:
        raise NormaliseError("missing_field")

    source = normalise_reference(python_code, entry)
    solution = normalise_solution(triton_code, entry)

    uid = _text(row.get("uuid")) or hashlib.sha256(f"{python_code}\0{triton_code}".encode()).hexdigest()[:16]
    repo = _text(row.get("repo_name"))
    module = _text(row.get("module_name"))
    description = f"{module or entry} from {repo}" if repo else (module or entry)
    label = label_difficulty(source, description, entry)
    meta = {k: _plain(row.get(k)) for k in COLUMNS if k not in ("python_code", "triton_code")}
    meta["difficulty_reasons"] = label.reasons
    return Task(id=f"kernelbook/{uid}", level=label.level, name=entry, source=source, op_family="",
                category="", origin="kernelbook", description=description, reference_solution=solution,
                meta=meta)


def normalise_reference(python_code: str, entry_point: str) -> str:
    try:
        tree = ast.parse(python_code)
    except SyntaxError as e:
        raise NormaliseError("python_syntax_error", f"line {e.lineno}: {e.msg}") from None
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if entry_point not in classes:
        raise NormaliseError("entry_point_not_found", f"no class {entry_point} in python_code")
    if ("Model" in classes and entry_point != "Model") or "ModelNew" in classes:
        raise NormaliseError("name_collision", "python_code already defines Model or ModelNew")
    if "get_inputs" not in functions:
        raise NormaliseError("no_get_inputs")
    if "get_init_inputs" not in functions:
        raise NormaliseError("no_get_init_inputs")

    code = _rewrite_init_inputs(python_code, functions["get_init_inputs"], classes[entry_point])
    return rename_identifier(code, entry_point, "Model")


def normalise_solution(triton_code: str, entry_point: str) -> str:
    try:
        tree = ast.parse(triton_code)
    except SyntaxError as e:
        raise NormaliseError("triton_syntax_error", f"line {e.lineno}: {e.msg}") from None
    if not _has_triton_kernel(tree):
        raise NormaliseError("no_triton_kernel")
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    wanted = f"{entry_point}New"
    if wanted not in classes:
        candidates = [c for c in classes if c.endswith("New")]
        if len(candidates) != 1:
            raise NormaliseError("solution_class_not_found", f"no class {wanted} in triton_code")
        wanted = candidates[0]
    if "ModelNew" in classes and wanted != "ModelNew":
        raise NormaliseError("name_collision", "triton_code defines ModelNew besides the solution class")
    code = rename_identifier(triton_code, wanted, "ModelNew")
    return deinductor(code) if is_inductor_code(code) else code


def _has_triton_kernel(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if isinstance(target, ast.Attribute) and target.attr in ("jit", "autotune", "heuristics"):
                    return True
    return False


def rename_identifier(code: str, old: str, new: str) -> str:
    """Rename the identifier `old` to `new` where it stands as a name (not after a `.`, not inside
    strings or comments), leaving the rest of the text byte for byte as it was."""
    lines = code.splitlines(keepends=True)
    hits: list[tuple[int, int]] = []
    prev = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME and tok.string == old and not (prev is not None and prev.string == "."):
                hits.append(tok.start)
            if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                                tokenize.DEDENT):
                prev = tok
    except tokenize.TokenError as e:
        raise NormaliseError("python_syntax_error", f"cannot tokenize: {e}") from None
    for row, col in reversed(hits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[col + len(old):]
    return "".join(lines)


def _rewrite_init_inputs(code: str, fn: ast.FunctionDef, cls: ast.ClassDef) -> str:
    """KernelBook's `return [[args], {kwargs}]` -> KernelBench's `return [positional args]`."""
    ret = fn.body[-1] if fn.body else None
    if not (isinstance(ret, ast.Return) and isinstance(ret.value, ast.List) and len(ret.value.elts) == 2
            and isinstance(ret.value.elts[0], ast.List) and isinstance(ret.value.elts[1], ast.Dict)):
        return code  # already KernelBench form (a flat list of constructor arguments)
    args_node, kwargs_node = ret.value.elts
    positional = [ast.get_source_segment(code, a) or ast.unparse(a) for a in args_node.elts]
    kwargs: dict[str, str] = {}
    for k, v in zip(kwargs_node.keys, kwargs_node.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise NormaliseError("init_inputs_unmappable", "a kwargs key is not a string literal")
        kwargs[k.value] = ast.get_source_segment(code, v) or ast.unparse(v)
    if kwargs:
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is None:
            raise NormaliseError("init_inputs_unmappable", "kwargs given but the class has no __init__")
        params = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]  # drop self
        defaults = init.args.defaults
        default_of = {p: d for p, d in zip(params[len(params) - len(defaults):], defaults)}
        unknown = [k for k in kwargs if k not in params]
        if unknown:
            raise NormaliseError("init_inputs_unmappable", f"kwargs {unknown} are not positional parameters")
        last = max(params.index(k) for k in kwargs)
        for p in params[len(positional):last + 1]:
            if p in kwargs:
                positional.append(kwargs[p])
            elif p in default_of:
                positional.append(ast.get_source_segment(code, default_of[p]) or ast.unparse(default_of[p]))
            else:
                raise NormaliseError("init_inputs_unmappable", f"no value for constructor argument {p!r}")
    lines = code.splitlines(keepends=True)
    start, end = ret.lineno, ret.end_lineno or ret.lineno
    indent = lines[start - 1][: len(lines[start - 1]) - len(lines[start - 1].lstrip())]
    new = f"{indent}return [{', '.join(positional)}]\n"
    tail = lines[end - 1][ret.end_col_offset:] if ret.end_col_offset is not None else "\n"
    if tail.strip():
        new = new.rstrip("\n") + tail
    return "".join(lines[: start - 1] + [new] + lines[end:])


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)
