"""How fast a large reference output gets from the GPU into a memfd (the verifier's way to the worker).

    python benchmarks/host_transfer.py --gib 6            # GPU machine; prints one row per method

The verifier's child copies every large output of the reference (and of the candidate) into a sealed
memfd that the worker maps (shared_blobs.py). At KernelBench's published sizes an output is up to
6 GiB, and a trace of the reference phase (TRITONRL_TRACE) showed that copy taking 4-6 s per input
set. This measures the parts separately: making the memfd with its pages populated, the copy from
the device into it, and alternatives (pages populated by the copy itself, a pinned staging buffer,
the mapping registered with CUDA, transparent huge pages).
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    import torch

    from tritonrl_lib.verify.sandbox import shared_blobs
    from tritonrl_lib.verify.sandbox.host_copy import copy_to_mapping

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=6.0)
    args = ap.parse_args(argv)
    n = int(args.gib * 2**30)
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    for f in ("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "/sys/kernel/mm/transparent_hugepage/enabled"):
        try:
            print(f"{f}: {Path(f).read_text().strip()}")
        except OSError as e:
            print(f"{f}: {e}")
    print(f"torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
    rows = []

    def row(name, make_s, copy_s):
        rows.append((name, make_s, copy_s))
        print(f"{name:48s} make {make_s:6.2f} s  copy {copy_s:6.2f} s  total {make_s + copy_s:6.2f} s  "
              f"({n / 2**30 / (make_s + copy_s):5.2f} GiB/s)", flush=True)

    def check(blob):
        with mmap.mmap(blob.fd, 1 << 20, prot=mmap.PROT_READ) as mm:
            head = bytes(mm)
        assert head == src[: 1 << 20].cpu().numpy().tobytes(), "copied bytes differ"

    # 1. today's way: populated blank, pageable copy straight into the mapping
    blank, make = timed(lambda: shared_blobs.BlankBlob(n))
    sealed, copy = timed(lambda: blank.seal(lambda v: torch.frombuffer(v, dtype=torch.uint8).copy_(src)))
    check(sealed)
    sealed.close()
    row("populated ahead, pageable copy (before host_copy)", make, copy)

    def pageable(mm):
        with memoryview(mm) as view:
            t = torch.frombuffer(view, dtype=torch.uint8)
            t.copy_(src)
            del t

    # 2. the copy faults the pages in itself
    def unpopulated():
        fd = os.memfd_create("t", os.MFD_CLOEXEC)
        os.ftruncate(fd, n)
        return fd, mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)

    (fd, mm), make = timed(unpopulated)
    _, copy = timed(lambda: pageable(mm))
    row("unpopulated memfd, pageable copy", make, copy)
    mm.close()
    os.close(fd)

    # 3. huge pages asked for on the mapping, populated by the copy
    def huge():
        fd = os.memfd_create("t", os.MFD_CLOEXEC)
        os.ftruncate(fd, n)
        m = mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            m.madvise(mmap.MADV_HUGEPAGE)
        except (AttributeError, OSError) as e:
            print(f"MADV_HUGEPAGE: {e}")
        return fd, m

    (fd, mm), make = timed(huge)
    _, copy = timed(lambda: pageable(mm))
    row("memfd + MADV_HUGEPAGE, pageable copy", make, copy)
    mm.close()
    os.close(fd)

    # 4. the project's copy (host_copy.copy_to_mapping: pinned staging, chunked, overlapped)
    blank, make = timed(lambda: shared_blobs.BlankBlob(n, populate=False))
    sealed, copy = timed(lambda: blank.seal(lambda v: copy_to_mapping(v, src)))
    check(sealed)
    sealed.close()
    row("host_copy.copy_to_mapping (unpopulated)", make, copy)
    blank, make = timed(lambda: shared_blobs.BlankBlob(n))
    sealed, copy = timed(lambda: blank.seal(lambda v: copy_to_mapping(v, src)))
    check(sealed)
    sealed.close()
    row("host_copy.copy_to_mapping (populated blank)", make, copy)

    # 5. the mapping registered with CUDA (page-locked in place), then one DMA
    def registered():
        fd = os.memfd_create("t", os.MFD_CLOEXEC)
        os.ftruncate(fd, n)
        m = mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        view = memoryview(m)
        t = torch.frombuffer(view, dtype=torch.uint8)
        rc = torch.cuda.cudart().cudaHostRegister(t.data_ptr(), n, 0)
        return fd, m, view, t, rc

    (fd, mm, view, t, rc), make = timed(registered)
    if int(rc) == 0:
        _, copy = timed(lambda: (t.copy_(src), torch.cuda.synchronize()))
        torch.cuda.cudart().cudaHostUnregister(t.data_ptr())
        row("memfd registered with CUDA, one copy", make, copy)
    else:
        print(f"cudaHostRegister: {rc}")
    del t
    view.release()
    mm.close()
    os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
