/*
** test_cli_writes.c: every write command other than a first ingest (issue 32)
** survives kill -9 at any moment and a full disk, at the process level with the real
** clipdb binary and a real model: `init`, `forget` (of a folder root, and of a
** subfolder, which is left out of its root), `move`, `index build` (also killed only
** while it writes the vector snapshot beside the index),
** `reindex --repair` after one shard's bytes were damaged, `models --default` between
** two models, `ingest --model` of a second model into a database that has one, and
** `models get` from a Hub stand-in on 127.0.0.1 (tests/hub/hub_server.h): after a kill
** or a full disk, no partial file under a model file's name, and the rerun leaves the
** cache a clean get leaves (the Hub's bytes, no .incomplete blob).
**
** For each command, a clean run from a prepared database gives the reference: the
** end state read straight from the SQLite files (kill_util.h), the names of the
** database's files, and `stats`' counts. Then, for each trial, a fresh copy of the
** prepared database, the command SIGKILLed just before a random one of the writes
** and syncs a clean run makes (kill_shim.c, an LD_PRELOAD test tool), and after the
** kill, before anything else: `verify` exits 0 (the kill lost nothing, so it must
** not say so), a self-search finds the photo itself first, and every read command
** answers. Then the same command again exits 0 (init: or says the database exists),
** and the database matches the reference: the same files, states and vector bytes,
** the same file names (no leftover shard, temporary folder or damaged copy), the
** same `stats` counts, `verify` 0, and `search --image` equal to brute force over
** the stored vectors (the scores of the top k).
**
** Disk full: the database on a small tmpfs (mounted here: CI runs as root; skipped
** with a message when mount fails) filled up to a few KiB; the command must exit 0
** only when it completed and otherwise non-zero with a message that says the disk is
** full; with the space back, the same command again completes and matches the
** reference.
**
** $CLIPDB_WRITES_TRIALS kill trials per command (default 3), $CLIPDB_WRITES_SEED
** fixes the kill points (the seed is printed, and again on failure),
** $CLIPDB_WRITES_ONLY runs only the commands whose name contains it. Needs a model
** ($CLIPDB_TEST_MODEL or the bundled one) and the clipdb binary; skipped without.
*/
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>

#include "cdb_test.h"
#include "cli_run.h"
#include "kill_util.h"
#include "hub/hub_server.h"
#include "world/world.h"

#define N_IMG 16 /* per camera folder */
#define TOP_K 5

static char g_tmp[512], g_model[700], g_model2[700], g_cam1[700], g_cam2[700], g_moved[700],
    g_out[700], g_errf[700], g_count[700], g_cam1_sub[800];
/* the databases the commands start from: [1] both folders with an exact index, [2] the
** same with a second model (g_model2) encoded too; [0] unused (none) */
static char g_prepared[3][700];

#if defined(CDB_KILL_SHIM) && !defined(__SANITIZE_ADDRESS__) /* ASan wants to be preloaded first */
static const char *g_shim = CDB_KILL_SHIM;
#else
static const char *g_shim = "";
#endif

/* ---- running clipdb ------------------------------------------------------------- */

/* Runs clipdb with args; its exit code, and its stderr in err (when not NULL). */
static int run(const char *const *args, char *err, size_t size) {
    cli_run_result r;
    int rc = cli_run(args, &r);
    if (err) snprintf(err, size, "%s", r.err);
    cli_run_free(&r);
    return rc;
}

/* Runs clipdb args with the kill shim preloaded: killed just before its at-th write
** or sync (at > 0), or counting them into g_count (at == 0). Its exit code. */
static int run_shimmed(const char *const *args, long at) {
    char a[32];
    pid_t pid;
    snprintf(a, sizeof a, "%ld", at);
    setenv("LD_PRELOAD", g_shim, 1);
    setenv("CDB_KILL_SHIM_AT", a, 1);
    if (at == 0) setenv("CDB_KILL_SHIM_COUNT", g_count, 1);
    pid = cli_spawn(args, g_out, g_errf);
    unsetenv("LD_PRELOAD");
    unsetenv("CDB_KILL_SHIM_AT");
    unsetenv("CDB_KILL_SHIM_COUNT");
    return pid < 0 ? -1000 : cli_wait(pid);
}

