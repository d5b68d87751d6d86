/*
** bench_search_many.c: what one search over several databases costs against the same
** search over one database holding all their vectors (issue 29 part 3), in process,
** through the engine (cdb_engine_search_many vs cdb_engine_search).
**
** N random unit vectors (default 100,000) for the bundled model are put in one database
** and, split evenly, in P databases (default 4), through db/'s batch API (a search's
** cost does not depend on what the vectors mean). Each search is a raw query vector
** (the encoder's cost is the same either way, and a text query is encoded once in both),
** k = 10, 50 queries after a warm-up; the figures are the median and p99 wall time.
** Printed: the exact scan (no index), then with each database's index built (`clipdb
** index build`), and the ratio of several to one in the same run: the merge and the P
** vector sets' overhead. The query vectors are the same for both sides.
**
** Usage: bench_search_many [--n N] [--parts P] [--runs R]
*/
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_db.h"
#include "cli/cli_run.h"
#include "engine/engine.h"

#define MAX_PARTS 16

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and p99 (ms) of runs searches of queries q (runs x dim): over es[0..n) together
** when n > 1, else es[0] alone. */
static int time_searches(cdb_engine **es, int n, const float *q, int dim, int runs,
                         double *p50, double *p99) {
    double *ms = malloc(sizeof *ms * (size_t)runs);
    cdb_engine_search_params p = cdb_engine_search_params_default();
    if (!ms) return -1;
    for (int i = -1; i < runs; i++) { /* -1: the warm-up (index and vector sets loaded) */
        cdb_engine_query qu;
        cdb_engine_result r;
        int64_t t0 = cdb_now_ns();
        cdb_status st;
        memset(&qu, 0, sizeof qu);
        qu.vector = q + (size_t)(i < 0 ? 0 : i) * (size_t)dim;
        qu.vector_dim = dim;
        st = n > 1 ? cdb_engine_search_many(es, n, &qu, &p, &r)
                   : cdb_engine_search(es[0], &qu, &p, &r);
        if (st != CDB_OK) {
            fprintf(stderr, "bench_search_many: search failed: %s\n", cdb_errmsg());
            free(ms);
            return -1;
        }
        if (i >= 0) ms[i] = (double)(cdb_now_ns() - t0) / 1e6;
        cdb_engine_result_free(&r);
    }
    qsort(ms, (size_t)runs, sizeof *ms, cmp_d);
    *p50 = ms[runs / 2];
    *p99 = ms[(runs * 99) / 100 < runs ? (runs * 99) / 100 : runs - 1];
    free(ms);
    return 0;
}

static int bench(const char *label, char dirs[][600], int parts, const float *q, int dim,
                 int runs) {
    cdb_engine *one = NULL, *es[MAX_PARTS] = {NULL};
    double a50, a99, b50, b99;
    int rc = -1;
    if (cdb_engine_open(dirs[0], NULL, &one) != CDB_OK) goto done;
    for (int i = 0; i < parts; i++)
        if (cdb_engine_open(dirs[i + 1], NULL, &es[i]) != CDB_OK) goto done;
    if (time_searches(&one, 1, q, dim, runs, &a50, &a99) ||
        time_searches(es, parts, q, dim, runs, &b50, &b99))
        goto done;
    printf("%-10s one database:  p50 %7.3f ms  p99 %7.3f ms\n", label, a50, a99);
    printf("%-10s %d databases:   p50 %7.3f ms  p99 %7.3f ms   ratio (p50) %.2fx\n", label,
           parts, b50, b99, b50 / a50);
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_search_many: %s\n", cdb_errmsg());
    cdb_engine_close(one);
    for (int i = 0; i < parts; i++) cdb_engine_close(es[i]);
    return rc;
}

int main(int argc, char **argv) {
    long n = 100000, parts = 4, runs = 50;
    char tmp[] = "/tmp/bench_many_XXXXXX", dirs[MAX_PARTS + 1][600], cmd[700];
    const char *model = cli_find_model();
    float *q;
    int dim = 128, rc = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--parts")) parts = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) runs = atol(argv[i + 1]);
    }
    if (n < parts || parts < 2 || parts > MAX_PARTS || runs < 1 || !model || !mkdtemp(tmp)) {
        fprintf(stderr, "usage: bench_search_many [--n N] [--parts 2..16] [--runs R] "
                        "(and a model: models/<name>/ or $CLIPDB_TEST_MODEL)\n");
        return 2;
    }
    for (int i = 0; i <= parts; i++) {
        uint64_t seed = bench_rng;
        snprintf(dirs[i], sizeof dirs[i], "%s/%s%d", tmp, i ? "part" : "all", i);
        if (bench_clipdb_run((const char *[]){"init", "--db", dirs[i], "--model", model, "-q",
                                              NULL},
                             0, NULL) != 0)
            goto done;
        if (i == 0) { /* all: the parts' vectors, drawn again from the same seed */
            if (bench_db_fill(dirs[0], n, NULL, bench_rnd_normal, "bench_search_many")) goto done;
            bench_rng = seed;
        } else if (bench_db_fill(dirs[i], n / parts, NULL, bench_rnd_normal, "bench_search_many")) {
            goto done;
        }
    }
    if (!(q = malloc(sizeof *q * (size_t)(runs * dim)))) goto done;
    for (long i = 0; i < runs * dim; i++) q[i] = bench_rnd_normal();
    printf("bench_search_many: %ld vectors (dim %d), %ld databases of %ld, k 10, %ld queries\n",
           n, dim, parts, n / parts, runs);
    if (bench("exact", dirs, (int)parts, q, dim, (int)runs)) goto free_q;
    for (int i = 0; i <= parts; i++)
        if (bench_clipdb_run((const char *[]){"index", "build", "--db", dirs[i], "-q", NULL}, 0,
                             NULL) != 0)
            goto free_q;
    if (bench("indexed", dirs, (int)parts, q, dim, (int)runs)) goto free_q;
    rc = 0;
free_q:
    free(q);
done:
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "bench_search_many: cannot remove %s\n", tmp);
    return rc;
}
