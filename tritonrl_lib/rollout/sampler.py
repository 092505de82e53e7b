"""`Rollout`: a sampler bound to one model and tokenizer, the front both engines sit behind.

It picks the engine (`lean` where it applies and agrees with the model, else `hf`), tokenizes the
prompts, runs the engine with the model in eval mode and no gradients, and turns the engine's
tracked sequences into `Completion`s grouped by prompt, with the call's statistics.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable, Sequence

from ..model.prompts import format_prompt
from .hf_generate import generate_hf, model_device
from .lean import LeanDecoder, UnsupportedModel
from .lean_check import lean_agrees
from .lean_generate import generate_lean
from .results import Completion, RolloutResult, RolloutStats
from .settings import SamplingConfig
from .stopping import SequenceTracker, stop_token_ids, token_pieces

log = logging.getLogger(__name__)


class Rollout:
    """A sampler bound to one model and tokenizer. Reuse it across rounds (call `refresh()`
    after training the model) so the lean engine keeps its buffers and CUDA graphs."""

    def __init__(self, model, tokenizer, engine: str = "auto", cuda_graphs: bool = True):
        self.model = model
        self.tokenizer = tokenizer
        self.pieces = token_pieces(tokenizer)
        self.eos = frozenset(stop_token_ids(model, tokenizer))
        self.engine_name = "hf"
        self.note = ""
        self.lean: LeanDecoder | None = None
        if engine not in ("auto", "lean", "hf"):
            raise ValueError(f"engine={engine!r}: expected auto, lean or hf")
        if engine in ("auto", "lean"):
            self._build_lean(cuda_graphs, required=engine == "lean")

    def _build_lean(self, cuda_graphs: bool, required: bool) -> None:
        try:
            lean = LeanDecoder(self.model, use_graphs=cuda_graphs)
            probe = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": "def relu(x):\n    return x.clamp(min=0)"}],
                tokenize=False, add_generation_prompt=True)
            ids = self.tokenizer(probe, add_special_tokens=False)["input_ids"]
            was_training = self.model.training
            self.model.eval()
            try:
                agrees, why = lean_agrees(lean, self.model, ids)
            finally:
                self.model.train(was_training)
            if not agrees:
                raise UnsupportedModel(why)
            self.lean, self.engine_name = lean, "lean"
            if why:  # settled by the float32 comparison: say so beside the numbers
                self.note = f"lean engine checked against float32: {why}"
        except UnsupportedModel as exc:
            if required:
                raise
            self.note = f"lean engine not used: {exc}"
            log.info("rollout: %s; using model.generate", self.note)

    def refresh(self) -> None:
        """Pick up the model's current weights (after an optimizer step or a round of training)."""
        if self.lean is not None:
            self.lean.refresh(self.model)

    def release(self) -> None:
        """Free the KV cache and CUDA graphs (e.g. while training); the next call rebuilds them."""
        if self.lean is not None:
            self.lean.release()

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], sampling: SamplingConfig,
                 progress: bool = False) -> RolloutResult:
        """`sampling.n_samples` completions for each prompt (text, or token ids)."""
        import torch

        if len(prompts) == 0:
            return RolloutResult([], RolloutStats(engine=self.engine_name))
        if isinstance(prompts[0], str):
            enc = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        else:
            enc = [list(map(int, p)) for p in prompts]
        if any(len(p) == 0 for p in enc):
            raise ValueError("an empty prompt: every prompt needs at least one token")
        stats = RolloutStats(engine=self.engine_name, device=str(model_device(self.model)), prompts=len(enc),
                             note=self.note)
        was_training = self.model.training
        self.model.eval()
        t0 = time.perf_counter()
        try:
            with torch.no_grad():
                if self.lean is not None:
                    trackers = generate_lean(self.lean, enc, sampling, stats, self.pieces, self.eos, progress)
                else:
                    trackers = generate_hf(self.model, self.tokenizer, enc, sampling, stats, self.pieces, self.eos,
                                           progress)
        finally:
            self.model.train(was_training)
        stats.wall_s = time.perf_counter() - t0
        return self._finish(enc, trackers, sampling, stats)

    def _finish(self, enc, trackers: list[SequenceTracker], sampling: SamplingConfig,
                stats: RolloutStats) -> RolloutResult:
        texts = self.tokenizer.batch_decode([t.tokens for t in trackers], skip_special_tokens=True)
        groups: list[list[Completion | None]] = [[None] * sampling.n_samples for _ in enc]
        for t, text in zip(trackers, texts):
            groups[t.prompt_index][t.sample_index] = Completion(
                prompt_index=t.prompt_index, sample_index=t.sample_index, text=text, token_ids=list(t.tokens),
                num_tokens=len(t.tokens), prompt_tokens=t.prompt_len, finish_reason=t.reason or "length",
                seconds=round(t.seconds, 4), logprobs=list(t.logprobs) if sampling.return_logprobs else None)
            stats.finish_reasons[t.reason or "length"] = stats.finish_reasons.get(t.reason or "length", 0) + 1
        stats.sequences = len(trackers)
        stats.generated_tokens = sum(len(t.tokens) for t in trackers)
        stats.prompt_tokens = sum(len(p) for p in enc)
        return RolloutResult([list(g) for g in groups], stats)  # type: ignore[arg-type]


def rollout(model, tokenizer, prompts: Sequence[str] | Sequence[Sequence[int]], sampling: SamplingConfig,
            progress: bool = False) -> RolloutResult:
    """`n_samples` completions for each prompt (see the package doc); builds a one-off `Rollout`."""
    return Rollout(model, tokenizer, engine=sampling.engine, cuda_graphs=sampling.cuda_graphs).generate(
        prompts, sampling, progress=progress)


def task_prompts(tokenizer, tasks: Iterable) -> list[str]:
    """The chat-formatted prompt of each task (prompts.format_prompt): what RL and eval ask."""
    return [format_prompt(tokenizer, t) for t in tasks]
