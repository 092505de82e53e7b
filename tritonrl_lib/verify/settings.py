"""The settings one verification job runs with, built once on the trusted side and read everywhere else.

The pool builds a `JobSettings` from the run's `VerifyConfig` for the device its workers run on
(`for_device`: the compile check and timing resolved for that device), sends it with the job as
JSON (`to_json`), and the worker, the judge and the candidate's process rebuild it (`from_json`),
which refuses a dict that is not exactly these settings. The defaults live in one place,
`VerifyConfig`; nothing here or downstream has a default of its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from ..core.config import VerifyConfig

COMPILE_CHECK_MODES = ("auto", "frontend", "full", "off")  # verify.compile_check (compilation/check.py)


@dataclass(frozen=True)
class JobSettings:
    atol: float  # float32 (and every other non-half) outputs
    rtol: float
    half_atol: float  # float16 / bfloat16 outputs
    half_rtol: float
    num_variations: int  # input sets on top of tiny: original, scaled, seed, larger, dtype (variations.py)
    timeout_s: float
    memory_limit_mb: int  # resident memory of the candidate's processes together; 0 = none
    timing_enabled: bool  # resolved: timing runs (on a GPU, unless verify.timing=off)
    timing_note: str  # what a correct verdict without timing says about why ("" where timing runs)
    timing_warmup: int
    timing_trials: int
    timing_trim: float
    partial_credit: float
    speedup_review: float
    compile_check: str  # resolved for the device: off | frontend | full
    reference_cache_mb: int
    prestart_child: str  # auto | on | off
    spare_children: int
    prescreen: str  # auto | on | off (worker/job.py)

    @classmethod
    def for_device(cls, cfg: VerifyConfig, device: str) -> JobSettings:
        """The settings of `cfg` resolved for `device` ("cpu" or "cuda")."""
        timing = cfg.timing == "on" or (cfg.timing == "auto" and device == "cuda")
        note = ""
        if device != "cuda" and cfg.timing != "off":
            note = "timing skipped: no GPU"
        elif cfg.timing == "off":
            note = "timing skipped: verify.timing=off"
        own = {"timing_enabled": timing and device == "cuda", "timing_note": note,
               # CPU: compile every launch for CUDA too (compilation/check.py); a GPU compiles them for real
               "compile_check": resolve_compile_check(cfg.compile_check, device)}
        return cls(**{f.name: own[f.name] if f.name in own else getattr(cfg, f.name)
                      for f in dataclasses.fields(cls)})

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobSettings:
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in data]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise ValueError(f"not a job's settings (missing {missing}, unknown {unknown}): build them with "
                             "JobSettings.for_device(VerifyConfig, device).to_json()")
        return cls(**{n: data[n] for n in names})


def resolve_compile_check(value: str, device: str) -> str:
    """The compile check to run for `device`: "off", "frontend" or "full"."""
    mode = value.strip().lower()
    if mode not in COMPILE_CHECK_MODES:
        raise ValueError(f"verify.compile_check must be one of {', '.join(COMPILE_CHECK_MODES)}, got {value!r}")
    if device == "cuda":
        return "off"  # a GPU compiles every launch for real
    return "frontend" if mode == "auto" else mode
