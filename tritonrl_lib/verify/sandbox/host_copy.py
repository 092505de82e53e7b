"""Large outputs from the GPU into a memfd's mapping, at the speed of pinned copies.

A copy from the device into pageable memory (the memfd the worker will map) runs at the driver's
staging speed; at KernelBench's published sizes (outputs up to 6 GiB, one per input set) that was
4-6 s per set, most of a big task's reference phase (benchmarks/host_transfer.py measures it).
Here the bytes go through two page-locked staging buffers in chunks: the copy of chunk i+1 from
the device overlaps the host's copy of chunk i into the mapping.

The staging buffers held reference bytes: they are zeroed before they go back to PyTorch's pinned
memory cache, so nothing of a reference output stays where the candidate's code could read it.
"""

from __future__ import annotations

import torch

CHUNK_BYTES = 64 << 20
MIN_STAGED_BYTES = 4 * CHUNK_BYTES  # below this the plain copy is as fast


def staged(nbytes: int) -> bool:
    """Whether a GPU output of this size goes through the staging buffers. Its memfd's pages are then
    best left unpopulated: the staged host copy faults them in on all of PyTorch's threads, where one
    thread populating 6 GiB of shared memory up front took 4.8 s on the H100 machine."""
    return nbytes >= MIN_STAGED_BYTES


def copy_to_mapping(view: memoryview, flat: torch.Tensor) -> None:
    """Copy the contiguous uint8 tensor `flat` (any device) into `view`, byte for byte."""
    dst = torch.frombuffer(view, dtype=torch.uint8)
    n = flat.numel()
    if dst.numel() != n:
        raise ValueError(f"copy_to_mapping: {n} bytes into a mapping of {dst.numel()}")
    if flat.device.type != "cuda" or not staged(n):
        dst.copy_(flat)
        return
    stream = torch.cuda.Stream(device=flat.device)
    stream.wait_stream(torch.cuda.current_stream(flat.device))
    bufs = [torch.empty(CHUNK_BYTES, dtype=torch.uint8, pin_memory=True) for _ in range(2)]
    done = [torch.cuda.Event(), torch.cuda.Event()]
    starts = list(range(0, n, CHUNK_BYTES))
    try:
        with torch.cuda.stream(stream):
            for i, a in enumerate(starts):
                b = min(a + CHUNK_BYTES, n)
                slot = i % 2  # free: chunk i-2, its last user, was drained in the previous iteration
                bufs[slot][: b - a].copy_(flat[a:b], non_blocking=True)
                done[slot].record(stream)
                if i >= 1:
                    _drain(dst, bufs, done, starts, i - 1, n)
            _drain(dst, bufs, done, starts, len(starts) - 1, n)
    finally:
        stream.synchronize()  # the side stream is done with `flat` before the caller may free it
        for buf in bufs:
            buf.zero_()


def _drain(dst: torch.Tensor, bufs: list[torch.Tensor], done: list[torch.cuda.Event], starts: list[int],
           i: int, n: int) -> None:
    """Wait for chunk i's device copy, then copy it from its staging buffer into the mapping."""
    a = starts[i]
    b = min(a + CHUNK_BYTES, n)
    done[i % 2].synchronize()
    dst[a:b].copy_(bufs[i % 2][: b - a])
