#!/bin/bash
# On the GPU machine (the `run` tool's device), from the repository root:
#   bash scripts/real_sglang/run.sh stage .sgc1 .sgc3      # copy carried bundle parts to /opt/sgx (one call per part)
#   bash scripts/real_sglang/run.sh session .sgc2          # last part, install, tiny models, gpu_session.py -> $OUT
# Issue 20 (tune on the real server; tune_session.py runs detached, across calls):
#   bash scripts/real_sglang/run.sh tune .sgc2             # last part, install, target + drafts, the session started
#                                                          #   in its own process session, then as `wait`
#   bash scripts/real_sglang/run.sh wait                   # wait for it (until WAIT_S s into the call, default 570),
#                                                          #   then copy what it has so far to $OUT; again until DONE
# Issue 23 (one server, no speculation; traffic_session.py):
#   bash scripts/real_sglang/run.sh traffic .sgc2 .sgc3    # last parts, install, tiny models, the pair and the shape
# Issue 38 (lengths in the model's tokens; traffic_session.py's `tokens` part: bench_serving's sharegpt mode beside
# `bench --dataset`, the same requests, output tokens within 1 %, tok/s within 3 %; $OUT/tokens.json):
#   bash scripts/real_sglang/run.sh tokens .sgc2 .sgc3     # last parts, install, tiny models, the proof (~6 min)
#   (env: DRAFT=sa-p90 WORKLOADS=random,chat DURATION=2 BUDGET_S=1500 PHASES=... pass through to tune_session.py)
# Issue 37 (predict from one benchmark at steps 3, then restarts; predict_session.py, detached like tune):
#   bash scripts/real_sglang/run.sh predict .sgc2 .sgc3    # then `run.sh wait`; tune.tgz holds predict.json, bench-*
#   (predict_report.py OUTDIR prints the comparison)
# Issue 46 (predict on a GPU-bound target: an 8B-shaped Llama and the repeat draft; predict_gpu_session.py, detached):
#   bash scripts/real_sglang/run.sh gpubuild .sgc1         # part 1 staged; the 16 GB target and its draft built with
#                                                          #   the image's torch (build_gpu_target.py weights)
#   bash scripts/real_sglang/run.sh predict8b .sgc2 .sgc3  # last parts, install, tokenizer, the session; then `wait`
#   (predict_gpu_report.py OUTDIR prints the table; env BUDGET_S, DURATION, PHASES pass through)
# /opt survives between calls only while the machine stays warm (about 30 s idle), so the calls follow each other.
set -u
O=${O:-/opt}  # /opt on the GPU machine (SIM=1 O=/tmp/x for issue 20's dry run here, see below)
X=$O/sgx; SG=$O/sg; M=$O/sgm
OUT=${OUT:-/tmp/out}; mkdir -p "$X" "$OUT"
PY=${PY:-$(command -v python3)}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1 HF_HOME=/opt/hf
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/driver.log"; }
stage() { for d in "$@"; do cp "$d"/* "$X"/ && log "staged $d: $(ls "$d" | tr '\n' ' ')"; done; }
install() {
  [ -f $SG/.done ] && { log "bundle already installed"; return 0; }
  local t=$SECONDS; mkdir -p $SG
  if command -v xz >/dev/null; then cat $X/part.* | xz -dc -T0 | tar -x -C $SG && xz -dc $X/fi.tar.xz | tar -x -C $SG
  else cat $X/part.* | $PY -c "import sys,tarfile;tarfile.open(fileobj=sys.stdin.buffer,mode='r|xz').extractall('$SG')" &&
       $PY -c "import tarfile;tarfile.open('$X/fi.tar.xz').extractall('$SG')"; fi || { log "extract failed"; return 1; }
  $PY -m pip install -q --no-index --no-deps --no-compile --target $SG $X/*.whl 2>&1 | grep -v WARNING | tail -3
  touch $SG/.done; log "bundle installed in $((SECONDS - t)) s: $(du -sh $SG | cut -f1)"
}
# Issue 20's session. `SIM=1 O=/tmp/x PY=.venv/bin/python bash run.sh tune`, then `... wait`, runs the same driver
# against the stand-in here (no bundle, no models: tune_session.py --sim): the detached session, `wait`, the snapshot.
RT=$O/rt; REPO_COPY=$O/repo; WAIT_S=${WAIT_S:-570}
gpu_models() {  # where the 16 GB target lives: memory (/dev/shm) where it has room, else /opt
  if [ -f /dev/shm/sgm/gpu-target.json ]; then echo /dev/shm/sgm
  elif [ -f $O/sgm/gpu-target.json ]; then echo $O/sgm
  elif [ "$(df -k --output=avail /dev/shm 2>/dev/null | tail -1)" -gt 41943040 ] 2>/dev/null; then echo /dev/shm/sgm
  else echo $O/sgm; fi
}
prep() {  # the target, the drafts and their offline figures; meanwhile an import profile of SGLang's server, which
          # also writes the bytecode of every module a start imports (the bundle ships none), so the first start is
          # not the one that compiles them
  [ -f $M/drafts.json ] && { log "models and drafts already built"; return 0; }
  local t=$SECONDS
  ( $PY -X importtime -c "import sglang.srt.server_args, sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler" \
      2> $O/importtime.txt >/dev/null; gzip -f $O/importtime.txt; log "import profile in $((SECONDS - t)) s" ) &
  $PY scripts/real_sglang/build_drafts.py $M --build-target --json $M/drafts.json > $O/build_drafts.log 2>&1
  log "target and drafts rc=$? in $((SECONDS - t)) s"; grep build_drafts $O/build_drafts.log | tail -8
  wait; log "prep done in $((SECONDS - t)) s"
}
launch() {  # tune_session.py in its own process session, from a copy of the repo (later calls re-sync the tree)
  [ -f $O/rt.pid ] && kill -0 "$(cat $O/rt.pid)" 2>/dev/null && { log "session already running"; return 0; }
  rm -rf $REPO_COPY && mkdir -p $REPO_COPY && cp -r console scripts pyproject.toml $REPO_COPY/
  local draft=${DRAFT:-sa-p90} sim=""
  if [ "${SIM:-0}" = 1 ]; then sim="--sim"
  elif [ ! -f $M/$draft/config.json ]; then log "no $M/$draft: the target itself is the draft"; draft=tiny-llama; fi
  rm -rf $RT && mkdir -p $RT
  # Popen with start_new_session: its own process session (outlives this call), and no descriptor of this shell
  # (bash keeps the call's output pipe open in high fds, which would make the call wait for the whole session)
  ( cd $REPO_COPY && PYTHONPATH=$SG $PY -c 'import subprocess, sys
p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=open(sys.argv[1], "ab"), stderr=subprocess.STDOUT,
                     start_new_session=True, close_fds=True)
print(p.pid)' $RT/session.log $PY scripts/real_sglang/${SESSION:-tune_session.py} $RT --models $M $sim \
      $([ "${SESSION:-tune_session.py}" = tune_session.py ] && echo --draft $draft ${WORKLOADS:+--workloads $WORKLOADS} \
        ${TOPK:+--topk $TOPK}) --budget-s "${BUDGET_S:-1500}" ${DURATION:+--duration $DURATION} \
      ${PHASES:+--phases $PHASES} > $O/rt.pid )
  log "session started (pid $(cat $O/rt.pid)): draft $draft, budget ${BUDGET_S:-1500} s"
}
snapshot() {  # what the session has so far, as at most 8 files in $OUT (each under 16 MiB: the journal and the
              # bench records, the big ones, travel on their own)
  cp $O/build_drafts.log $O/importtime.txt.gz $M/drafts.json "$(gpu_models)/gpu-target.json" $RT/summary.json "$OUT/" 2>/dev/null
  [ -f $RT/journal.jsonl ] && gzip -c $RT/journal.jsonl > "$OUT/journal.jsonl.gz"
  tar -C $RT/work/ws -czf "$OUT/bench.tgz" logs 2>/dev/null
  tar -C $RT --exclude=work/sim-state --exclude=work/control.sock --exclude=work/ws/logs --exclude=journal.jsonl \
      -czf "$OUT/tune.tgz" . 2>/dev/null
  ls -la "$OUT" | tail -n +2
}
wait_session() {
  local pid; pid=$(cat $O/rt.pid 2>/dev/null) || { log "no session was started here (a fresh machine?)"; return 1; }
  local seen=0 n
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt "$WAIT_S" ]; do
    sleep 5
    n=$(wc -l < $RT/session.log 2>/dev/null || echo 0)
    if [ "$n" -gt "$seen" ]; then sed -n "$((seen + 1)),${n}p" $RT/session.log | tail -20; seen=$n; fi
  done
  snapshot
  if kill -0 "$pid" 2>/dev/null; then log "SESSION RUNNING: call 'run.sh wait' again now (the machine goes back ~30 s idle)"
  else log "SESSION DONE"; fi
}
case ${1:-} in
stage) shift; stage "$@"; nvidia-smi -L; $PY -V; df -h /opt | tail -1 ;;
session)
  shift; stage "$@"
  install || exit 1
  export PYTHONPATH=$SG
  if [ ! -f $M/tiny-eagle/model.safetensors ]; then
    t=$SECONDS; $PY scripts/real_sglang/build_tiny.py $M > "$OUT/build_tiny.log" 2>&1; log "tiny models rc=$? in $((SECONDS - t)) s"
  fi
  $PY -c "import sglang, torch; print('sglang', sglang.__version__, 'torch', torch.__version__)" 2>&1 | tail -1 | tee -a "$OUT/driver.log"
  $PY scripts/real_sglang/gpu_session.py /opt/rs --models $M --budget-s "${BUDGET_S:-540}" ${STEPS:+--steps $STEPS} 2>&1 | tee -a "$OUT/driver.log"
  cp /opt/rs/summary.json "$OUT/" 2>/dev/null
  tar -C /opt/rs --exclude=work -czf "$OUT/results.tgz" . && ls -la "$OUT"
  ;;
tune)
  shift
  if [ "${SIM:-0}" = 1 ]; then SG=""; launch; wait_session; exit; fi
  stage "$@"
  install || exit 1
  export PYTHONPATH=$SG
  prep; launch; wait_session
  ;;
traffic|tokens)  # issue 23: bench --dataset next to bench_serving's sharegpt mode, and --shape-from-server;
                # issue 38 (tokens): that pair with the lengths in the model's tokens, and its verdicts (traffic_session.py)
  mode=$1; shift; stage "$@"
  install || exit 1
  export PYTHONPATH=$SG
  if [ ! -f $M/tiny-llama/config.json ]; then
    t=$SECONDS; $PY scripts/real_sglang/build_tiny.py $M > "$OUT/build_tiny.log" 2>&1; log "tiny models rc=$? in $((SECONDS - t)) s"
  fi
  only=""; [ "$mode" = tokens ] && only="--only tokens --rounds ${ROUNDS:-4}"
  $PY scripts/real_sglang/traffic_session.py $O/tr --models $M ${ROUNDS:+--rounds $ROUNDS} $only 2>&1 | tee -a "$OUT/driver.log"
  cp $O/tr/summary.json $O/tr/pair.json $O/tr/pair.log $O/tr/tokens.json "$OUT/" 2>/dev/null
  tail -c 200000 $O/tr/server.log > "$OUT/server-tail.log" 2>/dev/null; ls -la "$OUT"
  ;;
predict)  # issue 37: one benchmark at steps 3 predicts steps 2 and 1, then restarts measure them (predict_session.py)
  shift
  if [ "${SIM:-0}" = 1 ]; then SG=""; SESSION=predict_session.py launch; wait_session; exit; fi
  stage "$@"
  install || exit 1
  export PYTHONPATH=$SG
  prep; SESSION=predict_session.py launch; wait_session
  ;;
gpubuild)  # issue 46: the GPU-bound target and its draft, with the image's torch (no bundle needed)
  shift; stage "$@"
  M=$(gpu_models); df -h /dev/shm /opt | tail -2
  t=$SECONDS; $PY scripts/real_sglang/build_gpu_target.py weights $M 2>&1 | tee -a "$OUT/driver.log"
  log "gpu target in $M rc=${PIPESTATUS[0]} in $((SECONDS - t)) s"; cp $M/gpu-target.json "$OUT/" 2>/dev/null
  ;;
predict8b)  # issue 46: the session on the GPU-bound target (predict_gpu_session.py)
  shift
  if [ "${SIM:-0}" = 1 ]; then SG=""; SESSION=predict_gpu_session.py launch; wait_session; exit; fi
  stage "$@"
  install || exit 1
  export PYTHONPATH=$SG
  M=$(gpu_models)
  [ -f $M/gpu-target.json ] || { log "no target in $M: run.sh gpubuild first"; exit 1; }
  t=$SECONDS
  ( $PY -X importtime -c "import sglang.srt.server_args, sglang.srt.entrypoints.http_server, sglang.srt.managers.scheduler" \
      2> $O/importtime.txt >/dev/null; gzip -f $O/importtime.txt; log "import profile in $((SECONDS - t)) s" ) &
  $PY scripts/real_sglang/build_gpu_target.py tokenizer $M 2>&1 | tail -2; wait
  SESSION=predict_gpu_session.py launch; wait_session
  ;;
wait) wait_session ;;
*) echo "usage: run.sh stage DIR... | session [DIR...] | tune [DIR...] | wait | traffic [DIR...] | tokens [DIR...] | gpubuild DIR | predict8b [DIR...]" >&2; exit 2 ;;
esac
