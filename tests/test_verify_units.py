"""The verifier's parts that need no worker: framing, comparison rules, reward, timing statistics,
size variations, the verdict cache, and the runtime checks' building blocks."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from tritonrl_lib.verify.cache import VERIFIER_VERSION, VerdictCache
from tritonrl_lib.verify.worker.compare import compare, decode
from tritonrl_lib.verify.reward import RewardLadder, compute_reward
from tritonrl_lib.verify.candidate.runtime_checks import flatten_outputs, same_bits
from tritonrl_lib.verify.sandbox.processes import proc_table
from tritonrl_lib.verify.sandbox.protocol import FrameReader, ProtocolError, encode_frame
from tritonrl_lib.verify.candidate.timing import speedup_stats, summarize
from tritonrl_lib.verify.candidate.variations import larger_plan, size_constants, tiny_plans
from tritonrl_lib.verify.verdict import Verdict

CASES = Path(__file__).parent / "verifier_cases"
ROOT = Path(__file__).resolve().parents[1]


def task_source(name: str) -> str:
    return (CASES / "tasks" / f"{name}.py").read_text()


# --------------------------------------------------------------------------- framing


def _stream(msgs):
    return b"".join(bytes(memoryview(p)) for h, b in msgs for p in encode_frame(h, b))


def test_frames_survive_any_chunking():
    rng = random.Random(0)
    msgs = [({"type": "x", "i": i}, [os.urandom(rng.choice([0, 1, 7, 4096, 70000])) for _ in range(rng.randint(0, 3))])
            for i in range(40)]
    stream = _stream(msgs)
    for _ in range(10):
        reader, got, i = FrameReader(1 << 30), [], 0
        while i < len(stream):
            n = rng.choice([1, 2, 5, 100, 5000, 100000])
            got += reader.feed(stream[i:i + n])
            i += n
        assert [h["i"] for h, _ in got] == list(range(40))
        assert all([bytes(x) for x in b2] == [bytes(x) for x in b] for (_, b), (_, b2) in zip(msgs, got))
        assert not reader.mid_frame


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff" + b"x" * 10,  # a 4 GiB header
    (5).to_bytes(4, "little") + b"nojsn",  # not JSON
    (len(b'{"blobs":"no"}')).to_bytes(4, "little") + b'{"blobs":"no"}',  # bad blob sizes
    (len(b'{"blobs":[-1]}')).to_bytes(4, "little") + b'{"blobs":[-1]}',
])
def test_malformed_frames_are_protocol_errors(garbage):
    with pytest.raises(ProtocolError):
        FrameReader(1 << 20).feed(garbage)


def test_transfer_limit_is_enforced():
    frame = _stream([({"type": "x"}, [b"\0" * 5000])])
    with pytest.raises(ProtocolError):
        FrameReader(1000).feed(frame)


# --------------------------------------------------------------------------- comparison


def _enc(t: torch.Tensor) -> tuple[dict, bytes]:
    t = t.contiguous()
    meta = {"kind": "tensor", "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "device": "cpu"}
    return meta, t.reshape(-1).view(torch.uint8).numpy().tobytes()


def _cmp(cand: torch.Tensor, ref: torch.Tensor, atol=1e-2, rtol=1e-2) -> dict:
    (rm, rb), (cm, cb) = _enc(ref), _enc(cand)
    return compare(rm, rb, cm, cb, atol, rtol)


def test_compare_within_and_beyond_tolerance():
    ref = torch.tensor([1.0, -2.0, 100.0])
    assert _cmp(ref + torch.tensor([0.015, 0.0, 0.5]), ref)["ok"]  # 0.015 <= 0.01 + 0.01*1
    r = _cmp(ref + torch.tensor([0.03, 0.0, 0.0]), ref)
    assert not r["ok"] and r["reason"] == "mismatch" and r["max_abs"] == pytest.approx(0.03, rel=1e-3)


def test_nan_never_passes_but_matching_nonfinite_does():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert _cmp(ref.clone(), ref)["ok"]  # NaN where the reference has NaN, same infinities
    bad = ref.clone()
    bad[0] = float("nan")
    assert _cmp(bad, ref)["reason"] == "nan_output"
    bad = ref.clone()
    bad[2] = -float("inf")
    assert _cmp(bad, ref)["reason"] == "mismatch"
    bad = ref.clone()
    bad[1] = 0.0  # a finite value where the reference has NaN
    assert _cmp(bad, ref)["reason"] == "mismatch"


def test_shape_dtype_type_and_device_are_their_own_reasons():
    ref = torch.zeros(4, 3)
    assert _cmp(torch.zeros(3, 4), ref)["reason"] == "shape_mismatch"
    assert _cmp(torch.zeros(4, 3, dtype=torch.float64), ref)["reason"] == "dtype_mismatch"
    rm, rb = _enc(ref)
    assert compare(rm, rb, {"kind": "other", "type": "NoneType"}, b"", 1e-2, 1e-2)["reason"] == "wrong_output_type"
    cm, cb = _enc(ref)
    assert compare(rm, rb, {**cm, "device": "cuda"}, cb, 1e-2, 1e-2)["reason"] == "device_mismatch"


def test_integers_compare_exactly_and_bf16_decodes():
    assert not _cmp(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]))["ok"]
    x = torch.randn(100).to(torch.bfloat16)
    meta, raw = _enc(x)
    np.testing.assert_array_equal(decode(meta, raw), x.float().numpy())
    assert _cmp(x, x)["ok"]


def test_decode_rejects_sizes_that_do_not_add_up():
    with pytest.raises(ValueError):
        decode({"dtype": "float32", "shape": [10]}, b"\0" * 12)


# --------------------------------------------------------------------------- reward


def test_reward_ladder():
    assert compute_reward("none") == compute_reward("extract") == compute_reward("static") == 0.0
    assert compute_reward("compile") == 0.3
    assert compute_reward("tiny") == 0.5
    assert compute_reward("full") == 0.7
    assert compute_reward("timing", speedup=1.0) == pytest.approx(0.85)
    assert compute_reward("timing", speedup=2.0) == pytest.approx(1.0)
    assert compute_reward("timing", speedup=50.0) == pytest.approx(1.0)
    assert compute_reward("timing", speedup=0.5) == pytest.approx(0.775)
    assert compute_reward("timing", ["cached_output"], speedup=3.0) == 0.0
    assert compute_reward("full", ["input_mutated"]) == 0.0


def test_partial_credit_scales_only_the_rungs_below_full():
    assert compute_reward("compile", partial_credit=0.5) == pytest.approx(0.15)
    assert compute_reward("tiny", partial_credit=0.0) == 0.0
    assert compute_reward("full", partial_credit=0.0) == 0.7
    custom = RewardLadder(compile=0.1, tiny=0.2, full=0.6, speed_weight=0.4, speed_target=4.0)
    assert compute_reward("timing", speedup=2.0, ladder=custom) == pytest.approx(0.8)


# --------------------------------------------------------------------------- timing statistics


def test_trimmed_mean_ignores_outliers():
    times = [1.0] * 18 + [100.0, 0.01]
    s = summarize(times, 0.1)
    assert s["trimmed_mean_ms"] == pytest.approx(1.0)
    assert s["median_ms"] == 1.0 and s["max_ms"] == 100.0 and s["trials"] == 20 and s["trimmed_trials"] == 16


def test_speedup_is_reference_over_candidate():
    st = speedup_stats([2.0] * 10, [0.5] * 10, 0.1)
    assert st["speedup"] == pytest.approx(4.0) and st["speedup_median"] == pytest.approx(4.0)
    with pytest.raises(ValueError):
        summarize([float("nan"), -1.0], 0.1)


# --------------------------------------------------------------------------- size variations


def test_tiny_plans_shrink_batch_first_then_all():
    plans = tiny_plans(task_source("relu").replace("batch_size = 16", "batch_size = 128"))
    assert plans[0][1] == {"batch_size": 16, "dim": 32}
    assert plans[1][1] == {"batch_size": 16}
    # a batch of 16 is as small as it gets: only the other sizes shrink
    assert [p for _, p in tiny_plans(task_source("relu"))] == [{"dim": 32}]


def test_no_resize_goes_below_what_a_kernel_for_the_published_task_may_require():
    from tritonrl_lib.verify.candidate.variations import resized, shrunk

    # never below 16 (tl.dot's smallest operand dimension), divisibility by 2, 4, 8, 16 kept
    assert [shrunk("head_dim", v) for v in (64, 96, 48, 200, 4095, 256)] == [16, 16, 16, 24, 511, 32]
    assert all(shrunk("d", v) % min(16, v & -v) == 0 for v in range(17, 5000))
    assert all(shrunk("d", v) >= 16 for v in range(17, 5000))
    assert shrunk("batch_size", 128) == 16 and shrunk("batch_size", 16) is None
    # kernel sizes, strides and axes stay; a size that cannot shrink is doubled (never left unvaried)
    assert shrunk("kernel_size", 3) is None and shrunk("dim", 1) is None and shrunk("width", 16) == 32
    # the other size keeps the same rules
    assert [resized(v, v * f) for v, f in ((128, 2), (128, 0.75), (100, 0.75), (24, 0.5))] == [256, 96, 76, 16]


def test_constructor_constants_never_enlarge_and_class_constants_never_move():
    src = task_source("conv_bias_relu")
    consts = size_constants(src)
    assert "in_channels" in consts.init_names and "out_channels" in consts.init_names
    assert larger_plan(src) == ("batch_size", 8)  # batch first; height/width also allowed
    # a constant the reference reads inside the class is never resized
    src2 = src.replace("return torch.relu(x + self.bias)", "return torch.relu(x + self.bias) * height / height")
    assert "height" not in size_constants(src2).values


def test_larger_plan_absent_when_only_constructor_constants_exist():
    src = textwrap.dedent("""
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = nn.Parameter(torch.randn(n))
            def forward(self, x):
                return x * self.w
        n = 64
        def get_inputs():
            return [torch.randn(n)]
        def get_init_inputs():
            return [n]
    """)
    assert larger_plan(src) is None
    assert tiny_plans(src)[0][1] == {"n": 16}  # never below 16: tl.dot's smallest dimension


# --------------------------------------------------------------------------- cache


def test_cache_roundtrip_and_key_sensitivity(tmp_path):
    cache = VerdictCache(tmp_path)
    settings = {"atol": 1e-2, "rtol": 1e-2, "num_variations": 5}
    k = VerdictCache.key("task", "code", "strict", settings, "cpu")
    assert k != VerdictCache.key("task", "code2", "strict", settings, "cpu")
    assert k != VerdictCache.key("task", "code", "fusion", settings, "cpu")
    assert k != VerdictCache.key("task", "code", "strict", {**settings, "atol": 1e-3}, "cpu")
    assert k == VerdictCache.key("task", "code", "strict", {**settings, "timeout_s": 5}, "cpu")
    assert cache.get(k) is None
    cache.put(k, Verdict(task_id="t", stage="full", correct=True, reason="ok", reward=0.7))
    assert cache.get(k).reward == 0.7
    k2 = VerdictCache.key("task", "slow", "strict", settings, "cpu")
    cache.put(k2, Verdict(stage="compile", reason="timeout"))
    assert cache.get(k2) is None  # load-dependent verdicts are never stored
    assert VERIFIER_VERSION


# --------------------------------------------------------------------------- runtime-check building blocks


def test_same_bits_is_nan_aware_and_strict():
    a = torch.tensor([1.0, float("nan"), -0.0])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([1.0, float("nan"), 0.0]))  # -0.0 vs 0.0 differ in bits
    assert not same_bits(a, a.double())
    assert same_bits(3, 3) and not same_bits(3, 4)


def test_op_census_reports_compute_ops_and_host_data_to_the_guard():
    out = _run_python("""
        import json, torch
        from tritonrl_lib.verify.candidate import guard, runtime_checks
        from tritonrl_lib.verify.candidate.runtime_checks import OpCensus
        g = guard.Guard("nowhere.py", trusted_files=[runtime_checks.__file__], enforce=False)
        g.install()
        runtime_checks.host_read_hooks()
        census = OpCensus()
        x = torch.randn(4, 4)
        g.begin()
        with census:
            y = torch.empty_like(x)
            z = x @ x + 1
            v = [x[0, 0].item(), x[1, 1].item()]
            w = x.tolist()
            t = torch.tensor([1.0] * 100)
        facts = g.end()
        with census:
            torch.relu(x)  # not counted: the guard is not counting
        print(json.dumps({"ops": sorted(facts.ops), "read": facts.host_read, "made": facts.host_made}))
    """)
    got = json.loads(out.strip().splitlines()[-1])
    assert "aten.empty_like.default" in got["ops"] and "aten.mm.default" in got["ops"]
    assert "aten.relu.default" not in got["ops"]
    assert got["read"] == 2 + 16 and got["made"] == 100  # two item() reads and a 4 x 4 tolist; 100 from a list
    y = torch.zeros(2)
    assert flatten_outputs((y, x := torch.ones(1))) == [y, x] and flatten_outputs(y) == [y]


def test_the_census_cannot_be_paused_or_fed_by_the_candidate(tmp_path):
    # the guard counts only what the verifier's own files report; a pause must come from its own wrappers
    out = _run_python("""
        import json, sys
        from tritonrl_lib.verify.candidate import guard, runtime_checks
        g = guard.Guard("nowhere.py", trusted_files=[runtime_checks.__file__], enforce=False)
        g.install()
        g.begin()
        refused = []
        for event, arg in (("tritonrl.pause", 1), ("tritonrl.launch", "k")):
            try:
                sys.audit(event, arg)
            except PermissionError:
                refused.append(event)
        try:
            runtime_checks._audit("tritonrl.pause", 1)  # the reporter, called from outside the wrappers
        except PermissionError:
            refused.append("via _audit")
        facts = g.end()
        print(json.dumps({"refused": refused, "paused": g.paused, "launches": facts.launches, "flags": g.flags}))
    """)
    got = json.loads(out.strip().splitlines()[-1])
    assert got["refused"] == ["tritonrl.pause", "tritonrl.launch", "via _audit"], got
    assert got["paused"] == 0 and got["launches"] == 0 and got["flags"] == ["tampering"]


def _run_python(code: str, env: dict | None = None) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_host_allocator_perturbation_wipes_stale_results():
    # Without it, torch.empty can hand back a block holding a freed result; with it, never: in a
    # process started as the pool starts its CPU workers (no malloc tcache, whose blocks skip it)
    from tritonrl_lib.verify.candidate.runtime_checks import without_malloc_tcache

    env = without_malloc_tcache({"GLIBC_TUNABLES": "glibc.malloc.check=0"})
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.check=0:glibc.malloc.tcache_count=0"
    out = _run_python("""
        import torch
        from tritonrl_lib.verify.candidate.runtime_checks import perturb_host_allocator
        assert perturb_host_allocator()
        for shape in [(2, 32), (16, 256), (300, 300), (1, 8), (4, 16), (2, 32)]:
            r = torch.relu(torch.randn(shape)); del r
            e = torch.empty(shape)
            assert not (e == 0).any() and (e.view(torch.int32) == -16843010).all(), shape
        print("ok")
    """, env={"GLIBC_TUNABLES": without_malloc_tcache(dict(os.environ))["GLIBC_TUNABLES"]})
    assert out.strip() == "ok"


def test_launch_tracker_counts_interpreted_launches_and_their_origin(tmp_path):
    kernel = (CASES / "candidates" / "relu_ok.py").read_text()
    path = tmp_path / "tritonrl_candidate.py"
    path.write_text(kernel)
    out = _run_python(f"""
        import json, torch
        from tritonrl_lib.verify.candidate import guard, runtime_checks
        from tritonrl_lib.verify.candidate.runtime_checks import LaunchTracker, OpCensus
        from tritonrl_lib.verify.candidate.variations import load_module_file
        g = guard.Guard({str(path)!r}, trusted_files=[runtime_checks.__file__], enforce=False)
        g.install()
        census = OpCensus()
        tracker = LaunchTracker({str(path)!r})
        tracker.install()
        mod = load_module_file({str(path)!r}, "tritonrl_candidate")
        x = torch.randn(64)
        g.begin()
        with census:
            mod.ModelNew()(x)
        facts = g.end()
        mod.ModelNew()(x)  # not counted: the guard is not counting
        print(json.dumps({{"launches": facts.launches, "after": g.facts.launches, "kernels": dict(facts.kernels),
                          "ops": sorted(facts.ops), "paused": g.paused}}))
    """, env={"TRITON_INTERPRET": "1"})
    got = json.loads(out.strip().splitlines()[-1])
    assert got["paused"] == 0
    assert got["launches"] == 1 and got["after"] == 1 and got["kernels"] == {"relu_kernel": 1}
    # the interpreter's own tensor copies happen inside the launch, where the census is paused
    assert got["ops"] == ["aten.empty_like.default"]


def test_proc_table_sees_this_process():
    me = proc_table().get(os.getpid())
    assert me is not None and me.rss_bytes > 0 and not math.isnan(me.rss_bytes)


# --------------------------------------------------------------------------- the judge (trusted side)


def _judge(**settings_over):
    import dataclasses

    from tritonrl_lib.core.config import VerifyConfig
    from tritonrl_lib.verify.worker.judge import Judge
    from tritonrl_lib.verify.settings import JobSettings

    settings = dataclasses.replace(JobSettings.for_device(VerifyConfig(), "cuda"), **settings_over)
    return Judge({"task_id": "t", "settings": settings.to_json(), "policy": "strict"})


def _send(judge, header: dict, tensors=()):
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    metas, blobs = encode_outputs(list(tensors))
    if tensors:
        header = {**header, "outputs": metas}
    return judge.on_message(header, [bytearray(b) for b in blobs])


def _cand(name: str, out, **facts):
    header = {"type": "cand", "name": name, "launches": 1, "kernels": {"k": 1}, "foreign": {},
              "ops": {"aten.empty_like.default": 1}, "inputs_unchanged": True, **facts}
    return header, [out]


def _outcome(status: int | None = 0, leftover: int = 0, kill: str | None = None):
    from tritonrl_lib.verify.sandbox.run import SandboxOutcome

    return SandboxOutcome(exit_status=status, kill_reason=kill, leftover_processes=leftover, log_tail="",
                          peak_rss_mb=0.0)


def _through_full(j, tiny, full):
    assert _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny]) is None
    assert _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [full]) is None
    assert _send(j, {"type": "ref_done"}) is None
    assert _send(j, {"type": "stage", "stage": "compile"}) is None
    assert _send(j, *_cand("tiny", tiny.clone())) is None
    assert _send(j, {"type": "gate", "stage": "tiny"}) == "go"
    assert _send(j, *_cand("original", full.clone())) is None
    assert _send(j, {"type": "gate", "stage": "full"}) == "go"


def test_judge_timing_reward_and_review():
    j = _judge(speedup_review=3.0)
    _through_full(j, torch.randn(4), torch.randn(64))
    assert _send(j, {"type": "timing", "ref_ms": [2.0] * 50, "cand_ms": [0.5] * 50, "device_name": "H100"}) is None
    assert _send(j, {"type": "done"}) == "final"  # the sandbox ends the process at once
    v = Verdict.from_dict(j.finalize(_outcome()))
    assert (v.stage, v.correct, v.reason) == ("timing", True, "ok")
    assert v.speedup == pytest.approx(4.0) and v.reward == pytest.approx(1.0)
    assert v.ref_time_ms == pytest.approx(2.0) and v.timing["candidate"]["median_ms"] == pytest.approx(0.5)
    assert v.review and any("review" in n for n in v.notes)
    # where the time went, stage by stage, and the worker's own share
    times = {k: t for k, t in v.phases.items() if k != "tiny_atol_growth"}
    assert list(times) == ["reference", "compile", "tiny", "full", "timing", "worker_s"]
    assert all(t >= 0 for t in times.values()) and sum(times.values()) <= v.duration_s + 1.0
    # and how much the tiny set's atol grew with the original outputs (for the pool's later prescreens)
    assert v.phases["tiny_atol_growth"] >= 1.0


def test_judge_says_the_wait_for_the_gpu_apart_from_the_reference():
    import time

    j = _judge()
    time.sleep(0.3)  # a large task's job waits for its GPU alone (worker/job.py asks the pool)
    j.phase("gpu_alone_wait")  # as worker/job.py marks it once the pool says go
    _through_full(j, torch.randn(4), torch.randn(64))
    assert _send(j, {"type": "timing", "ref_ms": [2.0] * 50, "cand_ms": [1.0] * 50, "device_name": "H100"}) is None
    assert _send(j, {"type": "done"}) == "final"
    v = Verdict.from_dict(j.finalize(_outcome()))
    times = {k: t for k, t in v.phases.items() if k != "tiny_atol_growth"}
    assert list(times) == ["gpu_alone_wait", "reference", "compile", "tiny", "full", "timing", "worker_s"]
    assert v.phases["gpu_alone_wait"] >= 0.3 > v.phases["reference"]  # the wait is not the reference's
    assert sum(times.values()) <= v.duration_s + 1.0


def test_judge_timing_failure_keeps_correctness():
    j = _judge()
    _through_full(j, torch.randn(4), torch.randn(64))
    assert _send(j, {"type": "error", "stage": "timing", "reason": "cuda_error", "error": "boom"}) == "stop"
    v = Verdict.from_dict(j.finalize(_outcome(status=0)))
    assert (v.stage, v.correct, v.reason, v.reward) == ("full", True, "timing_failed:cuda_error", 0.7)


def test_judge_refuses_references_after_the_candidate_was_imported():
    j = _judge()
    _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [torch.ones(3)])
    _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [torch.ones(3)])
    _send(j, {"type": "ref_done"})
    assert _send(j, {"type": "ref", "name": "seed", "stage": "full", "inputs": "x"}, [torch.ones(3)]) == "stop"
    assert Verdict.from_dict(j.finalize(_outcome())).reason == "protocol_error"


def test_judge_flags_forbidden_ops_foreign_kernels_and_crashes():
    j = _judge()
    _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [torch.ones(3)])
    _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [torch.ones(3)])
    _send(j, {"type": "ref_done"})
    _send(j, {"type": "stage", "stage": "compile"})
    header, outs = _cand("tiny", torch.ones(3), ops={"aten.mm.default": 2}, foreign={"lib.<lambda>": 1})
    assert _send(j, header, outs) == "stop"
    v = Verdict.from_dict(j.finalize(_outcome(kill="judged")))
    assert v.reward == 0.0 and not v.correct and v.stage == "compile"
    assert "pytorch_compute:aten.mm.default" in v.cheat_flags and "foreign_kernel:lib._lambda_" in v.cheat_flags

    crashed = _judge()
    _send(crashed, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [torch.ones(3)])
    _send(crashed, {"type": "ref_done"})
    v = Verdict.from_dict(crashed.finalize(_outcome(status=11)))  # waitpid status of a SIGSEGV death
    assert (v.reason, v.stage) == ("crash_signal:SIGSEGV", "static")


def test_judge_leftover_processes_make_a_correct_candidate_fail():
    j = _judge(timing_enabled=False)
    _through_full(j, torch.randn(4), torch.randn(64))
    _send(j, {"type": "done"})
    v = Verdict.from_dict(j.finalize(_outcome(leftover=3)))
    assert (v.reason, v.correct, v.reward) == ("fork_flood", False, 0.0) and "fork_flood" in v.cheat_flags
    clean = _judge(timing_enabled=False, timing_note="timing skipped: no GPU")
    _through_full(clean, torch.randn(4), torch.randn(64))
    _send(clean, {"type": "done"})
    v = Verdict.from_dict(clean.finalize(_outcome()))
    assert (v.stage, v.reason, v.reward) == ("full", "ok", 0.7) and "timing skipped: no GPU" in v.notes


def _scaled_run(j, original_ref, original_cand, scaled_ref, scaled_cand):
    """tiny, original and a larger-valued (range) input set; returns the verdict."""
    tiny = torch.randn(4)
    _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny])
    _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [original_ref])
    _send(j, {"type": "ref", "name": "range", "stage": "full", "inputs": "x"}, [scaled_ref])
    _send(j, {"type": "ref_done"})
    _send(j, {"type": "stage", "stage": "compile"})
    _send(j, *_cand("tiny", tiny.clone()))
    assert _send(j, {"type": "gate", "stage": "tiny"}) == "go"
    for name, out in (("original", original_cand), ("range", scaled_cand)):
        if _send(j, *_cand(name, out)) == "stop":
            break
    else:
        assert _send(j, {"type": "gate", "stage": "full"}) == "go"
        _send(j, {"type": "done"})
    return Verdict.from_dict(j.finalize(_outcome()))


def _tf32_matmul(a, b):
    """float32 matmul with inputs rounded to TF32 (10-bit mantissa), as tensor cores compute tl.dot."""
    def tf32(x):
        bits = x.contiguous().view(torch.int32)
        return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return tf32(a).double().mm(tf32(b).double()).float()


def test_judge_absolute_tolerance_grows_with_the_outputs_magnitude():
    torch.manual_seed(0)
    a, b = torch.randn(64, 64), torch.randn(64, 48)  # the shapes of the GPU test that failed this way
    ref, ref2 = a.mm(b), (2 * a).mm(2 * b)  # the scaled set: inputs x2, outputs x4
    cand, cand2 = _tf32_matmul(a, b), _tf32_matmul(2 * a, 2 * b)
    # with a fixed atol the TF32 kernel fails on the scaled inputs though it is no worse there
    fixed = ((cand2 - ref2).abs() > 1e-2 + 1e-2 * ref2.abs()).sum().item()
    assert ((cand - ref).abs() > 1e-2 + 1e-2 * ref.abs()).sum().item() == 0 and fixed > 0
    v = _scaled_run(_judge(timing_enabled=False), ref, cand, ref2, cand2)
    assert v.correct, (v.reason, v.error)
    scaled = next(e for e in v.errors if e["name"] == "range")
    assert 3.5 < scaled["atol_scaled"] < 4.5
    # a real error is still caught on the larger outputs
    wrong = cand2.clone()
    wrong[3, 5] += 0.5 + 0.02 * abs(float(ref2[3, 5]))
    v = _scaled_run(_judge(timing_enabled=False), ref, cand, ref2, wrong)
    assert not v.correct and v.reason == "mismatch:range"
    # outputs that do not grow keep the configured atol
    v = _scaled_run(_judge(timing_enabled=False), ref, cand, ref, cand + 0.011 + 0.01 * ref.abs())
    assert not v.correct and v.reason == "mismatch:range"


def test_judge_takes_output_magnitudes_from_the_reference_phase():
    j = _judge(timing_enabled=False)
    out = torch.randn(32)
    for name, mags in (("original", [1.0]), ("range", [3.0]), ("seed", ["x"]), ("larger", [1.0, 2.0])):
        _send(j, {"type": "ref", "name": name, "stage": "full", "inputs": "x", "magnitudes": mags}, [out])
    standard = j._standard()
    assert standard.magnitude_growth("range", 0) == pytest.approx(3.0)  # as the child measured it
    assert standard.magnitude_growth("seed", 0) == 1.0 and standard.magnitude_growth("larger", 0) == 1.0  # malformed: recomputed
    assert j.refs["seed"]["magnitudes"] is None and standard.magnitude_growth("original", 0) == 1.0


def test_compare_an_infinite_reference_is_matched_only_by_the_same_infinity():
    # rtol x inf makes the tolerance infinite: without care 0, 1e30 or -inf would all "match" +inf
    from tritonrl_lib.verify.worker.compare import compare
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    ref = torch.tensor([1.0, float("inf"), -2.0, float("-inf")])
    (rm,), (rb,) = encode_outputs([ref])
    for value, ok in ((float("inf"), True), (0.0, False), (1e30, False), (float("-inf"), False),
                      (float("nan"), False)):
        cand = ref.clone()
        cand[1] = value
        (cm,), (cb,) = encode_outputs([cand])
        r = compare(rm, rb, cm, cb, 1e-2, 1e-2)
        assert r["ok"] is ok, (value, r)
        if not ok:
            assert "where the reference is inf/NaN" in r["detail"]


def test_compare_gives_the_same_answer_on_one_thread_and_several(monkeypatch):
    """The comparison and the output digest are split over threads for large outputs; the verdict
    must not depend on how many (NaN, inf held or not, a far value, in different chunks)."""
    import tritonrl_lib.verify.worker.compare as compare_module
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    monkeypatch.setattr(compare_module, "_CHUNK", 1000)  # many chunks from a small tensor
    torch.manual_seed(0)
    ref = torch.randn(10_500)
    ref[2_500] = float("inf")
    cases = {"ok": ref + 1e-4, "far": ref.clone(), "nan": ref.clone(), "inf_lost": ref.clone()}
    cases["far"][9_999] += 3.0
    cases["nan"][4_321] = float("nan")
    cases["inf_lost"][2_500] = 0.0
    (rm,), (rb,) = encode_outputs([ref])
    answers = {}
    for threads in (1, 3):
        monkeypatch.setattr(compare_module, "COMPARE_THREADS", threads)
        monkeypatch.setattr(compare_module, "_POOL", None)
        for name, cand in cases.items():
            (cm,), (cb,) = encode_outputs([cand])
            r = compare_module.compare(rm, bytearray(rb), cm, bytearray(cb), 1e-2, 1e-2)
            answers.setdefault(name, []).append((r["ok"], r.get("reason"), r.get("detail"), r["max_abs"],
                                                 r["max_rel"]))
    for name, (one, several) in answers.items():
        assert one == several, name
    assert answers["ok"][0][0] and not answers["far"][0][0] and answers["nan"][0][1] == "nan_output"
    assert "where the reference is inf/NaN" in answers["inf_lost"][0][2]



def test_bit_identical_outputs_are_told_apart_from_nearly_identical_ones():
    import tritonrl_lib.verify.worker.compare as compare_module

    big = bytearray(torch.randn(300_001).numpy().tobytes())  # past the 64 KiB looked at first, not a multiple of 8
    for where in (0, 70_000, len(big) - 1):  # one byte apart: first, middle, last
        other = bytearray(big)
        other[where] ^= 1
        assert not compare_module.same_bytes([big], [other])
    assert compare_module.same_bytes([big, bytearray(b"x")], [bytearray(big), bytearray(b"x")])
    assert not compare_module.same_bytes([bytearray(b"ab"), bytearray(b"c")], [bytearray(b"a"), bytearray(b"bc")])
    assert not compare_module.same_bytes([big], [big, big]) and compare_module.same_bytes([], [])


def _send_ref(j, name: str, ref, alt=None):
    """A full-stage reference output for input set `name` (a timed call's set: `timed:<k>`), with its
    float32-accumulated twin if given."""
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    metas, blobs = encode_outputs([ref])
    stage = "timed" if name.startswith("timed:") else "full"
    header = {"type": "ref", "name": name, "stage": stage, "inputs": "x", "outputs": metas}
    if alt is not None:
        header["alt_outputs"], alt_blobs = encode_outputs([alt])
        blobs = blobs + alt_blobs
    return j.on_message(header, [bytearray(b) for b in blobs])


def _half_run(j, cand_half, ref_half, alt_half=None):
    """tiny + original in float32, then a bfloat16 input set with an optional float32-accumulated
    reference; returns the candidate's verdict on the bfloat16 set."""
    tiny, full = torch.randn(4), torch.randn(64)
    assert _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny]) is None
    assert _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [full]) is None
    assert _send_ref(j, "dtype:bfloat16", ref_half, alt_half) is None
    assert _send(j, {"type": "ref_done"}) is None
    assert _send(j, {"type": "stage", "stage": "compile"}) is None
    assert _send(j, *_cand("tiny", tiny.clone())) is None
    assert _send(j, {"type": "gate", "stage": "tiny"}) == "go"
    assert _send(j, *_cand("original", full.clone())) is None
    out = _send(j, *_cand("dtype:bfloat16", cand_half))
    if out is None:
        assert _send(j, {"type": "gate", "stage": "full"}) == "go"
        assert _send(j, {"type": "done"}) == "final"
    return Verdict.from_dict(j.finalize(_outcome()))


