"""Rollout throughput: generated tokens per second of `rollout.Rollout` against a plain batch-32 `generate`.

    python benchmarks/rollout_throughput.py --out DIR                          # GPU: embedded model, bf16
    python benchmarks/rollout_throughput.py --out DIR --device cpu --model tiny --quick   # CPU check

The baseline is what the issue measures against: `model.generate` on 32 prompts at a time, sampling
(temperature 0.8, top-p 0.95), 256 new tokens, the plain model in bf16. Our rows are `Rollout.generate`
with its default (fast) path, on the policy as RL holds it (the same model with a LoRA adapter
attached, which the lean engine folds into its weights), at the RL workload shapes: tasks x samples
sequences decoded together. Prompts are the built-in tasks' chat prompts (prompts.format_prompt),
the same for every row. Tokens are generated tokens up to and including each sequence's stop token
(padding and anything after a stop are not counted); time is wall time with the GPU synchronised,
after one warm-up call per configuration (CUDA-graph capture is reported separately as first-call time).

Rows with `stop_at_fence=False` measure raw decoding (sequences end only at an end-of-turn token or
the token limit, like the baseline); `stop_at_fence=True` is what RL runs (a completion ends with
its code block). Before timing, the lean engine's logits are compared with the model's own forward
(relative error) and its greedy tokens with `generate`'s (how many leading tokens agree; bf16 rounding
differs between the two paths, so long greedy runs may part after a near-tie).

Writes DIR/rollout_throughput.json and prints a table. About 2 minutes on one H100.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tritonrl_lib.model import load as models  # noqa: E402
from tritonrl_lib.core.config import load_config  # noqa: E402
from tritonrl_lib.rollout import LeanDecoder, Rollout, SamplingConfig, task_prompts  # noqa: E402
from tritonrl_lib.tasks import load_tasks  # noqa: E402


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def baseline_generate(model, tok, prompts: list[str], max_new: int, batch: int, device: str, seed: int) -> dict:
    """Plain HF generate, left-padded batches of `batch`, sampling; counts tokens to the first stop."""
    eos = {tok.eos_token_id} | ({model.generation_config.eos_token_id}
                                if isinstance(model.generation_config.eos_token_id, int) else set())
    tokens, t0 = 0, time.perf_counter()
    torch.manual_seed(seed)
    for i in range(0, len(prompts), batch):
        enc = tok(prompts[i:i + batch], return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=max_new, do_sample=True, temperature=0.8, top_p=0.95,
                                 pad_token_id=tok.pad_token_id)
        gen = out[:, enc["input_ids"].shape[1]:].tolist()
        for row in gen:
            n = len(row)
            for j, t in enumerate(row):
                if t in eos:
                    n = j + 1
                    break
            tokens += n
    sync(device)
    wall = time.perf_counter() - t0
    return {"sequences": len(prompts), "tokens": tokens, "wall_s": round(wall, 3),
            "tokens_per_s": round(tokens / wall, 1)}


def ours(sampler: Rollout, prompts: list[str], sampling: SamplingConfig, device: str) -> dict:
    sync(device)
    t0 = time.perf_counter()
    first = sampler.generate(prompts, sampling)  # warm-up: CUDA-graph capture for these shapes
    sync(device)
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = sampler.generate(prompts, sampling)
    sync(device)
    wall = time.perf_counter() - t0
    st = res.stats
    return {"sequences": st.sequences, "tokens": st.generated_tokens, "wall_s": round(wall, 3),
            "tokens_per_s": round(st.generated_tokens / wall, 1), "first_call_s": round(first_s, 3),
            "graphs_captured_first_call": first.stats.cuda_graphs, "prefill_s": round(st.prefill_s, 3),
            "decode_steps": st.decode_steps, "compactions": st.compactions, "finish_reasons": st.finish_reasons,
            "engine": st.engine, "mean_tokens": round(st.generated_tokens / max(1, st.sequences), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for rollout_throughput.json")
    ap.add_argument("--model", default="embedded", help="embedded (default) | tiny | an HF model folder")
    ap.add_argument("--device", default="auto", help="auto | cuda | cpu")
    ap.add_argument("--dtype", default="auto", help="auto (bf16 on GPU, fp32 on CPU) | bfloat16 | float32")
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="small shapes (a CPU correctness check)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = load_config("gpu" if args.device != "cpu" and torch.cuda.is_available() else "cpu",
                      overrides={"model": args.model, "dtype": args.dtype, "device": args.device})
    device = models.resolve_device(cfg.device)
    max_new = 32 if args.quick else args.max_new_tokens
    tasks = load_tasks("builtin", size="full" if device == "cuda" else "small")
    print(f"device: {torch.cuda.get_device_name(0) if device == 'cuda' else platform.processor() or 'cpu'}; "
          f"model {args.model} ({cfg.model.dtype}); {len(tasks)} built-in task prompts", flush=True)

    # --- the baseline: the plain model, batch-32 generate
    plain, tok = models.load_policy(cfg, trainable=False)
    prompts = task_prompts(tok, tasks)
    base_prompts = (prompts * 2)[: (8 if args.quick else 64)]
    baseline_generate(plain, tok, base_prompts[:4], 8, 4, device, args.seed)  # warm-up
    base = baseline_generate(plain, tok, base_prompts, max_new, 32 if not args.quick else 4, device, args.seed)
    base["what"] = f"HF generate, batch {32 if not args.quick else 4}, {max_new} new tokens, sampling"
    print(f"baseline: {base}", flush=True)

    # --- correctness of the lean engine on this device and dtype
    check: dict = {}
    lean = LeanDecoder(plain, use_graphs=False)
    ids = tok(prompts[0], add_special_tokens=False)["input_ids"]
    check["logits_rel_error"] = lean.check_against(plain, ids)
    del lean
    g = SamplingConfig(n_samples=1, temperature=0.0, max_new_tokens=48, stop_at_fence=False, batch_size=8)
    lean_greedy = Rollout(plain, tok, engine="lean").generate(prompts[:4], g)
    hf_greedy = Rollout(plain, tok, engine="hf").generate(prompts[:4], g)
    agree = []
    for a, b in zip(lean_greedy.flat(), hf_greedy.flat()):
        n = 0
        while n < min(len(a.token_ids), len(b.token_ids)) and a.token_ids[n] == b.token_ids[n]:
            n += 1
        agree.append(n)
    check["greedy_agreeing_prefix_tokens"] = agree
    check["greedy_tokens"] = [len(c.token_ids) for c in hf_greedy.flat()]
    print(f"lean engine check: {check}", flush=True)
    del plain
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()

    # --- ours: the RL policy (LoRA attached), default fast path
    policy, tok = models.load_policy(cfg, trainable=True)
    policy.eval()
    sampler = Rollout(policy, tok)
    rows = []
    shapes = [(4, 2), (8, 4)] if args.quick else [(32, 1), (16, 10), (32, 10)]
    for n_tasks, n_samples in shapes:
        for fence in (False, True):
            s = SamplingConfig(n_samples=n_samples, temperature=0.8, top_p=0.95, max_new_tokens=max_new,
                               batch_size=n_tasks * n_samples, seed=args.seed, stop_at_fence=fence)
            r = ours(sampler, prompts[:n_tasks], s, device)
            r["what"] = f"Rollout, {n_tasks} tasks x {n_samples} samples, stop_at_fence={fence}"
            r["speedup_vs_baseline"] = round(r["tokens_per_s"] / base["tokens_per_s"], 2)
            rows.append(r)
            print(f"{r['what']}: {r['tokens_per_s']} tok/s ({r['speedup_vs_baseline']}x)", flush=True)

    result = {"device": torch.cuda.get_device_name(0) if device == "cuda" else f"cpu ({platform.machine()})",
              "model": args.model, "dtype": cfg.model.dtype, "torch": torch.__version__,
              "max_new_tokens": max_new, "baseline": base, "lean_check": check, "ours": rows,
              "engine": sampler.engine_name, "engine_note": sampler.note,
              "best_speedup": max(r["speedup_vs_baseline"] for r in rows)}
    (out_dir / "rollout_throughput.json").write_text(json.dumps(result, indent=2))

    print()
    print(f"{'configuration':<62} {'seqs':>5} {'tokens':>7} {'wall s':>7} {'tok/s':>9} {'x base':>6}")
    print(f"{base['what']:<62} {base['sequences']:>5} {base['tokens']:>7} {base['wall_s']:>7.2f} "
          f"{base['tokens_per_s']:>9.1f} {1.0:>6.2f}")
    for r in rows:
        print(f"{r['what']:<62} {r['sequences']:>5} {r['tokens']:>7} {r['wall_s']:>7.2f} "
              f"{r['tokens_per_s']:>9.1f} {r['speedup_vs_baseline']:>6.2f}")
    print(f"\nwrote {out_dir / 'rollout_throughput.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
