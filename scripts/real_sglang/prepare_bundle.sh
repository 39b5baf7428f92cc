#!/bin/bash
# Build the offline SGLang 0.5.17 bundle for the GPU machine (it has no network), on this machine.
#
#   scripts/real_sglang/prepare_bundle.sh [CACHE]     (CACHE default: /var/tmp/opsconsole-real-sglang)
#
# Downloads exactly the wheels in wheels.txt (what the GPU machine's image lacks; sglang's closure minus
# torch/triton/... already there) for cp312 manylinux x86_64, installs them with --target, prunes what a
# Llama + EAGLE server on sm90 with --attention-backend triton never loads, packs with xz and splits the
# result into the repo's git-ignored carry folders .sgc1 .sgc2 .sgc3 (<= 40 MB each), which run.sh stages
# on the GPU machine one `run` call each. Needs a Python 3.12 (PY312) for `pip install --target`.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
CACHE=${1:-/var/tmp/opsconsole-real-sglang}
PY312=${PY312:-python3.12}
mkdir -p "$CACHE/wheels"
P=""; for n in $(seq 17 39); do P="$P --platform manylinux_2_${n}_x86_64"; done
P="$P --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform linux_x86_64 --platform any"
sed -E 's/^(.+)-([^-]+)$/\1==\2/' "$HERE/wheels.txt" > "$CACHE/requirements.txt"
# 1) the wheels, pinned, without their dependencies (the list is the closure already)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $P \
  -d "$CACHE/wheels" -r "$CACHE/requirements.txt"
W=$CACHE/wheels
# 2) everything but flashinfer and deep_gemm into one site folder
rm -rf "$CACHE/site" "$CACHE/fi" && mkdir -p "$CACHE/site" "$CACHE/fi"
MAIN=$(ls "$W"/*.whl | grep -vE '/(flashinfer_python|nvidia_cudnn_frontend|sgl_deep_gemm)-')
"$PY312" -m pip install -q --no-index --no-deps --no-compile --target "$CACHE/site" $MAIN
# 3) prune: FA3 (1.1 GB), sm100, infllm and flashmla objects, a static lib, tokenizer data, py-spy
S=$CACHE/site
rm -f "$S"/sgl_kernel/flash_ops.abi3.so "$S"/sgl_kernel/infllm_ops*.so "$S"/sgl_kernel/flashmla_ops.abi3.so
rm -rf "$S"/sgl_kernel/sm100 "$S"/xgrammar/lib/libxgrammar.a "$S"/mistral_common/data/tekken_*.json "$S"/bin/py-spy
find "$S" -name __pycache__ -type d -prune -exec rm -rf {} +
# 4) flashinfer (imported unconditionally on CUDA by fp8_utils) and its cudnn frontend
"$PY312" -m pip install -q --no-index --no-deps --no-compile --target "$CACHE/fi" \
  "$W"/flashinfer_python-*.whl "$W"/nvidia_cudnn_frontend-*.whl
find "$CACHE/fi" -name __pycache__ -type d -prune -exec rm -rf {} +
# 5) one xz stream of both folders (fi under fi/), split into <= 40 MB parts, deep_gemm's wheel beside
( cd "$CACHE" && tar -C site -cf - . | xz -T0 -9 > site.tar.xz && tar -C fi -cf - . | xz -T0 -6 > fi.tar.xz )
rm -rf "$REPO"/.sgc1 "$REPO"/.sgc2 "$REPO"/.sgc3 && mkdir -p "$REPO"/.sgc1 "$REPO"/.sgc2 "$REPO"/.sgc3
( cd "$CACHE" && rm -f part.* && split -b 40000000 -a 2 site.tar.xz part. )
PARTS=("$CACHE"/part.*)
cp "${PARTS[0]}" "$REPO/.sgc1/"
for p in "${PARTS[@]:1}"; do cp "$p" "$REPO/.sgc2/"; done
# opsconsole itself needs asyncssh (imported by its host layer), which the GPU machine's image lacks
python3 -m pip download -q --no-deps --only-binary=:all: -d "$W" asyncssh==2.24.1
cp "$CACHE/fi.tar.xz" "$W"/sgl_deep_gemm-*.whl "$W"/asyncssh-*.whl "$REPO/.sgc3/"
du -sh "$REPO"/.sgc1 "$REPO"/.sgc2 "$REPO"/.sgc3 "$S"
