"""How far the lean rollout engine's logits are from the model's own forward, and why.

    python benchmarks/lean_check.py [--adapter DIR] [--out FILE]     # GPU (or CPU) with the embedded model

For the bare model, the model with `--adapter`, and the model with a random LoRA (B redrawn at a
few scales, so the adapter's share of each projection grows), in bf16 on the device: the relative
L2 error of the logits over the check's positions, lean vs the model's bf16 forward, and each of
them vs the same model in float32 (the truth both round away from). Also with every SDPA call on
the math backend, and with the model's forward on eager attention, to tell an attention kernel's
numerics from an engine mistake. Prints one table (and writes it as JSON with --out).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tritonrl_lib.core.config import load_config  # noqa: E402
from tritonrl_lib.model.load import attach_lora, load_policy  # noqa: E402
from tritonrl_lib.rollout import LeanDecoder, own_logits  # noqa: E402

PROBE = "def relu(x):\n    return x.clamp(min=0)"


def rel(a, b) -> float:
    return ((a - b).norm() / (b.norm() + 1e-9)).item()


def lean_logits(model, ids):
    return LeanDecoder(model, use_graphs=False).check_logits(ids)


def measure(label: str, model, ids, rows: list) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    m32 = copy.deepcopy(model).float()
    model.eval()
    m32.eval()
    lean, split = lean_logits(model, ids)
    own = own_logits(model, ids, split)
    truth = own_logits(m32, ids, split)
    with sdpa_kernel([SDPBackend.MATH]):
        lean_math, _ = lean_logits(model, ids)
        own_math = own_logits(model, ids, split)
    inner = getattr(model, "get_base_model", lambda: model)()
    before = inner.config._attn_implementation
    try:
        inner.config._attn_implementation = "eager"
        own_eager = own_logits(model, ids, split)
    finally:
        inner.config._attn_implementation = before
    row = {"model": label, "attn": before,
           "lean_vs_own": rel(lean, own), "own_vs_fp32": rel(own, truth), "lean_vs_fp32": rel(lean, truth),
           "math_lean_vs_own": rel(lean_math, own_math), "math_lean_vs_fp32": rel(lean_math, truth),
           "eager_own_vs_fp32": rel(own_eager, truth), "prefill_only_lean_vs_own": rel(lean[:1], own[:1]),
           "steps_only_lean_vs_own": rel(lean[1:], own[1:])}
    rows.append(row)
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    del m32


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", default="")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = load_config("gpu" if device == "cuda" else "cpu", overrides={"dtype": args.dtype, "device": device})
    rows: list = []
    model, tok = load_policy(cfg, trainable=False)
    probe = tok.apply_chat_template([{"role": "user", "content": PROBE}], tokenize=False, add_generation_prompt=True)
    ids = tok(probe, add_special_tokens=False)["input_ids"][:24]
    measure("bare", model, ids, rows)
    if args.adapter:
        adapted, _ = load_policy(cfg, adapter=args.adapter, trainable=False)
        measure(f"adapter {Path(args.adapter).name}", adapted, ids, rows)
        del adapted
    for scale in (1.0, 4.0):
        lora = attach_lora(copy.deepcopy(model), cfg.model)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in lora.named_parameters():
                if "lora_B" in name:
                    p.copy_((torch.randn(p.shape, generator=gen) * 0.02 * scale).to(p.dtype))
        measure(f"random LoRA x{scale:g}", lora, ids, rows)
        del lora
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
                                              "torch": torch.__version__, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
