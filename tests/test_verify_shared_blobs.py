"""Large outputs cross from a candidate's process to its worker as sealed memfds: the bytes arrive
intact and in order, nobody can change them after sending, and every way of lying about them (an
unsealed or disk-backed descriptor, a wrong size, a missing descriptor, too many bytes) ends the
candidate with a protocol error instead of reaching the judge."""

from __future__ import annotations

import mmap
import os
import socket
from pathlib import Path

import pytest

from tritonrl_lib.core.config import VerifyConfig
from tritonrl_lib.tasks.task import Task
from tritonrl_lib.verify.sandbox import shared_blobs
from tritonrl_lib.verify.pool import VerifierPool
from tritonrl_lib.verify.sandbox.limits import Limits
from tritonrl_lib.verify.sandbox.protocol import encode_frame, write_all
from tritonrl_lib.verify.sandbox.run import run_sandboxed

pytestmark = pytest.mark.skipif(not shared_blobs.supported(), reason="needs memfd and descriptor passing")

BIG = 3 * shared_blobs.SHARE_MIN_BYTES + 123


def _payload(n: int, seed: int) -> bytes:
    return bytes((i * 131 + seed) % 251 for i in range(256)) * (n // 256) + bytes(n % 256)


def _run(child_fn, tmp_path: Path, max_transfer: int = 1 << 30):
    seen = []

    def on_message(header, blobs):
        seen.append((header, [bytes(b) for b in blobs]))
        return None

    workdir = tmp_path / "cand"
    workdir.mkdir()
    outcome = run_sandboxed(child_fn, on_message, Limits(timeout_s=60, memory_limit_mb=0, cap_address_space=False,
                                                         max_transfer_bytes=max_transfer), str(workdir))
    return outcome, seen


def _sends_mixed(ch):
    ch.send({"type": "x"}, [b"small", _payload(BIG, 1), b"", _payload(BIG + 7, 2)])
    ch.send({"type": "y"}, [_payload(2 * BIG, 3)])


def test_large_blobs_arrive_mapped_intact_and_in_order(tmp_path):
    outcome, seen = _run(_sends_mixed, tmp_path)
    assert outcome.kill_reason is None, outcome
    (hx, bx), (hy, by) = seen
    assert [m[0] for m in hx["mapped"]] == [1, 3]  # only the large ones left the pipe
    assert bx == [b"small", _payload(BIG, 1), b"", _payload(BIG + 7, 2)]
    assert by == [_payload(2 * BIG, 3)]


def test_a_sent_blob_cannot_be_changed_by_anyone():
    fd = shared_blobs.sealed_copy(memoryview(_payload(BIG, 5)))
    try:
        with pytest.raises(PermissionError):
            os.write(fd, b"tampered")
        with pytest.raises(PermissionError):
            mmap.mmap(fd, BIG)  # a writable shared mapping
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 10)
        os.lseek(fd, 0, os.SEEK_SET)
        assert os.read(fd, 64) == _payload(BIG, 5)[:64]
    finally:
        os.close(fd)


def _outputs():
    import torch

    g = torch.Generator().manual_seed(0)
    return [torch.randn(700, 900, generator=g),  # 2.5 MB: sealed straight from the tensor
            torch.randn(900, 700, generator=g).t(),  # not contiguous
            torch.randn(300, 500, dtype=torch.complex64, generator=g),
            torch.rand(2_000_000, generator=g) > 0.5,  # bool, 2 MB
            torch.arange(10, dtype=torch.int64),  # small: inline
            3.5]


def _sends_encoded(ch):
    import torch

    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    # forked from pytest, whose torch may already run a thread pool that a forked child cannot use
    # (a real candidate forks from a worker that never ran a torch op)
    torch.set_num_threads(1)
    metas, blobs = encode_outputs(_outputs(), seal=True)
    assert sum(isinstance(b, shared_blobs.SealedBlob) for b in blobs) == 4
    ch.send({"type": "outputs", "outputs": metas}, blobs)


def test_outputs_sealed_from_the_tensor_arrive_as_the_plain_encoding(tmp_path):
    """encode_outputs(seal=True) copies large outputs straight into sealed memfds; the worker gets
    byte for byte what the plain encoding (tensor -> host bytes) gives, and the same descriptions."""
    from tritonrl_lib.verify.candidate.encoding import encode_outputs

    outcome, seen = _run(_sends_encoded, tmp_path)
    assert outcome.kill_reason is None and outcome.exit_status == 0, outcome
    (header, blobs), = seen
    metas, plain = encode_outputs(_outputs())
    assert header["outputs"] == metas
    assert [m[0] for m in header["mapped"]] == [0, 1, 2, 3]
    assert [bytes(b) for b in blobs] == [bytes(p) for p in plain]


