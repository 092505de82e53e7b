"""One RL step's groups, whichever the method: draw tasks, sample `n` completions each, verify,
refine the failures (optional), and redraw the groups that carry no learning signal.

    step = collect_step(ctx, step_index)      # -> StepGroups: groups, candidates, log entries

A *group* is one task's `n` samples, each a `Candidate` (candidate.py: the text, its verdict
and reward, and for a refinement its `parent` and `history`).

Speed (issue 17): the tasks are generated in `overlap_chunks` chunks; each chunk's candidates
are verified in the background (verify_batch.VerifyAhead) while the next chunk generates, and
each distinct (task, code) is verified once. The log entry `timing` says where the time went:
generate_s (the policy writing), verify_s (the pool busy), verify_wait_s (generation done,
waiting for verdicts: the part of verification not hidden behind generation).

Signal (dynamic sampling): GRPO learns from a group only when its rewards differ; best-of-N
only when it holds a correct candidate to keep. After the first draw, up to `redraw_rounds`
times, the groups without signal are replaced by groups of newly drawn tasks (curriculum.redraw);
a replacement is kept only when it carries signal. What was drawn, kept and replaced is logged.

Several processes (`ctx.ranks`, distributed.py): rank 0 draws the step's tasks (and each redraw)
and every rank receives the same ids; each rank samples, verifies and refines the groups of its
own slots (`share`), and the step's groups and candidates are then gathered to every rank
(without their token ids: only the sampling rank's `by_slot` keeps them), with each rank's view
(what it was handed, what it did, how long it took) in `per_rank`. One process is the same code
with every exchange the identity.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ...model.prompts import format_prompt
from ...rollout import RolloutStats, SamplingConfig
from ...tasks.task import Task
from ...verify.batch import VerifyAhead, VerifyStats
from .candidate import Candidate
from .distributed import SINGLE, Ranks, gathered_by_slot
from .refine import discounted_reward, refinement_prompt

SIGNAL_RULES = {"grpo": "rewards differ within the group", "best_of_n": "a correct candidate to keep"}


@dataclass
class StepContext:
    """What every step of a run shares."""

    cfg: Any  # RunConfig
    method: str  # best_of_n | grpo
    sampler: Any  # rollout.Rollout
    sampling: SamplingConfig  # the run's sampling settings (seed and n set per call)
    verifier: VerifyAhead
    curriculum: Any  # curriculum.Curriculum
    by_level: dict[int, list[Task]]
    extra_candidates: Callable[[Task, int], Sequence[str]] | None = None
    inject: str = "append"  # extra candidates: "append" beside the n samples, "replace" the first ones (GRPO)
    say: Callable[[str], None] = print
    ranks: Ranks = SINGLE  # the processes sharing each step (distributed.py)
    by_id: dict[str, Task] = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {t.id: t for ts in self.by_level.values() for t in ts}


@dataclass
class StepGroups:
    groups: list[list[Candidate]]  # the step's final groups (turn-0 candidates), one per slot
    tasks: list[Task]  # each final group's task
    candidates: list[Candidate]  # every candidate generated this step: replaced groups and refinements too
    signal: dict[str, Any]
    timing: dict[str, float]
    verify: dict[str, Any]
    rollout: RolloutStats
    drawn: list[Task]  # the first draw, in slot order
    refine: dict[str, Any] = field(default_factory=dict)
    # this rank's final groups, by slot: the only candidates that keep their token_ids (`groups` and
    # `candidates` are the gathered copies, without them)
    by_slot: dict[int, list[Candidate]] = field(default_factory=dict)
    per_rank: list[dict[str, Any]] = field(default_factory=list)  # several processes: each rank's share and times


def has_signal(group: Sequence[Candidate], method: str, refinements: Sequence[Candidate] = ()) -> bool:
    if method == "grpo":
        return len({round(float(c.reward), 6) for c in group}) > 1
    return any(c.correct for c in [*group, *refinements])


def _merge_stats(total: RolloutStats, part: RolloutStats) -> None:
    total.engine = total.engine or part.engine
    total.device = total.device or part.device
    total.note = total.note or part.note
    for name in ("sequences", "prompts", "generated_tokens", "prompt_tokens", "decode_steps", "batches",
                 "cuda_graphs", "compactions"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    for name in ("wall_s", "prefill_s"):
        setattr(total, name, getattr(total, name) + getattr(part, name))
    for k, v in part.finish_reasons.items():
        total.finish_reasons[k] = total.finish_reasons.get(k, 0) + v


def _chunks(n: int, parts: int) -> list[range]:
    parts = max(1, min(parts, n))
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(parts) if bounds[i + 1] > bounds[i]]


class _Collector:
    """Runs generation and verification of one step, with the step's accounting."""

    def __init__(self, ctx: StepContext, step: int):
        self.ctx, self.step = ctx, step
        self.rollout = RolloutStats()
        self.vstats = VerifyStats()
        self.timing = {"generate_s": 0.0, "verify_s": 0.0, "verify_wait_s": 0.0, "refine_generate_s": 0.0}
        self.calls = 0

    def _generate(self, prompts: list[str], n: int, seed: int) -> tuple[list[list[Any]], float]:
        sampling = dataclasses.replace(self.ctx.sampling, n_samples=n, seed=seed)
        t0 = time.perf_counter()
        # a step's generation runs for minutes: a progress bar, rank 0's (one bar per run)
        res = self.ctx.sampler.generate(prompts, sampling, progress=self.ctx.ranks.is_main)
        dt = time.perf_counter() - t0
        _merge_stats(self.rollout, res.stats)
        return res.completions, dt

    def generate_and_verify(self, items: list[tuple[Task, str]], n: int,
                            make: Callable[[int, Task, list[Any]], list[Candidate]],
                            refine: bool = False) -> list[list[Candidate]]:
        """For each (task, prompt) `n` completions turned into candidates by `make(i, task,
        completions)`, verified; chunks generate while earlier chunks verify."""
        out: list[list[Candidate] | None] = [None] * len(items)
        pending = []
        for part in _chunks(len(items), self.ctx.cfg.rl.overlap_chunks):
            self.calls += 1
            seed = self.ctx.cfg.seed * 1000 + self.step + 100_003 * self.calls + self.ctx.ranks.seed_offset
            comps, dt = self._generate([items[i][1] for i in part], n, seed)
            self.timing["refine_generate_s" if refine else "generate_s"] += dt
            batch = []
            for i, group in zip(part, comps):
                out[i] = make(i, items[i][0], group)
                batch += out[i]
            fut = self.ctx.verifier.submit([self.ctx.by_id[c.task_id] for c in batch], [c.text for c in batch],
                                           desc=f"verify step {self.step}")
            pending.append((batch, fut))
        t0 = time.perf_counter()
        for batch, fut in pending:
            verdicts, vs = fut.result()
            self.vstats = self.vstats.add(vs)
            for c, v in zip(batch, verdicts):
                c.set_verdict(v)
        self.timing["verify_wait_s"] += time.perf_counter() - t0
        self.timing["verify_s"] = self.vstats.seconds
        return out  # type: ignore[return-value]


