"""The catalogue of verdict reasons (tritonrl_lib/verify/reasons.py): well formed, the only place a
reason is spelled, holding every reason a part of the verifier gives, and refusing any other."""

from __future__ import annotations

import ast
import json
import re
import signal
from pathlib import Path

import pytest
import torch

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.extract import extract_code
from tritonrl_lib.verify import reasons as R
from tritonrl_lib.verify.candidate.variations import VARIATION_ORDER
from tritonrl_lib.verify.verdict import STAGES, Verdict

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "tritonrl_lib"
PRODUCERS = sorted(p for p in (LIB / "verify").rglob("*.py") if p.name != "reasons.py")

# what the verdict cache refused before the catalogue existed (cache.UNCACHED_REASONS): a reason equal
# to one of these, or starting with one and a colon, was never stored
# what the cache never kept (the machine's load or health, not the candidate), and the verifier's own
# budgets added since (the reference phase's and the set-up's, a task too big for the machine)
OLD_UNCACHED = ("timeout", "memory_limit", "out_of_memory", "worker_lost", "internal_error", "pool_gone",
                "crash_signal:SIGKILL", "timing_failed", "reference_timeout", "setup_timeout", "task_too_large")

MEMBERS = [f"static:{what}" for what in R.STATIC_CHECKS] + [
           "mismatch:tiny", "mismatch:original", "mismatch:range", "mismatch:offset", "mismatch:resized", "mismatch:timed", "mismatch:seed", "mismatch:larger",
           "mismatch:dtype:float16", "mismatch:dtype:bfloat16", "cheat:no_triton_launch", "cheat:input_mutated",
           "cheat:cached_output", "cheat:pytorch_compute:aten.mm.default", "cheat:foreign_kernel:other.k_kernel",
           "cheat:unordered_stream", "cheat:heavy_op_dtype:gemm_float16", "cheat:timed_output_wrong",
           "cheat:global_state:torch._get_flash_sdp_enabled", "dtype_mismatch", "task_too_large",
           "crash_signal:SIGSEGV", "crash_signal:SIGKILL", "crash_signal:SIGABRT", "crash_signal:SIG77",
           "timing_failed:timeout", "timing_failed:runtime_error", "timing_failed:crash_signal:SIGBUS"]
NOT_REASONS = ["", "made_up", "Timeout", "timeout:", "static", "static:made_up", "mismatch", "mismatch:",
               "mismatch:huge", "mismatch:dtype", "mismatch:original:x", "cheat", "cheat:made_up",
               "cheat:static_flag", "crash_signal:9", "crash_signal:", "timing_failed", "timing_failed:ok",
               "timing_failed:timing_failed:timeout", "timing_failed:made_up", "ok:x", "mismatch:tiny x"]


def plain_reasons() -> list[str]:
    return [r.name for r in R.CATALOGUE.values() if not r.suffix]


# --------------------------------------------------------------------------- the catalogue itself


def test_every_entry_is_well_formed():
    assert len(plain_reasons()) >= 20 and len(R.STATIC_CHECKS) >= 15
    for name, r in R.CATALOGUE.items():
        assert r.name == name and re.fullmatch(r"[a-z_]+", name), name
        assert set(r.stages) <= set(STAGES[1:]) and (r.stages or name == R.OK), name
        assert r.meaning and "\n" not in r.meaning and len(r.meaning) < 160, name
        assert r.made_by, name
        for module in r.made_by:  # each names a module that exists and spells the reason through the catalogue
            if module == "static":
                sources = sorted((LIB / "verify" / "static").glob("*.py"))
            else:
                sources = [LIB / "verify" / f"{module}.py"]
            assert all(p.is_file() for p in sources), (name, module)
            text = "".join(p.read_text() for p in sources)
            constant = name.upper().replace(":", "_")
            assert re.search(rf"\bR\.({constant}\b|{name}\()", text), f"{module} does not give {name}"
        assert bool(r.suffix) == r.suffix.startswith("<"), name
        assert not r.uncached_suffixes or (r.suffix and r.cacheable), name


def test_the_families_members_follow_the_verifier_own_vocabularies():
    assert set(R.INPUT_SETS) == {"tiny", *VARIATION_ORDER, "resized", "timed"}  # resized: larger's smaller form
    assert all(re.fullmatch(r"[a-z_]+", what) and "\n" not in meaning for what, meaning in R.STATIC_CHECKS.items())
    assert R.CHILD_REASONS <= set(plain_reasons())
    assert all(R.entry(f"cheat:{flag}") is R.CATALOGUE[R.CHEAT] for flag in R.RUNTIME_FLAGS)


@pytest.mark.parametrize("reason", plain_reasons() + MEMBERS)
def test_a_known_reason_passes(reason):
    assert R.check(reason) == reason and R.entry(reason) is not None


@pytest.mark.parametrize("reason", NOT_REASONS)
def test_an_unknown_reason_is_refused(reason):
    assert R.entry(reason) is None and not R.may_cache(reason)
    with pytest.raises(R.UnknownReason, match="not in the catalogue"):
        R.check(reason)


