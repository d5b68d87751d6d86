/*
** fuzz_serve.c: libFuzzer target for the request handling of `clipdb serve`
** (serve/api.c, serve/clip_retrieval.c, serve/json.c through cdb_srv_handle): every route
** with fuzzed methods, paths, query arguments, headers and bodies (JSON for search,
** knn-service, metadata and login; base64 images; ids), over a real engine on a small
** database made once at start (a dozen PPM pictures written here, the bundled model).
**
** Input: fields separated by NUL bytes: method, path, query ("k=v&k2=v2", decoded as
** the HTTP layer would), Host, If-None-Match, then the body (the rest, NULs included).
** Invariants: a response always has a status in 100..599 and, unless 204/304 or a
** file, a body; JSON responses parse; an error status carries {"error": {"code",
** "message"}}; a file response only ever opens a file the catalog holds.
*/
#include <dirent.h>
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "fuzz_util.h"
#include "ingest_util.h"
#include "serve/serve_int.h"

static cdb_engine *g_e;
static srv_ctx g_ctx;
static char g_lib[512];

/* n binary PPM pictures of colored blocks in dir (no image library involved). */
static int write_pictures(const char *dir, int n) {
    if (mkdir(dir, 0755) != 0) return -1;
    for (int k = 0; k < n; k++) {
        char path[700];
        int w = 48 + 8 * k, h = 40 + 5 * k;
        FILE *f;
        snprintf(path, sizeof path, "%s/pic_%02d.ppm", dir, k);
        if (!(f = fopen(path, "wb"))) return -1;
        fprintf(f, "P6\n%d %d\n255\n", w, h);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int in = (x / 12 + y / 10 + k) % 3;
                unsigned char px[3] = {(unsigned char)(in == 0 ? 220 : 30 + 17 * k),
                                       (unsigned char)(in == 1 ? 200 : 60),
                                       (unsigned char)(in == 2 ? 210 : 90 + 9 * k)};
                fwrite(px, 1, 3, f);
            }
        if (fclose(f) != 0) return -1;
    }
    return 0;
}

static const char *bundled_model(void) {
    static char path[4096];
    char dir[2048];
    struct dirent *d;
    DIR *md;
    snprintf(dir, sizeof dir, "%s/models", CDB_SOURCE_DIR);
    if (!(md = opendir(dir))) return NULL;
    while ((d = readdir(md))) {
        char p[4200];
        if (d->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s/model.safetensors", dir, d->d_name);
        if (access(p, R_OK) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
            closedir(md);
            return path;
        }
    }
    closedir(md);
    return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char db[600];
    const char *tmp = fuzz_tmpdir("serve"), *model = bundled_model();
    cdb_engine_params ep = cdb_engine_params_default();
    cdb_engine_run_params rp = cdb_engine_run_params_default();
    (void)argc, (void)argv;
    fuzz_quiet();
    if (!model) {
        fprintf(stderr, "fuzz_serve: no bundled model under %s/models\n", CDB_SOURCE_DIR);
        abort();
    }
    snprintf(g_lib, sizeof g_lib, "%s/photos", tmp);
    snprintf(db, sizeof db, "%s/db", tmp);
    ep.writer = 1;
    ep.device.kind = CDB_K_DEVICE_CPU;
    rp.threads = 1;
    if (write_pictures(g_lib, 12) != 0 || cdb_engine_create(db, model, NULL) != CDB_OK ||
        cdb_engine_open(db, &ep, &g_e) != CDB_OK ||
        cdb_test_ingest(g_e, g_lib, &rp, NULL) != CDB_OK) {
        fprintf(stderr, "fuzz_serve: cannot make the database: %s\n", cdb_errmsg());
        abort();
    }
    cdb_engine_close(g_e);
    ep.writer = 0;
    if (cdb_engine_open(db, &ep, &g_e) != CDB_OK ||
        cdb_engine_load_model(g_e, NULL, 1, 1, &g_ctx.model) != CDB_OK) {
        fprintf(stderr, "fuzz_serve: cannot open the database: %s\n", cdb_errmsg());
        abort();
    }
    g_ctx.e = g_e;
    g_ctx.default_k = 10;
    g_ctx.have_token = 1;
    g_ctx.token = "fuzz-token-0123456789abcdef";
    g_ctx.bind_host = "127.0.0.1";
    g_ctx.port = 8765;
    g_ctx.cors_origin = "http://front.example";
    return 0;
}

/* The next NUL-terminated field of [*p, end), or what is left. */
static char *field(char **p, char *end) {
    char *s = *p, *z = memchr(s, 0, (size_t)(end - s));
    *p = z ? z + 1 : end;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *buf = malloc(n + 1), *p, *end, *query;
    srv_req r;
    srv_resp o;
    if (!buf) return 0;
    memcpy(buf, data, n);
    buf[n] = 0;
    p = buf;
    end = buf + n;
    memset(&r, 0, sizeof r);
    r.method = field(&p, end);
    r.path = p < end ? field(&p, end) : "/";
    query = p < end ? field(&p, end) : "";
    r.host = p < end ? field(&p, end) : NULL;
    r.if_none_match = p < end ? field(&p, end) : NULL;
    r.body = p < end ? p : "";
    r.body_len = p < end ? (size_t)(end - p) : 0;
    /* "k=v&k2=v2" into arguments, in place (the HTTP layer decodes them) */
    for (char *a = query; *a && r.n_args < SRV_MAX_ARGS;) {
        char *amp = strchr(a, '&'), *eq;
        if (amp) *amp = 0;
        eq = strchr(a, '=');
        if (eq) *eq = 0;
        r.keys[r.n_args] = a;
        r.vals[r.n_args++] = eq ? eq + 1 : "";
        if (!amp) break;
        a = amp + 1;
    }
    cdb_srv_handle(&g_ctx, &r, &o);
    FUZZ_CHECK(o.status >= 100 && o.status <= 599, "status %d", o.status);
    if (o.fd >= 0) {
        FUZZ_CHECK(o.fd_size >= 0, "file size %lld", (long long)o.fd_size);
        FUZZ_CHECK(!strncmp(r.path, "/api/file/", 10), "a file for %s", r.path);
        close(o.fd);
    } else if (o.status != 204 && o.status != 304) {
        const char *b = o.body ? o.body : (const char *)o.static_body;
        FUZZ_CHECK(b != NULL && o.content_type != NULL, "status %d without a body", o.status);
        if (!strncmp(o.content_type, "application/json", 16)) {
            json_error_t e;
            json_t *doc = json_loadb(b, o.len, 0, &e);
            FUZZ_CHECK(doc != NULL, "invalid JSON: %s", e.text);
            if (o.status >= 400)
                FUZZ_CHECK(json_is_string(json_object_get(json_object_get(doc, "error"), "code")),
                           "an error without a code: %.200s", b);
            json_decref(doc);
        }
    }
    cdb_srv_resp_clear(&o);
    free(buf);
    return 0;
}
