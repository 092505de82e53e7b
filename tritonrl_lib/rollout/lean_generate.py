"""The lean engine's decode loop: batches of sequences through a `LeanDecoder`.

Per batch: each distinct prompt is prefilled once and its KV copied to the rows of its other
samples; then every step samples a token per row in torch (an exponential race: no host sync),
and only every `check_every` steps the new tokens are read on the host, where the stop rules
(`stopping.py`) finish rows; finished rows are compacted away whenever the live ones fit a smaller
power-of-two bucket (the buckets the CUDA graphs are captured for).
"""

from __future__ import annotations

import math
import time

from .batches import BatchPlan, Progress, sync
from .lean import LeanDecoder
from .results import RolloutStats
from .settings import SamplingConfig
from .stopping import SequenceTracker


def generate_lean(lean: LeanDecoder, enc: list[list[int]], sampling: SamplingConfig, stats: RolloutStats,
                  pieces: list[str], eos: frozenset, progress: bool) -> list[SequenceTracker]:
    """`sampling.n_samples` sequences for each prompt of token ids `enc`, tracked to their stop."""
    import torch

    dev = lean.device
    gen = torch.Generator(device=dev)
    gen.manual_seed(int(sampling.seed))
    n, max_new = sampling.n_samples, sampling.max_new_tokens
    plan = BatchPlan([len(p) for p in enc], n, sampling.batch_size)
    rows = min(sampling.batch_size, len(enc) * n)
    lean.ensure_cache(rows, max(len(p) for p in enc) + max_new)
    graphs_before = lean.graphs_captured
    all_trackers: list[SequenceTracker] = []
    with Progress(plan.sequences, max_new, progress, batches=len(plan.batches)) as prog:
        for batch in plan.batches:
            stats.batches += 1
            prog.start_batch()
            sync(dev)
            t_batch = time.perf_counter()
            trackers = [SequenceTracker(p, s, len(enc[p]), sampling.stop_at_fence, sampling.loop_lines)
                        for p, s in batch]
            all_trackers.extend(trackers)
            t_pre = time.perf_counter()
            logits = _prefill(lean, enc, batch, prog)
            sync(dev)
            stats.prefill_s += time.perf_counter() - t_pre
            _decode(lean, enc, batch, trackers, logits, sampling, stats, gen, pieces, eos, t_batch, prog)
    stats.cuda_graphs = lean.graphs_captured - graphs_before
    return all_trackers


