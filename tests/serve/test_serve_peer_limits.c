/*
** test_serve_peer_limits.c: what a slow or lying peer can do to `clipdb serve --peer`,
** through the real binary on loopback, against a peer the test plays itself (a socket
** on 127.0.0.1 that answers searches with what the test says and sends photos one byte
** at a time):
** - a slow peer holds at most half the request threads: with --threads 2, while one
**   proxied original trickles, a second gets 503 with Retry-After at once, /healthz and
**   a search (this server's part, "peers_busy") are answered within a second or two, and
**   the trickle is cut by the low-speed limit within the peer timeout plus a little
**   (before: 20 s, and both threads held);
** - the front checks again what the peer's hits claim: the oracle is the filters applied
**   by the test itself to the hits it sent (score >= min_score, path under `under`, a
**   position with has_gps, the first of each (db, id)); the response has exactly those,
**   and counts the rest in "dropped".
*/
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>

#include "serve_util.h"

static char g_empty[PATH_MAX];
static int g_ready;

static int setup(void) {
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0) return -1;
    lu_path(g_empty, sizeof g_empty, "empty.db");
    if (lu_init(g_empty)) return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the peer ------------------------------------------------------------------------------ */

static const char *volatile g_search_body = "{\"results\": []}"; /* its /api/search answer */
static atomic_int g_trickling; /* photo answers being trickled now */
static int g_peer_fd = -1;

/* Reads a request's head and its body (Content-Length) from c; the head into buf. */
static void read_request(int c, char *buf, size_t cap) {
    size_t n = 0;
    long body = 0;
    char *end = NULL;
    buf[0] = '\0';
    while (n + 1 < cap && !(end = strstr(buf, "\r\n\r\n"))) {
        ssize_t got = recv(c, buf + n, cap - 1 - n, 0);
        if (got <= 0) return;
        n += (size_t)got;
        buf[n] = '\0';
    }
    if (!end) return;
    const char *cl = strstr(buf, "Content-Length:"); /* as libcurl writes it */
    if (cl) body = atol(cl + 15);
    body -= (long)(n - (size_t)(end + 4 - buf));
    while (body > 0) { /* read so that closing the socket never resets the answer */
        char sink[4096];
        ssize_t got = recv(c, sink, sizeof sink, 0);
        if (got <= 0) return;
        body -= got;
    }
}

static void *peer_conn(void *ud) {
    int c = (int)(intptr_t)ud;
    char req[16384];
    read_request(c, req, sizeof req);
    if (!strncmp(req, "POST ", 5)) {
        su_send_answer(c, "application/json",
                       strstr(req, "/api/copies_of") ? "{\"files\": []}" : g_search_body);
    } else { /* a photo: a million bytes announced, one sent every 250 ms */
        const char *h = "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n"
                        "Content-Length: 1000000\r\nConnection: close\r\n\r\n";
        atomic_fetch_add(&g_trickling, 1);
        if (su_send_all(c, h, strlen(h)) == 0)
            for (int i = 0; i < 160; i++) {
                struct timespec ts = {0, 250 * 1000000L};
                if (send(c, "x", 1, MSG_NOSIGNAL) != 1) break;
                nanosleep(&ts, NULL);
            }
        atomic_fetch_sub(&g_trickling, 1);
    }
    close(c);
    return NULL;
}

static void *peer_run(void *ud) {
    (void)ud;
    for (;;) {
        pthread_t t;
        int c = accept(g_peer_fd, NULL, NULL);
        if (c < 0) return NULL;
        if (pthread_create(&t, NULL, peer_conn, (void *)(intptr_t)c) == 0) pthread_detach(t);
        else close(c);
    }
}

