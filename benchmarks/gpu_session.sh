#!/usr/bin/env bash
# The GPU measurements behind docs/PERFORMANCE.md and docs/RESULTS.md, on a two-GPU machine (a
# device session: `run` with nvidia-h200-x2). The embedded model arrives over the first three calls
# (model-1 with the wheels, then model-2, then model-3: two parts and the tree together pass the
# 64 MiB a call may take along; see ../shared/device/README.md), so the model-free phase comes first
# and the second call only brings model-2 along (`source .device/setup.sh; true`).
#
#   bash benchmarks/gpu_session.sh 1   # call 1. GPU 1: GPU tests, verifier benchmark; GPU 0: 01_data, profile
#   bash benchmarks/gpu_session.sh 2   # call 3. GPU 0: SFT (02_sft); RL held-out: best-of-N on GPU 0, GRPO on GPU 1
#   bash benchmarks/gpu_session.sh 3   # call 4. the same RL held-out commands again: they resume, then evaluate
#   bash benchmarks/gpu_session.sh 4   # the rest of the pipeline (03 -> 05) and SFT throughput, if time is left
#
# The verifier alone needs no model and one GPU (nvidia-h200; takes .device/setup.sh and .device/wheels along):
#   bash benchmarks/gpu_session.sh 5   # GPU tests, the per-phase profile, the benchmark without spare children
#   bash benchmarks/gpu_session.sh 6   # candidates' processes under cProfile; the verifier benchmark (ours vs
#                                      # KernelBench's way, timing stability)
#   bash benchmarks/gpu_session.sh 7   # a process's fixed costs (benchmarks/process_costs.py); our pool traced
#                                      # (every candidate's points on one clock, the pool's timeline drawn)
#   bash benchmarks/gpu_session.sh 8   # a spare's warm-up steps; GPU tests; the verifier benchmark traced (ours vs KernelBench's way,
#                                      # timing stability, the pool's timeline)
#   bash benchmarks/gpu_session.sh 9   # GPU tests; the whole verifier benchmark three times on one machine (traced)
#   bash benchmarks/gpu_session.sh 10  # our pool alone, settings alternating (ABLATE="key=value key=value")
#   bash benchmarks/gpu_session.sh 11  # timing stability on an idle machine and with every CPU busy
#   bash benchmarks/gpu_session.sh 12  # timing stability right after a batch and after 30 s idle
#   bash benchmarks/gpu_session.sh 13  # timing variants (head start, end before sync) after a batch
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
    timeout $(left 420) $PY benchmarks/verifier.py --device cuda --out "$R/verifier" > "$R/verifier.log" 2>&1
    echo "verifier benchmark rc=$?" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout 150 $PY -m tritonrl_lib.cli run --params gpu --run gpu --only 01_data > "$R/run_01.log" 2>&1
  log "01_data rc=$? $(tail -2 "$R/run_01.log" | tr '\n' ' ')"
  CUDA_VISIBLE_DEVICES=0 timeout $(left 400) $PY benchmarks/verifier_profile.py --n 3 --out "$R/profile" > "$R/profile.log" 2>&1
  log "verifier_profile rc=$?"
  wait
  grep -h "ratio\|CV\|cand\|x\b" "$R/verifier.log" | tail -20 >> "$R/summary.txt"
  ;;
