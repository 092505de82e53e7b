"""What the RL ranks exchange, on two real gloo processes with a stand-in sampler and verifier (no
model, no pool, seconds): a step's gather carries no token ids while each rank's GRPO rollout hands
TRL its own completions' ids; GRPO's resume point is rank 0's on every rank. And the run's
fingerprint holds the process count, so a run resumed on another count starts afresh and says why."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch.multiprocessing as mp

from tritonrl_lib.rollout import RolloutResult, RolloutStats
from tritonrl_lib.rollout.results import Completion
from tritonrl_lib.tasks import load_tasks
from tritonrl_lib.train.rl import distributed, grpo
from tritonrl_lib.train.rl.candidate import Candidate
from tritonrl_lib.train.rl.curriculum import Curriculum, CurriculumSettings
from tritonrl_lib.train.rl.distributed import SINGLE, Ranks
from tritonrl_lib.train.rl.run_frame import RLRun, fingerprint, open_run
from tritonrl_lib.verify.batch import VerifyStats

from rl_fixtures import prepare_run, smoke_config

SLOTS, N = 4, 2  # GRPO: tasks_per_round groups over both ranks, n_samples each
RESUME_STEP = 3


def _ids(text: str) -> list[int]:
    return [ord(ch) for ch in text]


class _Tokenizer:
    chat_template = "stand-in"
    eos_token_id = 0

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return "PROMPT " + messages[-1]["content"]

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": _ids(text)}


class _Sampler:
    """Writes sample j of a prompt as a text naming the prompt, j and the seed; its ids spell the text."""

    def __init__(self):
        self.tokenizer = _Tokenizer()

    def generate(self, prompts, sampling, progress=False):
        comps = [[Completion(prompt_index=i, sample_index=j, text=(t := f"p{len(p)} s{j} seed{sampling.seed}"),
                             token_ids=_ids(t), num_tokens=len(t), prompt_tokens=len(p), finish_reason="eos",
                             seconds=0.0) for j in range(sampling.n_samples)] for i, p in enumerate(prompts)]
        n = sum(len(c) for c in comps)
        return RolloutResult(comps, RolloutStats(engine="stand-in", sequences=n, prompts=len(prompts),
                                                 generated_tokens=n, wall_s=0.01))

    def refresh(self):
        pass


@dataclasses.dataclass
class _Verdict:
    reward: float

    def to_dict(self):
        return {"correct": self.reward > 0, "reward": self.reward, "stage": "stand-in", "reason": "stand-in"}


class _Verifier:
    """Sample 0 of every group earns 0.7, the others 0: every group carries GRPO's signal."""

    def submit(self, tasks, texts, desc=""):
        verdicts = [_Verdict(0.7 if " s0 " in t else 0.0) for t in texts]
        return SimpleNamespace(result=lambda: (verdicts, VerifyStats(len(texts), len(texts), 0.01)))


def _candidates_in(value) -> list[Candidate]:
    if isinstance(value, Candidate):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [c for v in value for c in _candidates_in(v)]
    return []


