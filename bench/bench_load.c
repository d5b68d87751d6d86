/*
** bench_load.c: searches while an ingest writes (issue 9, load test). A database
** is built from a generated library (world/, the bundled model) and indexed; then
** an ingest of a second library runs while S searcher processes (default 8) each
** run `clipdb search` back to back, a new process per query as a user or a script
** would, for D seconds (default 60). Readers never wait for the writer (SQLite
** WAL, DESIGN.md), so no query may fail and latency should stay interactive.
**
** Printed: queries served and failed, queries per second, latency p50 / p90 / p99 /
** max (ms, whole process: exec, model load, encode, search, print), the ingest's
** progress during the window, and `clipdb verify` afterwards.
**
**   bar: 0 failed queries (a failed query is an error: exit status 1)
**
** The second library is sized from the first ingest's rate so that the ingest
** lasts the whole window; if it is still running at the end it gets SIGINT (the
** Ctrl-C path: it commits its batch and exits 130, which is fine).
**
** Usage: bench_load [--seconds D] [--searchers S] [--base N] [--device auto|cpu|cuda|cuda:N]
**                   [--model PATH] [--keep]
** Environment: BENCH_LOAD_SECONDS (the default for --seconds), CLIPDB_MODEL.
** Model: --model, else $CLIPDB_MODEL, else the first models/<name>/ with weights.
** Scratch: a fresh folder under $TMPDIR (or /tmp), removed unless --keep.
*/
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_run.h"
#include "world/world.h"
#include "bench_util.h"

static const char *const g_queries[] = {
    "a red circle",        "a blue square",          "a green triangle on the left",
    "a yellow star",       "two shapes",             "a small purple circle at the top",
    "an orange square",    "a big white triangle",   "red + blue - green",
    "a circle on the right",
};
#define N_QUERIES ((int)(sizeof g_queries / sizeof *g_queries))

/* Starts clipdb with args, stdout to out_path (or /dev/null), stderr to /dev/null: the
** pid or -1. The child is cli_run.h's (the test harness's) spawn. */
static pid_t spawn(const char *const *args, const char *out_path) {
    return cli_spawn(args, out_path ? out_path : "/dev/null", "/dev/null");
}

static int run_wait(const char *const *args, double *secs) {
    double t0 = now_s();
    int rc = cli_wait(spawn(args, NULL));
    if (secs) *secs = now_s() - t0;
    return rc;
}

/* One searcher: queries back to back until the deadline; appends one record per
** query (latency in ms, exit code) to its file. */
static void searcher(int id, const char *db, const char *device, double deadline, const char *out) {
    FILE *f = fopen(out, "wb");
    int q = id;
    if (!f) _exit(1);
    while (now_s() < deadline) {
        double t0 = now_s();
        int rc = cli_wait(spawn((const char *[]){"search", "--db", db, "-k", "10", "--device", device,
                                                  g_queries[q++ % N_QUERIES], NULL},
                                 NULL));
        double rec[2] = {(now_s() - t0) * 1e3, (double)rc};
        fwrite(rec, sizeof rec, 1, f);
        fflush(f);
    }
    fclose(f);
    _exit(0);
}

