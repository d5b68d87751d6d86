/*
** test_cli_kill.c: kill -9 at any moment of `clipdb ingest`, then a rerun, ends with
** exactly the vectors a clean run gives (issue 5, part 5), at the process level with
** the real clipdb binary and a real model.
**
** A generated library (world/) of several roots, as real ones are: two camera
** folders with the same file names and other photos (cam1, cam2), and a single file
** (loose/x.png), plus a corrupt JPEG, a truncated PNG and a text file, is ingested
** once cleanly (`ingest cam1 cam2 loose/x.png`): that is the reference. A second clean run must give the
** same bytes (the encoder is deterministic; otherwise "bit for bit" means nothing).
** Then, for as many rounds as the time budget allows (and at least until
** KILL_MIN_LANDED kills have landed while the process was still running): a fresh
** database, `clipdb ingest` SIGKILLed either after a random delay spread over the
** whole of a clean run (model loading, walk, encoding, the last commit), or just
** before a random one of the writes and syncs a clean run makes, by an LD_PRELOAD
** shim (kill_shim.c, a test tool: clipdb has no hook), which reaches the short
** windows between the steps pending -> vectors -> ok that a delay rarely hits;
** sometimes a rerun SIGKILLed in turn, then a rerun to completion. The end state is read
** straight from the SQLite files (catalog.db and every shards/NNNN.db), not
** through clipdb, and must match the reference: the same paths in the same states,
** no file left pending, each ok file with exactly one vector in exactly one shard,
** byte-identical fp16, no vector without an ok file; and `clipdb verify` exits 0.
**
** The iteration count adapts to a time budget ($CLIPDB_KILL_SECONDS, default 60),
** but no check depends on timing: a slow machine runs fewer rounds, never fails
** for being slow (the landed-kill minimum is reached by running more rounds, up
** to a hard cap). $CLIPDB_KILL_SEED fixes the random choices (the seed is printed),
** which replays a failure as far as the machine's timing allows. After each kill,
** the state left behind is checked too: no ok file without its vector (pending rows
** are expected and counted).
**
** Needs a model: $CLIPDB_TEST_MODEL, else the bundled one (models/<name>/ with
** weights), and the built clipdb binary. Skipped (exit 77) without them.
**
** Ingest's default batch ($CLIPDB_KILL_BATCH passes another --batch): a rerun after
** a kill batches different images together than the clean run did, so the bit-for-
** bit comparison also holds the encoder to its batch invariance (encoder.h): the
** same image gives the same bytes in any batch, at any position, with any threads.
*/
#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdb_test.h"
#include "cli_run.h"
#include "kill_util.h"
#include "world/world.h"

#define N_IMG 60
#define KILL_MIN_LANDED 12 /* kills that hit a running ingest, over all rounds */
#define KILL_MAX_ROUNDS 400

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
    struct timespec ts;
    if (s <= 0) return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- running clipdb ------------------------------------------------------------- */

static const char *g_batch = NULL; /* NULL: ingest's default */
static char g_count[700]; /* the shim writes a finished run's count of writes here */
static char g_tmp[512], g_lib[600], g_out[600], g_errf[600];
static char g_cam1[700], g_cam2[700], g_loose[700];

static int run_ok(const char *const *args) {
    cli_run_result r;
    int rc = cli_run(args, &r);
    if (rc != 0 && rc != 3) fprintf(stderr, "    clipdb %s: exit %d: %.400s\n", args[0], rc, r.err);
    cli_run_free(&r);
    return rc;
}

static int init_db(const char *db, const char *model) {
    return run_ok((const char *[]){"init", "--db", db, "--model", model, "--quiet", NULL});
}

static const char *const *ingest_args(const char *db) {
    static const char *a[14];
    a[0] = "ingest", a[1] = "--db", a[2] = db, a[3] = g_cam1, a[4] = g_cam2, a[5] = g_loose,
    a[6] = "--threads", a[7] = "2", a[8] = "--quiet", a[9] = "--device", a[10] = "cpu";
    a[11] = g_batch ? "--batch" : NULL, a[12] = g_batch, a[13] = NULL;
    return a;
}