def _scan_case():
    # a long running sum in bfloat16: PyTorch's CUDA scan accumulates in bfloat16 and drifts; a
    # kernel accumulating in float32 stays on the true values (simulated here on the CPU)
    x = torch.randn(4096).to(torch.bfloat16)
    exact = torch.cumsum(x.double(), 0)
    drifting = torch.zeros(4096, dtype=torch.bfloat16)
    acc = torch.zeros((), dtype=torch.bfloat16)
    for i in range(4096):
        acc = (acc + x[i]).to(torch.bfloat16)
        drifting[i] = acc
    return exact.to(torch.bfloat16), drifting


def test_judge_accepts_a_half_kernel_that_is_more_accurate_than_the_half_reference():
    accurate, drifting = _scan_case()
    assert (accurate.float() - drifting.float()).abs().max() > 1.0  # the two really disagree
    v = _half_run(_judge(timing_enabled=False), accurate.clone(), drifting, alt_half=accurate)
    assert v.correct, (v.reason, v.error)
    assert [e.get("matched") for e in v.errors if e["name"] == "dtype:bfloat16"] == ["float32-accumulated reference"]
    # the reference's own behaviour stays acceptable too
    assert _half_run(_judge(timing_enabled=False), drifting.clone(), drifting, alt_half=accurate).correct
    # without the second reference the accurate kernel would have been failed
    v = _half_run(_judge(timing_enabled=False), accurate.clone(), drifting)
    assert not v.correct and v.reason == "mismatch:dtype:bfloat16"
    # and matching neither is still a mismatch
    v = _half_run(_judge(timing_enabled=False), (accurate.float() + 5).to(torch.bfloat16), drifting, alt_half=accurate)
    assert not v.correct and v.reason == "mismatch:dtype:bfloat16"


