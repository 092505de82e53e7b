"""The offline SFT data generator: op templates x shapes x dtypes x styles, every pair verified.

Candidates are drawn round-robin over the requested families (example i of family f is keyed by
(seed, f, i), so a family's examples do not depend on the others; a family weighted N by
`data.sft_family_weights` gives N candidates a round), deduplicated before any work is
done, and verified in batches through a `VerifierPool` (its workers run in parallel; its verdict
cache makes a re-run, or a resumed one, cost file reads). Only candidates the verifier passes are
kept; the others are counted by the verifier's reason. The result is the first `n` passing
candidates in candidate order, so it is the same for the same seed whatever the batch sizes.

A candidate is verified on its task at the template's small sizes; where the example shows published-
scale sizes, its SFT prompt holds the published twin of that task (the same module, larger constants),
and its meta records both (`shape`, `published_shape`, `numel`, `published_numel`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.config import family_weight_entries
from ..model import prompts
from ..model.prompts import format_completion, sft_record
from ..tasks.families import FAMILIES, category_of
from ..tasks.task import Task
from .records import SFTExample
from .templates import TEMPLATES, Example, level_of_family, render_example

MAX_CONSECUTIVE_DUPLICATES = 40  # a family this repetitive has shown all it has
ERROR_EXCERPT = 600  # characters of a failure's error kept in the data stage's counts


def generator_version() -> str:
    """A digest of the template sources: examples made by other templates are other data."""
    h = hashlib.sha256()
    tdir = Path(__file__).with_name("templates")
    for f in sorted(tdir.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    h.update(Path(__file__).with_name("generate.py").read_bytes())

    h.update(Path(prompts.__file__).read_bytes())
    return h.hexdigest()[:12]


@dataclass
class GenerationStats:
    requested: int
    kept: int = 0
    candidates: int = 0  # rendered
    duplicates: int = 0  # identical (reference, solution) pairs skipped before verification
    verified: int = 0  # sent to the verifier
    cache_hits: int = 0
    failures: Counter = field(default_factory=Counter)  # verifier reason -> candidates dropped
    failed_by_family: dict[str, Counter] = field(default_factory=dict)  # family -> reason -> dropped
    first_errors: dict[str, str] = field(default_factory=dict)  # reason -> the first such error's last lines
    kept_by_family: Counter = field(default_factory=Counter)
    exhausted_families: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    wall_s: float = 0.0

    def record_failure(self, family: str, reason: str, error: str) -> None:
        self.failures[reason] += 1
        self.failed_by_family.setdefault(family, Counter())[reason] += 1
        if reason not in self.first_errors:  # the end of a traceback says what failed
            self.first_errors[reason] = error.strip()[-ERROR_EXCERPT:]

    def starved_families(self, share: float = 0.25) -> list[str]:
        """Families that kept fewer than `share` of an even split of what was kept, while the verifier
        dropped some of their candidates: a template, or this machine's Triton, failing them."""
        fair = self.kept / max(1, len(self.families))
        return [f for f in self.families if self.kept_by_family.get(f, 0) < share * fair and self.failed_by_family.get(f)]

    def starved_message(self) -> str:
        starved = self.starved_families()
        if not starved:
            return ""
        lost = Counter()
        for f in starved:
            lost.update(self.failed_by_family[f])
        names = ", ".join(f"{f} ({self.kept_by_family.get(f, 0)} kept)" for f in starved)
        first = "; ".join(f"{r}: {self.first_errors.get(r, '')[-200:]}" for r, _ in lost.most_common(2))
        return (f"{len(starved)} of {len(self.families)} train families kept almost nothing: {names}; the verifier "
                f"dropped their candidates as {dict(lost.most_common())}. First such errors: {first}")

    @property
    def n_failed(self) -> int:
        return sum(self.failures.values())

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested, "kept": self.kept, "candidates": self.candidates,
                "duplicates": self.duplicates, "verified": self.verified, "cache_hits": self.cache_hits,
                "failed": self.n_failed, "failures": dict(self.failures.most_common()),
                "failed_by_family": {f: dict(c.most_common()) for f, c in sorted(self.failed_by_family.items())},
                "first_errors": dict(self.first_errors),
                "kept_by_family": dict(sorted(self.kept_by_family.items())),
                "exhausted_families": self.exhausted_families, "families": len(self.families),
                "wall_s": round(self.wall_s, 1)}


