"""The verifier's wire contract in one place: the job, pool <-> worker messages, child -> worker frames.

Pool <-> worker (trusted at both ends): dicts pickled over a multiprocessing Connection, each naming
its kind under "type". A reference record's descriptors follow its message on the same socket
(reference_cache.send_record adds "nfds").

Child -> worker: the JSON headers of frames (protocol.py), kind under "type" too. The child is
untrusted: the TypedDicts below say what the verifier's own code in it sends, never what a header
holds; the judge checks each field where it reads one.

Kinds are module constants, not class attributes: once the candidate runs, the guard sees a write into
any of the verifier's module dicts (guard.Guard.tampered), not one into a class's.
"""

from __future__ import annotations

from typing import Any, TypedDict


class _JobFields(TypedDict):
    task_id: str
    task_source: str  # the task module's text (the child drops it before the candidate's import)
    level: int
    code: str  # the candidate's module, extracted and statically checked by the pool
    seeds: dict[str, int]  # the pool's secret input seeds ("inputs", "other", "range", "timed"), never published
    policy: str  # policy.resolve_policy's name
    extra_ops: list[str]  # fusion's extra heavy ops
    settings: dict[str, Any]  # JobSettings.to_json()
    device: str  # "cuda" or "cpu"
    threads: int  # torch threads of a child on the CPU
    notes: list[str]  # the pool's own notes, put before the verdict's (the worker ignores them)


class Job(_JobFields, total=False):
    """One candidate's job: made by the pool (VerifierPool._prepare), completed on the way down."""

    reference_key: str  # reference_cache.cache_key, hashed once by the pool (the worker ignores it)
    precision: str  # the launched kernels' dots (precision.launched_precision), from the pool's static check
    budget: dict[str, Any]  # limits.Budget.to_json(): added by the worker for its child
    reference_cache: dict[str, Any]  # the worker's cached reference phase for the child (Entry.child_view)
    collect_reference: bool  # the child also sends its inputs, for the worker's cache
    tiny_growth: float  # the task's tiny-set atol growth, learnt by the pool from an earlier full run (prescreens)


# ---------------------------------------------------------------- pool -> worker

JOB = "job"  # a job to run now
STOP = "stop"  # leave: the pool is closing
EXCLUSIVE_GO = "exclusive_go"  # the answer to EXCLUSIVE: the jobs still running on this GPU leave the shares free
REFERENCE = "reference"  # both ways: a record of the reference cache, its descriptors following


class JobMessage(TypedDict):
    type: str  # JOB
    id: int  # the job's index in the pool's batch; its RESULT says it again
    job: Job
    queued: int  # jobs the pool still holds after this one (how many spares are worth starting)


class ReferenceMessage(TypedDict, total=False):
    type: str  # REFERENCE
    key: str  # reference_cache.cache_key
    desc: dict[str, Any]  # reference_cache.export's description
    max_mb: int  # pool -> worker only: the job's reference_cache_mb
    nfds: int  # how many descriptors follow (send_record)


# ---------------------------------------------------------------- worker -> pool

READY = "ready"  # once, at start: torch and triton imported, CUDA untouched
FAILED = "failed"  # once, instead of READY: the worker cannot start (the pool puts its job back)
LIMITS = "limits"  # the job's limits are known: how long the pool waits for its result
EXCLUSIVE = "exclusive"  # the task needs more than one share of its GPU ("shares": how many; none: all of it)
STARTED = "started"  # the job's child process exists (killed with the worker if it dies)
RESULT = "result"  # the job's verdict


class Ready(TypedDict):
    type: str  # READY
    pid: int
    base: str  # the worker's temp dir: the pool removes it if the worker dies


class Failed(TypedDict):
    type: str  # FAILED
    error: str  # the traceback


class LimitsMessage(TypedDict):
    type: str  # LIMITS
    longest_s: float  # limits.Limits.longest_s


class Started(TypedDict):
    type: str  # STARTED
    child: int  # the child's pid


class Result(TypedDict):
    type: str  # RESULT
    id: int  # JobMessage.id
    verdict: dict[str, Any]  # Verdict.to_dict()
    spares: list[int]  # the pids of the worker's spare children now
    ref_keys: list[str]  # the keys its reference cache holds now


# ---------------------------------------------------------------- child -> worker (frames)

