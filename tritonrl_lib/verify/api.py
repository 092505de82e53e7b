"""`verify(task, completion, config) -> Verdict`: one candidate, checked in a worker process.

Untrusted code never runs in the caller's process. Calls share a module-level pool, created on
first use (one worker started per call in flight, so a single call costs one worker's start-up
once) and closed when the interpreter exits. Pass `pool=` to use your own.
"""

from __future__ import annotations

import atexit
import threading

from ..core.config import RunConfig, VerifyConfig
from ..tasks.task import Task
from .pool import VerifierPool, as_verify_config
from .verdict import Verdict

_default: VerifierPool | None = None
_lock = threading.Lock()


def default_pool() -> VerifierPool:
    """The shared pool (default settings; each call passes its own config to the job)."""
    global _default
    with _lock:
        if _default is None or _default._closed:
            _default = VerifierPool(VerifyConfig(), progress=False)
            atexit.register(_close_default)
        return _default


def _close_default() -> None:
    global _default
    if _default is not None:
        _default.close()
        _default = None


def verify(task: Task | str, completion: str, config: VerifyConfig | RunConfig | None = None, *,
           pool: VerifierPool | None = None, static: bool = True) -> Verdict:
    """Verify one model completion (or solution module) against a task; always returns a Verdict."""
    cfg = as_verify_config(config)
    return (pool or default_pool()).verify(task, completion, config=cfg, static=static)
