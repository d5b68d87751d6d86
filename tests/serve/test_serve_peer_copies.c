/*
** test_serve_peer_copies.c: copies collapsed across `clipdb serve --peer` servers (issue
** 28 with issue 29's peers), through the real binary on loopback. Three servers, each of
** one root of lu_copy_fixtures (pictures with exact and near copies in another root and
** exact ones in their own), behind a front over an empty database. The oracle is a
** server of one database of all three roots: random collapsed searches through the
** front give its hits, score bits and each hit's copies (as paths; a copy on a peer named
** by "copies_peer" and "copies_db", mapped to its path by that peer's own answer).
** The test fails with the front's collapse off (each peer's copies shown apart): the
** check that copies on other servers were met is part of it. A crowd split across the
** servers (N_CROWD flat pictures, each its own bytes, a third on each: crowded only when
** all are counted together, dupes.h's CDB_DUPES_CROWD) is near nothing on the oracle, and
** must be so through the front, whose peers each see too few of them to tell (fails when
** the front decides crowdedness per server). Fronts whose copies closure may take one
** round, or keep one file past the hits, say that they stopped there
** ("copies_truncated", "copies_bound").
*/
#include <limits.h>

#include "serve_util.h"

static char g_root[3][PATH_MAX], g_db[3][PATH_MAX], g_all[PATH_MAX], g_empty[PATH_MAX];
static char g_url[3][64];
static su_server g_oracle, g_peer[3], g_front;
static int g_ready;
static uint64_t g_rng = 2828;

enum { N_CROWD = 75, N_FILES = 30 + N_CROWD }; /* lu_copy_fixtures' 30 */

/* N_CROWD flat pictures, a third in each root, each its own colour (no exact copies):
** their phashes are all one (a flat image's), so they are a crowd, of the union only.
** Two are near copies (two reds a shade apart, on two servers): one database of all
** never groups them (crowded); a front deciding the crowd per server, over the few
** files its closure meets (the others: blue, green, grey, cyan, near neither), would. */
static int write_crowd(void) {
    char p[PATH_MAX + 64];
    for (int i = 0; i < N_CROWD; i++) {
        size_t n = 0;
        unsigned char *b = lu_ppm(96, 72, 1, &n), c[3], *px;
        int v = 100 + i;
        if (!b) return -1;
        if (i < 2)
            c[0] = (unsigned char)(200 + 5 * i), c[1] = 30, c[2] = 30;
        else if (i % 4 == 0)
            c[0] = 30, c[1] = 30, c[2] = (unsigned char)v;
        else if (i % 4 == 1)
            c[0] = 30, c[1] = (unsigned char)v, c[2] = 30;
        else if (i % 4 == 2)
            c[0] = c[1] = c[2] = (unsigned char)v;
        else
            c[0] = 30, c[1] = c[2] = (unsigned char)v;
        px = b + n - 96 * 72 * 3;
        for (int k = 0; k < 96 * 72; k++) memcpy(px + 3 * k, c, 3);
        snprintf(p, sizeof p, "%s/flat%02d.ppm", g_root[i % 3], i);
        int rc = lu_write(p, b, n);
        free(b);
        if (rc) return -1;
    }
    return 0;
}

static uint32_t rnd(uint32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33) % n;
}

static int setup(void) {
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0 || lu_copy_fixtures(g_root, g_db, g_all) != 0 || write_crowd()) return -1;
    for (int r = 0; r < 4; r++)
        if (lu_expect((const char *[]){"reindex", "--db", r < 3 ? g_db[r] : g_all, NULL}, 0,
                      NULL))
            return -1;
    lu_path(g_empty, sizeof g_empty, "empty.db");
    if (lu_init(g_empty) || su_start(&g_oracle, (const char *[]){"--db", g_all, "--quiet", NULL}))
        return -1;
    for (int r = 0; r < 3; r++) {
        if (su_start(&g_peer[r], (const char *[]){"--db", g_db[r], "--quiet", NULL})) return -1;
        snprintf(g_url[r], sizeof g_url[r], "http://127.0.0.1:%d", g_peer[r].port);
    }
    /* the peers in another order than the roots' */
    if (su_start(&g_front, (const char *[]){"--db", g_empty, "--quiet", "--peer", g_url[2],
                                            "--peer", g_url[0], "--peer", g_url[1], NULL}))
        return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)