def _rank(rank: int, port: int, out: str) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": "2",
                       "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"})
    ranks = Ranks.from_env("cpu")
    sent: list[Candidate] = []
    gather = Ranks.all_gather

    def recording(self, value):  # what this rank hands the other ranks
        sent.extend(_candidates_in(value))
        return gather(self, value)

    distributed.Ranks.all_gather = recording
    cfg = smoke_config(Path(out) / "run", method="grpo", tasks_per_round=SLOTS, n_samples=N, redraw_rounds=1)
    tasks = [t for t in load_tasks("builtin", size="small") if t.level == 1][:6]
    curriculum = Curriculum(CurriculumSettings.from_config(cfg.rl), cfg.seed)

    # GRPO's rollout as TRL calls it on this process: its share of the slots, each n_samples times
    pieces = grpo.GRPOPieces.__new__(grpo.GRPOPieces)
    pieces.cfg, pieces.ranks, pieces.tokenizer, pieces.curriculum = cfg, ranks, _Tokenizer(), curriculum
    pieces.tasks_by_id, pieces._prompt_ids = {t.id: t for t in tasks}, {}
    pieces.sampler = _Sampler()
    pieces.ctx = grpo.StepContext(cfg, grpo.METHOD, pieces.sampler, grpo.SamplingConfig(), _Verifier(), curriculum,
                                  {1: tasks}, inject="replace", say=lambda s: None, ranks=ranks)
    pieces._close_step = lambda *a: None  # rank 0's curriculum update, best policy and log: not what is tested
    steps = []
    collect = grpo.collect_step
    grpo.collect_step = lambda *a, **kw: steps.append(collect(*a, **kw)) or steps[-1]
    mine = ranks.share(SLOTS)
    prompts = [p for s in mine for p in [grpo.slot_dataset(SLOTS)["prompt"][s]] * N]
    got = pieces.rollout(prompts, SimpleNamespace(state=SimpleNamespace(global_step=0)))
    step = steps[0]

    # the resume point: rank 0 finds the newest complete checkpoint; every rank gets its path
    paths = cfg.paths.ensure()
    if ranks.is_main:
        ck = paths.rl_checkpoint / f"checkpoint-{RESUME_STEP}"
        ck.mkdir(parents=True)
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": RESUME_STEP}))
        for name in ("adapter_config.json", "optimizer.pt", "scheduler.pt", "adapter_model.safetensors"):
            (ck / name).write_text("{}")
    ranks.barrier()
    run = RLRun(cfg, paths, grpo.METHOD, paths.sft_checkpoint, tasks, {}, True, "tiny", lambda s: None, 0.0, ranks)
    resume, cur = grpo._resume_point(run)

    Path(out, f"rank{rank}.json").write_text(json.dumps({
        "mine": mine,
        "by_slot": {s: [[c.text, c.token_ids] for c in g] for s, g in step.by_slot.items()},
        "completion_ids": got["completion_ids"],
        "expected_ids": [_ids(c.text) for s in mine for c in step.by_slot[s]],
        "gathered": [[c.group, c.text, c.token_ids] for c in step.candidates],
        "groups": [[c.token_ids for c in g] for g in step.groups],
        "sent": [[c.group, c.token_ids] for c in sent],
        "resume": str(resume) if resume else None, "curriculum_log": str(cur.log_path) if cur.log_path else None,
    }))
    ranks.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(300)
def test_two_ranks_gather_no_token_ids_and_each_trains_on_its_own(tmp_path):
    mp.spawn(_rank, args=(_free_port(), str(tmp_path)), nprocs=2, join=True)
    views = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert views[0]["mine"] == [0, 2] and views[1]["mine"] == [1, 3]
    for r, v in enumerate(views):
        # what went to the other rank: every candidate of this rank's groups, none with its ids
        assert sorted({g for g, _ in v["sent"]}) == v["mine"] and all(ids == [] for _, ids in v["sent"])
        # the step as every rank sees it: both ranks' candidates, texts and all, no ids
        assert sorted({g for g, _, _ in v["gathered"]}) == list(range(SLOTS)) and len(v["gathered"]) == SLOTS * N
        assert all(text and ids == [] for _, text, ids in v["gathered"])
        assert len(v["groups"]) == SLOTS and all(ids == [] for g in v["groups"] for ids in g)
        # this rank's own groups keep theirs, and TRL gets them: the ids of the completions it sampled
        assert sorted(int(s) for s in v["by_slot"]) == v["mine"]
        assert all(ids and ids == [ord(ch) for ch in text] for g in v["by_slot"].values() for text, ids in g)
        assert v["completion_ids"] == v["expected_ids"] and len(v["completion_ids"]) == len(v["mine"]) * N
        # GRPO's resume point: rank 0's choice on both; the curriculum (and its log) rank 0's alone
        assert v["resume"] and Path(v["resume"]).name == f"checkpoint-{RESUME_STEP}"
        assert (v["curriculum_log"] is not None) == (r == 0)
    # each rank sampled with its own seeds: the two ranks' completions differ
    assert {t for g in views[0]["by_slot"].values() for t, _ in g}.isdisjoint(
        t for g in views[1]["by_slot"].values() for t, _ in g)


