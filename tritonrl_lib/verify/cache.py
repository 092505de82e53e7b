"""An on-disk cache of verdicts, so re-verifying the same solution (the data generator checks ~1000)
costs a file read.

Key: sha256 of the task source, the candidate's code, the resolved policy, the settings that change
a verdict, the device it ran on with what its jobs' budgets read (host memory, workers sharing: the
pool's `_budget_desc`) and VERIFIER_VERSION (bump it whenever a change to the verifier could change
a verdict). Verdicts that depend on the machine's load or health (timeouts, memory
limits, lost workers: the reasons the catalogue marks uncacheable, reasons.py) are never stored.
Location: $TRITONRL_CACHE/verdicts, else ~/.cache/tritonrl/verdicts.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from . import reasons
from .verdict import Verdict

VERIFIER_VERSION = "19"  # 19: a prescreen's tiny-set mismatch is final where no growth of the tiny set's atol the full run could apply covers it (the pool learns each task's growth from its first full run; else the largest, x1000); 18: a GPU candidate's process uses its share of the host's cores for torch's CPU work, as a CPU one did (16 threads each, 48 candidates on 16 cores, ran honest solutions out of CPU time); 17: the seed set's row scales always take both ends of their range (a dropped online rescale passed 1 seed in 4 on 3 rows); 16: scalar loop bounds under Triton 3.6's interpreter with NumPy >= 2.4 (interpreter_compat); 15: the seed set's rows sorted ascending along the last dimension (a row's tiles combined wrongly); 14: the prescreen (a large task's tiny set first: only the candidate's own repeatable failures end there); 13: TF32 read from the launched kernels only (a dead tl.dot no longer widens the tolerance); 12: issue 31 (budgets count every set's draw, fresh timed inputs, output dtype, tiny sizes >= 16 keeping divisibility, kernel.run, heavy-op dtypes, TF32 policy, global switches, stream order, CUDA graphs); 11: red-teamed (census escapes, heavy-call limit, loading watch, seed set rows, structure kept, libdevice on the CPU); 9: timed outputs judged as their set was and copied as returned; cached answers wrong ones

# settings that can change a verdict (timeout and memory limit only decide verdicts never stored)
KEY_SETTINGS = ("atol", "rtol", "half_atol", "half_rtol", "num_variations", "timing_enabled", "timing_warmup",
                "timing_trials", "timing_trim", "partial_credit", "speedup_review", "compile_check", "prescreen")


def default_cache_dir() -> Path:
    root = os.environ.get("TRITONRL_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "tritonrl"


class VerdictCache:
    def __init__(self, root: str | os.PathLike | None = None):
        self.dir = Path(root) if root is not None else default_cache_dir() / "verdicts"

    @staticmethod
    def key(task_source: str, code: str, policy: str, settings: dict[str, Any], device: str) -> str:
        payload = {
            "version": VERIFIER_VERSION,
            "task": task_source,
            "code": code,
            "policy": policy,
            "device": device,
            "settings": {k: settings.get(k) for k in KEY_SETTINGS},
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> Verdict | None:
        try:
            return Verdict.from_dict(json.loads(self._path(key).read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def put(self, key: str, verdict: Verdict) -> None:
        if not reasons.may_cache(verdict.reason):  # the catalogue says which depend on the machine, not the code
            return
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                f.write(verdict.to_json())
            os.replace(tmp, path)  # atomic: concurrent writers never leave half a file
        except OSError:
            pass