def _timed_run(j, refs: dict, cands: dict, timed_set: str, timed_out):
    """tiny, then full-stage input sets `refs` (name -> (reference, float32-accumulated reference or
    None)) answered by `cands`, then one timed call's output on `timed_set`; returns the verdict."""
    tiny = torch.randn(4)
    assert _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny]) is None
    for name, (ref, alt) in refs.items():
        assert _send_ref(j, name, ref, alt) is None
    assert _send(j, {"type": "ref_done"}) is None
    assert _send(j, {"type": "stage", "stage": "compile"}) is None
    assert _send(j, *_cand("tiny", tiny.clone())) is None
    assert _send(j, {"type": "gate", "stage": "tiny"}) == "go"
    for name in refs:
        if not name.startswith("timed:"):  # a timed call's set: never run before it is timed
            assert _send(j, *_cand(name, cands[name])) is None
    assert _send(j, {"type": "gate", "stage": "full"}) == "go"
    if _send(j, {"type": "timed", "trial": 1, "set": timed_set}, [timed_out]) is None:
        assert _send(j, {"type": "timing", "ref_ms": [2.0] * 20, "cand_ms": [1.0] * 20, "device_name": "H100"}) is None
        _send(j, {"type": "done"})
    return Verdict.from_dict(j.finalize(_outcome()))


