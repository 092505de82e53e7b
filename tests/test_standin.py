"""Random-weight stand-ins: the shipped 7B configuration, the tokenizer that fits its vocabulary, a
sharded build that never holds the whole model, the labels every reader sees, and the `standin:`
spec; and the real-weights path: a local folder given as `model=`."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tritonrl_lib.model import load as models, standin
from tritonrl_lib.core.config import load_config

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "tests" / "fixtures" / "standin" / "qwen2-tiny.json"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The tiny Qwen2 stand-in, in shards of about 64 KB so the sharded layout is exercised."""
    return standin.build_standin(str(TINY), tmp_path_factory.mktemp("standin"), shard_mb=0.0625, device="cpu",
                                 echo=lambda m: None)


def _meta_model(config: dict):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(cfg)


def test_shipped_qwen_coder_7b_configuration_is_the_published_architecture():
    assert "qwen2.5-coder-7b-instruct" in standin.available_configs()
    src = standin.load_source("qwen2.5-coder-7b-instruct")
    c = src.config
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"],
            c["intermediate_size"], c["vocab_size"]) == (3584, 28, 28, 4, 18944, 152064)
    assert c["tie_word_embeddings"] is False and c["model_type"] == "qwen2"
    assert c["rope_theta"] == 1e6 and c["rms_norm_eps"] == 1e-6 and "rope_scaling" not in c
    assert src.hub_id == "Qwen/Qwen2.5-Coder-7B-Instruct"
    model = _meta_model(c)  # no memory: shapes only
    n = sum(p.numel() for p in model.parameters())
    assert 7.60e9 < n < 7.62e9  # the model card's 7.61 B parameters
    assert model.lm_head.weight is not model.model.embed_tokens.weight
    assert model.model.layers[0].self_attn.q_proj.bias is not None  # Qwen2's q/k/v biases


def test_the_7b_tokenizer_fits_the_vocabulary_with_the_published_special_ids():
    src = standin.load_source("qwen2.5-coder-7b-instruct")
    tok = standin.build_tokenizer(src)
    assert len(tok) == 151665 <= src.config["vocab_size"]
    ids = tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|file_sep|>"])
    assert ids == [151643, 151644, 151645, 151664]
    assert tok.eos_token_id == src.config["eos_token_id"] == 151645
    assert tok.pad_token_id == src.generation_config["pad_token_id"] == 151643
    text = tok.apply_chat_template([{"role": "system", "content": "You write Triton."},
                                    {"role": "user", "content": "def forward(self, x):\n    return torch.relu(x)"}],
                                   tokenize=False, add_generation_prompt=True)
    enc = tok(text, add_special_tokens=False)["input_ids"]
    assert enc[0] == 151644 and max(enc) < len(tok) and tok.decode(enc) == text
    # filler ids decode to text; ids the vocabulary has but the tokenizer does not decode to nothing
    assert tok.decode([100000]).startswith(" ~") and tok.decode([152000]) == ""


def test_build_writes_sharded_labelled_weights_drawn_like_the_initialiser(built):
    path = Path(built.path)
    assert path.name == "qwen2-tiny" + standin.SUFFIX and built.shards > 1 and not built.reused
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == built.shards
    config = json.loads((path / "config.json").read_text())
    entry = config[standin.CONFIG_KEY]
    assert entry["random_weights"] is True and "RANDOM WEIGHTS" in entry["label"]
    assert config["rope_theta"] == 1e6  # written as published: transformers 4.x and 5.x both read it
    assert (path / "README.md").read_text().splitlines()[3].startswith("# RANDOM WEIGHTS: a stand-in for tests/")
    assert standin.read_marker(path)["build"]["n_params"] == built.n_params
    assert built.peak_rss_mb > 0 and built.weight_bytes == 2 * built.n_params  # bf16

    from safetensors.torch import load_file

    w = {}
    for f in path.glob("*.safetensors"):
        w.update(load_file(str(f)))
    assert "lm_head.weight" in w and w["lm_head.weight"].dtype == torch.bfloat16
    assert torch.all(w["model.norm.weight"] == 1) and torch.all(w["model.layers.0.self_attn.q_proj.bias"] == 0)
    std = w["model.layers.1.mlp.down_proj.weight"].float().std().item()
    assert 0.018 < std < 0.022
    assert not torch.equal(w["model.layers.0.mlp.up_proj.weight"], w["model.layers.1.mlp.up_proj.weight"])
    assert standin.check_standin(path)["ok"]


