"""verify/sandbox/host_copy.py: large outputs from the GPU into a memfd's mapping through pinned staging."""

from __future__ import annotations

import mmap
import os

import pytest
import torch

from tritonrl_lib.verify.sandbox import host_copy, shared_blobs
from tritonrl_lib.verify.candidate.encoding import encode_outputs


def _mapping(n: int):
    fd = os.memfd_create("t", os.MFD_CLOEXEC)
    os.ftruncate(fd, n)
    return fd, mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def test_a_host_tensor_is_copied_plainly_and_sizes_must_match():
    src = torch.randint(0, 255, (4096,), dtype=torch.uint8)
    fd, mm = _mapping(4096)
    try:
        host_copy.copy_to_mapping(memoryview(mm), src)
        assert bytes(mm[:]) == src.numpy().tobytes()
        with pytest.raises(ValueError, match="4095 bytes into a mapping of 4096"):
            host_copy.copy_to_mapping(memoryview(mm), src[:4095])
    finally:
        mm.close()
        os.close(fd)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the staged path copies from a GPU")
@pytest.mark.parametrize("chunks", [4.0, 5.0, 6.37])  # the smallest staged size, whole chunks, a ragged tail
def test_staged_copy_from_the_gpu_is_exact(monkeypatch, chunks):
    monkeypatch.setattr(host_copy, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(host_copy, "MIN_STAGED_BYTES", 4 << 20)
    n = int(chunks * (1 << 20))
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    fd, mm = _mapping(n)
    try:
        host_copy.copy_to_mapping(memoryview(mm), src)
        assert bytes(mm[:]) == src.cpu().numpy().tobytes()
    finally:
        mm.close()
        os.close(fd)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="outputs sealed from the GPU")
def test_a_large_gpu_output_is_sealed_byte_for_byte():
    out = torch.randn(40 << 20, device="cuda")  # 160 MiB: the staged path at its real chunk size
    metas, blobs = encode_outputs([out], seal=True)
    assert isinstance(blobs[0], shared_blobs.SealedBlob) and metas[0]["shape"] == [40 << 20]
    assert blobs[0].read() == out.cpu().numpy().tobytes()
    blobs[0].close()
