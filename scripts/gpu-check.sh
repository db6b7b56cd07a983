#!/usr/bin/env bash
# The CUDA backend on a machine with an NVIDIA GPU: tests, node suite, light models, benchmarks.
#
#   scripts/gpu-check.sh OUTDIR
#
# Expects Python 3.12 with numpy, onnx, onnxruntime, pluggy, llvmlite, cupy and pytest installed
# (no network needed). Installs glow with `pip install --no-deps -e .`, runs every step under its
# own time limit (all of it well under 8 minutes on an H200), logs each to OUTDIR/<step>.log and
# writes OUTDIR/summary.txt. Exit status: 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
START=$(date +%s)
STATUS=0
export GLOW_VERIFY=0 PYTHONUNBUFFERED=1

say() { echo "$*" | tee -a "$SUMMARY"; }
step() {  # step NAME SECONDS COMMAND...: run, log, record status and the log's last lines
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  [ "$rc" -ne 0 ] && STATUS=1
  say "== $name: exit $rc in $(( $(date +%s) - t0 ))s (limit ${limit}s)"
  grep -E "[0-9]+ (passed|failed)|passed in|NEW FAIL|NOW PASSES|glow\[|GFLOP|^glow: error|Error:" "$OUT/$name.log" \
    | cut -c1-240 | tail -15 | tee -a "$SUMMARY"
}

: > "$SUMMARY"
say "glow CUDA check on $(hostname) at $(date -u +%FT%TZ)"
say "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo 'nvidia-smi: not found')"
say "$(python --version 2>&1); cupy $(python -c 'import cupy; print(cupy.__version__)' 2>&1 | tail -1)"

step install 120 bash -c "python -m pip install -q --no-deps -e . || python -m pip install -q --no-deps --no-build-isolation -e ."
step backends 60 glow backends
# CUDA-marked tests (kernel vs cuBLAS, small models) and the nvcc compile checks if nvcc exists.
step cuda_tests 150 python -m pytest -q -p no:cacheprovider tests/test_cuda.py -m "cuda or not slow"
# The whole ONNX node suite on CUDA, over 8 worker processes (each case builds its own module).
step node_suite 240 python scripts/parallel_node_suite.py --backend cuda --jobs 8
# The nine light models on CUDA.
step light_models 150 python -m pytest -q -p no:cacheprovider tests/test_models.py --glow-backend cuda -k light
# Latency: glow on the GPU against onnxruntime on this machine's CPU (all cores).
step bench_resnet50 90 glow bench resnet50 --backend cuda --rounds 20
step bench_vgg19 90 glow bench vgg19 --backend cuda --rounds 10
# One large MatMul: glow's tiled kernel, glow with cuBLAS, and cupy.matmul (cuBLAS) directly.
step matmul_vs_cublas 90 python scripts/cuda_matmul_bench.py 4096

say "== total $(( $(date +%s) - START ))s, status $STATUS"
exit $STATUS
