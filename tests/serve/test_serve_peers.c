/*
** test_serve_peers.c: `clipdb serve` over several databases and over peers (issue 29
** part 3), through the real binary on loopback. The oracle is a server of one database
** built of all the roots (the encoder is batch-invariant: the same vectors), and the
** files' own bytes:
** - serve --db A --db B --db C answers random searches (q, k, offset, min_score, under,
**   sort, taken_after) with the oracle's hits and scores; each hit's file URL (?db=N)
**   gives the bytes of the file at its path; a photo route without db= is refused.
** - three servers as peers (A, B, C) behind a front over an empty database: the same.
**   A peer's own peers are not followed (the front asks for its databases alone).
**   A peer stopped: "partial", it named in "missing", the rest the oracle's hits
**   without its root's. A peer that accepts and never answers: the answer comes within
**   the --peer-timeout, the rest correct. A hostile peer (garbage, a 24 MiB answer,
**   wrong scores, paths with ../, too many hits, a hit that is not an object, copy
**   facts of wrong lengths, not base64, NaN halves, a huge vector): the front answers,
**   at most k hits, only well-formed ones, its memory bounded, and a peer's photo is only
**   ever fetched from that peer's fixed routes; collapsed, its /api/copies_of answer
**   (garbage) leaves it "partial" after its hits came.
*/
#include <limits.h>
#include <pthread.h>

#include "serve_util.h"

#define N_PER_ROOT 12

static char g_root[3][PATH_MAX], g_db[3][PATH_MAX], g_all[PATH_MAX], g_empty[PATH_MAX];
static su_server g_oracle, g_multi, g_peer[3], g_front;
static int g_ready;
static uint64_t g_rng = 2929;

static uint32_t rnd(uint32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33) % n;
}

static int start_front(su_server *s, const char *db, const char *const *peers, int n,
                       const char *timeout_ms) {
    const char *args[32] = {"--db", db, "--quiet", "--peer-timeout", timeout_ms};
    char urls[8][64];
    int k = 5;
    for (int i = 0; i < n; i++) {
        snprintf(urls[i], sizeof urls[i], "%s", peers[i]);
        args[k++] = "--peer";
        args[k++] = urls[i];
    }
    args[k] = NULL;
    return su_start(s, args);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void peer_url(const su_server *s, char *buf, size_t cap) {
    snprintf(buf, cap, "http://127.0.0.1:%d", s->port);
}

static int setup(void) {
    char name[PATH_MAX], copy[PATH_MAX + 40], urls[3][64];
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0) return -1;
    for (int r = 0; r < 3; r++) {
        lu_path(g_root[r], sizeof g_root[r], r == 0 ? "a" : r == 1 ? "b" : "c");
        if (lu_generate(g_root[r], 2990 + (uint64_t)r, r * N_PER_ROOT, N_PER_ROOT)) return -1;
        for (int i = 0; i < N_PER_ROOT; i++) /* file times a few hours apart, many equal */
            if (lu_set_mtime(lu_img(g_root[r], r * N_PER_ROOT + i, name, sizeof name),
                             1714521600000000000LL + (int64_t)rnd(5) * 3600000000000LL))
                return -1;
    }
    /* the same bytes in two databases (equal scores: the tie order across them) */
    snprintf(copy, sizeof copy, "%s/copy%s", g_root[2], strrchr(lu_img(g_root[0], 1, name,
                                                                        sizeof name), '.'));
    if (lu_copy(name, copy)) return -1;
    for (int r = 0; r < 3; r++) {
        snprintf(g_db[r], sizeof g_db[r], "%s.db", g_root[r]);
        if (lu_db_of(g_db[r], (const char *[]){g_root[r], NULL}, 0)) return -1;
    }
    lu_path(g_all, sizeof g_all, "all.db");
    lu_path(g_empty, sizeof g_empty, "empty.db");
    if (lu_db_of(g_all, (const char *[]){g_root[0], g_root[1], g_root[2], NULL}, 0) ||
        lu_init(g_empty))
        return -1;
    if (su_start(&g_oracle, (const char *[]){"--db", g_all, "--quiet", NULL}) ||
        su_start(&g_multi, (const char *[]){"--db", g_db[2], "--db", g_db[0], "--db", g_db[1],
                                             "--quiet", NULL}))
        return -1;
    for (int r = 0; r < 3; r++) {
        if (su_start(&g_peer[r], (const char *[]){"--db", g_db[r], "--quiet", NULL})) return -1;
        peer_url(&g_peer[r], urls[r], sizeof urls[r]);
    }
    if (start_front(&g_front, g_empty, (const char *[]){urls[1], urls[0], urls[2]}, 3, "5000"))
        return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)

