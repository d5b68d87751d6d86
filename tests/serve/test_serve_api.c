/*
** test_serve_api.c: `clipdb serve` end to end: the real binary on an ephemeral
** loopback port, over a generated library with the bundled model (skips, 77, without
** one), spoken to with raw HTTP/1.1 (serve_util.h).
**
**   search_same_as_cli       GET/POST /api/search give the ids and scores `clipdb search
**                            --json` prints: the query language, literal text, --image
**   more_like_this_and_paging image_id ranks the photo first at ~1; offset pages agree
**                            with one big page; min_score, under, sort=time
**   thumbnails_and_originals JPEG thumbnails (long side <= the setting), ETag/304, the
**                            original's bytes and type; unknown/malformed ids 404
**   collapsed_copies_and_paging  copies (made here) are one hit with their ids; offset
**                            pages cut that one collapsed ordering; collapse=0 lists all
**   stats_folders_health     /api/stats, /api/folders, /healthz, the page and its files
**   duplicates_same_as_cli   /api/duplicates gives the groups `clipdb duplicates --json`
**                            prints (kinds, keeps, file ids), with thumbnail URLs;
**                            a bad kind is a 400
**   clip_retrieval           /indices-list, /knn-service (text, image, embedding_input,
**                            num_result_ids), /metadata
**   bad_input                400 malformed JSON / bad k / bad sort / query too long,
**                            404 unknown route, 405 method, 413 body cap, traversal
**   keep_alive               several requests on one connection
**   token                    --token-file: 401 without, 200 with Bearer or the login
**                            cookie; a public address without a token is refused;
**                            without a token a foreign Host header gets 403
**   connection_limits        over --max-connections: 503; idle connections time out
**   graceful_stop            SIGTERM lets a request in flight finish; exit 0
**   freshness                photos a concurrent ingest adds appear, deleted ones go,
**                            an index rebuilt by another process is used
**   readonly_database        served by a user who can only read it; a writer's later
**                            commits still appear
**   thumbnails_settings      reindex backfills lost thumbnails; --thumb-size 0 turns
**                            them off (404), another size remakes them
*/
#include "serve/serve_util.h"

static char g_lib[700], g_db[700];
static su_server g_srv;
static int g_ready;

#define N_PHOTOS 30

static int setup(void) {
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0) return -1;
    if (su_library(g_lib, g_db, 7, N_PHOTOS) != 0) return -1;
    if (su_ingest_and_start(&g_srv, g_db, g_lib, "4") != 0) return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)


/* The (id, score) pairs of the first cap hits in the JSON array hits; their count. */
static int id_score_pairs(const json_t *hits, int64_t *ids, double *scores, int cap) {
    int k = 0;
    for (size_t i = 0; i < json_array_size(hits) && k < cap; i++, k++) {
        ids[k] = json_integer_value(json_object_get(json_array_get(hits, i), "id"));
        scores[k] = json_number_value(json_object_get(json_array_get(hits, i), "score"));
    }
    return k;
}

/* `clipdb search ARGS --json` as (id, score) pairs. */
static int cli_hits(const char *const *args, int64_t *ids, double *scores, int cap) {
    const char *all[32] = {"search", "--db", g_db, "--json"};
    int n = 4, k;
    cli_run_result r;
    json_error_t e;
    for (int i = 0; args[i] && n < 31; i++) all[n++] = args[i];
    all[n] = NULL;
    if (lu_expect(all, 0, &r) != 0) {
        cli_run_free(&r);
        return -1;
    }
    json_t *doc = json_loads(r.out, 0, &e);
    k = id_score_pairs(json_object_get(doc, "hits"), ids, scores, cap);
    json_decref(doc);
    cli_run_free(&r);
    return k;
}

/* The API's results as (id, score) pairs; -1 when the status is not 200. */
static int api_hits(const su_resp *r, int64_t *ids, double *scores, int cap) {
    json_t *doc = su_json(r), *res = json_object_get(doc, "results");
    int k;
    if (r->status != 200 || !json_is_array(res)) {
        fprintf(stderr, "    status %d: %.300s\n", r->status, r->body ? r->body : "");
        json_decref(doc);
        return -1;
    }
    k = id_score_pairs(res, ids, scores, cap);
    json_decref(doc);
    return k;
}

static void check_same(cdb_test_ctx *cdb_t_, const char *what, int na, const int64_t *ia,
                       const double *sa, int nb, const int64_t *ib, const double *sb) {
    CHECK_MSG(na == nb && na > 0, "%s: %d hits from the API, %d from the CLI", what, na, nb);
    for (int i = 0; i < na && i < nb; i++) {
        CHECK_MSG(ia[i] == ib[i], "%s: hit %d is id %lld, the CLI's %lld", what, i, (long long)ia[i],
                  (long long)ib[i]);
        CHECK_MSG(sa[i] == sb[i], "%s: hit %d scores %.9g, the CLI %.9g", what, i, sa[i], sb[i]);
    }
}

