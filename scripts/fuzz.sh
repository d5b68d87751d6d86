#!/usr/bin/env bash
# scripts/fuzz.sh: builds clipdb's libFuzzer targets (tests/fuzz/fuzz_*.c) with clang
# under ASan + UBSan and runs each for N seconds, printing executions, coverage and
# findings per target. Exits 1 when any target found something (crash, sanitizer
# report, leak, timeout, out-of-memory), 2 on a usage or build error.
#
#   scripts/fuzz.sh                 every target, 30 s each (what CI runs)
#   scripts/fuzz.sh 600             every target, 10 minutes each
#   scripts/fuzz.sh 60 fuzz_image   only the targets named
#   scripts/fuzz.sh replay          run every target once over its committed seeds
#                                   and saved crashes (a quick regression check)
#
# Installs what it needs like scripts/setup.sh does (setup.sh deps, then clang,
# libclang-rt-14-dev for libFuzzer and the sanitizer runtimes, llvm-14 for
# llvm-symbolizer). Environment: BUILD_DIR (default build-fuzz), JOBS (default
# number of CPUs), FUZZ_JOBS (parallel fuzzing processes per target, default 1),
# FUZZ_ARGS (extra libFuzzer flags for every target).
#
# Seeds: tests/fuzz/corpus/<target>/ (committed, never written by this script).
# The growing corpus lives in $BUILD_DIR/corpus/<target>/ and findings are saved to
# $BUILD_DIR/findings/<target>/; copy a reproducer to tests/fuzz/crashes/<target>/
# to keep it (replay runs those too). Reproduce one: $BUILD_DIR/fuzz/<target> FILE.
set -euo pipefail
# The whole script is one compound command, parsed before it runs: editing this file
# while a long campaign runs cannot derail it.
{
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
BUILD_DIR=${BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
FUZZ_JOBS=${FUZZ_JOBS:-1}
FUZZ_ARGS=${FUZZ_ARGS:-}
ALL_TARGETS=(fuzz_tokenizer fuzz_tok_hf fuzz_spm fuzz_image fuzz_png fuzz_meta fuzz_ignore
  fuzz_safetensors fuzz_model_config fuzz_packcache fuzz_tokcache fuzz_db fuzz_photo_filter
  fuzz_cli_args fuzz_serve fuzz_peer fuzz_hub fuzz_output fuzz_snapshot)

say() { printf 'fuzz: %s\n' "$*" >&2; }

secs=30
mode=fuzz
if [ $# -gt 0 ]; then
  case "$1" in
    replay) mode=replay; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *[!0-9]*) ;;
    *) secs=$1; shift ;;
  esac
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

# ---- dependencies ----------------------------------------------------------------------
# The project's own (and the FAISS C API) through setup.sh, then what fuzzing adds:
# clang, libFuzzer + the sanitizer runtimes (only Recommended by clang-14, so named
# here), clang's OpenMP (libomp-14-dev: the project links OpenMP, and gcc's libgomp
# headers do not serve clang), llvm-symbolizer for stack traces.
FUZZ_PACKAGES=(clang libclang-rt-14-dev llvm-14 libomp-14-dev)
"$here/scripts/setup.sh" deps
missing=()
for p in "${FUZZ_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v clang >/dev/null || { say "clang not found"; exit 2; }

# ---- build ---------------------------------------------------------------------------
# Every module is compiled with -fsanitize=fuzzer-no-link (coverage feedback) plus
# ASan/UBSan; only the fuzz_* executables link libFuzzer itself. Assertions stay on.
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cflags="-O1 -g $san -fsanitize=fuzzer-no-link"
# The project is written against gcc's warnings; clang-only warnings stay warnings
# here (-Werror applies to the rest): -Wbitwise-instead-of-logical (cli/cmd_admin.c).
cflags="$cflags -Wno-error=bitwise-instead-of-logical"
# clang 14 (Debian 12) rejects __builtin_cpu_supports("f16c"): see clang14_compat.h.
ccompat=""
if [ "$(clang -dM -E -x c /dev/null | awk '/__clang_major__/{print $3}')" -lt 15 ]; then
  ccompat="-include $here/tests/fuzz/clang14_compat.h"
fi
cmake_args=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Fuzz
  -DCLIPDB_CUDA=OFF -DCLIPDB_FUZZ=ON
  "-DCMAKE_C_FLAGS=$cflags $ccompat" "-DCMAKE_CXX_FLAGS=$cflags"
  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
  "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined")
# Until tests/CMakeLists.txt lists `fuzz`, hook the folder in from outside.
if ! grep -Eq '^[^#]*\bfuzz\b' tests/CMakeLists.txt; then
  cmake_args+=("-DCMAKE_PROJECT_INCLUDE=$here/tests/fuzz/standalone.cmake")
fi
mkdir -p "$BUILD_DIR"
# Configured every time (incremental): a new fuzz_*.c or module file needs it.
say "configuring $BUILD_DIR (clang, ASan + UBSan + libFuzzer)"
cmake -S . -B "$BUILD_DIR" "${cmake_args[@]}" >"$BUILD_DIR/configure.log" 2>&1 ||
  { cat "$BUILD_DIR/configure.log" >&2; exit 2; }
# Targets whose module is not in the tree yet are not defined: build the others.
defined=$(cmake --build "$BUILD_DIR" --target help 2>/dev/null | grep -oE 'fuzz_[a-z_]+' | sort -u)
build=()
for t in "${targets[@]}"; do
  grep -qx "$t" <<<"$defined" && build+=("$t")