/* A random /api/search query string into buf (k + offset <= 40: the oracle is asked
** for every photo and cut by the test). */
static void random_query(char *buf, size_t cap, int *k, int *offset) {
    static const char *const words[] = {"red", "blue+circle", "a+green+square", "star",
                                        "triangle", "stripes", "yellow"};
    static const char *const sorts[] = {"score", "time", "taken", "taken-asc"};
    int n;
    *k = 1 + (int)rnd(10);
    *offset = (int)rnd(8);
    n = snprintf(buf, cap, "/api/search?collapse=0&q=%s&k=%d&offset=%d", words[rnd(7)], *k, *offset);
    if (rnd(4) == 0) n += snprintf(buf + n, cap - (size_t)n, "&min_score=0.4");
    if (rnd(4) == 0) n += snprintf(buf + n, cap - (size_t)n, "&under=%s", g_root[rnd(3)]);
    if (rnd(3) == 0) n += snprintf(buf + n, cap - (size_t)n, "&sort=%s", sorts[rnd(4)]);
    if (rnd(4) == 0)
        snprintf(buf + n, cap - (size_t)n, "&taken_after=2024-05-01T%02u:00Z", rnd(5));
}

/* "path score" lines of an answer's results ("" when none), heap; NULL when it is not
** a search answer. */
static char *hits_of(const su_resp *r) {
    json_t *doc = su_json(r), *res = doc ? json_object_get(doc, "results") : NULL;
    size_t i, cap = 1;
    char *out;
    if (!json_is_array(res)) {
        json_decref(doc);
        return NULL;
    }
    for (i = 0; i < json_array_size(res); i++) cap += PATH_MAX + 40;
    if ((out = malloc(cap))) out[0] = '\0';
    for (i = 0; out && i < json_array_size(res); i++) {
        json_t *h = json_array_get(res, i);
        size_t n = strlen(out);
        snprintf(out + n, cap - n, "%s %.9g\n", json_string_value(json_object_get(h, "path")),
                 json_number_value(json_object_get(h, "score")));
    }
    json_decref(doc);
    return out;
}

/* The same request to server s and the oracle: the same hits and scores. */
static int same_as_oracle(const su_server *s, const char *q) {
    su_resp a, b;
    char *x = NULL, *y = NULL;
    int ok;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ok = su_get(s->port, q, &a) == 0 && su_get(g_oracle.port, q, &b) == 0 &&
             a.status == 200 && b.status == 200 && (x = hits_of(&a)) && (y = hits_of(&b)) &&
             !strcmp(x, y);
    if (!ok)
        fprintf(stderr, "    %s\n    got (%d):\n%s\n    oracle:\n%s\n", q, a.status,
                x ? x : a.body, y ? y : "");
    free(x);
    free(y);
    su_resp_free(&a);
    su_resp_free(&b);
    return ok;
}

CDB_TEST(several_databases_equal_all_roots) {
    NEED_SETUP();
    char q[PATH_MAX + 200];
    for (int t = 0; t < 30; t++) {
        int k, off;
        random_query(q, sizeof q, &k, &off);
        CHECK(same_as_oracle(&g_multi, q));
    }
}

