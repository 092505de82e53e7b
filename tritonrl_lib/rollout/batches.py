"""How both engines walk through the sequences: (prompt, sample) pairs cut into decode batches,
a progress bar over them, and the device sync that makes a batch's timings honest."""

from __future__ import annotations

import contextlib


class BatchPlan:
    """Sequences (prompt, sample) ordered by prompt length, cut into batches of whole prompts
    where possible."""

    def __init__(self, lengths: list[int], n: int, batch: int):
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        seqs = [(p, s) for p in order for s in range(n)]
        self.batches = [seqs[i:i + batch] for i in range(0, len(seqs), batch)]

    @property
    def sequences(self) -> int:
        return sum(len(b) for b in self.batches)


def progress_bar(total: int, enabled: bool):
    """A tqdm bar over `total` sequences, or a context holding None when progress is off."""
    if not enabled:
        return contextlib.nullcontext(None)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="rollout", unit="seq")


def sync(device) -> None:
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)
