"""Two evaluations compared where both were verified: the honest difference when passes were cut.

    python benchmarks/compare_cut_evals.py A/eval/eval_rl_grpo.partial.json B/eval/eval_sft.partial.json
    python benchmarks/compare_cut_evals.py A.json B.json --set kernelbench --resamples 2000

A and B are eval records (`eval_<stage>.json`, or the `.partial.json` that `eval_from_verdicts.py` writes for a
cut pass, where a sample never verified carries the error "not verified..."). Lower bounds from two cut passes
are not comparable: one pass may have reached more of the problems the model solves. So each level is compared
on the problems whose every sample has a verdict in both records; the difference A - B of their pooled correct
rates gets a 95% interval from resampling those problems (`eval.metrics.paired_difference`, as the report's
RL - SFT figures). Prints one row per level and the problems solved by one record only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tritonrl_lib.core.jsonio import read_json  # noqa: E402
from tritonrl_lib.eval.metrics import paired_difference  # noqa: E402
from tritonrl_lib.eval.resume import judged  # noqa: E402



def rows_of(path: Path, heldout_set: str) -> list[dict]:
    try:
        record = json.loads(path.read_text())
        rows = record["detailed_results"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SystemExit(f"{path}: not an eval record ({type(e).__name__}: {e}); pass eval_<stage>.json or "
                         "the .partial.json eval_from_verdicts.py writes")
    return [r for r in rows if not heldout_set or r.get("heldout_set") == heldout_set]


def fully_verified(rows: list[dict]) -> set[str]:
    """Task ids every one of whose samples has a verdict."""
    seen: dict[str, bool] = {}
    for r in rows:
        seen[r["id"]] = seen.get(r["id"], True) and judged(r)
    return {t for t, ok in seen.items() if ok}


def compare(rows_a: list[dict], rows_b: list[dict], resamples: int) -> list[dict]:
    """Per level: the paired difference on the problems fully verified in both, and who solved what there."""
    out = []
    for level in sorted({r["level"] for r in rows_a} | {r["level"] for r in rows_b}):
        a = [r for r in rows_a if r["level"] == level]
        b = [r for r in rows_b if r["level"] == level]
        both = fully_verified(a) & fully_verified(b)
        a_in = [r for r in a if r["id"] in both]
        b_in = [r for r in b if r["id"] in both]
        solved_a = {r["id"] for r in a_in if r["correct"]}
        solved_b = {r["id"] for r in b_in if r["correct"]}
        diff = paired_difference(a_in, b_in, resamples=resamples) if both else None
        out.append({"level": level, "problems": len({r["id"] for r in a} | {r["id"] for r in b}),
                    "compared": len(both), "diff": diff, "only_a": sorted(solved_a - solved_b),
                    "only_b": sorted(solved_b - solved_a)})
    return out


def eval_record(root: Path, stage: str) -> tuple[dict | None, bool]:
    """A stage's eval record, and whether it is a cut pass's: eval_<stage>.json, else the
    eval_<stage>.partial.json eval_from_verdicts.py writes (unverified samples counted wrong)."""
    rec = read_json(root / "eval" / f"eval_{stage}.json", None)
    if rec:
        return rec, False
    rec = read_json(root / "eval" / f"eval_{stage}.partial.json", None)
    return (rec, True) if rec else (None, False)


def judged_vs_sft(rec: dict, sft: dict, resamples: int) -> list[dict]:
    """RL minus SFT on held-out KernelBench where a pass was cut: per level, only the problems whose every
    sample was judged in both records (a lower bound against a lower bound says nothing)."""
    kb = [[r for r in x["detailed_results"] if r.get("heldout_set") == "kernelbench"] for x in (rec, sft)]
    out = []
    for c in compare(kb[0], kb[1], resamples):
        d = c["diff"] or {}
        out.append({"level": c["level"], "problems": c["problems"], "judged in both": c["compared"],
                    "RL correct %": d.get("a"), "SFT correct %": d.get("b"), "difference": d.get("difference"),
                    "interval": d.get("interval"), "above_zero": d.get("above_zero")})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path, help="eval record A (the difference is A - B)")
    ap.add_argument("b", type=Path, help="eval record B")
    ap.add_argument("--set", default="kernelbench", help="held-out set to compare (kernelbench, tasks, families; '' = all)")
    ap.add_argument("--resamples", type=int, default=2000)
    args = ap.parse_args(argv)
    rows_a, rows_b = rows_of(args.a, args.set), rows_of(args.b, args.set)
    if not rows_a or not rows_b:
        raise SystemExit(f"no rows of held-out set {args.set!r} in {'A' if not rows_a else 'B'}")
    print("| level | problems | fully verified in both | A correct % | B correct % | A - B [95% CI] |")
    print("|---|---:|---:|---:|---:|---|")
    for c in compare(rows_a, rows_b, args.resamples):
        d = c["diff"]
        if d is None:
            print(f"| L{c['level']} | {c['problems']} | 0 | - | - | no problem verified in both |")
            continue
        iv = d["interval"]
        ci = f" [{iv[0]:+.1f}, {iv[1]:+.1f}]" if iv else ""
        print(f"| L{c['level']} | {c['problems']} | {c['compared']} | {d['a']:.1f} | {d['b']:.1f} | "
              f"{d['difference']:+.1f}{ci} |")
        for who, ids in (("A", c["only_a"]), ("B", c["only_b"])):
            if ids:
                print(f"  solved by {who} only: {', '.join(i.split('/')[-1] for i in ids)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
