#!/usr/bin/env bash
# tests/gpu/run.sh: the whole GPU check of issues 8 and 30 in one script, meant to
# take < 8 minutes on an H200: build for sm_90, run the GPU tests (each CUDA kernel vs
# its CPU counterpart, CUDA backend vs the reference backend op by op, the device's
# image transform vs the CPU's bytes, a ViT-B/32-shaped random model through the
# encoder cpu vs cuda, the CLIP and SigLIP fixture models through the encoder on cpu
# vs cuda), then the GPU benchmark (the product's path at batch 256 vs PyTorch fp16
# autocast on the same weights, ratio printed; the tower vs the sum of its GEMMs; our
# GPU embeddings vs PyTorch's fp32 ones, cosine >= 0.9995), then an end-to-end
# ingest of generated photos per decode mode; one summary table at the end.
#
#   tests/gpu/run.sh                 build in ./build-gpu, test, bench
#   CLIPDB_GPU_PREBUILT=dir run.sh   skip the build: use binaries packed by
#                                    tests/gpu/pack.sh (dir/bin, dir/lib), for GPU
#                                    machines without the project's -dev packages
#   CLIPDB_GPU_SKIP_BENCH=1          no benchmark
#   CLIPDB_GPU_SKIP_INGEST=1         no end-to-end ingest (CLIPDB_GPU_INGEST_N photos,
#                                    default 5000)
#   CLIPDB_PYTHON=python             the Python with torch (default python3)
# Exit status: 0 all passed and the bar met, 1 a test failed or a bar was missed,
# 77 no usable GPU.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
t_start=$(date +%s)
status=0
say() { printf '== %s (%ds)\n' "$*" $(( $(date +%s) - t_start )); }

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
fi

if [ -n "${CLIPDB_GPU_PREBUILT:-}" ]; then
  P=$(cd "$CLIPDB_GPU_PREBUILT" && pwd)
  export LD_LIBRARY_PATH="$P/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  T_HOST=$P/bin/test_device; T_GPU=$P/bin/test_cuda_kernels; BENCH=$P/bin/bench_gpu
  CLIPDB=$P/bin/clipdb; WORLD=$P/bin/clipdb-world
  say "using prebuilt binaries in $P"
else
  B=${CLIPDB_GPU_BUILD:-$here/build-gpu}
  say "configure ($B, sm_90)"
  if ! cmake -S "$here" -B "$B" -DCLIPDB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DCMAKE_BUILD_TYPE=Release >"$B.configure.log" 2>&1; then
    tail -25 "$B.configure.log"
    echo "run.sh: configure failed (missing -dev packages? build here with tests/gpu/pack.sh"
    echo "        and carry the result, then set CLIPDB_GPU_PREBUILT)"
    exit 1
  fi
  say "build"
  if ! cmake --build "$B" --target test_device test_cuda_kernels bench_gpu clipdb clipdb-world \
       -j"$(nproc 2>/dev/null || echo 4)" >"$B.build.log" 2>&1; then
    grep -E "error|Error" "$B.build.log" | head -30
    echo "run.sh: build failed (full log: $B.build.log)"
    exit 1
  fi
  T_HOST=$B/tests/kernels/test_device; T_GPU=$B/tests/kernels/test_cuda_kernels
  BENCH=$B/bench/bench_gpu
  CLIPDB=$B/clipdb; WORLD=$B/world/clipdb-world
fi
export CLIPDB_SOURCE_DIR="$here"

# One line per figure for the summary table at the end.
summary=()
row() { summary+=("$(printf '%-50s %s' "$1" "$2")"); }

say "host-side tests"
if "$T_HOST"; then row "host-side tests (test_device)" "pass"
else row "host-side tests (test_device)" "FAIL"; status=1; fi

say "GPU tests"
gpu_out=$("$T_GPU" 2>&1)
rc=$?
echo "$gpu_out"
if [ $rc -eq 77 ]; then echo "run.sh: no usable GPU"; exit 77; fi
[ $rc -eq 0 ] || status=1
row "GPU tests (ops, graph, encoder; cos >= 0.9995)" "$([ $rc -eq 0 ] && echo pass || echo FAIL)"
wc=$(printf '%s\n' "$gpu_out" | sed -n 's/.*cosine(cpu, gpu) = \([0-9.]*\).*/\1/p' |
     sort -n | head -1)
