/*
** test_serve_files.c: originals by id only as the catalog recorded them (issue 25,
** "one way from a catalog row to a photo's bytes"): the real `clipdb serve` over a
** generated library (skips, 77, without a model), and its handler in-process for
** what the HTTP layer does not pass on yet. The oracle: each photo's own bytes, read
** before anything was swapped.
**
**   originals_exact   every /api/file/ID is exactly its photo's bytes
**   ranges            the handler (cdb_srv_handle) against the file's own bytes: single
**                     ranges of every form (A-B, A-, -N), clamped ends, 416 past the
**                     end with "bytes * /SIZE", the whole file for several ranges,
**                     another unit or a malformed one, 304 before a range; 300 random
**                     ranges against an independent oracle. Over HTTP: a Range request
**                     gets that exact slice (206, Content-Range), 416 past the end
**   disposition       Content-Disposition is ASCII only; filename* decodes to valid
**                     UTF-8: the name itself, or U+FFFD for each byte of a non-UTF-8
**                     (Latin-1) name
**   swapped_photos    photos swapped for a link to /etc/passwd, a link to the photo
**                     itself, a hard link to an outside file, a same-size replacement
**                     with the same mtime, a touched file, a FIFO, a socket, a folder,
**                     nothing, and a folder above one swapped for a link: /api/file,
**                     /metadata and /api/thumb answer within a deadline with the recorded
**                     bytes or 404 / 409 (JSON saying to run reindex); 8 concurrent
**                     requests for the FIFO do not stop /healthz; verify --deep ends
*/
#include <jansson.h>
#include <pthread.h>

#include "serve/serve_int.h"
#include "serve/serve_util.h"

#define N_PHOTOS 14
#define DEADLINE_MS 5000

static char g_lib[700], g_db[700], g_out[700];
static su_server g_srv;
static cdb_engine *g_e;
static int g_ready;
static int64_t g_n;                      /* ids 1..g_n */
static char *g_path[N_PHOTOS + 1];       /* by id */
static unsigned char *g_bytes[N_PHOTOS + 1];
static size_t g_len[N_PHOTOS + 1];

static char g_placed[N_PHOTOS][900]; /* generated photo i: where setup put it */

/* Moves generated photo i to where this test wants it (before the ingest). */
static int place(int i) {
    char from[900];
    const char *ext;
    lu_img(g_lib, i, from, sizeof from);
    ext = strrchr(from, '.');
    if (i == 8) snprintf(g_placed[i], sizeof g_placed[i], "%s/sub/img_%07d%s", g_lib, i, ext);
    else if (i == 10) snprintf(g_placed[i], sizeof g_placed[i], "%s/caf\xe9 latin1%s", g_lib, ext);
    else if (i == 11)
        snprintf(g_placed[i], sizeof g_placed[i], "%s/caf\xc3\xa9 \"q\" 100%%%s", g_lib, ext);
    else snprintf(g_placed[i], sizeof g_placed[i], "%s", from);
    return strcmp(g_placed[i], from) ? rename(from, g_placed[i]) : 0;
}