def test_what_may_be_cached_is_what_the_cache_kept_before():
    def old_rule(reason):
        return not any(reason == r or reason.startswith(r + ":") for r in OLD_UNCACHED)

    for reason in plain_reasons() + MEMBERS:
        assert R.may_cache(reason) == old_rule(reason), reason
    assert not R.may_cache("crash_signal:SIGKILL") and R.may_cache("crash_signal:SIGSEGV")


def test_the_families_are_built_through_the_catalogue():
    assert R.mismatch("dtype:float16") == "mismatch:dtype:float16"
    assert R.cheat(f"{R.PYTORCH_COMPUTE}:aten.add.Tensor") == "cheat:pytorch_compute:aten.add.Tensor"
    assert R.crash_signal("SIGSEGV") == "crash_signal:SIGSEGV"
    assert R.timing_failed(R.TIMEOUT) == "timing_failed:timeout" and R.static("threads") == "static:threads"
    for build, bad in ((R.mismatch, "bigger"), (R.cheat, "made_up"), (R.crash_signal, "11"), (R.timing_failed, R.OK),
                       (R.static, "made_up")):
        with pytest.raises(R.UnknownReason):
            build(bad)
    assert R.head("mismatch:dtype:float16") == "mismatch" and R.head("static:threads") == "static"
    assert R.head(R.TIMEOUT) == "timeout"


# --------------------------------------------------------------------------- spelled only in the catalogue

REASON_NAMES = {"reason", "kill_reason"}
REASON_ARGS = {"_fail": 0, "Finding": 0, "add": 0, "Extraction": 1}  # calls whose argument is a reason
FAMILY_PREFIXES = tuple(f"{r.name}:" for r in R.CATALOGUE.values() if r.suffix) + ("static:",)


def _literal(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant)) + "{...}"
    return None


