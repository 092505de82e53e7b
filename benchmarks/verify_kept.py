"""Go on verifying a cut evaluation from what it kept, on a machine that has no model weights.

    python benchmarks/verify_kept.py ROOT -p kernelbench=/path/to/KernelBench            # every stage it kept
    python benchmarks/verify_kept.py ROOT --stages sft,rl_grpo -p kernelbench=/path/to/KernelBench

An evaluation generates every model's completions first (eval/resume.py keeps them in
`eval/.eval_<stage>.resume-*/completions.json`), then verifies them, storing each verdict in that folder's
`verdicts/` as it comes. Resuming it through the pipeline needs the weights, because the folder is named
after them. A device session whose first machine trained the models and generated their completions can
hand the rest of the verification to a second machine with the kept folders alone (kilobytes, where three
adapters are hundreds of megabytes): this script verifies the kept completions of the stages in one pool,
interleaved task by task as `evaluate_models` does, and stores every verdict in each stage's folder under
the same keys. Verdicts already there are not verified again. Score afterwards with
`benchmarks/eval_from_verdicts.py` (each stage) and compare with `benchmarks/compare_cut_evals.py`.

Only folders made for the session's task list, with its sampling and verifier settings, on this machine's
kind of GPU, are taken (eval_from_verdicts.find_kept); a stage named without one is left out and said so.
The verdict keys carry the GPU's name and the pool's budget, so the verdicts serve a later resume or score
only from a machine of the same kind. Stop it whenever (Ctrl-C, SIGTERM from `timeout`): every verdict is
stored as it comes, and the next call goes on from there.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eval_from_verdicts import find_kept, session_tasks  # noqa: E402
from gpu_rl_session import EVAL_STAGES, interrupt_on_sigterm  # noqa: E402
from tritonrl_lib.eval.resume import kept_stages, verdicts_dir  # noqa: E402
from tritonrl_lib.eval.run import LazyPool, first_order, interleaved  # noqa: E402
from tritonrl_lib.model.load import resolve_device  # noqa: E402
from tritonrl_lib.verify.batch import verify_unique  # noqa: E402

SESSION_ORDER = ("base", *EVAL_STAGES)  # the order gpu_rl_session.py's evaluation lists its models in


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="a gpu_rl_session.py results folder with its kept evaluation")
    ap.add_argument("--stages", default="", help="comma-separated model stages (default: every stage it kept)")
    ap.add_argument("--first", default=None,
                    help="queue the tasks whose id contains this first (e.g. kernelbench/L2/: a short machine spent "
                         "where the answer is missing), then the rest; a task too large to share the GPU "
                         "still waits for the shared jobs (default: the setting eval.verify_first)")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("-p", "--param", action="append", default=[], help="setting overrides, as the session had them")
    args = ap.parse_args(argv)
    root = args.root.resolve()
    stages = [s for s in args.stages.split(",") if s] or sorted(kept_stages(root / "eval"), key=_session_order)
    if not stages:
        raise SystemExit(f"no kept evaluation under {root / 'eval'} (folders .eval_<stage>.resume-*)")
    cfg, tasks = session_tasks(root, args.profile, args.param)
    if cfg.verify.verify_cache:
        raise SystemExit("verify_cache is on: such an evaluation keeps its verdicts in the verdict cache, not in "
                         "its kept folders; run the evaluation itself to resume it")
    device = resolve_device(cfg.device)
    folders, kept = {}, {}
    for stage in stages:
        try:
            folder, data = find_kept(root, stage, cfg, tasks, device=device)
        except SystemExit as e:
            print(f"{stage}: left out: {e}")
            continue
        folders[stage], kept[stage] = folder, data
        print(f"{stage}: {sum(len(c) for c in data['completions'])} kept completions in {folder.name}")
    if not kept:
        raise SystemExit("no stage has a kept evaluation made with these settings: nothing to verify")
    texts = [[[c["text"] for c in cs] for cs in data["completions"]] for data in kept.values()]
    flat_tasks, flat_text, _, _ = interleaved(tasks, texts)
    order = first_order(flat_tasks, args.first if args.first is not None else cfg.eval.verify_first)
    flat_tasks, flat_text = [flat_tasks[i] for i in order], [flat_text[i] for i in order]
    pool = LazyPool(cfg)
    pool.keep_verdicts_in([verdicts_dir(f) for f in folders.values()])
    interrupt_on_sigterm()  # `timeout` stops it as Ctrl-C does: the pool closes its workers
    t0 = time.perf_counter()
    try:
        verdicts, stats = verify_unique(pool.get(), flat_tasks, flat_text, desc=f"verify {'+'.join(kept)}")
    except KeyboardInterrupt:
        print(f"interrupted after {time.perf_counter() - t0:.0f} s: the verdicts reached are kept")
        return 130
    finally:
        pool.close()
    earlier = sum(1 for v in verdicts if "verdict from cache" in v.notes)
    print(f"{stats.candidates} completions ({stats.unique} distinct): {earlier} had a verdict from an earlier call, "
          f"the rest were verified now in {time.perf_counter() - t0:.0f} s; correct: {sum(1 for v in verdicts if v.correct)}")
    return 0


def _session_order(stage: str) -> tuple[int, str]:
    """SESSION_ORDER, then any other stage by name."""
    return (SESSION_ORDER.index(stage) if stage in SESSION_ORDER else len(SESSION_ORDER), stage)


if __name__ == "__main__":
    raise SystemExit(main())
