#!/bin/bash
# test_slurm.sh CLIPDB SOURCE_DIR: `clipdb slurm ingest` on a real one-node Slurm cluster.
#
# Starts Debian's munged and Slurm (slurmctld + slurmd, in the foreground, as this
# user: root in CI) in a temporary folder, from a generated key and slurm.conf, on
# loopback ports of their own (no systemd, nothing of the system's configuration is
# read or changed: SLURM_CONF names the generated file). Then runs a 4-task array
# through `clipdb slurm ingest`, waits for it and for the jobs that depend on it (the
# train job, the 4-task add array, the merge job), and compares the merged database's
# export with the export of one process ingesting the same folders (clipdb ingest
# --threads 1): vectors.npy, paths.txt, paths0.txt byte for byte, photos.jsonl byte for
# byte once its "id" fields are cut (test_cli_parts.c says why the ids are the one thing
# normalized). The index is forced to IVF (--index-type ivf-sq): the merge log must say
# that all 4 parts' lists came from their own indexes (none added again), and the top 10
# of queries through it must equal those of the single database's index built whole.
#
# When the packages are missing or the daemons cannot start, the test FAILS and prints
# the daemons' logs: it never skips. scripts/setup.sh installs slurm-wlm and munge.
# The model: $CLIPDB_TEST_MODEL, else the first models/*/model.safetensors.
set -u
CLIPDB=$1
SRC=$2
T=$(mktemp -d "${TMPDIR:-/tmp}/clipdb-slurm-XXXXXX")
PIDS=()

fail() {
    echo "FAIL: $*" >&2
    for f in "$T"/munged.log "$T"/slurmctld.log "$T"/slurmd.log "$T"/db/slurm/*.log; do
        [ -f "$f" ] && { echo "---- $f" >&2; tail -n 40 "$f" >&2; }
    done
    exit 1
}
cleanup() { # slurmd may not heed SIGTERM while it waits for the controller: KILL after 3 s
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for _ in $(seq 30); do
        alive=
        for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
    done
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    [ -n "${CLIPDB_KEEP_TMP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT

for b in munged slurmctld slurmd sbatch squeue sinfo scontrol; do
    command -v "$b" >/dev/null ||
        fail "$b is not installed: apt-get install slurm-wlm munge (scripts/setup.sh does)"
done
MODEL=${CLIPDB_TEST_MODEL:-$(ls -d "$SRC"/models/*/ 2>/dev/null | head -n 1)}
[ -n "$MODEL" ] && [ -e "$MODEL" ] || fail "no model: set CLIPDB_TEST_MODEL or add models/"

# ---- munge: a key of our own, a socket in $T ------------------------------------------
mkdir -p "$T/munge" "$T/state" "$T/spool"
chmod 711 "$T/munge" # the socket is reached through it; the key itself is 0400
head -c 1024 /dev/urandom >"$T/munge/munge.key"
chmod 400 "$T/munge/munge.key"
SOCK="$T/munge/munge.socket"
munged --foreground --force --key-file="$T/munge/munge.key" --socket="$SOCK" \
    --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" \
    --seed-file="$T/munge/munged.seed" 2>>"$T/munged.log" &
PIDS+=($!)
for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || fail "munged did not start"

# ---- slurm.conf: this host as the one node, ports of our own -------------------------
HOST=$(hostname -s)
NODE=$(slurmd -C 2>/dev/null | head -n 1 | sed 's/ RealMemory=[0-9]*/ RealMemory=500/')
[ -n "$NODE" ] || NODE="NodeName=$HOST CPUs=$(nproc) RealMemory=500"
PORT=$((20000 + RANDOM % 20000))
cat >"$T/slurm.conf" <<EOF
ClusterName=clipdbtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
$NODE NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"
slurmctld -D -i -f "$SLURM_CONF" 2>>"$T/slurmctld.log" &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" -N "$HOST" 2>>"$T/slurmd.log" &
PIDS+=($!)
# every client call bounded: one that cannot reach slurmctld waits MessageTimeout (10 s)
up=
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do
    st=$(timeout 3 sinfo -h -N -o %t 2>/dev/null | head -n 1)
    [ "$st" = idle ] && { up=1; break; }
    sleep 0.2
done
[ -n "$up" ] || fail "the node is not idle after 30 s (sinfo says '${st:-nothing}')"

# ---- the library: nested folders, the same names in two of them, a file root ---------
"$CLIPDB" demo --count 20 -q "$T/lib" >/dev/null || fail "clipdb demo failed"
mkdir -p "$T/lib/photos/sub" "$T/two"
i=0
for f in "$T"/lib/photos/img_*; do
    i=$((i + 1))
    if [ $i -le 6 ]; then cp "$f" "$T/lib/photos/sub/"; fi        # same names, nested
    if [ $i -gt 14 ]; then mv "$f" "$T/two/"; fi