def test_judge_holds_timed_outputs_to_the_standard_the_same_inputs_met_before_timing():
    # Seen on the H100: a bfloat16 scan kernel accumulating in float32 matched only the
    # float32-accumulated reference, passed the full stage, and its timed outputs (the same values)
    # were then held to the half reference alone: "cheat:timed_output_wrong" for a correct kernel.
    accurate, drifting = _scan_case()
    refs = {"original": (drifting, accurate)}
    v = _timed_run(_judge(), refs, {"original": accurate.clone()}, "original", accurate.clone())
    assert v.correct and v.reason == "ok" and not v.cheat_flags, (v.reason, v.error)
    # a timed output that matches neither reference is still caught
    v = _timed_run(_judge(), refs, {"original": accurate.clone()}, "original",
                   (accurate.float() + 5).to(torch.bfloat16))
    assert not v.correct and v.cheat_flags == ["timed_output_wrong"]

    # a timed call's own fresh set (timed:<k>) is held to its set's standard: outputs 8x the original's
    # keep the atol grown 8x
    torch.manual_seed(1)
    small, large = torch.randn(256), 8 * torch.randn(256)
    off = large + 0.05 * torch.sign(large)  # within atol x 8 (and the norm rule), beyond the plain atol + rtol
    assert ((off - large).abs() > 1e-2 + 1e-2 * large.abs()).any()
    refs = {"original": (small, None), "timed:0": (large, None)}
    cands = {"original": small.clone()}
    v = _timed_run(_judge(), refs, cands, "timed:0", off.clone())
    assert v.correct and not v.cheat_flags, (v.reason, v.error)
    v = _timed_run(_judge(), refs, cands, "timed:0", large + 1.0)
    assert not v.correct and v.cheat_flags == ["timed_output_wrong"]
    # an answer for the original's inputs (a content cache's, a stale one) is wrong on the fresh set
    v = _timed_run(_judge(), refs, cands, "timed:0", small.clone())
    assert not v.correct and v.cheat_flags == ["timed_output_wrong"]


