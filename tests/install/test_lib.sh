#!/usr/bin/env bash
# test_lib.sh CMAKE BUILD_DIR SOURCE_DIR CC SANITIZE: libclipdb installed and used as a
# user would (issue 27).
#  1. `cmake --install BUILD --prefix P` puts include/clipdb.h, lib/libclipdb.so.1 (its
#     SONAME) with the libclipdb.so link, lib/libclipdb.a, lib/pkgconfig/clipdb.pc and
#     lib/cmake/clipdb/ in place; then P is moved to Q (every path the files hold is
#     relative to them, so Q must work as P would have).
#  2. clipdb.h compiles alone, as C99 and as C++, with -Wall -Wextra -pedantic -Werror.
#  3. libclipdb.so exports exactly the functions clipdb.h declares (CLIPDB_API), and
#     those are the committed list tests/install/clipdb.symbols (a change to the ABI
#     is a change to that file); libclipdb.a defines them and the FAISS C API; each is
#     used by an example or bound by the Python package (tests/python calls each binding).
#  4. examples/search.c and examples/ingest.c build four ways: pkg-config (shared),
#     pkg-config --static (no libclipdb.so needed by the program), find_package(clipdb)
#     with clipdb::clipdb and with clipdb::clipdb_static.
#  5. Each build runs: ingest makes a database of generated world photos with the
#     bundled model, search answers a query; the hits of every build are the CLI's
#     (`clipdb search --json`: same ids, paths and scores, in order), with the pixel
#     sizes of the photos (the generator's manifest); the usage line names the linked
#     library's version (clipdb_version*) as `clipdb --version` does; a query whose terms
#     cancel out fails with the library's message.
# Exit 0 when all pass, 1 otherwise (each failure printed), 77 when there is no bundled
# model or no pkg-config.
# (No `producer | grep -q`: with pipefail, grep's early exit can fail the producer.)
set -uo pipefail
cmake=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
cc=$4
sanitize=$5
model=$(ls -d "$src"/models/*/ 2>/dev/null | head -1)
model=${model%/}
[ -n "$model" ] && [ -f "$model/model.safetensors" ] || { echo "SKIP: no bundled model"; exit 77; }
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clipdb-lib-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset CLIPDB_MODEL CLIPDB_DB CLIPDB_LOG
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
cflags=(-O1 -Wall -Wextra -Werror)
san=() # a sanitizer build's library needs its runtime in the program's link
[ "$sanitize" = ON ] && san=(-fsanitize=address,undefined -fno-omit-frame-pointer)
cflags+=("${san[@]}")

# ---- 1. install, then move the prefix ------------------------------------------------
"$cmake" --install "$build" --prefix "$tmp/P" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
mv "$tmp/P" "$tmp/Q"
Q=$tmp/Q
libdir=$(cd "$Q" && ls -d lib*/libclipdb.so.1 2>/dev/null | head -1 | xargs -r dirname)
[ -n "$libdir" ] || { ls -R "$Q" | head -40; echo "FAIL: no libclipdb.so.1 installed"; exit 1; }
L=$Q/$libdir
for f in include/clipdb.h "$libdir/libclipdb.so" "$libdir/libclipdb.a" \
         "$libdir/pkgconfig/clipdb.pc" "$libdir/cmake/clipdb/clipdbConfig.cmake" \
         "$libdir/cmake/clipdb/clipdbConfigVersion.cmake" \
         "$libdir/cmake/clipdb/clipdbTargets.cmake"; do
  [ -e "$Q/$f" ] || fail "cmake --install did not install $f"