/* A full ingest; its exit code: 3 when it met the bad files, 0 when an earlier
** (killed) run had already recorded them as errors. *secs: wall. */
static int ingest_clean(const char *db, double *secs) {
    double t0 = now_s();
    pid_t pid = cli_spawn(ingest_args(db), g_out, g_errf);
    int rc = pid < 0 ? -1000 : cli_wait(pid);
    if (secs) *secs = now_s() - t0;
    if (rc != 3 && rc != 0) {
        char *e = cli_read_file(g_errf, NULL);
        fprintf(stderr, "    ingest: exit %d (expected 0 or 3): %.400s\n", rc, e ? e : "");
        free(e);
    }
    return rc;
}

/* The LD_PRELOAD shim (kill_shim.c) that SIGKILLs clipdb just before its N-th
** write or sync to a file; "" when it was not built. */
#if defined(CDB_KILL_SHIM) && !defined(__SANITIZE_ADDRESS__) /* ASan wants to be preloaded first */
static const char *g_shim = CDB_KILL_SHIM;
#else
static const char *g_shim = "";
#endif

/* Starts an ingest with the shim preloaded (when at_write > 0 or count_file is set)
** and CDB_KILL_SHIM_AT / CDB_KILL_SHIM_COUNT in its environment; its pid or -1. */
static pid_t spawn_shimmed(const char *db, long at_write, const char *count_file, const char *match) {
    char at[32];
    pid_t pid;
    snprintf(at, sizeof at, "%ld", at_write);
    setenv("LD_PRELOAD", g_shim, 1);
    if (match) setenv("CDB_KILL_SHIM_MATCH", match, 1);
    setenv("CDB_KILL_SHIM_AT", at, 1);
    if (count_file) setenv("CDB_KILL_SHIM_COUNT", count_file, 1);
    pid = cli_spawn(ingest_args(db), g_out, g_errf);
    unsetenv("LD_PRELOAD");
    unsetenv("CDB_KILL_SHIM_AT");
    unsetenv("CDB_KILL_SHIM_COUNT");
    unsetenv("CDB_KILL_SHIM_MATCH");
    return pid;
}

/* Starts an ingest and SIGKILLs it after delay seconds, or (at_write > 0) lets the
** shim kill it just before its at_write-th write or sync. Returns 1 when the kill
** landed (the process was still running), 0 when it had already exited (its exit
** code in *rc), -1 on failure to start. */
static int ingest_killed(const char *db, double delay, long at_write, const char *match, int *rc) {
    pid_t pid;
    int status = 0;
    double t_end = now_s() + delay;
    if (at_write > 0) {
        if ((pid = spawn_shimmed(db, at_write, match ? NULL : g_count, match)) < 0) return -1;
        *rc = cli_wait(pid);
        return *rc == -SIGKILL ? 1 : 0;
    }
    if ((pid = cli_spawn(ingest_args(db), g_out, g_errf)) < 0) return -1;
    for (;;) { /* poll, so an early exit is seen and not mistaken for a kill */
        double left = t_end - now_s();
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1000;
            return 0;
        }
        if (left <= 0) break;
        sleep_s(left < 0.005 ? left : 0.005);
    }
    kill(pid, SIGKILL);
    *rc = cli_wait(pid);
    return *rc == -SIGKILL ? 1 : 0;
}

/* ---- the test --------------------------------------------------------------------- */