def test_timed_outputs_are_kept_as_returned_when_the_kernel_reuses_its_output_buffer():
    import gc
    import itertools
    import time as _time
    import types

    from tritonrl_lib.verify.candidate.timed_inputs import kept_as_returned
    from tritonrl_lib.verify.candidate.timing import time_pair

    picks = itertools.count()
    clock = types.SimpleNamespace(  # time_pair's primitives, on the CPU
        buf=torch.zeros(8), sync=lambda: None, spin=lambda cycles: None, zero=torch.Tensor.zero_, stream=None,
        record=lambda ev, stream: ev.__setitem__(0, _time.perf_counter()), event_sync=lambda ev: None,
        elapsed=lambda a, b: (b[0] - a[0]) * 1e3, new_event=lambda: [0.0], sigmask=None,
        urandom=lambda n: next(picks).to_bytes(4, "little"),  # trials 0-4 checked, and the last
        gc_disable=gc.disable, gc_enable=gc.enable, gc_enabled=gc.isenabled)
    x, buffer = torch.zeros(16), torch.empty(16)

    def refill(trial):  # the values change in place between trials, as the seed set's do
        x.fill_(float(trial))

    def cand():  # an honest kernel that writes every call into the one buffer it returns
        return buffer.copy_(x * 2)

    copied, by_reference = [], []

    def keep(trial, out):
        copied.append((trial, kept_as_returned(out, torch.Tensor.clone, lambda: None)))
        by_reference.append((trial, out))

    time_pair(lambda: x + 1, cand, 1, 10, clock=clock, on_output=keep, checked=5, before_cand=refill)
    assert [t for t, _ in copied] == [0, 1, 2, 3, 4, 9]
    assert all(torch.equal(outs[0], torch.full((16,), 2.0 * t)) for t, outs in copied)
    # kept by reference (before): every checked trial held the last trial's result
    assert all(torch.equal(out, torch.full((16,), 18.0)) for _, out in by_reference)