/* The path of photo id on server port (every photo's, from one uncollapsed search of
** all), heap; NULL when it has none. */
static char *path_on(int port, int64_t id) {
    su_resp r;
    json_t *doc, *res;
    char *out = NULL;
    if (su_get(port, "/api/search?collapse=0&q=red&k=1000", &r)) return NULL;
    doc = su_json(&r);
    res = doc ? json_object_get(doc, "results") : NULL;
    for (size_t i = 0; i < json_array_size(res) && !out; i++) {
        json_t *h = json_array_get(res, i);
        if (json_integer_value(json_object_get(h, "id")) == id)
            out = strdup(json_string_value(json_object_get(h, "path")));
    }
    json_decref(doc);
    su_resp_free(&r);
    return out;
}

/* The port of the peer whose URL is url (the front's copies name them so); -1. */
static int peer_port(const char *url) {
    for (int r = 0; r < 3; r++)
        if (url && !strcmp(url, g_url[r])) return g_peer[r].port;
    return -1;
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hit h's copies as sorted paths, one per line (heap): ids of the server at port, or,
** with "copies_peer", of the peer named. *cross += the copies on another server. */
static char *copy_paths(json_t *h, int port, int *cross) {
    json_t *ids = json_object_get(h, "copies"), *peers = json_object_get(h, "copies_peer");
    size_t n = json_array_size(ids), cap = 1;
    char **v = calloc(n + 1, sizeof *v), *out;
    const char *own = json_string_value(json_object_get(h, "peer"));
    for (size_t i = 0; v && i < n; i++) {
        const char *url = peers ? json_string_value(json_array_get(peers, i)) : NULL;
        int at = peers ? peer_port(url) : port;
        *cross += peers && (!url || !own || strcmp(url, own));
        v[i] = at < 0 ? NULL : path_on(at, json_integer_value(json_array_get(ids, i)));
        if (!v[i]) v[i] = strdup("?");
        cap += strlen(v[i]) + 1;
    }
    if (v && n > 1) qsort(v, n, sizeof *v, str_cmp);
    if ((out = malloc(cap))) out[0] = '\0';
    for (size_t i = 0; v && out && i < n; i++) strcat(strcat(out, v[i]), "\n");
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
    return out;
}

/* "path score\n  copies..." for each hit of an answer (heap), NULL when it is not a
** search answer; *cross as copy_paths counts. */
static char *hits_of(const su_resp *r, int port, int *cross, int *n_hits) {
    json_t *doc = su_json(r), *res = doc ? json_object_get(doc, "results") : NULL;
    size_t cap = 1;
    char *out = NULL;
    if (json_is_array(res) && (out = malloc(cap))) out[0] = '\0';
    for (size_t i = 0; out && i < json_array_size(res); i++) {
        json_t *h = json_array_get(res, i);
        char line[PATH_MAX + 64], *cp = copy_paths(h, port, cross), *o;
        snprintf(line, sizeof line, "%s %.9g\n", json_string_value(json_object_get(h, "path")),
                 json_number_value(json_object_get(h, "score")));
        cap += strlen(line) + (cp ? strlen(cp) : 0) + 8;
        if (!(o = realloc(out, cap))) {
            free(cp);
            free(out);
            out = NULL;
            break;
        }
        out = o;
        strcat(strcat(strcat(out, line), "copies:\n"), cp ? cp : "?");
        free(cp);
    }
    *n_hits = (int)json_array_size(res);
    json_decref(doc);
    return out;
}

static const char *const k_words[] = {"red", "blue", "green", "circle", "square", "star",
                                      "triangle", "stripes", "yellow", "a+red+circle"};

/* Random collapsed searches through the front equal the oracle's: hits, scores, copies. */
CDB_TEST(front_collapses_copies_across_peers) {
    NEED_SETUP();
    int cross = 0, ocross = 0, min_hits = 1 << 30;
    for (int t = 0; t < 40; t++) {
        char q[PATH_MAX + 200], *x = NULL, *y = NULL;
        int n = snprintf(q, sizeof q, "/api/search?q=%s&k=%d&offset=%d", k_words[rnd(10)],
                         1 + (int)rnd(t < 10 ? 40 : 8), (int)rnd(10)),
            na = 0, nb = 0;
        su_resp a, b;
        if (rnd(4) == 0) n += snprintf(q + n, sizeof q - (size_t)n, "&min_score=0.2");
        if (rnd(4) == 0) n += snprintf(q + n, sizeof q - (size_t)n, "&under=%s", g_root[rnd(3)]);
        if (rnd(4) == 0) snprintf(q + n, sizeof q - (size_t)n, "&sort=time");
        if (t == 0) snprintf(q, sizeof q, "/api/search?q=red&k=200"); /* the whole library */
        if (t == 1) snprintf(q, sizeof q, "/api/search?q=red&k=4"); /* the crowd's reds */
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        CHECK_EQ_INT(su_get(g_front.port, q, &a), 0);
        CHECK_EQ_INT(su_get(g_oracle.port, q, &b), 0);
        CHECK_EQ_INT(a.status, 200);
        CHECK_EQ_INT(b.status, 200);
        x = hits_of(&a, g_front.port, &cross, &na);
        y = hits_of(&b, g_oracle.port, &ocross, &nb);
        CHECK(x && y);
        if (x && y && strcmp(x, y))
            fprintf(stderr, "    %s\n    front:\n%s\n    oracle:\n%s\n", q, x, y);
        if (x && y) CHECK_EQ_STR(x, y);
        if (t == 0) min_hits = na;
        free(x);
        free(y);
        su_resp_free(&a);
        su_resp_free(&b);
    }
    /* copies on other servers were met, and collapsing took copies out (the crowd's
    ** files are each a hit of their own) */
    CHECK_MSG(cross > 10, "only %d copies on another server than their hit's", cross);
    CHECK_MSG(min_hits >= N_CROWD && min_hits <= N_FILES - 9, "%d collapsed hits of %d files",
              min_hits, N_FILES);
}

/* The closure's bounds: a front whose closure may take one round, or keep one file past
** the hits, says which bound it stopped at when a hit has copies on other servers; the
** full front's closure of the same search ends within its bounds. */
CDB_TEST(front_reports_the_closure_bounds) {
    NEED_SETUP();
    static const char *const env[2] = {"CLIPDB_TEST_COPIES_ROUNDS", "CLIPDB_TEST_COPIES_FILES"};
    static const char *const bound[2] = {"rounds", "files"};
    char q[64] = "";
    su_resp r;
    json_t *doc;
    for (int w = 0; w < 10 && !q[0]; w++) { /* a search whose best hit has copies */
        snprintf(q, sizeof q, "/api/search?q=%s&k=1", k_words[w]);
        CHECK_EQ_INT(su_get(g_front.port, q, &r), 0);
        CHECK((doc = su_json(&r)) != NULL);
        if (!json_array_size(json_object_get(json_array_get(json_object_get(doc, "results"), 0),
                                             "copies")))
            q[0] = '\0';
        else
            CHECK(json_is_false(json_object_get(doc, "copies_truncated")) &&
                  json_is_null(json_object_get(doc, "copies_bound")));
        json_decref(doc);
        su_resp_free(&r);
    }
    CHECK(q[0]);
    for (int b = 0; b < 2; b++) {
        su_server f;
        int rc;
        setenv(env[b], "1", 1); /* the front's process only */
        rc = su_start(&f, (const char *[]){"--db", g_empty, "--quiet", "--peer", g_url[0],
                                           "--peer", g_url[1], "--peer", g_url[2], NULL});
        unsetenv(env[b]);
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_INT(su_get(f.port, q, &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK((doc = su_json(&r)) != NULL);
        CHECK(json_is_true(json_object_get(doc, "copies_truncated")));
        CHECK_EQ_STR(json_string_value(json_object_get(doc, "copies_bound")), bound[b]);
        json_decref(doc);
        su_resp_free(&r);
        CHECK_EQ_INT(su_stop(&f), 0);
    }
}

/* An ordinary client of a peer sees no copy facts; the front's request gets them, each
** hit's vector the dim halves of its stored embedding. */
CDB_TEST(copy_facts_only_when_asked) {
    NEED_SETUP();
    su_resp r;
    json_t *doc, *h;
    CHECK_EQ_INT(su_get(g_peer[0].port, "/api/search?q=red&k=3", &r), 0);
    CHECK((doc = su_json(&r)) != NULL);
    h = json_array_get(json_object_get(doc, "results"), 0);
    CHECK(h && !json_object_get(h, "copy_facts"));
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(su_post_json(g_peer[0].port, "/api/search",
                              "{\"query\": \"red\", \"k\": 3, \"peers\": false, "
                              "\"copy_facts\": true}",
                              &r),
                 0);
    CHECK((doc = su_json(&r)) != NULL);
    h = json_array_get(json_object_get(doc, "results"), 0);
    json_t *f = json_object_get(h, "copy_facts");
    CHECK(json_is_object(f));
    CHECK_EQ_INT((int)strlen(json_string_value(json_object_get(f, "hash"))), 32);
    CHECK(json_is_string(json_object_get(f, "phash"))); /* reindex stored them */
    CHECK(json_is_string(json_object_get(f, "vec")));
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(su_post_json(g_peer[0].port, "/api/search",
                              "{\"query\": \"red\", \"copy_facts\": 1}", &r),
                 0);
    CHECK_EQ_INT(r.status, 400);
    su_resp_free(&r);
}

/* A peer stopped while the others answer: "partial", it named, the rest collapsed. */
CDB_TEST(front_with_a_peer_down) {
    NEED_SETUP();
    su_resp r;
    json_t *doc;
    su_stop(&g_peer[1]);
    CHECK_EQ_INT(su_get(g_front.port, "/api/search?q=blue&k=40", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK((doc = su_json(&r)) != NULL);
    CHECK(json_is_true(json_object_get(doc, "partial")));
    CHECK_EQ_STR(json_string_value(json_array_get(json_object_get(doc, "missing"), 0)), g_url[1]);
    CHECK((int)json_array_size(json_object_get(doc, "results")) > 0);
    json_decref(doc);
    su_resp_free(&r);
}

/* The servers stop cleanly (under ASan: without a leak or a report at exit). */
CDB_TEST(servers_exit_clean) {
    NEED_SETUP();
    CHECK_EQ_INT(su_stop(&g_front), 0);
    CHECK_EQ_INT(su_stop(&g_oracle), 0);
    for (int r = 0; r < 3; r++)
        if (g_peer[r].pid > 0) CHECK_EQ_INT(su_stop(&g_peer[r]), 0);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, front_collapses_copies_across_peers, front_reports_the_closure_bounds,
                  copy_facts_only_when_asked, front_with_a_peer_down, servers_exit_clean);
    int rc = cdb_test_run_(tests, CDB_TEST_N(tests), argc, argv);
    su_stop(&g_oracle);
    su_stop(&g_front);
    for (int i = 0; i < 3; i++) su_stop(&g_peer[i]); /* those a failed test left */
    if (lu_tmp[0] && rc == 0) lu_rm_rf(lu_tmp);
    return rc;
}
