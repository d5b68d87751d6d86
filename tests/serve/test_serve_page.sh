#!/usr/bin/env bash
# test_serve_page.sh BUILD_DIR: the page of `clipdb serve` in Debian's chromium,
# headless, driven by playwright-core (tests/serve/browser/test_page.mjs). Generates a
# library with the world generator (some photos in folders inside the root, plus a
# TIFF, a HEIC and an exact copy of one photo), ingests it with the bundled model, serves it on an
# ephemeral loopback port, runs the browser script, and leaves the screenshots in
# BUILD_DIR/serve-screenshots/. Exit 77 (skipped) with the reason when there is no
# browser, no node, no playwright-core (scripts/setup.sh test installs all three) or
# no bundled model.
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
chromium=${CLIPDB_CHROMIUM:-/usr/bin/chromium}
skip() { echo "SKIP test_serve_page: $*"; exit 77; }
[ -x "$chromium" ] || skip "no browser at $chromium (apt-get install chromium, or set CLIPDB_CHROMIUM)"
command -v node >/dev/null || skip "no node (apt-get install nodejs)"
[ -d "$here/browser/node_modules/playwright-core" ] ||
  skip "no playwright-core (cd tests/serve/browser && npm ci; scripts/setup.sh test does it)"
ls "$src"/models/*/model.safetensors >/dev/null 2>&1 || skip "no bundled model in models/"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clipdb-page-XXXXXX")
out="$build/serve-screenshots"
mkdir -p "$out"
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export NO_COLOR=1
unset CLIPDB_DB CLIPDB_MODEL
"$build/world/clipdb-world" generate "$tmp/photos" --seed 11 --n 60 >/dev/null || exit 1
rm -f "$tmp/photos/manifest.jsonl"
# folders inside the root for the folder filter, and photos browsers cannot show for
# the viewer's preview: a 2400x1600 TIFF written now, the HEIC fixture of the decoder's
# tests (tests/golden/README.md, "images/", has its provenance)
mkdir -p "$tmp/photos/trips/2023/beach" "$tmp/photos/trips/2024" "$tmp/photos/scans" || exit 1
mv "$tmp"/photos/img_0000003.* "$tmp/photos/trips/2023/beach/" &&
  mv "$tmp"/photos/img_0000004.* "$tmp/photos/trips/2024/" &&
  mv "$tmp"/photos/img_0000005.* "$tmp/photos/trips/" || exit 1
node "$here/browser/make_tiff.mjs" "$tmp/photos/scans/scan.tif" 2400 1600 || exit 1
# an exact copy of one photo: one tile with a count, two with "Group copies" off, and a
# group in the duplicates view
for f in "$tmp"/photos/img_0000006.*; do cp "$f" "$tmp/photos/scans/copy_of_6.${f##*.}" || exit 1; done
cp "$src/tests/golden/images/heic_o6_120x90.heic" "$tmp/photos/scans/phone.heic" || exit 1
"$build/clipdb" init --db "$tmp/db" --quiet || exit 1
"$build/clipdb" ingest --db "$tmp/db" "$tmp/photos" --quiet || exit 1
"$build/clipdb" serve --db "$tmp/db" --port 0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pid=$!
port=
for _ in $(seq 1 200); do
  port=$(sed -n 's|.*http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/serve.out")
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/serve.err"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "clipdb serve did not start"; cat "$tmp/serve.err"; exit 1; }
node "$here/browser/test_page.mjs" "http://127.0.0.1:$port" "$out"
rc=$?
kill -TERM "$pid"
wait "$pid"
serve_rc=$?
pid=
[ $serve_rc -eq 0 ] || { echo "clipdb serve exited $serve_rc"; rc=1; }
[ $rc -eq 0 ] && echo "screenshots: $out"
exit $rc