def test_same_seed_same_weights_other_seed_other_weights(built, tmp_path):
    from safetensors import safe_open

    def tensor(p: Path, name: str):
        index = json.loads((p / "model.safetensors.index.json").read_text())
        with safe_open(str(p / index["weight_map"][name]), framework="pt") as f:
            return f.get_tensor(name)

    again = standin.build_standin(str(TINY), tmp_path / "a", shard_mb=0.0625, device="cpu", echo=lambda m: None)
    other = standin.build_standin(str(TINY), tmp_path / "b", shard_mb=0.0625, device="cpu", seed=1,
                                  echo=lambda m: None)
    name = "model.layers.0.self_attn.k_proj.weight"
    assert torch.equal(tensor(Path(built.path), name), tensor(Path(again.path), name))
    assert not torch.equal(tensor(Path(built.path), name), tensor(Path(other.path), name))
    assert standin.build_standin(str(TINY), tmp_path / "a", echo=lambda m: None).reused  # a finished folder stays
    killed = tmp_path / "b" / f".build-{Path(other.path).name}-x1"  # what a build killed midway leaves
    killed.mkdir()
    standin.build_standin(str(TINY), tmp_path / "b", seed=1, force=True, echo=lambda m: None)
    assert not killed.exists() and standin.is_complete(other.path)


def test_loading_a_standin_says_so_every_time(built, caplog):
    cfg = load_config("smoke", overrides={"model": built.path})
    with caplog.at_level(logging.WARNING, logger="tritonrl_lib.model.load"):
        model, tok = models.load_policy(cfg, trainable=True)
    said = [r.getMessage() for r in caplog.records if "RANDOM WEIGHTS" in r.getMessage()]
    assert said and built.path in said[0] and "tests/qwen2-tiny" in said[0]
    assert model.get_base_model().config.vocab_size == 1088 and len(tok) == 1025
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id == 1021
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tritonrl_lib.model.load"):
        models.load_policy(load_config("smoke"), trainable=False)  # the tiny test model is not a stand-in
    assert not [r for r in caplog.records if "RANDOM WEIGHTS" in r.getMessage()]