static int setup(void) {
    char sub[800];
    if (g_ready) return g_ready > 0 ? 0 : -1;
    g_ready = -1;
    if (lu_setup() != 0) return -1;
    lu_path(g_lib, sizeof g_lib, "photos");
    lu_path(g_db, sizeof g_db, "db");
    lu_path(g_out, sizeof g_out, "outside");
    snprintf(sub, sizeof sub, "%s/sub", g_lib);
    if (lu_generate(g_lib, 11, 0, N_PHOTOS) != 0 || lu_mkdirs(sub) != 0 ||
        lu_mkdirs(g_out) != 0 || lu_init(g_db) != 0)
        return -1;
    for (int i = 0; i < N_PHOTOS; i++)
        if (place(i) != 0) return -1;
    if (lu_expect((const char *[]){"ingest", "--db", g_db, g_lib, "--quiet", NULL}, 0, NULL) != 0)
        return -1;
    if (cdb_engine_open(g_db, NULL, &g_e) != CDB_OK) return -1;
    for (int64_t id = 1; id <= N_PHOTOS; id++) {
        cdb_engine_file f;
        if (cdb_engine_file_get(g_e, id, &f) != CDB_OK) break;
        g_path[id] = strdup(f.path);
        g_bytes[id] = (unsigned char *)cli_read_file(f.path, &g_len[id]);
        cdb_engine_file_clear(&f);
        if (!g_bytes[id]) return -1;
        g_n = id;
    }
    if (g_n != N_PHOTOS) {
        fprintf(stderr, "    %lld photos recorded, want %d\n", (long long)g_n, N_PHOTOS);
        return -1;
    }
    if (su_start(&g_srv, (const char *[]){"--db", g_db, "--threads", "4", NULL}) != 0) return -1;
    g_ready = 1;
    return 0;
}

#define NEED_SETUP() SU_NEED_SETUP(setup, g_ready)

/* The id of the photo whose path ends with tail (0: none). */
static int64_t id_of(const char *tail) {
    for (int64_t id = 1; id <= g_n; id++) {
        size_t n = strlen(g_path[id]), k = strlen(tail);
        if (n >= k && !strcmp(g_path[id] + n - k, tail)) return id;
    }
    return 0;
}

/* The id of generated photo i (placed by place()). */
static int64_t photo_id(int i) { return id_of(strrchr(g_placed[i], '/')); }

/* GET path on a connection of its own within DEADLINE_MS (extra header lines). */
static int get(const char *path, const char *headers, su_resp *r) {
    int fd = su_connect(g_srv.port), rc;
    if (fd < 0) {
        memset(r, 0, sizeof *r);
        return -1;
    }
    rc = su_request_on(fd, "GET", path, headers, NULL, 0, r, DEADLINE_MS);
    close(fd);
    return rc;
}

