"""SFT: completion-only labels, packed batches that keep sequences apart, training that learns,
the log, reuse of a finished checkpoint, and the errors users hit. The tiny model, in process."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from tritonrl_lib.report import charts
from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import load_config
from tritonrl_lib.core.jsonio import read_jsonl
from tritonrl_lib.train.sft import packed_attention
from tritonrl_lib.train.trainer import SFTDataError, SpeedOptions, build_trainer, completion_nll, fit_to_length
from tritonrl_lib.train.sft.train import load_sft_dataset, main, train_sft
from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records
from tritonrl_lib.train.trainer_checkpoints import checkpoint_is_complete, checkpoint_step, latest_complete_checkpoint

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(autouse=True)
def one_thread():
    """Two shared cores: one BLAS thread per process avoids oversubscription stalls."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_dir():
    # a fixed folder for the whole module: the tiny model's cache key follows the built-in tasks' files
    return str(models.tiny_model_dir())


@pytest.fixture
def make_cfg(run_dir, tiny_dir):
    def make(run: str = "t", n: int = 6, **overrides):
        cfg = load_config("smoke", overrides={"outputs_dir": str(run_dir), "run": run, "model": tiny_dir,
                                              "max_seq_len": 768, "max_samples": n, **overrides})
        write_records(cfg.paths.sft_train, toy_sft_records(n))
        return cfg
    return make


def _n_tokens(tok, messages, gen):
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
    return tok(text, add_special_tokens=False)["input_ids"]


def _trainer(cfg, packing, model=None, tok=None):
    if model is None:
        model, tok = models.load_policy(cfg)
    ds = load_sft_dataset(cfg.paths, cfg.sft.max_samples, cfg.seed)
    trainer, plan = build_trainer(cfg, ds, model, tok, cfg.paths.sft_checkpoint, SpeedOptions(packing=packing))
    return trainer, ds, tok, plan


def _check_segment(tok, ids: list[int], labels: list[int], examples) -> None:
    """`ids` is one whole example: its prompt tokens are masked, its completion tokens are the labels."""
    matches = [ex for ex in examples if _n_tokens(tok, ex["prompt"] + ex["completion"], False) == ids]
    assert len(matches) >= 1, "a collated sequence is not one of the examples"
    ex = matches[0]
    n_prompt = len(_n_tokens(tok, ex["prompt"], True))
    assert all(label == -100 for label in labels[:n_prompt])
    assert labels[n_prompt:] == ids[n_prompt:]
    completion = tok.decode(ids[n_prompt:])
    assert completion.startswith("```python\nimport torch") and completion.endswith("```<|im_end|>\n")


@pytest.mark.parametrize("packing", [False, True])
def test_collated_batch_masks_the_prompt_and_trains_on_the_completion(make_cfg, packing):
    cfg = make_cfg(n=5)
    trainer, ds, tok, plan = _trainer(cfg, packing)
    rows = [trainer.train_dataset[i] for i in range(len(trainer.train_dataset))]
    batch = trainer.data_collator(rows)
    examples = list(ds)
    if not packing:
        assert "padded" in plan
        mask = batch["attention_mask"]
        assert mask.shape[0] == 5 and (mask.sum(1) < mask.shape[1]).any()  # lengths differ: some padding
        for i in range(5):
            n = int(mask[i].sum())
            ids, labels = batch["input_ids"][i].tolist(), batch["labels"][i].tolist()
            assert all(label == -100 for label in labels[n:])  # padding never counts
            _check_segment(tok, ids[:n], labels[:n], examples)
    else:
        assert "packed" in plan and batch["input_ids"].shape[0] == 1 and "attention_mask" not in batch
        cu = batch["cu_seq_lens_q"].tolist()
        assert len(cu) == 6 and cu[-1] == batch["input_ids"].shape[1]
        ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
        assert (batch["position_ids"][0][torch.tensor(cu[:-1])] == 0).all()
        for a, b in zip(cu, cu[1:]):
            _check_segment(tok, ids[a:b], labels[a:b], examples)


