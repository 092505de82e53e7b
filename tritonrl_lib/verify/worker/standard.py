"""The standard a candidate's output is held to: the trusted reference's outputs of one input set,
the dtype's tolerances, an absolute tolerance grown with the set's output magnitude (or, on the range
set, taken from the output's own scale), the float32-accumulated reference as a second valid
answer for half-precision outputs, and for a solution computing in TF32 (precision.py) TF32's own
error on that set's output. The output's dtype is the reference's on every set (compare.py). The judge
asks it about the full stage, the timed calls and the cached-answer check alike, so one output is never
held to two standards.
"""

from __future__ import annotations

from typing import Any

from .. import reasons as R
from ..precision import tf32_tolerance
from ..settings import JobSettings
from .compare import EXACT, HALF, compare, mean_abs, same_bytes

MAX_ATOL_GROWTH = 1000.0


class OutputStandard:
    """The references received so far (`refs`: input set -> stage, metas, blobs, magnitudes, alt)
    and the job's tolerances. Cheap to make: the judge makes one per question, since its `refs`
    is replaced when a cached reference phase is preloaded or reset."""

    def __init__(self, refs: dict[str, dict[str, Any]], settings: JobSettings, tf32: bool = False,
                 tiny_bound: float | None = None):
        self.refs = refs
        self.settings = settings
        self.tf32 = tf32  # the solution computes in TF32: TF32's error on each set is allowed (precision.py)
        # a prescreen's (the tiny set before the original's outputs exist): the most the full run could grow
        # the tiny set's atol by, so a mismatch beyond it is one the full run would find too (`beyond_growth`)
        self.tiny_bound = tiny_bound

    def tolerance(self, dtype: str) -> tuple[float, float]:
        if dtype in HALF:
            return float(self.settings.half_atol), float(self.settings.half_rtol)
        return float(self.settings.atol), float(self.settings.rtol)

    def references_differ(self, a: str, b: str) -> bool:
        """Whether the reference outputs of input sets `a` and `b` differ beyond the tolerance: only
        then is one output for both a cached answer (a loss that ignores an offset, or a bfloat16 scalar
        that rounds to the same value, gives outputs that differ in their last bits only)."""
        ra, rb = self.refs[a], self.refs[b]
        if same_bytes(ra["blobs"], rb["blobs"]):
            return False
        if len(ra["metas"]) != len(rb["metas"]):
            return True
        # all tensors: the judge takes no other reference outputs
        for ma, ba, mb, bb in zip(ra["metas"], ra["blobs"], rb["metas"], rb["blobs"]):
            atol, rtol = self.tolerance(ma["dtype"])
            if not compare(ma, ba, mb, bb, atol, rtol)["ok"]:
                return True
        return False

    def outputs_held(self, name: str, metas: list[Any], blobs: list[Any],
                     entry: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Each output (its description, and its data for a tensor) against input set `name`'s
        reference (`held_to_reference`); as many outputs as the reference has, checked by the caller."""
        blob_iter = iter(blobs)
        results = []
        for i, cm in enumerate(metas):
            cb = next(blob_iter, b"") if isinstance(cm, dict) and cm.get("kind") == "tensor" else b""
            r = self.held_to_reference(name, i, cm if isinstance(cm, dict) else {}, cb, entry)
            r["output"] = i
            results.append(r)
        return results

    def right_on(self, name: str, metas: list[Any], blobs: list[Any]) -> bool:
        """Whether the outputs pass input set `name`'s reference by the set's own standard."""
        return len(metas) == len(self.refs[name]["metas"]) and \
            all(r["ok"] for r in self.outputs_held(name, metas, blobs))

    def held_to_reference(self, name: str, i: int, cm: dict[str, Any], cb: Any,
                          entry: dict[str, Any] | None = None) -> dict[str, Any]:
        """Output `i` of the candidate on input set `name` against the trusted reference's, by the set's
        own standard: the dtype's tolerances, atol grown with the set's output magnitude, the range set's
        atol from the output's scale, and the float32-accumulated reference as a second valid answer
        for half outputs. The full stage and the timed calls' checks both judge through here, so an
        output is never held to one standard before timing and another once timed."""
        r = self._held(name, i, cm, cb, self.magnitude_growth(name, i), entry)
        if not r["ok"] and r.get("reason") == R.MISMATCH and self.tiny_bound is not None and name == "tiny" \
                and "original" not in self.refs:
            # would the full run, with the original's outputs known, find this mismatch too? Only its atol may
            # differ there (grown by tiny_growth); if the output fails even at the largest it could be, yes
            r["beyond_growth"] = not self._held(name, i, cm, cb, max(1.0, self.tiny_bound), None)["ok"]
        return r

    def _held(self, name: str, i: int, cm: dict[str, Any], cb: Any, grow: float,
              entry: dict[str, Any] | None) -> dict[str, Any]:
        ref = self.refs[name]
        rm, rb = ref["metas"][i], ref["blobs"][i]
        atol, rtol = self.tolerance(rm["dtype"])
        if grow > 1.0:
            atol *= grow
            if entry is not None:
                entry["atol_scaled"] = round(grow, 3)
        if name == "range" and rm["dtype"] not in EXACT:
            # signs the task never draws make outputs cancel (a matmul of signed inputs has entries
            # near 0 that a TF32 or reordered sum cannot hit to rtol): here atol follows the
            # output's own scale, rtol x its mean magnitude; the norm rule still fails zeros,
            # constants and scaled copies
            scale_atol = rtol * self.magnitude(name, i)
            if scale_atol > atol:
                atol = scale_atol
                if entry is not None:
                    entry["atol_from_scale"] = round(atol, 6)
        slack = 0.0
        if self.tf32 and ref.get("tf32") is not None and i < len(ref["tf32"]):
            tf32_atol, slack = tf32_tolerance(atol, ref["tf32"][i])
            if tf32_atol > atol or slack:
                atol = tf32_atol
                if entry is not None:
                    entry["tf32_atol"] = round(atol, 6)
        r = compare(rm, rb, cm, cb, atol, rtol, norm_slack=slack)
        if not r["ok"] and r.get("reason") == R.MISMATCH and ref.get("alt"):
            r2 = compare(rm, ref["alt"][i], cm, cb, atol, rtol, norm_slack=slack)
            if r2["ok"]:
                r = {**r2, "matched": "float32-accumulated reference"}
        return r

    def tiny_growth(self) -> float | None:
        """How much the tiny set's atol grows on this task (the largest over its outputs): what a later
        prescreen of the task may hold the tiny set to (`tiny_bound`); None before the original's outputs."""
        if "tiny" not in self.refs or "original" not in self.refs:
            return None
        return max((self.magnitude_growth("tiny", i) for i in range(len(self.refs["tiny"]["metas"]))), default=1.0)

    def magnitude_growth(self, name: str, i: int) -> float:
        """How much larger output `i` is on input set `name` than on the original inputs (mean absolute
        value of the trusted references, at least 1). The absolute tolerance grows with it: atol is
        meant for outputs of the original's size, and an input set whose outputs are 4x larger (a
        matmul on inputs scaled x2) would otherwise be held to a 4x stricter standard; a float32 matmul
        that uses TF32, as Triton's tl.dot does by default, passes the original and failed there."""
        if name == "original" or name.startswith("dtype:") or "original" not in self.refs:
            return 1.0
        base, this = self.refs["original"], self.refs[name]
        if i >= len(base["metas"]) or i >= len(this["metas"]) or \
                not base["metas"][i].get("dtype") == this["metas"][i].get("dtype") not in EXACT:
            return 1.0
        m0, m1 = self.magnitude("original", i), self.magnitude(name, i)
        return min(m1 / m0, MAX_ATOL_GROWTH) if m0 > 0 and m1 > m0 else 1.0

    def magnitude(self, name: str, i: int) -> float:
        ref = self.refs[name]
        sent = ref.get("magnitudes")
        if sent is not None:
            return sent[i]
        return mean_abs(ref["metas"][i], ref["blobs"][i])