def _candidates_for(ctx: StepContext, step: int, slot: int, task: Task, completions: list[Any],
                    n: int) -> list[Candidate]:
    """A group's candidates: the policy's `n` samples and the extra_candidates hook's (injected)."""
    tok = ctx.sampler.tokenizer
    cands = [Candidate(task_id=task.id, level=task.level, group=slot, sample_index=c.sample_index, text=c.text,
                       token_ids=list(c.token_ids), num_tokens=c.num_tokens, finish_reason=c.finish_reason,
                       seconds=c.seconds) for c in completions]
    extra = list(ctx.extra_candidates(task, step)) if ctx.extra_candidates else []
    injected = [Candidate(task_id=task.id, level=task.level, group=slot, sample_index=0, text=text, injected=True,
                          token_ids=tok(text, add_special_tokens=False)["input_ids"], finish_reason="injected")
                for text in extra]
    if ctx.inject == "replace":
        injected = injected[:n]
        for j, c in enumerate(injected):
            c.sample_index = j
        return injected + cands[len(injected):]
    for j, c in enumerate(injected):
        c.sample_index = n + j
    return cands + injected


def _draw_groups(col: _Collector, tasks: list[Task], slots: Sequence[int]) -> list[list[Candidate]]:
    """One group per task, numbered by its slot in the step (`slots`, one per task)."""
    ctx, n = col.ctx, col.ctx.cfg.rl.n_samples
    tok = ctx.sampler.tokenizer
    items = [(t, format_prompt(tok, t)) for t in tasks]
    return col.generate_and_verify(
        items, n, lambda i, task, comps: _candidates_for(ctx, col.step, slots[i], task, comps, n))