def test_packed_rows_give_the_loss_of_padded_batches_and_of_one_example_at_a_time(make_cfg):
    cfg = make_cfg(n=6)
    model, tok = models.load_policy(cfg)
    with torch.no_grad():  # a non-trivial adapter, so the LoRA path is exercised too
        gen = torch.Generator().manual_seed(0)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    padded, _, _, _ = _trainer(cfg, False, model, tok)
    nll_padded, n_padded = completion_nll(padded)
    packed, _, _, plan = _trainer(cfg, True, model, tok)  # switches the model to packed attention
    assert "loop attention" in plan
    nll_packed, n_packed = completion_nll(packed)

    # reference: each example alone, full logits, plain cross-entropy on the completion
    nll_ref, n_ref = 0.0, 0
    model.eval()
    for row in padded.train_dataset:
        ids, labels = torch.tensor([row["input_ids"]]), torch.tensor([row["labels"]])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[:, :-1].float()
        target = labels[:, 1:]
        keep = target != -100
        nll_ref -= torch.log_softmax(logits, -1).gather(-1, target.clamp(min=0)[..., None])[..., 0][keep].sum().item()
        n_ref += int(keep.sum())
    assert n_padded == n_packed == n_ref > 1000
    assert nll_padded == pytest.approx(nll_ref, rel=1e-5)
    assert nll_packed == pytest.approx(nll_ref, rel=1e-5)

    # the same packed row attended without its boundaries is measurably different: the check can fail
    rows = [packed.train_dataset[i] for i in range(len(packed.train_dataset))]
    batch = packed.data_collator(rows)
    leaky = {k: batch[k] for k in ("input_ids", "labels")}
    with torch.no_grad():
        out = model(**leaky, fused_lm_head=True)
    assert abs(-out.log_probs.sum().item() - nll_ref) > 1e-4 * abs(nll_ref)  # 10x the tolerance above


def test_packed_attention_matches_per_sequence_sdpa_with_gqa():
    """The attention function alone: 4 query heads over 2 key/value heads, three packed sequences."""
    torch.manual_seed(0)
    lengths = [5, 11, 3]
    t = sum(lengths)
    q, k, v = torch.randn(1, 4, t, 8), torch.randn(1, 2, t, 8), torch.randn(1, 2, t, 8)
    cu = torch.tensor([0, 5, 16, 19], dtype=torch.int32)
    fwd = packed_attention._make_forward("loop")

    class Attn(torch.nn.Module):
        is_causal, num_key_value_groups = True, 2

    out, _ = fwd(Attn(), q, k, v, None, scaling=8 ** -0.5, cu_seq_lens_q=cu)
    assert out.shape == (1, t, 4, 8)
    start = 0
    for n in lengths:
        s = slice(start, start + n)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[:, :, s], k[:, :, s].repeat_interleave(2, 1), v[:, :, s].repeat_interleave(2, 1), is_causal=True)
        torch.testing.assert_close(out[:, s], ref.transpose(1, 2))
        start += n
    # boundaries from position_ids alone give the same answer (no cu_seq_lens from the collator)
    pos = torch.cat([torch.arange(n) for n in lengths])[None]
    out2, _ = fwd(Attn(), q, k, v, None, scaling=8 ** -0.5, position_ids=pos)
    torch.testing.assert_close(out, out2)
    assert packed_attention.select_backend("cpu", None, torch.float32)[0] == "loop"