def test_one_process_also_gathers_copies_without_ids_and_keeps_its_own(tmp_path):
    """One process runs the same exchange (the identity): the step's candidates are copies without
    ids, by_slot the originals with them, and a group and the candidate list share their copies."""
    cfg = smoke_config(tmp_path, method="grpo", tasks_per_round=2, n_samples=2, redraw_rounds=0)
    tasks = [t for t in load_tasks("builtin", size="small") if t.level == 1][:3]
    ctx = grpo.StepContext(cfg, grpo.METHOD, _Sampler(), grpo.SamplingConfig(), _Verifier(),
                           Curriculum(CurriculumSettings.from_config(cfg.rl), cfg.seed), {1: tasks},
                           say=lambda s: None)
    step = grpo.collect_step(ctx, 0, 2)
    assert all(c.token_ids == [] for c in step.candidates) and len(step.candidates) == 4
    assert all(c.token_ids == [ord(ch) for ch in c.text] for g in step.by_slot.values() for c in g)
    assert {id(c) for g in step.groups for c in g} <= {id(c) for c in step.candidates}
    assert [c.text for g in step.groups for c in g] == [c.text for g in step.by_slot.values() for c in g]


def test_grpo_reads_a_slot_from_a_prompt_as_text_or_messages():
    assert grpo._slot_of("curriculum slot 3") == 3
    assert grpo._slot_of([{"role": "user", "content": "curriculum slot 5"}]) == 5


def test_only_rank_0_reads_the_log_into_its_result(tmp_path):
    """A finished run's result holds the whole rl_log on rank 0; another rank's none (it never reads it)."""
    cfg = smoke_config(tmp_path)
    paths = cfg.paths.ensure()
    paths.rl_log.parent.mkdir(parents=True, exist_ok=True)
    paths.rl_log.write_text('{"round": 0}\n{"round": 1}\n')

    def result(ranks: Ranks):
        return RLRun(cfg, paths, "best_of_n", paths.sft_checkpoint, [], {}, True, "tiny", print, 0.0,
                     ranks).result("already_done", 2)

    assert [r["round"] for r in result(SINGLE).history] == [0, 1]
    assert result(Ranks(world=2, rank=0)).history == [{"round": 0}, {"round": 1}]
    assert result(Ranks(world=2, rank=1)).history == []


# --------------------------------------------------------------------------- the fingerprint's process count


class _TwoRanksInOne(Ranks):
    """Rank 0 of two as far as open_run asks (every exchange the identity): the fingerprint's world."""

    def all_gather(self, value):
        return [value]

    def from_main(self, make):
        return make()

    def barrier(self):
        pass


def test_the_fingerprint_holds_the_process_count_and_one_process_stays_as_before(tmp_path):
    cfg = smoke_config(tmp_path)
    start = tmp_path / "no-adapter"
    one = fingerprint(cfg, "best_of_n", start, ["a", "b"])
    assert fingerprint(cfg, "best_of_n", start, ["a", "b"], world=1) == one
    assert "world" not in one["train"]  # one process: as fingerprinted before, so its runs still resume
    two = fingerprint(cfg, "best_of_n", start, ["a", "b"], world=2)
    assert two != one and two["train"] == {**one["train"], "world": 2}
    assert fingerprint(cfg, "grpo", start, ["a"], world=4)["train"]["world"] == 4


@pytest.mark.slow
def test_a_run_resumed_on_another_process_count_starts_afresh_and_says_why(tmp_path):
    cfg = smoke_config(tmp_path, gpus="2")
    prepare_run(cfg)
    two = _TwoRanksInOne(world=2)
    said: list[str] = []

    def opened(ranks: Ranks) -> bool:
        said.clear()
        return open_run(cfg, cfg.paths, "best_of_n", tasks=None, force=False, say=said.append, ranks=ranks).resuming

    left_behind = cfg.paths.rl_checkpoint / "rounds" / "round-000" / "samples.jsonl"

    def leave_work() -> None:
        left_behind.parent.mkdir(parents=True, exist_ok=True)
        left_behind.write_text("{}\n")

    assert not opened(two)
    leave_work()
    assert opened(two) and left_behind.is_file()  # the same count resumes
    assert not opened(SINGLE)  # another count: cleared, and the message names the count and the setting
    assert not left_behind.exists()
    assert len(said) == 1 and "process count changed" in said[0] and "ran on 2 and this one runs on 1" in said[0]
    assert "gpus" in said[0]
    leave_work()
    assert opened(SINGLE) and left_behind.is_file()
    assert not opened(two) and "ran on 1" in said[0] and "runs on 2" in said[0]
    assert not opened(_TwoRanksInOne(world=3)) and "ran on 2 and this one runs on 3" in said[0]