done
soname=$(readelf -d "$L/libclipdb.so.1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libclipdb.so.1 ] || fail "SONAME is '$soname', not libclipdb.so.1"

# ---- 2. the header alone ---------------------------------------------------------------
printf '#include <clipdb.h>\nint main(void) { return CLIPDB_OK; }\n' >"$tmp/h.c"
"$cc" -std=c99 -pedantic -Wall -Wextra -Werror -I"$Q/include" -c "$tmp/h.c" -o "$tmp/h.o" ||
  fail "clipdb.h does not compile alone as C99"
if command -v c++ >/dev/null; then
  cp "$tmp/h.c" "$tmp/h.cc"
  c++ -std=c++11 -pedantic -Wall -Wextra -Werror -I"$Q/include" -c "$tmp/h.cc" -o "$tmp/hh.o" ||
    fail "clipdb.h does not compile alone as C++"
fi

# ---- 3. the exported symbols -------------------------------------------------------------
nm -D --defined-only "$L/libclipdb.so.1" |
  awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u >"$tmp/exported"
sed -n 's/^CLIPDB_API [^(]*[ *]\(clipdb_[a-z0-9_]*\)(.*/\1/p' "$Q/include/clipdb.h" | sort -u \
  >"$tmp/declared"
grep -v '^#' "$src/tests/install/clipdb.symbols" | sort -u >"$tmp/committed"
diff "$tmp/declared" "$tmp/exported" >"$tmp/d1" ||
  { fail "libclipdb.so exports other than clipdb.h declares (< header, > library)"; cat "$tmp/d1"; }
diff "$tmp/committed" "$tmp/exported" >"$tmp/d2" ||
  { fail "the exported symbols differ from tests/install/clipdb.symbols (< list, > library)"
    cat "$tmp/d2"; }
[ "$(wc -l <"$tmp/exported")" -ge 20 ] || fail "only $(wc -l <"$tmp/exported") symbols exported"
nm --defined-only "$L/libclipdb.a" 2>/dev/null | awk '$2 == "T" { print $3 }' |
  sort -u >"$tmp/adefs"
comm -23 "$tmp/declared" "$tmp/adefs" >"$tmp/amiss"
[ -s "$tmp/amiss" ] && { fail "libclipdb.a lacks:"; cat "$tmp/amiss"; }
grep -qx faiss_IndexFlat_new "$tmp/adefs" || fail "libclipdb.a does not carry the FAISS C API"
# every public function is used by an example or bound by the Python package (whose
# tests, tests/python, call each binding)
while read -r sym; do
  grep -qw "$sym" "$src"/examples/*.c ||
    grep -qF "(\"${sym#clipdb_}\"," "$src/python/clipdb/__init__.py" ||
    fail "$sym is used by no example and bound by no Python code"
done <"$tmp/committed"

# ---- 4. the examples, four ways -----------------------------------------------------------
export PKG_CONFIG_PATH=$L/pkgconfig
ex=$src/examples
builds=()
for prog in search ingest; do
  mkdir -p "$tmp/pc" "$tmp/pcs"
  # shellcheck disable=SC2046 # pkg-config's words are separate arguments
  "$cc" "${cflags[@]}" "$ex/$prog.c" $(pkg-config --cflags --libs clipdb) -o "$tmp/pc/$prog" ||
    fail "$prog: pkg-config build"
  # static: libclipdb.a chosen over the .so; --static adds what it needs
  # shellcheck disable=SC2046
  "$cc" "${cflags[@]}" "$ex/$prog.c" $(pkg-config --cflags clipdb) -Wl,--as-needed \
    -Wl,-Bstatic -lclipdb -Wl,-Bdynamic $(pkg-config --static --libs clipdb) \
    -o "$tmp/pcs/$prog" || fail "$prog: pkg-config --static build"
done
builds+=(pc pcs)
if readelf -d "$tmp/pcs/search" 2>/dev/null | grep -F libclipdb >"$tmp/needed"; then
  fail "the static build still needs libclipdb.so"; cat "$tmp/needed"
fi
for kind in OFF ON; do
  dir=$tmp/cm$kind
  if "$cmake" -S "$ex" -B "$dir" -DCMAKE_PREFIX_PATH="$Q" -DCLIPDB_STATIC=$kind \
       -DCMAKE_C_FLAGS="${cflags[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san[*]}" \
       -DCMAKE_BUILD_TYPE=Release >"$tmp/cm$kind.log" 2>&1 &&
     "$cmake" --build "$dir" >>"$tmp/cm$kind.log" 2>&1; then
    builds+=("cm$kind")
  else
    fail "find_package(clipdb) build, CLIPDB_STATIC=$kind"; tail -30 "$tmp/cm$kind.log"
  fi
done
readelf -d "$tmp/cmOFF/search" 2>/dev/null | grep -qF libclipdb.so.1 ||
  fail "the find_package shared build does not need libclipdb.so.1"

# ---- 5. run them ----------------------------------------------------------------------------
"$build/world/clipdb-world" generate "$tmp/photos" --seed 5 --n 24 >/dev/null 2>&1 ||
  { fail "clipdb-world generate"; exit 1; }
mv "$tmp/photos/manifest.jsonl" "$tmp/manifest.jsonl"
query="a red circle"
# the photos' sizes as the generator wrote them: name, WxH
/usr/bin/python3 "$src/tests/install/lib_hits.py" sizes "$tmp/manifest.jsonl" |
  sort >"$tmp/sizes" || fail "reading the manifest"
run() { LD_LIBRARY_PATH=$L "$@"; }
version=$("$build/clipdb" --version | awk '{ print $2 }')
number=$(echo "$version" | awk -F. '{ print $1 * 10000 + $2 * 100 + $3 }')
for b in "${builds[@]}"; do
  if ! run "$tmp/$b/ingest" "$tmp/$b.db" "$model" "$tmp/photos" >"$tmp/$b.ingest" 2>"$tmp/$b.err"
  then
    fail "$b: ingest"; cat "$tmp/$b.err"; continue
  fi
  grep -qx "added 24" "$tmp/$b.ingest" ||
    { fail "$b: ingest did not add 24"; cat "$tmp/$b.ingest"; }
  # shellcheck disable=SC2086 # the query's words, as a shell user types them
  run "$tmp/$b/search" "$tmp/$b.db" -k 8 $query >"$tmp/$b.hits" 2>"$tmp/$b.err" ||
    { fail "$b: search"; cat "$tmp/$b.err"; continue; }
  # rank, score, id, path against the CLI's on the same database
  "$build/clipdb" search --db "$tmp/$b.db" --json -k 8 "$query" >"$tmp/$b.json" &&
    /usr/bin/python3 "$src/tests/install/lib_hits.py" hits "$tmp/$b.json" >"$tmp/$b.want" ||
    { fail "$b: clipdb search --json"; continue; }
  cut -f1,2,3,5 "$tmp/$b.hits" >"$tmp/$b.got"
  diff "$tmp/$b.want" "$tmp/$b.got" >"$tmp/$b.diff" ||
    { fail "$b: the hits differ from clipdb search --json (< CLI, > example)"; cat "$tmp/$b.diff"; }
  # width x height against the generator's
  awk -F'\t' '{ n = split($5, p, "/"); print p[n] "\t" $4 }' "$tmp/$b.hits" | sort >"$tmp/$b.sz"
  comm -23 "$tmp/$b.sz" "$tmp/sizes" >"$tmp/$b.szbad"
  [ "$(wc -l <"$tmp/$b.sz")" -eq 8 ] && [ ! -s "$tmp/$b.szbad" ] ||
    { fail "$b: hit sizes are not the photos' sizes"; cat "$tmp/$b.sz"; }
  # the usage line says the linked library's version, the program's
  run "$tmp/$b/search" >/dev/null 2>"$tmp/$b.err"
  grep -qF "(libclipdb $version, number $number; built with clipdb.h $version)" "$tmp/$b.err" ||
    { fail "$b: the versions"; cat "$tmp/$b.err"; }
  run "$tmp/$b/search" "$tmp/$b.db" "a - a" >/dev/null 2>"$tmp/$b.err" &&
    fail "$b: a query that cancels out succeeded"
  grep -q "^search: cannot search: " "$tmp/$b.err" ||
    { fail "$b: no error message"; cat "$tmp/$b.err"; }
done

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "ok: libclipdb installed, ${#builds[@]} example builds agree with clipdb search"
