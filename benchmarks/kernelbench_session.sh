#!/usr/bin/env bash
# Issue 30's measurement on ONE GPU in one device session: SFT, then best-of-N and GRPO side by side on
# the same GPU (half the host each), then the evaluation of all three on the held-out KernelBench
# problems at published sizes (generation, then one verification pass, task by task). The stages run in
# the background (setsid), so a device call that ends, or a lost connection, does not stop them; each
# later call watches and packs what is small.
#
#   bash benchmarks/kernelbench_session.sh start  R KB   # one GPU: SFT; best-of-N and GRPO side by side (half the host
#                                                        # each; METHODS=best_of_n or grpo: that one alone, the whole
#                                                        # host); then those evaluated. P and RL_S as for start4.
#                                                        # SFT's adapter comes back once, in bf16 parts (ship_sft)
#   bash benchmarks/kernelbench_session.sh start2 R KB   # the same on a host of two GPUs: SFT then best-of-N on GPU 0;
#                                                        # the base model's evaluation (cut at BASE_S seconds, default
#                                                        # 240) then GRPO on GPU 1, each RL method a GPU to itself;
#                                                        # then the evaluation over both GPUs (its kept folders name
#                                                        # the GPU count: `verify` such a run on a two-GPU machine
#                                                        # too). P, RL_S and SFT's adapter as for start; BASELINES
#                                                        # ("REC.json ...", resolved where typed): GPU 1 times the
#                                                        # problems those records solved, one record after another,
#                                                        # while SFT trains, instead of the base model's evaluation;
#                                                        # BASE_S=0: neither, GRPO starts beside best-of-N (an earlier
#                                                        # session's adapter in R: `cat sft.tar.part-* | tar x`)
#   bash benchmarks/kernelbench_session.sh start4 R KB   # four GPUs: SFT on GPU 0 (its adapter shipped as for start);
#                                                        # then best-of-N on GPU 0, GRPO on GPU 1 and SFT's
#                                                        # evaluation on GPUs 2-3, side by side; SFT's
#                                                        # evaluation stopped when RL ends (its verdicts kept), then two
#                                                        # evaluations of two GPUs each: SFT (resumed) with best-of-N on
#                                                        # GPUs 2-3, GRPO on GPUs 0-1 (every record "2x" GPUs and every
#                                                        # pool one of three on the host: SFT's kept verdicts are found).
#                                                        # P: the session's -p settings, given to every stage (e.g.
#                                                        # P="rl_tasks=kernelbench rounds=20"); RL_S (default 600): each
#                                                        # RL method's time budget, rl_time_budget_s (it stops between
#                                                        # rounds or steps when the next would overrun, its adapter kept)
#   (start, start2, start4 with SFT_KEPT=1: no SFT; the adapter already unpacked into R/runs/base/checkpoints/sft,
#    e.g. an earlier session's shipped parts, is what RL starts from and what "sft" evaluates, even where R's data
#    folder is another build of its corpus: sft.log names both corpus digests)
#   bash benchmarks/kernelbench_session.sh startsft R KB # one GPU: SFT (its adapter shipped as for start), its
#                                                        # development-set score (and DEV_ALSO's
#                                                        # NAME=ADAPTER ones, e.g. an earlier session's, to compare),
#                                                        # then SFT's evaluation alone (P as for start4)
#   bash benchmarks/kernelbench_session.sh watch         # W seconds (default 540) of progress lines, then pack
#                                                        # (until the last step started, eval or verify, is done);
#                                                        # at once, status 3, on a machine no plan started on
#   bash benchmarks/kernelbench_session.sh ship R        # SFT's adapter of R in parts again (ship_sft), for the next pack
#   (R/runs/baselines/, where the evaluation looks and eval.baselines_measure=solved writes, e.g. `python -m
#    tritonrl_lib.cli baselines --tasks KB --solved-in REC.json --out R/runs/baselines`: the eager and
#    torch.compile times of the problems a record solved, comes back with every pack)
#   bash benchmarks/kernelbench_session.sh verify R KB   # on a second machine without the weights: go on verifying
#                                                        # R's kept completions (benchmarks/verify_kept.py); FIRST
#                                                        # (e.g. kernelbench/L2/): those tasks queued first
#
# R is a gpu_rl_session.py folder whose data stage ran ahead: here, on the CPU (`gpu_rl_session.py R --only data`,
# the corpus and RL's training sizes: 65 minutes on 2 cores from a cold cache), or with DATA=1 (every plan) on the
# GPU host's cores as the plan's first step (a new checkout's data folder, or one after a corpus change). KB a
# KernelBench checkout. Logs: $LOGS (default /tmp/logs)/NAME.log,
# NAME.done holding the exit status. Packed: $OUT/res.tgz (logs, summaries, the data folder, the evaluation's
# records and kept folders; no weights). Measured: the 6,000-example corpus's data stage 449 s on a 64-core host and its SFT
# 559 s on one H200 (2026-11-29; 289 s for 4,000 examples the day before); side by side, a best-of-N round 165 s
# and a GRPO step 142 s (each alone on half a two-GPU host: 125 s and 95-127 s).
set -u
CALLER=$PWD   # R and KB are read relative to where the command was typed
cd "$(dirname "$0")/.." || exit 1   # the repository root: the tree the plan runs from
LOGS=${LOGS:-/tmp/logs}
SHIP=${SHIP:-/tmp/kbs-ship}   # SFT's adapter in parts (ship_sft), until a call has brought them back
OUT=${OUT:-$PWD/kernelbench_session_out}
PY=${PY:-python}
STAGGER_S=${STAGGER_S:-20}   # seconds between processes started side by side (each opens its log and pool first)
KB_ONLY="heldout_sets=[kernelbench]"   # the evaluation on the held-out KernelBench problems alone
TREE=/tmp/kbs-repo                      # the plan runs from a copy: a later device call replaces the tree it came in
cmd=${1:?start, start2, start4, startsft, watch, verify or pack}