/* Each hit's file is its database's: the bytes at its path; ids need their db. */
CDB_TEST(several_databases_files_by_db) {
    NEED_SETUP();
    su_resp r, f;
    json_t *doc, *res;
    int n_checked = 0;
    CHECK_EQ_INT(su_get(g_multi.port, "/api/search?collapse=0&q=red&k=40", &r), 0);
    CHECK((doc = su_json(&r)) != NULL);
    res = json_object_get(doc, "results");
    CHECK_EQ_INT((int)json_array_size(res), 3 * N_PER_ROOT + 1);
    for (size_t i = 0; i < json_array_size(res); i++) {
        json_t *h = json_array_get(res, i);
        const char *path = json_string_value(json_object_get(h, "path"));
        const char *file = json_string_value(json_object_get(h, "file"));
        int db = (int)json_integer_value(json_object_get(h, "db"));
        char bare[64];
        size_t n = 0;
        char *want = cli_read_file(path, &n);
        CHECK(strstr(file, "?db=") != NULL);
        CHECK_EQ_INT(su_get(g_multi.port, file, &f), 0);
        CHECK_EQ_INT(f.status, 200);
        CHECK(want && f.len == n && !memcmp(f.body, want, n));
        /* the database given to serve as db: --db C --db A --db B */
        CHECK(!strncmp(path, g_root[db == 0 ? 2 : db - 1], strlen(g_root[0])));
        su_resp_free(&f);
        free(want);
        snprintf(bare, sizeof bare, "/api/file/%lld",
                 (long long)json_integer_value(json_object_get(h, "id")));
        CHECK_EQ_INT(su_get_status(g_multi.port, bare), 400); /* which database's? */
        n_checked++;
    }
    CHECK(n_checked > 0);
    CHECK_EQ_INT(su_get_status(g_multi.port, "/api/thumb/1?db=3"), 400);
    CHECK_EQ_INT(su_get_status(g_multi.port, "/api/thumb/1?db=-1"), 400);
    json_decref(doc);
    su_resp_free(&r);
}

CDB_TEST(peers_equal_all_roots) {
    NEED_SETUP();
    char q[PATH_MAX + 200];
    su_resp r;
    json_t *doc;
    for (int t = 0; t < 30; t++) {
        int k, off;
        random_query(q, sizeof q, &k, &off);
        CHECK(same_as_oracle(&g_front, q));
    }
    CHECK_EQ_INT(su_get(g_front.port, "/api/search?collapse=0&q=blue&k=40", &r), 0);
    CHECK((doc = su_json(&r)) != NULL);
    CHECK(json_is_false(json_object_get(doc, "partial")));
    CHECK_EQ_INT((int)json_array_size(json_object_get(doc, "missing")), 0);
    for (size_t i = 0; i < json_array_size(json_object_get(doc, "results")); i++) {
        json_t *h = json_array_get(json_object_get(doc, "results"), i);
        const char *file = json_string_value(json_object_get(h, "file"));
        const char *path = json_string_value(json_object_get(h, "path"));
        su_resp f;
        size_t n = 0;
        char *want = cli_read_file(path, &n);
        /* a peer's photo comes through the front, from that peer */
        CHECK(!strncmp(file, "/api/peer/", 10) && json_object_get(h, "peer"));
        CHECK_EQ_INT(su_get(g_front.port, file, &f), 0);
        CHECK_EQ_INT(f.status, 200);
        CHECK(want && f.len == n && !memcmp(f.body, want, n));
        su_resp_free(&f);
        free(want);
    }
    CHECK_EQ_INT(su_get_status(g_front.port, "/api/peer/3/file/1"), 404);
    CHECK_EQ_INT(su_get_status(g_front.port, "/api/peer/0/etc/1"), 404);
    CHECK_EQ_INT(su_get_status(g_front.port, "/api/peer/0/file/..%2f1"), 404);
    json_decref(doc);
    su_resp_free(&r);
}

/* The oracle's hits for q (all of them: k=40) outside root `skip` (-1: none) and inside
** root `only` (-1: any), paged as offset/k: the answer of the databases that remain. */
static char *oracle_without(const char *words, int skip, int only, int k, int offset) {
    char q[256];
    su_resp r;
    char *all, *out, *line;
    int i = 0;
    size_t o = 0;
    snprintf(q, sizeof q, "/api/search?collapse=0&q=%s&k=40", words);
    if (su_get(g_oracle.port, q, &r) != 0 || !(all = hits_of(&r))) return NULL;
    su_resp_free(&r);
    out = calloc(1, strlen(all) + 1);
    for (line = strtok(all, "\n"); out && line; line = strtok(NULL, "\n")) {
        if (skip >= 0 && !strncmp(line, g_root[skip], strlen(g_root[skip]))) continue;
        if (only >= 0 && strncmp(line, g_root[only], strlen(g_root[only]))) continue;
        if (i++ < offset || i > offset + k) continue;
        o += (size_t)sprintf(out + o, "%s\n", line);
    }
    free(all);
    return out;
}

/* The hits of answer r are exactly the oracle's of oracle_without(words, -1, only, k, offset). */
static void check_hits_are_oracle(cdb_test_ctx *cdb_t_, const su_resp *r, const char *words,
                                  int only, int k, int offset) {
    char *got = hits_of(r), *want = oracle_without(words, -1, only, k, offset);
    CHECK(got && want);
    CHECK_EQ_STR(got, want);
    free(got);
    free(want);
}

