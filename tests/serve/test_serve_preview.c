/*
** test_serve_preview.c: the viewer's previews and the folders inside a root, through
** the real `clipdb serve` over a generated library (skips, 77, without a model). The
** library: world photos, some in folders inside the root, TIFFs written here (8-bit
** RGB, uncompressed, by hand) and the decoder tests' HEIC fixture.
**
**   preview_sizes     /api/preview/ID of a 2400x1600 and a 1000x3000 TIFF and the
**                     120x90 HEIC (EXIF-rotated: 90x120) are JPEGs that decode to
**                     2048x1365, 683x2048 and 90x120; a JPEG's preview is one too;
**                     hits carry preview and browser_shows (false for TIFF and HEIC)
**   preview_cache     ETag, then 304 with If-None-Match (and 200 with another tag); the
**                     preview is a file in <db>/previews/ and the same bytes come back
**   preview_changed   a TIFF touched: 409 "changed", as /api/file; removed: 404 "gone";
**                     an unknown id 404; a bad id 404
**   preview_parallel  8 clients ask for 4 big TIFFs at once: every answer a 2048 JPEG
**   folders_under     /api/folders?under=ROOT lists trips and scans with their photo
**                     counts and whether folders lie below; under=ROOT/trips lists 2023
**                     and 2024; a path in no root 404; a relative one 400
*/
#include <jansson.h>
#include <pthread.h>

#include "encoder/encoder.h"
#include "serve/serve_util.h"

#define N_PHOTOS 12

static char g_lib[700], g_db[700];
static su_server g_srv;
static int g_ready;

/* A baseline TIFF of w x h: uncompressed 8-bit RGB in one strip; the pixels depend on
** seed. 0, or -1. */
static int write_tiff(const char *path, int w, int h, int seed) {
    static const uint16_t tag[] = {256, 257, 258, 259, 262, 273, 277, 278, 279, 284};
    const int nt = (int)(sizeof tag / sizeof tag[0]);
    size_t n = (size_t)w * h * 3, bps_at = 8 + 2 + (size_t)nt * 12 + 4, data_at = bps_at + 6;
    unsigned char *b = calloc(1, data_at + n);
    int rc;
    if (!b) return -1;
    memcpy(b, "II\x2a\x00\x08\x00\x00\x00", 8);
    b[8] = (unsigned char)nt;
    for (int i = 0; i < nt; i++) {
        unsigned char *e = b + 10 + 12 * i;
        uint32_t v = tag[i] == 256 ? (uint32_t)w : tag[i] == 257 || tag[i] == 278 ? (uint32_t)h
                   : tag[i] == 258 ? (uint32_t)bps_at : tag[i] == 259 || tag[i] == 284 ? 1
                   : tag[i] == 262 ? 2 : tag[i] == 273 ? (uint32_t)data_at
                   : tag[i] == 277 ? 3 : (uint32_t)n;
        int is_long = tag[i] <= 257 || tag[i] == 273 || tag[i] == 278 || tag[i] == 279;
        e[0] = (unsigned char)tag[i];
        e[1] = (unsigned char)(tag[i] >> 8);
        e[2] = is_long ? 4 : 3;
        e[4] = tag[i] == 258 ? 3 : 1;
        for (int k = 0; k < 4; k++) e[8 + k] = (unsigned char)(v >> (8 * k));
    }
    for (int c = 0; c < 3; c++) b[bps_at + 2 * c] = 8;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            unsigned char *p = b + data_at + ((size_t)y * w + x) * 3;
            int in = (x - w / 2) * (x - w / 2) + (y - h / 2) * (y - h / 2) < (w / 4) * (w / 4);
            p[0] = in ? (unsigned char)(200 + seed) : (unsigned char)(y * 255 / h);
            p[1] = in ? 30 : (unsigned char)(y * 255 / h);
            p[2] = in ? (unsigned char)(30 * seed) : 255;
        }
    rc = lu_write(path, b, data_at + n);
    free(b);
    return rc;
}

