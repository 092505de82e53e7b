"""SFT throughput: real tokens per second of `train_sft`'s configurations against the plain loop.

    python benchmarks/sft_throughput.py --out DIR                    # GPU: the embedded model, bf16
    python benchmarks/sft_throughput.py --out DIR --device cpu --model tiny   # CPU: correctness only

Every row except the first is `tritonrl_lib.train.sft.train.train_sft` itself (capped at --steps optimizer
steps), so the number is what the trainer achieves, read from its own log. The first row is the plain
loop the speed-up is measured against: batches of 8 examples padded to 1024 tokens, the model's own
full-logits loss, AdamW. Tokens are real tokens (padding excluded); the plain loop also reports
padded tokens, the count a naive measurement would give.

The model is the profile's (embedded SmolLM2-135M-Instruct) with LoRA r=16, alpha=32, dropout 0.05 on
the seven projection modules. The data are the built-in tasks' prompts and Triton solutions cut to
lengths spread uniformly over 256..1024 tokens (what SFT data of this project looks like), fixed by
the seed. Before timing, each configuration computes the completion loss of the same 64 examples
through its own batching and attention (a random non-zero adapter, no update); it must match the
plain loop's, or the row is marked WRONG and is not a candidate.

Writes DIR/sft_throughput.json and prints a table. Needs about 4 minutes on one H100.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import gc
import json
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from tritonrl_lib.model import load as models  # noqa: E402
from tritonrl_lib.core.paths import RunPaths
from tritonrl_lib.core.config import load_config  # noqa: E402
from tritonrl_lib.core.jsonio import read_jsonl  # noqa: E402
from tritonrl_lib.train.sft import packed_attention  # noqa: E402
from tritonrl_lib.train.trainer import SpeedOptions, build_trainer, completion_nll
from tritonrl_lib.train.sft.train import train_sft  # noqa: E402
from tritonrl_lib.train.sft.synthetic import builtin_sft_records, toy_sft_records, write_records  # noqa: E402

SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclasses.dataclass
class Variant:
    name: str
    about: str
    batch: int = 8
    speed: SpeedOptions | None = None  # None: the plain loop
    gpu_only: bool = False


def _speed(**kw) -> SpeedOptions:
    """Every option explicit, so a profile's own speed settings never leak into a row."""
    kw.setdefault("compile", False)
    kw.setdefault("fused_kernels", False)
    return SpeedOptions(**kw)


VARIANTS = [
    Variant("plain_loop_b8_pad1024", "plain loop: 8 examples padded to 1024, full-logits loss"),
    Variant("trainer_padded_b8", "train_sft, padded to the longest in the batch, fused LM head",
            8, _speed(packing=False, group_by_length=False, lora_input_cast=True)),
    Variant("trainer_padded_grouped_b8", "+ batches grouped by length",
            8, _speed(packing=False, group_by_length=True, lora_input_cast=True)),
    Variant("trainer_packed_b8", "packed rows of 1024, padding-free, packed attention (auto)",
            8, _speed(packing=True, lora_input_cast=True)),
    Variant("trainer_packed_b16", "+ 16 rows per micro-batch",
            16, _speed(packing=True, lora_input_cast=True)),
    Variant("trainer_packed_b16_nocast", "+ LoRA inputs kept in bf16: the gpu profile's default",
            16, _speed(packing=True), gpu_only=True),
    Variant("trainer_packed_b32_nocast", "+ 32 rows per micro-batch",
            32, _speed(packing=True), gpu_only=True),
    Variant("trainer_packed_b64_nocast", "+ 64 rows per micro-batch",
            64, _speed(packing=True), gpu_only=True),
    Variant("trainer_packed_b64_nocast_fused", "64 rows, bf16 LoRA inputs, fused RMSNorm/SwiGLU kernels",
            64, _speed(packing=True, fused_kernels=True), gpu_only=True),
    Variant("trainer_packed_b16_nocast_fused", "16 rows, bf16 LoRA inputs, fused RMSNorm/SwiGLU kernels",
            16, _speed(packing=True, fused_kernels=True), gpu_only=True),
    Variant("trainer_packed_b32_nocast_fused", "32 rows, bf16 LoRA inputs, fused RMSNorm/SwiGLU kernels",
            32, _speed(packing=True, fused_kernels=True), gpu_only=True),
    Variant("trainer_packed_b16_loop", "16 rows, per-sequence SDPA instead of the varlen kernel",
            16, _speed(packing=True, attention="loop")),
    Variant("trainer_packed_b8_sdpa_mask", "8 rows, transformers' sdpa with a block-diagonal mask",
            8, _speed(packing=True, attention="native", lora_input_cast=True)),
    Variant("trainer_packed_b16_nocast_compile", "16 rows, bf16 LoRA inputs, decoder layers compiled",
            16, _speed(packing=True, compile=True), gpu_only=True),
]


