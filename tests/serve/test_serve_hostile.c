/*
** test_serve_hostile.c: `clipdb serve` against clients that do not play along, and the
** API's answers to bad query text (the real binary on an ephemeral loopback port, over
** a generated library with the bundled model; skips, 77, without one).
**
**   header_deadline      a client trickling header lines (one every 300 ms, which the
**                        idle timeout never sees) is answered 408 and closed once
**                        --header-timeout passes; one trickling its body likewise after
**                        --body-timeout; others are served meanwhile
**   cors_star_needs_token --cors-origin '*' without --token-file: usage error (exit 2);
**                        with one it serves, and the preflight names '*'
**   session_cookie       the sign-in cookie is not the token (nor holds it), is
**                        HttpOnly + SameSite=Strict with a Max-Age; the token as a cookie
**                        is refused; a forged one too; it expires; sign-out ends it
**   bad_query_text       invalid UTF-8 or a NUL in a GET query: 400; a 1 MB URL: a JSON
**                        414; an image_id that is not an integer: 400; bad JSON bodies:
**                        400 in our words (nothing of jansson's)
**   sort_time_paging     sort=time pages, concatenated, equal a brute-force time sort of
**                        the whole result set (ids from sort=score, mtimes set apart)
**   under_same_as_cli    `under` gives the CLI's hits for a folder, a folder with a
**                        trailing slash, a file-name prefix and a path that is not there
*/
#include "serve/serve_util.h"

#define N_PHOTOS 36
#define N_SUB 8

static char g_lib[700], g_db[700];
static su_server g_srv;
static int g_ready;

static int setup(void) {
    char sub[800], img[900];
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0) return -1;
    lu_path(g_lib, sizeof g_lib, "photos");
    lu_path(g_db, sizeof g_db, "db");
    snprintf(sub, sizeof sub, "%s/sub", g_lib);
    if (lu_generate(g_lib, 11, 0, N_PHOTOS) != 0 || lu_generate(sub, 12, N_PHOTOS, N_SUB) != 0 ||
        lu_init(g_db) != 0)
        return -1;
    /* file times apart (whole minutes, shuffled): the time order has no ties */
    for (int i = 0; i < N_PHOTOS + N_SUB; i++) {
        int64_t t = 1600000000LL + (int64_t)((i * 17) % (N_PHOTOS + N_SUB)) * 60;
        lu_img(i < N_PHOTOS ? g_lib : sub, i, img, sizeof img);
        if (lu_set_mtime(img, t * 1000000000LL) != 0) return -1;
    }
    if (su_ingest_and_start(&g_srv, g_db, g_lib, "2") != 0) return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)


static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Sends pieces[] one every gap_ms until the server answers or closes: the ms it took,
** and its status in *status (0: closed without an answer). -1: still open after all. */
static int trickle(int fd, const char *const *pieces, int gap_ms, int *status) {
    int64_t t0 = cdb_now_ns();
    *status = 0;
    for (int i = 0; pieces[i]; i++) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (su_send_all(fd, pieces[i], strlen(pieces[i])) != 0 || poll(&pf, 1, gap_ms) == 1) {
            su_resp r;
            su_read_resp(fd, &r, 3000);
            *status = r.status < 0 ? -r.status : r.status;
            su_resp_free(&r);
            return (int)((cdb_now_ns() - t0) / 1000000);
        }
    }
    return -1;
}