2|3)
  if ! $PY -c "from tritonrl_lib.model.load import checkpoint_complete as c; import sys; sys.exit(0 if c('outputs/gpu/checkpoints/sft') else 1)"; then
    CUDA_VISIBLE_DEVICES=0 timeout -s INT 200 $PY -m tritonrl_lib.cli run --params gpu --run gpu --only 01_data,02_sft \
        > "$R/run_sft.log" 2>&1
    log "01_data,02_sft rc=$? $(tail -2 "$R/run_sft.log" | tr '\n' ' ')"
  fi
  ( CUDA_VISIBLE_DEVICES=1 timeout -s INT $(left 560) $PY benchmarks/rl_heldout.py --methods grpo --grpo-steps 2 \
        --out /tmp/rl_grpo --from-run outputs/gpu > "$R/rl_grpo.log" 2>&1
    echo "rl_heldout grpo rc=$? $(tail -2 "$R/rl_grpo.log" | tr '\n' ' ')" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout -s INT $(left 560) $PY benchmarks/rl_heldout.py --methods best_of_n \
      --out /tmp/rl_bon --from-run outputs/gpu > "$R/rl_bon.log" 2>&1
  log "rl_heldout best_of_n rc=$? $(tail -2 "$R/rl_bon.log" | tr '\n' ' ')"
  wait
  for m in grpo bon; do mkdir -p "$R/rl_$m"; cp /tmp/rl_$m/*.json /tmp/rl_$m/*.md "$R/rl_$m/" 2>/dev/null
    cp -r /tmp/rl_$m/runs/*/logs "$R/rl_$m/" 2>/dev/null; done
  cat "$R"/rl_*/rl_heldout.md >> "$R/summary.txt" 2>/dev/null
  ;;
4)
  ( export CUDA_VISIBLE_DEVICES=1
    timeout $(left 540) $PY benchmarks/sft_throughput.py --out "$R/sft" --variants \
        plain_loop_b8_pad1024,trainer_packed_b64_nocast_fused > "$R/sft_throughput.log" 2>&1
    echo "sft_throughput rc=$?" >> "$R/summary.txt" ) &
  CUDA_VISIBLE_DEVICES=0 timeout -s INT 550 $PY -m tritonrl_lib.cli run --params gpu --run gpu > "$R/run.log" 2>&1
  log "pipeline rc=$? $(tail -3 "$R/run.log" | tr '\n' ' ')"
  wait
  ;;
5)
  nvidia-smi -L | tee "$R/gpus.txt"
  $PY -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$R/summary.txt"
  $PY -c "
import time; t = time.perf_counter()
import torch, triton, triton.language
from tritonrl_lib.verify.compilation.check import warm_gpu_compiler
print('compiler warm-up:', warm_gpu_compiler() or 'ok', f'{time.perf_counter() - t:.2f} s', 'cuda initialised:', torch.cuda.is_initialized())" 2>&1 | tee -a "$R/summary.txt"
  timeout 200 $PY -m pytest -q -m gpu tests/test_verify_pool.py tests/test_verify_compile.py -p no:cacheprovider \
      > "$R/pytest_gpu.log" 2>&1; log "pytest -m gpu rc=$? $(tail -1 "$R/pytest_gpu.log")"
  timeout $(left 420) $PY benchmarks/verifier_profile.py --n 3 --out "$R/profile" > "$R/profile.log" 2>&1
  log "verifier_profile rc=$?"; grep -v "^{" "$R/profile.log" >> "$R/summary.txt"
  timeout $(left 560) $PY benchmarks/verifier.py --device cuda --ours-only --set prestart_child=off --out "$R/verifier" \
      > "$R/verifier_off.log" 2>&1; log "ours, prestart off rc=$? $(grep '^ours' "$R/verifier_off.log")"
  ;;
6)
  timeout 120 $PY benchmarks/verifier_profile.py --n 3 --cprofile --out "$R/cprofile" > "$R/cprofile.log" 2>&1
  log "verifier_profile --cprofile rc=$?"; rm -rf "$R/cprofile/prof"
  timeout $(left 560) $PY benchmarks/verifier.py --device cuda --out "$R/verifier" > "$R/verifier.log" 2>&1
  log "verifier benchmark rc=$?"
  grep -h "ratio\|CV\|cand\|x\b\|MISSED\|\[ok\]" "$R/verifier.log" | tail -24 >> "$R/summary.txt"
  ;;