/* Copies the tree at from to to (regular files and folders). */
static void copy_tree(const char *from, const char *to) {
    DIR *d = opendir(from);
    struct dirent *e;
    mkdir(to, 0755);
    while (d && (e = readdir(d))) {
        char a[2048], b[2048];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (snprintf(a, sizeof a, "%s/%s", from, e->d_name) >= (int)sizeof a ||
            snprintf(b, sizeof b, "%s/%s", to, e->d_name) >= (int)sizeof b || lstat(a, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            copy_tree(a, b);
        } else if (S_ISREG(st.st_mode)) {
            size_t n = 0;
            char *buf = cli_read_file(a, &n);
            if (buf) write_file(b, buf, n);
            free(buf);
        }
    }
    if (d) closedir(d);
}

/* ---- what a database is, beyond its rows ------------------------------------------ */

/* The names in the database folder, its shards/ and index/ folders (sorted, '\n'
** separated), without what any open or close makes or drops: the lock file and
** SQLite's -shm and -wal files. */
static void list_names(const char *db, char *out, size_t size) {
    static const char *const sub[] = {"", "/shards", "/index"};
    char names[128][300];
    int n = 0;
    for (int k = 0; k < 3; k++) {
        char p[1200];
        DIR *d;
        struct dirent *e;
        snprintf(p, sizeof p, "%s%s", db, sub[k]);
        if (!(d = opendir(p))) continue;
        while ((e = readdir(d)) && n < 128) {
            size_t L = strlen(e->d_name);
            if (e->d_name[0] == '.' || !strcmp(e->d_name, "lock") ||
                (L > 4 &&
                 (!strcmp(e->d_name + L - 4, "-shm") || !strcmp(e->d_name + L - 4, "-wal"))))
                continue;
            snprintf(names[n++], sizeof names[0], "%s/%s", sub[k], e->d_name);
        }
        closedir(d);
    }
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        strncat(out, names[i], size - strlen(out) - 2);
        strcat(out, "\n");
    }
}

/* `stats`' lines that count (files, folders, shards, vectors and index coverage:
** not the disk use, which compaction and WAL timing move). */
static void stats_counts(const char *db, char *out, size_t size) {
    cli_run_result r;
    const char *line;
    out[0] = '\0';
    cli_run((const char *[]){"stats", "--db", db, NULL}, &r);
    for (line = r.out; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, "disk:", 5) && strncmp(line, "database:", 9) &&
            strlen(out) + n + 2 < size) {
            strncat(out, line, n);
            strcat(out, "\n");
        }
        line = nl ? nl + 1 : NULL;
    }
    cli_run_free(&r);
}