static int setup(void) {
    char p[900], q[900];
    static const char *const dirs[] = {"trips/2023/beach", "trips/2024", "scans"};
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0) return -1;
    if (su_library(g_lib, g_db, 7, N_PHOTOS) != 0) return -1;
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", g_lib, dirs[i]);
        if (lu_mkdirs(p) != 0) return -1;
    }
    /* photos 0, 1, 2 into trips/2023/beach, trips/2024, trips */
    for (int i = 0; i < 3; i++) {
        const char *ext;
        lu_img(g_lib, i, p, sizeof p);
        ext = strrchr(p, '.');
        snprintf(q, sizeof q, "%s/%s/moved_%d%s", g_lib,
                 i == 0 ? "trips/2023/beach" : i == 1 ? "trips/2024" : "trips", i, ext);
        if (rename(p, q) != 0) return -1;
    }
    snprintf(p, sizeof p, "%s/scans/wide.tif", g_lib);
    if (write_tiff(p, 2400, 1600, 1) != 0) return -1;
    snprintf(p, sizeof p, "%s/scans/tall.tif", g_lib);
    if (write_tiff(p, 1000, 3000, 2) != 0) return -1;
    for (int i = 0; i < 4; i++) { /* for preview_parallel, then preview_changed */
        snprintf(p, sizeof p, "%s/scans/big_%d.tif", g_lib, i);
        if (write_tiff(p, 3000, 2000, 3 + i) != 0) return -1;
    }
    snprintf(p, sizeof p, "%s/scans/phone.heic", g_lib);
    if (lu_copy(CDB_SOURCE_DIR "/tests/golden/images/heic_o6_120x90.heic", p) != 0) return -1;
    if (su_ingest_and_start(&g_srv, g_db, g_lib, "8") != 0) return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)

/* The id of the hit whose path ends with tail (all photos are hits of k=100), and its
** browser_shows; 0 when none. */
static int64_t id_of(const char *tail, int *shows) {
    su_resp r;
    json_t *doc, *hit;
    size_t i, k = strlen(tail);
    int64_t id = 0;
    /* collapse=0: the scans are near copies of each other (one drawing, other sizes and
    ** colours), and ingest stores their phashes, so a grouped search shows one of them */
    if (su_get(g_srv.port, "/api/search?q=a%20shape&k=100&collapse=0", &r) != 0 ||
        r.status != 200) {
        su_resp_free(&r);
        return 0;
    }
    doc = su_json(&r);
    json_array_foreach(json_object_get(doc, "results"), i, hit) {
        const char *p = json_string_value(json_object_get(hit, "path"));
        size_t n = p ? strlen(p) : 0;
        if (n >= k && !strcmp(p + n - k, tail)) {
            id = json_integer_value(json_object_get(hit, "id"));
            if (shows) *shows = json_is_true(json_object_get(hit, "browser_shows"));
        }
    }
    json_decref(doc);
    su_resp_free(&r);
    return id;
}

/* GET /api/preview/id (extra header lines): the response. */
static int get_preview(int64_t id, const char *headers, su_resp *r) {
    char path[64];
    snprintf(path, sizeof path, "/api/preview/%lld", (long long)id);
    return su_request(g_srv.port, "GET", path, headers, NULL, 0, r);
}

/* The size of the JPEG in r; 0 when it does not decode as one. */
static int jpeg_size(const su_resp *r, int *w, int *h) {
    cdb_image *img = NULL;
    *w = *h = 0;
    if (r->len < 4 || memcmp(r->body, "\xff\xd8\xff", 3) ||
        cdb_image_decode(r->body, r->len, NULL, &img) != CDB_OK)
        return 0;
    *w = img->width;
    *h = img->height;
    cdb_image_free(img);
    return 1;
}

