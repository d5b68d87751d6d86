#!/usr/bin/env bash
# scripts/setup.sh: installs what clipdb needs on Debian 12, builds it, and runs
# the main job or the test suite.
#
#   scripts/setup.sh            install dependencies (if missing) and build
#   scripts/setup.sh demo       ... then run `clipdb demo` on the bundled model
#   scripts/setup.sh test       ... then run the whole test suite (ctest)
#   scripts/setup.sh deps       only install dependencies
#
# Idempotent and quiet when there is nothing to do. Needs root (or sudo) only when
# a package is missing. Touches nothing outside this checkout except Debian's
# packages: the FAISS C API is built from Debian's own `faiss` source package,
# fetched with a private sources list into .deps/ (git-ignored), leaving the
# machine's apt configuration unchanged.
#
# Environment: BUILD_DIR (default build), CLIPDB_CUDA (AUTO|ON|OFF, default AUTO),
# CLIPDB_SANITIZE (OFF|ON), JOBS (default: number of CPUs).
set -euo pipefail

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
)

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
  build) say "built: $BUILD_DIR/clipdb" ;;
  demo) exec "$BUILD_DIR/clipdb" demo "${@:2}" ;;
  test) cd "$BUILD_DIR" && exec ctest --output-on-failure -j "$JOBS" "${@:2}" ;;
  *) say "unknown mode '$mode' (build|demo|test|deps)"; exit 2 ;;
esac