# --------------------------------------------------------------------------- the plain loop


def _encode(tok, records, max_len: int):
    """(input_ids, labels) per example: the chat template, prompt tokens masked, cut at max_len."""
    out = []
    for r in records:
        full = tok(tok.apply_chat_template(r["prompt"] + r["completion"], tokenize=False),
                   add_special_tokens=False)["input_ids"][:max_len]
        n_prompt = len(tok(tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
                           add_special_tokens=False)["input_ids"])
        out.append((full, [-100] * min(n_prompt, len(full)) + full[n_prompt:]))
    return out


def _padded(encoded, pad_id: int, length: int, device):
    ids = torch.full((len(encoded), length), pad_id, dtype=torch.long)
    labels = torch.full((len(encoded), length), -100, dtype=torch.long)
    mask = torch.zeros((len(encoded), length), dtype=torch.long)
    for i, (x, y) in enumerate(encoded):
        ids[i, :len(x)], labels[i, :len(y)], mask[i, :len(x)] = torch.tensor(x), torch.tensor(y), 1
    return ids.to(device), labels.to(device), mask.to(device)


def _randomise_adapter(model) -> None:
    """The same non-zero adapter in every configuration, so the LoRA path is part of the check."""
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "lora_A" in name or "lora_B" in name:
                p.copy_((torch.randn(p.shape, generator=gen) * 0.05).to(p.device, p.dtype))


def plain_loop(cfg, records, steps: int, warmup: int, check_records) -> dict:
    model, tok = models.load_policy(cfg)
    device = next(model.parameters()).device
    on_gpu = device.type == "cuda"
    amp = torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_gpu)
    length = cfg.sft.max_seq_len

    # the reference loss: the same examples the trainer configurations are checked on
    _randomise_adapter(model)
    model.eval()
    total, count = 0.0, 0
    enc = _encode(tok, check_records, length)
    with torch.no_grad(), amp:
        for i in range(0, len(enc), 8):
            ids, labels, mask = _padded(enc[i:i + 8], tok.pad_token_id, length, device)
            logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
            target = labels[:, 1:]
            keep = target != -100
            lp = torch.log_softmax(logits, -1).gather(-1, target.clamp(min=0)[..., None])[..., 0]
            total -= lp[keep].sum().item()
            count += int(keep.sum())
    model.train()

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.sft.learning_rate)
    enc = _encode(tok, records, length)
    real = padded = 0
    times = []
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    for step in range(steps):
        batch = enc[(step * 8) % len(enc):(step * 8) % len(enc) + 8]
        ids, labels, mask = _padded(batch, tok.pad_token_id, length, device)
        if on_gpu:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with amp:
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_gpu:
            torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - t0)
            real += int(mask.sum())
            padded += mask.numel()
    t = sum(times)
    return {"tokens_per_s": real / t, "padded_tokens_per_s": padded / t, "step_s": t / len(times),
            "tokens_per_step": real / len(times), "nll": total / count, "nll_tokens": count,
            "peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None,
            "plan": "plain loop, padded to 1024, full logits"}


# --------------------------------------------------------------------------- train_sft