static float half_to_float(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023u, bits;
    float f;
    if (e == 0) return (s ? -1.f : 1.f) * ldexpf((float)m, -24);
    if (e == 31) bits = s | 0x7f800000u | (m << 13);
    else bits = s | ((e + 112) << 23) | (m << 13);
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float dot16(const fentry *a, const fentry *b) {
    const uint16_t *x = (const uint16_t *)(const void *)a->vec,
                   *y = (const uint16_t *)(const void *)b->vec;
    float s = 0;
    for (int i = 0; i < a->vec_bytes / 2; i++) s += half_to_float(x[i]) * half_to_float(y[i]);
    return s;
}

static int by_score_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* `search --image` of one ok photo: the photo itself first, and the top k scores
** those of brute force over the stored vectors the catalog claims (the query's vector:
** its stored one; the encoder is deterministic): also right after a kill, when a
** forget or move cut short has taken some claims back. The number of differences. */
static int search_vs_brute_force(const char *db, const dbstate *s, const char *what) {
    const fentry *q = NULL;
    float bf[256];
    int n = 0, bad = 0, rank = 0;
    cli_run_result r;
    char kbuf[16];
    for (int i = 0; i < s->n && !q; i++)
        if (s->f[i].state == 2 && s->f[i].vec && s->f[i].claimed) q = &s->f[i];
    if (!q) return 0; /* nothing to search */
    for (int i = 0; i < s->n && n < 256; i++) /* pending: while a model is being added */
        if ((s->f[i].state == 2 || s->f[i].state == 1) && s->f[i].vec && s->f[i].claimed)
            bf[n++] = dot16(q, &s->f[i]);
    qsort(bf, (size_t)n, sizeof *bf, by_score_desc);
    snprintf(kbuf, sizeof kbuf, "%d", TOP_K);
    cli_run((const char *[]){"search", "--db", db, "--image", q->path, "-k", kbuf, NULL}, &r);
    if (r.exit_code != 0) {
        fprintf(stderr, "    %s: search exit %d: %.300s\n", what, r.exit_code, r.err);
        cli_run_free(&r);
        return 1;
    }
    for (const char *line = r.out; line && *line && rank < TOP_K; rank++) {
        double score = 0;
        char path[1200] = "";
        if (sscanf(line, "%*d\t%lf\t%1199[^\n]", &score, path) != 2) break;
        if (rank == 0 && strcmp(path, q->path) && fabs(score - bf[0]) > 2e-3) bad++;
        if (rank < n && fabs(score - (double)bf[rank]) > 2e-3) {
            fprintf(stderr, "    %s: search rank %d score %.4f, brute force %.4f\n", what, rank + 1,
                    score, (double)bf[rank]);
            bad++;
        }
        line = strchr(line, '\n');
        if (line) line++;
    }
    if (rank != (n < TOP_K ? n : TOP_K)) {
        fprintf(stderr, "    %s: search gave %d hits, brute force %d\n", what, rank,
                n < TOP_K ? n : TOP_K);
        bad++;
    }
    cli_run_free(&r);
    return bad;
}

/* A database's whole result: rows, names, counts. */
typedef struct result {
    dbstate st;
    char names[8192], counts[4096];
} result;

static void result_read(const char *db, result *r) {
    read_state(db, &r->st);
    list_names(db, r->names, sizeof r->names);
    stats_counts(db, r->counts, sizeof r->counts);
}

/* Compares the database at db with the reference: the number of differences. */
static int check_end(const char *db, const result *ref, const char *what) {
    result now;
    int bad;
    char err[2000];
    memset(&now, 0, sizeof now);
    result_read(db, &now);
    bad = compare(&ref->st, &now.st, what);
    if (now.st.n_meta != ref->st.n_meta) { /* a forget drops the metadata of what it forgot */
        fprintf(stderr, "    %s: %d photo_meta rows, reference %d\n", what, now.st.n_meta,
                ref->st.n_meta);
        bad++;
    }
    if (strcmp(ref->names, now.names)) {
        fprintf(stderr, "    %s: files\n%s    reference:\n%s", what, now.names, ref->names);
        bad++;
    }
    if (strcmp(ref->counts, now.counts)) {
        fprintf(stderr, "    %s: stats\n%s    reference:\n%s", what, now.counts, ref->counts);
        bad++;
    }
    if (run((const char *[]){"verify", "--db", db, NULL}, err, sizeof err) != 0) {
        fprintf(stderr, "    %s: verify: %.400s\n", what, err);
        bad++;
    }
    bad += search_vs_brute_force(db, &now.st, what);
    dbstate_free(&now.st);
    { /* no temporary folder of an init left beside it */
        DIR *d = opendir(g_tmp);
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (!strncmp(e->d_name, ".db.clipdb-init", 15)) {
                fprintf(stderr, "    %s: left %s/%s\n", what, g_tmp, e->d_name);
                bad++;
            }
        if (d) closedir(d);
    }
    return bad;
}

/* Right after a kill: verify's verdict (nothing was lost; when the command started
** from a damaged shard, `damaged`, it may still say a shard or its vectors are bad:
** exit 1), the read commands, and a search against brute force over what the catalog
** claims now (a damaged shard searched around). On a disk still full (`full`), a
** command may also fail (exit 1) saying so: a database closed cleanly has no -shm
** file, and SQLite cannot create one to read it. */
static int check_after_kill(const char *db, const char *what, int damaged, int full) {
    char err[2000];
    int bad = 0, rc;
    struct stat st;
    char cat[1200];
    dbstate now;
    snprintf(cat, sizeof cat, "%s/catalog.db", db);
    if (stat(cat, &st) != 0) return 0; /* no database (a killed init): nothing to read */
    /* on a full disk the search is checked after the rerun (check_end) */
    if (read_state(db, &now) == 0 && !full) bad += search_vs_brute_force(db, &now, what);
    dbstate_free(&now);
    if ((rc = run((const char *[]){"verify", "--db", db, NULL}, err, sizeof err)) != 0 &&
        !(damaged && rc == 1) && !(full && rc == 1 && strstr(err, "no space left"))) {
        fprintf(stderr, "    %s: verify after the kill: exit %d: %.400s\n", what, rc, err);
        bad++;
    }
    static const char *const reads[][2] = {{"stats", NULL}, {"folders", NULL}, {"errors", NULL},
                                           {"index", "info"}};
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
        rc = run((const char *[]){reads[i][0], "--db", db, reads[i][1], NULL}, err, sizeof err);
        if (rc != 0 && rc != 3 && !(full && rc == 1 && strstr(err, "no space left"))) {
            fprintf(stderr, "    %s: %s after the kill: exit %d: %.300s\n", what, reads[i][0], rc,
                    err);
            bad++;
        }
    }
    return bad;
}