CDB_TEST(preview_sizes) {
    static const struct {
        const char *tail;
        int w, h, shows;
    } c[] = {{"/scans/wide.tif", 2048, 1365, 0}, {"/scans/tall.tif", 683, 2048, 0},
             {"/scans/phone.heic", 90, 120, 0}, {"/trips/moved_2.jpg", 0, 0, 1}};
    NEED_SETUP();
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int shows = -1, w, h;
        char ct[64];
        su_resp r;
        int64_t id = id_of(c[i].tail, &shows);
        if (!id && c[i].shows) continue; /* photo 2 was a PNG: no JPEG to check */
        CHECK_MSG(id > 0, "%s is not a hit", c[i].tail);
        CHECK_EQ_INT(shows, c[i].shows);
        CHECK_EQ_INT(get_preview(id, NULL, &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK(su_header(&r, "Content-Type", ct, sizeof ct) && !strcmp(ct, "image/jpeg"));
        CHECK_MSG(jpeg_size(&r, &w, &h), "%s: the preview is not a JPEG", c[i].tail);
        if (c[i].w) CHECK_MSG(w == c[i].w && h == c[i].h, "%s: %dx%d", c[i].tail, w, h);
        else CHECK(w > 0 && w <= 2048 && h > 0 && h <= 2048);
        su_resp_free(&r);
    }
}

CDB_TEST(preview_cache) {
    char etag[64], hdr[128], cached[1000];
    su_resp a, b, c, d;
    size_t n = 0;
    char *file;
    int64_t id;
    NEED_SETUP();
    CHECK((id = id_of("/scans/wide.tif", NULL)) > 0);
    CHECK_EQ_INT(get_preview(id, NULL, &a), 0);
    CHECK_EQ_INT(a.status, 200);
    CHECK(su_header(&a, "ETag", etag, sizeof etag) && etag[0] == '"');
    /* the cache file is named by the tag */
    snprintf(cached, sizeof cached, "%s/previews/%.*s.jpg", g_db, (int)strlen(etag) - 3, etag + 2);
    file = cli_read_file(cached, &n);
    CHECK_MSG(file && n == a.len && !memcmp(file, a.body, n), "%s: not the preview's bytes", cached);
    free(file);
    snprintf(hdr, sizeof hdr, "If-None-Match: %s\r\n", etag);
    CHECK_EQ_INT(get_preview(id, hdr, &b), 0);
    CHECK_EQ_INT(b.status, 304);
    CHECK_EQ_INT(get_preview(id, "If-None-Match: \"p0\"\r\n", &c), 0);
    CHECK_EQ_INT(c.status, 200);
    CHECK(c.len == a.len && !memcmp(c.body, a.body, a.len));
    CHECK_EQ_INT(get_preview(id, NULL, &d), 0); /* from the cache: the same bytes */
    CHECK(d.status == 200 && d.len == a.len && !memcmp(d.body, a.body, a.len));
    su_resp_free(&a);
    su_resp_free(&b);
    su_resp_free(&c);
    su_resp_free(&d);
}

/* The status of GET path and its error code ("" when none) into code. */
static int status_of(const char *path, char *code, size_t size) {
    su_resp r;
    json_t *doc;
    int st;
    code[0] = '\0';
    if (su_get(g_srv.port, path, &r) != 0) return 0;
    st = r.status;
    if ((doc = su_json(&r))) {
        const char *c = json_string_value(json_object_get(json_object_get(doc, "error"), "code"));
        snprintf(code, size, "%s", c ? c : "");
        json_decref(doc);
    }
    su_resp_free(&r);
    return st;
}

CDB_TEST(preview_changed) {
    char path[900], url[64], code[64];
    int64_t id;
    NEED_SETUP();
    CHECK((id = id_of("/scans/big_0.tif", NULL)) > 0);
    snprintf(path, sizeof path, "%s/scans/big_0.tif", g_lib);
    snprintf(url, sizeof url, "/api/preview/%lld", (long long)id);
    CHECK_EQ_INT(status_of(url, code, sizeof code), 200);
    CHECK_EQ_INT(lu_set_mtime(path, 1000000000LL * 1700000000), 0);
    CHECK_EQ_INT(status_of(url, code, sizeof code), 409); /* also with a preview cached */
    CHECK_MSG(!strcmp(code, "changed"), "%s", code);
    snprintf(url, sizeof url, "/api/file/%lld", (long long)id);
    CHECK_EQ_INT(status_of(url, code, sizeof code), 409);
    CHECK_EQ_INT(unlink(path), 0);
    snprintf(url, sizeof url, "/api/preview/%lld", (long long)id);
    CHECK_EQ_INT(status_of(url, code, sizeof code), 404);
    CHECK_MSG(!strcmp(code, "gone"), "%s", code);
    snprintf(url, sizeof url, "/api/file/%lld", (long long)id);
    CHECK_EQ_INT(status_of(url, code, sizeof code), 404);
    CHECK_EQ_INT(status_of("/api/preview/99999", code, sizeof code), 404);
    CHECK_EQ_INT(status_of("/api/preview/x1", code, sizeof code), 404);
}

typedef struct par_arg {
    int64_t id;
    int ok;
} par_arg;

static void *par_get(void *p) {
    par_arg *a = p;
    su_resp r;
    int w, h;
    a->ok = get_preview(a->id, NULL, &r) == 0 && r.status == 200 && jpeg_size(&r, &w, &h) &&
            w == 2048 && h == 1365;
    su_resp_free(&r);
    return NULL;
}

CDB_TEST(preview_parallel) {
    pthread_t t[8];
    par_arg a[8];
    int64_t ids[3];
    char tail[32];
    NEED_SETUP();
    for (int i = 0; i < 3; i++) { /* big_0 is preview_changed's */
        snprintf(tail, sizeof tail, "/scans/big_%d.tif", i + 1);
        CHECK((ids[i] = id_of(tail, NULL)) > 0);
    }
    for (int i = 0; i < 8; i++) {
        a[i].id = ids[i % 3];
        a[i].ok = 0;
        CHECK_EQ_INT(pthread_create(&t[i], NULL, par_get, &a[i]), 0);
    }
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 8; i++) CHECK_MSG(a[i].ok, "client %d: no 2048x1365 preview", i);
}