/* A front whose peers are A and a peer that fails (stopped, or hanging): partial, the
** failed one named, the rest exactly A's part of the oracle, within the timeout. */
static void check_partial(cdb_test_ctx *cdb_t_, const su_server *front, const char *bad_url,
                          int only, int max_ms) {
    for (int t = 0; t < 4; t++) {
        static const char *const words[] = {"red", "blue+circle", "star", "stripes"};
        char q[256];
        su_resp r;
        json_t *doc, *miss;
        int64_t t0 = now_ms();
        snprintf(q, sizeof q, "/api/search?collapse=0&q=%s&k=5&offset=%d", words[t], t);
        CHECK_EQ_INT(su_get(front->port, q, &r), 0);
        CHECK(now_ms() - t0 < max_ms);
        CHECK_EQ_INT(r.status, 200);
        CHECK((doc = su_json(&r)) != NULL);
        CHECK(json_is_true(json_object_get(doc, "partial")));
        miss = json_object_get(doc, "missing");
        CHECK_EQ_INT((int)json_array_size(miss), 1);
        CHECK_EQ_STR(json_string_value(json_array_get(miss, 0)), bad_url);
        check_hits_are_oracle(cdb_t_, &r, words[t], only, 5, t);
        json_decref(doc);
        su_resp_free(&r);
    }
}

CDB_TEST(peer_down_is_partial) {
    NEED_SETUP();
    su_server front, peer_c;
    char a[64], c[64];
    CHECK_EQ_INT(su_start(&peer_c, (const char *[]){"--db", g_db[2], "--quiet", NULL}), 0);
    peer_url(&g_peer[0], a, sizeof a);
    peer_url(&peer_c, c, sizeof c);
    CHECK_EQ_INT(start_front(&front, g_empty, (const char *[]){a, c}, 2, "3000"), 0);
    CHECK_EQ_INT(su_stop(&peer_c), 0); /* down: the connection is refused */
    check_partial(cdb_t_, &front, c, 0, 3000);
    CHECK_EQ_INT(su_stop(&front), 0);
}

