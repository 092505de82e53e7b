"""Triton's small C modules, built once per worker instead of once per candidate.

On a GPU, Triton compiles C with the system compiler the first time a process needs its CUDA helper
module (`cuda_utils`) and again for every new kernel signature (`__triton_launcher`, Triton 3.6),
caching the result in TRITON_CACHE_DIR. A candidate's process has a cache of its own (nothing one
candidate writes may reach another), so every candidate paid those compiler runs again: about half
a second each, two to four per candidate, most of a simple candidate's cost.

Instead the child asks its worker over its channel. The worker (trusted: it never runs candidate
code) builds each distinct request once, keeps the module in its own folder and remembers its
SHA-256 in memory; the child checks that hash on the bytes it reads before loading them, so a file
another candidate tampered with is never loaded (the child then builds it itself, as before).
Requests are keyed by everything that goes into the build (name, C source, folders, libraries), so
a candidate that sends made-up source gets back only what it asked for: no other request can
match it. What is not defended here is tampering with the installed Triton or its headers, which
would poison a plain Triton just the same; the static stage refuses file access.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import tempfile
from typing import Any, Callable

from ..sandbox import messages as M

ALLOWED_NAMES = ("cuda_utils", "__triton_launcher")
MAX_SOURCE_BYTES = 1 << 20
MAX_REQUESTS_PER_JOB = 32
MAX_LIST_ITEMS = 64


def _request_key(req: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(req, sort_keys=True).encode()).hexdigest()


def _file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def validate_request(header: dict[str, Any]) -> dict[str, Any] | str:
    """The build request in a child's message, or why it is refused."""
    name, src = header.get("name"), header.get("src")
    if name not in ALLOWED_NAMES:
        return f"not a module Triton builds: {str(name)[:60]!r}"
    if not isinstance(src, str) or len(src.encode()) > MAX_SOURCE_BYTES:
        return "missing or oversized C source"
    req: dict[str, Any] = {"name": name, "src": src}
    for key in ("library_dirs", "include_dirs", "libraries"):
        value = header.get(key) or []
        if not isinstance(value, list) or len(value) > MAX_LIST_ITEMS or not all(
                isinstance(v, str) and 0 < len(v) < 4096 and "\0" not in v for v in value):
            return f"malformed {key}"
        req[key] = value
    return req


def triton_build(name: str, src_path: str, out_dir: str, library_dirs: list[str], include_dirs: list[str],
                 libraries: list[str]) -> str:
    """Triton's own build of a C module (its compiler, flags and Python headers), bypassing any hook."""
    from triton import knobs
    from triton.runtime import build

    saved = knobs.build.impl
    knobs.build.impl = None
    try:
        args = [name, src_path, out_dir, list(library_dirs), list(include_dirs), list(libraries)]
        if "ccflags" in inspect.signature(build._build).parameters:
            args.append([])
        return build._build(*args)
    finally:
        knobs.build.impl = saved


class NativeBuilder:
    """The worker's side: builds what children ask for, once per distinct request."""

    def __init__(self, folder: str, build: Callable[..., str] = triton_build):
        self.folder = folder
        self._build = build
        self._done: dict[str, dict[str, str]] = {}  # request key -> {"path", "sha256"} or {"error"}
        self.builds = 0  # compiler runs (the tests count them)

    def answer(self, header: dict[str, Any], requests_so_far: int) -> dict[str, str]:
        if requests_so_far >= MAX_REQUESTS_PER_JOB:
            return {"error": f"more than {MAX_REQUESTS_PER_JOB} build requests from one candidate"}
        req = validate_request(header)
        if isinstance(req, str):
            return {"error": req}
        key = _request_key(req)
        known = self._done.get(key)
        if known is not None:
            return dict(known)
        os.makedirs(self.folder, exist_ok=True)
        out_dir = tempfile.mkdtemp(prefix=req["name"].strip("_") + "-", dir=self.folder)
        src_path = os.path.join(out_dir, req["name"] + ".c")
        try:
            with open(src_path, "w") as f:
                f.write(req["src"])
            self.builds += 1
            path = self._build(req["name"], src_path, out_dir, req["library_dirs"], req["include_dirs"],
                               req["libraries"])
            result = {"path": path, "sha256": _file_sha256(path)}
        except BaseException as e:  # the child builds it itself and meets the same error there
            result = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
        self._done[key] = result
        return dict(result)


class ChildBuildHook:
    """The child's side, installed as `triton.knobs.build.impl`: ask the worker, check, else build here."""

    def __init__(self, request: Callable[[dict[str, Any]], dict[str, Any] | None],
                 note: Callable[[str], None] = lambda text: None,
                 around: Callable[[], Any] = contextlib.nullcontext):
        self.request = request
        self.note = note
        self.around = around  # entered for each build: the child gives its GPU hold up meanwhile
        self.served = 0  # modules the worker supplied
        self.local = 0  # modules built here (refused, failed or tampered)

    def __call__(self, name: str, src_path: str, srcdir: str, library_dirs: list[str], include_dirs: list[str],
                 libraries: list[str]) -> str:
        with self.around():
            return self._serve(name, src_path, srcdir, library_dirs, include_dirs, libraries)

    def _serve(self, name: str, src_path: str, srcdir: str, library_dirs: list[str], include_dirs: list[str],
               libraries: list[str]) -> str:
        reply = None
        try:
            with open(src_path) as f:
                src = f.read()
            reply = self.request({"type": M.BUILD, "name": name, "src": src, "library_dirs": list(library_dirs),
                                  "include_dirs": list(include_dirs), "libraries": list(libraries)})
        except OSError:
            pass
        why = "no answer from the worker"
        if isinstance(reply, dict) and isinstance(reply.get("path"), str) and isinstance(reply.get("sha256"), str):
            try:
                with open(reply["path"], "rb") as f:
                    data = f.read()
            except OSError:
                data = None
            if data is not None and hashlib.sha256(data).hexdigest() == reply["sha256"]:
                out = os.path.join(srcdir, os.path.basename(reply["path"]))
                with open(out, "wb") as f:
                    f.write(data)
                self.served += 1
                return out
            why = "the worker's copy was missing or altered"
        elif isinstance(reply, dict) and reply.get("error"):
            why = str(reply["error"])[:200]
        self.local += 1
        self.note(f"built Triton's {name} module here ({why})")
        return triton_build(name, src_path, srcdir, library_dirs, include_dirs, libraries)


def install(request: Callable[[dict[str, Any]], dict[str, Any] | None], note: Callable[[str], None],
            around: Callable[[], Any] = contextlib.nullcontext) -> ChildBuildHook:
    from triton import knobs

    hook = ChildBuildHook(request, note, around)
    knobs.build.impl = hook
    return hook