def test_one_output_right_for_two_input_sets_is_not_a_cached_answer():
    # a float32 task on integer-valued inputs: its float16 set has the same values, so a kernel that
    # returns float32 on half inputs (allowed) gives the original's very bytes, while the references
    # differ (float32 against float16): right on both sets, it was flagged cheat:cached_output
    values = torch.arange(64, dtype=torch.float32) % 7 - 3
    out = torch.relu(values)
    j = _judge(timing_enabled=False)
    tiny = torch.randn(4)
    _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny])
    _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [out])
    _send_ref(j, "dtype:float16", out.half())
    _send(j, {"type": "ref_done"})
    _send(j, {"type": "stage", "stage": "compile"})
    _send(j, *_cand("tiny", tiny.clone()))
    assert _send(j, {"type": "gate", "stage": "tiny"}) == "go"
    assert _send(j, *_cand("original", out.clone())) is None
    assert _send(j, *_cand("dtype:float16", out.clone())) == "stop"
    v = Verdict.from_dict(j.finalize(_outcome()))
    assert not v.correct and v.reason == "dtype_mismatch" and not v.cheat_flags, (v.reason, v.error)
    assert "expected float16" in v.error
    # the right dtype is right (the half reference's values, in half)
    j = _judge(timing_enabled=False)
    _send(j, {"type": "ref", "name": "tiny", "stage": "tiny", "inputs": "x"}, [tiny])
    _send(j, {"type": "ref", "name": "original", "stage": "full", "inputs": "x"}, [out])
    _send_ref(j, "dtype:float16", out.half())
    _send(j, {"type": "ref_done"})
    _send(j, {"type": "stage", "stage": "compile"})
    _send(j, *_cand("tiny", tiny.clone()))
    assert _send(j, {"type": "gate", "stage": "tiny"}) == "go"
    assert _send(j, *_cand("original", out.clone())) is None
    assert _send(j, *_cand("dtype:float16", out.half())) is None
    assert _send(j, {"type": "gate", "stage": "full"}) == "go"
    _send(j, {"type": "done"})
    v = Verdict.from_dict(j.finalize(_outcome()))
    assert v.correct and not v.cheat_flags, (v.reason, v.error)
    # the same bytes where they are wrong for the second set are still a cached answer
    v = _scaled_run(_judge(timing_enabled=False), out, out.clone(), out * 2 + 1, out.clone())
    assert not v.correct and "cached_output" in v.cheat_flags


