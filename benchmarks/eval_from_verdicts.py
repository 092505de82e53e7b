"""Score an evaluation that was cut off, from what it kept: its completions and the verdicts it had.

    python benchmarks/eval_from_verdicts.py ROOT --stage sft -p kernelbench=/path/to/KernelBench
    python benchmarks/eval_from_verdicts.py ROOT --stage sft --verifier-version 15 --where "cuda:NVIDIA H200; host 504 GiB, 12 workers sharing"

ROOT is a `gpu_rl_session.py` results folder as its export brings it back (the run's `runs/base/data/`
and `eval/.eval_<stage>.resume-*/` with `completions.json` and `verdicts/`). An evaluation cut off by a
device call's limit keeps every verdict it reached; this scores all samples on the CPU without running
the verifier: a sample whose verdict was kept gets it, a sample the static check rejects gets that verdict
(recomputed here, as the pool does before it sends a job), and a sample never verified counts as wrong
(reason `timeout`, error "not verified"; it passed the static check, so it counts as valid), so the
compiled and correct rates are lower bounds; the unverified samples are listed.

Each kept verdict is found under the verdict cache's key (verify/cache.py): the task source, the code,
the policy, the settings and `where` (the GPU's model and the pool's budget description). `where` is
searched among the descriptions a pool writes (host GiB, GPUs or pools it is split over, workers
sharing) unless given. Writes ROOT/eval/eval_<stage>.partial.json (the eval record's format) and prints
the held-out KernelBench table and its per-category table.

`--baselines FILE`: a file `tritonrl baselines` wrote on the GPU the verdicts came from (e.g. with
`--solved-in` there; a file of another machine is refused); its eager and torch.compile times are
attached whatever machine scores here, and the record names the file and its machine.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tritonrl_lib.core.config import load_config, parse_cli_overrides  # noqa: E402
from tritonrl_lib.eval.heldout import load_eval_tasks  # noqa: E402
from tritonrl_lib.eval.record import device_fingerprint, settings_fingerprint  # noqa: E402
from tritonrl_lib.eval.resume import UNVERIFIED, completions_of, judged, kept_for_tasks  # noqa: E402
from tritonrl_lib.eval.run import eval_sampling, score_completions  # noqa: E402
from tritonrl_lib.report import kernelbench as K  # noqa: E402
from tritonrl_lib.verify import cache as cache_module  # noqa: E402
from tritonrl_lib.verify.cache import VerdictCache  # noqa: E402
from tritonrl_lib.verify.pool import VerifierPool  # noqa: E402
from tritonrl_lib.verify.verdict import Verdict  # noqa: E402

GPUS = ("NVIDIA H200", "NVIDIA H100 80GB HBM3")


def candidate_wheres(gpu: str, hosts=range(8, 2049)):
    """The descriptions a pool may have written (VerifierPool._device_desc and _budget_desc)."""
    # split: the GPUs a pool spreads over times the pools sharing the host (TRITONRL_HOST_POOLS)
    splits = sorted({gpus * pools for gpus in (1, 2, 4, 8) for pools in (1, 2, 3, 4)} | {16, 32})
    for host, split, workers in itertools.product(hosts, splits, range(1, 65)):
        middle = f" split over {split} GPUs or pools" if split > 1 else ""
        yield f"cuda:{gpu}; host {host} GiB{middle}, {workers} workers sharing"


class KeptVerdicts:
    """A stand-in for the pool: the static check as the pool runs it, then the kept verdict by its key."""

    def __init__(self, cfg, cache: VerdictCache, where: str):
        self.cfg, self.cache, self.where = cfg, cache, where
        self.wheres: list[str] = []  # found by search: every description the evaluation's pools wrote under
        self.pool = types.SimpleNamespace(device="cuda", _seeds={}, _threads=1)  # what _prepare reads
        self.unverified: collections.Counter = collections.Counter()

    def key(self, task, job, where: str | None = None) -> str:
        return VerdictCache.key(task.source, job["code"], "+".join([job["policy"], *job["extra_ops"]]),
                                job["settings"], self.where if where is None else where)

    def kept(self, task, job) -> Verdict | None:
        for where in self.wheres or [self.where]:  # an evaluation resumed under another pool wrote other keys
            verdict = self.cache.get(self.key(task, job, where))
            if verdict is not None:
                return verdict
        return None

    def map(self, tasks, completions, **_):
        out = []
        for task, text in zip(tasks, completions):
            verdict, job = VerifierPool._prepare(self.pool, task, text, self.cfg.verify, True)
            if verdict is None:
                verdict = self.kept(task, job)
            if verdict is None:
                self.unverified[task.id] += 1
                # it passed the static check (a sample that fails it got that verdict above), no more is known
                verdict = Verdict(task_id=task.id, stage="static", reason="timeout",
                                  error=f"{UNVERIFIED}: the evaluation was cut off before this sample")
            out.append(verdict)
        return out

    def close(self) -> None:
        pass


def holds_kept(kept: KeptVerdicts, probes: list, where: str) -> bool:
    """Whether some (task, job) of `probes` has a verdict kept under the pool description `where`."""
    return any(kept.cache.get(kept.key(t, j, where)) is not None for t, j in probes)


def find_where(kept: KeptVerdicts, probes: list) -> str | None:
    for gpu in GPUS:
        for where in candidate_wheres(gpu):
            kept.where = where
            if holds_kept(kept, probes, where):
                return where
    return None


def find_wheres(kept: KeptVerdicts, jobs: list) -> list[str]:
    """Every pool description some kept verdict was stored under: the first found anywhere, then the others
    of the same GPU and host (a session's pools differ in GPUs, pools and workers, not in the machine)."""
    first = find_where(kept, jobs[:3])
    if first is None:
        return []
    gpu, rest = first.split("; host ", 1)
    host = int(rest.split(" GiB", 1)[0])
    found = [first]
    probes = jobs[:200]
    for where in candidate_wheres(gpu.removeprefix("cuda:"), hosts=[host]):
        if where not in found and holds_kept(kept, probes, where):
            found.append(where)
    return found


def session_config(root: Path, profile: str, params: list[str]):
    """The session's configuration as gpu_rl_session.py builds it: the profile, the -p settings, then the
    SFT settings its development set chose (chosen_sft.json), if it chose."""
    try:
        chosen = json.loads((root / "chosen_sft.json").read_text()).get("overrides", {})
    except (OSError, ValueError, AttributeError):
        chosen = {}
    return load_config(profile, overrides={**parse_cli_overrides(params), **chosen, "outputs_dir": str(root / "runs"),
                                           "run": "base"})


def session_tasks(root: Path, profile: str, params: list[str]):
    """(config, held-out task list) of a session, as its evaluation loaded them."""
    cfg = session_config(root, profile, params)
    return cfg, load_eval_tasks(cfg, cfg.paths)


def find_kept(root: Path, stage: str, cfg, tasks, device: str | None = None):
    """(kept folder, its completions.json) of the session's cut evaluation of `stage`: only a folder made
    for this task list with these sampling and verifier settings (and, with `device`, on this machine's
    kind of GPU) is taken; SystemExit naming what was found otherwise."""
    expect = settings_fingerprint(tasks=tasks, sampling=eval_sampling(cfg, None), cfg=cfg)
    if device is not None:
        expect["device"] = device_fingerprint(device)
    try:
        return kept_for_tasks(root / "eval", stage, tasks, expect)
    except ValueError as e:
        raise SystemExit(str(e)) from None


def load_kept(root: Path, stage: str, profile: str, params: list[str]):
    """(config, held-out task list, kept folder, its completions.json) of a session's cut evaluation of
    `stage`, with the session's profile and settings (find_kept). Shared with eval_shrunk_on_cpu.py."""
    cfg, tasks = session_tasks(root, profile, params)
    return (cfg, tasks, *find_kept(root, stage, cfg, tasks))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path)
    ap.add_argument("--stage", default="sft")
    ap.add_argument("--profile", default="gpu")
    ap.add_argument("--where", default="", help="the pool's device and budget description (searched if empty)")
    ap.add_argument("--verifier-version", default="", help="VERIFIER_VERSION the verdicts were kept under "
                    "(part of their key; default: this checkout's)")
    ap.add_argument("-p", "--param", action="append", default=[], help="setting overrides, as the session had them")
    ap.add_argument("--baselines", type=Path, default=None, metavar="FILE",
                    help="eager / torch.compile times measured on the verdicts' machine (tritonrl baselines)")
    args = ap.parse_args(argv)

    import tritonrl_lib.eval.baselines as baselines  # the CUDA device name is read for baselines: none here

    baselines.machine_identity = lambda device, *a, **k: {"device": device, "name": "?", "torch": "?", "triton": "?"}
    if args.verifier_version:
        cache_module.VERIFIER_VERSION = args.verifier_version
    root = args.root.resolve()
    cfg, tasks, folder, data = load_kept(root, args.stage, args.profile, args.param)
    texts = [[c["text"] for c in cs] for cs in data["completions"]]
    kept = KeptVerdicts(cfg, VerdictCache(folder / "verdicts"), args.where)
    if not args.where:
        flat = [(t, VerifierPool._prepare(kept.pool, t, c, cfg.verify, True)[1]) for t, cs in zip(tasks, texts)
                for c in cs]
        kept.wheres = find_wheres(kept, [(t, j) for t, j in flat if j is not None])
        if not kept.wheres:
            raise SystemExit("no kept verdict matches: pass --where as the pool described itself")
        print("where: " + " | ".join(kept.wheres))
    record = score_completions(cfg, tasks, completions_of(data["completions"]), eval_sampling(cfg, None),
                               model_stage=args.stage,
                               model_path=str(folder), pool=kept, task_source="heldout", device="cuda",
                               progress=False, extra={"generation": data.get("generation", {})})
    if args.baselines is not None:
        try:
            store = baselines.BaselineFile.load(args.baselines)
        except baselines.BaselineError as e:
            raise SystemExit(f"--baselines: {e}") from e
        gpus = {w.split(";")[0].removeprefix("cuda:") for w in ([args.where] if args.where else kept.wheres)}
        if store.machine.get("device") != "cuda" or store.machine.get("name") not in gpus:
            raise SystemExit(f"--baselines {args.baselines}: times of {baselines.describe_machine(store.machine)}, "
                             f"while these verdicts came from {', '.join(sorted(gpus))}: speedups would mix machines; "
                             "give the file `tritonrl baselines` wrote on the verdicts' GPU")
        baselines.attach_to_record(record, tasks, store, None, resamples=cfg.eval.bootstrap_resamples)
        print(f"baselines: {args.baselines} ({baselines.describe_machine(store.machine)}), torch.compile times of "
              f"{record['baselines']['tasks_with_compile']} of {record['baselines']['tasks']} task(s)")
    # per sample (kept.unverified counts distinct answers: the same answer twice is verified once)
    record["unverified"] = dict(collections.Counter(r["id"] for r in record["detailed_results"] if not judged(r)))
    out = root / "eval" / f"eval_{args.stage}.partial.json"
    out.write_text(json.dumps(record, indent=1, default=str))
    print(f"{sum(record['unverified'].values())} samples ({sum(kept.unverified.values())} distinct answers) not "
          f"verified, counted wrong: {record['unverified']}")
    for name, m in record["metrics"].get("by_set", {}).items():
        print(f"set {name}: correct {m.get('correct_rate')}%, valid {m.get('valid_rate')}% of {m.get('num_tasks')} tasks")
    records = {args.stage: record}
    for row in K.headline_table(records, cfg.eval.bootstrap_resamples):
        print(" | ".join(str(v) for v in row.values()))
    for row in K.category_table(records, K.load_split(cfg.paths)):
        print(" | ".join(str(v) for v in row.values()))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