/* Starts the peer; its URL into url. 0 or -1. */
static int peer_start(pthread_t *t, char *url, size_t cap) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    g_peer_fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (g_peer_fd < 0 || bind(g_peer_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(g_peer_fd, 64) != 0 || getsockname(g_peer_fd, (struct sockaddr *)&sa, &len) != 0 ||
        pthread_create(t, NULL, peer_run, NULL) != 0)
        return -1;
    snprintf(url, cap, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    return 0;
}

static void peer_stop(pthread_t t) {
    shutdown(g_peer_fd, SHUT_RDWR);
    close(g_peer_fd);
    pthread_join(t, NULL);
}

/* ---- a slow peer --------------------------------------------------------------------------- */

typedef struct timed_get {
    int port;
    const char *path;
    int status;
    int64_t ms;
} timed_get;

static void *timed_get_run(void *ud) {
    timed_get *g = ud;
    int64_t t0 = now_ms();
    g->status = su_get_status(g->port, g->path);
    g->ms = now_ms() - t0;
    return NULL;
}

CDB_TEST(slow_peer_holds_half_the_threads) {
    NEED_SETUP();
    su_server front;
    pthread_t pt, t1;
    char url[64], ra[32];
    su_resp r;
    json_t *doc;
    int64_t t0;
    timed_get first = {0, "/api/peer/0/file/1?db=0", 0, 0};
    CHECK_EQ_INT(peer_start(&pt, url, sizeof url), 0);
    CHECK_EQ_INT(su_start(&front, (const char *[]){"--db", g_empty, "--quiet", "--threads", "2",
                                                   "--peer", url, "--peer-timeout", "2000",
                                                   NULL}),
                 0);
    g_search_body = "{\"results\": []}";
    /* a search first: the model is loaded before anything is timed */
    CHECK_EQ_INT(su_get_status(front.port, "/api/search?q=red&k=3&collapse=0"), 200);
    first.port = front.port;
    CHECK(pthread_create(&t1, NULL, timed_get_run, &first) == 0);
    for (int i = 0; i < 500 && atomic_load(&g_trickling) == 0; i++) usleep(10000);
    CHECK_EQ_INT(atomic_load(&g_trickling), 1); /* one thread waits on the peer now */

    /* the gate is full (2 threads: 1 may wait): a second original is refused at once */
    t0 = now_ms();
    CHECK_EQ_INT(su_get(front.port, "/api/peer/0/file/2?db=0", &r), 0);
    CHECK_MSG(now_ms() - t0 < 1000, "the second proxy took %lld ms", (long long)(now_ms() - t0));
    CHECK_EQ_INT(r.status, 503);
    CHECK(su_header(&r, "Retry-After", ra, sizeof ra) && atoi(ra) >= 1);
    su_resp_free(&r);
    CHECK_EQ_INT(atomic_load(&g_trickling), 1); /* it never reached the peer */

    t0 = now_ms();
    CHECK_EQ_INT(su_get_status(front.port, "/healthz"), 200);
    CHECK_MSG(now_ms() - t0 < 1000, "/healthz took %lld ms", (long long)(now_ms() - t0));

    /* a search: this server's part, at once, the peer missing because the gate is full */
    t0 = now_ms();
    CHECK_EQ_INT(su_get(front.port, "/api/search?q=red&k=3&collapse=0", &r), 0);
    CHECK_MSG(now_ms() - t0 < 2000, "the search took %lld ms", (long long)(now_ms() - t0));
    CHECK_EQ_INT(r.status, 200);
    CHECK((doc = su_json(&r)) != NULL);
    CHECK(json_is_true(json_object_get(doc, "peers_busy")));
    CHECK(json_is_true(json_object_get(doc, "partial")));
    json_decref(doc);
    su_resp_free(&r);

    /* the trickle (4 bytes a second) is cut by the low-speed limit: a 502 within the
    ** peer timeout and a second or two more, not the 10x timeout of before */
    pthread_join(t1, NULL);
    CHECK_EQ_INT(first.status, 502);
    CHECK_MSG(first.ms < 2000 + 2500, "the trickling original took %lld ms",
              (long long)first.ms);

    /* the gate is free again: the peer is asked */
    CHECK_EQ_INT(su_get(front.port, "/api/search?q=red&k=3&collapse=0", &r), 0);
    CHECK((doc = su_json(&r)) != NULL);
    CHECK(json_is_false(json_object_get(doc, "peers_busy")));
    CHECK(json_is_false(json_object_get(doc, "partial")));
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&front), 0);
    peer_stop(pt);
}

/* ---- a peer that ignores the filters ------------------------------------------------------- */

typedef struct sent_hit {
    long long id;
    int db;
    double score;
    const char *path;
    int gps;
} sent_hit;

/* What the peer answers to every search: low scores, paths elsewhere, ids again. */
static const sent_hit k_sent[] = {
    {1, 0, 0.95, "/lib/photos/a.jpg", 1},    {1, 0, 0.95, "/lib/photos/a.jpg", 1},
    {2, 0, -1.0, "/lib/photos/b.jpg", 1},    {3, 0, 0.99, "/etc/passwd", 1},
    {1, 1, 0.93, "/lib/photos/c.jpg", 0},    {4, 0, 0.97, "/lib/photos/d.jpg", 0},
    {1, 0, 0.96, "/lib/photos/a2.jpg", 1},   {5, 0, 0.999, "/lib/photosX/e.jpg", 1},
    {6, 0, 0.9, "/lib/photos/sub/f.jpg", 1}, {7, 0, 0.5, "/lib/photos/g.jpg", 1},
};
#define N_SENT (int)(sizeof k_sent / sizeof k_sent[0])

