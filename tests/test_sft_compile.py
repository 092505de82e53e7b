"""The opt-in `compile` speed option: decoder layers compiled in place give the same completion
loss as eager ones (inductor on the CPU here; the GPU benchmark times it)."""

from __future__ import annotations

import shutil

import pytest
import torch

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config
from tritonrl_lib.train.trainer import SpeedOptions, build_trainer, completion_nll
from tritonrl_lib.train.sft.train import load_sft_dataset
from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="inductor needs a C compiler on the CPU")
def test_compiled_decoder_layers_give_the_same_loss(run_dir):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "max_seq_len": 768,
                                              "per_device_batch_size": 2})
        write_records(cfg.paths.sft_train, toy_sft_records(4))
        ds = load_sft_dataset(cfg.paths, 4, 0)
        results, plans = [], []
        for compiled in (False, True):
            torch.manual_seed(0)  # the same LoRA initialisation both times
            model, tok = models.load_policy(cfg)
            with torch.no_grad():
                gen = torch.Generator().manual_seed(1)
                for name, p in model.named_parameters():
                    if "lora_B" in name:
                        p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            trainer, plan = build_trainer(cfg, ds, model, tok, cfg.paths.sft_checkpoint,
                                          SpeedOptions(compile=compiled))
            results.append(completion_nll(trainer))
            plans.append(plan)
        assert "2 decoder layers compiled" in plans[1]
        assert results[0][1] == results[1][1]
        assert results[1][0] == pytest.approx(results[0][0], rel=1e-5)
    finally:
        torch.set_num_threads(before)
