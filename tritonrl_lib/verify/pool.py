"""VerifierPool: persistent worker processes that verify many candidates, surviving any of them.

    with VerifierPool(cfg.verify) as pool:
        verdicts = pool.map(tasks, completions)      # order preserved, progress bar

Extraction and the static (AST) check run here, in the caller's process: they execute nothing and
reject most bad candidates for the price of a parse. The rest go to workers
(`python -m tritonrl_lib.verify.worker.main`): one per visible GPU, or `workers` on the CPU (0 =
min(4, cores)), where kernels run under Triton's interpreter. Each worker forks a fresh child per
candidate; if a worker itself dies, its job gets a `worker_lost` verdict, whatever the child left
is killed, and a new worker takes its place.

Workers start lazily (only as many as there are jobs) and live until `close()`. Verdicts can be
cached on disk (`cache=True` or a folder; off by default, see cache.py). Calls to `map` from
several threads take turns.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Iterable, Sequence

from . import reasons as R
from ..core.config import RunConfig, VerifyConfig, gpu_available
from ..tasks.task import Task
from .cache import VerdictCache
from .candidate.runtime_checks import without_malloc_tcache
from .extract import extract_code
from .job_order import next_job
from .policy import resolve_policy
from .sandbox import messages as M
from .sandbox.gpu_lock import lock_path
from .sandbox.limits import HOST_GPUS_ENV, HOST_POOLS_ENV, host_memory_bytes, host_pools
from .settings import JobSettings
from .static import static_check
from .verdict import Verdict
from .worker.reference_cache import PoolStore, cache_key, recv_fds, send_record
from .worker_stop import stop_workers

STARTUP_TIMEOUT_S = 180.0  # importing torch + triton on a loaded machine
RESULT_GRACE_S = 60.0  # beyond the candidate timeout, before a silent worker is declared lost
MAX_START_FAILURES = 3


class VerifierError(RuntimeError):
    """The verifier itself cannot run (a worker cannot start); never raised for a bad candidate."""


def as_verify_config(config: VerifyConfig | RunConfig | dict | None) -> VerifyConfig:
    if config is None:
        return VerifyConfig()
    if isinstance(config, RunConfig):
        return config.verify
    if isinstance(config, VerifyConfig):
        return config
    if isinstance(config, dict):
        return dataclasses.replace(VerifyConfig(), **config)
    raise TypeError(f"expected a VerifyConfig or RunConfig, got {type(config).__name__}")


def as_task(task: Task | str, level: int = 1) -> Task:
    if isinstance(task, Task):
        return task
    if isinstance(task, str):
        return Task(id="<source>", level=level, name="task", source=task)
    raise TypeError(f"expected a Task or a KernelBench source string, got {type(task).__name__}")


def visible_gpus() -> list[str]:
    """Device ids to give one worker each (honours the caller's CUDA_VISIBLE_DEVICES)."""
    if not gpu_available():
        return []
    import torch

    n = torch.cuda.device_count()
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        ids = [x.strip() for x in env.split(",") if x.strip()]
        return ids[:n] if n else ids
    return [str(i) for i in range(n)]


@dataclasses.dataclass
class _Worker:
    slot: int
    proc: subprocess.Popen
    conn: Connection
    ready: bool = False
    job_index: int | None = None
    job_started: float = 0.0
    child_pid: int | None = None
    spare_pids: list[int] = dataclasses.field(default_factory=list)  # children started ahead (spares.Spare)
    base_dir: str | None = None  # the worker's temp dir, removed here if the worker dies
    started_at: float = dataclasses.field(default_factory=time.monotonic)
    tasks: collections.OrderedDict = dataclasses.field(default_factory=collections.OrderedDict)  # recent sources
    ref_keys: set = dataclasses.field(default_factory=set)  # what its reference cache holds (reference_cache.py)
    longest_s: float | None = None  # the longest its job may take (limits.Limits.longest_s, from the worker)
    wants_alone: bool = False  # its job's task is too big for one share of the GPU: it waits for `shares`
    alone: bool = False  # it holds them (jobs there are handed out only while the shares held leave room)
    shares: int = 1  # the worker shares of its GPU its job asked for (limits.Budget.shares; all: the GPU alone)


def workers_per_gpu_for_cores(gpus: int, cores: int | None = None) -> int:
    """workers_per_gpu=0: as many workers per GPU as the host's cores feed (a candidate's compile is
    CPU work; four cores per GPU stay for the trainer and the workers' spares), between 4 and 16."""
    cores = cores if cores is not None else (os.cpu_count() or 1)
    return max(4, min(16, cores // max(1, gpus) - 4))


class VerifierPool:
    def __init__(self, config: VerifyConfig | RunConfig | None = None, workers: int | None = None,
                 device: str = "auto", cache: bool | str | os.PathLike | None = None, progress: bool = True):
        self.config = as_verify_config(config)
        gpus = visible_gpus() if device in ("auto", "cuda") else []
        if device == "cuda" and not gpus:
            raise VerifierError("device='cuda' but no GPU is visible; use device='auto' or 'cpu'")
        self.device = "cuda" if gpus else "cpu"
        if self.device == "cuda":
            n = workers or self.config.workers or len(gpus) * (self.config.workers_per_gpu
                                                                or workers_per_gpu_for_cores(len(gpus)))
            self._gpu_ids = [gpus[i % len(gpus)] for i in range(n)]
        else:
            n = workers or self.config.workers or min(4, os.cpu_count() or 1)
            self._gpu_ids = []
        self.size = max(1, int(n))
        self.host_pools = host_pools()  # one per rank on the host: each takes its share of memory and cores
        self.host_gpus = (len(set(self._gpu_ids)) or 1) * self.host_pools  # each a share of the host's memory
        self._threads = max(1, (os.cpu_count() or 1) // (self.size * self.host_pools))
        self._slots: list[_Worker | None] = [None] * self.size
        self._start_failures = 0
        self._alone_tasks: set[str] = set()  # task sources whose jobs asked for their GPU alone
        self.progress = progress
        if cache is None:
            cache = self.config.verify_cache
        if cache is True:
            self.cache: VerdictCache | None = VerdictCache()
        elif cache:
            self.cache = VerdictCache(cache)
        else:
            self.cache = None
        self._closed = False
        self.restarts = 0
        # workers' records, shared per GPU: as much as the workers' caches hold together
        self._references = PoolStore.for_pool(self.config.reference_cache_mb * self.size, self.host_pools)
        # per reference phase (task, its settings, seeds): how much its full runs grew the tiny set's atol (judge:
        # tiny_atol_growth), so a later prescreen of it knows which tiny-set mismatches the full run would find too
        self._tiny_growth: dict[str, float] = {}
        self.python = sys.executable  # the interpreter workers run in
        # the input sets' seeds: drawn per pool, never published, so no answer can be prepared for them
        self._seeds = {k: int.from_bytes(os.urandom(4), "little") for k in ("inputs", "other", "range", "timed")}
        self._lock = threading.Lock()  # one map at a time (callers on several threads take turns)

    # ---------------------------------------------------------------- public

    def verify(self, task: Task | str, completion: str, *, config: VerifyConfig | None = None,
               static: bool = True) -> Verdict:
        return self.map([task], [completion], config=config, static=static, progress=False)[0]

    def map(self, tasks: Task | str | Sequence[Task | str], completions: Sequence[str], *,
            config: VerifyConfig | RunConfig | None = None, static: bool = True, progress: bool | None = None,
            desc: str = "verify") -> list[Verdict]:
        """One Verdict per completion, in order. `tasks` is one task for all, or one per completion.

        `static=False` skips the static check (only to test the runtime layer on its own)."""
        with self._lock:
            return self._map(tasks, completions, config, static, progress, desc)

    def _map(self, tasks, completions, config, static: bool, progress: bool | None, desc: str) -> list[Verdict]:
        if self._closed:
            raise VerifierError("this VerifierPool is closed")
        completions = list(completions)
        if isinstance(tasks, (Task, str)):
            task_list = [as_task(tasks)] * len(completions)
        else:
            task_list = [as_task(t) for t in tasks]
        if len(task_list) != len(completions):
            raise ValueError(f"{len(task_list)} tasks for {len(completions)} completions: "
                             "pass one task, or one per completion")
        cfg = as_verify_config(config) if config is not None else self.config

        results: list[Verdict | None] = [None] * len(completions)
        jobs: collections.deque[tuple[int, M.Job, str | None]] = collections.deque()
        # what the cached verdicts depend on besides the job: read once per call, not per candidate
        where = f"{self._device_desc()}; {self._budget_desc()}" if self.cache is not None else ""
        for i, (task, completion) in enumerate(zip(task_list, completions)):
            verdict, job = self._prepare(task, completion, cfg, static)
            if verdict is not None:
                results[i] = verdict
                continue
            key = None
            if self.cache is not None:
                policy = "+".join([job["policy"], *job["extra_ops"]])
                key = VerdictCache.key(task.source, job["code"], policy, job["settings"], where)
                hit = self.cache.get(key)
                if hit is not None:
                    hit.notes = [*hit.notes, "verdict from cache"]
                    results[i] = hit
                    continue
            jobs.append((i, job, key))

        show = self.progress if progress is None else progress
        bar = None
        if show and len(completions) > 1:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(completions), desc=desc, unit="cand", leave=False)
            bar.update(sum(r is not None for r in results))
        keys = {i: key for i, _, key in jobs}
        try:
            for i, verdict in self._run(jobs):
                results[i] = verdict
                if self.cache is not None and keys.get(i):
                    self.cache.put(keys[i], verdict)
                if bar is not None:
                    bar.update(1)
        except BaseException:
            # interrupted (Ctrl-C, an error in a callback): workers still busy with this batch would
            # answer into the next one, so they go, with whatever they were running (all together:
            # one after another, 12 GPU workers took minutes); slots freed after, so a second Ctrl-C
            # mid-stop leaves the rest to close()
            busy = [w for w in self._slots if w is not None and w.job_index is not None]
            stop_workers(busy)
            for w in busy:
                self._slots[w.slot] = None
            raise
        finally:
            if bar is not None:
                bar.close()
        return [r if r is not None else Verdict(reason=R.INTERNAL_ERROR, error="no verdict") for r in results]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._references is not None:
            self._references.close()
        workers = [w for w in self._slots if w is not None]
        self._slots = [None] * self.size
        stop_workers(workers, graceful=lambda w: w.job_index is None)  # idle ones are asked first

    def __enter__(self) -> "VerifierPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # ---------------------------------------------------------------- preparing a job

    def _device_desc(self) -> str:
        """What the verdicts depend on (timings): the GPU's model, read without touching CUDA here."""
        if self.device != "cuda":
            return "cpu"
        names = set()
        for info in Path("/proc/driver/nvidia/gpus").glob("*/information"):
            try:
                for line in info.read_text().splitlines():
                    if line.startswith("Model:"):
                        names.add(line.split(":", 1)[1].strip())
            except OSError:
                pass
        return "cuda:" + ("|".join(sorted(names)) or "unknown")

    def _budget_desc(self) -> str:
        """What a job's budget reads besides its task and settings (limits.Budget.for_task: the host's
        memory, how many workers share a GPU or the host; the GPU's memory is in its model name): a
        large task's sets are resized or left out by it, so a verdict judged under another budget is
        not reused here."""
        total = host_memory_bytes()
        sharers = max(collections.Counter(self._gpu_ids).values()) if self._gpu_ids else self.size
        return (f"host {round(total / (1 << 30)) if total else '?'} GiB" + (f" split over {self.host_gpus} GPUs or "
                f"pools" if self.host_gpus > 1 else "") + f", {sharers} workers sharing")

    def _prepare(self, task: Task, completion: str, cfg: VerifyConfig,
                 static: bool) -> tuple[Verdict | None, M.Job | None]:
        start = time.monotonic()
        ex = extract_code(completion or "")
        if ex.code is None:
            return Verdict(task_id=task.id, stage="none", reason=R.check(ex.reason or R.NO_CODE), error=ex.detail,
                           duration_s=round(time.monotonic() - start, 4)), None
        policy = resolve_policy(cfg.policy, task.level)
        extra_ops = sorted(set(cfg.policy_extra_ops or ()))  # fusion's extra heavy ops, static and runtime alike
        notes, found = [], {}
        if static:
            report = static_check(ex.code, policy, reference_source=task.source, extra_heavy_ops=extra_ops)
            if not report.ok:
                return Verdict(task_id=task.id, stage="extract", reason=R.check(report.reason), error=report.detail,
                               cheat_flags=list(report.flags), duration_s=round(time.monotonic() - start, 4)), None
            found["precision"] = report.precision  # the launched kernels' dots (without it the judge reads the code)
        else:
            notes.append("static check skipped")
        settings = JobSettings.for_device(cfg, self.device).to_json()  # as it travels to the worker
        job = M.Job(task_id=task.id, task_source=task.source, level=task.level, code=ex.code, seeds=self._seeds,
                    policy=policy, extra_ops=extra_ops, settings=settings, device=self.device, threads=self._threads,
                    notes=notes, **found)
        return None, job

    # ---------------------------------------------------------------- running jobs

    def _run(self, jobs: collections.deque) -> Iterable[tuple[int, Verdict]]:
        pending = collections.deque(jobs)
        busy: dict[int, tuple[M.Job, str | None]] = {}
        sent_at: dict[int, float] = {}  # for TRITONRL_TRACE's timeline
        while pending or any(w is not None and w.job_index is not None for w in self._slots):
            # hand out work: start workers lazily, only as many as there are jobs; none on a GPU where a
            # job waits for shares of it, or where the shares held leave none (a slot a lost worker left
            # empty too: its new worker would run beside a job holding the whole GPU)
            self._grant_alone()
            for slot in range(self.size):
                if not pending:
                    break
                w = self._slots[slot]
                if (w is None or w.job_index is None) and self._reserved(slot):
                    continue
                if w is None:
                    w = self._slots[slot] = self._start_worker(slot)
                if w.job_index is None:
                    i, job, key = next_job(pending, w.tasks, [o.tasks for o in self._slots if o is not None and o is not w],
                                           lambda job, w=w: self._recorded(w, job), self._alone_tasks)
                    busy[i] = (job, key)
                    w.job_index, w.job_started, w.child_pid = i, time.monotonic(), None
                    w.longest_s, w.wants_alone, w.alone, w.shares = None, False, False, 1
                    sent_at[i] = w.job_started
                    if self._reference_key(job) in self._tiny_growth:
                        job["tiny_growth"] = self._tiny_growth[self._reference_key(job)]
                    try:
                        self._offer_reference(w, job)
                        # how many wait behind it: workers start spare children only for jobs to come
                        w.conn.send(M.JobMessage(type=M.JOB, id=i, job=job, queued=len(pending)))
                    except (OSError, ValueError):
                        pass  # noticed as a dead worker below
            live = [w for w in self._slots if w is not None and w.job_index is not None]
            for conn in wait([w.conn for w in live], timeout=0.5):
                w = next(x for x in live if x.conn is conn)
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    msg = None
                if msg is None and w.ready:
                    yield from self._lost(w, busy, "the verifier worker died")
                    continue
                kind = msg.get("type") if msg is not None else M.FAILED
                if kind == M.READY:
                    w.ready = True
                    w.base_dir = msg.get("base")
                    self._start_failures = 0
                    w.job_started = time.monotonic()  # the candidate's clock starts now
                elif kind == M.FAILED:  # never got going: the job goes back in the queue
                    self._start_failures += 1
                    err = (msg or {}).get("error") or f"the worker exited with code {w.proc.poll()} while starting"
                    yield from self._lost(w, busy, "the verifier worker failed to start", requeue=True,
                                          pending=pending)
                    if self._start_failures >= MAX_START_FAILURES:
                        raise VerifierError(f"verifier workers cannot start ({self._start_failures} tries):\n{err}")
                elif kind == M.STARTED:
                    w.child_pid = msg.get("child")
                elif kind == M.LIMITS:
                    if isinstance(msg.get("longest_s"), (int, float)):
                        w.longest_s = float(msg["longest_s"])
                        w.job_started = time.monotonic()
                elif kind == M.EXCLUSIVE:  # (again, for the GPU alone, after a run in fewer shares ran out of memory)
                    w.wants_alone, w.alone = True, False
                    capacity = self._capacity(w.slot)
                    asked = msg.get("shares")
                    w.shares = min(capacity, max(1, asked)) if isinstance(asked, int) and asked > 0 else capacity
                    if w.job_index in busy:  # its task's other jobs wait until nothing else is left (job_order.py)
                        self._alone_tasks.add(busy[w.job_index][0]["task_source"])
                elif kind == M.REFERENCE:
                    try:
                        self._keep_reference(w, msg)
                    except (OSError, ValueError):
                        yield from self._lost(w, busy, "the verifier worker's reference record broke off")
                elif kind == M.RESULT and msg.get("id") == w.job_index:
                    w.spare_pids = [p for p in msg.get("spares") or [] if isinstance(p, int)]
                    if isinstance(msg.get("ref_keys"), list):
                        w.ref_keys = {k for k in msg["ref_keys"] if isinstance(k, str)}
                    i = w.job_index
                    w.job_index = None
                    w.wants_alone = w.alone = False
                    w.shares = 1
                    job, _ = busy.pop(i)
                    verdict = Verdict.from_dict(msg["verdict"])
                    verdict.task_id = verdict.task_id or job["task_id"]
                    grown = verdict.phases.get("tiny_atol_growth")
                    if isinstance(grown, (int, float)) and grown >= 1.0:
                        self._tiny_growth[self._reference_key(job)] = float(grown)
                    verdict.notes = [*job.get("notes", []), *verdict.notes]
                    if os.environ.get("TRITONRL_TRACE"):
                        verdict.phases.update({"@sent": round(sent_at[i], 4), "@back": round(time.monotonic(), 4),
                                               "@worker": float(w.slot)})
                    yield i, verdict
            now = time.monotonic()
            for w in live:
                if w.job_index is None or w.job_index not in busy or self._slots[w.slot] is not w:
                    continue
                if w.wants_alone and not w.alone:
                    w.job_started = now  # waiting for its GPU is no time of its job's
                    continue
                longest = w.longest_s if w.longest_s is not None else \
                    float(busy[w.job_index][0]["settings"]["timeout_s"])
                limit = (longest + RESULT_GRACE_S) if w.ready else STARTUP_TIMEOUT_S
                if now - w.job_started > limit:
                    what = "answered nothing" if w.ready else "did not start"
                    yield from self._lost(w, busy, f"the verifier worker {what} within {limit:.0f} s",
                                          requeue=not w.ready, pending=pending)

    # ---------------------------------------------------------------- a GPU to itself

    def _reserved(self, slot: int) -> bool:
        """Whether nothing may be handed to an idle (or not yet started) worker in `slot`: a job of its GPU
        waits for shares of it, or the shares held there leave none for one more job."""
        others = self._busy_beside(slot)
        if any(o.wants_alone and not o.alone for o in others):
            return True
        return self._shares_held(others) + 1 > self._capacity(slot)

    def _grant_alone(self) -> None:
        """Give a waiting job its shares of its GPU once the jobs still running there leave them free (all
        of them: once every other job there has ended); waiting jobs go in slot order."""
        for w in self._slots:
            if w is None or w.job_index is None or not w.wants_alone or w.alone:
                continue
            others = self._busy_beside(w.slot)
            if any(o.wants_alone and not o.alone and o.slot < w.slot for o in others):
                continue  # the first waiter goes first
            if self._shares_held(others) + w.shares > self._capacity(w.slot):
                continue
            try:
                w.conn.send({"type": M.EXCLUSIVE_GO})
            except (OSError, ValueError):
                continue
            w.alone = True
            w.job_started = time.monotonic()

    def _busy_beside(self, slot: int) -> list[_Worker]:
        """The workers of other slots on `slot`'s GPU (or the host, on the CPU) with a job."""
        scope = self._slot_scope(slot)
        return [o for o in self._slots if o is not None and o.slot != slot and o.job_index is not None
                and self._slot_scope(o.slot) == scope]

    @staticmethod
    def _shares_held(workers: Sequence[_Worker]) -> int:
        """The shares these jobs hold: a granted one its `shares`, one waiting for them none (it runs
        nothing meanwhile), any other its worker's one."""
        return sum(o.shares if o.alone else 0 if o.wants_alone else 1 for o in workers)

    def _capacity(self, slot: int) -> int:
        """The shares of `slot`'s GPU: its workers (on the CPU, the pool's)."""
        return self._gpu_ids.count(self._gpu_ids[slot]) if self.device == "cuda" else self.size

    # ---------------------------------------------------------------- reference phases shared

    def _slot_scope(self, slot: int) -> str:
        """The GPU a slot's workers run on ("cpu" on the CPU): the scope of its shares, and of the reference
        records its workers may share (outputs are the device's)."""
        return self._gpu_ids[slot] if self.device == "cuda" else "cpu"

    @staticmethod
    def _reference_key(job: M.Job) -> str:
        if "reference_key" not in job:  # hashed once per job (the worker ignores it)
            job["reference_key"] = cache_key(job)
        return job["reference_key"]

    def _recorded(self, w: _Worker, job: M.Job) -> bool:
        if self._references is None or not job["settings"]["reference_cache_mb"]:
            return False
        key = self._reference_key(job)
        return key in w.ref_keys or self._references.has(self._slot_scope(w.slot), key)

    def _offer_reference(self, w: _Worker, job: M.Job) -> None:
        """Send the worker the pool's record of this job's reference phase if it lacks one."""
        if self._references is None or not job["settings"]["reference_cache_mb"]:
            return
        key = self._reference_key(job)
        rec = self._references.get(self._slot_scope(w.slot), key) if key not in w.ref_keys else None
        if rec is None:
            return
        desc, fds = rec
        send_record(w.conn, M.ReferenceMessage(type=M.REFERENCE, key=key, desc=desc,
                                               max_mb=int(job["settings"]["reference_cache_mb"])), fds)
        w.ref_keys.add(key)

    def _keep_reference(self, w: _Worker, msg: M.ReferenceMessage) -> None:
        """A worker's new record (its descriptors follow the message) into the pool's store."""
        fds = recv_fds(w.conn, int(msg.get("nfds") or 0))
        key, desc = msg.get("key"), msg.get("desc")
        if self._references is None or not isinstance(key, str) or not isinstance(desc, dict):
            for fd in fds:
                os.close(fd)
            return
        self._references.put(self._slot_scope(w.slot), key, desc, fds)
        w.ref_keys.add(key)

    def _lost(self, w: _Worker, busy: dict, why: str, requeue: bool = False,
              pending: collections.deque | None = None) -> Iterable[tuple[int, Verdict]]:
        """Replace a dead or stuck worker; its job gets a verdict (or goes back in the queue if it
        never started)."""
        code = w.proc.poll()
        stop_workers([w])
        self._slots[w.slot] = None
        self.restarts += 1
        i, w.job_index = w.job_index, None
        if i is None or i not in busy:
            return
        job, key = busy.pop(i)
        if requeue and pending is not None:
            pending.appendleft((i, job, key))
            return
        detail = f"{why}" + (f" (exit code {code})" if code is not None else "")
        yield i, Verdict(task_id=job["task_id"], stage="static", reason=R.WORKER_LOST,
                         error=detail + "; the worker was replaced and the pool went on")

    def _start_worker(self, slot: int) -> _Worker:
        parent_sock, child_sock = socket.socketpair()
        env = self.worker_env(slot)
        fd = child_sock.fileno()
        proc = subprocess.Popen(
            [self.python, "-m", "tritonrl_lib.verify.worker.main", "--fd", str(fd), "--device", self.device],
            pass_fds=(fd,), env=env, stdin=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        )
        child_sock.close()
        return _Worker(slot, proc, Connection(parent_sock.detach()))

    def worker_env(self, slot: int) -> dict[str, str]:
        """The environment of worker `slot` (its candidates' processes inherit it)."""
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        env["TRITONRL_POOL_WORKERS"] = str(self.size)  # the workers' reference caches share the memory
        env[HOST_POOLS_ENV] = str(self.host_pools)  # and with the host's other pools (memory_share_bytes)
        env[HOST_GPUS_ENV] = str(self.host_gpus)  # a job's budget: its GPU's share of the host (host_share_bytes)
        if self.device == "cpu":  # every host block a candidate gets is perturbed (runtime_checks)
            env = without_malloc_tcache(env)
        if self.device == "cuda":
            gpu = self._gpu_ids[slot]
            env["CUDA_VISIBLE_DEVICES"] = gpu
            env.pop("TRITON_INTERPRET", None)
            # workers on one GPU split its memory, and take turns to time (gpu_lock.py)
            env["TRITONRL_GPU_SHARERS"] = str(self._gpu_ids.count(gpu))
            env["TRITONRL_GPU_LOCK"] = lock_path(gpu)
            if self.config.cuda_connections > 0:
                # fewer hardware queues per candidate process: its CUDA context is created ~2.4x faster
                # (the driver creates contexts one at a time, and every candidate needs one)
                env["CUDA_DEVICE_MAX_CONNECTIONS"] = str(self.config.cuda_connections)
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""
            env["TRITON_INTERPRET"] = "1"
        return env