done
rm -f "$T/lib/photos/manifest.jsonl"
ONE=$(ls "$T"/two/img_* | head -n 1)
mv "$ONE" "$T/single${ONE##*/img_*[0-9]}"
ONE="$T/single${ONE##*/img_*[0-9]}"
ROOTS=("$T/lib/photos" "$T/two" "$ONE")

# ---- one process: the oracle --------------------------------------------------------
"$CLIPDB" init --db "$T/single" --model "$MODEL" -q || fail "init failed"
"$CLIPDB" ingest --db "$T/single" --threads 1 --device cpu -q "${ROOTS[@]}" >/dev/null ||
    fail "the single-process ingest failed"

# ---- the cluster: 4 tasks, then the merge -----------------------------------------------
OUT=$(timeout 60 "$CLIPDB" slurm ingest --db "$T/db" --parts 4 --model "$MODEL" --device cpu --json \
    --index-type ivf-sq --sbatch "--chdir=$T" --merge-sbatch "--chdir=$T" "${ROOTS[@]}") ||
    fail "clipdb slurm ingest failed: $OUT"
JOBS=
for step in ingest train add merge; do
    j=$(printf '%s' "$OUT" | sed -n "s/.*\"${step}_job\": *\"\\([0-9]*\\)\".*/\\1/p")
    [ -n "$j" ] || fail "no $step job id in: $OUT"
    JOBS=${JOBS:+$JOBS,}$j
done
queued() { timeout 5 squeue -h -j "$JOBS" 2>&1 || echo "squeue failed"; }
end=$((SECONDS + 150))
while [ $SECONDS -lt $end ] && [ -n "$(queued)" ]; do sleep 0.2; done
[ -z "$(queued)" ] || fail "jobs $JOBS not done after 150 s: $(queued)"
for i in 1 2 3 4; do
    [ -e "$T/db/parts/$i/catalog.db" ] || fail "task $i made no part"
    ls "$T"/db/parts/$i/index/part.*.cdbidx >/dev/null 2>&1 || fail "add task $i made no index"
done
[ -e "$T/db/parts/trained.cdbidx" ] || fail "the train job made no trained index"
[ -e "$T/db/catalog.db" ] || fail "the merge job made no database"
# the per-part path: every part's lists from its own index, no vector added again
grep -q "from one trained quantizer (the trained file); 4 parts' lists from their own" \
    "$T/db/slurm/merge.log" || fail "the merge did not merge the 4 parts' own lists"
grep -q "added again" "$T/db/slurm/merge.log" && fail "the merge added a part again"

# ---- the comparison ---------------------------------------------------------------------
"$CLIPDB" export --db "$T/single" --out "$T/x1" -q || fail "export of the single database"
"$CLIPDB" export --db "$T/db" --out "$T/x2" -q || fail "export of the merged database"
for f in vectors.npy paths.txt paths0.txt; do
    cmp "$T/x1/$f" "$T/x2/$f" || fail "$f differs"
done
sed 's/^{"id":[0-9]*,/{/' "$T/x1/photos.jsonl" >"$T/x1/photos.noid"
sed 's/^{"id":[0-9]*,/{/' "$T/x2/photos.jsonl" >"$T/x2/photos.noid"
cmp "$T/x1/photos.noid" "$T/x2/photos.noid" || fail "photos.jsonl differs (ids cut)"
n=$(wc -l <"$T/x2/paths.txt")
[ "$n" -ge 20 ] || fail "only $n photos exported"
"$CLIPDB" verify --db "$T/db" -q || fail "verify of the merged database"
"$CLIPDB" index info --db "$T/db" | grep -q "^kind: *ivf-sq" || fail "no IVF index after the merge"

# ---- the index: its top 10 equal a single build's (ids, paths and scores) ------------
"$CLIPDB" index build --db "$T/single" --type ivf-sq -q || fail "the single index build failed"
for q in "a red circle" "a blue square" "a green triangle on white" "yellow"; do
    "$CLIPDB" search --db "$T/single" -k 10 --json "$q" >"$T/s1.json" || fail "search single"
    "$CLIPDB" search --db "$T/db" -k 10 --json "$q" >"$T/s2.json" || fail "search merged"
    grep -q '"path"' "$T/s1.json" || fail "no hits for '$q'"
    cmp -s <(grep -o '"id": [0-9]*\|"path": "[^"]*"\|"score": [-0-9.e]*' "$T/s1.json") \
        <(grep -o '"id": [0-9]*\|"path": "[^"]*"\|"score": [-0-9.e]*' "$T/s2.json") ||
        fail "the top 10 of '$q' differ: $(cat "$T/s1.json") against $(cat "$T/s2.json")"
done
echo "ok: 4 Slurm tasks, the train, add and merge jobs give the single-process export and" \
    "top 10 ($n photos)"