CDB_TEST(originals_exact) {
    NEED_SETUP();
    for (int64_t id = 1; id <= g_n; id++) {
        char path[64];
        su_resp r;
        snprintf(path, sizeof path, "/api/file/%lld", (long long)id);
        CHECK_EQ_INT(get(path, NULL, &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK_MSG(r.len == g_len[id] && !memcmp(r.body, g_bytes[id], r.len),
                  "photo %lld: other bytes", (long long)id);
        su_resp_free(&r);
    }
}

/* ---- ranges ------------------------------------------------------------------------ */

/* The handler's answer to GET /api/file/id with these headers (NULL: none). */
static void handle(int64_t id, const char *range, const char *inm, srv_resp *o) {
    srv_ctx c;
    srv_req r;
    char path[64];
    memset(&c, 0, sizeof c);
    memset(&r, 0, sizeof r);
    c.e = g_e;
    snprintf(path, sizeof path, "/api/file/%lld", (long long)id);
    r.method = "GET";
    r.path = path;
    r.range = range;
    r.if_none_match = inm;
    r.body = "";
    cdb_srv_handle(&c, &r, o);
}

/* 1 when o sends exactly bytes [start, start + len) of photo id. */
static int sends(const srv_resp *o, int64_t id, int64_t start, int64_t len) {
    unsigned char *b = malloc((size_t)len + 1);
    ssize_t k = b && o->fd >= 0 ? pread(o->fd, b, (size_t)len, (off_t)o->fd_offset) : -1;
    int ok = o->fd_offset == start && o->fd_size == len && k == (ssize_t)len &&
             !memcmp(b, g_bytes[id] + start, (size_t)len);
    free(b);
    return ok;
}

typedef struct range_case {
    const char *h; /* "%S" stands for the size */
    int status;
    int64_t start, end; /* inclusive; -1 end: size - 1 */
} range_case;

CDB_TEST(ranges) {
    int64_t id;
    NEED_SETUP();
    id = photo_id(3);
    CHECK(id > 0);
    int64_t size = (int64_t)g_len[id];
    const range_case cases[] = {
        {"bytes=0-0", 206, 0, 0},           {"bytes=0-99", 206, 0, 99},
        {"bytes=100-", 206, 100, -1},       {"bytes=-50", 206, -50, -1},
        {"bytes=-99999999", 206, 0, -1},    {"bytes=10-99999999", 206, 10, -1},
        {"BYTES=5-9", 206, 5, 9},           {"bytes= 7-8 ", 206, 7, 8},
        {"bytes=%S-", 416, 0, 0},           {"bytes=%S-%S", 416, 0, 0},
        {"bytes=-0", 416, 0, 0},            {"bytes=9-4", 200, 0, -1},
        {"bytes=0-1,5-6", 200, 0, -1},      {"items=0-1", 200, 0, -1},
        {"bytes=a-b", 200, 0, -1},          {"bytes=-", 200, 0, -1},
        {"bytes=99999999999999999999999-", 200, 0, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char h[200], want[80];
        const char *s = cases[i].h, *at = strstr(s, "%S");
        srv_resp o;
        int64_t start = cases[i].start < 0 ? size + cases[i].start : cases[i].start;
        int64_t end = cases[i].end < 0 ? size - 1 : cases[i].end;
        if (at) { /* each %S: the size */
            const char *at2 = strstr(at + 2, "%S");
            if (at2)
                snprintf(h, sizeof h, "%.*s%lld%.*s%lld%s", (int)(at - s), s, (long long)size,
                         (int)(at2 - at - 2), at + 2, (long long)size, at2 + 2);
            else
                snprintf(h, sizeof h, "%.*s%lld%s", (int)(at - s), s, (long long)size, at + 2);
        } else {
            snprintf(h, sizeof h, "%s", s);
        }
        handle(id, h, NULL, &o);
        CHECK_MSG(o.status == cases[i].status, "%s: %d, want %d", h, o.status, cases[i].status);
        if (o.status == 206) {
            snprintf(want, sizeof want, "bytes %lld-%lld/%lld", (long long)start, (long long)end,
                     (long long)size);
            CHECK_EQ_STR(o.content_range, want);
            CHECK_MSG(sends(&o, id, start, end - start + 1), "%s: other bytes", h);
        } else if (o.status == 416) {
            snprintf(want, sizeof want, "bytes */%lld", (long long)size);
            CHECK_EQ_STR(o.content_range, want);
            CHECK(o.fd < 0);
        } else {
            CHECK_EQ_STR(o.content_range, "");
            CHECK_MSG(sends(&o, id, 0, size), "%s: other bytes", h);
        }
        CHECK(o.accept_ranges || o.status == 416);
        if (o.fd >= 0) close(o.fd);
        cdb_srv_resp_clear(&o);
    }
    /* random ranges against the plain reading of RFC 9110 */
    uint64_t s = 99;
    for (int i = 0; i < 300; i++) {
        char h[100];
        srv_resp o;
        int64_t a, b, start, end;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a = (int64_t)((s >> 20) % (uint64_t)(size + 20));
        b = (int64_t)((s >> 40) % (uint64_t)(size + 20));
        if (a > b) {
            int64_t t = a;
            a = b;
            b = t;
        }
        switch (i % 3) {
        case 0: snprintf(h, sizeof h, "bytes=%lld-%lld", (long long)a, (long long)b); break;
        case 1: snprintf(h, sizeof h, "bytes=%lld-", (long long)a); b = size - 1; break;
        default: snprintf(h, sizeof h, "bytes=-%lld", (long long)b); a = size - b; b = size - 1;
        }
        handle(id, h, NULL, &o);
        if (i % 3 == 2 && size - a == 0) { /* -0 */
            CHECK_MSG(o.status == 416, "%s: %d", h, o.status);
        } else if (a >= size) {
            CHECK_MSG(o.status == 416, "%s: %d", h, o.status);
        } else {
            start = a < 0 ? 0 : a;
            end = b >= size ? size - 1 : b;
            CHECK_MSG(o.status == 206, "%s: %d", h, o.status);
            CHECK_MSG(sends(&o, id, start, end - start + 1), "%s: other bytes", h);
        }
        if (o.fd >= 0) close(o.fd);
        cdb_srv_resp_clear(&o);
    }
    /* a matching ETag wins over a range: 304, nothing sent */
    {
        srv_resp o;
        char etag[64];
        handle(id, NULL, NULL, &o);
        snprintf(etag, sizeof etag, "%s", o.etag);
        if (o.fd >= 0) close(o.fd);
        handle(id, "bytes=0-9", etag, &o);
        CHECK_EQ_INT(o.status, 304);
        CHECK(o.fd < 0);
    }
    /* over HTTP: the exact slice (206), and 416 past the end */
    {
        su_resp r;
        char path[64], v[128], h[80], want[80];
        snprintf(path, sizeof path, "/api/file/%lld", (long long)id);
        CHECK_EQ_INT(get(path, "Range: bytes=10-99\r\n", &r), 0);
        CHECK_EQ_INT(r.status, 206);
        snprintf(want, sizeof want, "bytes 10-99/%lld", (long long)size);
        CHECK_EQ_STR(su_header(&r, "Content-Range", v, sizeof v), want);
        CHECK(r.len == 90 && !memcmp(r.body, g_bytes[id] + 10, 90));
        CHECK_EQ_STR(su_header(&r, "Accept-Ranges", v, sizeof v), "bytes");
        su_resp_free(&r);
        snprintf(h, sizeof h, "Range: bytes=%lld-\r\n", (long long)size);
        snprintf(want, sizeof want, "bytes */%lld", (long long)size);
        CHECK_EQ_INT(get(path, h, &r), 0);
        CHECK_EQ_INT(r.status, 416);
        CHECK_EQ_STR(su_header(&r, "Content-Range", v, sizeof v), want);
        su_resp_free(&r);
    }
}

/* ---- Content-Disposition ----------------------------------------------------------- */

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* filename*=UTF-8''... of a Content-Disposition, percent-decoded into out; -1 bad. */
static int ext_name(const char *cd, char *out, size_t size) {
    const char *p = strstr(cd, "filename*=UTF-8''");
    size_t n = 0;
    if (!p) return -1;
    for (p += 17; *p && *p != ';' && *p != ' ' && n + 1 < size; p++) {
        if (*p == '%') {
            int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
            if (lo < 0) return -1;
            out[n++] = (char)(hi * 16 + lo);
            p += 2;
        } else if (strchr("-._~", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
                   (*p >= 'A' && *p <= 'Z')) {
            out[n++] = *p;
        } else {
            return -1; /* RFC 8187 attr-char only */
        }
    }
    out[n] = '\0';
    return 0;
}

CDB_TEST(disposition) {
    int64_t ids[2];
    NEED_SETUP();
    ids[0] = photo_id(10);
    ids[1] = photo_id(11);
    CHECK(ids[0] > 0 && ids[1] > 0);
    for (int k = 0; k < 2; k++) {
        srv_resp o;
        char name[400], want[400], fallback[400];
        const char *base = strrchr(g_path[ids[k]], '/') + 1, *q;
        handle(ids[k], NULL, NULL, &o);
        CHECK_EQ_INT(o.status, 200);
        if (o.fd >= 0) close(o.fd);
        for (const unsigned char *p = (const unsigned char *)o.disposition; *p; p++)
            CHECK_MSG(*p >= 0x20 && *p < 0x7f, "a byte 0x%02x in %s", *p, o.disposition);
        CHECK(!strncmp(o.disposition, "inline; filename=\"", 18));
        q = strchr(o.disposition + 18, '"');
        CHECK(q != NULL);
        snprintf(fallback, sizeof fallback, "%.*s", (int)(q - o.disposition - 18),
                 o.disposition + 18);
        CHECK(!strchr(fallback, '\\') && !strchr(fallback, '%'));
        CHECK_EQ_INT(ext_name(o.disposition, name, sizeof name), 0);
        CHECK(cdb_utf8_valid(name, strlen(name)));
        if (k == 0) { /* Latin-1 0xE9: one U+FFFD, the rest as it is */
            snprintf(want, sizeof want, "caf\xef\xbf\xbd latin1%s", strrchr(base, '.'));
            CHECK_EQ_STR(name, want);
            CHECK(!strncmp(fallback, "caf_ latin1.", 12));
        } else {
            CHECK_EQ_STR(name, base);
        }
    }
    /* over HTTP the header arrives as the handler made it */
    {
        su_resp r;
        char path[64], v[700];
        snprintf(path, sizeof path, "/api/file/%lld", (long long)ids[0]);
        CHECK_EQ_INT(get(path, NULL, &r), 0);
        CHECK_EQ_INT(r.status, 200);
        CHECK(su_header(&r, "Content-Disposition", v, sizeof v) && strstr(v, "filename*=UTF-8''caf%EF%BF%BD"));
        su_resp_free(&r);
    }
}

/* ---- photos swapped under the server --------------------------------------------- */

typedef struct swap {
    int photo;       /* generated photo index */
    const char *what;
    int status;      /* /api/file's */
} swap;

static const swap k_swaps[] = {
    {0, "untouched", 200},      {1, "link to /etc/passwd", 409},
    {2, "hard link out", 409},  {3, "same-size replacement", 409},
    {4, "FIFO", 409},           {5, "socket", 409},
    {6, "folder", 409},         {7, "deleted", 404},
    {8, "folder above a link", 409}, {9, "touched", 409},
    {12, "link to itself", 409}, {13, "untouched", 200},
};
#define N_SWAPS (int)(sizeof k_swaps / sizeof k_swaps[0])

static int do_swap(int photo, const char *path) {
    char p[900], dir[900];
    struct stat st;
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    if (stat(path, &st) != 0) return -1;
    switch (photo) {
    case 1: return unlink(path) || symlink("/etc/passwd", path);
    case 2: { /* an outside file with another photo's bytes */
        char other[900];
        snprintf(p, sizeof p, "%s/other.jpg", g_out);
        lu_img(g_lib, 0, other, sizeof other);
        return lu_copy(other, p) || unlink(path) || link(p, path);
    }
    case 3: { /* other bytes, same size, same mtime, new inode */
        size_t n = 0;
        unsigned char *b = (unsigned char *)cli_read_file(path, &n);
        int rc;
        if (!b) return -1;
        for (size_t i = 100; i < n; i++) b[i] ^= 0x5a;
        snprintf(p, sizeof p, "%s.tmp", path);
        rc = lu_write(p, b, n) ||
             lu_set_mtime(p, (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec) ||
             rename(p, path);
        free(b);
        return rc;
    }
    case 4: return unlink(path) || mkfifo(path, 0644);
    case 5: return unlink(path) || lu_socket(dir, strrchr(path, '/') + 1);
    case 6: return unlink(path) || mkdir(path, 0755);
    case 7: return unlink(path);
    case 8: /* sub/ for a link to sub_real/: the same inode below it */
        snprintf(p, sizeof p, "%s_real", dir);
        return rename(dir, p) || symlink(p, dir);
    case 9:
        return lu_set_mtime(path, (int64_t)st.st_mtim.tv_sec * 1000000000LL + 2000000000LL);
    case 12: /* the photo moved aside, a link to it in its place */
        snprintf(p, sizeof p, "%s.real", path);
        return rename(path, p) || symlink(p, path);
    }
    return 0;
}

/* Checks one /api/file answer against the table: the bytes or the error. */
static int check_file_answer(const su_resp *r, int64_t id, int want) {
    json_error_t e;
    json_t *doc, *err;
    int ok;
    if (r->status != want) {
        fprintf(stderr, "    photo %lld: %d, want %d: %.300s\n", (long long)id, r->status, want,
                r->body ? r->body : "");
        return 0;
    }
    if (want == 200) return r->len == g_len[id] && !memcmp(r->body, g_bytes[id], r->len);
    doc = json_loadb(r->body, r->len, 0, &e);
    err = json_object_get(doc, "error");
    ok = json_is_object(err) &&
         !strcmp(json_string_value(json_object_get(err, "code")), want == 409 ? "changed" : "gone") &&
         strstr(json_string_value(json_object_get(err, "message")), "reindex");
    if (!ok) fprintf(stderr, "    photo %lld: %.300s\n", (long long)id, r->body);
    json_decref(doc);
    return ok;
}

CDB_TEST(swapped_photos) {
    int64_t ids[N_SWAPS], fifo_id = 0;
    NEED_SETUP();
    for (int i = 0; i < N_SWAPS; i++) {
        ids[i] = photo_id(k_swaps[i].photo);
        CHECK(ids[i] > 0);
        CHECK_MSG(do_swap(k_swaps[i].photo, g_path[ids[i]]) == 0, "swap %s: %s", k_swaps[i].what,
                  strerror(errno));
        if (k_swaps[i].photo == 4) fifo_id = ids[i];
    }
    /* every original: the recorded bytes or the right error, within the deadline */
    for (int i = 0; i < N_SWAPS; i++) {
        char path[64];
        su_resp r;
        int64_t t0 = cdb_now_ns();
        snprintf(path, sizeof path, "/api/file/%lld", (long long)ids[i]);
        CHECK_MSG(get(path, NULL, &r) == 0, "%s: no answer within %d ms", k_swaps[i].what,
                  DEADLINE_MS);
        CHECK_MSG(check_file_answer(&r, ids[i], k_swaps[i].status), "%s", k_swaps[i].what);
        CHECK(cdb_now_ns() - t0 < (int64_t)DEADLINE_MS * 1000000);
        su_resp_free(&r);
        /* a Range request is no way around it */
        CHECK_EQ_INT(get(path, "Range: bytes=0-9\r\n", &r), 0);
        CHECK_MSG(r.status == 206 || r.status == k_swaps[i].status, "%s: range: %d",
                  k_swaps[i].what, r.status);
        su_resp_free(&r);
    }
    /* 8 requests for the FIFO at once (more than the server's 4 threads), then /healthz */
    {
        int fds[8];
        char req[200];
        su_resp r;
        int n = snprintf(req, sizeof req, "GET /api/file/%lld HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                         (long long)fifo_id);
        for (int i = 0; i < 8; i++) {
            fds[i] = su_connect(g_srv.port);
            CHECK(fds[i] >= 0 && su_send_all(fds[i], req, (size_t)n) == 0);
        }
        int64_t t0 = cdb_now_ns();
        int fd = su_connect(g_srv.port);
        CHECK(fd >= 0);
        CHECK_EQ_INT(su_request_on(fd, "GET", "/healthz", NULL, NULL, 0, &r, 1000), 0);
        close(fd);
        CHECK_EQ_INT(r.status, 200);
        CHECK(cdb_now_ns() - t0 < 1000000000LL);
        su_resp_free(&r);
        for (int i = 0; i < 8; i++) {
            CHECK_EQ_INT(su_read_resp(fds[i], &r, DEADLINE_MS), 0);
            CHECK(check_file_answer(&r, fifo_id, 409));
            su_resp_free(&r);
            close(fds[i]);
        }
    }
    /* /metadata: metadata for what is there, the error of the others */
    {
        char body[400];
        size_t n = (size_t)snprintf(body, sizeof body, "{\"ids\": [");
        su_resp r;
        json_error_t e;
        json_t *doc;
        for (int i = 0; i < N_SWAPS; i++)
            n += (size_t)snprintf(body + n, sizeof body - n, "%s%lld", i ? ", " : "",
                                  (long long)ids[i]);
        snprintf(body + n, sizeof body - n, "]}");
        int fd = su_connect(g_srv.port);
        CHECK(fd >= 0);
        CHECK_EQ_INT(su_request_on(fd, "POST", "/metadata", "Content-Type: application/json\r\n",
                                   body, strlen(body), &r, DEADLINE_MS),
                     0);
        close(fd);
        CHECK_EQ_INT(r.status, 200);
        doc = json_loadb(r.body, r.len, 0, &e);
        CHECK_EQ_INT(json_array_size(doc), N_SWAPS);
        for (int i = 0; i < N_SWAPS; i++) {
            json_t *x = json_array_get(doc, (size_t)i), *m = json_object_get(x, "metadata");
            CHECK_EQ_INT(json_integer_value(json_object_get(x, "id")), ids[i]);
            if (k_swaps[i].status == 200) {
                CHECK_MSG(json_is_object(m), "%s: no metadata", k_swaps[i].what);
            } else {
                CHECK_MSG(json_is_null(m), "%s: metadata", k_swaps[i].what);
                CHECK_EQ_INT(json_integer_value(json_object_get(x, "status")), k_swaps[i].status);
                CHECK(json_is_string(json_object_get(json_object_get(x, "error"), "message")));
            }
        }
        json_decref(doc);
        su_resp_free(&r);
    }
    /* thumbnails (stored at ingest) still answer, and fast */
    for (int i = 0; i < N_SWAPS; i++) {
        char path[64];
        su_resp r;
        snprintf(path, sizeof path, "/api/thumb/%lld", (long long)ids[i]);
        CHECK_MSG(get(path, NULL, &r) == 0, "thumb %s: no answer", k_swaps[i].what);
        CHECK(r.status == 200 || r.status == 404 || r.status == 409);
        su_resp_free(&r);
    }
    /* the library API says the same */
    for (int i = 0; i < N_SWAPS; i++) {
        cdb_engine_file f;
        int fd = -1;
        cdb_status st = cdb_engine_file_open(g_e, ids[i], &f, &fd);
        if (k_swaps[i].status == 200) {
            CHECK_OK(st);
            CHECK(fd >= 0);
            close(fd);
            cdb_engine_file_clear(&f);
        } else {
            CHECK_EQ_INT(st, CDB_NOTFOUND);
            CHECK_EQ_INT(fd, -1);
            CHECK_EQ_INT(cdb_engine_errcode(), k_swaps[i].status == 404 ? CDB_ENGINE_E_FILE_GONE
                                                                        : CDB_ENGINE_E_FILE_CHANGED);
        }
    }
    /* verify --deep reads every photo the same way: it ends, FIFO and all */
    {
        cli_run_result r;
        int rc = lu_run((const char *[]){"verify", "--deep", "--db", g_db, NULL}, &r);
        CHECK_MSG(rc == 0, "verify --deep: exit %d: %s %s", rc, r.out, r.err);
        cli_run_free(&r);
    }
}

static void teardown(void) {
    if (g_srv.pid > 0) su_stop(&g_srv);
    cdb_engine_close(g_e);
    for (int i = 0; i <= N_PHOTOS; i++) {
        free(g_path[i]);
        free(g_bytes[i]);
    }
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, originals_exact, ranges, disposition, swapped_photos);
    int rc = cdb_test_run_(tests, CDB_TEST_N(tests), argc, argv);
    teardown();
    if (lu_tmp[0] && rc == 0) lu_rm_rf(lu_tmp);
    return rc;
}
