"""The fused RMSNorm / SwiGLU Triton kernels of SFT, run under the Triton interpreter: the same values
and gradients as the eager modules they replace, alone and inside a LoRA model."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(900)

# TRITON_INTERPRET must be set before triton.jit runs, so the checks run in a fresh interpreter.
CHECK = textwrap.dedent('''
    import torch
    from tritonrl_lib.train.sft.fused_ops import fuse_model, rms_norm, swiglu
    torch.manual_seed(0)

    def eager_norm(x, w, eps):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(x.dtype)

    # RMSNorm: a width that is not a power of two, rows in a 3-d batch, a trainable weight too
    for trainable in (False, True):
        x = torch.randn(2, 7, 100, requires_grad=True)
        w = (torch.rand(100) + 0.5).requires_grad_(trainable)
        y = rms_norm(x, w, 1e-5)
        dy = torch.randn_like(y)
        y.backward(dy)
        got = (y.detach(), x.grad.clone(), None if w.grad is None else w.grad.clone())
        x.grad, w.grad = None, None
        ref = eager_norm(x, w, 1e-5)
        ref.backward(dy)
        torch.testing.assert_close(got[0], ref.detach())
        torch.testing.assert_close(got[1], x.grad)
        if trainable:
            torch.testing.assert_close(got[2], w.grad)

    # half-precision activations with an fp32 weight (k-bit training upcasts norms): fp32 out, as eager
    x = torch.randn(4, 96).half().requires_grad_(True)
    w = torch.rand(96) + 0.5
    y = rms_norm(x, w, 1e-6)
    dy = torch.randn_like(y)
    y.backward(dy)
    got = (y.detach(), x.grad.clone())
    x.grad = None
    ref = eager_norm(x, w, 1e-6)
    ref.backward(dy)
    assert got[0].dtype == ref.dtype == torch.float32 and got[1].dtype == torch.float16
    torch.testing.assert_close(got[0], ref.detach())
    torch.testing.assert_close(got[1], x.grad, atol=2e-3, rtol=2e-3)

    # SwiGLU over a size that leaves a partial last block
    g = torch.randn(3, 5, 333, requires_grad=True)
    u = torch.randn(3, 5, 333, requires_grad=True)
    h = swiglu(g, u)
    dh = torch.randn_like(h)
    h.backward(dh)
    got = (h.detach(), g.grad.clone(), u.grad.clone())
    g.grad, u.grad = None, None
    ref = torch.nn.functional.silu(g) * u
    ref.backward(dh)
    torch.testing.assert_close(got[0], ref.detach())
    torch.testing.assert_close(got[1], g.grad)
    torch.testing.assert_close(got[2], u.grad)

    # inside the tiny LoRA model: same loss and same adapter gradients
    from tritonrl_lib.model import load as models
    from tritonrl_lib.core.config import load_config
    cfg = load_config("smoke", overrides={"lora_target_modules": ["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"]})
    ids = torch.randint(0, 1000, (2, 24))

    def loss_and_grads(fused):
        torch.manual_seed(1)
        model, _ = models.load_policy(cfg)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.2)
        counts = fuse_model(model) if fused else None
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.item(), {n: p.grad for n, p in model.named_parameters() if p.requires_grad}, counts

    eager_loss, eager_grads, _ = loss_and_grads(False)
    fused_loss, fused_grads, counts = loss_and_grads(True)
    assert counts == {"rms_norm": 5, "swiglu": 2}, counts  # 2 per layer + the final norm; 1 MLP per layer
    assert abs(eager_loss - fused_loss) < 1e-5, (eager_loss, fused_loss)
    for name in eager_grads:
        torch.testing.assert_close(fused_grads[name], eager_grads[name], atol=1e-5, rtol=1e-4)
    print("FUSED OK")
''')


@pytest.mark.slow
def test_fused_kernels_match_eager_under_the_interpreter(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=800,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "FUSED OK" in proc.stdout, (proc.stdout + proc.stderr)[-4000:]


def test_fused_kernels_are_refused_on_a_cpu_run_without_the_interpreter(run_dir):
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("the interpreter is on in this process")
    from tritonrl_lib.model import load as models
    from tritonrl_lib.core.config import ConfigError, load_config
    from tritonrl_lib.train.trainer import SpeedOptions, build_trainer
    from tritonrl_lib.train.sft.train import load_sft_dataset
    from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records

    cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "max_seq_len": 768})
    write_records(cfg.paths.sft_train, toy_sft_records(2))
    model, tok = models.load_policy(cfg)
    ds = load_sft_dataset(cfg.paths, 2, 0)
    with pytest.raises(ConfigError, match="CUDA"):
        build_trainer(cfg, ds, model, tok, cfg.paths.sft_checkpoint, SpeedOptions(fused_kernels=True))