/* ---- the commands --------------------------------------------------------------- */

typedef struct wcmd {
    const char *name;
    int prepared;  /* runs on a copy of g_prepared[prepared] (0: on none) */
    int init_like; /* 1: a rerun may say the database exists (exit 1) */
    int damaged;   /* 1: starts with a damaged shard: verify after a kill may say so */
    void (*before)(void), (*after)(void); /* around each run: the library's state */
    void (*setup)(const char *db);        /* on the copy, before each run */
    const char *args[12];
    const char *kill_in; /* kills only at writes to files whose path has this (NULL: any) */
} wcmd;

static void move_cam2(void) { rename(g_cam2, g_moved); }
static void unmove_cam2(void) { rename(g_moved, g_cam2); }

/* The command's arguments with "DB" replaced by db (static). */
static const char *const *cmd_args(const wcmd *c, const char *db) {
    static const char *a[16];
    int n = 0;
    for (int i = 0; c->args[i]; i++) a[n++] = !strcmp(c->args[i], "DB") ? db : c->args[i];
    a[n] = NULL;
    return a;
}

/* Runs the command to its end on db (the rerun); 0 when it exited as a completed run. */
static int rerun(const wcmd *c, const char *db, const char *what) {
    char err[2000];
    int rc = run(cmd_args(c, db), err, sizeof err);
    if (rc == 0 || (c->init_like && rc == 1 && strstr(err, "already exists"))) return 0;
    fprintf(stderr, "    %s: %s again: exit %d: %.400s\n", what, c->name, rc, err);
    return 1;
}

/* The state a command starts from at db: a copy of its prepared database, or none. */
static void start(const wcmd *c, const char *db) {
    rm_rf(db);
    if (c->prepared) copy_tree(g_prepared[c->prepared], db);
    if (c->setup) c->setup(db);
}

/* reindex --repair's start: the first shard's SQLite header overwritten (every open
** of it fails as "not a database"); g_damage_failed counts the copies it could not
** damage (the test fails then: the repair would have nothing to do). */
static int g_damage_failed;
static void damage_shard(const char *db) {
    char p[1200];
    FILE *f;
    snprintf(p, sizeof p, "%s/shards/0001.db", db);
    if (!(f = fopen(p, "r+b")) ||
        fwrite("this shard was damaged by test_cli_writes", 1, 41, f) != 41)
        g_damage_failed++;
    if (f) fclose(f);
}

/* After init: an ingest, so the state compared has photos. */
static int finish_init(const wcmd *c, const char *db) {
    char err[2000];
    int rc;
    if (c->prepared) return 0;
    rc = run((const char *[]){"ingest", "--db", db, g_cam1, "--quiet", "--device", "cpu", NULL},
             err, sizeof err);
    if (rc != 0) fprintf(stderr, "    ingest after init: exit %d: %.400s\n", rc, err);
    return rc != 0;
}

/* After a failed run of c: the same command run again completes (rerun), and the
** database ends as the clean run's (ref). bad: the failures seen so far. 1 (the case
** said FAILED, with note) when any, else 0. */
static int completes_after(const wcmd *c, const char *db, const result *ref, const char *what,
                           int bad, const char *note) {
    bad += rerun(c, db, what);
    if (c->after) c->after();
    bad += finish_init(c, db);
    bad += check_end(db, ref, what);
    if (bad) fprintf(stderr, "    %s: FAILED%s\n", what, note);
    return bad != 0;
}