done
if [ ${#build[@]} -eq 0 ]; then say "none of ${targets[*]} can be built in this tree"; exit 2; fi
say "building ${build[*]}"
if ! cmake --build "$BUILD_DIR" -j "$JOBS" --target "${build[@]}" >"$BUILD_DIR/build.log" 2>&1; then
  { grep -E -B2 -A8 "error|Error" "$BUILD_DIR/build.log" || tail -20 "$BUILD_DIR/build.log"; } | head -60 >&2
  say "build failed (full log: $BUILD_DIR/build.log)"
  exit 2
fi

# ---- run ------------------------------------------------------------------------------
# Single-threaded math (OpenMP/OpenBLAS pools are not what we fuzz), quiet library.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 CLIPDB_THREADS=1 CLIPDB_LOG=off
export CLIPDB_SOURCE_DIR="$here"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for s in /usr/lib/llvm-14/bin/llvm-symbolizer "$(command -v llvm-symbolizer || true)"; do
  if [ -x "$s" ]; then export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$s}; break; fi
done

# Per-target libFuzzer limits: the longest input worth trying.
max_len() {
  case "$1" in
    fuzz_image | fuzz_png | fuzz_meta) echo 65536 ;;
    fuzz_safetensors) echo 16384 ;;
    fuzz_model_config) echo 8192 ;;
    fuzz_db) echo 2048 ;;
    fuzz_cli_args) echo 1024 ;;
    *) echo 4096 ;;
  esac
}

failed=0
rows=()
for t in "${targets[@]}"; do
  bin="$BUILD_DIR/fuzz/$t"
  seeds="tests/fuzz/corpus/$t"
  dict="tests/fuzz/dict/$t.dict"
  log="$BUILD_DIR/logs/$t.log"
  mkdir -p "$BUILD_DIR/logs"
  if [ ! -x "$bin" ]; then
    rows+=("$(printf '%-18s %s' "$t" "not built (its module is not in this tree yet)")")
    continue
  fi
  extra=()
  [ -f "$dict" ] && extra+=("-dict=$dict")
  [ "$FUZZ_JOBS" -gt 1 ] && extra+=("-jobs=$FUZZ_JOBS" "-workers=$FUZZ_JOBS")
  if [ "$mode" = replay ]; then
    inputs=()
    [ -d "$seeds" ] && inputs+=("$seeds"/*)
    [ -d "tests/fuzz/crashes/$t" ] && inputs+=($(find "tests/fuzz/crashes/$t" -type f ! -name '*.md' ! -name '*.txt'))
    rc=0
    "$bin" -runs=1 -timeout=60 "${inputs[@]}" >"$log" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then failed=1; verdict="FAILED (exit $rc, $log)"; else verdict="ok"; fi
    rows+=("$(printf '%-18s %6d inputs  %s' "$t" "${#inputs[@]}" "$verdict")")
    continue
  fi
  work="$BUILD_DIR/corpus/$t"
  found="$BUILD_DIR/findings/$t"
  mkdir -p "$work" "$found"
  say "$t: ${secs}s"
  rc=0
  # -timeout: one input taking > 25 s is a finding (a hang); -rss_limit_mb: so is
  # using > 2 GB (a decompression bomb, an unbounded allocation).
  "$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 \
    -max_len="$(max_len "$t")" -artifact_prefix="$found/" \
    "${extra[@]}" $FUZZ_ARGS "$work" "$seeds" >"$log" 2>&1 || rc=$?
  [ "$FUZZ_JOBS" -gt 1 ] && cat fuzz-*.log >>"$log" 2>/dev/null && rm -f fuzz-*.log
  execs=$(grep -a 'stat::number_of_executed_units' "$log" | awk '{s += $2} END {print s + 0}')
  rate=$(grep -a 'stat::average_exec_per_sec' "$log" | awk '{s += $2} END {print s + 0}')
  last=$(grep -aE '^#[0-9]+' "$log" | grep -a 'cov:' | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
  # slow-unit-* files are inputs that took > 10 s (libFuzzer keeps them but does not
  # fail): reported, not counted as findings; a hang past -timeout is a finding.
  n_slow=$(find "$found" -type f -name 'slow-unit-*' | wc -l)
  n_found=$(find "$found" -type f ! -name 'slow-unit-*' | wc -l)
  if [ $rc -ne 0 ] || [ "$n_found" -gt 0 ]; then
    failed=1
    verdict="FINDING (exit $rc; $n_found in $found; log $log)"
    grep -a -m3 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz invariant failed|SUMMARY' "$log" |
      sed 's/^/    /' >&2 || true
  else
    verdict="0 findings"
  fi
  [ "$n_slow" -gt 0 ] && verdict="$verdict ($n_slow slow unit(s) in $found)"
  rows+=("$(printf '%-18s %11s %8s %6s %7s %7s  %s' "$t" "${execs:-0}" "${rate:-0}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$verdict")")
done

echo
if [ "$mode" = replay ]; then
  echo "fuzz replay (committed seeds and saved crashes):"
else
  echo "fuzz results (${secs}s per target, $FUZZ_JOBS job(s), ASan + UBSan):"
  printf '%-18s %11s %8s %6s %7s %7s  %s\n' target execs exec/s cov ft corpus findings
fi
printf '%s\n' "${rows[@]}"
exit $failed
}
