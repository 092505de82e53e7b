"""Footprints of many task sources at once (`probe_sources`), for callers that are not verifier workers.

`footprint.probe` forks the calling process. A trainer's process may hold a CUDA context and threads of
its own, where a fork is unsafe, so the sources go to a fresh Python process (no GPU, nothing running)
that probes several at a time, each in its own throwaway fork as the workers do. Its answer is written
to a file: a task's module may print at import, and stdout would mix that with the answer.

    python -m tritonrl_lib.verify.sandbox.probe_batch REQUEST.json ANSWER.json   # what probe_sources runs
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from .footprint import PROBE_TIMEOUT_S, Footprint, probe

STARTUP_S = 120.0  # the process's own imports (torch) on a slow, busy machine


def probe_sources(sources: Sequence[str], workers: int = 0, timeout_s: float = PROBE_TIMEOUT_S) -> list[Footprint | None]:
    """Each source's footprint (None where it could not be measured: the meta run failed, timed out,
    or the probing process itself failed), in order. `workers`: probes at once (0: the cores less one)."""
    sources = list(sources)
    if not sources:
        return []
    workers = workers or max(1, (os.cpu_count() or 2) - 1)
    with tempfile.TemporaryDirectory(prefix="tritonrl-probe-") as tmp:
        request, answer = Path(tmp) / "request.json", Path(tmp) / "answer.json"
        request.write_text(json.dumps({"sources": sources, "workers": workers, "timeout_s": timeout_s}))
        # every probe may take its whole timeout; they run `workers` at a time
        limit = STARTUP_S + timeout_s * (len(sources) / workers + 1)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        try:
            subprocess.run([sys.executable, "-m", __name__, str(request), str(answer)], env=env, timeout=limit,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            found = json.loads(answer.read_text())
        except (OSError, ValueError, subprocess.SubprocessError):
            return [None] * len(sources)
    if not isinstance(found, list) or len(found) != len(sources):
        return [None] * len(sources)
    return [Footprint.from_json(d) if isinstance(d, dict) else None for d in found]


def _main(request: str, answer: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    req = json.loads(Path(request).read_text())
    sources, timeout_s = req["sources"], float(req["timeout_s"])
    # the first alone: the lazy imports a meta run makes happen before any thread forks
    first = [probe(sources[0], timeout_s)]
    with ThreadPoolExecutor(max(1, int(req["workers"]))) as pool:
        rest = list(pool.map(lambda s: probe(s, timeout_s), sources[1:]))
    Path(answer).write_text(json.dumps([fp.to_json() if fp is not None else None for fp in first + rest]))


if __name__ == "__main__":
    _main(sys.argv[1], sys.argv[2])
