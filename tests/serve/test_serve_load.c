/*
** test_serve_load.c: `clipdb serve` under load while the library changes: 8 clients,
** each on its own keep-alive connection, search (the query language, "more like
** this"), fetch thumbnails and stats for a bounded time (CLIPDB_LOAD_SECONDS, default
** 10) while another process ingests new folders of photos one after the other. Every
** request must succeed (0 errors: a non-200 answer or a dropped connection is one),
** and the photos ingested meanwhile must be searchable at the end. Prints requests/s
** and the p50/p99 latency.
*/
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "serve/serve_util.h"

#define N_CLIENTS 8
#define MAX_SAMPLES 400000

static int g_port;
static atomic_int g_stop;
static atomic_llong g_requests, g_errors, g_n_lat;
static float *g_lat_ms;
static char g_first_error[512];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void note_error(const char *what, int status) {
    atomic_fetch_add(&g_errors, 1);
    pthread_mutex_lock(&g_mu);
    if (!g_first_error[0]) snprintf(g_first_error, sizeof g_first_error, "%s: status %d", what, status);
    pthread_mutex_unlock(&g_mu);
}

static void *client(void *arg) {
    static const char *queries[] = {"a red circle", "star + blue - square", "2*green triangle",
                                    "a yellow heart", "an arrow - red", "a cross"};
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    int fd = su_connect(g_port);
    int64_t last_ids[16];
    int n_ids = 0;
    while (!atomic_load(&g_stop)) {
        char path[512], enc[256];
        su_resp r;
        int kind = (int)(rand_r(&seed) % 10);
        if (kind < 5 || n_ids == 0)
            snprintf(path, sizeof path, "/api/search?q=%s&k=20",
                     su_urlenc(queries[rand_r(&seed) % 6], enc, sizeof enc));
        else if (kind < 7)
            snprintf(path, sizeof path, "/api/search?image_id=%lld&k=10", (long long)last_ids[rand_r(&seed) % n_ids]);
        else if (kind < 9)
            snprintf(path, sizeof path, "/api/thumb/%lld", (long long)last_ids[rand_r(&seed) % n_ids]);
        else
            snprintf(path, sizeof path, "/api/stats");
        if (fd < 0) fd = su_connect(g_port);
        int64_t t0 = cdb_now_ns();
        int rc = fd >= 0 ? su_request_on(fd, "GET", path, NULL, NULL, 0, &r, 30000) : -1;
        float ms = (float)(cdb_now_ns() - t0) / 1e6f;
        atomic_fetch_add(&g_requests, 1);
        if (rc != 0 || r.status != 200) {
            note_error(path, rc != 0 ? r.status : r.status);
            if (fd >= 0) close(fd);
            fd = -1;
            su_resp_free(&r);
            continue;
        }
        long long i = atomic_fetch_add(&g_n_lat, 1);
        if (i < MAX_SAMPLES) g_lat_ms[i] = ms;
        if (!strncmp(path, "/api/search", 11)) { /* remember ids to ask about next */
            json_error_t e;
            json_t *doc = json_loadb(r.body, r.len, 0, &e), *res = json_object_get(doc, "results");
            n_ids = 0;
            for (size_t k = 0; k < json_array_size(res) && n_ids < 16; k++)
                last_ids[n_ids++] = json_integer_value(json_object_get(json_array_get(res, k), "id"));
            json_decref(doc);
        }
        su_resp_free(&r);
    }
    if (fd >= 0) close(fd);
    return NULL;
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

CDB_TEST(load_while_ingesting) {
    char lib[700], db[700], more[700], img[900];
    su_server s;
    pthread_t th[N_CLIENTS];
    const char *env = getenv("CLIPDB_LOAD_SECONDS");
    double seconds = env && atof(env) > 0 ? atof(env) : 10.0;
    int rounds = 0;
    LU_NEED_SETUP();
    lu_path(lib, sizeof lib, "photos");
    lu_path(db, sizeof db, "db");
    CHECK_EQ_INT(lu_generate(lib, 5, 0, 40), 0);
    CHECK_EQ_INT(lu_init(db), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", db, "--threads", "4", NULL}), 0);
    g_port = s.port;
    g_lat_ms = malloc(sizeof *g_lat_ms * MAX_SAMPLES);
    CHECK(g_lat_ms != NULL);
    for (int i = 0; i < N_CLIENTS; i++) pthread_create(&th[i], NULL, client, (void *)(uintptr_t)i);
    /* the writer: a new folder, ingested, again and again until the time is up */
    int64_t t0 = cdb_now_ns(), until = t0 + (int64_t)(seconds * 1e9);
    while (cdb_now_ns() < until) {
        char rel[64];
        snprintf(rel, sizeof rel, "more%03d", rounds);
        lu_path(more, sizeof more, rel);
        CHECK_EQ_INT(lu_generate(more, 1000 + (uint64_t)rounds, 1000 + rounds * 8, 8), 0);
        CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, more, "--quiet", NULL}, 0, NULL), 0);
        rounds++;
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < N_CLIENTS; i++) pthread_join(th[i], NULL);
    double el = (double)(cdb_now_ns() - t0) / 1e9;
    long long n = atomic_load(&g_n_lat) < MAX_SAMPLES ? atomic_load(&g_n_lat) : MAX_SAMPLES;
    qsort(g_lat_ms, (size_t)n, sizeof *g_lat_ms, cmp_f);
    printf("    %lld requests in %.1f s (%.0f/s) from %d clients, %lld errors; latency p50 %.1f ms, "
           "p99 %.1f ms; %d ingests of 8 photos meanwhile\n",
           (long long)atomic_load(&g_requests), el, (double)atomic_load(&g_requests) / el, N_CLIENTS,
           (long long)atomic_load(&g_errors), n ? (double)g_lat_ms[n / 2] : 0.0,
           n ? (double)g_lat_ms[(size_t)((double)n * 0.99)] : 0.0, rounds);
    CHECK_MSG(atomic_load(&g_errors) == 0, "%lld errors, the first %s", (long long)atomic_load(&g_errors),
              g_first_error);
    CHECK(atomic_load(&g_requests) > 100);
    CHECK(rounds >= 1);
    /* what was ingested while it served is there, without a restart */
    {
        su_resp r;
        char path[64];
        lu_img(more, 1000 + (rounds - 1) * 8 + 3, img, sizeof img);
        CHECK_EQ_INT(su_get(s.port, "/api/stats", &r), 0);
        json_error_t e;
        json_t *doc = json_loadb(r.body, r.len, 0, &e);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(doc, "files"), "ok")), 40 + rounds * 8);
        json_decref(doc);
        su_resp_free(&r);
        snprintf(path, sizeof path, "/api/search?q=a&k=%d", 40 + rounds * 8);
        CHECK_EQ_INT(su_get(s.port, path, &r), 0);
        {
            json_t *d2 = json_loadb(r.body, r.len, 0, &e);
            CHECK_MSG(r.status == 200 && strstr(r.body, img), "%s (ingested last) is not found in %zu results",
                      img, json_array_size(json_object_get(d2, "results")));
            json_decref(d2);
        }
        su_resp_free(&r);
    }
    CHECK_EQ_INT(su_stop(&s), 0);
    free(g_lat_ms);
}

CDB_TEST_MAIN_TMP(lu_tmp, lu_rm_rf, load_while_ingesting)