session_settings() {  # the session's own settings (P, "key=value ..."), every stage the same: into the caller's xp
  local p
  set -f; for p in ${P:-}; do xp+=(-p "$p"); done; set +f
}

step() {  # step NAME command...: run it (OUT unset: gpu_rl_session would export into a later call's $OUT), log it
  local name=$1; shift
  echo "$(date +%T) start $name"
  env -u OUT "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo $rc > "$LOGS/$name.done"
  echo "$(date +%T) end $name rc=$rc"
  return $rc
}

sft_step() {  # R KB: SFT's stage with the caller's settings (xp), then its adapter shipped; SFT_KEPT=1: the
  # adapter already in R used as it is (kept_sft)
  if [ -n "${SFT_KEPT:-}" ]; then kept_sft "$1"; return; fi
  step sft "$PY" benchmarks/gpu_rl_session.py "$1" --only sft -p kernelbench="$2" "${xp[@]}" || return
  ship_sft "$1"  # the adapter comes back with the next pack: a later session starts RL from it
  return 0  # SFT finished: RL goes on whether or not the adapter could be shipped
}

kept_sft() {  # R: SFT_KEPT's stand-in for the sft step (its log and status): an earlier session's adapter, unpacked
  # into R/runs/base/checkpoints/sft, is what RL starts from and what "sft" evaluates. The SFT stage would train
  # again wherever the data folder is another build of the corpus (another host's interpreter drops other
  # candidates, so the digest differs by a few examples); the log names both digests
  local a=$1/runs/base/checkpoints/sft rc=0
  echo "$(date +%T) start sft (SFT_KEPT: the adapter in R)"
  {
    # model/load.checkpoint_complete's rule for an adapter: its marker (written last) beside adapter_config.json
    if [ -f "$a/tritonrl_model.json" ] && [ -f "$a/adapter_config.json" ]; then
      echo "SFT_KEPT: $a is used as it is, not trained here"
      "$PY" -c "import json, sys; from tritonrl_lib.core.digests import file_sha256; \
want = json.load(open(sys.argv[1])).get('fingerprint', {}).get('data_sha256'); h = file_sha256(sys.argv[2]); \
print('adapter trained on data', want, '; this data folder', h, '(the same)' if h == want else '(another build)')" \
          "$a/sft_run.json" "$1/runs/base/data/sft_train.jsonl" || echo "SFT_KEPT: the data digests could not be read"
    else
      echo "SFT_KEPT: no finished adapter in $a; unpack one first: cat sft.tar.part-* | tar xf - -C $1/runs/base/checkpoints"
      rc=1
    fi
  } > "$LOGS/sft.log" 2>&1
  echo $rc > "$LOGS/sft.done"
  echo "$(date +%T) end sft rc=$rc"
  return $rc
}