def _refine(col: _Collector, groups: list[list[Candidate]]) -> tuple[list[Candidate], dict[str, Any]]:
    """`refine_turns` turns of refinement for every failed policy candidate; each sample's
    trajectory reward (its `reward`) becomes the best discounted reward along it."""
    ctx, rl = col.ctx, col.ctx.cfg.rl
    tok = ctx.sampler.tokenizer
    made: list[Candidate] = []
    open_ = [c for g in groups for c in g if not c.injected and not c.correct]
    chain = {id(c): [c] for c in open_}
    for turn in range(1, rl.refine_turns + 1):
        if not open_:
            break
        items, parents = [], []
        for c in open_:
            history = [(x.text, x.verdict) for x in chain[id(c)]]
            task = ctx.by_id[c.task_id]
            items.append((task, refinement_prompt(tok, task, history)))
            parents.append(c)

        def make(i, task, comps, turn=turn, parents=parents):
            root, comp = parents[i], comps[0]
            return [Candidate(task_id=task.id, level=task.level, group=root.group, sample_index=root.sample_index,
                              turn=turn, text=comp.text, token_ids=list(comp.token_ids), num_tokens=comp.num_tokens,
                              finish_reason=comp.finish_reason, seconds=comp.seconds, parent=root.key,
                              history=[x.history_entry() for x in chain[id(root)]])]

        got = col.generate_and_verify(items, 1, make, refine=True)
        nxt = []
        for root, (cand,) in zip(parents, got):
            chain[id(root)].append(cand)
            made.append(cand)
            if not cand.correct:
                nxt.append(root)
        open_ = nxt
    fixed = 0
    for root_id, c_chain in chain.items():
        root = c_chain[0]
        root.first_reward = root.reward
        root.reward = discounted_reward([x.reward for x in c_chain], rl.refine_discount)
        fixed += any(x.correct for x in c_chain[1:])
    return made, {"turns": rl.refine_turns, "refined": len(chain), "candidates": len(made),
                  "correct": sum(c.correct for c in made), "fixed": fixed,
                  "discount": rl.refine_discount}


def collect_step(ctx: StepContext, step: int, n_slots: int, share: Sequence[int] | None = None) -> StepGroups:
    """Draw `n_slots` tasks for step `step`, and sample, verify, refine and redraw (module doc).

    `share`: the slots this rank samples (default `ctx.ranks.share(n_slots)`: all of them for one
    process). The StepGroups returned hold every rank's groups and candidates."""
    t_start = time.perf_counter()
    ranks = ctx.ranks
    col = _Collector(ctx, step)
    drawn_ids = ranks.from_main(functools.partial(_draw_ids, ctx, step, n_slots))  # rank 0 draws, all see it
    drawn = [ctx.by_id[i] for i in drawn_ids]
    mine = sorted(share) if share is not None else ranks.share(n_slots)
    groups: dict[int, list[Candidate]] = dict(zip(mine, _draw_groups(col, [drawn[s] for s in mine], mine)))
    tasks = {s: drawn[s] for s in mine}
    refinements: list[Candidate] = []
    refine_info: dict[str, Any] = {}
    if ctx.cfg.rl.refine_turns:
        refinements, refine_info = _refine(col, list(groups.values()))
    def signal_of(g: list[Candidate], refs: Sequence[Candidate]) -> bool:
        return has_signal(g, ctx.method, [c for c in refs if c.group == g[0].group])

    first_signal = sum(signal_of(g, refinements) for g in groups.values())
    everything = [c for g in groups.values() for c in g]
    replaced = 0
    rounds_used = 0
    next_slot = n_slots
    for _ in range(ctx.cfg.rl.redraw_rounds):
        dead = [s for s, g in groups.items() if not signal_of(g, refinements)]
        views = ranks.all_gather((len(dead), [t.id for t in tasks.values()]))  # every rank's dead groups
        total = sum(n for n, _ in views)
        if not total:
            break
        rounds_used += 1
        step_ids = [i for _, ids in views for i in ids]
        fresh_ids = ranks.from_main(functools.partial(_redraw_ids, ctx, total, step_ids))
        first = sum(n for n, _ in views[:ranks.rank])  # this rank's part of the redraw
        fresh = [ctx.by_id[i] for i in fresh_ids[first:first + len(dead)]]
        new_groups = _draw_groups(col, fresh, list(range(next_slot + first, next_slot + first + len(fresh))))
        next_slot += len(fresh_ids)
        new_refs: list[Candidate] = []
        if ctx.cfg.rl.refine_turns:
            new_refs, more = _refine(col, new_groups)
            for k in ("refined", "candidates", "correct", "fixed"):
                refine_info[k] += more[k]
        refinements += new_refs
        everything += [c for g in new_groups for c in g]
        for s, g, t in zip(dead, new_groups, fresh):
            if signal_of(g, new_refs):
                groups[s], tasks[s] = g, t
                replaced += 1
    timing = {k: round(v, 3) for k, v in col.timing.items()}
    timing["collect_s"] = round(time.perf_counter() - t_start, 3)
    light = _without_token_ids(everything + refinements)
    mine_view = {"rank": ranks.rank, "slots": mine, "drawn": drawn_ids,
                 "groups": {s: [light[id(c)] for c in g] for s, g in groups.items()},
                 "tasks": {s: t.id for s, t in tasks.items()}, "candidates": list(light.values()),
                 "first_signal": first_signal, "with_signal": sum(signal_of(g, refinements) for g in groups.values()),
                 "replaced": replaced, "timing": timing, "verify": col.vstats, "rollout": col.rollout,
                 "refine": refine_info}
    views = ranks.all_gather(mine_view)
    by_slot = gathered_by_slot([v["groups"] for v in views], n_slots)
    task_of = gathered_by_slot([v["tasks"] for v in views], n_slots)
    signal = {"rule": SIGNAL_RULES[ctx.method], "groups": n_slots,
              "with_signal": sum(v["with_signal"] for v in views),
              "first_draw_with_signal": sum(v["first_signal"] for v in views), "drawn": next_slot,
              "redraw_rounds": rounds_used, "replaced": sum(v["replaced"] for v in views)}
    return StepGroups(groups=list(by_slot.values()), tasks=[ctx.by_id[task_of[s]] for s in by_slot],
                      candidates=[c for v in views for c in v["candidates"]], signal=signal,
                      timing=_slowest(v["timing"] for v in views), verify=_verify_over(views),
                      rollout=_rollout_over(views), drawn=drawn, refine=_refine_over(views),
                      by_slot={s: groups[s] for s in mine}, per_rank=_per_rank(views) if len(views) > 1 else [])