def test_timing_refills_only_a_set_of_the_same_layout_and_plain_values():
    from tritonrl_lib.verify.candidate.candidate_phase import same_layout

    x, w = torch.randn(4, 8), torch.randn(8)
    assert same_layout([x, w, 3], [torch.randn(4, 8), torch.randn(8), 3], values_too=True)
    # a seed set drawn at other sizes would be broadcast or refused by copy_: never refilled
    assert not same_layout([x, w], [torch.randn(4, 16), torch.randn(8)])
    assert not same_layout([x], [torch.randn(8, 4).t()])  # same shape, other strides
    assert not same_layout([x], [x.double()]) and not same_layout([x], [x, w])
    # its scalar arguments must be the same: a refill copies tensors, the reference had the seed's scalar
    assert same_layout([x, 3], [x, 4]) and not same_layout([x, 3], [x, 4], values_too=True)
    assert not same_layout([x, [w]], [x, [w.clone()]], values_too=True)


def test_judge_refuses_a_malformed_alternative_reference():
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    j = _judge()
    metas, blobs = encode_outputs([torch.ones(8, dtype=torch.bfloat16)])
    alt_metas, alt_blobs = encode_outputs([torch.ones(4, dtype=torch.bfloat16)])  # another shape
    header = {"type": "ref", "name": "dtype:bfloat16", "stage": "full", "inputs": "x", "outputs": metas,
              "alt_outputs": alt_metas}
    assert j.on_message(header, [bytearray(b) for b in blobs + alt_blobs]) == "stop"
    assert Verdict.from_dict(j.finalize(_outcome())).reason == "internal_error"


def test_float32_reference_widens_the_half_model_and_rounds_back():
    from tritonrl_lib.verify.candidate.context import Child
    from tritonrl_lib.verify.candidate.reference_phase import ReferencePhase

    class Scan(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor(1.001))

        def forward(self, x):
            return torch.cumsum(x * self.w, dim=0)

    child = Child.__new__(Child)  # only run_ref / finite / sync are used, on the CPU
    child.device, child.ch, child.budget, child.job = "cpu", None, None, {}
    child.sync = lambda: None
    phase = ReferencePhase(child)
    href = Scan().to(torch.bfloat16)
    x = [torch.randn(2048).to(torch.bfloat16)]
    outs = phase.run_ref(href, x)
    alt = phase.float32_reference(href, x, outs)
    w = href.w.detach().double()  # the half model's own (rounded) weight, widened
    truth = torch.cumsum(x[0].double() * w, 0)
    assert alt[0].dtype == torch.bfloat16 and alt[0].shape == outs[0].shape
    assert (alt[0].double() - truth).abs().max() <= (truth.abs().max() * 2 ** -8).item()
    assert href.w.dtype == torch.bfloat16  # the half model itself is untouched