CDB_TEST(search_same_as_cli) {
    static const char *queries[] = {"a red circle", "star + blue - square", "2*green triangle",
                                    "a circle - red"};
    int64_t ia[64], ib[64];
    double sa[64], sb[64];
    char path[2048], enc[1024], json[2048], img[900];
    su_resp r;
    NEED_SETUP();
    for (size_t q = 0; q < sizeof queries / sizeof queries[0]; q++) {
        int nb = cli_hits((const char *[]){queries[q], "-k", "12", NULL}, ib, sb, 64);
        snprintf(path, sizeof path, "/api/search?q=%s&k=12", su_urlenc(queries[q], enc, sizeof enc));
        CHECK_EQ_INT(su_get(g_srv.port, path, &r), 0);
        check_same(cdb_t_, queries[q], api_hits(&r, ia, sa, 64), ia, sa, nb, ib, sb);
        su_resp_free(&r);
        snprintf(json, sizeof json, "{\"query\": \"%s\", \"k\": 12}", queries[q]);
        CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search", json, &r), 0);
        check_same(cdb_t_, "POST query", api_hits(&r, ia, sa, 64), ia, sa, nb, ib, sb);
        su_resp_free(&r);
    }
    /* text is one term: "a - b" is searched as those words, not as a difference */
    {
        int nb = cli_hits((const char *[]){"a red circle", "-k", "5", NULL}, ib, sb, 64);
        CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search", "{\"text\": \"a red circle\", \"k\": 5}", &r), 0);
        check_same(cdb_t_, "POST text", api_hits(&r, ia, sa, 64), ia, sa, nb, ib, sb);
        su_resp_free(&r);
        CHECK_EQ_INT(su_get(g_srv.port, "/api/search?text=circle%20-%20red&k=5", &r), 0);
        int na = api_hits(&r, ia, sa, 64);
        su_resp_free(&r);
        nb = cli_hits((const char *[]){"circle - red", "-k", "5", NULL}, ib, sb, 64);
        CHECK(na == 5 && nb == 5 && (ia[0] != ib[0] || sa[0] != sb[0]));
    }
    /* an uploaded image: the same as --image */
    {
        size_t n = 0;
        char *bytes = cli_read_file(lu_img(g_lib, 3, img, sizeof img), &n), *b64 = NULL;
        static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        CHECK(bytes != NULL);
        b64 = malloc(n * 2 + 64);
        size_t o = (size_t)sprintf(b64, "{\"image\": \"");
        for (size_t i = 0; i < n; i += 3) {
            unsigned v = (unsigned char)bytes[i] << 16 | (i + 1 < n ? (unsigned char)bytes[i + 1] << 8 : 0) |
                         (i + 2 < n ? (unsigned char)bytes[i + 2] : 0);
            b64[o++] = tab[v >> 18 & 63];
            b64[o++] = tab[v >> 12 & 63];
            b64[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
            b64[o++] = i + 2 < n ? tab[v & 63] : '=';
        }
        o += (size_t)sprintf(b64 + o, "\", \"k\": 6}");
        int nb = cli_hits((const char *[]){"--image", img, "-k", "6", NULL}, ib, sb, 64);
        CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search", b64, &r), 0);
        check_same(cdb_t_, "POST image", api_hits(&r, ia, sa, 64), ia, sa, nb, ib, sb);
        su_resp_free(&r);
        free(bytes);
        free(b64);
    }
    /* the response's shape */
    CHECK_EQ_INT(su_get(g_srv.port, "/api/search?q=a%20red%20circle&k=2", &r), 0);
    {
        json_t *doc = su_json(&r), *h = json_array_get(json_object_get(doc, "results"), 0);
        char want[64];
        CHECK(json_is_string(json_object_get(doc, "model")));
        CHECK(json_is_number(json_object_get(doc, "took_ms")));
        static const char *keys[] = {"id", "path", "score", "width", "height", "mtime", "thumb", "file"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            CHECK_MSG(json_object_get(h, keys[i]) != NULL, "a result without \"%s\"", keys[i]);
        snprintf(want, sizeof want, "/api/thumb/%lld", (long long)json_integer_value(json_object_get(h, "id")));
        CHECK_EQ_STR(json_string_value(json_object_get(h, "thumb")), want);
        CHECK(json_integer_value(json_object_get(h, "width")) > 0);
        json_decref(doc);
    }
    su_resp_free(&r);
}

CDB_TEST(more_like_this_and_paging) {
    int64_t ia[64], ib[64];
    double sa[64], sb[64];
    su_resp r;
    char path[512];
    NEED_SETUP();
    CHECK_EQ_INT(su_get(g_srv.port, "/api/search?image_id=5&k=4", &r), 0);
    CHECK_EQ_INT(api_hits(&r, ia, sa, 64), 4);
    CHECK_EQ_INT(ia[0], 5);
    CHECK_NEAR(sa[0], 1.0, 2e-3);
    su_resp_free(&r);
    CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search", "{\"image_id\": [5, 6], \"k\": 3}", &r), 0);
    CHECK_EQ_INT(api_hits(&r, ia, sa, 64), 3);
    su_resp_free(&r);
    /* pages of 7 are the big page cut in pieces */
    CHECK_EQ_INT(su_get(g_srv.port, "/api/search?q=a%20square&k=28", &r), 0);
    int nb = api_hits(&r, ib, sb, 64);
    su_resp_free(&r);
    CHECK_EQ_INT(nb, 28);
    for (int off = 0; off < 28; off += 7) {
        snprintf(path, sizeof path, "/api/search?q=a%%20square&k=7&offset=%d", off);
        CHECK_EQ_INT(su_get(g_srv.port, path, &r), 0);
        int na = api_hits(&r, ia, sa, 64);
        su_resp_free(&r);
        CHECK_EQ_INT(na, 7);
        for (int i = 0; i < na; i++) CHECK_EQ_INT(ia[i], ib[off + i]);
    }
    /* the filters, as the CLI applies them */
    {
        char q[900], enc[1800];
        snprintf(q, sizeof q, "/api/search?q=a%%20square&k=30&min_score=0.2");
        CHECK_EQ_INT(su_get(g_srv.port, q, &r), 0);
        int na = api_hits(&r, ia, sa, 64);
        su_resp_free(&r);
        nb = cli_hits((const char *[]){"a square", "-k", "30", "--min-score", "0.2", NULL}, ib, sb, 64);
        CHECK_EQ_INT(na, nb);
        for (int i = 0; i < na; i++) CHECK(sa[i] >= 0.2);
        snprintf(q, sizeof q, "/api/search?q=a%%20square&k=5&under=%s", su_urlenc(g_lib, enc, sizeof enc));
        CHECK_EQ_INT(su_get(g_srv.port, q, &r), 0);
        CHECK_EQ_INT(api_hits(&r, ia, sa, 64), 5);
        su_resp_free(&r);
        CHECK_EQ_INT(su_get(g_srv.port, "/api/search?q=a%20square&k=5&under=/nowhere", &r), 0);
        CHECK_EQ_INT(api_hits(&r, ia, sa, 64), 0);
        su_resp_free(&r);
        na = 0;
        CHECK_EQ_INT(su_get(g_srv.port, "/api/search?q=a%20square&k=8&sort=time", &r), 0);
        na = api_hits(&r, ia, sa, 64);
        su_resp_free(&r);
        /* the API orders its window of the best 1000 hits by time: the CLI's -k 1000 */
        nb = cli_hits((const char *[]){"a square", "-k", "1000", "--sort", "time", NULL}, ib, sb, 64);
        check_same(cdb_t_, "sort=time", na, ia, sa, nb < 8 ? nb : 8, ib, sb);
        /* metadata filters and the capture-time sort (these photos carry no EXIF: each
        ** is dated by its file time), as the CLI applies them */
        CHECK_EQ_INT(su_get(g_srv.port,
                            "/api/search?q=a%20square&k=8&sort=taken-asc&taken_after=2000-01-01",
                            &r), 0);
        na = api_hits(&r, ia, sa, 64);
        CHECK(r.body && strstr(r.body, "\"taken_source\":\"file\"") != NULL);
        su_resp_free(&r);
        nb = cli_hits((const char *[]){"a square", "-k", "1000", "--sort", "taken-asc",
                                       "--taken-after", "2000-01-01", NULL}, ib, sb, 64);
        check_same(cdb_t_, "sort=taken-asc", na, ia, sa, nb < 8 ? nb : 8, ib, sb);
        CHECK_EQ_INT(su_get(g_srv.port,
                            "/api/search?q=a%20square&taken_before=2000-01-01T00:00Z", &r), 0);
        CHECK_EQ_INT(api_hits(&r, ia, sa, 64), 0);
        su_resp_free(&r);
        CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search",
                             "{\"query\": \"a square\", \"has_gps\": true}", &r), 0);
        CHECK_EQ_INT(api_hits(&r, ia, sa, 64), 0);
        su_resp_free(&r);
    }
}