def trainer_variant(cfg, v: Variant, steps: int, warmup: int, check_records) -> dict:
    from datasets import Dataset

    cfg = copy.deepcopy(cfg)
    cfg.sft.per_device_batch_size = v.batch
    cfg.run = v.name
    on_gpu = models.resolve_device(cfg.device) == "cuda"

    # correctness: the completion loss of the check examples through this configuration's batching
    model, tok = models.load_policy(cfg)
    _randomise_adapter(model)
    check = Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]} for r in check_records])
    trainer, plan = build_trainer(cfg, check, model, tok, cfg.paths.sft_checkpoint, speed=copy.deepcopy(v.speed))
    total, count = completion_nll(trainer)
    del trainer, model
    _free()

    # throughput: train_sft itself, read back from its log
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    result = train_sft(cfg, speed=copy.deepcopy(v.speed), force=True, max_steps=steps, echo=lambda s: None)
    log = read_jsonl(cfg.paths.sft_log)
    if len(log) <= warmup + 1:
        raise RuntimeError(f"only {len(log)} logged steps; need more than warmup+1={warmup + 1} (more data?)")
    a, b = log[warmup], log[-1]
    dt = b["elapsed_s"] - a["elapsed_s"]
    return {"tokens_per_s": (b["num_tokens"] - a["num_tokens"]) / dt, "step_s": dt / (b["step"] - a["step"]),
            "tokens_per_step": (b["num_tokens"] - a["num_tokens"]) / (b["step"] - a["step"]),
            "nll": total / count, "nll_tokens": count, "steps": b["step"], "final_loss": result.final_loss,
            "peak_mem_gb": torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None, "plan": plan}


def _free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------- main


