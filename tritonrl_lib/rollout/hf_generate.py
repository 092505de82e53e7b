"""The fallback engine: `model.generate` with left padding and the stop rules (`stopping.py`) as a
StoppingCriteria. Any causal LM, PeftModel or quantised model; used where the lean engine does not
apply (or is asked not to)."""

from __future__ import annotations

import time
from typing import Any

from .batches import BatchPlan, Progress, sync
from .results import RolloutStats
from .settings import SamplingConfig
from .stopping import SequenceTracker


def model_device(model):
    """The device of the model's first parameter (the CPU for a model without any)."""
    import torch

    try:
        return next(model.parameters()).device
    except StopIteration:
        return torch.device("cpu")


def generate_hf(model, tokenizer, enc: list[list[int]], sampling: SamplingConfig, stats: RolloutStats,
                pieces: list[str], eos: frozenset, progress: bool) -> list[SequenceTracker]:
    """`sampling.n_samples` sequences for each prompt of token ids `enc`, through `model.generate`."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    dev = model_device(model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos or {0})
    plan = BatchPlan([len(p) for p in enc], sampling.n_samples, sampling.batch_size)
    all_trackers: list[SequenceTracker] = []

    class _Stop(StoppingCriteria):
        def __init__(self, trackers: list[SequenceTracker], t0: float, prog: Progress):
            self.trackers, self.t0, self.prog = trackers, t0, prog

        def __call__(self, input_ids, scores, **kwargs):
            last = input_ids[:, -1].tolist()
            now = time.perf_counter() - self.t0
            done, read = [], 0
            for tr, token in zip(self.trackers, last):
                if not tr.reason:
                    piece = pieces[token] if token < len(pieces) else ""
                    read += 1
                    if tr.push(token, piece, eos, sampling.max_new_tokens):
                        tr.seconds = now
                        self.prog.finished()
                done.append(bool(tr.reason))
            self.prog.advance(1, read)
            self.prog.tick()
            return torch.tensor(done, device=input_ids.device)

    with Progress(plan.sequences, sampling.max_new_tokens, progress, batches=len(plan.batches)) as prog, \
            torch.random.fork_rng(devices=[dev.index if dev.index is not None else torch.cuda.current_device()]
                                  if dev.type == "cuda" else []):
        for bi, batch in enumerate(plan.batches):
            stats.batches += 1
            prog.start_batch()
            torch.manual_seed(int(sampling.seed) * 1000003 + bi)
            trackers = [SequenceTracker(p, s, len(enc[p]), sampling.stop_at_fence, sampling.loop_lines)
                        for p, s in batch]
            all_trackers.extend(trackers)
            width = max(len(enc[p]) for p, _ in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, (p, _) in enumerate(batch):
                ids[r, width - len(enc[p]):] = torch.tensor(enc[p])  # left padding
                mask[r, width - len(enc[p]):] = 1
            kwargs: dict[str, Any] = dict(max_new_tokens=sampling.max_new_tokens, pad_token_id=pad,
                                          eos_token_id=sorted(eos) or None, use_cache=True)
            if sampling.temperature > 0:
                kwargs.update(do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
            else:
                kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
            sync(dev)
            t0 = time.perf_counter()
            stopper = _Stop(trackers, t0, prog)
            model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev),
                           stopping_criteria=StoppingCriteriaList([stopper]), **kwargs)
            sync(dev)
            for tr in trackers:
                if not tr.reason:
                    tr.reason = "length"
                    tr.seconds = time.perf_counter() - t0
                    prog.finished()
    if sampling.return_logprobs:
        score_logprobs(model, enc, all_trackers, sampling)
    return all_trackers


def score_logprobs(model, enc: list[list[int]], trackers: list[SequenceTracker], sampling: SamplingConfig) -> None:
    """Per-token log p under softmax(logits / T) by one forward pass per sequence (the lean engine
    records them while sampling; `model.generate` does not)."""
    import torch

    dev = model_device(model)
    temp = sampling.temperature if sampling.temperature > 0 else 1.0
    for tr in trackers:
        if not tr.tokens:
            continue
        ids = torch.tensor([enc[tr.prompt_index] + tr.tokens], device=dev)
        logits = model(input_ids=ids).logits[0, tr.prompt_len - 1:-1].float() / temp
        tr.logprobs = torch.log_softmax(logits, -1).gather(
            -1, torch.tensor(tr.tokens, device=dev).unsqueeze(-1)).squeeze(-1).tolist()