CDB_TEST(header_deadline) {
    su_server s;
    su_resp r;
    const char *lines[80];
    int status, ms, fd;
    NEED_SETUP();
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--timeout", "30", "--header-timeout",
                                               "2", "--body-timeout", "2", NULL}), 0);
    /* headers: a line every 300 ms for up to 24 s */
    lines[0] = "GET /api/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    for (int i = 1; i < 79; i++) lines[i] = "X-Slow: 1\r\n";
    lines[79] = NULL;
    fd = su_connect(s.port);
    CHECK(fd >= 0);
    ms = trickle(fd, lines, 300, &status);
    close(fd);
    CHECK_MSG(ms >= 1500 && ms < 6000, "cut after %d ms (deadline 2 s)", ms);
    CHECK_EQ_INT(status, 408);
    /* a body: Content-Length 200, a byte every 300 ms */
    {
        const char *body[80];
        body[0] = "POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: 200\r\n\r\n{";
        for (int i = 1; i < 79; i++) body[i] = " ";
        body[79] = NULL;
        fd = su_connect(s.port);
        ms = trickle(fd, body, 300, &status);
        close(fd);
        CHECK_MSG(ms >= 1500 && ms < 6000, "body cut after %d ms (deadline 2 s)", ms);
        CHECK_EQ_INT(status, 408);
    }
    /* a kept-alive connection still serves request after request */
    fd = su_connect(s.port);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(su_request_on(fd, "GET", "/healthz", NULL, NULL, 0, &r, 10000), 0);
        CHECK_EQ_INT(r.status, 200);
        su_resp_free(&r);
        sleep_ms(500);
    }
    close(fd);
    CHECK_EQ_INT(su_stop(&s), 0);
}

CDB_TEST(cors_star_needs_token) {
    cli_run_result cr;
    char tok[800], v[200];
    su_server s;
    su_resp r;
    NEED_SETUP();
    CHECK_EQ_INT(lu_run((const char *[]){"serve", "--db", g_db, "--port", "0", "--cors-origin", "*", NULL}, &cr), 2);
    CHECK_MSG(strstr(cr.err, "--token-file") != NULL, "stderr: %s", cr.err);
    cli_run_free(&cr);
    lu_path(tok, sizeof tok, "cors-token.txt");
    CHECK_EQ_INT(lu_write(tok, "a-token-of-some-length-0123456789\n", 34), 0);
    chmod(tok, 0600);
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--cors-origin", "*", "--token-file", tok, NULL}), 0);
    CHECK_EQ_INT(su_request(s.port, "OPTIONS", "/knn-service", NULL, NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 204);
    CHECK(su_header(&r, "Access-Control-Allow-Origin", v, sizeof v) && !strcmp(v, "*"));
    su_resp_free(&r);
    CHECK_EQ_INT(su_post_json(s.port, "/knn-service", "{\"text\": \"a circle\"}", &r), 0);
    CHECK_EQ_INT(r.status, 401);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&s), 0);
    /* a named origin needs no token (loopback) */
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--cors-origin", "http://localhost:3000", NULL}), 0);
    CHECK_EQ_INT(su_stop(&s), 0);
}

/* POST /api/login with secret: the cookie's "name=value" in out ("" when none). */
static int login(int port, const char *secret, char *set_cookie, size_t size) {
    char body[300];
    su_resp r;
    int st;
    snprintf(body, sizeof body, "{\"token\": \"%s\"}", secret);
    set_cookie[0] = '\0';
    if (su_post_json(port, "/api/login", body, &r) != 0) return -1;
    st = r.status;
    if (!su_header(&r, "Set-Cookie", set_cookie, size)) set_cookie[0] = '\0';
    su_resp_free(&r);
    return st;
}

static int get_with_cookie(int port, const char *path, const char *cookie) {
    char hdr[600];
    su_resp r;
    int st;
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", cookie);
    if (su_request(port, "GET", path, hdr, NULL, 0, &r) != 0) return -1;
    st = r.status;
    su_resp_free(&r);
    return st;
}

