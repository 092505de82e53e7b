"""Generated examples of the named families through the verifier: do they still pass after a template change?

    python benchmarks/verify_families.py gemm_chain conv_group_norm --first 1 --last 6 [--seed 0] [--params cpu]

Renders examples first..last of each family (`make_candidate`, as the data stage draws them), verifies them with
the profile's verifier (no verdict cache: every candidate judged afresh) and prints how many pass, with the
reason and error of each that does not; exit status 1 if any fails.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tritonrl_lib.core.config import load_config  # noqa: E402
from tritonrl_lib.data.generate import make_candidate  # noqa: E402
from tritonrl_lib.data.templates import TEMPLATES  # noqa: E402
from tritonrl_lib.verify import VerifierPool  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("families", nargs="+", help="template families, e.g. gemm_chain conv_group_norm")
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--last", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", default="cpu", help="the profile whose verifier settings are used")
    args = ap.parse_args(argv)
    unknown = [f for f in args.families if f not in TEMPLATES]
    if unknown:
        ap.error(f"no template for {unknown}; families with one: {', '.join(TEMPLATES)}")
    if args.last < args.first:
        ap.error(f"--last {args.last} is before --first {args.first}")
    cands = [make_candidate(f, args.seed, i) for f in args.families for i in range(args.first, args.last + 1)]
    t0 = time.monotonic()
    with VerifierPool(load_config(args.params).verify, cache=False, progress=True) as pool:
        verdicts = pool.map([c.task for c in cands], [c.completion for c in cands], progress=True)
    bad = [(c.task.name, v.reason, v.error[-300:]) for c, v in zip(cands, verdicts) if not v.correct]
    print(f"{len(cands) - len(bad)} of {len(cands)} pass ({time.monotonic() - t0:.0f} s)")
    for name, reason, error in bad:
        print(f"  {name}: {reason}: {error}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
