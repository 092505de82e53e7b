"""Batched sampling from a policy: many completions per prompt, fast, stopping at the end of the code.

`rollout(model, tokenizer, prompts, sampling)` (or a reusable `Rollout`) returns `n_samples`
completions per prompt, each with its tokens, text, why it stopped (`fence`: the closing fence of
the code block, `eos`, `loop`: a line or block of lines repeating, or `length`), and when. Two
engines produce them:

- `lean` (the default where it applies): our own decode loop over the model's weights for the
  Llama family (Llama, Qwen2, Mistral without sliding windows: SmolLM2, Qwen2.5-Coder, ...).
  A static KV cache with one row per sequence, each prompt prefilled once and its KV copied to
  its n samples, sampling in torch, the stop check on the host only every few steps, finished rows
  compacted away in power-of-two batch buckets, and on CUDA each decode step replayed as a CUDA
  graph (one per batch/length bucket). A LoRA adapter is folded into the engine's copy of the
  weights, without touching the model. The engine checks itself against the model's own forward
  when built and steps aside for `hf` if they disagree.
- `hf`: `model.generate` with left padding and the same stop rule as a StoppingCriteria; any
  causal LM, PeftModel, or quantised model.

Stopping: the completion ends at the line that closes the first code block, by the fence grammar
`extract.py` reads completions with (`fences.py`); the opening fence itself never stops it. A
completion that falls into a loop (`stopping.LoopStop`: one line, or one block of up to 8 lines,
repeated over `loop_lines` lines) stops there, so a loop costs tens of tokens, not max_new_tokens.

Progress: with `progress=True` a tqdm bar counts sequences done, and its postfix the tokens so far,
tokens/s and the time left, redrawn at least every 10 s (`batches.Progress`).

Determinism: the same prompts, settings, seed and device give the same completions. Sampling uses
its own torch.Generator, so the caller's RNG streams are left alone.

The modules, in the order a call goes through them:

    settings.py       SamplingConfig: the settings of one call
    sampler.py        Rollout (the front: picks the engine, runs it, builds the result), rollout(), task_prompts()
    batches.py        sequences cut into decode batches; progress bar (Progress); device sync
    lean.py           LeanDecoder: the Llama-family forward over a private weight copy, KV cache, CUDA graphs
    lean_check.py     whether the lean engine computes the model's function (float32 arbitration)
    lean_generate.py  the lean engine's decode loop: prefill, sample, read tokens, compact
    hf_generate.py    the model.generate fallback
    stopping.py       the stop rules: end-of-turn ids, the closing fence, loops, the length; per-sequence tracking
    results.py        Completion, RolloutStats, RolloutResult
"""

from .lean import LeanDecoder, UnsupportedModel, own_logits
from .results import FINISH_REASONS, Completion, RolloutResult, RolloutStats
from .sampler import Rollout, rollout, task_prompts
from .settings import SamplingConfig
from .stopping import FenceStop, LoopStop, closes_code_block, falls_into_loop, stop_token_ids, token_pieces

__all__ = ["SamplingConfig", "Completion", "RolloutStats", "RolloutResult", "Rollout", "rollout", "FenceStop",
           "LoopStop", "falls_into_loop", "closes_code_block", "token_pieces", "stop_token_ids", "task_prompts",
           "LeanDecoder", "UnsupportedModel", "FINISH_REASONS", "own_logits"]
