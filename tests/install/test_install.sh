#!/usr/bin/env bash
# test_install.sh CMAKE BUILD_DIR SOURCE_DIR: clipdb installed like a Unix program.
#  1. `cmake --install BUILD --prefix P` puts bin/clipdb, share/clipdb/models/,
#     share/clipdb/data/ (the standard vocabulary), the man page and the bash and
#     zsh completions in place.
#  2. The prefix is moved (P -> Q, so no path compiled into the binary points at
#     it) and, with CLIPDB_MODEL and CLIPDB_VOCAB unset, Q/bin/clipdb finds the
#     bundled model and the standard vocabulary under Q/share/clipdb, not in the
#     source tree: the path `clipdb models --json` reports, the debug log of the
#     lookup, the vocabulary a model without tokenizer files falls back to; then it
#     does the whole job from there (init, ingest, search, a hit of the right class).
#  3. With Q/share/clipdb/models removed, the same binary reports the source tree's
#     model instead: check 2 really tells the two places apart.
#  4. The man page: starts with .TH, groff finds nothing to warn about (where groff
#     is installed), `man -l` renders it (where man is), and it has a section for
#     every command `clipdb --help` lists, each with every option of that command's
#     --help.
#  5. The completions: `bash -n`; the bash script, sourced, completes every command
#     of `clipdb --help` and every option of each command's --help, the index
#     subcommands and an option's choices; the zsh script names every command (and
#     passes `zsh -n` where zsh is installed).
# Exit 0 when all pass, 1 otherwise (each failure is printed), 77 when there is no
# bundled model in the source tree.
# (No `producer | grep -q`: with pipefail, grep's early exit can fail the producer.)
set -uo pipefail
cmake=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
ls "$src"/models/*/model.safetensors >/dev/null 2>&1 || { echo "SKIP: no bundled model"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clipdb-install-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export NO_COLOR=1
unset CLIPDB_MODEL CLIPDB_VOCAB CLIPDB_DB CLIPDB_LOG
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
check() { # check WHAT COMMAND...: runs the command, a failure if it fails
  local what=$1
  shift
  "$@" || fail "$what"
}

# ---- 1. install ------------------------------------------------------------------
"$cmake" --install "$build" --prefix "$tmp/P" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/clipdb share/man/man1/clipdb.1 share/bash-completion/completions/clipdb \
         share/zsh/site-functions/_clipdb share/clipdb/data/bpe_simple_vocab_16e6.txt.gz; do
  [ -s "$tmp/P/$f" ] || fail "cmake --install did not install $f"
done
model_name=$(basename "$(dirname "$(ls "$src"/models/*/model.safetensors | head -1)")")
cmp -s "$src/models/$model_name/model.safetensors" \
  "$tmp/P/share/clipdb/models/$model_name/model.safetensors" ||
  fail "the bundled model was not installed as share/clipdb/models/$model_name"

# ---- 2. the moved prefix finds its own data --------------------------------------
mv "$tmp/P" "$tmp/Q"
Q=$tmp/Q
clipdb=$Q/bin/clipdb
want_model=$Q/share/clipdb/models/$model_name
want_vocab=$Q/share/clipdb/data/bpe_simple_vocab_16e6.txt.gz

"$clipdb" models --json >"$tmp/models.json" 2>"$tmp/models.err" || fail "installed clipdb models"
grep -qF "\"path\": \"$want_model\"" "$tmp/models.json" ||
  grep -qF "\"path\":\"$want_model\"" "$tmp/models.json" ||
  { fail "the installed clipdb did not use $want_model"; cat "$tmp/models.json" "$tmp/models.err"; }
grep -qF '"bundled default"' "$tmp/models.json" || fail "models --json: source is not the bundled default"
CLIPDB_LOG=debug "$clipdb" models >/dev/null 2>"$tmp/debug.err"
grep -qF "data models: $Q/share/clipdb/models (installed" "$tmp/debug.err" ||
  { fail "the debug log does not show the installed models folder"; cat "$tmp/debug.err"; }
grep -qF "$src" "$tmp/debug.err" && { fail "the installed clipdb looked at the source tree"; cat "$tmp/debug.err"; }

