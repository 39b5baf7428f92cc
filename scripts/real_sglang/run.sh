#!/bin/bash
# On the GPU machine (the `run` tool's device), from the repository root:
#   bash scripts/real_sglang/run.sh stage .sgc1 .sgc3      # copy carried bundle parts to /opt/sgx (one call per part)
#   bash scripts/real_sglang/run.sh session .sgc2          # last part, install, tiny models, gpu_session.py -> $OUT
# /opt survives between calls only while the machine stays warm (about 30 s idle), so the calls follow each other.
set -u
X=/opt/sgx; SG=/opt/sg; M=/opt/sgm
OUT=${OUT:-/tmp/out}; mkdir -p "$X" "$OUT"
PY=$(command -v python3)
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
*) echo "usage: run.sh stage DIR... | session [DIR...]" >&2; exit 2 ;;
esac