def test_a_sealed_output_cannot_be_changed_and_goes_inline_without_a_socket():
    blob = shared_blobs.sealed_fill(BIG, lambda view: view.__setitem__(slice(None), _payload(BIG, 7)))
    try:
        with pytest.raises(PermissionError):
            os.write(blob.fd, b"tampered")
        with pytest.raises(PermissionError):
            mmap.mmap(blob.fd, BIG)
        assert blob.read() == _payload(BIG, 7)
    finally:
        blob.close()
    blob = shared_blobs.sealed_fill(BIG, lambda view: view.__setitem__(slice(None), _payload(BIG, 8)))
    inline, mapped = shared_blobs.send_blobs(None, [b"x", blob])
    assert inline == [b"x", _payload(BIG, 8)] and mapped == [] and blob.fd == -1


def _frame_with_descriptor(make_fd, announced: int):
    """A child that passes the descriptor `make_fd()` for a blob it announces as `announced` bytes."""

    def child(ch):
        fd = make_fd()
        socket.send_fds(ch.blob_sock, [shared_blobs.FD_TAG], [fd])
        write_all(ch.out_fd, encode_frame({"type": "cand", "mapped": [[0, announced]]}, []))
        ch.send({"type": "after"})

    return child


def _unsealed():
    fd = os.memfd_create("x", os.MFD_ALLOW_SEALING)
    os.write(fd, _payload(BIG, 0))
    return fd


def _disk_file():
    fd = os.open("blob.bin", os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, _payload(BIG, 0))
    return fd


def _sealed():
    return shared_blobs.sealed_copy(memoryview(_payload(BIG, 0)))


@pytest.mark.parametrize("make_fd,announced,words", [
    (_unsealed, BIG, "not sealed"),
    (_disk_file, BIG, "not a sealable memory file"),
    (_sealed, BIG - 1, "were announced"),
    (_sealed, BIG + 1, "were announced"),
])
def test_a_dishonest_descriptor_is_a_protocol_error(tmp_path, make_fd, announced, words):
    outcome, seen = _run(_frame_with_descriptor(make_fd, announced), tmp_path)
    assert outcome.kill_reason == "protocol_error" and words in outcome.detail, outcome
    assert seen == []  # nothing of it reached the judge


def _announces_without_sending(ch):
    write_all(ch.out_fd, encode_frame({"type": "cand", "mapped": [[0, 4096]]}, []))


def _malformed_list(ch):
    write_all(ch.out_fd, encode_frame({"type": "cand", "mapped": [[5, 4096]]}, [b"x"]))


def _too_much(ch):
    ch.send({"type": "cand"}, [_payload(BIG, 0)])


@pytest.mark.parametrize("child,words,limit", [
    (_announces_without_sending, "no descriptor was sent", 1 << 30),
    (_malformed_list, "malformed", 1 << 30),
    (_too_much, "transfer limit", BIG - 10),
])
def test_missing_malformed_or_oversized_mapped_blobs_are_refused(tmp_path, child, words, limit):
    outcome, seen = _run(child, tmp_path, max_transfer=limit)
    assert outcome.kill_reason == "protocol_error" and words in outcome.detail, outcome
    assert seen == []


# --------------------------------------------------------------------------- through the pool

# the verifier cases' relu task at 2 MiB per tensor: above the size that leaves the pipe
WIDE_RELU = (Path(__file__).parent / "verifier_cases" / "tasks" / "relu.py").read_text().replace(
    "batch_size = 16", "batch_size = 256").replace("dim = 256", "dim = 2048")

RELU = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, SELECT, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 16384),)](x, out, x.numel(), BLOCK=16384)
        return out
"""


def test_outputs_of_megabytes_are_judged_right_through_the_pool():
    assert "batch_size = 256" in WIDE_RELU and "dim = 2048" in WIDE_RELU
    task = Task(id="test/wide_relu", level=1, name="wide_relu", source=WIDE_RELU)
    right = RELU.replace("SELECT", "tl.where(x > 0, x, 0.0)")
    # wrong on a few values only: max(x, 0) except where x is within 1e-3 above 0.5
    wrong = RELU.replace("SELECT", "tl.where((x > 0.5) & (x < 0.501), 0.0, tl.where(x > 0, x, 0.0))")
    with VerifierPool(VerifyConfig(timeout_s=120), workers=1, device="cpu", cache=False, progress=False) as pool:
        good, bad = pool.map(task, [right, wrong])
    assert good.correct, (good.reason, good.error)
    assert [e["shape"] for e in good.errors if e["name"] == "original"] == [[256, 2048]]  # 2 MiB: mapped
    assert not bad.correct and bad.reason.startswith("mismatch:")
    assert "values differ" in bad.error
