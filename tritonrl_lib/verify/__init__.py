"""The verifier: extract -> static -> compile -> tiny -> full -> timing, in sandboxed workers."""

from .verdict import STAGES, Verdict, passed, stage_index

__all__ = ["STAGES", "Verdict", "passed", "stage_index", "verify", "VerifierPool", "VerifierError",
           "compute_reward", "RewardLadder", "VerdictCache", "VERIFIER_VERSION"]


def __getattr__(name: str):
    # imported lazily: `import tritonrl_lib.verify` stays cheap (no torch) for code that only
    # needs the Verdict contract
    if name == "verify":
        from .api import verify  # lazily, as every name below: no torch until one is asked for

        return verify
    if name in ("VerifierPool", "VerifierError"):
        from . import pool  # lazily: imports torch

        return getattr(pool, name)
    if name in ("compute_reward", "RewardLadder"):
        from . import reward  # lazily

        return getattr(reward, name)
    if name in ("VerdictCache", "VERIFIER_VERSION"):
        from . import cache  # lazily

        return getattr(cache, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
