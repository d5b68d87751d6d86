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
**   and counts the rest in "dropped";
** - a peer that claims the copy facts of the front's photos (which the front sends it to
**   find their copies) never hides them: the front's answers equal its own database's;
** - a peer that answers every exchange just in time holds a search for 2x the peer
**   timeout at most (before: 25 exchanges), then is missing.
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

/* What the peer answers a POST: */
enum {
    PEER_FIXED, /* g_search_body to a search, no files to /api/copies_of */
    PEER_HIDE,  /* learns the copy facts a front asks /api/copies_of about (g_learned), and
                   answers a search with hits at score 1.0 that claim them (g_n_spam) */
    PEER_SLOW   /* answers each POST after g_delay_ms: a search's k hits all copies of one
                   photo (the front asks for 4x more), /api/copies_of a new copy each time
                   (the front asks again) */
};
static const char *volatile g_search_body = "{\"results\": []}"; /* its /api/search answer */
static atomic_int g_mode, g_delay_ms, g_n_spam, g_n_copies;
static json_t *g_learned; /* PEER_HIDE: the facts learned (under g_learn_mu) */
static pthread_mutex_t g_learn_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_trickling; /* photo answers being trickled now */
static int g_peer_fd = -1;

/* Reads a request's head (into buf) and its body (Content-Length) from c: into *body
** (heap, NUL-terminated) when body is not NULL, else read and dropped. */
static void read_request(int c, char *buf, size_t cap, char **body) {
    size_t n = 0, have = 0;
    long want = 0;
    char *end = NULL, *b = NULL;
    buf[0] = '\0';
    while (n + 1 < cap && !(end = strstr(buf, "\r\n\r\n"))) {
        ssize_t got = recv(c, buf + n, cap - 1 - n, 0);
        if (got <= 0) return;
        n += (size_t)got;
        buf[n] = '\0';
    }
    if (!end) return;
    const char *cl = strstr(buf, "Content-Length:"); /* as libcurl writes it */
    if (cl) want = atol(cl + 15);
    if (want < 0 || want > (16L << 20)) return;
    if (strcasestr(buf, "\r\nExpect: 100-continue")) /* libcurl waits a second for it */
        su_send_all(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    have = n - (size_t)(end + 4 - buf);
    if (body && (b = calloc((size_t)want + 1, 1))) memcpy(b, end + 4, have);
    while ((long)have < want) { /* read so that closing the socket never resets the answer */
        char sink[4096];
        ssize_t got = recv(c, sink, sizeof sink, 0);
        if (got <= 0 || (long)have + got > want) break;
        if (b) memcpy(b + have, sink, (size_t)got);
        have += (size_t)got;
    }
    if (body) *body = b;
}

/* PEER_HIDE: the items of a /api/copies_of request learned (each once). */
static void learn(json_t *req) {
    json_t *items = json_object_get(req, "items");
    pthread_mutex_lock(&g_learn_mu);
    for (size_t i = 0; i < json_array_size(items); i++) {
        int known = 0;
        for (size_t j = 0; j < json_array_size(g_learned) && !known; j++)
            known = json_equal(json_array_get(g_learned, j), json_array_get(items, i));
        if (!known) json_array_append(g_learned, json_array_get(items, i));
    }
    pthread_mutex_unlock(&g_learn_mu);
}

/* The one content hash the slow peer's photos claim. */
#define SLOW_HASH "00000000000000000000000000000007"

/* PEER_HIDE's and PEER_SLOW's search hit i (heap), claiming facts (taken). */
static json_t *lying_hit(long i, double score, json_t *facts) {
    char path[64];
    snprintf(path, sizeof path, "/peer/%s_%ld.jpg", score >= 1.0 ? "spam" : "p", i);
    return json_pack("{s:I,s:i,s:f,s:s,s:o}", "id", (json_int_t)(1000 + i), "db", 0, "score",
                     score, "path", path, "copy_facts", facts);
}

/* The answer (heap) of the PEER_HIDE or PEER_SLOW peer to a POST (its head, its body req). */
static char *lying_answer(const char *head, json_t *req) {
    int copies = strstr(head, "/api/copies_of") != NULL;
    int hide = atomic_load(&g_mode) == PEER_HIDE;
    long k = (long)json_integer_value(json_object_get(req, "k"));
    json_t *res = json_array(), *doc = json_object();
    char *out;
    if (copies && hide) learn(req);
    if (copies && !hide) { /* a new copy of the slow peer's photo each time */
        json_int_t id = 500000 + atomic_fetch_add(&g_n_copies, 1);
        json_array_append_new(res, json_pack("{s:I,s:i,s:{s:s}}", "id", id, "db", 0,
                                             "copy_facts", "hash", SLOW_HASH));
    }
    pthread_mutex_lock(&g_learn_mu);
    for (long i = 0; !copies && i < k && (!hide || i < (long)json_array_size(g_learned)); i++) {
        json_t *facts = hide ? json_deep_copy(json_array_get(g_learned, (size_t)i))
                             : json_pack("{s:s}", "hash", SLOW_HASH);
        json_array_append_new(res, lying_hit(i, hide ? 1.0 : 0.99, facts));
    }
    pthread_mutex_unlock(&g_learn_mu);
    if (hide && !copies) atomic_fetch_add(&g_n_spam, (int)json_array_size(res));
    json_object_set_new(doc, copies ? "files" : "results", res);
    out = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return out;
}

static void *peer_conn(void *ud) {
    int c = (int)(intptr_t)ud;
    char req[16384], *body = NULL;
    read_request(c, req, sizeof req, &body);
    if (!strncmp(req, "POST ", 5) && atomic_load(&g_mode) != PEER_FIXED) {
        json_t *doc = json_loads(body ? body : "", 0, NULL);
        char *answer;
        usleep((useconds_t)atomic_load(&g_delay_ms) * 1000);
        if ((answer = lying_answer(req, doc))) su_send_answer(c, "application/json", answer);
        free(answer);
        json_decref(doc);
    } else if (!strncmp(req, "POST ", 5)) {
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
    free(body);
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

/* ---- a peer that claims the front's photos ------------------------------------------------- */

/* "path score" lines of an answer's hits (heap); *n_peer: its hits of a peer, *n_joined:
** those of the front that list a peer's file among their copies. NULL: not an answer. */
static char *own_lines(const su_resp *r, int *n_peer, int *n_joined) {
    json_t *doc = su_json(r), *res = doc ? json_object_get(doc, "results") : NULL;
    char *out = json_is_array(res) ? calloc(1, 64 + json_array_size(res) * (PATH_MAX + 32)) : NULL;
    size_t o = 0;
    for (size_t i = 0; out && i < json_array_size(res); i++) {
        json_t *h = json_array_get(res, i), *cp = json_object_get(h, "copies_peer");
        int joined = 0;
        o += (size_t)sprintf(out + o, "%s %.9g\n", json_string_value(json_object_get(h, "path")),
                             json_number_value(json_object_get(h, "score")));
        *n_peer += json_object_get(h, "peer") != NULL;
        for (size_t j = 0; j < json_array_size(cp); j++)
            joined |= json_is_string(json_array_get(cp, j)); /* a peer's URL, not null */
        *n_joined += joined;
    }
    json_decref(doc);
    return out;
}

/* A database of 40 generated photos (made once) into db. 0, or -1. */
static int photos_db(char *db, size_t cap) {
    static int made; /* 1 made, -1 failed */
    char lib[PATH_MAX];
    lu_path(lib, sizeof lib, "photos");
    lu_path(db, cap, "photos.db");
    if (!made) made = lu_generate_db(lib, 4141, 40, db, 0) == 0 ? 1 : -1;
    return made > 0 ? 0 : -1;
}

/* The oracle of a front over photos_db: its search for words (k, offset; `+` for spaces),
** collapsed, through the front (*got, heap) and of its own database alone ("peers":
** false; *want, heap), as own_lines writes them (counting as it does). The front's answer
** into *front when front is not NULL (heap: json_decref). 0, or -1. */
static int front_and_own(int port, const char *words, int k, int offset, char **got,
                         char **want, int *n_peer, int *n_joined, json_t **front) {
    char q[256], body[256];
    int own_peer = 0, own_joined = 0;
    su_resp a, b;
    snprintf(q, sizeof q, "/api/search?q=%s&k=%d&offset=%d", words, k, offset);
    snprintf(body, sizeof body, "{\"query\": \"%s\", \"k\": %d, \"offset\": %d, "
             "\"peers\": false}", words, k, offset);
    for (char *p = body; (p = strchr(p, '+'));) *p = ' ';
    *got = *want = NULL;
    if (su_get(port, q, &a) == 0 && su_post_json(port, "/api/search", body, &b) == 0) {
        *got = own_lines(&a, n_peer, n_joined);
        *want = own_lines(&b, &own_peer, &own_joined);
        if (front) *front = su_json(&a);
        su_resp_free(&b);
    }
    su_resp_free(&a);
    return *got && *want ? 0 : -1;
}

/* A peer that learns the copy facts the front sends it (POST /api/copies_of: its hits')
** and answers every search with hits at score 1.0 claiming them: before, the next searches
** showed only the peer's hits, the front's photos their "copies". The oracle is the
** front's own database asked without peers ("peers": false): every search through the
** front, collapsed, pages and queries the peer never saw included, gives exactly its hits
** and scores, the peer's claims joined under the front's photos (never the other way). */
CDB_TEST(peer_cannot_hide_own_photos) {
    NEED_SETUP();
    static const char *const words[] = {"red", "blue", "circle", "a+red+circle", "stripes",
                                        "green+square"};
    char db[PATH_MAX], url[64];
    su_server front;
    pthread_t pt;
    int n_peer = 0, n_joined = 0;
    CHECK_EQ_INT(photos_db(db, sizeof db), 0);
    g_learned = json_array();
    atomic_store(&g_mode, PEER_HIDE);
    CHECK_EQ_INT(peer_start(&pt, url, sizeof url), 0);
    CHECK_EQ_INT(su_start(&front, (const char *[]){"--db", db, "--quiet", "--peer", url, NULL}), 0);
    /* the peer learns the facts of the front's best hits of "red" */
    CHECK_EQ_INT(su_get_status(front.port, "/api/search?q=red&k=10"), 200);
    CHECK(json_array_size(g_learned) >= 10);
    for (int w = 0; w < 6; w++)
        for (int offset = 0; offset <= 6; offset += 3) {
            char *got, *want;
            CHECK_EQ_INT(front_and_own(front.port, words[w], 5, offset, &got, &want, &n_peer,
                                       &n_joined, NULL),
                         0);
            if (got && want)
                CHECK_MSG(!strcmp(got, want), "%s, offset %d:\ngot\n%swant\n%s", words[w],
                          offset, got, want);
            free(got);
            free(want);
        }
    CHECK_EQ_INT(n_peer, 0);                     /* no hit of the peer is shown */
    CHECK(atomic_load(&g_n_spam) >= 10 * 12);    /* though it claimed every page */
    CHECK_MSG(n_joined > 0, "no claim joined under a photo of the front");
    CHECK_EQ_INT(su_stop(&front), 0);
    peer_stop(pt);
    atomic_store(&g_mode, PEER_FIXED);
    json_decref(g_learned);
    g_learned = NULL;
}

/* ---- a peer just in time, every time --------------------------------------------------------- */

/* A peer that answers each exchange just within --peer-timeout, with hits that all collapse
** into one (so the front asks for 4x more, up to 1,000) and a new copy at each copies
** round (so the closure goes on), and all at score 0.99, above the front's photos: before,
** one search took ~25 exchanges (15 s here). Now a search waits on a peer 2x the timeout
** in all: the answer comes within it (and the search's own work), the peer "missing"
** (partial), and the rest answered: the front's own photos, as its database alone gives
** them ("peers": false, asked in the same way), since the peer's photos then come in none
** of the rounds the page is made of. */
CDB_TEST(slow_peer_has_one_time_per_search) {
    NEED_SETUP();
    su_server front;
    pthread_t pt;
    char db[PATH_MAX], url[64], *got = NULL, *want = NULL;
    json_t *doc = NULL;
    int64_t t0, ms;
    int n_peer = 0, n_joined = 0;
    CHECK_EQ_INT(photos_db(db, sizeof db), 0);
    atomic_store(&g_mode, PEER_SLOW);
    atomic_store(&g_delay_ms, 0);
    CHECK_EQ_INT(peer_start(&pt, url, sizeof url), 0);
    CHECK_EQ_INT(su_start(&front, (const char *[]){"--db", db, "--quiet", "--peer", url,
                                                   "--peer-timeout", "1000", NULL}),
                 0);
    /* a search first (at once): the model is loaded before anything is timed */
    CHECK_EQ_INT(su_get_status(front.port, "/api/search?q=red&k=10&collapse=0"), 200);
    atomic_store(&g_delay_ms, 600);
    t0 = now_ms();
    CHECK_EQ_INT(front_and_own(front.port, "red", 10, 0, &got, &want, &n_peer, &n_joined, &doc),
                 0);
    ms = now_ms() - t0; /* the front's search, and its database's alone (a few ms) */
    CHECK_MSG(ms < 2 * 1000 + 1500, "the search took %lld ms", (long long)ms);
    CHECK(doc != NULL);
    CHECK(json_is_true(json_object_get(doc, "partial")));
    CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(doc, "missing"), 0)), url);
    CHECK_MSG(!strcmp(got, want), "got\n%swant\n%s", got, want);
    json_decref(doc);
    free(got);
    free(want);
    atomic_store(&g_delay_ms, 0);
    CHECK_EQ_INT(su_stop(&front), 0);
    peer_stop(pt);
    atomic_store(&g_mode, PEER_FIXED);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, slow_peer_holds_half_the_threads, peer_hits_pass_the_filters,
                  peer_cannot_hide_own_photos, slow_peer_has_one_time_per_search);
    int rc = cdb_test_run_(tests, CDB_TEST_N(tests), argc, argv);
    if (lu_tmp[0] && rc == 0) lu_rm_rf(lu_tmp);
    return rc;
}
