#!/bin/bash
# test_slurm_scripts.sh CLIPDB SOURCE_DIR: `clipdb slurm ingest` against hostile names and
# folders, with a stand-in sbatch on PATH that records its arguments (no cluster needed;
# test_slurm.sh runs the real one). Each case was a finding of a hostile-user review:
#  - a database path with a line end went into the scripts' #SBATCH lines and ran as a
#    command in every task: refused now, and so is '%' (sbatch expands it in log names);
#  - a path with blanks, quotes, '#', '$(...)' is carried exactly: the generated scripts,
#    run as a node runs them (sh, SLURM_ARRAY_TASK_ID set), ingest and merge into it and
#    run nothing else;
#  - --sbatch ARGS was pasted into a popen() command line: its words now reach sbatch as
#    arguments, split as a shell splits them but never expanded or run;
#  - the scripts were written with fopen(path, "w") through a link planted at their name,
#    into a folder someone else owned: now through a new temporary, in folders of ours only.
set -u
CLIPDB=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/clipdb-slurm-scripts-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
MODEL=${CLIPDB_TEST_MODEL:-$(ls -d "$SRC"/models/*/ 2>/dev/null | head -n 1)}
[ -n "$MODEL" ] && [ -e "$MODEL" ] || fail "no model: set CLIPDB_TEST_MODEL or add models/"

mkdir -p "$T/bin"
cat >"$T/bin/sbatch" <<'SB'
#!/bin/sh
for w in "$@"; do printf '%s\n' "$w"; done >>"$SBATCH_LOG"
echo "--" >>"$SBATCH_LOG"
echo 4242
SB
chmod 755 "$T/bin/sbatch"
export PATH="$T/bin:$PATH" SBATCH_LOG="$T/sbatch.args"
"$CLIPDB" demo --count 6 -q "$T/lib" >/dev/null || fail "clipdb demo failed"
rm -f "$T/lib/photos/manifest.jsonl"

# ---- paths a job script cannot carry are refused, nothing written -------------------------
cd "$T" || fail "cd"
for bad in $'db\ntouch PWNED\n#' 'db%j' $'db\rx'; do
    "$CLIPDB" slurm ingest --db "$T/$bad" --parts 2 --model "$MODEL" "$T/lib/photos" \
        >/dev/null 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "--db with $(printf %q "$bad"): exit $rc, want 2"
    [ -e "$T/$bad" ] && fail "--db with $(printf %q "$bad") was created"
done
[ -e "$T/PWNED" ] && fail "a line end in --db ran a command"

# ---- a hostile but valid path: carried exactly; the scripts run only clipdb ------------------
DB="$T/my db #1 'q' \"d\" \$(touch PWNED) \\x"
"$CLIPDB" slurm ingest --db "$DB" --parts 2 --model "$MODEL" --device cpu \
    --sbatch '--partition=gpu$(id>PWNED) "--comment=a b" --x=\$HOME' \
    "$T/lib/photos" >/dev/null || fail "slurm ingest into a path with blanks and quotes"
[ -e "$T/PWNED" ] && fail "something in --db or --sbatch was run by a shell"
want="--parsable
--partition=gpu\$(id>PWNED)
--comment=a b
--x=\$HOME
$DB/slurm/ingest.sbatch
--"
[ "$(head -n 6 "$SBATCH_LOG")" = "$want" ] ||
    fail "sbatch's arguments: $(head -n 6 "$SBATCH_LOG"), want: $want"
grep -qx -- "--dependency=afterok:4242" "$SBATCH_LOG" || fail "the merge job's dependency"
# the #SBATCH lines as sbatch reads them: a backslash escapes the next character
out=$(sed -n 's/^#SBATCH --output=//p' "$DB/slurm/ingest.sbatch" | sed 's/\\\(.\)/\1/g')
[ "$out" = "$DB/slurm/ingest-%a.log" ] || fail "ingest's --output reads back as: $out"
for i in 1 2; do
    (cd "$T" && SLURM_ARRAY_TASK_ID=$i sh "$DB/slurm/ingest.sbatch") ||
        fail "task $i's script failed"
done
(cd "$T" && sh "$DB/slurm/train.sbatch") || fail "the train script failed"
for i in 1 2; do
    (cd "$T" && SLURM_ARRAY_TASK_ID=$i sh "$DB/slurm/add.sbatch") ||
        fail "add task $i's script failed"
done
(cd "$T" && sh "$DB/slurm/merge.sbatch" >/dev/null) || fail "the merge script failed"
[ -e "$T/PWNED" ] && fail "a job script ran a command from the path"
n=$("$CLIPDB" export --db "$DB" --out "$T/x" -q && wc -l <"$T/x/paths.txt")
[ "$n" = 6 ] || fail "the merged database holds ${n:-no} photos, want 6"

# ---- a link planted at a script's name is replaced, never written through ----------------
echo "victim" >"$T/victim"
mkdir -p "$T/db2/slurm" && ln -s "$T/victim" "$T/db2/slurm/ingest.sbatch"
"$CLIPDB" slurm ingest --db "$T/db2" --parts 2 --model "$MODEL" "$T/lib/photos" >/dev/null ||
    fail "slurm ingest with a link at the script's name"
[ "$(cat "$T/victim")" = victim ] || fail "the script was written through a planted link"
[ -f "$T/db2/slurm/ingest.sbatch" ] && [ ! -L "$T/db2/slurm/ingest.sbatch" ] ||
    fail "the script is not a regular file in place of the link"

# ---- folders someone else can change are refused -------------------------------------------
mkdir -p "$T/db3/slurm" && chmod 777 "$T/db3/slurm"
"$CLIPDB" slurm ingest --db "$T/db3" --parts 2 --model "$MODEL" "$T/lib/photos" \
    >/dev/null 2>&1 && fail "a slurm folder writable by anyone was used"
[ -e "$T/db3/slurm/ingest.sbatch" ] && fail "a script was written into it"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
    mkdir -p "$T/db4" && chown nobody "$T/db4"
    "$CLIPDB" slurm ingest --db "$T/db4" --parts 2 --model "$MODEL" "$T/lib/photos" \
        >/dev/null 2>&1 && fail "another user's database folder was used"
    [ -e "$T/db4/slurm" ] && fail "a slurm folder was made in another user's folder"
fi
echo "ok: hostile database paths, sbatch options, planted links and foreign folders"
