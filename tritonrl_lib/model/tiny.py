"""The tiny test model: a small random Qwen2-style model with a BPE tokenizer trained offline on the
project's own text (the built-in tasks, their solutions, the prompt), cached by content. Stand-ins
build their tokenizers the same way, with the same chat template.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from .cache import build_lock, cache_root, publish

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


TINY_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TINY_ARCH = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=4096)
TINY_VOCAB = 1024


def tiny_corpus() -> list[str]:
    """Local text the tiny tokenizer learns from: the built-in tasks with their Triton solutions and
    the prompt, the language the model is asked to speak. (Only these files: the tokenizer, and so
    the cached model, change when they do, not on every library edit.)"""
    pkg = Path(__file__).resolve().parents[1]
    files = sorted((pkg / "tasks" / "builtin").rglob("*.py")) + [pkg / "model" / "prompts.py"]
    files = [f for f in files if f.is_file()] or sorted(pkg.rglob("*.py"))
    return [f.read_text(errors="ignore") for f in files]


def tiny_model_dir(seed: int = 0) -> Path:
    """A small random Qwen2-style model with a BPE tokenizer trained offline; cached by content."""
    corpus = tiny_corpus()
    h = hashlib.sha256()
    for text in corpus:
        h.update(text.encode())
    h.update(json.dumps([TINY_ARCH, TINY_VOCAB, TINY_SPECIALS, seed]).encode())
    final = cache_root() / "models" / f"tiny-{h.hexdigest()[:12]}"
    if (final / "config.json").is_file():
        return final
    with build_lock(final):
        if (final / "config.json").is_file():
            return final
        return _build_tiny(final, corpus, seed)


def _build_tiny(final: Path, corpus: list[str], seed: int) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TINY_VOCAB, special_tokens=TINY_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(corpus, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  bos_token=None, unk_token=None)
    tok.chat_template = CHATML_TEMPLATE

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tok), tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **TINY_ARCH)
    model = Qwen2ForCausalLM(config)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    model.save_pretrained(build)
    tok.save_pretrained(build)
    return publish(build, final)