@dataclass
class Candidate:
    task: Task  # what the verifier runs: the reference at the template's (small) sizes
    completion: str
    solution: str
    variant: str
    key: str
    prompt_task: Task | None = None  # what the SFT prompt shows: the published-scale twin (None: `task`)


def example_meta(ex: Example, index: int) -> dict[str, Any]:
    """What an SFT example records about its sizes and surface (the same keys on every row)."""
    return {"index": index, "dtype": ex.dtype, "shape": dict(ex.shape),
            "published_shape": dict(ex.published_shape or ex.shape), "numel": ex.numel,
            "published_numel": ex.published_numel or ex.numel, "published_scale": bool(ex.published_reference),
            "int64_offsets": ex.style.int64, "house_surface": ex.style.house_surface,
            "surface": ex.style.surface_summary()}


def make_candidate(family: str, seed: int, index: int) -> Candidate:
    """Render example `index` of `family` as a generated Task plus its target completion."""
    ex = render_example(family, seed, index)
    key = hashlib.sha256(f"{ex.reference}\0{ex.solution}".encode()).hexdigest()
    level = level_of_family(family)
    task = Task(id=f"generated/{family}/{key[:12]}", level=level, name=f"{family}_{index}", source=ex.reference,
                op_family=family, category=category_of(family), origin="generated", description=ex.description,
                reference_solution=ex.solution,
                meta={"variant": ex.variant, **example_meta(ex, index)})
    prompt_task = dataclasses.replace(task, source=ex.published_reference) if ex.published_reference else None
    return Candidate(task, format_completion(ex.solution), ex.solution, ex.variant, key, prompt_task)


def to_sft_example(task: Task, solution: str, variant: str = "", verified: bool = True,
                   meta: dict[str, Any] | None = None) -> SFTExample:
    """The SFT record of `task` (its source is what the prompt shows) and `solution`."""
    rec = sft_record(task, solution)
    key = hashlib.sha256(f"{task.source}\0{solution}".encode()).hexdigest()[:12]
    return SFTExample(id=f"{task.origin}/{task.op_family or task.name}/{key}", task_id=task.id, origin=task.origin,
                      op_family=task.op_family, category=task.category, level=task.level, prompt=rec["prompt"],
                      completion=rec["completion"], source=task.source, solution=solution, variant=variant,
                      verified=verified, meta=dict(meta or {}))


def family_weights(families: Sequence[str], entries: Sequence[str]) -> dict[str, int]:
    """Each of `families`' candidates per round (1 unless an entry "family_or_category:N" names it or
    its category; a family named itself wins over its category). A name that is neither is an error."""
    categories = {cat: fams for cats in FAMILIES.values() for cat, fams in cats.items()}
    by_family: dict[str, int] = {}
    by_category: dict[str, int] = {}
    for name, n in family_weight_entries(entries):
        if name in categories:
            by_category[name] = n
        elif name in {f for fams in categories.values() for f in fams}:
            by_family[name] = n
        else:
            raise ValueError(f"sft_family_weights names {name!r}, neither an op family nor a category; categories: "
                             f"{', '.join(categories)} (tritonrl_lib/tasks/families.py lists their families)")
    return {f: by_family.get(f, by_category.get(category_of(f), 1)) for f in families}


def weights_matching_nothing(families: Sequence[str], entries: Sequence[str]) -> list[str]:
    """The entries (checked by family_weights) that name no family of `families`, themselves or by category:
    a weight on held-out families only, which changes nothing."""
    named = set(families) | {category_of(f) for f in families}
    return [e for e, (name, _) in zip(entries, family_weight_entries(entries)) if name not in named]


def _candidates(families: Sequence[str], seed: int, stats: GenerationStats, limit: int,
                weights: dict[str, int] | None = None) -> Iterable[Candidate]:
    """Unique candidates, round-robin over families (`weights[f]` of family f a round), until `limit`
    have been rendered."""
    seen: set[str] = set()
    active = list(families)
    index = {f: 0 for f in families}
    dup_run = {f: 0 for f in families}
    while active and stats.candidates < limit:
        for fam in [f for f in list(active) for _ in range((weights or {}).get(f, 1))]:
            if fam not in active:
                continue  # exhausted earlier in this round
            if stats.candidates >= limit:
                return
            i = index[fam]
            index[fam] += 1
            stats.candidates += 1
            try:
                cand = make_candidate(fam, seed, i)
            except Exception as e:  # a template bug must not stop the other families
                stats.failures[f"render_error:{type(e).__name__}"] += 1
                continue
            if cand.key in seen:
                stats.duplicates += 1
                dup_run[fam] += 1
                if dup_run[fam] >= MAX_CONSECUTIVE_DUPLICATES:
                    active.remove(fam)
                    stats.exhausted_families.append(fam)
                continue
            dup_run[fam] = 0
            seen.add(cand.key)
            yield cand


