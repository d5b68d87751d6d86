#!/usr/bin/env bash
# run_pytest.sh BUILD_DIR SOURCE_DIR: the Python package as a user installs it: a venv
# (with Debian's numpy, pytest, setuptools and wheel from the system site), `pip install
# --no-build-isolation --no-index SOURCE/python` into it, then this folder's tests run
# by the venv's python from a scratch folder (so the installed copy is imported, not
# the source tree's), over BUILD/lib/libclipdb.so.1 through CLIPDB_LIBRARY.
# Exit 77 (skipped) without the bundled model or without Debian's python3-venv,
# python3-pytest or python3-numpy.
set -uo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
py=/usr/bin/python3
model=$(ls -d "$src"/models/*/ 2>/dev/null | head -1)
[ -n "$model" ] || { echo "SKIP: no bundled model"; exit 77; }
for m in venv pytest numpy setuptools wheel; do
  "$py" -c "import $m" 2>/dev/null ||
    { echo "SKIP: no python3 module $m (Debian's python3-$m)"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clipdb-py-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv --system-site-packages "$tmp/venv" || { echo "FAIL: python3 -m venv"; exit 1; }
# from a copy: setuptools builds in the tree it is given (build/, *.egg-info)
cp -r "$src/python" "$tmp/python"
"$tmp/venv/bin/pip" install --quiet --no-build-isolation --no-index "$tmp/python" \
  >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; echo "FAIL: pip install ./python"; exit 1; }
mkdir "$tmp/run" && cd "$tmp/run" || exit 1
CLIPDB_LIBRARY=$build/lib/libclipdb.so.1 CLIPDB_BIN=$build/clipdb \
  CLIPDB_WORLD=$build/world/clipdb-world CLIPDB_TEST_MODEL=${model%/} \
  "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider "$src/tests/python"