CDB_TEST(thumbnails_and_originals) {
    su_resp r, r2;
    char v[256], img[900];
    NEED_SETUP();
    for (int id = 1; id <= N_PHOTOS; id++) {
        char path[64];
        int w = 0, h = 0;
        snprintf(path, sizeof path, "/api/thumb/%d", id);
        CHECK_EQ_INT(su_get(g_srv.port, path, &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK_EQ_STR(su_header(&r, "Content-Type", v, sizeof v), "image/jpeg");
        CHECK(r.len > 100 && (unsigned char)r.body[0] == 0xFF && (unsigned char)r.body[1] == 0xD8);
        /* the frame size: SOF0/SOF2 marker */
        for (size_t i = 2; i + 9 < r.len; i++)
            if ((unsigned char)r.body[i] == 0xFF && ((unsigned char)r.body[i + 1] == 0xC0 ||
                                                     (unsigned char)r.body[i + 1] == 0xC2)) {
                h = (unsigned char)r.body[i + 5] << 8 | (unsigned char)r.body[i + 6];
                w = (unsigned char)r.body[i + 7] << 8 | (unsigned char)r.body[i + 8];
                break;
            }
        CHECK_MSG(w > 0 && h > 0 && w <= 384 && h <= 384, "thumbnail %d is %dx%d", id, w, h);
        su_resp_free(&r);
    }
    /* revalidation */
    CHECK_EQ_INT(su_get(g_srv.port, "/api/thumb/2", &r), 0);
    CHECK(su_header(&r, "ETag", v, sizeof v) != NULL);
    {
        char hdr[300];
        snprintf(hdr, sizeof hdr, "If-None-Match: %s\r\n", v);
        CHECK_EQ_INT(su_request(g_srv.port, "GET", "/api/thumb/2", hdr, NULL, 0, &r2), 0);
        CHECK_EQ_INT(r2.status, 304);
        su_resp_free(&r2);
    }
    su_resp_free(&r);
    /* the original: its bytes, its type */
    {
        int64_t ia[4];
        double sa[4];
        char path[64];
        CHECK_EQ_INT(su_get(g_srv.port, "/api/search?q=a%20circle&k=1", &r), 0);
        CHECK_EQ_INT(api_hits(&r, ia, sa, 4), 1);
        json_t *doc = su_json(&r);
        const char *p = json_string_value(json_object_get(json_array_get(json_object_get(doc, "results"), 0), "path"));
        snprintf(img, sizeof img, "%s", p ? p : "");
        json_decref(doc);
        su_resp_free(&r);
        snprintf(path, sizeof path, "/api/file/%lld", (long long)ia[0]);
        CHECK_EQ_INT(su_get(g_srv.port, path, &r), 0);
        CHECK_EQ_INT(r.status, 200);
        size_t n = 0;
        char *want = cli_read_file(img, &n);
        CHECK(want && n == r.len && !memcmp(want, r.body, n));
        free(want);
        su_header(&r, "Content-Type", v, sizeof v);
        CHECK_MSG(!strcmp(v, strstr(img, ".png") ? "image/png" : "image/jpeg"), "type %s for %s", v, img);
        CHECK(su_header(&r, "Content-Disposition", v, sizeof v) && strstr(v, "inline"));
        su_resp_free(&r);
    }
    /* ids that are not photos, paths that try to be files */
    static const char *bad[] = {"/api/thumb/999999", "/api/thumb/0", "/api/thumb/-1", "/api/thumb/abc",
                                "/api/thumb/1x", "/api/file/999999", "/api/file/../../etc/passwd",
                                "/api/file/%2e%2e%2fetc%2fpasswd", "/api/file/1/../2", "/api/file/",
                                "/api/thumb/99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(su_get(g_srv.port, bad[i], &r), 0);
        CHECK_MSG(r.status == 404, "%s: status %d", bad[i], r.status);
        json_t *doc = su_json(&r);
        CHECK_MSG(json_is_string(json_object_get(json_object_get(doc, "error"), "code")),
                  "%s: no error object: %.200s", bad[i], r.body);
        CHECK(!strstr(r.body, "root:"));
        json_decref(doc);
        su_resp_free(&r);
    }
}

CDB_TEST(stats_folders_health) {
    su_resp r;
    char v[256];
    NEED_SETUP();
    CHECK_EQ_INT(su_get(g_srv.port, "/api/stats", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    json_t *doc = su_json(&r);
    CHECK_EQ_INT(json_integer_value(json_object_get(json_object_get(doc, "files"), "ok")), N_PHOTOS);
    CHECK_EQ_INT(json_integer_value(json_object_get(doc, "thumb_size")), 384);
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(su_get(g_srv.port, "/api/folders", &r), 0);
    doc = su_json(&r);
    CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(json_object_get(doc, "folders"), 0), "path")),
                 g_lib);
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(su_get_status(g_srv.port, "/healthz"), 200);
    CHECK_EQ_INT(su_get(g_srv.port, "/", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "<title>clipdb</title>") != NULL);
    CHECK(su_header(&r, "Content-Security-Policy", v, sizeof v) != NULL);
    su_resp_free(&r);
    static const char *files[][2] = {{"/app.js", "text/javascript"}, {"/app.css", "text/css"},
                                     {"/favicon.svg", "image/svg+xml"}};
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ_INT(su_get(g_srv.port, files[i][0], &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK(su_header(&r, "Content-Type", v, sizeof v) && strstr(v, files[i][1]));
        su_resp_free(&r);
    }
}

/* "kind keep: id id ...\n" per group of a duplicates document. */
static void dup_text(json_t *doc, char *out, size_t cap) {
    size_t k = 0, gi, fi;
    json_t *g, *f;
    out[0] = '\0';
    json_array_foreach(json_object_get(doc, "groups"), gi, g) {
        k += (size_t)snprintf(out + k, cap - k, "%s %lld:",
                              json_string_value(json_object_get(g, "kind")),
                              (long long)json_integer_value(json_object_get(g, "keep")));
        json_array_foreach(json_object_get(g, "files"), fi, f)
            k += (size_t)snprintf(out + k, cap - k, " %lld",
                                  (long long)json_integer_value(json_object_get(f, "id")));
        k += (size_t)snprintf(out + k, cap - k, "\n");
    }
}

CDB_TEST(duplicates_same_as_cli) {
    su_resp r;
    cli_run_result c;
    static char api_groups[8192], cli_groups[8192];
    NEED_SETUP();
    CHECK_EQ_INT(su_get(g_srv.port, "/api/duplicates", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    json_t *doc = su_json(&r);
    CHECK(doc != NULL);
    CHECK_EQ_INT((int)json_integer_value(json_object_get(doc, "files")), N_PHOTOS);
    dup_text(doc, api_groups, sizeof api_groups);
    json_t *g0 = json_array_get(json_object_get(doc, "groups"), 0);
    if (g0) { /* each file has its thumbnail's URL */
        json_t *f0 = json_array_get(json_object_get(g0, "files"), 0);
        char want[64];
        snprintf(want, sizeof want, "/api/thumb/%lld",
                 (long long)json_integer_value(json_object_get(f0, "id")));
        CHECK_EQ_STR(json_string_value(json_object_get(f0, "thumb")), want);
    }
    json_decref(doc);
    su_resp_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"duplicates", "--db", g_db, "--json", NULL}, 0, &c), 0);
    json_error_t e;
    doc = json_loads(c.out, 0, &e);
    CHECK(doc != NULL);
    dup_text(doc, cli_groups, sizeof cli_groups);
    json_decref(doc);
    cli_run_free(&c);
    CHECK_EQ_STR(api_groups, cli_groups);
    CHECK_EQ_INT(su_get(g_srv.port, "/api/duplicates?kind=copies", &r), 0);
    CHECK_EQ_INT(r.status, 400);
    su_resp_free(&r);
}

CDB_TEST(clip_retrieval) {
    su_resp r;
    int64_t ia[64], ib[64];
    double sb[64];
    NEED_SETUP();
    CHECK_EQ_INT(su_get(g_srv.port, "/indices-list", &r), 0);
    json_t *doc = su_json(&r);
    CHECK(json_is_array(doc) && json_array_size(doc) == 1);
    json_decref(doc);
    su_resp_free(&r);
    /* as ClipClient sends it: no Content-Type, every field */
    const char *q = "{\"text\": \"a red circle\", \"image\": null, \"image_url\": null, "
                    "\"embedding_input\": null, \"deduplicate\": true, \"use_safety_model\": true, "
                    "\"use_violence_detector\": true, \"indice_name\": \"x\", \"use_mclip\": false, "
                    "\"aesthetic_score\": 9, \"aesthetic_weight\": 0.5, \"modality\": \"image\", "
                    "\"num_images\": 5, \"num_result_ids\": 8}";
    CHECK_EQ_INT(su_request(g_srv.port, "POST", "/knn-service", NULL, q, strlen(q), &r), 0);
    CHECK_EQ_INT(r.status, 200);
    doc = su_json(&r);
    CHECK_EQ_INT(json_array_size(doc), 8);
    int nb = cli_hits((const char *[]){"a red circle", "-k", "8", NULL}, ib, sb, 64);
    CHECK_EQ_INT(nb, 8);
    for (size_t i = 0; i < json_array_size(doc); i++) {
        json_t *x = json_array_get(doc, i);
        ia[i] = json_integer_value(json_object_get(x, "id"));
        CHECK_EQ_INT(ia[i], ib[i]);
        CHECK(json_number_value(json_object_get(x, "similarity")) == sb[i]);
        CHECK_MSG((i < 5) == (json_object_get(x, "url") != NULL), "result %zu: url only in the first 5", i);
    }
    const char *url = json_string_value(json_object_get(json_array_get(doc, 0), "url"));
    CHECK(url && strstr(url, "/api/file/") && !strncmp(url, "http://", 7));
    json_decref(doc);
    su_resp_free(&r);
    /* an embedding: the first hit's own vector from the export gives it back first */
    {
        char out[800], vpath[900];
        lu_path(out, sizeof out, "cr_export");
        CHECK_EQ_INT(lu_expect((const char *[]){"export", "--db", g_db, "--out", out, "--format", "jsonl",
                                                "--quiet", NULL}, 0, NULL), 0);
        snprintf(vpath, sizeof vpath, "%s/vectors.jsonl", out);
        char *lines = cli_read_file(vpath, NULL);
        CHECK(lines != NULL);
        json_error_t e;
        json_t *row = json_loadb(lines, strchr(lines, '\n') - lines, 0, &e);
        json_t *req = json_object();
        json_object_set(req, "embedding_input", json_object_get(row, "vector"));
        json_object_set_new(req, "num_images", json_integer(3));
        char *body = json_dumps(req, 0);
        CHECK_EQ_INT(su_post_json(g_srv.port, "/knn-service", body, &r), 0);
        doc = su_json(&r);
        CHECK_EQ_INT(json_integer_value(json_object_get(json_array_get(doc, 0), "id")),
                     json_integer_value(json_object_get(row, "id")));
        json_decref(doc);
        su_resp_free(&r);
        free(body);
        json_decref(req);
        json_decref(row);
        free(lines);
    }
    CHECK_EQ_INT(su_post_json(g_srv.port, "/metadata", "{\"ids\": [1, 2, 999999], \"indice_name\": \"x\"}", &r), 0);
    doc = su_json(&r);
    CHECK_EQ_INT(json_array_size(doc), 3);
    CHECK(json_is_string(json_object_get(json_object_get(json_array_get(doc, 0), "metadata"), "url")));
    CHECK(json_is_null(json_object_get(json_array_get(doc, 2), "metadata")));
    json_decref(doc);
    su_resp_free(&r);
}

CDB_TEST(bad_input) {
    su_resp r;
    NEED_SETUP();
    static const struct {
        const char *method, *path, *body;
        int status;
    } cases[] = {
        {"POST", "/api/search", "{not json", 400},
        {"POST", "/api/search", "[1, 2]", 400},
        {"POST", "/api/search", "{}", 400},
        {"POST", "/api/search", "{\"query\": \"a\", \"text\": \"b\"}", 400},
        {"POST", "/api/search", "{\"query\": 3}", 400},
        {"POST", "/api/search", "{\"query\": \"a\", \"k\": 0}", 400},
        {"POST", "/api/search", "{\"query\": \"a\", \"k\": \"many\"}", 400},
        {"POST", "/api/search", "{\"query\": \"a\", \"k\": 1e9}", 400},
        {"POST", "/api/search", "{\"query\": \"a +\"}", 400},
        {"POST", "/api/search", "{\"query\": \"a - a\"}", 400},
        {"POST", "/api/search", "{\"image\": \"!!!notbase64\"}", 400},
        {"POST", "/api/search", "{\"image\": \"aGVsbG8gd29ybGQ=\"}", 400},
        {"POST", "/api/search", "{\"image_id\": 999999}", 404},
        {"POST", "/api/search", "{\"query\": \"a\", \"under\": \"relative/dir\"}", 400},
        {"POST", "/api/search", "{\"query\": \"a\\u0000b\"}", 400},
        {"GET", "/api/search?q=a&sort=best", NULL, 400},
        {"GET", "/api/search?q=a&taken_after=yesterday", NULL, 400},
        {"GET", "/api/search?q=a&near=1,2", NULL, 400},
        {"GET", "/api/search?q=a&has_gps=maybe", NULL, 400},
        {"POST", "/api/search", "{\"query\": \"a\", \"has_gps\": 1}", 400},
        {"POST", "/api/search", "{\"query\": \"a\", \"camera\": 5}", 400},
        {"GET", "/api/search?q=a&min_score=2", NULL, 400},
        {"GET", "/api/search?q=a&offset=-1", NULL, 400},
        {"GET", "/api/search", NULL, 400},
        {"GET", "/api/search?image_id=abc", NULL, 400},
        {"GET", "/api/nothing", NULL, 404},
        {"GET", "/etc/passwd", NULL, 404},
        {"DELETE", "/api/search", NULL, 405},
        {"PUT", "/api/thumb/1", NULL, 405},
        {"POST", "/api/stats", "{}", 405},
        {"POST", "/knn-service", "nope", 400},
        {"POST", "/knn-service", "{\"image_url\": \"http://example.com/x.jpg\"}", 400},
        {"POST", "/metadata", "{\"ids\": 3}", 400},
        {"GET", "/knn-service", NULL, 405},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *b = cases[i].body;
        CHECK_EQ_INT(su_request(g_srv.port, cases[i].method, cases[i].path,
                                b ? "Content-Type: application/json\r\n" : NULL, b, b ? strlen(b) : 0, &r), 0);
        CHECK_MSG(r.status == cases[i].status, "%s %s %s: status %d, want %d (%.200s)", cases[i].method,
                  cases[i].path, b ? b : "", r.status, cases[i].status, r.body ? r.body : "");
        json_t *doc = su_json(&r);
        CHECK_MSG(json_is_string(json_object_get(json_object_get(doc, "error"), "message")),
                  "%s %s: not an error document: %.200s", cases[i].method, cases[i].path, r.body);
        json_decref(doc);
        su_resp_free(&r);
    }
    /* the query limit of the CLI: 64 KiB of text */
    {
        size_t n = 65536 + 10;
        char *big = malloc(n + 64);
        memcpy(big, "{\"query\": \"", 11);
        memset(big + 11, 'a', n);
        for (size_t i = 11 + 100; i < 11 + n; i += 100) big[i] = ' ';
        strcpy(big + 11 + n, "\"}");
        CHECK_EQ_INT(su_post_json(g_srv.port, "/api/search", big, &r), 0);
        CHECK_EQ_INT(r.status, 400);
        CHECK(strstr(r.body, "too long") != NULL);
        su_resp_free(&r);
        free(big);
    }
    /* the body cap: refused from the header, before the body is read */
    CHECK_EQ_INT(su_request(g_srv.port, "POST", "/api/search",
                            "Content-Type: application/json\r\nContent-Length: 999999999999\r\n", NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 413);
    su_resp_free(&r);
    /* and a chunked one that goes past it */
    {
        int fd = su_connect(g_srv.port);
        const char *h = "POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
        char *chunk = malloc(1 << 20), line[32];
        CHECK(fd >= 0 && chunk);
        memset(chunk, 'x', 1 << 20);
        su_send_all(fd, h, strlen(h));
        int k = snprintf(line, sizeof line, "%x\r\n", 1 << 20);
        for (int i = 0; i < 40; i++) { /* 40 MiB > 32 MiB */
            if (su_send_all(fd, line, (size_t)k) || su_send_all(fd, chunk, 1 << 20) ||
                su_send_all(fd, "\r\n", 2))
                break;
        }
        su_send_all(fd, "0\r\n\r\n", 5);
        su_read_resp(fd, &r, 30000);
        CHECK_EQ_INT(r.status, 413);
        su_resp_free(&r);
        close(fd);
        free(chunk);
    }
    /* garbage instead of HTTP: answered 400 or closed, and the server lives on */
    {
        int fd = su_connect(g_srv.port);
        const char junk[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 GET / \r\n\r\n\r\n";
        su_send_all(fd, junk, sizeof junk - 1);
        su_read_resp(fd, &r, 5000);
        CHECK(r.status == 0 || (r.status >= 400 && r.status < 500) || r.status <= -400);
        su_resp_free(&r);
        close(fd);
        CHECK_EQ_INT(su_get_status(g_srv.port, "/healthz"), 200);
    }
}

CDB_TEST(keep_alive) {
    su_resp r;
    NEED_SETUP();
    int fd = su_connect(g_srv.port);
    CHECK(fd >= 0);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(su_request_on(fd, "GET", i % 2 ? "/api/thumb/1" : "/api/search?q=star&k=3", NULL,
                                   NULL, 0, &r, 10000), 0);
        CHECK_EQ_INT(r.status, 200);
        su_resp_free(&r);
    }
    close(fd);
}

CDB_TEST(token) {
    char tok[800], bad[800], hdr[300];
    su_server s;
    su_resp r;
    const char *secret = "s3cret-token-for-the-test-0123456789";
    NEED_SETUP();
    lu_path(tok, sizeof tok, "token.txt");
    CHECK_EQ_INT(lu_write(tok, secret, strlen(secret)), 0);
    chmod(tok, 0600);
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--token-file", tok, NULL}), 0);
    CHECK_EQ_INT(su_get_status(s.port, "/api/search?q=star"), 401);
    CHECK_EQ_INT(su_get_status(s.port, "/api/thumb/1"), 401);
    CHECK_EQ_INT(su_request(s.port, "GET", "/api/search?q=star", "Authorization: Bearer wrong-token-wrong-token\r\n",
                            NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 401);
    su_resp_free(&r);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", secret);
    CHECK_EQ_INT(su_request(s.port, "GET", "/api/search?q=star", hdr, NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    su_resp_free(&r);
    /* the page loads without it (it asks for the token), the login sets the cookie */
    CHECK_EQ_INT(su_get_status(s.port, "/"), 200);
    CHECK_EQ_INT(su_post_json(s.port, "/api/login", "{\"token\": \"nope\"}", &r), 0);
    CHECK_EQ_INT(r.status, 401);
    su_resp_free(&r);
    snprintf(bad, sizeof bad, "{\"token\": \"%s\"}", secret);
    CHECK_EQ_INT(su_post_json(s.port, "/api/login", bad, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    char cookie[300];
    CHECK(su_header(&r, "Set-Cookie", cookie, sizeof cookie) && strstr(cookie, "HttpOnly"));
    su_resp_free(&r);
    *strchr(cookie, ';') = '\0';
    snprintf(hdr, sizeof hdr, "Cookie: %s\r\n", cookie);
    CHECK_EQ_INT(su_request(s.port, "GET", "/api/thumb/1", hdr, NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&s), 0);
    /* any address but loopback needs the token; never from the command line */
    cli_run_result cr;
    CHECK_EQ_INT(lu_run((const char *[]){"serve", "--db", g_db, "--host", "0.0.0.0", "--port", "0", NULL}, &cr), 1);
    CHECK(strstr(cr.err, "token") != NULL);
    cli_run_free(&cr);
    CHECK_EQ_INT(lu_run((const char *[]){"serve", "--db", g_db, "--token", secret, NULL}, &cr), 2);
    cli_run_free(&cr);
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--host", "0.0.0.0", "--token-file", tok, NULL}), 0);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", secret);
    CHECK_EQ_INT(su_request(s.port, "GET", "/healthz", NULL, NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    su_resp_free(&r);
    CHECK_EQ_INT(su_request(s.port, "GET", "/api/stats", hdr, NULL, 0, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&s), 0);
    /* without a token, only loopback Host names (DNS rebinding) */
    int fd = su_connect(g_srv.port);
    const char *req = "GET /api/stats HTTP/1.1\r\nHost: evil.example:8765\r\n\r\n";
    su_send_all(fd, req, strlen(req));
    su_read_resp(fd, &r, 10000);
    CHECK_EQ_INT(r.status, 403);
    su_resp_free(&r);
    close(fd);
}

CDB_TEST(connection_limits) {
    su_server s;
    int fds[8];
    NEED_SETUP();
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, "--max-connections", "4", "--timeout", "2",
                                               "--threads", "2", NULL}), 0);
    for (int i = 0; i < 6; i++) fds[i] = su_connect(s.port);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    /* a 7th connection: refused with a 503, not left hanging */
    CHECK_EQ_INT(su_get_status(s.port, "/healthz"), 503);
    /* idle ones are closed after the timeout; then requests are served again */
    ts.tv_sec = 3;
    ts.tv_nsec = 500 * 1000000L;
    nanosleep(&ts, NULL);
    for (int i = 0; i < 6; i++) {
        char c;
        struct pollfd pf = {fds[i], POLLIN, 0};
        CHECK_MSG(poll(&pf, 1, 2000) == 1 && recv(fds[i], &c, 1, 0) == 0, "idle connection %d still open", i);
        close(fds[i]);
    }
    /* a slow client: half a request, then silence */
    fds[0] = su_connect(s.port);
    su_send_all(fds[0], "GET /api/stats HTTP/1.1\r\nHo", 27);
    {
        char c;
        struct pollfd pf = {fds[0], POLLIN, 0};
        int64_t t0 = cdb_now_ns();
        CHECK(poll(&pf, 1, 8000) == 1);
        recv(fds[0], &c, 1, 0);
        CHECK((cdb_now_ns() - t0) / 1000000 < 7000);
        close(fds[0]);
    }
    CHECK_EQ_INT(su_get_status(s.port, "/healthz"), 200);
    CHECK_EQ_INT(su_stop(&s), 0);
}

CDB_TEST(graceful_stop) {
    su_server s;
    su_resp r;
    NEED_SETUP();
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, NULL}), 0);
    /* a request whose body is still coming when the server is told to stop */
    int fd = su_connect(s.port);
    const char *json = "{\"query\": \"a blue square\", \"k\": 3}";
    char head[300];
    int n = snprintf(head, sizeof head, "POST /api/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %zu\r\n\r\n",
                     strlen(json));
    CHECK_EQ_INT(su_send_all(fd, head, (size_t)n), 0);
    CHECK_EQ_INT(su_send_all(fd, json, 10), 0);
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    kill(s.pid, SIGTERM);
    nanosleep(&ts, NULL);
    CHECK_EQ_INT(su_send_all(fd, json + 10, strlen(json) - 10), 0);
    CHECK_EQ_INT(su_read_resp(fd, &r, 10000), 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK(strstr(r.body, "\"results\"") != NULL);
    su_resp_free(&r);
    close(fd);
    CHECK_EQ_INT(cli_wait(s.pid), 0);
    /* and it no longer listens */
    CHECK(su_connect(s.port) < 0);
    char *err = cli_read_file(s.err, NULL);
    CHECK(err && strstr(err, "POST /api/search 200"));
    free(err);
}

/* The id of path in a search by its own image, -1 when it is not found first. */
static int64_t find_by_image(int port, const char *path) {
    char q[4200], enc[4000];
    su_resp r;
    int64_t ids[4];
    double sc[4];
    /* a literal text search would not name the file: ask for a big page and look */
    (void)enc;
    snprintf(q, sizeof q, "/api/search?q=a&k=1000");
    if (su_get(port, q, &r) != 0) return -1;
    json_t *doc = su_json(&r), *res = json_object_get(doc, "results");
    int64_t id = -1;
    for (size_t i = 0; i < json_array_size(res); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(res, i), "path")), path))
            id = json_integer_value(json_object_get(json_array_get(res, i), "id"));
    json_decref(doc);
    su_resp_free(&r);
    (void)ids, (void)sc;
    return id;
}

