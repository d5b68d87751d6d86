/*
** hub_server.h: a Hugging Face Hub stand-in for the tests, on 127.0.0.1 (libmicrohttpd,
** an ephemeral port), serving the Hub's URL layout:
**
**   GET  /api/models/ORG/NAME/revision/REV   {"sha": COMMIT, "siblings": [...]}
**   HEAD|GET /ORG/NAME/resolve/REV/FILE      small files: 200, ETag = git blob sha1;
**                                            LFS files: 302 to /cdn/ORG/NAME/SHA256 with
**                                            X-Linked-Etag and X-Linked-Size
**   GET  /cdn/ORG/NAME/SHA256                the bytes; Range: bytes=N- gives 206
**
** Every response of the repository carries X-Repo-Commit. The repositories:
**   org/tiny      the bundled model's files (+ files a model does not need)
**   org/private   the same, 401 without "Authorization: Bearer secret-token"
**   org/missing   404 RepoNotFound; any revision but main or the commit: RevisionNotFound
**   org/drop      its weights' first GET drops the connection halfway
**   org/corrupt   its CDN sends the weights with one byte changed
**   org/huge      its weights say they are 10^15 bytes
**   org/liesize   its weights' size is said (X-Linked-Size, a sha256 ETag), and its CDN
**                 streams them chunked, with no length, then HS_FLOOD bytes more
**   org/nosize    no size and a non-hash ETag for any file (chunked, no Content-Length);
**                 its weights are followed by HS_FLOOD bytes more
**   org/sametag   every file served whole (with its length) under one non-hash ETag
** The bytes sent past a file's end (org/liesize, org/nosize) are counted in flood_sent:
** a client that stops at the size stops them early.
** Every request is logged ("METHOD PATH|range|auth") for the tests to read.
*/
#ifndef CDB_TEST_HUB_SERVER_H
#define CDB_TEST_HUB_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HS_COMMIT "0123456789abcdef0123456789abcdef01234567"
#define HS_MAX_LOG 512
#define HS_FLOOD ((size_t)160 << 20)

typedef struct hs_file {
    const char *name;
    char *data;
    size_t len;
    int lfs;
    char etag[72]; /* sha256 (LFS) or git blob sha1 */
} hs_file;

typedef struct hub_server {
    struct MHD_Daemon *d;
    int port;
    hs_file files[8];
    int n_files;
    pthread_mutex_t mu;
    char *log[HS_MAX_LOG];
    int n_log;
    int drops_left; /* org/drop: connections still to drop */
    size_t flood_sent; /* bytes sent past a file's end (under mu) */
    struct sockaddr_in addr;
} hub_server;

static void hs_hex(const unsigned char *md, unsigned n, char *out) {
    for (unsigned i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", md[i]);
}

static void hs_digest(const char *data, size_t len, int lfs, char *out) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_MD_CTX *x = EVP_MD_CTX_new();
    EVP_DigestInit_ex(x, lfs ? EVP_sha256() : EVP_sha1(), NULL);
    if (!lfs) {
        char head[64];
        int hl = snprintf(head, sizeof head, "blob %zu", len);
        EVP_DigestUpdate(x, head, (size_t)hl + 1);
    }
    EVP_DigestUpdate(x, data, len);
    EVP_DigestFinal_ex(x, md, &n);
    EVP_MD_CTX_free(x);
    hs_hex(md, n, out);
}

static char *hs_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *b;
    long n;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void hs_add(hub_server *s, const char *name, char *data, size_t len, int lfs) {
    hs_file *f = &s->files[s->n_files++];
    f->name = name;
    f->data = data;
    f->len = len;
    f->lfs = lfs;
    hs_digest(data, len, lfs, f->etag);
}

static const hs_file *hs_find(const hub_server *s, const char *name) {
    for (int i = 0; i < s->n_files; i++)
        if (!strcmp(s->files[i].name, name)) return &s->files[i];
    return NULL;
}

static const hs_file *hs_by_etag(const hub_server *s, const char *etag) {
    for (int i = 0; i < s->n_files; i++)
        if (!strcmp(s->files[i].etag, etag)) return &s->files[i];
    return NULL;
}

static enum MHD_Result hs_send(struct MHD_Connection *c, unsigned status, const char *body,
                               const char *const *hdrs) {
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body,
                                                             MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret;
    for (int i = 0; hdrs && hdrs[i]; i += 2) MHD_add_response_header(r, hdrs[i], hdrs[i + 1]);
    MHD_add_response_header(r, "X-Repo-Commit", HS_COMMIT);
    ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* A body streamed: len bytes of data, then extra zeros (counted in s->flood_sent); the
** connection dropped at byte cut (SIZE_MAX: never). */
typedef struct hs_stream {
    hub_server *s;
    const char *data;
    size_t len, extra, cut;
} hs_stream;

static ssize_t hs_stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    hs_stream *f = cls;
    size_t n;
    if (pos >= f->cut) return MHD_CONTENT_READER_END_WITH_ERROR; /* connection dropped */
    if (pos >= f->len + f->extra) return MHD_CONTENT_READER_END_OF_STREAM;
    n = f->len + f->extra - (size_t)pos;
    if (n > max) n = max;
    if (n > f->cut - (size_t)pos) n = f->cut - (size_t)pos;
    if (pos < f->len) {
        if (n > f->len - (size_t)pos) n = f->len - (size_t)pos;
        memcpy(buf, f->data + pos, n);
        return (ssize_t)n;
    }
    memset(buf, 0, n);
    pthread_mutex_lock(&f->s->mu);
    f->s->flood_sent += n;
    pthread_mutex_unlock(&f->s->mu);
    return (ssize_t)n;
}

