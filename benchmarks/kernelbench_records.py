"""What a KernelBench sweep writes and how it is summarised: one JSON line per verdict in
<out>/<part>.jsonl (appended as chunks finish, so a sweep resumes), each chunk's wall time in
<out>/runs.jsonl, and the markdown tables of <out>/summary.md built from all of them."""

from __future__ import annotations

import collections
import json
import os
import re
import time
from pathlib import Path
from typing import Any

from kernelbench_common import CATEGORIES, dropped_sets, error_cause, only_gemm_flags, verifier_side

PARTS = ("refcopy", "small_output", "honest")


# --------------------------------------------------------------------------- records


class Store:
    """One part's verdicts: DIR/<part>.jsonl, one JSON object a line, appended as they come."""

    def __init__(self, folder: Path, part: str):
        self.path = folder / f"{part}.jsonl"
        self.records: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut off by a killed run: its candidate runs again
                self.records[rec["key"]] = rec

    def done(self, key: str) -> bool:
        return key in self.records

    def add(self, rec: dict[str, Any]) -> None:
        self.records[rec["key"]] = rec
        with self.path.open("a") as f:
            f.write(json.dumps(rec) + "\n")


def verdict_record(part: str, key: str, mode: str, task: Any, variant: str, v: Any) -> dict[str, Any]:
    return {"key": key, "part": part, "mode": mode, "task": task.id, "level": task.level, "problem": task.name,
            "variant": variant, "correct": v.correct, "stage": v.stage, "reason": v.reason,
            "cheat_flags": v.cheat_flags, "verifier_side": verifier_side(v.reason),
            "dropped_sets": dropped_sets(v.notes), "sets_passed": [e["name"] for e in v.errors if e.get("ok")],
            "duration_s": v.duration_s,
            "phases": {k: x for k, x in v.phases.items() if not k.startswith(("@", "%", "|", "$"))},  # not the trace
            "speedup": v.speedup, "ref_ms": v.ref_time_ms, "cand_ms": v.kernel_time_ms, "review": v.review,
            "notes": v.notes[:12], "cause": error_cause(v.error or ""), "error": (v.error or "")[-1500:],
            "t": round(time.time(), 1), **_trace(v.phases)}


def _trace(phases: dict[str, Any]) -> dict[str, Any]:
    """With TRITONRL_TRACE set: the verifier's trace marks, as seconds since the job started (where
    a verdict's time went, set by set)."""
    if not os.environ.get("TRITONRL_TRACE"):
        return {}
    t0 = phases.get("@job")
    marks = {k[1:]: round(x - t0, 3) for k, x in phases.items()
             if k.startswith("@") and k != "@job" and isinstance(x, (int, float)) and t0 is not None}
    cpu = {k[1:]: x for k, x in phases.items() if k.startswith("$") and isinstance(x, (int, float))}
    return {**({"trace": marks} if marks else {}), **({"trace_cpu": cpu} if cpu else {})}


def log_chunk(folder: Path, part: str, mode: str, n: int, wall_s: float, device: str) -> None:
    """One pool.map call's wall time (`part` is "<part>:<variant>"), for the throughput column."""
    with (folder / "runs.jsonl").open("a") as f:
        f.write(json.dumps({"part": part, "mode": mode, "n": n, "wall_s": round(wall_s, 3), "device": device,
                            "t": round(time.time(), 1)}) + "\n")


# --------------------------------------------------------------------------- expectations


def expectation(part: str, variant: str, rec: dict[str, Any]) -> str:
    """'expected', 'false_pass', 'verifier_error', 'needs_gemm_policy' or 'unexpected'."""
    if rec["verifier_side"]:
        return "verifier_error"
    if part == "honest":
        if rec["correct"]:
            return "expected"
        return "needs_gemm_policy" if only_gemm_flags(rec["cheat_flags"]) else "unexpected"
    if rec["correct"]:
        return "false_pass"
    if part == "refcopy" and variant == "static":
        return "expected" if rec["reason"].startswith("static:") else "unexpected"
    return "expected"  # a judgement of the candidate: a cheat flag or a wrong output


# --------------------------------------------------------------------------- the summary