row "ViT-B/32 random weights: min cos(cpu, gpu)" "${wc:-n/a}"

if [ -z "${CLIPDB_GPU_SKIP_BENCH:-}" ]; then
  WD=$(mktemp -d "${TMPDIR:-/tmp}/clipdb_gpu_bench.XXXXXX")
  C=$WD/torch_check.bin
  say "benchmark: PyTorch baseline (fp16 autocast, batch 256)"
  W=$("$BENCH" --write-model "$WD" | sed -n 's/^model=//p')
  [ -n "$W" ] || status=1
  torch_out=$(timeout 150 "${CLIPDB_PYTHON:-python3}" "$here/bench/bench_gpu_torch.py" "$W" \
    --check "$C" 2>&1)
  echo "$torch_out"
  tips=$(printf '%s\n' "$torch_out" | sed -n 's/^torch_ips=//p')
  say "benchmark: clipdb CUDA backend"
  bench_out=$("$BENCH" --model "$W" ${tips:+--torch-ips "$tips"} --torch-check "$C" 2>&1)
  brc=$?
  echo "$bench_out"
  rm -rf "$WD"
  [ $brc -eq 0 ] || { echo "bench_gpu exited $brc"; status=1; }
  get() { printf '%s\n' "$bench_out" | sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | head -1; }
  row "tower images/s, batch 256 (bar: 20000 on H200)" "$(get tower_ips)"
  row "tower time / sum of its cuBLAS GEMMs" "$(get tower_vs_gemm_sum)"
  row "PyTorch fp16 autocast images/s" "${tips:-n/a}"
  row "ratio vs PyTorch (bar: >= 1.0)" "$(get ratio_vs_torch)"
  row "min cos vs PyTorch fp32" "$(get min_cosine_vs_torch_fp32)"
  ratio=$(printf '%s\n' "$bench_out" | sed -n 's/.*ratio_vs_torch=\([0-9.]*\).*/\1/p')
  if [ -z "$ratio" ] || ! awk -v r="$ratio" 'BEGIN{exit !(r >= 1.0)}'; then
    echo "BAR MISSED: tower throughput ratio vs PyTorch '${ratio:-none}' < 1.0"; status=1
  fi
fi
# End-to-end ingest of generated photos (JPEG, clipdb-world) on cuda:0, per decode
# mode, with the same random model: images/s of the whole pipeline.
if [ -z "${CLIPDB_GPU_SKIP_INGEST:-}" ] && [ -x "$CLIPDB" ] && [ -x "$WORLD" ]; then
  IW=$(mktemp -d "${TMPDIR:-/tmp}/clipdb_gpu_ingest.XXXXXX")
  N=${CLIPDB_GPU_INGEST_N:-5000}
  say "end-to-end ingest: $N generated photos"
  "$BENCH" --write-model "$IW" >/dev/null
  "$WORLD" generate "$IW/photos" --n "$N" --png-fraction 0 >/dev/null || status=1
  for mode in exact fast; do
    t0=$(date +%s.%N)
    if "$CLIPDB" -q --db "$IW/db_$mode" init --model "$IW/vitb32_random_f16.safetensors" \
         --thumb-size 0 >/dev/null &&
       "$CLIPDB" -q --db "$IW/db_$mode" ingest --device cuda --batch 256 --decode "$mode" \
         "$IW/photos" >/dev/null; then
      ips=$(awk -v n="$N" -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", n/(b-a)}')
      row "ingest images/s, --decode $mode (bar: fast 5000)" "$ips"
    else
      row "ingest, --decode $mode" "FAIL"; status=1
    fi
  done
  rm -rf "$IW"
fi
row "nvJPEG pixels vs libjpeg-turbo" "not measured: no nvJPEG decode path yet"

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
say "done, status $status"
exit $status