def _alternatives(node: ast.AST) -> list[ast.AST]:
    """What an expression can evaluate to, through `a if c else b`, `a or b`, tuples and lists."""
    if isinstance(node, ast.IfExp):
        return _alternatives(node.body) + _alternatives(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [x for v in node.values for x in _alternatives(v)]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [x for v in node.elts for x in _alternatives(v)]
    return [node]


def _reason_sites(tree: ast.AST):
    """Every expression that gives a reason: `reason=` arguments, "reason" keys, assignments to and
    comparisons with `reason` / `kill_reason`, the reason arguments of the producers' calls, and
    what `classify` and the `*_reason` functions return (a tuple's first item)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield from (kw.value for kw in node.keywords if kw.arg in REASON_NAMES)
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            at = REASON_ARGS.get(name)
            if at is not None and len(node.args) > at:
                yield node.args[at]
        elif isinstance(node, ast.Dict):
            yield from (v for k, v in zip(node.keys, node.values)
                        if isinstance(k, ast.Constant) and k.value in REASON_NAMES)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in REASON_NAMES:
                    yield node.value
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    yield from (v for t, v in zip(target.elts, node.value.elts)
                                if isinstance(t, ast.Name) and t.id in REASON_NAMES)
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id in REASON_NAMES:
            yield from node.comparators
        elif isinstance(node, ast.FunctionDef) and (node.name == "classify" or node.name.endswith("_reason")):
            for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None):
                yield ret.value.elts[0] if isinstance(ret.value, ast.Tuple) else ret.value


def test_no_reason_is_spelled_outside_the_catalogue():
    spelled = []
    for path in PRODUCERS:
        tree = ast.parse(path.read_text())
        for site in _reason_sites(tree):
            for node in _alternatives(site):
                text = _literal(node)
                if text is not None:
                    spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text!r}")
        for node in ast.walk(tree):  # a family member spelled anywhere at all
            text = _literal(node)
            if text is not None and text.startswith(FAMILY_PREFIXES):
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text!r}")
    assert not spelled, "reasons must come from tritonrl_lib/verify/reasons.py:\n" + "\n".join(spelled)


def test_the_scan_finds_a_spelled_reason():
    # the test above is only as good as its idea of where reasons are given
    tree = ast.parse('def f(self, s):\n    self._fail("gpu_too_small", "")\n    return {"reason": "x"}\n'
                     'def g(code):\n    reason, error = "made_up", ""\n    return f"cheat:{code}"\n'
                     'def h_reason(x):\n    return ("a" if x else "b"), ""\n')
    found = sorted(_literal(n) for site in _reason_sites(tree) for n in _alternatives(site) if _literal(n))
    assert found == ["a", "b", "gpu_too_small", "made_up", "x"]


# --------------------------------------------------------------------------- each producer, on real inputs


def test_extraction_gives_catalogued_reasons():
    for completion in (None, "", "   <|im_end|>", "no code here, sorry", "<think>```python\nx = 1\n```</think>done",
                       "<think>still thinking", "```python\nimport torch\n```"):
        ex = extract_code(completion)
        assert R.check(ex.reason) == ex.reason and (ex.code is None) == (ex.reason != R.OK)


def test_the_static_check_gives_catalogued_reasons():
    from tritonrl_lib.verify.static import static_check
    from tritonrl_lib.verify.static.rules import DENIED_IMPORTS

    assert all(R.entry(reason) for reason, _ in DENIED_IMPORTS.values())
    seen = set()
    for path in sorted((ROOT / "tests" / "verifier_cases").rglob("*.py")):
        for policy in ("strict", "fusion"):
            report = static_check(path.read_text(), policy)
            seen.add(R.check(report.reason))
            seen.update(R.check(f.reason) for f in report.findings)
    assert R.OK in seen and len(seen) >= 5


def test_the_child_classifies_into_its_own_reasons():
    from tritonrl_lib.verify.candidate.context import classify

    errors = [SystemExit(1), MemoryError(), RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"),
              RuntimeError("CUDA error: an illegal memory access was encountered"), ValueError("bad"),
              ImportError("no module named x"), ZeroDivisionError()]
    got = {classify(e, stage) for e in errors for stage in ("compile", "tiny", "full", "timing")}
    assert got == R.CHILD_REASONS


def test_outputs_compare_into_catalogued_reasons():
    from tritonrl_lib.verify.worker.compare import compare
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    (ref_meta,), (ref_blob,) = encode_outputs([torch.ones(4)])
    cases = [torch.ones(4) + 1, torch.full((4,), float("nan")), torch.ones(5), torch.ones(4, dtype=torch.float64)]
    got = set()
    for cand in cases:
        (meta,), (blob,) = encode_outputs([cand])
        got.add(compare(ref_meta, ref_blob, meta, blob, 1e-2, 1e-2)["reason"])
    got.add(compare(ref_meta, ref_blob, {"kind": "other", "type": "list"}, b"", 1e-2, 1e-2)["reason"])
    got.add(compare(ref_meta, ref_blob, {**ref_meta, "device": "cuda"}, ref_blob, 1e-2, 1e-2)["reason"])
    assert got == {R.MISMATCH, R.NAN_OUTPUT, R.SHAPE_MISMATCH, R.DTYPE_MISMATCH, R.WRONG_OUTPUT_TYPE,
                   R.DEVICE_MISMATCH}
    assert all(R.check(r) for r in got - {R.MISMATCH})  # mismatch alone names an output's failure


def _judge():
    from tritonrl_lib.verify.worker.judge import Judge
    from tritonrl_lib.verify.settings import JobSettings

    return Judge({"task_id": "t", "settings": JobSettings.for_device(VerifyConfig(), "cpu").to_json(),
                  "policy": "strict"})


def _outcome(status=0, kill=None, leftover=0):
    from tritonrl_lib.verify.sandbox.run import SandboxOutcome

    return SandboxOutcome(exit_status=status, kill_reason=kill, leftover_processes=leftover, log_tail="",
                          peak_rss_mb=0.0)


def test_every_end_of_a_candidate_process_gets_a_catalogued_reason():
    from tritonrl_lib.verify.sandbox.run import JUDGED

    kills = [R.TIMEOUT, R.MEMORY_LIMIT, R.FORK_FLOOD, R.PROTOCOL_ERROR, R.POOL_GONE, JUDGED, None]
    statuses = [None, 0, 1 << 8, signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT]
    got = {Verdict.from_dict(_judge().finalize(_outcome(status, kill, leftover))).reason
           for kill in kills for status in statuses for leftover in (0, 2)}
    assert {R.TIMEOUT, R.FORK_FLOOD, R.PROCESS_EXIT, "crash_signal:SIGKILL", "crash_signal:SIGSEGV"} <= got
    assert all(R.entry(reason) for reason in got)
    # a reason the candidate's process may not give is read as its runtime error (it is the candidate's)
    j = _judge()
    assert j._child_error({"stage": "tiny", "reason": R.OK, "error": "forged"}) == "stop"
    assert j.failure[0] == R.RUNTIME_ERROR


def test_an_unknown_reason_of_the_verifier_fails_loudly():
    j = _judge()
    j._fail("gpu_too_small", "a reason nobody added to the catalogue")
    with pytest.raises(R.UnknownReason, match="gpu_too_small"):
        j.finalize(_outcome())


def test_the_uncacheable_verdicts_are_not_stored(tmp_path):
    from tritonrl_lib.verify.cache import VerdictCache

    cache = VerdictCache(tmp_path)
    for i, reason in enumerate([R.TIMEOUT, "crash_signal:SIGKILL", "timing_failed:timeout", R.OK,
                                "mismatch:range", "crash_signal:SIGSEGV"]):
        cache.put(f"{i:064x}", Verdict(reason=reason))
    kept = sorted(Verdict.from_dict(json.loads(p.read_text())).reason for p in tmp_path.rglob("*.json"))
    assert kept == ["crash_signal:SIGSEGV", "mismatch:range", "ok"]


def test_metrics_group_by_the_reason_head():
    from tritonrl_lib.eval.metrics import failure_reasons

    rows = [{"correct": False, "reason": r} for r in ("mismatch:range", "mismatch:seed", "static:threads", "timeout")]
    assert dict(failure_reasons(rows)) == {"mismatch": 2, "static": 1, "timeout": 1}