/* f's bytes, then extra zeros, with no length; headers h (name, value ...). */
static enum MHD_Result hs_send_flood(hub_server *s, struct MHD_Connection *c, const hs_file *f,
                                     size_t extra, const char *const *h) {
    hs_stream *fl = calloc(1, sizeof *fl);
    struct MHD_Response *r;
    enum MHD_Result ret;
    fl->s = s;
    fl->data = f->data;
    fl->len = f->len;
    fl->extra = extra;
    fl->cut = SIZE_MAX;
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, hs_stream_reader, fl, free);
    for (int i = 0; h && h[i]; i += 2) MHD_add_response_header(r, h[i], h[i + 1]);
    MHD_add_response_header(r, "X-Repo-Commit", HS_COMMIT);
    ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result hs_handle(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_len, void **state) {
    hub_server *s = cls;
    const char *range = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char org[64] = "", name[64] = "", rev[128] = "", file[256] = "", line[700];
    int authed = auth && !strcmp(auth, "Bearer secret-token");
    (void)version;
    (void)upload;
    (void)upload_len;
    if (!*state) { /* the headers: answer on the second call */
        *state = s;
        return MHD_YES;
    }
    snprintf(line, sizeof line, "%s %s|%s|%s", method, url, range ? range : "",
             auth ? auth : "");
    pthread_mutex_lock(&s->mu);
    if (s->n_log < HS_MAX_LOG) s->log[s->n_log++] = strdup(line);
    pthread_mutex_unlock(&s->mu);

    if (sscanf(url, "/api/models/%63[^/]/%63[^/]/revision/%127s", org, name, rev) == 3) {
        char repo[140], body[2048];
        int k;
        snprintf(repo, sizeof repo, "%s/%s", org, name);
        if (!strcmp(repo, "org/missing")) {
            const char *h[] = {"X-Error-Code", "RepoNotFound", "X-Error-Message",
                               "Repository not found", NULL};
            return hs_send(c, 404, "{\"error\":\"Repository not found\"}", h);
        }
        if (!strcmp(repo, "org/private") && !authed) {
            const char *h[] = {"X-Error-Message", "Invalid username or password.", NULL};
            return hs_send(c, 401, "{\"error\":\"Invalid username or password.\"}", h);
        }
        if (strcmp(rev, "main") && strcmp(rev, HS_COMMIT)) {
            const char *h[] = {"X-Error-Code", "RevisionNotFound", "X-Error-Message",
                               "Invalid rev id", NULL};
            return hs_send(c, 404, "{\"error\":\"Invalid rev id\"}", h);
        }
        k = snprintf(body, sizeof body, "{\"id\":\"%s\",\"sha\":\"%s\",\"siblings\":[", repo,
                     HS_COMMIT);
        for (int i = 0; i < s->n_files; i++)
            k += snprintf(body + k, sizeof body - (size_t)k, "%s{\"rfilename\":\"%s\"}",
                          i ? "," : "", s->files[i].name);
        snprintf(body + k, sizeof body - (size_t)k, "]}");
        return hs_send(c, 200, body, NULL);
    }
    if (sscanf(url, "/%63[^/]/%63[^/]/resolve/%127[^/]/%255s", org, name, rev, file) == 4) {
        char repo[140], loc[512], size[32], etag[80];
        const hs_file *f = hs_find(s, file);
        snprintf(repo, sizeof repo, "%s/%s", org, name);
        if (!strcmp(repo, "org/private") && !authed) return hs_send(c, 401, "", NULL);
        if (strcmp(rev, HS_COMMIT)) {
            const char *h[] = {"X-Error-Code", "RevisionNotFound", NULL};
            return hs_send(c, 404, "", h);
        }
        if (!f) {
            const char *h[] = {"X-Error-Code", "EntryNotFound", NULL};
            return hs_send(c, 404, "", h);
        }
        snprintf(etag, sizeof etag, "\"%s\"", f->etag);
        if (!strcmp(repo, "org/nosize")) { /* one non-hash ETag per file: its blob's name */
            char tag[32];
            snprintf(tag, sizeof tag, "\"nohash%d\"", (int)(f - s->files));
            /* closed after: MHD ends a HEAD of no length with a stray chunk terminator */
            const char *h[] = {"ETag", tag, "Connection", "close", NULL};
            return hs_send_flood(s, c, f, f->lfs ? HS_FLOOD : 0, h);
        }
        if (!strcmp(repo, "org/sametag")) /* one non-hash ETag for every file */
            snprintf(etag, sizeof etag, "\"sametag\"");
        if (f->lfs && strcmp(repo, "org/sametag")) {
            /* another origin than the endpoint, as the Hub's CDN is */
            snprintf(loc, sizeof loc, "http://localhost:%d/cdn/%s/%s", s->port, repo, f->etag);
            snprintf(size, sizeof size, "%zu", !strcmp(repo, "org/huge") ? (size_t)1e15 : f->len);
            const char *h[] = {"Location", loc, "X-Linked-Etag", etag, "X-Linked-Size", size,
                               "ETag", "\"not-the-blob\"", NULL};
            return hs_send(c, 302, "", h);
        }
        {
            struct MHD_Response *r = MHD_create_response_from_buffer(f->len, f->data,
                                                                     MHD_RESPMEM_PERSISTENT);
            enum MHD_Result ret;
            MHD_add_response_header(r, "ETag", etag);
            MHD_add_response_header(r, "X-Repo-Commit", HS_COMMIT);
            ret = MHD_queue_response(c, 200, r);
            MHD_destroy_response(r);
            return ret;
        }
    }
    if (sscanf(url, "/cdn/%63[^/]/%63[^/]/%127s", org, name, rev) == 3) {
        const hs_file *f = hs_by_etag(s, rev);
        size_t from = 0;
        struct MHD_Response *r;
        enum MHD_Result ret;
        int drop = 0;
        char repo[140];
        snprintf(repo, sizeof repo, "%s/%s", org, name);
        if (!f) return hs_send(c, 404, "", NULL);
        if (!strcmp(repo, "org/liesize")) return hs_send_flood(s, c, f, HS_FLOOD, NULL);
        if (range && sscanf(range, "bytes=%zu-", &from) != 1) from = 0;
        if (from > f->len) return hs_send(c, 416, "", NULL);
        pthread_mutex_lock(&s->mu);
        if (!strcmp(repo, "org/drop") && s->drops_left > 0) {
            s->drops_left--;
            drop = 1;
        }
        pthread_mutex_unlock(&s->mu);
        if (drop) {
            static hs_stream d;
            d.data = f->data + from;
            d.len = f->len - from;
            d.cut = d.len / 2;
            r = MHD_create_response_from_callback(d.len, 32768, hs_stream_reader, &d, NULL);
        } else if (!strcmp(repo, "org/corrupt")) {
            char *bad = malloc(f->len - from + 1);
            memcpy(bad, f->data + from, f->len - from);
            bad[(f->len - from) / 3] ^= 0x55;
            r = MHD_create_response_from_buffer(f->len - from, bad, MHD_RESPMEM_MUST_FREE);
        } else {
            r = MHD_create_response_from_buffer(f->len - from, f->data + from,
                                                MHD_RESPMEM_PERSISTENT);
        }
        if (from) {
            char cr[96];
            snprintf(cr, sizeof cr, "bytes %zu-%zu/%zu", from, f->len - 1, f->len);
            MHD_add_response_header(r, "Content-Range", cr);
        }
        ret = MHD_queue_response(c, from ? 206 : 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    return hs_send(c, 404, "", NULL);
}

/* Starts the server over the files of model_dir; 0 or -1. */
static int hs_start(hub_server *s, const char *model_dir) {
    static const char *names[] = {"open_clip_config.json", "vocab.json", "merges.txt",
                                  "model.safetensors"};
    const union MHD_DaemonInfo *di;
    char path[4096];
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    for (int i = 0; i < 4; i++) {
        size_t len;
        char *b;
        snprintf(path, sizeof path, "%s/%s", model_dir, names[i]);
        if (!(b = hs_slurp(path, &len))) return -1;
        hs_add(s, names[i], b, len, i == 3);
    }
    /* files a model does not need: never to be asked for */
    hs_add(s, "pytorch_model.bin", strdup("not safetensors"), 15, 1);
    hs_add(s, "README.md", strdup("# tiny\n"), 7, 0);
    hs_add(s, "onnx/model.onnx", strdup("onnx"), 4, 1);
    s->drops_left = 1;
    memset(&s->addr, 0, sizeof s->addr);
    s->addr.sin_family = AF_INET;
    s->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                                MHD_USE_ERROR_LOG,
                            0, NULL, NULL, hs_handle, s, MHD_OPTION_SOCK_ADDR, &s->addr,
                            MHD_OPTION_END);
    if (!s->d) return -1;
    di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : 0;
    return s->port ? 0 : -1;
}

static void hs_clear_log(hub_server *s) {
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_log; i++) free(s->log[i]);
    s->n_log = 0;
    pthread_mutex_unlock(&s->mu);
}

/* How many logged requests contain all of the (up to two) strings given. */
static int hs_count(hub_server *s, const char *a, const char *b) {
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_log; i++)
        if (strstr(s->log[i], a) && (!b || strstr(s->log[i], b))) n++;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void hs_stop(hub_server *s) {
    if (s->d) MHD_stop_daemon(s->d);
    hs_clear_log(s);
    for (int i = 0; i < s->n_files; i++) free(s->files[i].data);
    pthread_mutex_destroy(&s->mu);
}

#endif /* CDB_TEST_HUB_SERVER_H */