CDB_TEST(freshness) {
    char lib2[700], img[900], moved[900];
    su_server s;
    su_resp r;
    NEED_SETUP();
    lu_path(lib2, sizeof lib2, "photos_fresh");
    CHECK_EQ_INT(lu_generate(lib2, 99, 100, 6), 0);
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, NULL}), 0);
    lu_img(lib2, 102, img, sizeof img);
    CHECK_EQ_INT(find_by_image(s.port, img), -1);
    /* a concurrent ingest's photos appear without a restart */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", g_db, lib2, "--quiet", NULL}, 0, NULL), 0);
    int64_t id = find_by_image(s.port, img);
    CHECK_MSG(id > 0, "the new photo %s is not found", img);
    {
        char path[128];
        int64_t ids[4];
        double sc[4];
        snprintf(path, sizeof path, "/api/search?image_id=%lld&k=1", (long long)id);
        CHECK_EQ_INT(su_get(s.port, path, &r), 0);
        CHECK_EQ_INT(api_hits(&r, ids, sc, 4), 1);
        CHECK_EQ_INT(ids[0], id);
        su_resp_free(&r);
        snprintf(path, sizeof path, "/api/thumb/%lld", (long long)id);
        CHECK_EQ_INT(su_get_status(s.port, path), 200);
    }
    /* an index built by another process is used, and what came after it still appears */
    CHECK_EQ_INT(lu_expect((const char *[]){"index", "build", "--db", g_db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(find_by_image(s.port, img), id);
    {
        int64_t ia[64], ib[64];
        double sa[64], sb[64];
        CHECK_EQ_INT(su_get(s.port, "/api/search?q=a%20red%20star&k=10", &r), 0);
        int na = api_hits(&r, ia, sa, 64);
        su_resp_free(&r);
        int nb = cli_hits((const char *[]){"a red star", "-k", "10", NULL}, ib, sb, 64);
        check_same(cdb_t_, "after index build", na, ia, sa, nb, ib, sb);
    }
    /* deleted and moved photos: gone from the results after the reindex */
    lu_img(lib2, 103, moved, sizeof moved);
    CHECK_EQ_INT(remove(img), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", g_db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(find_by_image(s.port, img), -1);
    CHECK(find_by_image(s.port, moved) > 0);
    {
        char path[128];
        snprintf(path, sizeof path, "/api/file/%lld", (long long)id);
        CHECK_EQ_INT(su_get_status(s.port, path), 404);
    }
    CHECK_EQ_INT(su_stop(&s), 0);
    /* leave the shared library as it was for the other tests */
    CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", g_db, lib2, "--quiet", NULL}, 0, NULL), 0);
}

CDB_TEST(readonly_database) {
    char ro[700], cmd[4000], lib3[700], img[900];
    su_server s;
    NEED_SETUP();
    if (getuid() != 0) CDB_SKIP("needs root to serve as another user");
    lu_path(ro, sizeof ro, "ro.clipdb");
    lu_path(lib3, sizeof lib3, "photos_ro");
    CHECK_EQ_INT(lu_generate(lib3, 123, 200, 3), 0);
    snprintf(cmd, sizeof cmd, "cp -a %s %s && chmod a+rx %s && chmod -R a+rX %s %s %s && chmod -R a-w %s",
             g_db, ro, lu_tmp, lu_tmp, g_lib, lib3, ro);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_EQ_INT(su_start_as(&s, (const char *[]){"--db", ro, NULL}, 1), 0);
    CHECK_EQ_INT(su_get_status(s.port, "/api/search?q=a%20circle&k=3"), 200);
    CHECK_EQ_INT(su_get_status(s.port, "/api/thumb/1"), 200);
    /* its owner ingests meanwhile: the reader's snapshot is reopened */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", ro, lib3, "--quiet", NULL}, 0, NULL), 0);
    lu_img(lib3, 201, img, sizeof img);
    CHECK_MSG(find_by_image(s.port, img) > 0, "a photo ingested by the owner is not seen");
    CHECK_EQ_INT(su_stop(&s), 0);
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s", ro);
    CHECK_EQ_INT(system(cmd), 0);
}

CDB_TEST(thumbnails_settings) {
    char thumbs[800], wal[820];
    su_server s;
    su_resp r;
    NEED_SETUP();
    CHECK_EQ_INT(su_start(&s, (const char *[]){"--db", g_db, NULL}), 0);
    /* lost: made on the fly, then backfilled by the reindex */
    snprintf(thumbs, sizeof thumbs, "%s/thumbs.db", g_db);
    snprintf(wal, sizeof wal, "%s-wal", thumbs);
    remove(thumbs);
    remove(wal);
    snprintf(wal, sizeof wal, "%s-shm", thumbs);
    remove(wal);
    CHECK_EQ_INT(su_get_status(s.port, "/api/thumb/4"), 200);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", g_db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(access(thumbs, F_OK), 0);
    /* off */
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", g_db, "--thumb-size", "0", "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(su_get(s.port, "/api/thumb/4", &r), 0);
    CHECK_EQ_INT(r.status, 404);
    CHECK(strstr(r.body, "no_thumbnail") != NULL);
    su_resp_free(&r);
    /* another size: every thumbnail made again at it */
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", g_db, "--thumb-size", "64", "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(su_get(s.port, "/api/thumb/4", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    for (size_t i = 2; i + 9 < r.len; i++)
        if ((unsigned char)r.body[i] == 0xFF && (unsigned char)r.body[i + 1] == 0xC0) {
            int h = (unsigned char)r.body[i + 5] << 8 | (unsigned char)r.body[i + 6];
            int w = (unsigned char)r.body[i + 7] << 8 | (unsigned char)r.body[i + 8];
            CHECK_MSG(w <= 64 && h <= 64 && (w == 64 || h == 64 || w < 64), "%dx%d", w, h);
            break;
        }
    su_resp_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", g_db, "--thumb-size", "384", "--quiet", NULL}, 0, NULL), 0);
    cli_run_result cr;
    CHECK_EQ_INT(lu_run((const char *[]){"reindex", "--db", g_db, "--thumb-size", "8", NULL}, &cr), 2);
    cli_run_free(&cr);
    CHECK_EQ_INT(su_stop(&s), 0);
}

/* The ids of /api/search?PATH's results (at most cap); -1 when not a 200. */
static int api_ids(int port, const char *path, int64_t *ids, int cap) {
    su_resp r;
    double sc[128];
    int n = su_get(port, path, &r) == 0 ? api_hits(&r, ids, sc, cap < 128 ? cap : 128) : -1;
    su_resp_free(&r);
    return n;
}

/* Issue 28: the API collapses copies (collapse=1, the default). A library of 12 photos
** with three exact copies of photo 0 and one of photo 3: the oracle is how the copies
** were made. The collapsed list is the full ranking (collapse=0) cut to the first file
** of each copy set; pages of k = 1, 3, 5 (offset) are that one list cut in pieces; each
** kept hit names its copies; collapse=2 is a 400. */
CDB_TEST(collapsed_copies_and_paging) {
    char lib[700], db[700], from[800], to[800], path[200];
    int64_t all[128], kept[128], page[128];
    su_server s;
    memset(&s, 0, sizeof s);
    if (lu_setup() == 77) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/");
    LU_PATHS("copies", CLI_AT(lib, "photos"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(lib, 9, 0, 12), 0);
    static const char *const names[4] = {"c0a", "c0b", "c0c", "c3a"};
    for (int i = 0; i < 4; i++) {
        lu_img(lib, i < 3 ? 0 : 3, from, sizeof from);
        snprintf(to, sizeof to, "%s/%s%s", lib, names[i], strrchr(from, '.'));
        CHECK_EQ_INT(lu_copy(from, to), 0);
    }
    CHECK_EQ_INT(lu_init(db), 0);
    CHECK_EQ_INT(su_ingest_and_start(&s, db, lib, "2"), 0);
    int n_all = api_ids(s.port, "/api/search?q=a%20shape&k=100&collapse=0", all, 128);
    CHECK_EQ_INT(n_all, 16);
    /* the copy sets by path: the oracle */
    su_resp r;
    json_t *doc;
    CHECK_EQ_INT(su_get(s.port, "/api/search?q=a%20shape&k=100&collapse=0", &r), 0);
    doc = su_json(&r);
    su_resp_free(&r);
    int set[128];
    for (int i = 0; i < n_all; i++) {
        const char *p = json_string_value(
            json_object_get(json_array_get(json_object_get(doc, "results"), (size_t)i), "path"));
        const char *b = p ? strrchr(p, '/') + 1 : "";
        set[i] = !strncmp(b, "c0", 2) || !strncmp(b, "img_0000000.", 12) ? 0
                 : !strncmp(b, "c3", 2) || !strncmp(b, "img_0000003.", 12) ? 3
                                                                             : 100 + i;
    }
    json_decref(doc);
    int want[128], n_want = 0, seen[228] = {0};
    for (int i = 0; i < n_all; i++)
        if (!seen[set[i]]++) want[n_want++] = i;
    CHECK_EQ_INT(n_want, 12);
    int n_kept = api_ids(s.port, "/api/search?q=a%20shape&k=100", kept, 128);
    CHECK_EQ_INT(n_kept, n_want);
    for (int i = 0; i < n_kept && i < n_want; i++) CHECK_EQ_INT(kept[i], all[want[i]]);
    /* each kept hit's copies: the other files of its set */
    CHECK_EQ_INT(su_get(s.port, "/api/search?q=a%20shape&k=100", &r), 0);
    doc = su_json(&r);
    su_resp_free(&r);
    for (int i = 0; i < n_kept && i < n_want; i++) {
        json_t *h = json_array_get(json_object_get(doc, "results"), (size_t)i);
        int s0 = set[want[i]], n_others = 0;
        for (int k = 0; k < n_all; k++) n_others += set[k] == s0 && k != want[i];
        CHECK_EQ_INT((int)json_integer_value(json_object_get(h, "duplicates")), n_others);
        CHECK_EQ_INT((int)json_array_size(json_object_get(h, "copies")), n_others);
    }
    json_decref(doc);
    /* pages: one ordering cut in pieces */
    for (int k = 1; k <= 5; k += 2) {
        int at = 0;
        for (int off = 0; off < n_kept + k; off += k) {
            snprintf(path, sizeof path, "/api/search?q=a%%20shape&k=%d&offset=%d", k, off);
            int n = api_ids(s.port, path, page, 128);
            CHECK(n >= 0 && n <= k);
            for (int i = 0; i < n && at < n_kept; i++) CHECK_EQ_INT(page[i], kept[at++]);
            if (n < k) break;
        }
        CHECK_EQ_INT(at, n_kept);
    }
    CHECK_EQ_INT(su_post_json(s.port, "/api/search", "{\"query\": \"a shape\", \"k\": 100,"
                              " \"collapse\": false}", &r), 0);
    double sc[128];
    CHECK_EQ_INT(api_hits(&r, page, sc, 128), 16);
    su_resp_free(&r);
    CHECK_EQ_INT(su_get_status(s.port, "/api/search?q=a%20shape&collapse=2"), 400);
    CHECK_EQ_INT(su_stop(&s), 0);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, search_same_as_cli, more_like_this_and_paging, thumbnails_and_originals,
                  stats_folders_health, duplicates_same_as_cli, clip_retrieval, bad_input,
                  keep_alive, token, connection_limits, graceful_stop, freshness, readonly_database,
                  thumbnails_settings, collapsed_copies_and_paging);
    return su_main(tests, CDB_TEST_N(tests), argc, argv, &g_srv);
}
