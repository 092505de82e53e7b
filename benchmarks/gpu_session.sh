#!/usr/bin/env bash
# The GPU measurements behind docs/PERFORMANCE.md and docs/RESULTS.md, as four phases that each fit
# in one 10-minute call on a two-GPU machine (a device session: `run` with nvidia-h200-x2).
#
#   bash benchmarks/gpu_session.sh 1   # GPU tests, the built-in suite at full sizes, verifier benchmark
#   bash benchmarks/gpu_session.sh 2   # 01_data of the gpu profile (CPU workers)
#   bash benchmarks/gpu_session.sh 3   # the gpu profile 02 -> 05 on GPU 0; SFT + rollout throughput on GPU 1
#   bash benchmarks/gpu_session.sh 4   # the pipeline's rest if any; DDP on both GPUs; RL held-out benchmark
#                                        (best-of-N and GRPO did not both fit in one call on 2026-11-21)
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
  # GPU 1: the verifier benchmark (ours vs KernelBench's way; timing stability)
  ( CUDA_VISIBLE_DEVICES=1 timeout 480 $PY benchmarks/verifier.py --device cuda --out "$R/verifier" \
      > "$R/verifier.log" 2>&1; echo "verifier benchmark rc=$?" >> "$R/summary.txt" ) &
  # GPU 0: the GPU-only tests, every built-in task at full sizes in three dtypes, the suite through the pool
  CUDA_VISIBLE_DEVICES=0 timeout 150 $PY -m pytest -q -m gpu tests/test_verify_pool.py tests/test_verify_compile.py \
      -p no:cacheprovider > "$R/pytest_gpu.log" 2>&1; log "pytest -m gpu rc=$? $(tail -1 "$R/pytest_gpu.log")"
  CUDA_VISIBLE_DEVICES=0 timeout 200 $PY -m tritonrl_lib.tasks.check_suite --size full \
      --dtypes float32,float16,bfloat16 > "$R/check_suite_full.log" 2>&1
  log "check_suite full rc=$? $(tail -1 "$R/check_suite_full.log")"
  CUDA_VISIBLE_DEVICES=0 timeout $(left 500) $PY -m pytest -q -s tests/test_tasks_verified.py -p no:cacheprovider \
      > "$R/tasks_verified.log" 2>&1; log "tasks_verified rc=$? $(grep -h 'tasks verified' "$R/tasks_verified.log")"
  wait
  grep -h "x\b\|ratio\|CV\|cand" "$R/verifier.log" | tail -20 >> "$R/summary.txt"
  ;;
2)
  timeout 500 $PY -m tritonrl_lib.cli run --params gpu --run gpu --only 01_data > "$R/run_01.log" 2>&1
  log "01_data rc=$? $(tail -3 "$R/run_01.log" | tr '\n' ' ')"
  ;;
3)
  # GPU 1: throughput benchmarks, while GPU 0 runs the pipeline
  ( export CUDA_VISIBLE_DEVICES=1
    timeout 240 $PY benchmarks/sft_throughput.py --out "$R/sft" > "$R/sft_throughput.log" 2>&1
    echo "sft_throughput rc=$?" >> "$R/summary.txt"
    timeout 240 $PY benchmarks/rollout_throughput.py --out "$R/rollout" > "$R/rollout_throughput.log" 2>&1
    echo "rollout_throughput rc=$?" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 540 $PY -m tritonrl_lib.cli run --params gpu --run gpu > "$R/run_02_05.log" 2>&1
  log "pipeline rc=$? $(tail -3 "$R/run_02_05.log" | tr '\n' ' ')"
  wait
  for f in "$R/sft_throughput.log" "$R/rollout_throughput.log"; do tail -n 25 "$f" >> "$R/summary.txt"; done
  ;;
4)
  if [ ! -f outputs/gpu/report.html ]; then
    CUDA_VISIBLE_DEVICES=0 timeout -s INT 300 $PY -m tritonrl_lib.cli run --params gpu --run gpu > "$R/run_rest.log" 2>&1
    log "pipeline (rest) rc=$? $(tail -3 "$R/run_rest.log" | tr '\n' ' ')"
  fi
  # DDP: the same SFT entry on both GPUs, from the gpu run's data
  mkdir -p outputs/ddp2 && cp -r outputs/gpu/data outputs/ddp2/ 2>/dev/null
  timeout 180 $PY -m accelerate.commands.launch --multi_gpu --num_processes 2 --num_machines 1 \
      --mixed_precision bf16 --dynamo_backend no -m tritonrl_lib.train.sft --params gpu --run ddp2 \
      > "$R/ddp2.log" 2>&1
  log "ddp2 rc=$? $(grep -h 'SFT trained' "$R/ddp2.log")"
  cp outputs/ddp2/logs/sft_log.jsonl "$R/ddp2_sft_log.jsonl" 2>/dev/null
  CUDA_VISIBLE_DEVICES=0 timeout $(left 570) $PY benchmarks/rl_heldout.py --out "$R/rl_heldout" --from-run outputs/gpu \
      > "$R/rl_heldout.log" 2>&1
  log "rl_heldout rc=$? $(tail -2 "$R/rl_heldout.log" | tr '\n' ' ')"
  ;;
esac
log "phase $PHASE done"