/* The folders of GET /api/folders?under=path as "name:files:subfolders,..." (names
** relative to path); the status into *st. */
static void list_under(const char *path, int *st, char *out, size_t size) {
    char enc[2000], url[2100];
    su_resp r;
    json_t *doc, *f;
    size_t i, o = 0;
    out[0] = '\0';
    snprintf(url, sizeof url, "/api/folders?under=%s", su_urlenc(path, enc, sizeof enc));
    *st = su_get(g_srv.port, url, &r) == 0 ? r.status : 0;
    if ((doc = su_json(&r)))
        json_array_foreach(json_object_get(doc, "folders"), i, f) {
            const char *p = json_string_value(json_object_get(f, "path"));
            size_t n = strlen(path);
            if (!p || strncmp(p, path, n) || p[n] != '/') continue;
            o += (size_t)snprintf(out + o, size - o, "%s%s:%lld:%d", o ? "," : "", p + n + 1,
                                  (long long)json_integer_value(json_object_get(f, "files")),
                                  json_is_true(json_object_get(f, "subfolders")));
        }
    json_decref(doc);
    su_resp_free(&r);
}

CDB_TEST(folders_under) {
    char got[512], p[900];
    int st;
    NEED_SETUP();
    list_under(g_lib, &st, got, sizeof got);
    CHECK_EQ_INT(st, 200);
    /* scans: wide, tall, the 4 big TIFFs and the HEIC */
    CHECK_MSG(!strcmp(got, "scans:7:0,trips:3:1"), "under the root: %s", got);
    snprintf(p, sizeof p, "%s/trips", g_lib);
    list_under(p, &st, got, sizeof got);
    CHECK_EQ_INT(st, 200);
    CHECK_MSG(!strcmp(got, "2023:1:1,2024:1:0"), "under trips: %s", got);
    snprintf(p, sizeof p, "%s/trips/2024", g_lib);
    list_under(p, &st, got, sizeof got);
    CHECK_EQ_INT(st, 200);
    CHECK_MSG(!got[0], "under trips/2024: %s", got);
    snprintf(p, sizeof p, "%s/trips/", g_lib); /* a trailing slash: the same folder */
    list_under(p, &st, got, sizeof got);
    CHECK_EQ_INT(st, 200);
    list_under("/nowhere/at/all", &st, got, sizeof got);
    CHECK_EQ_INT(st, 404);
    list_under("photos/trips", &st, got, sizeof got);
    CHECK_EQ_INT(st, 400);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, preview_sizes, preview_cache, folders_under, preview_changed,
                  preview_parallel);
    return su_main(tests, CDB_TEST_N(tests), argc, argv, &g_srv);
}
