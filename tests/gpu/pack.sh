#!/usr/bin/env bash
# tests/gpu/pack.sh DIR: builds the GPU tests and benchmark for sm_90 here (where
# the project's -dev packages are installed) and copies them, with the shared
# libraries they need that a bare CUDA machine may lack (OpenBLAS, jansson,
# utf8proc, ...; not libc, not the NVIDIA driver, not cuBLAS, which is dlopen()ed
# from the GPU machine's CUDA), into DIR/bin and DIR/lib. Carry DIR to the GPU
# machine and run: CLIPDB_GPU_PREBUILT=DIR tests/gpu/run.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: tests/gpu/pack.sh DIR}
B=${CLIPDB_GPU_BUILD:-$here/build-gpu}
cmake -S "$here" -B "$B" -DCLIPDB_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" --target test_device cdb_fake_nvjpeg test_cuda_kernels test_cuda_ingest \
  bench_gpu clipdb clipdb-world -j"$(nproc)"
mkdir -p "$out/bin" "$out/lib"
cp "$B/tests/kernels/test_device" "$B/tests/kernels/test_cuda_kernels" \
  "$B/tests/kernels/test_cuda_ingest" "$B/bench/bench_gpu" "$B/clipdb" "$B/world/clipdb-world" \
  "$out/bin/"
cp "$B/tests/kernels/libcdb_fake_nvjpeg.so" "$out/lib/" # test_device's stand-in libnvjpeg
for exe in "$out"/bin/*; do
  ldd "$exe" | awk '/=> \//{print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libgcc_s.so*|libstdc++.so*) ;;
      libcuda.so*|libcublas*) ;;
      *) cp -Ln "$lib" "$out/lib/" 2>/dev/null || true ;;
    esac
  done
done
du -sh "$out"