/* Kill trials of one command; the number of failed trials. */
static int kill_trials(const wcmd *c, const result *ref, int trials) {
    char db[700], what[200], *txt;
    long n_writes = 0;
    int fails = 0, landed = 0;
    snprintf(db, sizeof db, "%s/db", g_tmp);
    if (c->kill_in) setenv("CDB_KILL_SHIM_MATCH", c->kill_in, 1);
    /* a clean run under the shim counts its writes and syncs */
    start(c, db);
    if (c->before) c->before();
    if (run_shimmed(cmd_args(c, db), 0) != 0) fails++;
    if (c->after) c->after();
    if ((txt = cli_read_file(g_count, NULL))) n_writes = atol(txt);
    free(txt);
    if (n_writes <= 0) {
        fprintf(stderr, "    %s: a clean run under the shim failed or made no writes\n", c->name);
        fails++;
    }
    for (int t = 0; t < trials && n_writes > 0; t++) {
        long at = 1 + (long)(rnd01() * (double)n_writes);
        int rc, bad = 0;
        snprintf(what, sizeof what, "%s killed at write %ld of %ld", c->name, at, n_writes);
        start(c, db);
        if (c->before) c->before();
        rc = run_shimmed(cmd_args(c, db), at);
        landed += rc == -SIGKILL;
        if (rc == -SIGKILL) bad += check_after_kill(db, what, c->damaged, 0);
        fails += completes_after(c, db, ref, what, bad, " (seed above replays it)");
    }
    fprintf(stderr, "    %s: %d trials, %d kills landed, %ld writes in a clean run%s%s\n",
            c->name, trials, landed, n_writes, c->kill_in ? " to files named *" : "",
            c->kill_in ? c->kill_in : "");
    unsetenv("CDB_KILL_SHIM_MATCH");
    return fails;
}

/* ---- disk full ------------------------------------------------------------------ */

/* Fills the file system of dir up to about `leave` bytes free (a filler file). */
static void fill_disk(const char *filler, long leave) {
    static char block[65536];
    FILE *f = fopen(filler, "wb");
    struct stat st;
    if (!f) return;
    for (;;) { /* big blocks, then small ones */
        if (fwrite(block, 1, sizeof block, f) != sizeof block || fflush(f) != 0) break;
    }
    fclose(f);
    if (stat(filler, &st) == 0 && truncate(filler, st.st_size > leave ? st.st_size - leave : 0))
        return;
}

/* The command with the database on a full tmpfs at mnt, for each amount of free
** space in leave[]: exit 0 only when it completed, else a message about the disk;
** with the space back, the same command completes. Failed cases. */
static int disk_full_trials(const wcmd *c, const result *ref, const char *mnt) {
    static const long leave[] = {0, 8192, 65536, 262144};
    char db[900], filler[900], what[200], err[4000];
    int fails = 0;
    snprintf(db, sizeof db, "%s/db", mnt);
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    for (size_t i = 0; i < sizeof leave / sizeof leave[0]; i++) {
        int rc, bad = 0;
        snprintf(what, sizeof what, "%s with %ld bytes free", c->name, leave[i]);
        start(c, db);
        if (c->before) c->before();
        fill_disk(filler, leave[i]);
        rc = run(cmd_args(c, db), err, sizeof err);
        if (rc != 0 && !(c->init_like && rc == 1 && strstr(err, "already exists")) &&
            !strstr(err, "space")) {
            fprintf(stderr, "    %s: exit %d without saying the disk is full: %.400s\n", what, rc,
                    err);
            bad++;
        }
        if (rc != 0 && rc != -SIGKILL) bad += check_after_kill(db, what, c->damaged, 1);
        unlink(filler);
        fails += completes_after(c, db, ref, what, bad, "");
    }
    rm_rf(db);
    return fails;
}

/* ---- models get ------------------------------------------------------------------- */

/* `models get org/tiny` into a huggingface_hub cache at HF_HOME=home/hf from the Hub
** stand-in (tests/hub/hub_server.h, in this process on 127.0.0.1). */
static hub_server g_srv;

static void hub_env(const char *home) {
    char hf[900], ep[64];
    snprintf(hf, sizeof hf, "%s/hf", home);
    rm_rf(hf);
    mkdir(hf, 0755);
    setenv("HF_HOME", hf, 1);
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", g_srv.port);
    setenv("HF_ENDPOINT", ep, 1);
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HUB_OFFLINE");
    unsetenv("HF_TOKEN");
}

/* The cache's names below HF_HOME (recursive, sorted, '\n' separated; the lock
** files huggingface_hub's layout keeps are part of it). */
static void list_tree(const char *dir, const char *rel, char *out, size_t size) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char names[64][300];
    int n = 0;
    while (d && (e = readdir(d)) && n < 64)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n; i++) {
        char p[2048], r[1024];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        snprintf(r, sizeof r, "%s/%s", rel, names[i]);
        if (strlen(out) + strlen(r) + 2 < size) strcat(strcat(out, r), "\n");
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) list_tree(p, r, out, size);
    }
}