/* A socket that listens (the kernel accepts) and never answers. */
CDB_TEST(peer_hanging_is_cut_at_the_timeout) {
    NEED_SETUP();
    su_server front;
    char a[64], h[64];
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(fd, 64) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    peer_url(&g_peer[0], a, sizeof a);
    snprintf(h, sizeof h, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    CHECK_EQ_INT(start_front(&front, g_empty, (const char *[]){h, a}, 2, "700"), 0);
    check_partial(cdb_t_, &front, h, 0, 700 + 1500); /* the timeout, and the search */
    CHECK_EQ_INT(su_stop(&front), 0);
    close(fd);
}

/* ---- a hostile peer ----------------------------------------------------------------------- */

static const char *g_hostile_body; /* what it answers now; NULL: 24 MiB of a JSON array */
static char g_many[300 * 64 + 64], g_bigvec[200 * 1024];
static int g_hostile_fd = -1;

static void *hostile_run(void *ud) {
    (void)ud;
    for (;;) {
        char req[65536];
        int c = accept(g_hostile_fd, NULL, NULL);
        if (c < 0) return NULL;
        ssize_t got = recv(c, req, sizeof req, 0); /* the request: not looked at */
        (void)got;
        if (g_hostile_body) {
            su_send_answer(c, "application/json", g_hostile_body);
        } else { /* a huge answer: more than the front reads */
            static char chunk[65536];
            const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Connection: close\r\n\r\n{\"results\": [";
            memset(chunk, ' ', sizeof chunk);
            su_send_all(c, head, strlen(head));
            for (int i = 0; i < 384 && su_send_all(c, chunk, sizeof chunk) == 0; i++) {}
        }
        close(c);
    }
}

static long rss_kb(pid_t pid) {
    char path[64], line[256];
    long kb = -1;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r"))) return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    fclose(f);
    return kb;
}

CDB_TEST(hostile_peer) {
    NEED_SETUP();
    static const struct {
        const char *body;
        int partial, max_hits;
    } cases[] = {
        {"not json at all", 1, 0},
        {"{\"results\": 7}", 1, 0},
        {"[1, 2, 3]", 1, 0},
        {"{\"results\": [{\"id\": 1, \"score\": 5.0, \"path\": \"/x\"},"
         " {\"id\": -3, \"score\": 0.9, \"path\": \"/y\"},"
         " {\"id\": 2, \"score\": \"0.9\", \"path\": \"/z\"},"
         " {\"id\": 3, \"score\": 0.99, \"path\": 12},"
         " 42, null,"
         " {\"id\": 4, \"score\": 0.999, \"path\": \"../../../../etc/passwd\", \"db\": 99999},"
         " {\"id\": 5, \"score\": -1e300, \"path\": \"/w\"},"
         " {\"id\": 6, \"score\": 0.9999, \"path\": \"/p\", \"peer\": \"http://e\"}]}",
         0, 1},
        /* a NUL in a string: jansson refuses the document */
        {"{\"results\": [{\"id\": 9, \"score\": 0.5, \"path\": \"/a\\u0000b\"}]}", 1, 0},
        {"{\"results\": [{\"id\": 9, \"score\": 1e-300, \"path\": \"/n\", \"width\": -5,"
         " \"mtime\": 1e30, \"taken_source\": \"evil\", \"lat\": 1e99}]}",
         0, 1},
        {NULL, 1, 0},
        {g_many, 0, 6}, /* 300 good hits for the 6 asked: 6 kept at most */
        /* copy facts (a collapsing front's): wrong lengths, not hex, not base64, halves
        ** that are NaN and infinity, a huge vector: the hits stay, the facts are dropped */
        {"{\"results\": [{\"id\": 7, \"score\": 0.5, \"path\": \"/f1\", \"copy_facts\":"
         " {\"hash\": \"zz\", \"phash\": 12, \"camera\": 5, \"vec\": \"!!!!\"}},"
         " {\"id\": 8, \"score\": 0.4, \"path\": \"/f2\", \"copy_facts\": {\"hash\":"
         " \"00112233445566778899aabbccddeeff\", \"phash\": \"ffffffffffffffff\","
         " \"vec\": \"AHwAfgA8\"}},"
         " {\"id\": 9, \"score\": 0.3, \"path\": \"/f3\", \"copy_facts\": [1, 2]}]}",
         0, 3},
        {g_bigvec, 0, 1},
    };
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    pthread_t t;
    su_server front;
    char a[64], h[64];
    long rss0;
    size_t o = (size_t)sprintf(g_many, "{\"results\": [");
    for (int i = 0; i < 300; i++)
        o += (size_t)sprintf(g_many + o, "%s{\"id\": %d, \"score\": 0.99, \"path\": \"/m%d\"}",
                             i ? ", " : "", i + 1, i);
    sprintf(g_many + o, "]}");
    o = (size_t)sprintf(g_bigvec, "{\"results\": [{\"id\": 1, \"score\": 0.5, \"path\": \"/b\","
                                  " \"copy_facts\": {\"vec\": \"");
    memset(g_bigvec + o, 'A', sizeof g_bigvec - o - 16);
    strcpy(g_bigvec + sizeof g_bigvec - 16, "\"}}]}");
    g_hostile_fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(g_hostile_fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
          listen(g_hostile_fd, 64) == 0 &&
          getsockname(g_hostile_fd, (struct sockaddr *)&sa, &len) == 0);
    CHECK(pthread_create(&t, NULL, hostile_run, NULL) == 0);
    peer_url(&g_peer[0], a, sizeof a);
    snprintf(h, sizeof h, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    CHECK_EQ_INT(start_front(&front, g_empty, (const char *[]){a, h}, 2, "3000"), 0);
    rss0 = rss_kb(front.pid);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        su_resp r;
        json_t *doc, *res;
        int n_hostile = 0;
        g_hostile_body = cases[i].body;
        CHECK_EQ_INT(su_get(front.port, "/api/search?collapse=0&q=red&k=6", &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK(r.len < 64 * 1024); /* six hits */
        CHECK((doc = su_json(&r)) != NULL);
        CHECK_MSG(json_is_true(json_object_get(doc, "partial")) == cases[i].partial, "case %zu",
                  i);
        res = json_object_get(doc, "results");
        CHECK(json_array_size(res) <= 6);
        for (size_t j = 0; j < json_array_size(res); j++) {
            json_t *x = json_array_get(res, j);
            const char *peer = json_string_value(json_object_get(x, "peer"));
            double sc = json_number_value(json_object_get(x, "score"));
            CHECK(sc >= -1.0 && sc <= 1.0);
            if (peer && !strcmp(peer, h)) {
                char file[128];
                n_hostile++;
                /* its photo is asked of it, by id, on its fixed route: a 502 here (the
                ** hostile peer answers JSON to everything), never a local file */
                snprintf(file, sizeof file, "%s",
                         json_string_value(json_object_get(x, "file")));
                CHECK(!strncmp(file, "/api/peer/1/file/", 17));
                g_hostile_body = "{}";
                CHECK_EQ_INT(su_get_status(front.port, file), 502);
                g_hostile_body = cases[i].body;
            }
        }
        CHECK(n_hostile <= cases[i].max_hits);
        json_decref(doc);
        su_resp_free(&r);
        CHECK_EQ_INT(su_get_status(front.port, "/healthz"), 200);
    }
    /* the 24 MiB answer was cut at the front's cap: not held */
    CHECK(rss_kb(front.pid) < rss0 + 64 * 1024);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        su_resp r;
        json_t *doc;
        g_hostile_body = cases[i].body;
        /* collapsed: its /api/copies_of answer (the same body) is no such answer, so it is
        ** missing after its hits came: "partial", at most k hits all the same */
        CHECK_EQ_INT(su_get(front.port, "/api/search?q=red&k=6", &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK(r.len < 64 * 1024);
        CHECK((doc = su_json(&r)) != NULL);
        CHECK_MSG(json_is_true(json_object_get(doc, "partial")), "collapsed, case %zu", i);
        CHECK(json_array_size(json_object_get(doc, "results")) <= 6);
        json_decref(doc);
        su_resp_free(&r);
        CHECK_EQ_INT(su_get_status(front.port, "/healthz"), 200);
    }
    CHECK_EQ_INT(su_stop(&front), 0);
    shutdown(g_hostile_fd, SHUT_RDWR);
    close(g_hostile_fd);
    pthread_join(t, NULL);
}

/* A front asks its peers for their own databases only ("peers": false): a peer's peers
** are not followed (their ids are not the peer's to serve), and a hit an answer marks
** as a peer's is dropped. */
CDB_TEST(peer_of_a_peer_is_not_followed) {
    NEED_SETUP();
    su_server mid, front;
    char a[64], m[64];
    su_resp r;
    json_t *doc;
    peer_url(&g_peer[0], a, sizeof a);
    CHECK_EQ_INT(start_front(&mid, g_db[1], (const char *[]){a}, 1, "3000"), 0);
    peer_url(&mid, m, sizeof m);
    CHECK_EQ_INT(start_front(&front, g_empty, (const char *[]){m}, 1, "3000"), 0);
    CHECK_EQ_INT(su_get(front.port, "/api/search?collapse=0&q=red&k=7&offset=2", &r), 0);
    CHECK((doc = su_json(&r)) != NULL);
    CHECK(json_is_false(json_object_get(doc, "partial")));
    check_hits_are_oracle(cdb_t_, &r, "red", 1, 7, 2); /* B's alone: mid's own database */
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&front), 0);
    CHECK_EQ_INT(su_stop(&mid), 0);
}

/* Bad peer options are usage errors (or refused before serving). */
CDB_TEST(peer_options) {
    NEED_SETUP();
    cli_run_result r;
    CHECK_EQ_INT(lu_run((const char *[]){"serve", "--db", g_db[0], "--peer", "ftp://x",
                                         "--port", "0", NULL},
                        &r),
                 1);
    CHECK(strstr(r.err, "http://") != NULL);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_run((const char *[]){"serve", "--db", g_db[0], "--peer-token-file", "/x",
                                         "--port", "0", NULL},
                        &r),
                 2);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_run((const char *[]){"serve", "--db", g_db[0], "--peer", "http://a",
                                         "--peer-timeout", "0", "--port", "0", NULL},
                        &r),
                 2);
    cli_run_free(&r);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, several_databases_equal_all_roots, several_databases_files_by_db,
                  peers_equal_all_roots, peer_down_is_partial, peer_hanging_is_cut_at_the_timeout,
                  hostile_peer, peer_of_a_peer_is_not_followed, peer_options);
    int rc = cdb_test_run_(tests, CDB_TEST_N(tests), argc, argv);
    su_stop(&g_oracle);
    su_stop(&g_multi);
    su_stop(&g_front);
    for (int i = 0; i < 3; i++) su_stop(&g_peer[i]);
    if (lu_tmp[0] && rc == 0) lu_rm_rf(lu_tmp);
    return rc;
}
