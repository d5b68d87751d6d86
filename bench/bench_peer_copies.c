/*
** bench_peer_copies.c: what a peer's part of copies collapsed across `serve --peer`
** servers costs (issue 28 over issue 29's peers), in process, through the engine: one
** step of the front's closure on a peer is cdb_engine_copies_of with the facts of a
** page's hits (what /api/copies_of runs), against the collapsed search that gave that
** page (cdb_engine_search with collapse, its copy groups cached: the baseline, measured
** in the same run).
**
** N files (default 100,000) for the bundled model through db/'s batch API (random unit
** vectors, unique hashes), each with a photo row holding a random perceptual hash (every
** file a candidate for a near copy, as after a reindex). Each query is a raw query vector
** with k = 10; the facts asked about are its 10 hits' (cdb_engine_copy_facts_get).
** Printed: the median and p99 of R runs after a warm-up (which builds the groups) of
** both, and their ratio; then the crowd counts a server gives the front
** (cdb_engine_phash_near_counts) for 10 and for 4,096 random phashes (the closure's most),
** against the same search.
**
** Usage: bench_peer_copies [--n N] [--runs R]
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_db.h"
#include "cli/cli_run.h"
#include "engine/engine.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A photo row with a random phash for each of the n files of the database at dir. */
static int add_phashes(const char *dir, int64_t n) {
    cdb_db *db = NULL;
    cdb_db_photo *rows = calloc(1000, sizeof *rows);
    int64_t *ids = malloc(sizeof *ids * 1000);
    uint8_t *found = malloc(1000);
    int rc = -1;
    if (!rows || !ids || !found || cdb_db_open(dir, NULL, &db) != CDB_OK) goto done;
    for (int64_t at = 1; at <= n; at += 1000) {
        int m = (int)(n - at + 1 < 1000 ? n - at + 1 : 1000);
        for (int i = 0; i < m; i++) ids[i] = at + i;
        if (cdb_db_photos_get(db, ids, m, rows, found) != CDB_OK) goto done;
        for (int i = 0; i < m; i++) {
            rows[i].file_id = ids[i];
            rows[i].taken_source = CDB_DB_TAKEN_NONE;
            rows[i].has_phash = 1;
            rows[i].phash = (uint64_t)(bench_rnd_normal() * 1e9) * 0x9E3779B97F4A7C15ULL ^
                            (uint64_t)ids[i] * 0xD1B54A32D192ED03ULL;
            rows[i].phash_format = 1;
            rows[i].phash_width = 640;
            rows[i].phash_height = 480;
        }
        if (cdb_db_photos_put(db, rows, m) != CDB_OK) goto done;
    }
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_peer_copies: cannot store phashes: %s\n", cdb_errmsg());
    cdb_db_close(db);
    free(rows);
    free(ids);
    free(found);
    return rc;
}

/* Median and p99 of ms[0..n) into *p50, *p99 (sorts ms). */
static void stats(double *ms, int n, double *p50, double *p99) {
    qsort(ms, (size_t)n, sizeof *ms, cmp_d);
    *p50 = ms[n / 2];
    *p99 = ms[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1];
}

/* The crowd counts a server gives the front (/api/copies_of's near_counts): every file's
** phash against each asked one, for a page's 10 hits and for the closure's most (4,096
** files), p50 of runs against the collapsed search's p50 (base_ms). 0, or -1. */
static int near_counts(cdb_engine *e, int runs, double base_ms) {
    static const int sizes[2] = {10, 4096};
    uint64_t *ph = malloc(sizeof *ph * 4096);
    int *counts = malloc(sizeof *counts * 4096);
    double *ms = malloc(sizeof *ms * (size_t)runs);
    int rc = ph && counts && ms ? 0 : -1;
    for (int s = 0; s < 2 && rc == 0; s++) {
        double p50, p99;
        for (int i = 0; i < runs && rc == 0; i++) {
            for (int k = 0; k < sizes[s]; k++)
                ph[k] = (uint64_t)(bench_rnd_normal() * 1e9) * 0x9E3779B97F4A7C15ULL ^
                        (uint64_t)(k + 1) * 0xD1B54A32D192ED03ULL; /* as the stored ones */
            int64_t t0 = cdb_now_ns();
            rc = cdb_engine_phash_near_counts(e, NULL, ph, sizes[s], counts) == CDB_OK ? 0 : -1;
            ms[i] = (double)(cdb_now_ns() - t0) / 1e6;
        }
        if (rc) break;
        stats(ms, runs, &p50, &p99);
        printf("near counts of %4d phashes (a crowd's): p50 %8.3f ms  p99 %8.3f ms   "
               "ratio (p50) %.2fx the search\n", sizes[s], p50, p99, p50 / base_ms);
    }
    free(ph);
    free(counts);
    free(ms);
    return rc;
}