/* The snapshot's model files: each one there has the Hub's bytes (a file cut short is
** never under its final name); all four there when `complete`. Differences. */
static int check_snapshot(const char *home, int complete, const char *what) {
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        const hs_file *f = &g_srv.files[i];
        char p[1200];
        size_t n = 0;
        char *b;
        snprintf(p, sizeof p, "%s/hf/hub/models--org--tiny/snapshots/%s/%s", home, HS_COMMIT,
                 f->name);
        if (!(b = cli_read_file(p, &n))) {
            if (complete) fprintf(stderr, "    %s: no %s\n", what, f->name);
            bad += complete;
            continue;
        }
        if (n != f->len || memcmp(b, f->data, n)) {
            fprintf(stderr, "    %s: %s has %zu bytes, not the Hub's %zu\n", what, f->name, n,
                    f->len);
            bad++;
        }
        free(b);
    }
    return bad;
}

/* After a run cut short: the snapshot holds no partial file and a model path to it
** either loads the whole model or fails. Then `models get` again completes, and the
** cache holds what a clean get's holds (no .incomplete blob left). Differences. */
static int get_finish(const char *home, const char *ref_names, const char *what) {
    static const char *const get[] = {"models", "get", "org/tiny", NULL};
    char snap[1200], names[8192] = "", hf[900], err[2000];
    int bad = check_snapshot(home, 0, what), rc;
    snprintf(snap, sizeof snap, "%s/hf/hub/models--org--tiny/snapshots/%s", home, HS_COMMIT);
    rc = run((const char *[]){"models", "--model", snap, NULL}, err, sizeof err);
    if (rc == 0) bad += check_snapshot(home, 1, what); /* loaded: it must be whole */
    if ((rc = run(get, err, sizeof err)) != 0) {
        fprintf(stderr, "    %s: models get again: exit %d: %.400s\n", what, rc, err);
        bad++;
    }
    bad += check_snapshot(home, 1, what);
    snprintf(hf, sizeof hf, "%s/hf", home);
    list_tree(hf, "", names, sizeof names);
    if (strcmp(names, ref_names)) {
        fprintf(stderr, "    %s: cache\n%s    reference:\n%s", what, names, ref_names);
        bad++;
    }
    return bad;
}

/* Kill trials and disk-full runs of `models get` (mnt: the tmpfs, or NULL). Failed
** trials. */
static int models_get_trials(int trials, const char *mnt) {
    static const char *const get[] = {"models", "get", "org/tiny", NULL};
    static const long leave[] = {0, 8192, 65536, 1048576};
    char ref_names[8192] = "", hf[900], what[200], err[2000], *txt;
    long n_writes = 0;
    int fails = 0, landed = 0;
    if (hs_start(&g_srv, g_model) != 0) {
        fprintf(stderr, "    models get: cannot start the Hub stand-in\n");
        return 1;
    }
    hub_env(g_tmp); /* the reference: a clean get */
    if (run(get, err, sizeof err) != 0 || check_snapshot(g_tmp, 1, "models get")) {
        fprintf(stderr, "    models get: a clean get failed: %.400s\n", err);
        fails++;
    }
    snprintf(hf, sizeof hf, "%s/hf", g_tmp);
    list_tree(hf, "", ref_names, sizeof ref_names);
    hub_env(g_tmp); /* its writes, under the shim */
    if (run_shimmed(get, 0) != 0) fails++;
    if ((txt = cli_read_file(g_count, NULL))) n_writes = atol(txt);
    free(txt);
    for (int t = 0; t < trials && n_writes > 0; t++) {
        long at = 1 + (long)(rnd01() * (double)n_writes);
        snprintf(what, sizeof what, "models get killed at write %ld of %ld", at, n_writes);
        hub_env(g_tmp);
        landed += run_shimmed(get, at) == -SIGKILL;
        if (get_finish(g_tmp, ref_names, what)) {
            fprintf(stderr, "    %s: FAILED (seed above replays it)\n", what);
            fails++;
        }
    }
    fprintf(stderr, "    models get: %d trials, %d kills landed, %ld writes in a clean run\n",
            trials, landed, n_writes);
    for (size_t i = 0; mnt && i < sizeof leave / sizeof leave[0]; i++) {
        char filler[900];
        int rc, bad = 0;
        snprintf(what, sizeof what, "models get with %ld bytes free", leave[i]);
        snprintf(filler, sizeof filler, "%s/filler", mnt);
        hub_env(mnt);
        fill_disk(filler, leave[i]);
        rc = run(get, err, sizeof err);
        if (rc != 0 && !strstr(err, "space")) {
            fprintf(stderr, "    %s: exit %d without saying the disk is full: %.400s\n", what, rc,
                    err);
            bad++;
        }
        unlink(filler);
        bad += get_finish(mnt, ref_names, what);
        if (bad) {
            fprintf(stderr, "    %s: FAILED\n", what);
            fails++;
        }
    }
    if (mnt) {
        snprintf(hf, sizeof hf, "%s/hf", mnt);
        rm_rf(hf);
    }
    hs_stop(&g_srv);
    return fails;
}

