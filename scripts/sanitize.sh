#!/usr/bin/env bash
# scripts/sanitize.sh: builds the whole project with AddressSanitizer + UBSan
# (-DCLIPDB_SANITIZE=ON, CPU only) in build-asan/ and runs the whole test suite there.
#
#   scripts/sanitize.sh               build-asan/, then ctest (every test)
#   scripts/sanitize.sh -L unit       extra arguments go to ctest
#   scripts/sanitize.sh -R fault      e.g. only the fault-injection tests
#
# `scripts/setup.sh test` (what CI runs) calls this after the main suite passes
# (skip with CLIPDB_TEST_QUICK=1), with CLIPDB_KILL_SECONDS=20 to bound the kill -9
# test's time budget.
#
# It is scripts/setup.sh test with another build folder and the sanitizer runtime
# options below, so dependencies are installed the same way. Environment: BUILD_DIR
# (default build-asan), JOBS, BUILD_TYPE (default RelWithDebInfo: -O2 -g, so stack
# traces have lines and the encoder tests stay fast enough), CLIPDB_CUDA (default
# OFF: the CUDA runtime and ASan's shadow memory do not mix without
# protect_shadow_gap=0, and the GPU tests need a GPU anyway).
#
# Runtime options, and why:
#   ASAN_OPTIONS
#     detect_leaks=1             leaks are findings (LeakSanitizer, at exit of each test)
#     allocator_may_return_null=1  an absurd allocation returns NULL instead of aborting:
#                                the library must turn it into CDB_NOMEM/CDB_TOO_LARGE,
#                                and tests of hostile input check exactly that
#     detect_stack_use_after_return=1, strict_string_checks=1,
#     check_initialization_order=1   stricter checks that cost little
#     abort_on_error=0, halt_on_error=1   stop at the first report, exit non-zero
#   UBSAN_OPTIONS
#     print_stacktrace=1, halt_on_error=1   (the build adds -fno-sanitize-recover=undefined)
#   LSAN_OPTIONS
#     suppressions=tests/fuzz/lsan.supp  only when that file exists; see the file
#     for each entry and why it is not ours
#   OMP_NUM_THREADS / OPENBLAS_NUM_THREADS are left alone: the thread pools of
#   libgomp and OpenBLAS are not instrumented, but they are what the tests exercise.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"

asan="detect_leaks=1:allocator_may_return_null=1:detect_stack_use_after_return=1"
asan="$asan:strict_string_checks=1:check_initialization_order=1:abort_on_error=0:halt_on_error=1"
export ASAN_OPTIONS=${ASAN_OPTIONS:-$asan}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ -z "${LSAN_OPTIONS:-}" ] && [ -f "$here/tests/fuzz/lsan.supp" ]; then
  export LSAN_OPTIONS="suppressions=$here/tests/fuzz/lsan.supp:print_suppressions=0"
fi

export BUILD_DIR=${BUILD_DIR:-build-asan}
export BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}
export CLIPDB_CUDA=${CLIPDB_CUDA:-OFF}
export CLIPDB_SANITIZE=ON
printf 'sanitize: ASan + UBSan build in %s (%s), ASAN_OPTIONS=%s\n' "$BUILD_DIR" "$BUILD_TYPE" \
  "$ASAN_OPTIONS" >&2
exec "$here/scripts/setup.sh" test "$@"