plan() {  # the stages, one after another (RL's two methods side by side); a failed SFT stops the rest
  local R=$1 KB=$2 xp=()
  session_settings
  local rl_s=(-p "rl_time_budget_s=${RL_S:-600}")
  data_first || return
  sft_step "$R" "$KB" || return
  case "${METHODS:-best_of_n,grpo}" in  # METHODS (checked before the plan starts): one method alone has the host
    best_of_n|grpo) rl_stage "" "$METHODS" ;;
    *)
      rl_stage 2 best_of_n &
      sleep "$STAGGER_S"  # the first loads its model and starts its pool before the second asks the host for as much
      rl_stage 2 grpo
      wait ;;
  esac
  step eval "$PY" benchmarks/gpu_rl_session.py "$R" --only eval --eval-stages "$(finished_stages)" -p kernelbench="$KB" \
      -p "$KB_ONLY" "${xp[@]}"
}

data_first() {  # DATA=1: the data stage on this host's cores before anything else (the corpus, the split and RL's
  # training sizes into R/runs/base/data; about 3.5 minutes on 16 cores against an hour on a 2-core machine),
  # with the caller's R, KB and session settings (xp); a data folder already built is found done at once
  [ -n "${DATA:-}" ] || return 0
  step data "$PY" benchmarks/gpu_rl_session.py "$R" --only data -p kernelbench="$KB" "${xp[@]}"
}

rl_stage() {  # POOLS METHOD: one RL method's stage (logged as bon or grpo) with the caller's R, KB, session settings
  # (xp) and time budget (rl_s); POOLS, where given, the pools the host is split among (TRITONRL_HOST_POOLS)
  local name=bon
  [ "$2" = grpo ] && name=grpo
  step "$name" env ${1:+TRITONRL_HOST_POOLS=$1} "$PY" benchmarks/gpu_rl_session.py "$R" --only "$2" -p kernelbench="$KB" \
      "${xp[@]}" "${rl_s[@]}"
}

finished_stages() {  # sft and the RL methods this plan finished: an adapter a method left from another run, or
  # one whose RL failed, is not evaluated
  local stages=sft
  [ "$(cat "$LOGS/bon.done" 2>/dev/null)" = 0 ] && stages+=,rl_best_of_n
  [ "$(cat "$LOGS/grpo.done" 2>/dev/null)" = 0 ] && stages+=,rl_grpo
  echo "$stages"
}

methods_ok() {  # METHODS, checked before any plan starts
  case "${METHODS:-best_of_n,grpo}" in
    best_of_n|grpo|best_of_n,grpo|grpo,best_of_n) return 0 ;;
    *) echo "METHODS=$METHODS: say best_of_n, grpo or best_of_n,grpo" >&2; return 1 ;;
  esac
}

