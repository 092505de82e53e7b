#!/usr/bin/env bash
# The GPU measurements behind docs/PERFORMANCE.md and docs/RESULTS.md, as four calls on a two-GPU
# machine (a device session: `run` with nvidia-h200-x2; the embedded model arrives over the first
# three calls, see ../shared/device/README.md, so the model-free work comes first).
#
#   bash benchmarks/gpu_session.sh 1   # GPU 1: GPU tests, verifier benchmark; GPU 0: 01_data, the cumsum
#                                      #   family at full sizes in three dtypes
#   bash benchmarks/gpu_session.sh 2   # the verifier profile (short)
#   bash benchmarks/gpu_session.sh 3   # GPU 0: the gpu profile 02 -> 05; GPU 1: SFT throughput at batch 16/32/64
#   bash benchmarks/gpu_session.sh 4   # the pipeline's rest if any; RL held-out: best-of-N on GPU 0, GRPO on GPU 1
#                                      #   (a GRPO step took ~250 s on 2026-11-21, nearly all verification)
#
# Results land in $OUT (or ./gpu_results) as phaseN.tgz plus phaseN.txt (the summary lines).
# On a machine of our own, `make run` / the commands inside each phase are what to type.
set -u
PHASE=${1:?phase 1-4}
OUT=${OUT:-$PWD/gpu_results}
R=/tmp/gpu_results/phase$PHASE
mkdir -p "$R" "$OUT"
export PYTHONUNBUFFERED=1 TRITONRL_CACHE=${TRITONRL_CACHE:-/tmp/tritonrl-cache}
PY=${PY:-python3}
START=$(date +%s)
left() { echo $(( ${1} - ($(date +%s) - START) )); }   # seconds left of a phase budget
log() { echo "[$(date +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$R/summary.txt"; }

finish() {
  cp -r outputs/gpu/eval outputs/gpu/logs outputs/gpu/timings.json outputs/gpu/report.html "$R/" 2>/dev/null
  # weights and trainer checkpoints stay behind: what comes back from a call is limited to 16 MiB a file
  tar -czf "$OUT/phase$PHASE.tgz" --exclude='*.safetensors' --exclude='*.bin' --exclude='*.pt' \
      --exclude='*.pth' --exclude='checkpoint-*' --exclude='*.gguf' -C /tmp/gpu_results "phase$PHASE" 2>/dev/null
  cp "$R/summary.txt" "$OUT/phase$PHASE.txt"
}
trap finish EXIT

case $PHASE in
1)
  nvidia-smi -L | tee "$R/gpus.txt"
  $PY -c "import torch, triton, transformers, peft; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'peft', peft.__version__)" | tee -a "$R/summary.txt"
  ( export CUDA_VISIBLE_DEVICES=1
    timeout 150 $PY -m pytest -q -m gpu tests/test_verify_pool.py tests/test_verify_compile.py -p no:cacheprovider \
        > "$R/pytest_gpu.log" 2>&1; echo "pytest -m gpu rc=$? $(tail -1 "$R/pytest_gpu.log")" >> "$R/summary.txt"
    timeout $(left 400) $PY benchmarks/verifier.py --device cuda --out "$R/verifier" > "$R/verifier.log" 2>&1
    echo "verifier benchmark rc=$?" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout 150 $PY -m tritonrl_lib.cli run --params gpu --run gpu --only 01_data > "$R/run_01.log" 2>&1
  log "01_data rc=$? $(tail -2 "$R/run_01.log" | tr '\n' ' ')"
  CUDA_VISIBLE_DEVICES=0 timeout $(left 390) $PY -m tritonrl_lib.tasks.check_suite --size full \
      --only cumsum,cumprod,exclusive_cumsum,reverse_cumsum --dtypes float32,float16,bfloat16 > "$R/check_suite_cum.log" 2>&1
  log "check_suite cumsum family full rc=$? $(tail -1 "$R/check_suite_cum.log")"
  wait
  grep -h "ratio\|CV\|cand\|x\b" "$R/verifier.log" | tail -20 >> "$R/summary.txt"
  ;;
2)
  CUDA_VISIBLE_DEVICES=1 timeout 100 $PY benchmarks/verifier_profile.py --n 3 --out "$R/profile" > "$R/profile.log" 2>&1
  log "verifier_profile rc=$?"
  ;;
3)
  ( export CUDA_VISIBLE_DEVICES=1
    timeout $(left 540) $PY benchmarks/sft_throughput.py --out "$R/sft" --variants \
        plain_loop_b8_pad1024,trainer_packed_b16_nocast,trainer_packed_b32_nocast,trainer_packed_b64_nocast,trainer_packed_b64_nocast_fused \
        > "$R/sft_throughput.log" 2>&1; echo "sft_throughput rc=$?" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 550 $PY -m tritonrl_lib.cli run --params gpu --run gpu > "$R/run.log" 2>&1
  log "pipeline rc=$? $(tail -3 "$R/run.log" | tr '\n' ' ')"
  wait
  grep -h "tokens_per_s" "$R/sft_throughput.log" | cut -c1-300 >> "$R/summary.txt"
  ;;
4)
  if [ ! -f outputs/gpu/report.html ]; then
    CUDA_VISIBLE_DEVICES=0 timeout -s INT 240 $PY -m tritonrl_lib.cli run --params gpu --run gpu > "$R/run_rest.log" 2>&1
    log "pipeline (rest) rc=$? $(tail -3 "$R/run_rest.log" | tr '\n' ' ')"
  fi
  ( CUDA_VISIBLE_DEVICES=1 timeout $(left 540) $PY benchmarks/rl_heldout.py --methods grpo --grpo-steps 2 \
        --out "$R/rl_grpo" --from-run outputs/gpu > "$R/rl_grpo.log" 2>&1
    echo "rl_heldout grpo rc=$? $(tail -2 "$R/rl_grpo.log" | tr '\n' ' ')" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout $(left 540) $PY benchmarks/rl_heldout.py --methods best_of_n \
      --out "$R/rl_bon" --from-run outputs/gpu > "$R/rl_bon.log" 2>&1
  log "rl_heldout best_of_n rc=$? $(tail -2 "$R/rl_bon.log" | tr '\n' ' ')"
  wait
  cat "$R"/rl_*/rl_heldout.md >> "$R/summary.txt" 2>/dev/null
  ;;
esac
log "phase $PHASE done"