def _without_token_ids(cands: Sequence[Candidate]) -> dict[int, Candidate]:
    """{id(original): copy without `token_ids`}, in order: what the ranks exchange. Only the rank
    that sampled a candidate trains on its ids (GRPO's `by_slot`, kept whole), so the gather need
    not ship every completion's tokens to every rank; one copy per candidate, so a group and the
    candidate list still share their objects."""
    return {id(c): dataclasses.replace(c, token_ids=[]) for c in cands}


def _draw_ids(ctx: StepContext, step: int, n_slots: int) -> list[str]:
    return [t.id for t in ctx.curriculum.sample_tasks(ctx.by_level, n_slots, rng=ctx.curriculum.rng(step))]


def _redraw_ids(ctx: StepContext, n: int, avoid: list[str]) -> list[str]:
    return [t.id for t in ctx.curriculum.redraw(ctx.by_level, n, avoid=avoid)]


def _slowest(timings) -> dict[str, float]:
    """The step's timing over ranks: each phase as long as its slowest rank (they run side by side
    and the step waits for all); one rank's timing as it is."""
    out: dict[str, float] = {}
    for t in timings:
        for k, v in t.items():
            out[k] = max(out.get(k, 0.0), v)
    return out


def _verify_over(views: list[dict[str, Any]]) -> dict[str, Any]:
    """The ranks' verification as one: candidates and distinct codes summed, seconds the longest
    rank's busy time (their pools work side by side), so per_minute is the host's throughput."""
    stats = [v["verify"] for v in views]
    return VerifyStats(sum(s.candidates for s in stats), sum(s.unique for s in stats),
                       max(s.seconds for s in stats)).to_dict()


def _rollout_over(views: list[dict[str, Any]]) -> RolloutStats:
    if len(views) == 1:
        return views[0]["rollout"]
    total = RolloutStats()
    for v in views:
        _merge_stats(total, v["rollout"])
    total.wall_s = max(v["rollout"].wall_s for v in views)  # side by side: the longest rank's wall
    total.prefill_s = max(v["rollout"].prefill_s for v in views)
    return total


def _refine_over(views: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(views[0]["refine"])
    for v in views[1:]:
        for k in ("refined", "candidates", "correct", "fixed"):
            if k in out:
                out[k] += v["refine"].get(k, 0)
    return out


def _per_rank(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each rank saw and did (the rl_log's `ranks`): the draw it was handed, its slots, its
    candidates, and its generate / verify seconds."""
    return [{"rank": v["rank"], "drawn": v["drawn"], "slots": v["slots"], "groups": len(v["groups"]),
             "candidates": len(v["candidates"]), "tokens": v["rollout"].generated_tokens, "timing": v["timing"],
             "verify": v["verify"].to_dict()} for v in views]


def curriculum_results(candidates: Sequence[Candidate]) -> tuple[list[tuple[int, bool]], dict[str, list[int]]]:
    """The curriculum's inputs from a step's candidates: (level, correct) of every first attempt of
    the policy, and per task [samples, correct]."""
    own = [c for c in candidates if c.policy_first_attempt]
    per_task: dict[str, list[int]] = {}
    for c in own:
        t = per_task.setdefault(c.task_id, [0, 0])
        t[0] += 1
        t[1] += c.correct
    return [(c.level, c.correct) for c in own], per_task
