"""Triton's C helper modules built once by the worker and checked by the child before loading."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.verify.compilation import native_builds
from tritonrl_lib.verify.worker.judge import Judge
from tritonrl_lib.verify.sandbox.limits import Limits
from tritonrl_lib.verify.compilation.native_builds import MAX_REQUESTS_PER_JOB, ChildBuildHook, NativeBuilder, validate_request
from tritonrl_lib.verify.sandbox.run import run_sandboxed
from tritonrl_lib.verify.settings import JobSettings

pytestmark = pytest.mark.timeout(120)


def module_source(value: int, name: str = "cuda_utils") -> str:
    """A real CPython extension module named `name` whose answer() returns `value`."""
    return f"""
#include <Python.h>
static PyObject* answer(PyObject* self, PyObject* args) {{ return PyLong_FromLong({value}); }}
static PyMethodDef methods[] = {{{{"answer", answer, METH_NOARGS, ""}}, {{NULL, NULL, 0, NULL}}}};
static struct PyModuleDef def = {{PyModuleDef_HEAD_INIT, "{name}", NULL, -1, methods}};
PyMODINIT_FUNC PyInit_{name}(void) {{ return PyModule_Create(&def); }}
"""


def request(src: str, name: str = "cuda_utils") -> dict:
    return {"type": "build", "name": name, "src": src, "library_dirs": [], "include_dirs": [], "libraries": []}


def load(path: str, name: str = "cuda_utils"):
    from triton.runtime.build import _load_module_from_path

    return _load_module_from_path(name, path)


def test_the_worker_builds_each_distinct_request_once(tmp_path):
    builder = NativeBuilder(str(tmp_path / "native"))
    first = builder.answer(request(module_source(7)), 0)
    again = builder.answer(request(module_source(7)), 0)
    other = builder.answer(request(module_source(8)), 0)
    assert builder.builds == 2  # the repeat came from memory, no compiler run
    assert first == again and first["path"] != other["path"]
    with open(first["path"], "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == first["sha256"]
    assert load(first["path"]).answer() == 7


def test_requests_for_anything_but_tritons_modules_are_refused(tmp_path):
    builder = NativeBuilder(str(tmp_path / "native"))
    assert "not a module" in builder.answer(request(module_source(1), name="evil"), 0)["error"]
    assert "oversized" in builder.answer(request("x" * (native_builds.MAX_SOURCE_BYTES + 1)), 0)["error"]
    bad_dirs = dict(request(module_source(1)), include_dirs=["/tmp", 3])
    assert "include_dirs" in builder.answer(bad_dirs, 0)["error"]
    assert "more than" in builder.answer(request(module_source(1)), MAX_REQUESTS_PER_JOB)["error"]
    assert builder.builds == 0
    assert isinstance(validate_request(request(module_source(1), name="__triton_launcher")), dict)


def test_a_compiler_error_is_answered_and_remembered(tmp_path):
    builder = NativeBuilder(str(tmp_path / "native"))
    answer = builder.answer(request("this is not C"), 0)
    assert "error" in answer and builder.builds == 1
    assert builder.answer(request("this is not C"), 0) == answer and builder.builds == 1


def _hook_for(builder: NativeBuilder, notes: list[str]) -> ChildBuildHook:
    return ChildBuildHook(lambda header: builder.answer(header, 0), notes.append)


def _call_hook(hook: ChildBuildHook, src: str, tmp_path, tag: str) -> str:
    srcdir = tmp_path / f"child-{tag}"
    srcdir.mkdir()
    src_path = srcdir / "cuda_utils.c"
    src_path.write_text(src)
    return hook("cuda_utils", str(src_path), str(srcdir), [], [], [])


def test_the_child_loads_the_workers_module_after_checking_it(tmp_path):
    builder, notes = NativeBuilder(str(tmp_path / "native")), []
    hook = _hook_for(builder, notes)
    out = _call_hook(hook, module_source(11), tmp_path, "a")
    assert os.path.dirname(out) == str(tmp_path / "child-a")  # a copy in the child's own folder
    assert hook.served == 1 and hook.local == 0 and not notes
    assert load(out).answer() == 11


def test_a_tampered_module_is_never_loaded(tmp_path):
    builder, notes = NativeBuilder(str(tmp_path / "native")), []
    hook = _hook_for(builder, notes)
    first = builder.answer(request(module_source(5)), 0)
    # another candidate (same user) overwrites the worker's copy with a different module
    with open(builder.answer(request(module_source(666)), 0)["path"], "rb") as f:
        evil = f.read()
    with open(first["path"], "wb") as f:
        f.write(evil)
    out = _call_hook(hook, module_source(5), tmp_path, "b")
    assert hook.local == 1 and hook.served == 0
    assert "altered" in notes[0]
    assert load(out).answer() == 5  # built here from its own source, not the planted one


def test_a_refused_request_is_built_in_the_child(tmp_path):
    notes = []
    hook = ChildBuildHook(lambda header: {"error": "this worker does not build modules"}, notes.append)
    out = _call_hook(hook, module_source(3), tmp_path, "c")
    assert hook.local == 1 and "does not build" in notes[0]
    assert load(out).answer() == 3


def test_tritons_module_loader_goes_through_the_hook(tmp_path, monkeypatch):
    """Triton's own compile_module_from_src, with the hook installed as knobs.build.impl."""
    from triton import knobs
    from triton.runtime.build import compile_module_from_src

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    builder, notes = NativeBuilder(str(tmp_path / "native")), []
    saved = knobs.build.impl
    try:
        hook = native_builds.install(lambda header: builder.answer(header, 0), notes.append)
        mod = compile_module_from_src(module_source(21), "cuda_utils")
    finally:
        knobs.build.impl = saved
    assert mod.answer() == 21
    assert hook.served == 1 and builder.builds == 1 and not notes


def _child_asks(ch):
    reply = ch.request(request(module_source(9)))
    ch.send({"type": "echo", "reply": reply})
    ch.send({"type": "gated", "go": ch.gate("tiny")})  # gates still work after a reply


def test_a_request_and_its_reply_cross_the_sandbox_channel(tmp_path):
    builder = NativeBuilder(str(tmp_path / "native"))
    seen = []

    def on_message(header, blobs):
        seen.append(header)
        if header["type"] == "build":
            return builder.answer(header, 0)
        if header["type"] == "gate":
            return "go"
        return None

    workdir = tmp_path / "cand"
    workdir.mkdir()
    outcome = run_sandboxed(_child_asks, on_message, Limits(timeout_s=60, memory_limit_mb=0,
                                                             cap_address_space=False), str(workdir))
    assert outcome.kill_reason is None, outcome
    echo = next(h for h in seen if h["type"] == "echo")["reply"]
    assert echo["sha256"] and os.path.isfile(echo["path"])
    assert next(h for h in seen if h["type"] == "gated")["go"] is True


def test_the_judge_answers_build_requests_outside_the_verdict(tmp_path):
    job = {"task_id": "t", "settings": JobSettings.for_device(VerifyConfig(), "cuda").to_json(), "policy": "strict"}
    builder = NativeBuilder(str(tmp_path / "native"))
    judge = Judge(job, builder)
    reply = judge.on_message(request(module_source(4)), [])
    assert isinstance(reply, dict) and reply["sha256"]
    assert judge.failure is None and not judge.notes  # no effect on the candidate's verdict
    for _ in range(MAX_REQUESTS_PER_JOB):
        last = judge.on_message(request(module_source(4)), [])
    assert "more than" in last["error"] and builder.builds == 1
    assert "does not build" in Judge(job).on_message(request(module_source(4)), [])["error"]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