def summary(folder: Path, mode: str, device_name: str, wall_s: float, left: int) -> str:
    """Markdown tables from every record in `folder` for this size mode."""
    lines = [f"# KernelBench sweep ({mode} sizes, {device_name})", "",
             f"This run: {wall_s:.0f} s wall" + (f", {left} candidates left (run again to resume)" if left else "")
             + ". Totals below are over every run recorded in this folder.", ""]
    runs = [json.loads(x) for x in (folder / "runs.jsonl").read_text().splitlines() if x.strip()] \
        if (folder / "runs.jsonl").exists() else []
    runs = [r for r in runs if r.get("mode") == mode]
    lines += ["| part | candidates | as expected | false passes | verifier errors | needs GEMM policy | unexpected | "
              "input sets dropped | verify wall s | candidates/min |", "|" + "---|" * 10]
    all_recs: dict[str, list[dict[str, Any]]] = {}
    for part in PARTS:
        store = Store(folder, part)
        recs = [r for r in store.records.values() if r.get("mode") == mode]
        all_recs[part] = recs
        for variant in sorted({r["variant"] for r in recs}):
            rs = [r for r in recs if r["variant"] == variant]
            label = f"{part}" + (f" ({variant})" if part == "refcopy" else "")
            timed = [r for r in runs if r["part"] == f"{part}:{variant}"]
            wall = sum(r["wall_s"] for r in timed)
            n_timed = sum(r["n"] for r in timed)
            outcome = collections.Counter(r["outcome"] for r in rs)
            dropped = sum(len(r["dropped_sets"]) for r in rs)
            rate = f"{60 * n_timed / wall:.1f}" if wall > 0 else "-"
            lines.append(f"| {label} | {len(rs)} | {outcome['expected']} | {outcome['false_pass']} | "
                         f"{outcome['verifier_error']} | {outcome['needs_gemm_policy']} | {outcome['unexpected']} | "
                         f"{dropped} | {wall:.0f} | {rate} |")
    errors = [r for recs in all_recs.values() for r in recs if r["outcome"] == "verifier_error"]
    lines += ["", f"**Verifier errors: {len(errors)}** (must be 0)", ""]
    if errors:
        causes = collections.Counter((r["reason"], r["cause"].split(":")[0]) for r in errors)
        lines += ["| reason | exception | count |", "|---|---|---|"]
        lines += [f"| {reason} | {exc or '-'} | {n} |" for (reason, exc), n in causes.most_common()]
        lines += ["", "| part | variant | problem | reason | cause | phase s |", "|---|---|---|---|---|---|"]
        for r in errors:
            cause = r["cause"].replace("|", "/")[:160]
            phases = ", ".join(f"{k} {v:g}" for k, v in r.get("phases", {}).items() if isinstance(v, (int, float)))
            lines.append(f"| {r['part']} | {r['variant']} | {r['task']} | {r['reason']} | {cause} | {phases} |")
    for part, title in (("refcopy", "Reference copies"), ("small_output", "Small outputs (1e-7 x input)"),
                        ("honest", "Honest solutions")):
        recs = all_recs[part]
        if not recs:
            continue
        lines += ["", f"## {title}: verdicts by reason", "", "| variant | reason | count |", "|---|---|---|"]
        counts = collections.Counter((r["variant"], _reason_family(r["reason"])) for r in recs)
        for (variant, reason), n in sorted(counts.items()):
            lines.append(f"| {variant} | {reason} | {n} |")
        odd = [r for r in recs if r["outcome"] in ("false_pass", "unexpected")]
        if odd:
            lines += ["", f"{len(odd)} not as expected:", ""]
            for r in odd:
                lines.append(f"- {r['task']} ({r['variant']}): {r['outcome']}, {r['reason']}")
    dropped = [(r["task"], d) for recs in all_recs.values() for r in recs for d in r["dropped_sets"]]
    if dropped:
        lines += ["", "## Input sets dropped because the reference failed on them", ""]
        lines += [f"- {t}: {d}" for t, d in sorted(set(dropped))]
    honest = sorted(all_recs["honest"], key=lambda r: (r["level"], _num(r["problem"])))
    if honest:
        lines += ["", "## Honest solutions", "",
                  "| level | problem | category | verdict | verifier ref ms | verifier cand ms | verifier speedup | "
                  "do_bench ref ms | do_bench new ms | do_bench speedup | pair agrees |", "|" + "---|" * 11]
        for r in honest:
            b = r.get("do_bench") or {}
            verdict = "correct" if r["correct"] else r["reason"] if r["outcome"] != "needs_gemm_policy" \
                else "needs GEMM policy"
            lines.append(f"| {r['level']} | {r['problem']} | {CATEGORIES.get(r['problem'], 'other')} | {verdict} | "
                         f"{_f(r['ref_ms'])} | {_f(r['cand_ms'])} | {_f(r['speedup'])} | {_f(b.get('ref_ms'))} | "
                         f"{_f(b.get('new_ms'))} | {_f(b.get('speedup'))} | {b.get('agree', b.get('error', '-'))} |")
        hows = {(r.get("do_bench") or {}).get("how") for r in honest} - {None}
        lines += ["", f"do_bench column measured with: {', '.join(sorted(hows))}"]
    return "\n".join(lines) + "\n"


def _reason_family(reason: str) -> str:
    """Reasons grouped for counting: cheat:pytorch_compute:aten.relu.default -> cheat:pytorch_compute."""
    parts = reason.split(":")
    return ":".join(parts[:2]) if parts[0] in ("cheat", "static", "mismatch", "timing_failed") else reason


def _num(name: str) -> int:
    m = re.match(r"^(\d+)_", name)
    return int(m.group(1)) if m else 10**9


def _f(x: Any) -> str:
    return "-" if x is None else (f"{x:.3g}" if isinstance(x, float) else str(x))