/* ---- the test --------------------------------------------------------------------- */

CDB_TEST(every_write_command_survives_kill9_and_a_full_disk) {
    const char *model = cli_find_model();
    const char *seed_env = getenv("CLIPDB_WRITES_SEED"), *tr_env = getenv("CLIPDB_WRITES_TRIALS");
    int trials = tr_env && *tr_env ? atoi(tr_env) : 3, fails = 0;
    uint64_t seed;
    char prepared[700], db[700], mnt[700], p[1200];
    if (!model) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/ with weights");
    if (access(CLIPDB_BIN, X_OK) != 0) CDB_SKIP("no clipdb binary at %s", CLIPDB_BIN);
    if (!*g_shim || access(g_shim, R_OK) != 0) CDB_SKIP("no kill shim (an ASan build)");
    seed = seed_env && *seed_env ? strtoull(seed_env, NULL, 0)
                                 : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    g_rng = seed ? seed : 1;
    fprintf(stderr, "    seed %llu (CLIPDB_WRITES_SEED replays it), %d trials per command\n",
            (unsigned long long)seed, trials);
    if (!cli_tmpdir(g_tmp, sizeof g_tmp)) CDB_TEST_FAIL_("mkdtemp");
    CLI_PATHS(g_tmp, CLI_AT(g_out, "out.txt"), CLI_AT(g_errf, "err.txt"),
              CLI_AT(g_count, "writes.txt"), CLI_AT(g_cam1, "photos/cam1"),
              CLI_AT(g_cam2, "photos/cam2"), CLI_AT(g_moved, "photos/moved"));
    snprintf(g_cam1_sub, sizeof g_cam1_sub, "%s/private", g_cam1); /* forget of a subfolder */
    snprintf(p, sizeof p, "%s/photos", g_tmp);
    mkdir(p, 0755);
    {
        cdb_world_library_params lp = cdb_world_library_params_default();
        lp.n_threads = 2;
        if (cdb_world_generate(g_cam1, 21, 0, N_IMG, &lp) != CDB_OK ||
            cdb_world_generate(g_cam2, 22, 0, N_IMG, &lp) != CDB_OK ||
            cdb_world_generate(g_cam1_sub, 23, 0, N_IMG / 4, &lp) != CDB_OK)
            CDB_TEST_FAIL_("cannot generate the library: %s", cdb_errmsg());
    }
    snprintf(g_model, sizeof g_model, "%s", kill_copy_model(model, g_tmp));

    { /* the second model: the same one with one weight's lowest bit flipped (another
      ** weights hash, so another model of the database) */
        char dir[700], w[1200];
        size_t n = 0;
        char *b;
        snprintf(dir, sizeof dir, "%s/second", g_tmp);
        mkdir(dir, 0755);
        snprintf(g_model2, sizeof g_model2, "%s", kill_copy_model(model, dir));
        snprintf(w, sizeof w, "%s/model.safetensors", g_model2);
        if (!(b = cli_read_file(w, &n)) || n < 8) CDB_TEST_FAIL_("cannot read %s", w);
        b[n - 4] ^= 1; /* the low byte of the last weight (fp32 or fp16, little-endian) */
        write_file(w, b, n);
        free(b);
    }

    /* the prepared databases: both folders, an exact index; then a second model */
    snprintf(prepared, sizeof prepared, "%s/prepared", g_tmp);
    snprintf(g_prepared[1], sizeof g_prepared[1], "%s", prepared);
    snprintf(g_prepared[2], sizeof g_prepared[2], "%s/prepared2", g_tmp);
    CHECK_EQ_INT(run((const char *[]){"init", "--db", prepared, "--model", g_model, "-q", NULL},
                     NULL, 0),
                 0);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", prepared, g_cam1, g_cam2, "-q",
                                      "--device", "cpu", NULL},
                     NULL, 0),
                 0);
    CHECK_EQ_INT(run((const char *[]){"index", "build", "--db", prepared, "--type", "flat", "-q",
                                      NULL},
                     NULL, 0),
                 0);
    copy_tree(prepared, g_prepared[2]);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", g_prepared[2], g_cam1, g_cam2, "--model",
                                      g_model2, "-q", "--device", "cpu", NULL},
                     NULL, 0),
                 0);
    {
        const wcmd cmds[] = {
            {"init", 0, 1, 0, NULL, NULL, NULL,
             {"init", "--db", "DB", "--model", g_model, "-q", NULL}, NULL},
            {"forget", 1, 0, 0, NULL, NULL, NULL, {"forget", "--db", "DB", g_cam2, "-q", NULL},
             NULL},
            {"forget subfolder", 1, 0, 0, NULL, NULL, NULL,
             {"forget", "--db", "DB", g_cam1_sub, "-q", NULL}, NULL},
            {"move", 1, 0, 0, move_cam2, unmove_cam2, NULL,
             {"move", "--db", "DB", g_cam2, g_moved, "-q", NULL}, NULL},
            {"index build", 1, 0, 0, NULL, NULL, NULL,
             {"index", "build", "--db", "DB", "--type", "hnsw", "-q", NULL}, NULL},
            /* killed only while it writes the vector snapshot (index/snapshot.c) */
            {"index build, snapshot", 1, 0, 0, NULL, NULL, NULL,
             {"index", "build", "--db", "DB", "--type", "hnsw", "-q", NULL}, ".snap"},
            {"reindex --repair", 1, 0, 1, NULL, NULL, damage_shard,
             {"reindex", "--db", "DB", "--repair", "-q", "--device", "cpu", NULL}, NULL},
            {"models --default", 2, 0, 0, NULL, NULL, NULL,
             {"models", "--db", "DB", "--default", "2", NULL}, NULL},
            {"ingest --model", 1, 0, 0, NULL, NULL, NULL,
             {"ingest", "--db", "DB", g_cam1, g_cam2, "--model", g_model2, "-q", "--device", "cpu",
              NULL}, NULL},
        };
        int have_tmpfs;
        snprintf(mnt, sizeof mnt, "%s/tmpfs", g_tmp);
        mkdir(mnt, 0755);
        have_tmpfs = mount("clipdb-test", mnt, "tmpfs", 0, "size=4m") == 0;
        if (!have_tmpfs)
            fprintf(stderr, "    disk-full runs skipped: cannot mount a tmpfs at %s (%s; CI runs "
                            "as root)\n", mnt, strerror(errno));
        snprintf(db, sizeof db, "%s/db", g_tmp);
        for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
            const wcmd *c = &cmds[i];
            const char *only = getenv("CLIPDB_WRITES_ONLY");
            result ref;
            if (only && *only && !strstr(c->name, only)) continue;
            memset(&ref, 0, sizeof ref);
            /* the reference: a clean run */
            start(c, db);
            if (c->before) c->before();
            CHECK_EQ_INT(run(cmd_args(c, db), NULL, 0), 0);
            if (c->after) c->after();
            CHECK_EQ_INT(finish_init(c, db), 0);
            result_read(db, &ref);
            CHECK_EQ_INT(check_end(db, &ref, c->name), 0);
            /* the same command again: done already, exit 0, nothing changed */
            if (!c->init_like) {
                if (c->before) c->before();
                CHECK_EQ_INT(rerun(c, db, c->name), 0);
                if (c->after) c->after();
                CHECK_EQ_INT(check_end(db, &ref, c->name), 0);
            }
            fails += kill_trials(c, &ref, trials);
            if (have_tmpfs) fails += disk_full_trials(c, &ref, mnt);
            dbstate_free(&ref.st);
        }
        {
            const char *only = getenv("CLIPDB_WRITES_ONLY");
            if (!only || !*only || strstr("models get", only))
                fails += models_get_trials(trials, have_tmpfs ? mnt : NULL);
        }
        if (have_tmpfs) umount(mnt);
    }
    CHECK_EQ_INT(g_damage_failed, 0);
    if (fails)
        fprintf(stderr, "    %d failed trials; seed %llu\n", fails, (unsigned long long)seed);
    CHECK_EQ_INT(fails, 0);
    rm_rf(g_tmp);
}

CDB_TEST_MAIN(every_write_command_survives_kill9_and_a_full_disk)