CDB_TEST(session_cookie) {
    const char *secret = "session-test-token-0123456789abcdef";
    char tok[800], set[400], cookie[400], forged[400], hdr[600];
    su_server s;
    su_resp r;
    NEED_SETUP();
    lu_path(tok, sizeof tok, "session-token.txt");
    CHECK_EQ_INT(lu_write(tok, secret, strlen(secret)), 0);
    chmod(tok, 0600);
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--token-file", tok, "--session-ttl", "3", NULL}), 0);
    CHECK_EQ_INT(login(s.port, "wrong-wrong-wrong-wrong", set, sizeof set), 401);
    CHECK_EQ_INT(set[0], 0);
    CHECK_EQ_INT(login(s.port, secret, set, sizeof set), 200);
    CHECK_MSG(!strncmp(set, "clipdb_session=", 15), "Set-Cookie: %s", set);
    CHECK(strstr(set, "HttpOnly") && strstr(set, "SameSite=Strict") && strstr(set, "Max-Age=3"));
    CHECK_MSG(!strstr(set, secret), "the cookie holds the token: %s", set);
    snprintf(cookie, sizeof cookie, "%.*s", (int)(strchr(set, ';') - set), set);
    CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", cookie), 200);
    CHECK_EQ_INT(su_get_status(s.port, "/api/stats"), 401);
    /* the token itself as a cookie, under either name, is not a session */
    snprintf(forged, sizeof forged, "clipdb_session=%s", secret);
    CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", forged), 401);
    snprintf(forged, sizeof forged, "clipdb_token=%s", secret);
    CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", forged), 401);
    /* a later expiry with the same MAC: refused */
    {
        const char *v = cookie + 15;
        snprintf(forged, sizeof forged, "clipdb_session=9%s", v);
        CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", forged), 401);
    }
    /* /api/session knows */
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", cookie);
    CHECK_EQ_INT(su_request(s.port, "GET", "/api/session", hdr, NULL, 0, &r), 0);
    CHECK(r.body && strstr(r.body, "\"signed_in\":true") && strstr(r.body, "\"token_required\":true"));
    su_resp_free(&r);
    /* sign-out: the cookie is dropped and the session is void even if it is sent again */
    CHECK_EQ_INT(su_request(s.port, "POST", "/api/logout", hdr, "", 0, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(su_header(&r, "Set-Cookie", set, sizeof set) && strstr(set, "Max-Age=0"));
    su_resp_free(&r);
    CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", cookie), 401);
    /* expiry: a new session works, then stops after its 3 s */
    CHECK_EQ_INT(login(s.port, secret, set, sizeof set), 200);
    snprintf(cookie, sizeof cookie, "%.*s", (int)(strchr(set, ';') - set), set);
    CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", cookie), 200);
    sleep_ms(4200);
    CHECK_EQ_INT(get_with_cookie(s.port, "/api/stats", cookie), 401);
    /* the bearer token still works for programs */
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", secret);
    CHECK_EQ_INT(su_request(s.port, "GET", "/api/stats", hdr, NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&s), 0);
}

/* The error document of r: its code checked, its message free of jansson's words. */
static void check_error(cdb_test_ctx *cdb_t_, const char *what, const su_resp *r, int status) {
    char v[200];
    json_t *doc = su_json(r);
    const char *msg = json_string_value(json_object_get(json_object_get(doc, "error"), "message"));
    CHECK_MSG(r->status == status, "%s: status %d, want %d (%.200s)", what, r->status, status,
              r->body ? r->body : "");
    CHECK_MSG(msg != NULL, "%s: not a JSON error: %.200s", what, r->body ? r->body : "");
    CHECK_MSG(su_header(r, "Content-Type", v, sizeof v) && strstr(v, "application/json"),
              "%s: Content-Type %s", what, v);
    if (msg)
        CHECK_MSG(!strstr(msg, " near ") && !strstr(msg, "expected") && !strstr(msg, "JSON_") &&
                      !strstr(msg, "'['") && !strstr(msg, "wrong arguments"),
                  "%s: jansson's words reach the user: %s", what, msg);
    json_decref(doc);
}

CDB_TEST(bad_query_text) {
    su_resp r;
    NEED_SETUP();
    static const struct {
        const char *path;
        int status;
    } gets[] = {
        {"/api/search?q=%FF%FEcat", 400},       {"/api/search?q=caf%C3", 400},
        {"/api/search?q=a%00b", 400},           {"/api/search?text=a%00", 400},
        {"/api/search?q%00x=a", 400},           {"/api/search?q=a&under=%2Fx%FF", 400},
        {"/api/search?image_id=abc", 400},      {"/api/search?image_id=1.5", 400},
        {"/api/search?image_id=1e3", 400},      {"/api/search?image_id=-3", 400},
        {"/api/search?image_id=", 400},         {"/api/search?image_id=99999999", 404},
        {"/api/search?q=caf%C3%A9", 200},
    };
    for (size_t i = 0; i < sizeof gets / sizeof gets[0]; i++) {
        CHECK_EQ_INT(su_get(g_srv.port, gets[i].path, &r), 0);
        if (gets[i].status == 200) CHECK_MSG(r.status == 200, "%s: %d", gets[i].path, r.status);
        else check_error(cdb_t_, gets[i].path, &r, gets[i].status);
        su_resp_free(&r);
    }
    /* a 1 MB URL: a JSON 414, and the server goes on */
    {
        size_t n = 1000000;
        char *url = malloc(n + 64);
        int fd;
        CHECK(url != NULL);
        strcpy(url, "GET /api/search?q=");
        memset(url + 18, 'a', n);
        strcpy(url + 18 + n, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        fd = su_connect(g_srv.port);
        CHECK_EQ_INT(su_send_all(fd, url, strlen(url)), 0);
        CHECK_EQ_INT(su_read_resp(fd, &r, 30000), 0);
        check_error(cdb_t_, "1 MB URL", &r, 414);
        su_resp_free(&r);
        close(fd);
        free(url);
        CHECK_EQ_INT(su_get_status(g_srv.port, "/healthz"), 200);
    }
    /* bodies: our words, not the parser's */
    static const struct {
        const char *path, *body;
        int status;
    } posts[] = {
        {"/api/search", "{not json", 400},         {"/api/search", "[1, 2]", 400},
        {"/api/search", "{\"query\": \"a\"} x", 400}, {"/api/search", "", 400},
        {"/api/search", "{\"query\": \"a\\u0000b\"}", 400},
        {"/api/search", "{\"query\": \"a\", \"query\": \"b\"}", 400},
        {"/api/search", "{\"image_id\": \"7\"}", 400}, {"/api/search", "{\"image_id\": 1.5}", 400},
        {"/api/search", "{\"image_id\": [1, \"x\"]}", 400},
        {"/knn-service", "{\"text\": ", 400},     {"/metadata", "nope", 400},
        {"/api/login", "{\"token\": }", 400},
    };
    for (size_t i = 0; i < sizeof posts / sizeof posts[0]; i++) {
        char what[200];
        snprintf(what, sizeof what, "POST %s %s", posts[i].path, posts[i].body);
        CHECK_EQ_INT(su_post_json(g_srv.port, posts[i].path, posts[i].body, &r), 0);
        check_error(cdb_t_, what, &r, posts[i].status);
        su_resp_free(&r);
    }
    /* invalid UTF-8 inside a JSON body */
    CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search", "{\"query\": \"\xff\xfe\"}", &r), 0);
    check_error(cdb_t_, "body not UTF-8", &r, 400);
    su_resp_free(&r);
}

/* GET path: the results' ids and mtimes (count, or -1). */
static int page(int port, const char *path, int64_t *ids, int64_t *mtimes, int cap) {
    su_resp r;
    json_t *doc, *res;
    int n = 0;
    if (su_get(port, path, &r) != 0 || r.status != 200) {
        fprintf(stderr, "    %s: status %d %.200s\n", path, r.status, r.body ? r.body : "");
        su_resp_free(&r);
        return -1;
    }
    doc = su_json(&r);
    res = json_object_get(doc, "results");
    for (size_t i = 0; i < json_array_size(res) && n < cap; i++, n++) {
        ids[n] = json_integer_value(json_object_get(json_array_get(res, i), "id"));
        mtimes[n] = json_integer_value(json_object_get(json_array_get(res, i), "mtime"));
    }
    json_decref(doc);
    su_resp_free(&r);
    return n;
}

typedef struct idt {
    int64_t id, t;
} idt;

static int by_time_desc(const void *a, const void *b) {
    const idt *x = a, *y = b;
    if (x->t != y->t) return x->t > y->t ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

CDB_TEST(sort_time_paging) {
    static const char *queries[] = {"a%20red%20circle", "image_id=3", "a%20square&min_score=0.1"};
    int64_t ids[200], ts[200], pid[64], pt[64];
    idt all[200];
    char path[300];
    NEED_SETUP();
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
        const char *qs = queries[q];
        int n, got = 0;
        /* the whole result set, by score; then sorted by time here */
        snprintf(path, sizeof path, "/api/search?%s%s&k=1000", strncmp(qs, "image_id", 8) ? "q=" : "", qs);
        n = page(g_srv.port, path, ids, ts, 200);
        CHECK_MSG(n > 10, "%s: %d hits", path, n);
        if (n <= 10) continue;
        for (int i = 0; i < n; i++) all[i] = (idt){ids[i], ts[i]};
        qsort(all, (size_t)n, sizeof *all, by_time_desc);
        for (int off = 0; off < n + 7; off += 7) {
            snprintf(path, sizeof path, "/api/search?%s%s&k=7&offset=%d&sort=time",
                     strncmp(qs, "image_id", 8) ? "q=" : "", qs, off);
            int m = page(g_srv.port, path, pid, pt, 64);
            CHECK_MSG(m == (n - off < 7 ? (n - off > 0 ? n - off : 0) : 7), "%s: %d hits", path, m);
            for (int i = 0; i < m && off + i < n; i++)
                CHECK_MSG(pid[i] == all[off + i].id, "%s: hit %d is %lld, want %lld (t %lld vs %lld)",
                          path, i, (long long)pid[i], (long long)all[off + i].id, (long long)pt[i],
                          (long long)all[off + i].t);
            got += m > 0 ? m : 0;
        }
        CHECK_EQ_INT(got, n);
    }
}

/* `clipdb search QUERY --under U -k 50 --json` ids vs the API's for under=abs. */
static void same_under(cdb_test_ctx *cdb_t_, const char *cli_under, const char *api_under) {
    const char *args[] = {"search", "--db", g_db, "--json", "a red circle", "-k", "50", "--under",
                          cli_under, NULL};
    cli_run_result cr;
    json_error_t e;
    int64_t ia[64], ta[64];
    char path[1500], enc[1200];
    int na, nb = 0;
    int64_t ib[64];
    CHECK_EQ_INT(lu_expect(args, 0, &cr), 0);
    json_t *doc = json_loads(cr.out, 0, &e), *hits = json_object_get(doc, "hits");
    for (size_t i = 0; i < json_array_size(hits) && nb < 64; i++)
        ib[nb++] = json_integer_value(json_object_get(json_array_get(hits, i), "id"));
    json_decref(doc);
    cli_run_free(&cr);
    snprintf(path, sizeof path, "/api/search?q=a%%20red%%20circle&k=50&under=%s",
             su_urlenc(api_under, enc, sizeof enc));
    na = page(g_srv.port, path, ia, ta, 64);
    CHECK_MSG(na == nb, "under %s: %d hits from the API, %d from the CLI", api_under, na, nb);
    for (int i = 0; i < na && i < nb; i++) CHECK_EQ_INT(ia[i], ib[i]);
}

CDB_TEST(under_same_as_cli) {
    char a[900], b[900];
    NEED_SETUP();
    snprintf(a, sizeof a, "%s/sub", g_lib);
    same_under(cdb_t_, a, a);
    snprintf(b, sizeof b, "%s/sub/", g_lib);
    same_under(cdb_t_, b, b);
    snprintf(a, sizeof a, "%s/img_000001", g_lib); /* a prefix of file names (README's) */
    same_under(cdb_t_, a, a);
    snprintf(a, sizeof a, "%s/su", g_lib);         /* not a folder: a plain prefix */
    same_under(cdb_t_, a, a);
    snprintf(a, sizeof a, "%s/nowhere", g_lib);
    same_under(cdb_t_, a, a);
    same_under(cdb_t_, g_lib, g_lib);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, header_deadline, cors_star_needs_token, session_cookie, bad_query_text,
                  sort_time_paging, under_same_as_cli);
    return su_main(tests, CDB_TEST_N(tests), argc, argv, &g_srv);
}