7)
  timeout 150 $PY benchmarks/process_costs.py --out "$R" > "$R/process_costs.log" 2>&1; log "process_costs rc=$?"
  timeout $(left 400) $PY benchmarks/verifier.py --device cuda --ours-only --trace --out "$R" > "$R/trace.log" 2>&1
  log "ours traced rc=$? $(grep '^ours' "$R/trace.log")"
  cp "$R"/*.png "$R"/*.json "$OUT/" 2>/dev/null
  ;;
8)
  timeout 100 $PY benchmarks/process_costs.py --quick --out "$R" > "$R/process_costs.log" 2>&1; log "process_costs rc=$?"
  timeout 200 $PY -m pytest -q -m gpu tests/test_verify_pool.py tests/test_verify_compile.py -p no:cacheprovider \
      > "$R/pytest_gpu.log" 2>&1; log "pytest -m gpu rc=$? $(tail -1 "$R/pytest_gpu.log")"
  timeout $(left 560) $PY benchmarks/verifier.py --device cuda --trace --out "$R" > "$R/verifier.log" 2>&1
  log "verifier benchmark rc=$?"
  grep -h "ratio\|CV\|cand\|x\b\|MISSED\|\[ok\]" "$R/verifier.log" | tail -24 >> "$R/summary.txt"
  cp "$R"/*.png "$R"/*.json "$R"/*.md "$OUT/" 2>/dev/null
  ;;
9)
  timeout 100 $PY benchmarks/compare_chunks.py > "$R/compare_chunks.md" 2>&1; log "compare_chunks rc=$?"
  cat "$R/compare_chunks.md" >> "$R/summary.txt"
  timeout 200 $PY -m pytest -q -m gpu tests/test_verify_pool.py tests/test_verify_compile.py -p no:cacheprovider \
      > "$R/pytest_gpu.log" 2>&1; log "pytest -m gpu rc=$? $(tail -1 "$R/pytest_gpu.log")"
  for i in 1 2 3; do  # the whole benchmark again on the same machine: how far the ratio moves run to run
    [ "$(left 560)" -gt 120 ] || break
    timeout $(left 560) $PY benchmarks/verifier.py --device cuda --trace --out "$R/run$i" > "$R/verifier$i.log" 2>&1
    log "verifier benchmark $i rc=$? $(grep -h '^| ours\|^| KernelBench' "$R/run$i/verifier_cuda.md" | cut -d'|' -f2-5 | tr '\n' ' ')"
  done
  cp "$R"/run1/* "$OUT/" 2>/dev/null  # the others come back in phase9.tgz (a call returns a few files only)
  ;;
12)
  # timing stability right after a burst of candidates' processes, and again after 30 s idle (the GPU's
  # clocks, power and use sampled every 200 ms meanwhile: smi.csv)
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
      --format=csv -lms 200 > "$R/smi.csv" 2>&1 &
  SMI=$!
  stab() { timeout 120 $PY benchmarks/verifier.py --stability-eval softmax --stability-out "$R/$1.json" >/dev/null 2>&1
    $PY -c "import json; d=json.load(open('$R/$1.json')); print('$1', 'CV %.2f%%' % (d['ours']['cv'] * 100), 'naive %.2f%%' % (d['naive']['cv'] * 100), [round(x, 3) for x in d['ours']['speedups']])"; }
  for i in 1 2 3; do
    [ "$(left 560)" -gt 90 ] || break
    timeout 120 $PY benchmarks/verifier.py --device cuda --ours-only --out "$R/load$i" > /dev/null 2>&1
    log "$(stab busy$i)"
    sleep 30
    log "$(stab idle$i)"
  done
  kill $SMI
  ;;
13)
  # the timing variants (benchmarks/timing_variants.py) after a batch of our pool, three rounds
  for i in 1 2 3; do
    [ "$(left 560)" -gt 100 ] || break
    timeout 120 $PY benchmarks/verifier.py --device cuda --ours-only --out "$R/load$i" > /dev/null 2>&1
    timeout 150 $PY benchmarks/timing_variants.py --out "$R/variants$i" > "$R/variants$i.txt" 2>&1
    log "variants round $i rc=$?"; head -4 "$R/variants$i.txt" >> "$R/summary.txt"
  done
  ;;
11)
  timeout 400 $PY benchmarks/timing_under_load.py --out "$R" > "$R/timing_under_load.md" 2>&1
  log "timing_under_load rc=$?"; cat "$R/timing_under_load.md" >> "$R/summary.txt"
  ;;
10)
  # an ablation, runs alternating on one machine: ABLATE="spare_children=1 spare_children=2" (default)
  for i in 1 2; do for setting in ${ABLATE:-spare_children=1 spare_children=2}; do
    [ "$(left 560)" -gt 60 ] || break 2
    timeout $(left 560) $PY benchmarks/verifier.py --device cuda --ours-only --trace --set "$setting" \
        --out "$R/abl$i" > "$R/abl_${setting}_$i.log" 2>&1
    log "ours $setting rc=$? $(grep '^ours' "$R/abl_${setting}_$i.log")"
  done; done
  ;;
esac
log "phase $PHASE done"