static double pct(const double *v, int n, double p) {
    int i;
    if (n == 0) return NAN;
    i = (int)ceil(p / 100.0 * n) - 1;
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

int main(int argc, char **argv) {
    const char *env_s = getenv("BENCH_LOAD_SECONDS"), *device = "auto", *model = NULL;
    double seconds = env_s && *env_s ? atof(env_s) : 60.0, t_base = 0, deadline, t_start, t_ing;
    int n_searchers = 8, n_base = 200, keep = 0, n_b, rc, failed = 0, served = 0, n_all = 0, ing_rc;
    char tmp[600], lib_a[700], lib_b[700], db[700], p[900], ing_out[700];
    double *lat = NULL;
    pid_t ing, *pids;
    cdb_world_library_params lp = cdb_world_library_params_default();

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--searchers") && i + 1 < argc) n_searchers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--base") && i + 1 < argc) n_base = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--keep")) keep = 1;
        else {
            fprintf(stderr, "usage: bench_load [--seconds D] [--searchers S] [--base N] [--device auto|cpu|cuda|cuda:N]\n"
                            "                  [--model PATH] [--keep]\n");
            return 2;
        }
    }
    if (seconds <= 0 || n_searchers < 1 || n_searchers > 256 || n_base < 10) {
        fprintf(stderr, "bench_load: bad --seconds, --searchers or --base\n");
        return 2;
    }
    if (!model) model = getenv("CLIPDB_MODEL") && *getenv("CLIPDB_MODEL") ? getenv("CLIPDB_MODEL") : cli_find_model();
    if (!model || access(CLIPDB_BIN, X_OK) != 0) {
        fprintf(stderr, "bench_load: needs a model (models/<name>/ or --model) and %s\n", CLIPDB_BIN);
        return 1;
    }
    if (!cli_tmpdir(tmp, sizeof tmp)) return perror("mkdtemp"), 1;
    snprintf(lib_a, sizeof lib_a, "%s/base", tmp);
    snprintf(lib_b, sizeof lib_b, "%s/incoming", tmp);
    snprintf(db, sizeof db, "%s/db", tmp);
    snprintf(ing_out, sizeof ing_out, "%s/ingest.out", tmp);
    lp.n_threads = 0;
    printf("bench_load: %d searcher processes for %.0f s while an ingest runs (model %s, device %s)\n",
           n_searchers, seconds, model, device);

    /* the database: base library, ingested and indexed */
    if (cdb_world_generate(lib_a, 1, 0, n_base, &lp) != CDB_OK) {
        fprintf(stderr, "bench_load: cannot generate the library: %s\n", cdb_errmsg());
        return 1;
    }
    if ((rc = run_wait((const char *[]){"init", "--db", db, "--model", model, "--quiet", NULL}, NULL)) != 0 ||
        (rc = run_wait((const char *[]){"ingest", "--db", db, lib_a, "--quiet", "--device", device, NULL}, &t_base)) != 0 ||
        (rc = run_wait((const char *[]){"index", "build", "--db", db, "--quiet", NULL}, NULL)) != 0) {
        fprintf(stderr, "bench_load: building the database failed (exit %d)\n", rc);
        return 1;
    }
    /* the incoming library: enough for the ingest to last the window (1.5x the
    ** rate measured alone; it slows down under the search load) */
    n_b = (int)fmin(200000.0, fmax(50.0, 1.5 * seconds * n_base / fmax(t_base, 1e-3)));
    printf("base: %d images ingested in %.1f s (%.1f files/s), indexed; incoming library: %d images\n",
           n_base, t_base, n_base / t_base, n_b);
    fflush(stdout);
    if (cdb_world_generate(lib_b, 2, n_base, n_b, &lp) != CDB_OK) {
        fprintf(stderr, "bench_load: cannot generate the second library: %s\n", cdb_errmsg());
        return 1;
    }

    /* the window: the ingest and the searchers start together */
    t_start = now_s();
    deadline = t_start + seconds;
    ing = spawn((const char *[]){"ingest", "--db", db, lib_b, "--quiet", "--device", device, NULL}, ing_out);
    if (!(pids = calloc((size_t)n_searchers, sizeof *pids))) return 1;
    for (int i = 0; i < n_searchers; i++) {
        snprintf(p, sizeof p, "%s/searcher%d.bin", tmp, i);
        if ((pids[i] = fork()) == 0) searcher(i, db, device, deadline, p);
    }
    for (int i = 0; i < n_searchers; i++) cli_wait(pids[i]);
    {
        int st = 0;
        pid_t w = waitpid(ing, &st, WNOHANG);
        if (w == 0) { /* still running: Ctrl-C it */
            kill(ing, SIGINT);
            ing_rc = cli_wait(ing);
        } else {
            ing_rc = w > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1000;
        }
    }
    t_ing = now_s() - t_start;

    /* figures */
    for (int i = 0; i < n_searchers; i++) {
        size_t n = 0;
        char *b;
        snprintf(p, sizeof p, "%s/searcher%d.bin", tmp, i);
        b = cli_read_file(p, &n);
        for (size_t k = 0; b && k + 2 * sizeof(double) <= n; k += 2 * sizeof(double)) {
            double rec[2];
            double *nl;
            memcpy(rec, b + k, sizeof rec);
            if (rec[1] != 0) {
                failed++;
                continue;
            }
            if (!(nl = realloc(lat, sizeof *lat * (size_t)(n_all + 1)))) break;
            lat = nl;
            lat[n_all++] = rec[0];
        }
        free(b);
    }
    served = n_all;
    qsort(lat, (size_t)n_all, sizeof *lat, cmp_d);
    {
        char *out = cli_read_file(ing_out, NULL);
        char *nl = out ? strchr(out, '\n') : NULL;
        if (nl) *nl = '\0';
        printf("ingest during the window: exit %d%s after %.1f s: %s\n", ing_rc,
               ing_rc == 130 ? " (interrupted at the end of the window, as planned)" : "", t_ing,
               out && *out ? out : "(no summary)");
        free(out);
    }
    printf("queries: %d served, %d failed, %.1f queries/s over %d searchers\n", served, failed,
           served / seconds, n_searchers);
    printf("latency (ms, whole process): p50 %.1f  p90 %.1f  p99 %.1f  max %.1f\n", pct(lat, n_all, 50),
           pct(lat, n_all, 90), pct(lat, n_all, 99), n_all ? lat[n_all - 1] : NAN);
    rc = run_wait((const char *[]){"verify", "--db", db, "--quiet", NULL}, NULL);
    printf("verify after the run: %s\n", rc == 0 ? "ok" : "PROBLEMS");
    printf("bar: 0 failed queries: %s\n", failed == 0 && served > 0 ? "ok" : "MISSED");
    free(lat);
    free(pids);
    if (!keep && strstr(tmp, "clipdb-test-")) rm_rf(tmp); /* only what cli_tmpdir made */
    else printf("kept %s\n", tmp);
    return failed == 0 && served > 0 && rc == 0 && (ing_rc == 0 || ing_rc == 130) ? 0 : 1;
}