ship_sft() {  # R: SFT's adapter (its top folder, no Trainer checkpoints) in bf16, tarred in parts of 15 MB under
  # $SHIP, which `pack` puts beside res.tgz once (rm $SHIP/.taken to send them again): a later session unpacks
  # it into runs/base/checkpoints/sft and starts at RL (cat sft.tar.part-* | tar x; fp32 weights are 78 MB, too
  # many for the 64 MB a call brings back). Built aside and moved in whole, so `pack` never sees half of it
  local src=$1/runs/base/checkpoints/sft d=$SHIP t=$SHIP.tmp
  rm -rf "$d" "$t" && mkdir -p "$t/sft"
  find "$src" -maxdepth 1 -type f -exec cp {} "$t/sft/" \;
  "$PY" -c "import sys, torch; from safetensors.torch import load_file, save_file; f = sys.argv[1]; \
t = load_file(f); save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in t.items()}, f, \
metadata={'format': 'pt'})" "$t/sft/adapter_model.safetensors" || { rm -rf "$t"; return; }
  tar cf - -C "$t" sft | split -b 15000000 - "$t/sft.tar.part-"
  if [ "${PIPESTATUS[0]}${PIPESTATUS[1]}" = 00 ]; then rm -rf "$t/sft" && mv "$t" "$d"; else rm -rf "$t"; fi
}

plan_sft() {  # one GPU: SFT, then its evaluation alone (a corpus change measured before RL is spent on it)
  local R=$1 KB=$2 xp=()
  session_settings
  data_first || return
  step sft "$PY" benchmarks/gpu_rl_session.py "$R" --only sft -p kernelbench="$KB" "${xp[@]}" || return
  ship_sft "$R"  # the adapter comes back with the next pack: a later session starts RL from it
  dev_eval "$R" "$R/runs/base/checkpoints/sft" sft
  local spec
  set -f; for spec in ${DEV_ALSO:-}; do dev_eval "$R" "${spec#*=}" "${spec%%=*}"; done; set +f
  step evalsft "$PY" benchmarks/gpu_rl_session.py "$R" --only eval --eval-stages sft -p kernelbench="$KB" \
      -p "$KB_ONLY" "${xp[@]}"
}

dev_eval() {  # R ADAPTER NAME: the adapter on the whole development set (tasks/devset/, 2 samples a task), the set
  # SFT's corpus and settings are chosen on, with the session's settings (xp); R/eval/dev_NAME.json comes back
  # with the pack
  step "dev_$3" "$PY" -m tritonrl_lib.cli eval --model "$2" --tasks devset --num_tasks 0 --k 2 --params gpu --quiet \
      --out "$1/eval/dev_$3.json" -p outputs_dir="$1/runs" -p run=base "${xp[@]}"
}