def environment(device: str) -> dict:
    import peft
    import transformers
    import trl

    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
           "trl": trl.__version__, "peft": peft.__version__, "device": device}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["packed_attention"] = packed_attention.select_backend("cuda", 0, torch.bfloat16)
    return env


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder for sft_throughput.json and the runs")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--model", default=None, help="embedded (default on GPU) | tiny (default on CPU) | HF path")
    ap.add_argument("--steps", type=int, default=None, help="optimizer steps per configuration (GPU 12, CPU 4)")
    ap.add_argument("--warmup", type=int, default=None, help="steps left out of the timing (GPU 3, CPU 1)")
    ap.add_argument("--variants", default="", help="comma-separated names (default: all); see VARIANTS")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    device = models.resolve_device(args.device)
    on_gpu = device == "cuda"
    model = args.model or ("embedded" if on_gpu else "tiny")
    steps = args.steps or (12 if on_gpu else 4)
    warmup = args.warmup if args.warmup is not None else (3 if on_gpu else 1)
    n_check = 64 if on_gpu else 8
    max_len = 1024
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = load_config("gpu" if on_gpu else "cpu", overrides={
        "model": model, "device": device, "dtype": "auto", "lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
        "lora_target_modules": SEVEN, "gradient_checkpointing": False, "max_seq_len": max_len,
        "epochs": 1, "learning_rate": 2e-4, "warmup_ratio": 0.0, "logging_steps": 1, "save_steps": 100000,
        "save_total_limit": 1, "seed": args.seed, "outputs_dir": str((args.out / "runs").resolve())})

    names = [n for n in args.variants.split(",") if n]
    unknown = set(names) - {v.name for v in VARIANTS}
    if unknown:
        ap.error(f"unknown variants {sorted(unknown)}; have {[v.name for v in VARIANTS]}")
    chosen = [v for v in VARIANTS if (not names or v.name in names) and (on_gpu or not v.gpu_only)]

    # data: enough examples for the largest micro-batch to take `steps` steps
    tok = models.load_tokenizer(model, args.seed)
    need_tokens = max(v.batch for v in chosen) * max_len * (steps + 1)
    t0 = time.perf_counter()
    records = None
    if model != "tiny":
        try:
            records = builtin_sft_records(max(n_check, need_tokens // 560), tok, seed=args.seed,
                                          min_tokens=256, max_tokens=max_len)
        except Exception as e:  # the built-in suite is not this benchmark's subject
            print(f"built-in tasks unavailable ({type(e).__name__}: {e}); using the toy examples", flush=True)
    if records is None:
        records = toy_sft_records(max(64, need_tokens // 500), seed=args.seed)
    print(f"data: {len(records)} examples in {time.perf_counter() - t0:.1f}s", flush=True)
    for v in chosen:
        write_records(RunPaths(Path(cfg.outputs_dir) / v.name).sft_train, records)
    cfg.sft.max_samples = len(records)

    env = environment(device)
    print(json.dumps(env), flush=True)
    rows = []
    t_all = time.perf_counter()
    for v in chosen:
        t0 = time.perf_counter()
        print(f"--- {v.name}: {v.about}", flush=True)
        try:
            if v.speed is None:
                row = plain_loop(cfg, records[: max(64, steps * 8)], steps, warmup, records[:n_check])
            else:
                row = trainer_variant(cfg, v, steps, warmup, records[:n_check])
            row["status"] = "ok"
        except torch.cuda.OutOfMemoryError:
            row = {"status": "out of memory"}
        except Exception as e:  # one configuration failing must not hide the others
            row = {"status": f"failed: {type(e).__name__}: {str(e)[:300]}", "traceback": traceback.format_exc()[-2000:]}
        row.update(name=v.name, about=v.about, batch=v.batch, wall_s=round(time.perf_counter() - t0, 1))
        rows.append(row)
        print({k: row[k] for k in row if k != "traceback"}, flush=True)
        _free()

    # correctness against the plain loop, speed-up against it
    base = next((r for r in rows if r["name"] == "plain_loop_b8_pad1024" and r["status"] == "ok"), None)
    tol = 2e-2 if on_gpu else 1e-4  # relative, on the mean per-token NLL (bf16 vs fp32)
    for r in rows:
        if r["status"] != "ok":
            continue
        if base:
            r["nll_rel_diff"] = abs(r["nll"] - base["nll"]) / abs(base["nll"])
            r["loss_matches"] = r["nll_rel_diff"] <= tol and r["nll_tokens"] == base["nll_tokens"]
            r["speedup"] = r["tokens_per_s"] / base["tokens_per_s"]
    ok = [r for r in rows if r["status"] == "ok" and r.get("loss_matches", True) and r is not base]
    best = max(ok, key=lambda r: r["tokens_per_s"], default=None)

    print()
    print(f"{'configuration':36s} {'tok/s':>10s} {'x plain':>8s} {'tok/step':>9s} {'step s':>7s} "
          f"{'mem GB':>7s} {'loss check':>12s}  how")
    for r in rows:
        if r["status"] != "ok":
            print(f"{r['name']:36s} {r['status']}")
            continue
        check = ("reference" if r is base else
                 ("ok" if r.get("loss_matches") else "WRONG") + f" {r.get('nll_rel_diff', 0):.1e}")
        mem = f"{r['peak_mem_gb']:.1f}" if r.get("peak_mem_gb") is not None else "-"
        print(f"{r['name']:36s} {r['tokens_per_s']:10,.0f} {r.get('speedup', 1):8.2f} {r['tokens_per_step']:9,.0f} "
              f"{r['step_s']:7.3f} {mem:>7s} {check:>12s}  {r['plan']}")
    if base:
        print(f"\nplain loop counting padding as tokens: {base['padded_tokens_per_s']:,.0f} tokens/s")
    if best:
        print(f"fastest correct configuration: {best['name']} ({best['tokens_per_s']:,.0f} tokens/s"
              + (f", {best['speedup']:.2f}x the plain loop)" if base else ")"))
    total = time.perf_counter() - t_all
    print(f"total {total:.0f}s")
    out = args.out / "sft_throughput.json"
    out.write_text(json.dumps({"environment": env, "steps": steps, "warmup": warmup, "max_seq_len": max_len,
                               "examples": len(records), "model": model, "tolerance": tol, "rows": rows,
                               "fastest": best["name"] if best else None, "total_s": round(total, 1)}, indent=2))
    print(f"wrote {out}")
    return 0 if all(r["status"] == "ok" and r.get("loss_matches", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