# A model folder without tokenizer files falls back to the standard vocabulary.
mkdir "$tmp/notok"
cp "$want_model/model.safetensors" "$tmp/notok/"
cp "$want_model"/*config*.json "$tmp/notok/" 2>/dev/null
CLIPDB_LOG=debug "$clipdb" models --model "$tmp/notok" >/dev/null 2>"$tmp/vocab.err"
grep -qF "$want_vocab" "$tmp/vocab.err" ||
  { fail "the standard vocabulary was not found at $want_vocab"; cat "$tmp/vocab.err"; }
grep -qF "$src" "$tmp/vocab.err" && { fail "the vocabulary lookup looked at the source tree"; cat "$tmp/vocab.err"; }

# The whole job with the installed program: a library of shapes, init, ingest, search.
"$build/world/clipdb-world" generate "$tmp/photos" --seed 3 --n 40 >/dev/null 2>&1 ||
  fail "clipdb-world generate"
rm -f "$tmp/photos/manifest.jsonl"
check "installed clipdb init" "$clipdb" init --db "$tmp/db" --quiet
"$clipdb" ingest --db "$tmp/db" "$tmp/photos" --quiet >"$tmp/ingest.out" 2>&1 ||
  { fail "installed clipdb ingest"; cat "$tmp/ingest.out"; }
"$clipdb" models --db "$tmp/db" >"$tmp/dbmodels.out" 2>&1 || fail "installed clipdb models --db"
grep -qF "$model_name" "$tmp/dbmodels.out" || { fail "the database is not bound to $model_name"; cat "$tmp/dbmodels.out"; }
"$clipdb" search --db "$tmp/db" -k 3 --paths "a red circle" >"$tmp/hits" 2>"$tmp/search.err" ||
  { fail "installed clipdb search"; cat "$tmp/search.err"; }
[ "$(wc -l <"$tmp/hits")" -eq 3 ] || { fail "search: expected 3 hits"; cat "$tmp/hits"; }
grep -q "^$tmp/photos/" "$tmp/hits" || { fail "search: the hits are not the library's photos"; cat "$tmp/hits"; }

# ---- 3. without the installed models: the source tree (the fallback) --------------
mv "$Q/share/clipdb/models" "$tmp/models.away"
"$clipdb" models --json >"$tmp/fallback.json" 2>&1
grep -qF "$src/models/$model_name" "$tmp/fallback.json" ||
  { fail "without share/clipdb/models the source tree's model was not used"; cat "$tmp/fallback.json"; }
mv "$tmp/models.away" "$Q/share/clipdb/models"

# ---- 4. the man page ----------------------------------------------------------------
man1=$Q/share/man/man1/clipdb.1
commands=$("$clipdb" --help | awk '/commands:$/ { f = 1; next } /^$/ { f = 0 } f && /^  [a-z]/ { print $1 }')
[ "$(echo "$commands" | wc -w)" -ge 10 ] || fail "clipdb --help lists only: $commands"
# options_of CMD: the options in the Options list of `clipdb CMD --help`, one a line
options_of() {
  "$clipdb" "$1" --help | awk '/^Options:$/ { f = 1; next } /^$/ { f = 0 } f && /^  -/' |
    sed -E 's/^  //' | grep -oE '^--?[A-Za-z0-9][-A-Za-z0-9]*(, --?[A-Za-z0-9][-A-Za-z0-9]*)?' | tr ', ' '\n\n' |
    grep .
}
first=$(grep -v '^\.\\"' "$man1" | sed -n 1p) # the first line after the comments
[[ $first == '.TH CLIPDB 1 '* ]] || fail "the man page does not start with .TH: $first"
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$man1" 2>&1)
  [ -z "$warnings" ] || fail "groff warns about the man page: $warnings"
fi
if command -v man >/dev/null; then
  rendered=$(MANWIDTH=100 man -l "$man1" 2>/dev/null)
  grep -q "clipdb ingest" <<<"$rendered" || fail "man -l does not render the man page"
fi
n_options=0
for c in $commands; do
  section=$(awk -v h=".SS clipdb $c" '$0 == h { f = 1; next } /^\.S[SH] / { f = 0 } f' "$man1")
  [ -n "$section" ] || { fail "the man page has no section for clipdb $c"; continue; }
  for o in $(options_of "$c"); do
    n_options=$((n_options + 1))
    grep -qF "\\fB${o//-/\\-}\\fR" <<<"$section" || fail "the man page's clipdb $c lacks $o"
  done
done
[ "$n_options" -ge 100 ] || fail "only $n_options options found in the --help texts"

# ---- 5. the completions ----------------------------------------------------------------
bashc=$Q/share/bash-completion/completions/clipdb
zshc=$Q/share/zsh/site-functions/_clipdb
bash -n "$bashc" || fail "bash -n rejects the bash completion"
# completions WORD...: what the bash completion offers for the last word
completions() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=()
           _clipdb; printf "%s\n" "${COMPREPLY[@]}"' _ "$bashc" "$@" 2>/dev/null
}
all=$(completions clipdb "")
for c in $commands; do
  grep -qx "$c" <<<"$all" || fail "bash: 'clipdb <TAB>' lacks $c"
  grep -qx "$c" <<<"$(completions clipdb "${c:0:2}")" || fail "bash: 'clipdb ${c:0:2}<TAB>' lacks $c"
  opts=$(completions clipdb "$c" -)
  for o in $(options_of "$c"); do
    grep -qx -- "$o" <<<"$opts" || fail "bash: 'clipdb $c -<TAB>' lacks $o"
  done
  grep -qF "'$c:" "$zshc" || fail "zsh: the completion lacks the command $c"
done
[ "$(completions clipdb index "" | tr '\n' ' ')" = "build info train add-part " ] || fail "bash: 'clipdb index <TAB>'"
[ "$(completions clipdb search --device "" | tr '\n' ' ')" = "auto cpu cuda " ] ||
  fail "bash: 'clipdb search --device <TAB>'"
grep -qx search <<<"$(completions clipdb --db "$tmp/db" "")" || fail "bash: 'clipdb --db DIR <TAB>'"
grep -qx reindex <<<"$(completions clipdb help "")" || fail "bash: 'clipdb help <TAB>'"
[ "$(head -1 "$zshc")" = '#compdef clipdb' ] || fail "zsh: the completion does not start with #compdef"
if command -v zsh >/dev/null; then zsh -n "$zshc" || fail "zsh -n rejects the zsh completion"; fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "installed in a moved prefix: model and vocabulary from share/clipdb, man page and completions cover every command and option"