/* The oracle: the hits of k_sent that pass (score >= min_score, path beginning with
** under, a position when has_gps), the first of each (db, id), as "id db path\n" lines in
** order of score (then as sent); *n_pass their count. */
static char *expected(double min_score, const char *under, int has_gps, int *n_pass) {
    int keep[N_SENT], n = 0;
    char *out = calloc(1, 4096);
    size_t o = 0;
    for (int i = 0; i < N_SENT; i++) {
        int dup = 0;
        for (int j = 0; j < i; j++) /* the first of an id in the answer, passing or not */
            dup |= k_sent[j].id == k_sent[i].id && k_sent[j].db == k_sent[i].db &&
                   k_sent[j].score >= min_score && !strncmp(k_sent[j].path, under, strlen(under)) &&
                   (!has_gps || k_sent[j].gps);
        if (dup || k_sent[i].score < min_score || strncmp(k_sent[i].path, under, strlen(under)) ||
            (has_gps && !k_sent[i].gps))
            continue;
        keep[n++] = i;
    }
    for (int a = 1; a < n; a++) /* insertion sort by score, stable */
        for (int b = a; b > 0 && k_sent[keep[b]].score > k_sent[keep[b - 1]].score; b--) {
            int t = keep[b];
            keep[b] = keep[b - 1];
            keep[b - 1] = t;
        }
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(out + o, 4096 - o, "%lld %d %s\n", k_sent[keep[i]].id,
                              k_sent[keep[i]].db, k_sent[keep[i]].path);
    *n_pass = n;
    return out;
}

/* The response's hits as expected() writes them. */
static char *got_hits(json_t *doc) {
    json_t *res = json_object_get(doc, "results");
    char *out = calloc(1, 4096);
    size_t o = 0;
    for (size_t i = 0; i < json_array_size(res); i++) {
        json_t *x = json_array_get(res, i);
        o += (size_t)snprintf(out + o, 4096 - o, "%lld %lld %s\n",
                              (long long)json_integer_value(json_object_get(x, "id")),
                              (long long)json_integer_value(json_object_get(x, "peer_db")),
                              json_string_value(json_object_get(x, "path")));
    }
    return out;
}

CDB_TEST(peer_hits_pass_the_filters) {
    NEED_SETUP();
    static const struct {
        const char *query;
        double min_score;
        const char *under;
        int has_gps;
    } cases[] = {
        {"&min_score=0.9&under=/lib/photos/", 0.9, "/lib/photos/", 0},
        {"&min_score=0.9&under=/lib/photos", 0.9, "/lib/photos", 0},
        {"&under=/lib/photos/&has_gps=1", -1.0, "/lib/photos/", 1},
        {"", -1.0, "", 0},
    };
    static char body[8192];
    su_server front;
    pthread_t pt;
    char url[64];
    size_t o = (size_t)snprintf(body, sizeof body, "{\"results\": [");
    for (int i = 0; i < N_SENT; i++)
        o += (size_t)snprintf(body + o, sizeof body - o,
                              "%s{\"id\": %lld, \"db\": %d, \"score\": %.17g, \"path\": \"%s\"%s}",
                              i ? ", " : "", k_sent[i].id, k_sent[i].db, k_sent[i].score,
                              k_sent[i].path,
                              k_sent[i].gps ? ", \"lat\": 48.1, \"lon\": 11.5" : "");
    snprintf(body + o, sizeof body - o, "]}");
    g_search_body = body;
    CHECK_EQ_INT(peer_start(&pt, url, sizeof url), 0);
    CHECK_EQ_INT(su_start(&front, (const char *[]){"--db", g_empty, "--quiet", "--peer", url,
                                                   NULL}),
                 0);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int collapse = 0; collapse < 2; collapse++) {
            char q[256], *want, *got;
            int n_pass = 0;
            su_resp r;
            json_t *doc;
            snprintf(q, sizeof q, "/api/search?q=red&k=20&collapse=%d%s", collapse,
                     cases[c].query);
            CHECK_EQ_INT(su_get(front.port, q, &r), 0);
            CHECK_EQ_INT(r.status, 200);
            CHECK((doc = su_json(&r)) != NULL);
            CHECK(json_is_false(json_object_get(doc, "partial")));
            want = expected(cases[c].min_score, cases[c].under, cases[c].has_gps, &n_pass);
            got = got_hits(doc);
            CHECK_MSG(!strcmp(got, want), "%s:\ngot\n%swant\n%s", q, got, want);
            CHECK_EQ_INT((int)json_integer_value(json_object_get(doc, "dropped")),
                         N_SENT - n_pass);
            free(want);
            free(got);
            json_decref(doc);
            su_resp_free(&r);
        }
    CHECK_EQ_INT(su_stop(&front), 0);
    peer_stop(pt);
    g_search_body = "{\"results\": []}";
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, slow_peer_holds_half_the_threads, peer_hits_pass_the_filters);
    int rc = cdb_test_run_(tests, CDB_TEST_N(tests), argc, argv);
    if (lu_tmp[0] && rc == 0) lu_rm_rf(lu_tmp);
    return rc;
}
