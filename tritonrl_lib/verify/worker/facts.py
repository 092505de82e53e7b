"""The facts a candidate's process measured during a call, judged against the policy: each finding a
cheat flag with what it means, in the order the verdict names them (the judge, judge.py, raises them).

Launches (none, or of kernels the solution does not define), PyTorch ops the policy leaves to Triton,
more heavy calls than the reference makes or heavy calls on other operand dtypes (heavy_ops.py), GPU work
not ordered with the caller's stream (gpu_work.py), inputs changed in place, the guard's refusals,
callables replaced and global state changed, host compute, the op census switched off.
"""

from __future__ import annotations

from typing import Any

from .. import reasons as R
from ..candidate.heavy_ops import FAMILIES, dtype_excess
from ..candidate.heavy_ops import excess as excess_heavy_ops
from ..policy import runtime_op_allowed

MAX_FLAGS_LISTED = 8
HOST_ELEMENTS = 64  # tensor values forward may read into Python, or build from Python data, per call


def call_findings(header: dict[str, Any], name: str, ref: dict[str, Any], policy: str,
                  extra_ops: tuple[str, ...]) -> list[tuple[str, str]]:
    """(flag, what it means) for each finding of one call's facts on input set `name` (`ref`: that set's
    reference record); the header's types are checked by the caller."""
    out: list[tuple[str, str]] = []
    launches = header.get("launches") or 0
    foreign = header.get("foreign") or {}
    ops = header.get("ops") or {}
    for kernel in list(foreign)[:MAX_FLAGS_LISTED]:
        out.append((f"{R.FOREIGN_KERNEL}:{str(kernel)[:80]}", f"forward launched Triton kernel {kernel}, which "
                    "is not defined in the solution's module"))
    if launches <= 0 and not foreign:
        out.append((R.NO_TRITON_LAUNCH, f"forward launched no Triton kernel on the {name} inputs"))
    forbidden = sorted(str(op) for op in ops if not runtime_op_allowed(policy, str(op), extra_ops))
    if policy == "fusion":
        for fam, n, allowed, names in excess_heavy_ops(ops, ref.get("heavy_ops")):
            out.append((f"{R.PYTORCH_COMPUTE}:more_{fam}_calls", f"forward made {n} {FAMILIES[fam]} calls "
                        f"({', '.join(names)[:200]}) on the {name} inputs where the reference makes {allowed}: "
                        "the fusion policy keeps the reference's own in PyTorch, not epilogue work written as more"))
    heavy = header.get("heavy") if isinstance(header.get("heavy"), dict) else {}
    for fam, dtypes, allowed in dtype_excess(heavy, ref.get("heavy_dtypes")):
        out.append((f"{R.HEAVY_OP_DTYPE}:{fam}_{'_'.join(dtypes)}", f"forward ran a {FAMILIES.get(fam, fam)} on "
                    f"{', '.join(dtypes)} operands on the {name} inputs, where the reference's take "
                    f"{', '.join(allowed)}: a heavy op kept in PyTorch runs in the reference's precision (another "
                    "dtype is another op: half operands widened back are tensor cores, not Triton)"))
    unordered = header.get("unordered")
    if isinstance(unordered, list) and unordered:
        out.append((R.UNORDERED_STREAM, f"forward's GPU work on the {name} inputs is not ordered with the "
                    f"caller's stream: {'; '.join(str(u)[:200] for u in unordered[:3])}"))
    for op in forbidden[:MAX_FLAGS_LISTED]:
        out.append((f"{R.PYTORCH_COMPUTE}:{op[:80]}", f"forward ran PyTorch op {op} ({ops[op]}x), which the "
                    f"{policy!r} policy leaves to Triton; ops seen: {', '.join(sorted(map(str, ops)))[:600]}"))
    if header.get("inputs_unchanged") is not True:
        out.append((R.INPUT_MUTATED, f"forward changed its inputs in place on the {name} inputs"))
    out.extend(guard_findings(header, name))
    host_read, host_made = header.get("host_read"), header.get("host_made")
    if isinstance(host_read, int) and host_read > HOST_ELEMENTS:
        out.append((R.HOST_COMPUTE, f"forward read {host_read} tensor values into Python on the {name} inputs "
                    f"(item, tolist, numpy or a copy to the host: more than {HOST_ELEMENTS}): compute on the host"))
    if isinstance(host_made, int) and host_made > HOST_ELEMENTS:
        out.append((R.HOST_COMPUTE, f"forward built {host_made} tensor values from Python lists or numpy arrays "
                    f"on the {name} inputs (more than {HOST_ELEMENTS}): compute on the host"))
    if header.get("census_intact") is False:
        out.append((R.CENSUS_BYPASSED, f"forward ran with the op census switched off or paused on the {name} "
                    "inputs: its PyTorch work was hidden from the policy"))
    return out


def guard_findings(header: dict[str, Any], where: str) -> list[tuple[str, str]]:
    """The guard's refusals, callables replaced and global state changed (candidate_phase.guard_facts)."""
    out: list[tuple[str, str]] = []
    flags = header.get("guard_flags") or []
    details = [str(d)[:200] for d in (header.get("guard_details") or [])[:5]]
    for flag in flags[:MAX_FLAGS_LISTED] if isinstance(flags, list) else []:
        flag = str(flag)
        if flag.split(":", 1)[0] in R.GUARD_FLAGS:
            out.append((flag, f"the candidate's process tried what only an attack needs ({flag}): " + "; ".join(details)))
    for key, flag in (("patched", R.MONKEYPATCH), ("global_state", R.GLOBAL_STATE), ("tampered", R.MONKEYPATCH)):
        changed = header.get(key) or []
        if isinstance(changed, list) and changed:
            what = str(changed[0])[:80]
            if key == "tampered" and not what.startswith("torch.") and " " in what:
                flag = R.GLOBAL_STATE
            out.append((f"{flag}:{what}", f"{', '.join(map(str, changed[:8]))[:600]} changed by the candidate "
                        f"(seen at {where}): the verifier's timing and checks rely on them"))
    return out