def test_training_lowers_the_loss_logs_every_step_and_keeps_a_finished_run(make_cfg):
    cfg = make_cfg(n=4, epochs=10, learning_rate=1e-2, save_steps=100,
                   lora_target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    lines = []
    result = train_sft(cfg, echo=lines.append)
    assert result.status == "trained" and result.checkpoint == cfg.paths.sft_checkpoint
    assert models.checkpoint_complete(result.checkpoint)
    assert any(str(result.checkpoint) in line for line in lines)  # it says where the checkpoint is

    log = read_jsonl(cfg.paths.sft_log)
    assert [r["step"] for r in log] == list(range(1, result.global_step + 1)) and result.global_step == 10
    for r in log:
        assert {"loss", "learning_rate", "grad_norm", "tokens_per_s", "epoch", "num_tokens"} <= set(r)
        assert r["tokens_per_s"] > 0 and r["session"] == 1
    losses = [r["loss"] for r in log]
    assert losses[-1] < losses[0] - 0.1  # four examples seen ten times: it learns them
    assert sum(losses[-3:]) / 3 < sum(losses[1:4]) / 3 - 0.05  # a trend, not one lucky step
    assert log[-1]["epoch"] == pytest.approx(10.0)
    assert result.final_loss == pytest.approx(losses[-1])

    # the adapter loads the way later stages load it, and changes the model's predictions
    tuned, tok = models.load_policy(cfg, adapter=result.checkpoint, trainable=False)
    base, _ = models.load_policy(cfg, trainable=False)
    ids = tok(["@triton.jit\ndef relu_kernel(x_ptr"], return_tensors="pt")
    assert not torch.allclose(tuned(**ids).logits, base(**ids).logits, atol=1e-3)

    # started again with the same settings: nothing is retrained, the log is untouched
    again = train_sft(cfg, echo=lines.append)
    assert again.status == "already_done" and again.checkpoint == result.checkpoint
    assert "already finished" in lines[-1] and str(result.checkpoint) in lines[-1]
    assert read_jsonl(cfg.paths.sft_log) == log

    # a changed setting trains again, from scratch
    changed = copy.deepcopy(cfg)
    changed.sft.epochs = 2
    redo = train_sft(changed, echo=lines.append)
    assert redo.status == "trained" and redo.global_step == 2
    assert [r["step"] for r in read_jsonl(cfg.paths.sft_log)] == [1, 2]

    fig = charts.sft_loss_chart(read_jsonl(cfg.paths.sft_log))  # notebook 02's and the report's figure
    charts.save(fig, cfg.paths.chart("sft_loss"))
    assert cfg.paths.chart("sft_loss").stat().st_size > 1000 and len(fig.axes) == 2


def test_out_of_memory_in_training_names_the_setting_to_lower(make_cfg, monkeypatch):
    from trl import SFTTrainer

    def oom(*args, **kwargs):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(SFTTrainer, "training_step", oom)  # the first step runs out of memory
    cfg = make_cfg(n=2)
    with pytest.raises(models.GPUMemoryError, match=r"sft ran out of GPU memory.*per_device_batch_size \(now \d+\)"):
        train_sft(cfg, echo=lambda s: None)


def test_missing_or_broken_data_names_the_data_stage(make_cfg, capsys):
    cfg = make_cfg()
    cfg.paths.sft_train.unlink()
    with pytest.raises(SFTDataError, match="01_data"):
        train_sft(cfg)
    assert main(["--params", "smoke", "-p", f"outputs_dir={cfg.outputs_dir}", "-p", "run=t"]) == 2
    assert "01_data" in capsys.readouterr().err
    cfg.paths.sft_train.write_text(json.dumps({"prompt": "just text", "completion": "x"}) + "\n")
    with pytest.raises(SFTDataError, match="messages"):
        load_sft_dataset(cfg.paths, 10, 0)


def test_examples_whose_prompt_fills_the_context_are_dropped(make_cfg):
    cfg = make_cfg(n=3)
    tok = models.load_tokenizer(cfg.model.model)
    ds = load_sft_dataset(cfg.paths, 10, 0)
    prompt_len = min(len(_n_tokens(tok, ex["prompt"], True)) for ex in ds)
    kept, stats = fit_to_length(ds, tok, prompt_len + 200)
    assert {k: stats[k] for k in ("dropped", "cut", "kept", "over_limit")} == \
        {"dropped": 0, "cut": 3, "kept": 3, "over_limit": 0} and len(kept) == 3
    lengths = [len(_n_tokens(tok, ex["prompt"] + ex["completion"], False)) - len(_n_tokens(tok, ex["prompt"], True))
               for ex in ds]
    assert stats["longest_completion"] == max(lengths)
    with pytest.raises(SFTDataError, match="raise max_seq_len"):
        fit_to_length(ds, tok, prompt_len)


def test_completions_longer_than_the_sampling_limit_are_counted(make_cfg):
    # RL and evaluation sample at most rl.max_new_tokens: SFT examples longer than that teach solutions
    # the policy can never finish (the gpu profile's 768 cut 19% of its corpus), so SFT says so
    cfg = make_cfg(n=3)
    tok = models.load_tokenizer(cfg.model.model)
    ds = load_sft_dataset(cfg.paths, 10, 0)
    lengths = sorted(len(_n_tokens(tok, ex["prompt"] + ex["completion"], False))
                     - len(_n_tokens(tok, ex["prompt"], True)) for ex in ds)
    _, none_over = fit_to_length(ds, tok, 100_000, completion_limit=lengths[-1])
    _, all_over = fit_to_length(ds, tok, 100_000, completion_limit=lengths[0] - 1)
    _, some = fit_to_length(ds, tok, 100_000, completion_limit=lengths[0])
    assert none_over["over_limit"] == 0 and all_over["over_limit"] == 3
    assert some["over_limit"] == sum(n > lengths[0] for n in lengths)


def _fake_checkpoint(folder, step, *, state=True, torn=False, optimizer=True):
    folder.mkdir(parents=True)
    for name in ("adapter_config.json", "adapter_model.safetensors", "scheduler.pt"):
        (folder / name).write_text("x")
    if optimizer:
        (folder / "optimizer.pt").write_text("x")
    if state:
        (folder / "trainer_state.json").write_text('{"global_step": ' if torn else json.dumps({"global_step": step}))


def test_only_complete_trainer_checkpoints_are_resumed(tmp_path):
    _fake_checkpoint(tmp_path / "checkpoint-2", 2)
    _fake_checkpoint(tmp_path / "checkpoint-10", 10)
    _fake_checkpoint(tmp_path / "checkpoint-12", 12, state=False)  # killed before trainer_state.json
    _fake_checkpoint(tmp_path / "checkpoint-14", 14, torn=True)  # killed while writing it
    _fake_checkpoint(tmp_path / "checkpoint-16", 16, optimizer=False)
    (tmp_path / "checkpoint-18").write_text("not a folder")
    assert latest_complete_checkpoint(tmp_path) == tmp_path / "checkpoint-10"  # 10 > 2 numerically
    assert not checkpoint_is_complete(tmp_path / "checkpoint-12")
    assert latest_complete_checkpoint(tmp_path / "missing") is None
    assert checkpoint_step(latest_complete_checkpoint(tmp_path)) == 10
    with pytest.raises(ValueError, match="checkpoint-N"):
        checkpoint_step(tmp_path / "adapter")


def test_a_model_switched_to_packed_attention_still_generates_the_same(make_cfg):
    """RL samples from the model SFT trained (and switched): padded batches with a KV cache go
    through SDPA's own masks, so greedy generation is unchanged."""
    cfg = make_cfg(n=1)
    ref, tok = models.load_policy(cfg, trainable=False)
    switched, _ = models.load_policy(cfg, trainable=False)
    packed_attention.use_packed_attention(switched, "loop")
    assert switched.config._attn_implementation.startswith("tritonrl_packed")
    batch = tok(["@triton.jit\ndef add_kernel(x_ptr, y_ptr", "import torch"], return_tensors="pt", padding=True)
    args = dict(max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    with torch.no_grad():
        torch.testing.assert_close(switched(**batch).logits, ref(**batch).logits)
        assert torch.equal(switched.generate(**batch, **args), ref.generate(**batch, **args))
        one = tok(["def relu(x):"], return_tensors="pt")  # a single unpadded prompt: no mask at all
        assert torch.equal(switched.generate(**one, **args), ref.generate(**one, **args))


def test_lora_input_cast_is_skipped_only_while_training(make_cfg):
    from tritonrl_lib.core.config import ConfigError
    from tritonrl_lib.train.trainer import _NoLoraInputCastWhileTraining

    cfg = make_cfg(n=1)
    model, tok = models.load_policy(cfg)
    lora = [m for m in model.modules() if hasattr(m, "lora_A") and hasattr(m, "cast_input_dtype_enabled")]
    assert len(lora) == 4  # q_proj and v_proj in two layers
    cb = _NoLoraInputCastWhileTraining(model)
    cb.on_train_begin(None, None, None)
    assert not any(m.cast_input_dtype_enabled for m in lora)
    cb.on_train_end(None, None, None)
    assert all(m.cast_input_dtype_enabled for m in lora)  # generation afterwards casts as PEFT expects
    ds = load_sft_dataset(cfg.paths, 1, 0)
    with pytest.raises(ConfigError, match="autocast"):  # fp32 on the CPU: nothing would cast back
        build_trainer(cfg, ds, model, tok, cfg.paths.sft_checkpoint, SpeedOptions(lora_input_cast=False))