CDB_TEST(kill9_anywhere_then_rerun_gives_the_clean_result) {
    const char *model = cli_find_model();
    const char *budget_env = getenv("CLIPDB_KILL_SECONDS"), *seed_env = getenv("CLIPDB_KILL_SEED");
    double budget = budget_env && *budget_env ? atof(budget_env) : 60.0;
    char ref_db[700], db2[700], db[700], p[1200];
    dbstate ref, s;
    double t_clean = 0, t2 = 0, t_start;
    int rounds = 0, kills = 0, landed = 0, landed_rerun = 0, missed = 0, with_pending = 0, fails = 0;
    int hist[5] = {0}, hist_w[5] = {0}, by_write = 0, landed_write = 0;
    long n_writes = 0, n_shard_writes = 0;
    int with_novec = 0, by_shard = 0, landed_shard = 0; /* kills that left ok files without a vector (a broken write order) */
    cli_run_result r;

    if (!model) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/ with model.safetensors");
    if (access(CLIPDB_BIN, X_OK) != 0) CDB_SKIP("no clipdb binary at %s: build the clipdb target", CLIPDB_BIN);
    g_rng = seed_env && *seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (!g_rng) g_rng = 1;
    if (getenv("CLIPDB_KILL_BATCH") && *getenv("CLIPDB_KILL_BATCH")) g_batch = getenv("CLIPDB_KILL_BATCH");
    fprintf(stderr, "    seed %llu (CLIPDB_KILL_SEED replays it), budget %.0f s\n", (unsigned long long)g_rng,
            budget);

    if (!cli_tmpdir(g_tmp, sizeof g_tmp)) CDB_TEST_FAIL_("mkdtemp");
    CLI_PATHS(g_tmp, CLI_AT(g_lib, "photos"), CLI_AT(g_out, "out.txt"), CLI_AT(g_errf, "err.txt"));
    {
        cdb_world_library_params lp = cdb_world_library_params_default();
        size_t n = 0;
        char *png = NULL;
        lp.n_threads = 2;
        CLI_PATHS(g_lib, CLI_AT(g_cam1, "cam1"), CLI_AT(g_cam2, "cam2"),
                  CLI_AT(g_loose, "loose/x.png"));
        mkdir(g_lib, 0755);
        /* the same names in both folders, other photos */
        if (cdb_world_generate(g_cam1, 11, 0, N_IMG / 2, &lp) != CDB_OK ||
            cdb_world_generate(g_cam2, 12, 0, N_IMG / 2, &lp) != CDB_OK)
            CDB_TEST_FAIL_("cannot generate the library: %s", cdb_errmsg());
        for (int k = 0; k < 2; k++) {
            snprintf(p, sizeof p, "%s/manifest.jsonl", k ? g_cam2 : g_cam1);
            remove(p);
        }
        /* bad files: a corrupt JPEG, a truncated PNG, and a text file (skipped) */
        write_file((snprintf(p, sizeof p, "%s/broken.jpg", g_cam1), p), "\xFF\xD8\xFF garbage", 12);
        write_file((snprintf(p, sizeof p, "%s/notes.txt", g_cam1), p), "hello\n", 6);
        for (int i = 0; i < N_IMG / 2 && !png; i++) {
            snprintf(p, sizeof p, "%s/img_%07d.png", g_cam2, i);
            png = cli_read_file(p, &n);
        }
        CHECK(png != NULL); /* world/ writes some PNGs */
        if (png) {
            snprintf(p, sizeof p, "%s/sub", g_cam2);
            mkdir(p, 0755);
            snprintf(p, sizeof p, "%s/sub/cut.png", g_cam2);
            write_file(p, png, n / 3);
            snprintf(p, sizeof p, "%s/loose", g_lib); /* a single file, its own root */
            mkdir(p, 0755);
            write_file(g_loose, png, n);
            free(png);
        }
    }

    /* a private copy of the model: a training job may rewrite the bundled one in
    ** place while the test runs (a mapped file that shrinks is a SIGBUS, and new
    ** weights would change every vector) */
    model = kill_copy_model(model, g_tmp);

    /* the reference, and determinism: two clean runs give the same bytes */
    snprintf(ref_db, sizeof ref_db, "%s/ref", g_tmp);
    snprintf(db2, sizeof db2, "%s/ref2", g_tmp);
    CHECK_EQ_INT(init_db(ref_db, model), 0);
    CHECK_EQ_INT(ingest_clean(ref_db, &t_clean), 3);
    CHECK_EQ_INT(read_state(ref_db, &ref), 0);
    {
        int n_ok = 0, n_err = 0;
        for (int i = 0; i < ref.n; i++) n_ok += ref.f[i].state == 2, n_err += ref.f[i].state == 3;
        CHECK_EQ_INT(n_ok, N_IMG + 1);
        CHECK_EQ_INT(n_err, 2);
        CHECK_EQ_INT(ref.n_vec_rows, N_IMG + 1);
    }
    CHECK_EQ_INT(compare(&ref, &ref, "reference"), 0);
    CHECK_EQ_INT(init_db(db2, model), 0);
    { /* the second one also counts the writes and syncs of a clean run (the shim) */
        char cnt[700];
        char *txt;
        pid_t pid;
        snprintf(cnt, sizeof cnt, "%s/writes.txt", g_tmp);
        snprintf(g_count, sizeof g_count, "%s", cnt);
        t2 = now_s();
        if (*g_shim && access(g_shim, R_OK) == 0) {
            pid = spawn_shimmed(db2, 0, cnt, NULL);
        } else {
            fprintf(stderr, "    no kill shim (%s): random delays only\n", g_shim);
            pid = cli_spawn(ingest_args(db2), g_out, g_errf);
        }
        CHECK_EQ_INT(pid < 0 ? -1000 : cli_wait(pid), 3);
        t2 = now_s() - t2;
        if ((txt = cli_read_file(cnt, NULL))) n_writes = atol(txt);
        free(txt);
    }
    CHECK_EQ_INT(read_state(db2, &s), 0);
    CHECK_MSG(compare(&ref, &s, "second clean run") == 0, "two clean runs differ: the encoder is not deterministic");
    dbstate_free(&s);
    rm_rf(db2);
    if (n_writes > 0) { /* a third one counts its writes to shards alone */
        char cnt[700];
        char *txt;
        pid_t pid;
        snprintf(cnt, sizeof cnt, "%s/shard-writes.txt", g_tmp);
        CHECK_EQ_INT(init_db(db2, model), 0);
        pid = spawn_shimmed(db2, 0, cnt, "/shards/");
        CHECK_EQ_INT(pid < 0 ? -1000 : cli_wait(pid), 3);
        if ((txt = cli_read_file(cnt, NULL))) n_shard_writes = atol(txt);
        free(txt);
        CHECK_EQ_INT(read_state(db2, &s), 0);
        CHECK_EQ_INT(compare(&ref, &s, "third clean run"), 0);
        dbstate_free(&s);
        rm_rf(db2);
    }
    if (t2 < t_clean) t_clean = t2; /* the faster one: load on the machine only slows runs */
    fprintf(stderr, "    clean ingest of %d images + 3 bad files: %.2f s\n", N_IMG, t_clean);

    /* the rounds */
    snprintf(db, sizeof db, "%s/db", g_tmp);
    t_start = now_s();
    while (rounds < KILL_MAX_ROUNDS && (now_s() - t_start < budget || landed < KILL_MIN_LANDED)) {
        int n_kill = 1 + (rnd01() < 0.35) + (rnd01() < 0.15), rc = 0, bad;
        rounds++;
        rm_rf(db);
        CHECK_EQ_INT(init_db(db, model), 0);
        for (int k = 0; k < n_kill; k++) {
            /* 30% of the kills after a random delay over the whole of a clean run and a
            ** little past its end, 35% just before a random one of its writes */
            double frac = rnd01() * 1.1, delay = frac * t_clean;
            /* (the count varies with the commits, one a second or so, and a rerun
            ** has less left to do: aim inside the likely range) */
            double how = rnd01();
            long at = n_writes > 0 && how < 0.35 ? 1 + (long)(frac / 1.1 * (k ? 0.4 : 0.85) * (double)n_writes) : 0;
            /* and 35% just before one of its writes to a shard (creating it, or the
            ** vectors' step right after the commit that marked the files pending) */
            const char *match = n_shard_writes > 0 && how >= 0.35 && how < 0.7 ? "/shards/" : NULL;
            int hit;
            if (match) at = 1 + (long)(rnd01() * (k ? 0.5 : 1.0) * (double)n_shard_writes);
            hit = ingest_killed(db, delay, at, match, &rc);
            by_shard += match != NULL;
            CHECK(hit >= 0);
            kills++;
            by_write += at > 0 && !match;
            if (hit) {
                dbstate mid;
                landed++;
                landed_rerun += k > 0;
                if (match) landed_shard++;
                else if (at) landed_write++, hist_w[(int)(frac / 1.1 * 5.0) > 4 ? 4 : (int)(frac / 1.1 * 5.0)]++;
                else hist[frac >= 1.0 ? 4 : (int)(frac * 4.0)]++;
                if (read_state(db, &mid) == 0) {
                    int novec = 0;
                    for (int i = 0; i < mid.n; i++) novec += mid.f[i].state == 2 && mid.f[i].n_vec == 0;
                    with_pending += mid.n_pending > 0;
                    with_novec += novec > 0;
                }
                dbstate_free(&mid);
            } else {
                missed++;
                if (at && !match && k == 0) { /* a whole run under the shim: aim by its count next time */
                    char *txt = cli_read_file(g_count, NULL);
                    if (txt && atol(txt) > 0) n_writes = atol(txt);
                    free(txt);
                }
                CHECK_MSG(rc == 3 || (k > 0 && rc == 0), "an ingest that ran to its end exited %d", rc);
            }
        }
        rc = ingest_clean(db, NULL);
        CHECK_MSG(rc == 0 || rc == 3, "the rerun after the kills exited %d", rc);
        read_state(db, &s);
        snprintf(p, sizeof p, "round %d", rounds);
        bad = compare(&ref, &s, p);
        dbstate_free(&s);
        cli_run((const char *[]){"verify", "--db", db, NULL}, &r);
        if (r.exit_code != 0) fprintf(stderr, "    round %d: verify exit %d: %.400s%.400s\n", rounds, r.exit_code, r.out, r.err);
        bad += r.exit_code != 0;
        cli_run_free(&r);
        if (bad) {
            fails++;
            fprintf(stderr, "    round %d failed (%d kill(s)); seed above replays it\n", rounds, n_kill);
            if (fails >= 3) break;
        }
    }
    fprintf(stderr,
            "    %d rounds, %d kills: %d landed mid-run (%d of them during a rerun), %d after the run ended;"
            " %d left pending rows, %d ok files without a vector;\n    %d aimed just before one of a clean run's %ld writes/syncs (%d landed;"
            " in each fifth of them: %d/%d/%d/%d/%d),\n    %d just before one of its %ld shard writes (%d landed),"
            " the others after a delay, landed at"
            " 0-25/25-50/50-75/75-100/>100%% of a clean run: %d/%d/%d/%d/%d; %.1f s\n",
            rounds, kills, landed, landed_rerun, missed, with_pending, with_novec, by_write, n_writes, landed_write, hist_w[0],
            hist_w[1], hist_w[2], hist_w[3], hist_w[4], by_shard, n_shard_writes, landed_shard, hist[0], hist[1], hist[2], hist[3], hist[4], now_s() - t_start);
    dbstate_free(&ref);
    CHECK_EQ_INT(fails, 0);
    /* the write order itself: an ok file has its vector at every kill point */
    CHECK_MSG(with_novec == 0, "%d kills left ok files without a vector: ok was written before the vector",
              with_novec);
    CHECK_MSG(landed >= KILL_MIN_LANDED, "only %d kills landed mid-run (< %d)", landed, KILL_MIN_LANDED);
    rm_rf(g_tmp);
}

CDB_TEST_MAIN(kill9_anywhere_then_rerun_gives_the_clean_result)