def _prefill(lean: LeanDecoder, enc: list[list[int]], batch: list[tuple[int, int]], prog: Progress):
    """Prefill each distinct prompt of `batch` once, into the slot of its first sample, and copy its
    KV to its other samples' slots. -> logits (b, V) of the first token of every slot."""
    import torch

    dev = lean.device
    prefill_tokens = 16384 if dev.type == "cuda" else 2048
    b = len(batch)
    first_slot: dict[int, int] = {}
    for slot, (p, _) in enumerate(batch):
        first_slot.setdefault(p, slot)
    uniq = list(first_slot.items())
    logits = torch.empty(b, lean.vocab, device=dev, dtype=torch.float32)
    i = 0
    while i < len(uniq):
        width = len(enc[uniq[i][0]])  # uniq is longest-first
        j = i + max(1, prefill_tokens // max(width, 1))
        part = uniq[i:j]
        ids = torch.zeros(len(part), width, dtype=torch.long)
        for r, (p, _) in enumerate(part):
            ids[r, :len(enc[p])] = torch.tensor(enc[p])
        slots = torch.tensor([s for _, s in part], device=dev)
        lengths = torch.tensor([len(enc[p]) for p, _ in part], device=dev)
        logits[slots] = lean.prefill(slots, ids.to(dev), lengths)
        i = j
        prog.tick()  # long prompts on a CPU: seconds per chunk
    src = [first_slot[p] for p, _ in batch]
    dup = [s for s in range(b) if src[s] != s]
    if dup:
        dst_t = torch.tensor(dup, device=dev)
        src_t = torch.tensor([src[s] for s in dup], device=dev)
        lean.copy_rows(src_t, dst_t)
        logits[dst_t] = logits[src_t]
    return logits


def _decode(lean: LeanDecoder, enc: list[list[int]], batch: list[tuple[int, int]], trackers: list[SequenceTracker],
            logits, sampling: SamplingConfig, stats: RolloutStats, gen, pieces: list[str], eos: frozenset,
            t_batch: float, prog: Progress) -> None:
    """Sample and decode the prefilled batch until every row has stopped or reached max_new_tokens."""
    import torch

    dev = lean.device
    max_new = sampling.max_new_tokens
    check_every = sampling.check_every or (8 if dev.type == "cuda" else 1)
    b = len(batch)
    lens = torch.tensor([len(enc[p]) for p, _ in batch], device=dev)
    hist = torch.zeros(b, max_new, dtype=torch.long, device=dev)
    lp_hist = torch.zeros(b, max_new, dtype=torch.float32, device=dev) if sampling.return_logprobs else None
    slot_of = list(range(b))  # slot -> tracker index
    cur_b = b
    buckets = _buckets(b)
    tok, lp = sample_tokens(logits, sampling.temperature, sampling.top_p, gen, sampling.return_logprobs)
    hist[:, 0] = tok
    if lp_hist is not None:
        lp_hist[:, 0] = lp
    lean.tok[:b] = tok
    lean.pos[:b] = lens
    max_len = int(max(len(enc[p]) for p, _ in batch))
    checked = 0  # tokens [0, checked) of every live row have been read on the host
    step = 0  # index of the last sampled token
    active = b
    while True:
        due = step + 1 - checked >= check_every or step + 1 >= max_new
        if due:
            before_b = cur_b
            active, cur_b = _read_new_tokens(trackers, slot_of, hist, lp_hist, checked, step + 1, cur_b, max_new,
                                             t_batch, buckets, lean, pieces, eos, prog)
            stats.compactions += cur_b < before_b
            checked = step + 1
            if active == 0 or step + 1 >= max_new:
                break
        L = min(lean.length, int(math.ceil((max_len + step + 1) / 128) * 128))
        logits = lean.decode(cur_b, L)
        tok, lp = sample_tokens(logits, sampling.temperature, sampling.top_p, gen, sampling.return_logprobs)
        step += 1
        stats.decode_steps += 1
        hist[:cur_b, step] = tok
        if lp_hist is not None:
            lp_hist[:cur_b, step] = lp
        lean.tok[:cur_b] = tok
        lean.pos[:cur_b] += 1
    for tr in trackers:  # rows still running at max_new_tokens
        if not tr.reason:
            tr.reason = "length"
            tr.seconds = time.perf_counter() - t_batch
            prog.finished()


def _read_new_tokens(trackers: list[SequenceTracker], slot_of: list[int], hist, lp_hist, start: int, stop: int,
                     cur_b: int, max_new: int, t_batch: float, buckets: list[int], lean: LeanDecoder,
                     pieces: list[str], eos: frozenset, prog: Progress) -> tuple[int, int]:
    """Read tokens [start, stop) of the live rows on the host, finish rows that stopped, and
    compact the batch when it fits a smaller bucket. -> (live rows, rows decoded from now)."""
    import torch

    block = hist[:cur_b, start:stop].tolist()
    lps = lp_hist[:cur_b, start:stop].tolist() if lp_hist is not None else None
    now = time.perf_counter() - t_batch
    n_pieces = len(pieces)
    live = []
    read = 0
    for slot in range(cur_b):
        ti = slot_of[slot]
        if ti < 0:
            continue
        tr = trackers[ti]
        if tr.reason:
            continue
        row = block[slot]
        before = len(tr.tokens)
        for j, token in enumerate(row):
            if tr.push(token, pieces[token] if token < n_pieces else "", eos, max_new,
                       lps[slot][j] if lps is not None else None):
                break
        read += len(tr.tokens) - before
        if tr.reason:
            tr.seconds = now
            prog.finished()
        else:
            live.append(slot)
    prog.advance(stop - start, read)
    prog.tick()
    target = next(bk for bk in buckets if bk >= max(len(live), 1))
    if live and target < cur_b:
        keep = torch.tensor(live, device=lean.device)
        lean.compact(keep, target)
        hist[:len(live)] = hist[keep]
        if lp_hist is not None:
            lp_hist[:len(live)] = lp_hist[keep]
        new_slots = [slot_of[s] for s in live] + [-1] * (target - len(live))
        slot_of[:] = new_slots + [-1] * (len(slot_of) - len(new_slots))
        cur_b = target
    return len(live), cur_b


def _buckets(n: int) -> list[int]:
    """The batch sizes rows are compacted to: 8, 16, 32, ... below n, then n itself."""
    out, b = [], 8
    while b < n:
        out.append(b)
        b *= 2
    return out + [n]


def sample_tokens(logits, temperature: float, top_p: float, generator, want_logprobs: bool):
    """Next tokens (b,) and, when asked, log p(token) under softmax(logits / temperature)."""
    import torch

    if temperature == 0:
        tokens = logits.argmax(-1)
        scaled = logits
    else:
        scaled = logits / temperature
        if top_p < 1.0:
            sorted_logits, order = torch.sort(scaled, descending=True)
            probs = torch.softmax(sorted_logits, -1)
            drop = (probs.cumsum(-1) - probs) > top_p  # keeps the first token always
            probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), -1)
            noise = torch.empty_like(probs).exponential_(generator=generator)
            tokens = order.gather(-1, (probs / noise).argmax(-1, keepdim=True)).squeeze(-1)
        else:
            probs = torch.softmax(scaled, -1)
            noise = torch.empty_like(probs).exponential_(generator=generator)
            tokens = (probs / noise).argmax(-1)  # an exponential race: an exact sample, no host sync
    lp = None
    if want_logprobs:
        lp = torch.log_softmax(scaled, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    return tokens, lp