dev_also() {  # DEV_ALSO ("NAME=ADAPTER ..."), checked before the plan starts: each NAME a plain word other than
  # sft, each ADAPTER resolved where the command was typed (the plan runs from a copy of the tree)
  local spec name path out=()
  set -f
  for spec in ${DEV_ALSO:-}; do
    name=${spec%%=*} path=${spec#*=}
    if [[ "$spec" != *=* || ! "$name" =~ ^[A-Za-z0-9_]+$ || "$name" = sft || -z "$path" ]]; then
      echo "DEV_ALSO: '$spec' is not NAME=ADAPTER with NAME a plain word other than sft (e.g. sft15=/tmp/sft15/sft)" >&2
      set +f; return 1
    fi
    out+=("$name=$(cd "$CALLER" && realpath -m "$path")")
  done
  set +f
  DEV_ALSO="${out[*]}"
}

baselines_from() {  # BASELINES ("REC.json ..."), each resolved where the command was typed and required to exist
  local rec out=()
  set -f
  for rec in ${BASELINES:-}; do
    rec=$(cd "$CALLER" && realpath -m "$rec")
    if [ ! -f "$rec" ]; then echo "BASELINES: no record at $rec" >&2; set +f; return 1; fi
    out+=("$rec")
  done
  set +f
  BASELINES="${out[*]}"
}

plan2() {  # two GPUs: SFT then best-of-N on GPU 0; base evaluated (cut at BASE_S), then GRPO, on GPU 1; then the
  # evaluation of SFT and both RL methods over both GPUs. P and RL_S as for start4; SFT's adapter shipped as for start
  local R=$1 KB=$2 G0 G1 xp=()
  IFS=, read -r G0 G1 _ <<< "${CUDA_VISIBLE_DEVICES:-0,1}"   # the first two GPUs this host lets us see
  if [ -z "$G1" ]; then echo "start2 needs two GPUs (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"; return 1; fi
  session_settings
  local rl_s=(-p "rl_time_budget_s=${RL_S:-600}")
  data_first || return
  (
    sleep "$STAGGER_S"  # SFT's process opens the session first (each call numbers itself from the session's log)
    # while SFT trains: the base model's evaluation, or with BASELINES (eval records, e.g. slim ones listing the
    # problems earlier sessions solved) the eager and torch.compile times of the problems they solved, into
    # R/runs/baselines; cut at BASE_S (what it finished kept); -k: killed if SIGTERM does not end it. BASE_S=0:
    # neither (an SFT adapter shipped from an earlier session is found finished at once: GRPO starts with best-of-N)
    if [ "${BASE_S:-240}" = 0 ]; then
      :
    elif [ -n "${BASELINES:-}" ]; then  # one record after another, in the order given (e.g. Level 2's first)
      set -f
      # shellcheck disable=SC2086
      CUDA_VISIBLE_DEVICES=$G1 step baselines timeout -k 60 -s TERM "${BASE_S:-240}" bash -c 'py=$1 kb=$2 out=$3; \
          shift 3; for rec; do "$py" -m tritonrl_lib.cli baselines --tasks "$kb" --solved-in "$rec" --out "$out" \
          --params gpu -p kernelbench="$kb" --quiet || exit; done' _ "$PY" "$KB" "$R/runs/baselines" $BASELINES
      set +f
    else
      CUDA_VISIBLE_DEVICES=$G1 TRITONRL_HOST_POOLS=2 step base timeout -k 120 -s TERM "${BASE_S:-240}" \
          "$PY" benchmarks/gpu_rl_session.py "$R" --only eval --with-base --eval-stages base \
          -p kernelbench="$KB" -p "$KB_ONLY" "${xp[@]}"
    fi
    while [ ! -f "$LOGS/sft.done" ]; do sleep 5; done
    [ "$(cat "$LOGS/sft.done")" = 0 ] || exit 1
    sleep "$STAGGER_S"  # best-of-N loads its model and starts its pool first
    CUDA_VISIBLE_DEVICES=$G1 rl_stage 2 grpo
  ) &
  if CUDA_VISIBLE_DEVICES=$G0 sft_step "$R" "$KB"; then
    CUDA_VISIBLE_DEVICES=$G0 rl_stage 2 best_of_n
  fi
  wait
  [ "$(cat "$LOGS/sft.done")" = 0 ] || return
  step eval "$PY" benchmarks/gpu_rl_session.py "$R" --only eval --eval-stages "$(finished_stages)" -p kernelbench="$KB" \
      -p "$KB_ONLY" "${xp[@]}"
}

plan4() {  # four GPUs: SFT; RL's two methods beside SFT's evaluation; then every model evaluated, two GPUs each
  local R=$1 KB=$2 G0 G1 G2 G3 xp=()
  IFS=, read -r G0 G1 G2 G3 _ <<< "${CUDA_VISIBLE_DEVICES:-0,1,2,3}"
  if [ -z "$G3" ]; then echo "start4 needs four GPUs (CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset})"; return 1; fi
  session_settings
  data_first || return
  CUDA_VISIBLE_DEVICES=$G0 sft_step "$R" "$KB" || return
  # three pools on the host throughout (RL's two and an evaluation's): every evaluation's pool describes its
  # budget the same way, and a kept verdict is found only under the description it was stored with
  export TRITONRL_HOST_POOLS=3
  CUDA_VISIBLE_DEVICES=$G2,$G3 step eval_sft "$PY" benchmarks/gpu_rl_session.py "$R" --only eval \
      --eval-stages sft -p kernelbench="$KB" -p "$KB_ONLY" "${xp[@]}" &
  local ev=$!
  sleep "$STAGGER_S"  # each process opens the session's log and starts its pool before the next asks the host for as much
  # RL's time budget (RL_S, default 600 s a method): the evaluation keeps its time whatever a step costs
  local rl_s=(-p "rl_time_budget_s=${RL_S:-600}")
  CUDA_VISIBLE_DEVICES=$G0 rl_stage "" best_of_n &  # the host's three pools, as exported above
  local bon=$!
  sleep "$STAGGER_S"
  CUDA_VISIBLE_DEVICES=$G1 rl_stage "" grpo
  wait "$bon"
  # SFT's evaluation stops as on Ctrl-C (its verdicts are kept per sample); killed if it outlives 120 s
  local mine="--eval-stages sft -p kernelbench=$KB" t=0
  pkill -TERM -f -- "$mine"
  while kill -0 "$ev" 2>/dev/null && [ $t -lt 120 ]; do sleep 5; t=$((t + 5)); done
  kill -0 "$ev" 2>/dev/null && pkill -KILL -f -- "$mine"
  wait "$ev"
  # a method whose RL failed is not evaluated (what its folder holds is no finished run of this session)
  local a=sft b=
  [ "$(cat "$LOGS/bon.done")" = 0 ] && a=sft,rl_best_of_n || echo "best-of-N failed: not evaluated"
  [ "$(cat "$LOGS/grpo.done")" = 0 ] && b=rl_grpo || echo "GRPO failed: not evaluated"
  CUDA_VISIBLE_DEVICES=$G2,$G3 step eval_a "$PY" benchmarks/gpu_rl_session.py "$R" --only eval \
      --eval-stages "$a" -p kernelbench="$KB" -p "$KB_ONLY" "${xp[@]}" &
  local ea=$! rb=0
  if [ -n "$b" ]; then
    sleep "$STAGGER_S"
    CUDA_VISIBLE_DEVICES=$G0,$G1 step eval_b "$PY" benchmarks/gpu_rl_session.py "$R" --only eval \
        --eval-stages "$b" -p kernelbench="$KB" -p "$KB_ONLY" "${xp[@]}" || rb=$?
  fi
  wait "$ea"; local ra=$?
  echo $(( ra > rb ? ra : rb )) > "$LOGS/eval.done"   # what `watch` waits for: both evaluations over
}

background() {  # background LAST R KB: the tree copied, then `_LAST R KB` in a session of its own
  local last=$1 R KB
  R=$(cd "$CALLER" && realpath -m "$2") KB=$(cd "$CALLER" && realpath -m "$3")
  mkdir -p "$LOGS"
  if [ -f "$LOGS/plan.pid" ] && kill -0 "$(cat "$LOGS/plan.pid")" 2>/dev/null; then
    echo "a plan is running (pid $(cat "$LOGS/plan.pid"), $LOGS/plan.log): watch it, or stop it first" >&2
    exit 1
  fi
  rm -f "$LOGS"/*.done
  echo "$R" > "$LOGS/root"
  echo "${last%[24]}" > "$LOGS/last"
  rm -rf "$TREE" && mkdir -p "$TREE"
  tar cf - --exclude=./.venv --exclude=./.device/cache --exclude=./outputs --exclude=./.git . | tar xf - -C "$TREE"
  (cd "$TREE" && LOGS=$LOGS PY=$PY setsid nohup bash benchmarks/kernelbench_session.sh "_$last" "$R" "$KB" \
      > "$LOGS/plan.log" 2>&1 < /dev/null & echo $! > "$LOGS/plan.pid")
}

pack() {  # logs always; the session folder's small files where it is
  local R
  R=$(cat "$LOGS/root" 2>/dev/null)
  mkdir -p "$OUT"
  local small=()
  if [ -n "$R" ] && [ -d "$R" ]; then
    # best-of-N's rounds: each candidate's verdict and its phases (where a round's time went), no weights; the
    # data folder (corpus, split, RL's training sizes: ~4 MB packed), without which a shipped SFT adapter's
    # corpus fingerprint matches nothing in a later session and SFT would train again
    small=(-C "$R" $(cd "$R" && ls -d summary.* session_log.jsonl eval runs/*/logs runs/base/data \
        runs/*/checkpoints/rl/rounds/*/samples.jsonl runs/*/checkpoints/rl/rounds/*/round.json runs/baselines 2>/dev/null))
  fi
  if [ -d "$SHIP" ] && [ ! -f "$SHIP/.taken" ]; then  # SFT's adapter, once (ship_sft)
    cp "$SHIP"/sft.tar.part-* "$OUT/" && touch "$SHIP/.taken"
  fi
  tar czf "$OUT/res.tgz" --exclude='*.safetensors' --exclude='*.bin' --exclude='*.pt' "${small[@]}" \
      -C "$(dirname "$LOGS")" "$(basename "$LOGS")"
  ls -la "$OUT"
}