def test_standin_spec_builds_into_the_cache_once(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITONRL_CACHE", str(tmp_path / "cache"))
    spec = f"standin:{TINY}"
    first = Path(models.resolve_model(spec))
    assert first.name.endswith(standin.SUFFIX) and standin.is_complete(first)
    stamp = (first / standin.MARKER).stat().st_mtime_ns
    assert Path(models.resolve_model(spec)) == first and (first / standin.MARKER).stat().st_mtime_ns == stamp
    assert standin.standin_label(first).startswith("RANDOM WEIGHTS")


def test_unknown_or_unfitting_configs_are_clear_errors(tmp_path):
    with pytest.raises(standin.StandinError, match="qwen2.5-coder-7b-instruct"):
        standin.load_source("qwen-9000")
    data = json.loads(TINY.read_text())
    data["config"]["vocab_size"] = 1000  # 1021 regular + 4 added tokens do not fit
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(standin.StandinError, match="do not fit vocab_size=1000"):
        standin.load_source(str(bad))


def test_a_plain_hf_config_gets_chatml_specials_at_the_end(tmp_path):
    config = json.loads(TINY.read_text())["config"]
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    src = standin.load_source(str(tmp_path / "m"))
    assert src.regular_tokens == 1088 - 3 and src.name == "m"
    stats = standin.build_standin(src, tmp_path, device="cpu", echo=lambda m: None)
    written = json.loads((Path(stats.path) / "config.json").read_text())
    assert (written["eos_token_id"], written["pad_token_id"]) == (1087, 1085)  # <|im_end|>, <|endoftext|>
    generation = json.loads((Path(stats.path) / "generation_config.json").read_text())
    assert (generation["eos_token_id"], generation["pad_token_id"]) == (1087, 1085)
    assert standin.load_source(str(TINY)).digest() == src_copy_digest(tmp_path)  # where the file lies: no matter


def src_copy_digest(tmp_path: Path) -> str:
    copy = tmp_path / "elsewhere" / TINY.name
    copy.parent.mkdir()
    copy.write_text(TINY.read_text())
    return standin.load_source(str(copy)).digest()


def test_cli_builds_lists_and_shows(built, tmp_path):
    env_py = [sys.executable, "-m", "tritonrl_lib.cli", "standin"]
    run = lambda *a: subprocess.run(env_py + list(a), cwd=REPO, capture_output=True, text=True, timeout=300)  # noqa: E731
    out = run("build", str(TINY), "--dir", str(tmp_path), "--device", "cpu", "--json", str(tmp_path / "b.json"))
    assert out.returncode == 0, out.stderr
    folder = tmp_path / ("qwen2-tiny" + standin.SUFFIX)
    assert f"-p model={folder}" in out.stdout and "peak host RSS" in out.stdout
    assert json.loads((tmp_path / "b.json").read_text())["n_params"] == built.n_params
    shown = run("show", str(folder))
    assert shown.returncode == 0 and "RANDOM WEIGHTS" in shown.stdout and "matches its config" in shown.stdout
    assert run("show", str(models.tiny_model_dir())).returncode == 1
    listed = run("list")
    assert "qwen2.5-coder-7b-instruct" in listed.stdout and "hidden 3584, 28 layers, 28/4 heads" in listed.stdout
    missing = run("build", "qwen-9000", "--dir", str(tmp_path))
    assert missing.returncode == 2 and "no stand-in config 'qwen-9000'" in missing.stderr


# --------------------------------------------------------------------------- real weights in a local folder


@pytest.fixture(scope="module")
def local_qwen2(tmp_path_factory):
    """A plain Hugging Face folder of the Qwen2 family (what a user's local copy of
    Qwen2.5-Coder-7B-Instruct looks like, at tiny size): saved by transformers, no stand-in marks."""
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    src = standin.load_source(str(TINY))
    folder = tmp_path_factory.mktemp("weights") / "Qwen2.5-Coder-tiny-Instruct"
    torch.manual_seed(0)
    cfg = {k: v for k, v in src.config.items() if k not in ("architectures", "torch_dtype")}
    Qwen2ForCausalLM(Qwen2Config(**cfg)).save_pretrained(folder)
    standin.build_tokenizer(src).save_pretrained(folder)
    assert standin.standin_label(folder) is None
    assert AutoTokenizer.from_pretrained(folder).eos_token == "<|im_end|>"
    return folder


def test_qwen7b_profile_takes_a_local_folder_by_one_setting(local_qwen2, caplog):
    cfg = load_config("qwen7b", cli=[f"model={local_qwen2}"])
    assert cfg.model.model == str(local_qwen2)
    assert (cfg.model.lora_r, cfg.model.lora_alpha, cfg.model.load_in_8bit) == (16, 32, True)
    # on this CPU machine the profile's GPU settings stop it with messages that name the fix
    with pytest.raises(models.ModelLoadError, match="device=cuda but no CUDA GPU"):
        models.load_policy(cfg)
    cpu = load_config("qwen7b", cli=[f"model={local_qwen2}", "device=cpu"])
    with pytest.raises(models.ModelLoadError, match="load_in_8bit / load_in_4bit need a CUDA GPU"):
        models.load_policy(cpu)
    cpu = load_config("qwen7b", cli=[f"model={local_qwen2}", "device=cpu", "load_in_8bit=false", "dtype=float32"])
    with caplog.at_level(logging.WARNING, logger="tritonrl_lib.model.load"):
        model, tok = models.load_policy(cpu)
    assert not [r for r in caplog.records if "RANDOM WEIGHTS" in r.getMessage()]  # real weights: no label
    targets = {n.split(".")[-4] for n, p in model.named_parameters() if p.requires_grad}
    assert targets == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert model.peft_config["default"].r == 16 and tok.padding_side == "left"


@pytest.mark.slow
def test_sft_and_sampling_from_a_local_folder(local_qwen2, tmp_path):
    """The qwen7b profile's SFT (one step) and RL/eval sampling on the local folder, on the CPU."""
    from tritonrl_lib.eval.heldout import cap_tasks
    from tritonrl_lib.eval.run import evaluate_model
    from tritonrl_lib.tasks import load_tasks
    from tritonrl_lib.train.sft.train import train_sft
    from tritonrl_lib.train.sft.synthetic import toy_sft_records, write_records

    cfg = load_config("qwen7b", cli=[f"model={local_qwen2}", "device=cpu", "load_in_8bit=false", "dtype=float32",
                                     "gradient_checkpointing=false", f"outputs_dir={tmp_path}", "max_seq_len=512",
                                     "max_new_tokens=8", "rollout_batch_size=4"])
    write_records(cfg.paths.sft_train, toy_sft_records(8))
    res = train_sft(cfg, max_steps=1, echo=lambda m: None)
    assert res.status == "trained" and res.global_step == 1
    marker = json.loads((res.checkpoint / models.MARKER).read_text())
    assert marker["base_model"] == str(local_qwen2)  # the adapter names the local weights it trained on
    tasks = cap_tasks(load_tasks("builtin", size="small"), 2)
    rec = evaluate_model(cfg, str(res.checkpoint), tasks, model_stage="sft", adapter=res.checkpoint, progress=False,
                         log=lambda m: None).record
    assert rec["num_tasks"] == 2 and rec["generation"]["engine"] == "lean"
    assert all(r["num_tokens"] == 8 for r in rec["detailed_results"])  # random weights write to the limit


def test_out_of_memory_names_the_setting_to_change():
    cfg = load_config("qwen7b")
    with pytest.raises(models.GPUMemoryError, match=r"per_device_batch_size \(now 2\).*max_seq_len \(now 2048\)"):
        with models.explain_oom("sft", cfg):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    with pytest.raises(models.GPUMemoryError, match=r"n_samples \(now 10\).*rollout_batch_size \(now 16\)"):
        with models.explain_oom("grpo", cfg):
            raise RuntimeError("CUDA error: out of memory")
    with pytest.raises(ValueError, match="not memory"):  # anything else passes through untouched
        with models.explain_oom("sft", cfg):
            raise ValueError("not memory")
