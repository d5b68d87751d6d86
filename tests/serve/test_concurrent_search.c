/*
** test_concurrent_search.c: searches that run at the same time (the server's case)
** give exactly what each gives alone. Their text queries are encoded together in
** batches (engine/search/textbatch.c); on the CPU each row of a batch is what the text gives
** alone, so the hits and the score bits must not change. Oracle: another engine on
** the same database, each query searched alone, one after the other (two engines:
** the engine keeps recent query vectors, and the concurrent ones must be encoded).
** 8 threads, 96 different queries of 1..40 words, in an order unlike the oracle's.
** Needs the bundled model (skips without one).
*/
#include <pthread.h>
#include <stdatomic.h>

#include "cdb_test.h"
#include "cli/cli_run.h"
#include "engine/engine.h"

#define N_QUERIES 96
#define N_THREADS 8
#define K 10

static cdb_engine *g_e; /* the one searched (the oracle's, then the concurrent one) */
static char g_queries[N_QUERIES][400];
static cdb_engine_hit g_want[N_QUERIES][K];
static int g_want_n[N_QUERIES];
static atomic_int g_mismatch, g_failed, g_next;

static const char *k_words[] = {"red", "blue", "green", "circle", "square", "star", "heart",
                                "arrow", "a", "small", "big", "on", "white", "black", "ring"};

static void make_queries(void) {
    uint64_t x = 12345;
    for (int q = 0; q < N_QUERIES; q++) {
        int n = 1 + (q * 13) % 40, o = 0;
        for (int w = 0; w < n; w++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            o += snprintf(g_queries[q] + o, sizeof g_queries[q] - (size_t)o, "%s%s", w ? " " : "",
                          k_words[(x >> 33) % (sizeof k_words / sizeof *k_words)]);
        }
    }
}

static int search(int q, cdb_engine_result *res) {
    cdb_engine_query query = {.text = g_queries[q], .text_literal = 1};
    cdb_engine_search_params p = cdb_engine_search_params_default();
    p.k = K;
    return cdb_engine_search(g_e, &query, &p, res) == CDB_OK ? 0 : -1;
}

static void *worker(void *arg) {
    (void)arg;
    for (int i; (i = atomic_fetch_add(&g_next, 1)) < N_QUERIES;) {
        int q = (i * 7) % N_QUERIES; /* another order than the oracle's */
        cdb_engine_result res;
        if (search(q, &res) != 0) {
            atomic_fetch_add(&g_failed, 1);
            continue;
        }
        if (res.n != g_want_n[q]) atomic_fetch_add(&g_mismatch, 1);
        for (int h = 0; h < res.n && h < g_want_n[q]; h++)
            if (res.hits[h].id != g_want[q][h].id ||
                memcmp(&res.hits[h].score, &g_want[q][h].score, sizeof(float)) != 0)
                atomic_fetch_add(&g_mismatch, 1);
        cdb_engine_result_free(&res);
    }
    return NULL;
}

CDB_TEST(concurrent_searches_match_alone) {
    char tmp[512], cmd[2048];
    pthread_t th[N_THREADS];
    if (!cli_find_model()) CDB_SKIP("no model: add models/<name>/ or set CLIPDB_TEST_MODEL");
    CHECK(cli_tmpdir(tmp, sizeof tmp) != NULL);
    snprintf(cmd, sizeof cmd, "env -u CLIPDB_DB -u CLIPDB_MODEL '%s' demo --count 60 -q '%s/lib' "
             ">/dev/null 2>&1", CLIPDB_BIN, tmp);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s/lib/clipdb", tmp);
    CHECK_OK(cdb_engine_open(cmd, NULL, &g_e));
    make_queries();
    for (int q = 0; q < N_QUERIES; q++) { /* the oracle: each alone */
        cdb_engine_result res;
        CHECK_EQ_INT(search(q, &res), 0);
        g_want_n[q] = res.n;
        for (int h = 0; h < res.n && h < K; h++) g_want[q][h] = res.hits[h], g_want[q][h].path = NULL;
        cdb_engine_result_free(&res);
        CHECK(g_want_n[q] > 0);
    }
    cdb_engine_close(g_e);
    {
        cdb_engine_params ep = cdb_engine_params_default();
        ep.text_encoders = 1; /* one batch at a time: the queue fills, batches form */
        CHECK_OK(cdb_engine_open(cmd, &ep, &g_e));
    }
    for (int i = 0; i < N_THREADS; i++) pthread_create(&th[i], NULL, worker, NULL);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    CHECK_EQ_INT(atomic_load(&g_failed), 0);
    CHECK_MSG(atomic_load(&g_mismatch) == 0, "%d hits differ from the search alone",
              atomic_load(&g_mismatch));
    cdb_engine_close(g_e);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(cmd), 0);
}

CDB_TEST_MAIN(concurrent_searches_match_alone)