def verify_batch(need: int, workers: int) -> int:
    """How many candidates go to the verifier at once when `need` examples are still missing: all of them, an
    eighth more for the ones the verifier drops, and two per worker. A batch ends when its slowest candidate
    does (a convolution under the interpreter, up to 72 s), with the other workers idle meanwhile, so every
    batch boundary costs a tail; batches of 16 per worker spent 2/3 of a 62-worker host's 366 s that way
    (benchmarks/data_batching.py). The examples kept are the same whatever the batch: the first n the
    verifier passes, in stream order."""
    return max(4, need + need // 8 + 2 * workers)


def generate_sft_examples(families: Sequence[str], n: int, seed: int = 0, *, pool=None, verify_config=None,
                          cache: bool | str = True, max_candidates: int | None = None, batch_size: int = 0,
                          progress: bool = True,
                          weights: Sequence[str] = ()) -> tuple[list[SFTExample], GenerationStats]:
    """Up to `n` verified SFT examples drawn from `families` (names of tasks/families.py).

    `weights`: "family_or_category:N" entries (family_weights). `pool` is a VerifierPool to use
    (else one is made from `verify_config` and closed after);
    `cache` is given to a pool made here. At most `max_candidates` (default 2n + 50) are rendered.
    """
    unknown = [f for f in families if f not in TEMPLATES]
    if unknown:
        raise ValueError(f"no template for families {unknown}; templated: {sorted(TEMPLATES)}")
    if not families:
        raise ValueError("no families to generate from: the split left none in training")
    families = list(dict.fromkeys(families))
    per_round = family_weights(families, weights)
    stats = GenerationStats(requested=n, families=families)
    if n <= 0:
        return [], stats
    limit = max_candidates if max_candidates is not None else 2 * n + 50
    own_pool = pool is None
    if own_pool:
        from ..verify import VerifierPool  # imports torch: only when this call starts its own pool

        pool = VerifierPool(verify_config, cache=cache, progress=False)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n, desc="SFT examples", unit="ex")
    kept: list[SFTExample] = []
    start = time.perf_counter()
    stream = iter(_candidates(families, seed, stats, limit, per_round))
    try:
        while len(kept) < n:
            size = batch_size or verify_batch(n - len(kept), getattr(pool, "size", 2))
            batch = [c for _, c in zip(range(size), stream)]
            if not batch:
                break
            verdicts = pool.map([c.task for c in batch], [c.completion for c in batch], progress=bar is not None,
                                desc="verify candidates")
            stats.verified += len(batch)
            for cand, v in zip(batch, verdicts):
                if "verdict from cache" in v.notes:
                    stats.cache_hits += 1
                if not v.correct:
                    stats.record_failure(cand.task.op_family, v.reason or "incorrect", v.error or "")
                    continue
                if len(kept) < n:
                    meta = {k: v for k, v in cand.task.meta.items() if k != "variant"}
                    kept.append(to_sft_example(cand.prompt_task or cand.task, cand.solution, cand.variant,
                                               verified=True, meta=meta))
                    stats.kept_by_family[cand.task.op_family] += 1
                    if bar is not None:
                        bar.update(1)
            if bar is not None:
                bar.set_postfix(candidates=stats.candidates, failed=stats.n_failed, refresh=False)
    finally:
        if bar is not None:
            bar.close()
        if own_pool:
            pool.close()
    stats.kept = len(kept)
    stats.wall_s = time.perf_counter() - start
    return kept, stats


def verify_tasks(tasks: Sequence[Task], pool) -> tuple[list[Task], Counter]:
    """Keep the tasks whose `reference_solution` the verifier passes; count the rest by reason."""
    verdicts = pool.map(list(tasks), [format_completion(t.reference_solution or "") if t.reference_solution else ""
                                      for t in tasks], desc="verify KernelBook")
    kept, failures = [], Counter()
    for t, v in zip(tasks, verdicts):
        if v.correct:
            kept.append(t)
        else:
            failures[v.reason or "incorrect"] += 1
    return kept, failures