# any time
INTERNAL_ERROR = "internal_error"  # error: the harness around the child failed (forking.report_internal_error)
NOTE = "note"  # text: a note for the verdict
MARK = "mark"  # label, t, lock_wait (or holds): a trace point, only with TRITONRL_TRACE
BUILD = "build"  # name, src, library_dirs, include_dirs, libraries: a request; the worker builds Triton's C module
TAMPERED = "tampered"  # namespaces: the channel's own report, ahead of the next frame, of a namespace written
# set-up and reference phase (before the candidate's import)
SETUP_DONE = "setup_done"  # nothing: set up (on a GPU, its CUDA context made); the reference phase's clock starts
REF = "ref"  # RefFrame + output blobs: one input set's reference outputs
REF_ERROR = "ref_error"  # error: the task's reference failed
REF_RANDOM = "ref_random"  # error: the reference gives other outputs on every run for the same inputs
REF_RESET = "ref_reset"  # nothing: the worker's cached reference does not fit the models; the child runs its own
REF_UNCACHEABLE = "ref_uncacheable"  # why: an input a sealed file cannot hold; the phase is not cached
REF_MODELS = "ref_models"  # tiny_overrides, digests, eval_mode: the models, for the worker's cache
REF_INPUTS = "ref_inputs"  # name, model_key, inputs, out_specs + input blobs: one input set, for the cache
REF_FOOTPRINT = "ref_footprint"  # peak_bytes: the reference's peak GPU memory over its input sets
REF_DONE = "ref_done"  # nothing: references sent and scrubbed; the candidate's clock starts, no REF after
# candidate phase
STAGE = "stage"  # stage ("compile"): the candidate's module imported and ModelNew built
CAND = "cand"  # CandFrame + output blobs: the candidate's outputs and measured facts on one input set
CAND_SKIP = "cand_skip"  # name, error, GuardFacts: forward raised on a half-precision set (allowed)
GATE = "gate"  # stage ("tiny"/"full"): may it go on? the worker answers protocol.GO or anything else
ERROR = "error"  # ErrorFrame: the candidate failed (or the harness: reason internal_error)
TIMED = "timed"  # trial, set ("timed:<k>"/"original"), outputs + blobs: a timed call's outputs, held to that set's reference
TIMING = "timing"  # TimingFrame: the timings of reference and candidate, after TIMED
DONE = "done"  # nothing: all said; the worker ends the process at once


class GuardFacts(TypedDict, total=False):
    """What the guard saw, sent with the candidate phase's frames (candidate_phase.guard_facts); empty before it."""

    guard_flags: list[str]  # refusals, each a cheat flag
    guard_details: list[str]
    patched: list[str]  # recorded callables replaced
    global_state: list[str]  # PyTorch's process-wide state changed


class RefFrame(TypedDict, total=False):
    type: str  # REF
    name: str  # the input set: "original", "tiny", "dtype:float16", ...
    stage: str  # "tiny", "full" or "timed" (a timed call's checked inputs: timed_inputs.py)
    outputs: list[dict[str, Any]]  # encoding.encode_outputs' descriptions, one blob each
    inputs: str  # the inputs described, for people
    magnitudes: list[float]  # mean |output| per output (standard.py grows atol with it)
    heavy_ops: Any  # heavy_ops.reference_counts on this set
    heavy_dtypes: dict[str, list[str]]  # heavy_ops.operand_dtypes: the reference's heavy calls' operand dtypes
    alt_outputs: list[dict[str, Any]]  # the float32-accumulated reference of a half set, its blobs after
    tf32_error: list[Any]  # per output, [largest, norm] of TF32's own error on this set (tf32.py), or None


class CandFrame(GuardFacts, total=False):
    type: str  # CAND
    name: str
    outputs: list[dict[str, Any]]
    launches: int  # Triton launches during forward
    kernels: dict[str, int]
    foreign: dict[str, int]  # launches of kernels the solution's module does not define
    ops: dict[str, int]  # the aten-op census
    host_read: int  # tensor values read into Python
    host_made: int  # tensor values built from Python data
    census_intact: bool
    foreign_memory: list[int]  # outputs over memory torch did not allocate
    inputs_unchanged: bool
    heavy: dict[str, int]  # heavy calls by operand dtypes (heavy_ops.operand_key: "gemm:float32")
    unordered: list[str]  # GPU work not ordered with the caller's stream (gpu_work.py), described


class ErrorFrame(GuardFacts, total=False):
    type: str  # ERROR
    stage: str  # "compile", "tiny", "full" or "timing"
    variation: str  # the input set, where one was running
    reason: str  # one of reasons.CHILD_REASONS (the judge makes anything else runtime_error)
    error: str


class TimingFrame(GuardFacts, total=False):
    type: str  # TIMING
    ref_ms: list[float]
    ref_tf32_ms: list[float]  # the reference with TF32 allowed (a solution computing in TF32: precision.py)
    cand_ms: list[float]
    unordered: list[str]  # timed calls' GPU work not ordered with the timer's stream
    device_name: str
    tampered: list[str]  # what changed while timing
    gpu_wait_s: float  # how long it waited for the GPU to itself