watch() {  # progress every 30 s until W seconds have passed or the last step is done, then pack
  local t0 last
  if [ ! -f "$LOGS/root" ]; then  # a bare machine: the one the plan started on was given back between calls
    echo "no plan was started on this machine ($LOGS/root is missing): the machine that ran 'start' has been" \
         "given back, and its logs and weights with it. Start again (start/start2/start4), or finish verifying" \
         "what an earlier call packed with 'verify R KB'" >&2
    return 3
  fi
  last=${LAST:-$(cat "$LOGS/last" 2>/dev/null || echo eval)}
  t0=$(date +%s)
  while [ $(( $(date +%s) - t0 )) -lt "${W:-540}" ]; do
    [ -f "$LOGS/$last.done" ] && break  # also before the first wait: a plan already over is packed at once
    sleep 30
    echo "== $(date +%T) $(tail -2 "$LOGS/plan.log" 2>/dev/null | tr '\n' ' ')"
    for f in "$LOGS"/*.log; do
      [ "$(basename "$f")" = plan.log ] && continue
      echo "  $(basename "$f"): $(tail -c 300 "$f" | tr '\r' '\n' | tail -1 | cut -c1-200)"
    done
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
  done
  pack
}

case $cmd in
  start) methods_ok || exit 2; background eval "${2:?R}" "${3:?KB}" ;;
  start2) baselines_from || exit 2; export BASELINES; background eval2 "${2:?R}" "${3:?KB}" ;;
  start4) background eval4 "${2:?R}" "${3:?KB}" ;;
  startsft) dev_also || exit 2; export DEV_ALSO; background evalsft "${2:?R}" "${3:?KB}" ;;
  verify) background verify "${2:?R}" "${3:?KB}" ;;
  _eval) plan "$2" "$3" ;;
  _eval2) plan2 "$2" "$3" ;;
  _eval4) plan4 "$2" "$3" ;;
  _evalsft) plan_sft "$2" "$3" ;;
  _verify) step verify "$PY" benchmarks/verify_kept.py "$2" ${FIRST:+--first "$FIRST"} -p kernelbench="$3" -p "$KB_ONLY" ;;
  watch) watch ;;
  pack) pack ;;
  ship) ship_sft "$(cd "$CALLER" && realpath -m "${2:?R}")" && ls "$SHIP" ;;
  *) echo "usage: $0 start R KB | start2 R KB | start4 R KB | startsft R KB | watch | verify R KB | pack | ship R" >&2
     exit 2 ;;
esac