static int bench(cdb_engine *e, int dim, int runs) {
    double *a = malloc(sizeof *a * (size_t)runs), *b = malloc(sizeof *b * (size_t)runs);
    float *q = malloc(sizeof *q * (size_t)dim);
    int rc = -1, total_found = 0;
    for (int i = -1; a && b && q && i < runs; i++) { /* -1: the warm-up (groups built) */
        cdb_engine_search_params p = cdb_engine_search_params_default();
        cdb_engine_query qu;
        cdb_engine_result r;
        cdb_engine_copy_facts facts[10], *out = NULL;
        int64_t ids[10];
        uint16_t *vecs = NULL, *ovecs = NULL;
        int n_out = 0, fdim = 0, m;
        double norm = 0;
        for (int d = 0; d < dim; d++) {
            q[d] = bench_rnd_normal();
            norm += (double)q[d] * q[d];
        }
        for (int d = 0; d < dim; d++) q[d] = (float)(q[d] / sqrt(norm));
        memset(&qu, 0, sizeof qu);
        qu.vector = q;
        qu.vector_dim = dim;
        p.collapse = 1;
        int64_t t0 = cdb_now_ns();
        if (cdb_engine_search(e, &qu, &p, &r) != CDB_OK) goto done;
        int64_t t1 = cdb_now_ns();
        m = r.n < 10 ? r.n : 10;
        for (int j = 0; j < m; j++) ids[j] = r.hits[j].id;
        cdb_engine_result_free(&r);
        if (cdb_engine_copy_facts_get(e, NULL, ids, m, facts, &vecs, &fdim) != CDB_OK) goto done;
        int64_t t2 = cdb_now_ns();
        cdb_status st = cdb_engine_copies_of(e, NULL, facts, m, &out, &n_out, &ovecs, &fdim);
        int64_t t3 = cdb_now_ns();
        free(vecs);
        free(out);
        free(ovecs);
        if (st != CDB_OK) goto done;
        total_found += n_out;
        if (i >= 0) a[i] = (double)(t1 - t0) / 1e6, b[i] = (double)(t3 - t2) / 1e6;
    }
    if (a && b && q) {
        double a50, a99, b50, b99;
        stats(a, runs, &a50, &a99);
        stats(b, runs, &b50, &b99);
        printf("collapsed search, k=10 (baseline):   p50 %8.3f ms  p99 %8.3f ms\n", a50, a99);
        printf("copies_of its 10 hits (a peer's round): p50 %8.3f ms  p99 %8.3f ms   "
               "ratio (p50) %.2fx\n", b50, b99, b50 / a50);
        printf("files found per round: %.1f (the hits themselves: 10)\n",
               (double)total_found / (runs + 1));
        rc = near_counts(e, runs, a50);
    }
done:
    if (rc) fprintf(stderr, "bench_peer_copies: %s\n", cdb_errmsg());
    free(a);
    free(b);
    free(q);
    return rc;
}

int main(int argc, char **argv) {
    long n = 100000, runs = 20;
    char tmp[] = "/tmp/bench_peer_copies_XXXXXX", dir[600], cmd[700];
    const char *model = cli_find_model();
    cdb_engine *e = NULL;
    cdb_engine_copy_facts none;
    uint16_t *no_vecs = NULL;
    int rc = 1, dim = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n")) n = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) runs = atol(argv[i + 1]);
    }
    if (n < 10 || runs < 1 || !model || !mkdtemp(tmp)) {
        fprintf(stderr, "usage: bench_peer_copies [--n N >= 10] [--runs R] "
                        "(and a model: models/<name>/ or $CLIPDB_TEST_MODEL)\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/db", tmp);
    if (bench_clipdb_run((const char *[]){"init", "--db", dir, "--model", model, "-q", NULL}, 0,
                         NULL) != 0 ||
        bench_db_fill(dir, n, NULL, bench_rnd_normal, "bench_peer_copies") || add_phashes(dir, n))
        goto done;
    if (cdb_engine_open(dir, NULL, &e) != CDB_OK ||
        cdb_engine_copy_facts_get(e, NULL, NULL, 0, &none, &no_vecs, &dim) != CDB_OK) /* dim */
        goto done;
    free(no_vecs);
    printf("bench_peer_copies: %ld files with phashes, %d-d, %ld runs\n", n, dim, runs);
    rc = bench(e, dim, (int)runs) ? 1 : 0;
done:
    if (rc) fprintf(stderr, "bench_peer_copies: %s\n", cdb_errmsg());
    cdb_engine_close(e);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) fprintf(stderr, "bench_peer_copies: cannot remove %s\n", tmp);
    return rc;
}
