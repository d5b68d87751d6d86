/*
** hub.c: models from the Hugging Face Hub, into huggingface_hub's own cache (contract in
** engine/engine.h, "models from the Hugging Face Hub"). The layout and the environment
** follow huggingface_hub (constants.py, file_download.py, _snapshot_download.py):
**
** - the revision API (/api/models/REPO/revision/REV) names the commit and the files;
**   refs/REV gets the commit (tmp file + rename), unless REV is the commit;
** - per file, a HEAD of /REPO/resolve/COMMIT/FILE, following only same-host redirects,
**   gives the blob's name (X-Linked-Etag, else ETag, normalized), its size
**   (X-Linked-Size, else Content-Length) and where the bytes are (Location: a CDN);
** - the bytes go to blobs/ETAG.incomplete under the lock .locks/models--ORG--NAME/
**   ETAG.lock (flock, as the filelock package takes it), resumed with Range, checked
**   (a 64-hex ETag is the file's sha256, a 40-hex one its git blob sha1), then renamed
**   to blobs/ETAG; snapshots/COMMIT/FILE is a relative symlink ../../blobs/ETAG.
**
** Where this differs from huggingface_hub: its current version downloads into a
** process-unique blobs/ETAG.<random>.incomplete and deletes it on failure; clipdb keeps
** the one blobs/ETAG.incomplete its older versions used, under the same lock, so that a
** download cut short (a dropped connection, Ctrl-C, a full disk) resumes where it
** stopped. Neither leaves a partial file under a blob's or a snapshot's name. Weights
** are fetched after the configs and tokenizer files, so a snapshot holding its weights is
** complete (what cache_first and HF_HUB_OFFLINE rely on).
*/
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* calls go through cu (a table of function pointers): no type-checking macros */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>
#include <openssl/evp.h>

#include "engine/base/base.h"
#include "engine/hub/hub_int.h"

#define HUB_DEFAULT_ENDPOINT "https://huggingface.co"
#define HUB_API_MAX_BYTES (32 << 20)
#define HUB_MAX_TRIES 6 /* attempts at one file without a byte of progress */
/* The most bytes taken of a file whose size the server did not say (neither X-Linked-Size
** nor Content-Length, which the Hub always sends): every config and tokenizer file fits
** (the largest, Gemma's tokenizer.json, has 33 MB), and a server that streams without end
** cannot fill the disk. Weights (hundreds of MB) need their size said. */
#define HUB_UNSIZED_MAX ((int64_t)64 << 20)

/* snprintf for paths and messages: a result that does not fit is "" and -1 (a cut path
** must never name another file). */
static int pathf(char *out, size_t cap, const char *fmt, ...) CDB_PRINTF(3, 4);
static int pathf(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap) {
        out[0] = '\0';
        return -1;
    }
    return 0;
}

#define PATH_TOO_LONG() cdb_seterr(CDB_INVALID, "a path in the cache %s is too long", c->cache)

/* ---- the known models ---------------------------------------------------------------- */

/* Sizes are those of the files fetched (the Hub's listing, rounded); RAM is what the
** weights take loaded in fp32 on the CPU. Recall: Immich's published Crossmodal-3600
** figures (issue 26); "-" where none is published for the model. */
static const cdb_engine_hub_model g_known[] = {
    {"ViT-B-32", "openai/clip-vit-base-patch32", "605 MB", "0.6 GB", "59.4", NULL},
    {"ViT-B-16", "openai/clip-vit-base-patch16", "599 MB", "0.6 GB", "-", NULL},
    {"ViT-L-14", "openai/clip-vit-large-patch14", "1.7 GB", "1.7 GB", "-", NULL},
    {"ViT-B-32-SigLIP2-256", "google/siglip2-base-patch32-256", "1.5 GB", "1.5 GB", "73.2", NULL},
    {"ViT-B-16-SigLIP2", "google/siglip2-base-patch16-224", "1.5 GB", "1.5 GB", "75.2", NULL},
    {"ViT-SO400M-16-SigLIP2-384", "google/siglip2-so400m-patch16-384", "4.5 GB", "4.5 GB", "-",
     NULL},
};

const cdb_engine_hub_model *cdb_engine_hub_known(int *n_out) {
    *n_out = (int)(sizeof g_known / sizeof g_known[0]);
    return g_known;
}

static const cdb_engine_hub_model *known_by_name(const char *name) {
    for (size_t i = 0; i < sizeof g_known / sizeof g_known[0]; i++)
        if (!strcasecmp(g_known[i].name, name)) return &g_known[i];
    return NULL;
}

cdb_engine_hub_params cdb_engine_hub_params_default(void) { return (cdb_engine_hub_params){0}; }

/* ---- the environment, as huggingface_hub reads it ---------------------------------------- */

typedef struct hub_ctx {
    char endpoint[1024];  /* no trailing '/' */
    char origin[1024];    /* scheme://host[:port] of the endpoint */
    char token[2048];     /* "" when none */
    int offline;
    char cache[PATH_MAX];
    char repo[128];
    char storage[PATH_MAX]; /* <cache>/models--ORG--NAME */
    char rev[256];
    cdb_engine_hub_params *p;
    CURL *curl;
    char curl_err[CURL_ERROR_SIZE];
} hub_ctx;

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* constants._is_true: 1, ON, YES, TRUE in any case. */
static int env_true(const char *name) {
    const char *v = getenv(name);
    return v && (!strcasecmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "true"));
}

static const char *home_dir(void) {
    const char *h = env("HOME");
    struct passwd *pw;
    if (h) return h;
    pw = getpwuid(getuid());
    return pw && pw->pw_dir ? pw->pw_dir : "/";
}

/* os.path.expanduser for "~" and "~/...". */
static void expand_user(const char *in, char *out, size_t cap) {
    if (in[0] == '~' && (in[1] == '\0' || in[1] == '/'))
        snprintf(out, cap, "%s%s", home_dir(), in + 1);
    else
        snprintf(out, cap, "%s", in);
}

static void hf_home(char *out, size_t cap) {
    char tmp[PATH_MAX];
    const char *v = env("HF_HOME"), *xdg = env("XDG_CACHE_HOME");
    if (v) {
        expand_user(v, out, cap);
    } else {
        if (xdg) snprintf(tmp, sizeof tmp, "%s/huggingface", xdg);
        else snprintf(tmp, sizeof tmp, "%s/.cache/huggingface", home_dir());
        expand_user(tmp, out, cap);
    }
}

static void cache_dir(char *out, size_t cap) {
    const char *v = env("HF_HUB_CACHE");
    char home[PATH_MAX];
    if (!v) v = env("HUGGINGFACE_HUB_CACHE");
    if (v) {
        expand_user(v, out, cap);
        return;
    }
    hf_home(home, sizeof home);
    pathf(out, cap, "%s/hub", home);
}

/* utils/_auth.get_token: $HF_TOKEN, $HUGGING_FACE_HUB_TOKEN, then the token file; each
** stripped of white space, empty meaning none. */
static cdb_status read_token(char *out, size_t cap) {
    const char *v = env("HF_TOKEN");
    char path[PATH_MAX], home[PATH_MAX], buf[2048];
    size_t a, b;
    buf[0] = '\0';
    if (!v) v = env("HUGGING_FACE_HUB_TOKEN");
    if (v) {
        snprintf(buf, sizeof buf, "%s", v);
    } else {
        FILE *f;
        if ((v = env("HF_TOKEN_PATH"))) {
            expand_user(v, path, sizeof path);
        } else {
            hf_home(home, sizeof home);
            pathf(path, sizeof path, "%s/token", home);
        }
        if ((f = fopen(path, "r"))) {
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = '\0';
            fclose(f);
        }
    }
    for (a = 0; buf[a] == ' ' || buf[a] == '\t' || buf[a] == '\n' || buf[a] == '\r'; a++) {}
    for (b = strlen(buf); b > a && (buf[b - 1] == ' ' || buf[b - 1] == '\t' ||
                                    buf[b - 1] == '\n' || buf[b - 1] == '\r'); b--) {}
    for (size_t i = a; i < b; i++)
        if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f)
            return cdb_seterr(CDB_INVALID, "the Hugging Face token (HF_TOKEN) holds a character "
                              "no token has");
    snprintf(out, cap, "%.*s", (int)(b - a), buf + a);
    return CDB_OK;
}

static cdb_status ctx_init(hub_ctx *c, const char *repo, const char *rev,
                           cdb_engine_hub_params *p) {
    const char *ep = env("HF_ENDPOINT");
    const char *sch;
    size_t n;
    memset(c, 0, sizeof *c);
    c->p = p;
    snprintf(c->endpoint, sizeof c->endpoint, "%s", ep ? ep : HUB_DEFAULT_ENDPOINT);
    for (n = strlen(c->endpoint); n > 0 && c->endpoint[n - 1] == '/'; n--) c->endpoint[n - 1] = 0;
    if (strncmp(c->endpoint, "https://", 8) && strncmp(c->endpoint, "http://", 7))
        return cdb_seterr(CDB_INVALID, "HF_ENDPOINT '%s' is not an http(s) URL", c->endpoint);
    sch = strstr(c->endpoint, "://") + 3;
    n = strcspn(sch, "/");
    snprintf(c->origin, sizeof c->origin, "%.*s", (int)(sch - c->endpoint + (ptrdiff_t)n),
             c->endpoint);
    c->offline = env_true("HF_HUB_OFFLINE") || env_true("TRANSFORMERS_OFFLINE");
    cache_dir(c->cache, sizeof c->cache);
    snprintf(c->repo, sizeof c->repo, "%s", repo);
    snprintf(c->rev, sizeof c->rev, "%s", rev);
    /* repo_folder_name: "models" + the id's parts, joined by "--" */
    n = (size_t)snprintf(c->storage, sizeof c->storage, "%s/models--", c->cache);
    for (const char *s = repo; *s && n + 3 < sizeof c->storage; s++) {
        if (*s == '/') {
            c->storage[n++] = '-';
            c->storage[n++] = '-';
        } else {
            c->storage[n++] = *s;
        }
    }
    c->storage[n] = '\0';
    return read_token(c->token, sizeof c->token);
}

/* ---- files ----------------------------------------------------------------------------- */

static cdb_status mkdirs(const char *path) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *s = tmp + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
            return cdb_seterr(cdb_errno_status(errno), "cannot create %s: %s", tmp, strerror(errno));
        *s = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
        return cdb_seterr(cdb_errno_status(errno), "cannot create %s: %s", tmp, strerror(errno));
    return CDB_OK;
}

static cdb_status mkdirs_parent(const char *path) {
    char tmp[PATH_MAX];
    char *slash;
    snprintf(tmp, sizeof tmp, "%s", path);
    if (!(slash = strrchr(tmp, '/')) || slash == tmp) return CDB_OK;
    *slash = '\0';
    return mkdirs(tmp);
}

static int is_regular(const char *path) { /* following links */
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Writes text to path through a temporary file and a rename (a reader never sees half). */
static cdb_status write_atomic(const char *path, const char *text) {
    char tmp[PATH_MAX + 32];
    size_t len = strlen(text);
    int fd, e;
    cdb_status rc;
    if ((rc = mkdirs_parent(path)) != CDB_OK) return rc;
    if ((fd = cdb_tmp_create(path, tmp, sizeof tmp)) < 0) /* never a planted link */
        return cdb_seterr(cdb_errno_status(errno), "cannot write a temporary beside %s: %s", path,
                          strerror(errno));
    if (write(fd, text, len) != (ssize_t)len || close(fd) != 0) {
        e = errno ? errno : EIO;
        unlink(tmp);
        return cdb_seterr(cdb_errno_status(e), "cannot write %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return cdb_seterr(cdb_errno_status(e), "cannot write %s: %s", path, strerror(e));
    }
    return CDB_OK;
}

/* The commit refs/<rev> holds ("" when none or not a commit). */
static void read_ref(const hub_ctx *c, char commit[41]) {
    char path[PATH_MAX + 300], buf[64];
    FILE *f;
    size_t n;
    commit[0] = '\0';
    snprintf(path, sizeof path, "%s/refs/%s", c->storage, c->rev);
    if (!(f = fopen(path, "r"))) return;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r')) n--;
    buf[n] = '\0';
    if (cdb_hub_is_commit(buf)) memcpy(commit, buf, 41);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static cdb_status read_small_file(const char *path, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!f) return cdb_seterr(cdb_errno_status(errno), "cannot read %s: %s", path, strerror(errno));
    for (;;) {
        size_t got;
        if (n + 65536 > cap) {
            char *nb;
            if (cap >= HUB_API_MAX_BYTES || !(nb = realloc(buf, cap ? cap * 2 : 65536))) {
                free(buf);
                fclose(f);
                return cdb_seterr(CDB_TOO_LARGE, "%s is too large", path);
            }
            buf = nb;
            cap = cap ? cap * 2 : 65536;
        }
        if ((got = fread(buf + n, 1, cap - n, f)) == 0) break;
        n += got;
    }
    fclose(f);
    *out = buf;
    *len = n;
    return CDB_OK;
}

/* Whether snapshot folder dir is complete enough to use without the server: its weights
** are there (fetched last), and every shard its index names. */
static int snapshot_usable(const char *dir) {
    char path[PATH_MAX + 64];
    char *json = NULL, **shards = NULL;
    size_t len;
    int n = 0, ok;
    pathf(path, sizeof path, "%s/open_clip_model.safetensors", dir);
    if (is_regular(path)) return 1;
    pathf(path, sizeof path, "%s/model.safetensors", dir);
    if (is_regular(path)) return 1;
    pathf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!is_regular(path) || read_small_file(path, &json, &len) != CDB_OK) return 0;
    ok = cdb_hub_parse_index(json, len, &shards, &n) == 0;
    for (int i = 0; ok && i < n; i++) {
        ok = pathf(path, sizeof path, "%s/%s", dir, shards[i]) == 0 && is_regular(path);
    }
    free(json);
    cdb_free(shards);
    cdb_clearerr();
    return ok;
}

/* ---- HTTP ----------------------------------------------------------------------------- */

/* libcurl is opened on first use (core.h, cdb_dynlib_open): it and the TLS, LDAP and
** Kerberos libraries under it cost every clipdb process milliseconds at start-up, and
** only `models get` and a model named hf:ORG/REPO that is not cached download. */
#define CURL_FNS(X)                                                                      \
    X(curl_easy_cleanup) X(curl_easy_init) X(curl_easy_perform) X(curl_easy_reset)      \
    X(curl_easy_setopt) X(curl_easy_strerror) X(curl_global_init) X(curl_slist_append)  \
    X(curl_slist_free_all) X(curl_version)
CDB_DYNLIB_LAZY(curl_lib, cu, CURL_FNS, "libcurl", "CLIPDB_LIBCURL", "libcurl.so.4",
                "libcurl-gnutls.so.4", "libcurl.so");
static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;

static void curl_init_once(void) { g_curl_init = cu.curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct http_req {
    const char *url;
    int head;           /* HEAD instead of GET */
    int follow;         /* follow redirects */
    int64_t range_from; /* > 0: ask for the bytes from there on */
    /* the body: 0 to go on, -1 to stop (the transfer fails with a write error) */
    int (*sink)(void *ud, const hub_resp *r, const char *p, size_t n);
    void *ud;
    /* progress in bytes of this transfer; nonzero stops it */
    int (*xfer)(void *ud, int64_t now, int64_t total);
} http_req;

typedef struct http_call {
    const http_req *q;
    hub_resp *r;
} http_call;

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    http_call *hc = ud;
    cdb_hub_header_line(hc->r, p, size * n);
    return size * n;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    http_call *hc = ud;
    if (!hc->q->sink) return size * n; /* discarded */
    return hc->q->sink(hc->q->ud, hc->r, p, size * n) == 0 ? size * n : 0;
}

static int on_xfer(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                   curl_off_t ulnow) {
    http_call *hc = ud;
    (void)ultotal;
    (void)ulnow;
    return hc->q->xfer ? hc->q->xfer(hc->q->ud, (int64_t)dlnow, (int64_t)dltotal) : 0;
}

/* Whether url goes to the endpoint's own host (the only one that gets the token). */
static int to_endpoint(const hub_ctx *c, const char *url) {
    size_t n = strlen(c->origin);
    return !strncmp(url, c->origin, n) && (url[n] == '/' || url[n] == '\0');
}

/* One request. The response's headers land in *r (the last response's, when redirects
** are followed); the CURLcode is returned as is, for the caller to judge. */
static CURLcode http_do(hub_ctx *c, const http_req *q, hub_resp *r) {
    struct curl_slist *hdrs = NULL;
    char auth[2100], range[64], ua[96];
    http_call hc = {q, r};
    CURLcode cc;
    CURL *h = c->curl;
    cdb_hub_resp_reset(r);
    cu.curl_easy_reset(h);
    c->curl_err[0] = '\0';
    snprintf(ua, sizeof ua, "clipdb/%s; %s", CDB_VERSION_STRING, cu.curl_version());
    cu.curl_easy_setopt(h, CURLOPT_URL, q->url);
    cu.curl_easy_setopt(h, CURLOPT_USERAGENT, ua);
    cu.curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_err);
    cu.curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    cu.curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    cu.curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    cu.curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 20L);
    /* a connection that stalls (under 1 byte/s for 30 s) counts as dropped */
    cu.curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    cu.curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
    cu.curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, q->follow ? 1L : 0L);
    cu.curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    /* the Authorization header set below is not sent on to another host when a redirect
    ** is followed (CURLOPT_UNRESTRICTED_AUTH stays 0) */
    cu.curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    cu.curl_easy_setopt(h, CURLOPT_HEADERDATA, &hc);
    cu.curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    cu.curl_easy_setopt(h, CURLOPT_WRITEDATA, &hc);
    cu.curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    cu.curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_xfer);
    cu.curl_easy_setopt(h, CURLOPT_XFERINFODATA, &hc);
    if (q->head) cu.curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    /* the real size of a file, not a compressed one's (as huggingface_hub asks) */
    hdrs = cu.curl_slist_append(hdrs, "Accept-Encoding: identity");
    if (c->token[0] && to_endpoint(c, q->url)) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
        hdrs = cu.curl_slist_append(hdrs, auth);
    }
    if (q->range_from > 0) {
        snprintf(range, sizeof range, "Range: bytes=%lld-", (long long)q->range_from);
        hdrs = cu.curl_slist_append(hdrs, range);
    }
    cu.curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    cc = cu.curl_easy_perform(h);
    cu.curl_slist_free_all(hdrs);
    return cc;
}

/* A transfer that may work when tried again (the connection dropped or stalled). */
static int transient(CURLcode cc) {
    return cc == CURLE_PARTIAL_FILE || cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR ||
           cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_GOT_NOTHING ||
           cc == CURLE_HTTP2 || cc == CURLE_HTTP2_STREAM || cc == CURLE_SSL_CONNECT_ERROR;
}

static cdb_status net_fail(hub_ctx *c, CURLcode cc, const char *what) {
    return cdb_eng_failw(CDB_IO, CDB_ENGINE_E_HUB_NETWORK,
                         c->curl_err[0] ? c->curl_err : cu.curl_easy_strerror(cc), "%s", what);
}

/* A failed status as the error users read. what: "ORG/NAME", "ORG/NAME: FILE". */
static cdb_status status_fail(hub_ctx *c, const hub_resp *r, const char *what) {
    const char *code = r->error_code, *msg = r->error_message;
    char why[512];
    if (msg[0]) snprintf(why, sizeof why, "HTTP %ld: %s", r->status, msg);
    else if (code[0]) snprintf(why, sizeof why, "HTTP %ld %s", r->status, code);
    else snprintf(why, sizeof why, "HTTP %ld", r->status);
    if (r->status == 401 || r->status == 403) {
        if (!strcmp(code, "GatedRepo") || r->status == 403)
            return cdb_eng_failw(CDB_ERROR, CDB_ENGINE_E_HUB_AUTH, why,
                                 "%s is gated: accept its terms on the Hub%s", what,
                                 c->token[0] ? " with the account of HF_TOKEN" : " and set HF_TOKEN");
        return cdb_eng_failw(CDB_ERROR, CDB_ENGINE_E_HUB_AUTH, why,
                             c->token[0] ? "%s: the Hub refused the token of HF_TOKEN"
                                         : "%s needs a Hugging Face token (HF_TOKEN is not set), "
                                           "or does not exist",
                             what);
    }
    if (r->status == 404) {
        const char *kind = !strcmp(code, "RevisionNotFound") ? "no such revision"
                           : !strcmp(code, "EntryNotFound")  ? "no such file"
                           : !strcmp(code, "RepoNotFound")   ? "no such repository"
                                                             : "not found";
        return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_HUB_NOT_FOUND, why, "%s: %s", what, kind);
    }
    return cdb_eng_failw(CDB_IO, CDB_ENGINE_E_HUB_NETWORK, why, "%s: the Hub failed", what);
}

/* ---- the revision API -------------------------------------------------------------------- */

typedef struct membuf {
    char *p;
    size_t n, cap;
} membuf;

static int mem_sink(void *ud, const hub_resp *r, const char *p, size_t n) {
    membuf *b = ud;
    (void)r;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        char *np;
        while (cap < b->n + n + 1) cap *= 2;
        if (cap > HUB_API_MAX_BYTES || !(np = realloc(b->p, cap))) return -1;
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

/* GET the revision API: commit and files. *unreachable: 1 when no server answered (the
** caller may fall back on the cache). */
static cdb_status revision_info(hub_ctx *c, char commit[41], char ***files, int *n_files,
                                int *unreachable) {
    char qrev[800], url[2048], what[300];
    membuf b = {0};
    hub_resp r;
    http_req q;
    CURLcode cc;
    cdb_status rc = CDB_OK;
    *unreachable = 0;
    if (cdb_hub_quote(c->rev, "", qrev, sizeof qrev))
        return cdb_seterr(CDB_INVALID, "revision too long");
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s", c->endpoint, c->repo, qrev);
    pathf(what, sizeof what, "%s (revision %s)", c->repo, c->rev);
    memset(&q, 0, sizeof q);
    q.url = url;
    q.follow = 1;
    q.sink = mem_sink;
    q.ud = &b;
    for (int tries = 0;; tries++) {
        b.n = 0;
        cc = http_do(c, &q, &r);
        if (cc == CURLE_OK || !transient(cc) || tries >= 2) break;
        usleep(200000u * (unsigned)(tries + 1));
    }
    if (cc != CURLE_OK) {
        *unreachable = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
                       cc == CURLE_COULDNT_RESOLVE_PROXY || cc == CURLE_OPERATION_TIMEDOUT;
        rc = net_fail(c, cc, "cannot reach the Hugging Face Hub");
    } else if (r.status != 200) {
        rc = status_fail(c, &r, what);
    } else if (cdb_hub_parse_revision(b.p ? b.p : "", b.n, commit, files, n_files) != 0) {
        rc = cdb_eng_fail(CDB_CORRUPT, CDB_ENGINE_E_HUB_NETWORK, "%s: unexpected answer", what);
    }
    free(b.p);
    return rc;
}

/* ---- one file ----------------------------------------------------------------------------- */

typedef struct dl_state {
    hub_ctx *c;
    int fd;
    int64_t offset;     /* bytes in the .incomplete file */
    int64_t start;      /* offset when this transfer began */
    int64_t total;      /* expected size, -1 unknown */
    int64_t limit;      /* the most bytes taken: total, or HUB_UNSIZED_MAX when unknown */
    int over;           /* the server sent more than limit: stopped before writing it */
    int write_errno;    /* a failed write's errno */
    int bad_range;      /* the server answered a Range with other bytes */
    int stopped;        /* should_stop said so */
    int began;          /* this transfer's first bytes were seen */
    cdb_engine_hub_progress pr;
} dl_state;

static int file_sink(void *ud, const hub_resp *r, const char *p, size_t n) {
    dl_state *s = ud;
    if (r->status < 200 || r->status >= 300) return 0; /* an error page: not the file */
    if (!s->began) {
        s->began = 1;
        if (r->status == 200 && s->offset > 0) { /* the Range was ignored: start over */
            if (ftruncate(s->fd, 0) != 0 || lseek(s->fd, 0, SEEK_SET) != 0) {
                s->write_errno = errno;
                return -1;
            }
            s->offset = s->start = 0;
        } else if (r->status == 206 && r->range_start != s->start) {
            s->bad_range = 1;
            return -1;
        }
    }
    if ((uint64_t)s->offset + n > (uint64_t)s->limit) { /* none of it is written */
        s->over = 1;
        return -1;
    }
    while (n) {
        ssize_t w = write(s->fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
        s->offset += w;
    }
    return 0;
}

static int file_xfer(void *ud, int64_t now, int64_t total) {
    dl_state *s = ud;
    cdb_engine_hub_params *p = s->c->p;
    (void)now;
    (void)total;
    if (p->should_stop && p->should_stop(p->ud)) {
        s->stopped = 1;
        return 1;
    }
    if (p->progress && s->pr.done != s->offset) {
        s->pr.phase = CDB_ENGINE_PROGRESS_UPDATE;
        s->pr.done = s->offset;
        p->progress(p->ud, &s->pr);
    }
    return 0;
}

/* libcrypto is opened on first use (core.h, cdb_dynlib_open): loading it cost every
** clipdb process about a millisecond, and only a download checks digests. */
#define CRYPTO_FNS(X)                                                                    \
    X(EVP_MD_CTX_new) X(EVP_MD_CTX_free) X(EVP_DigestInit_ex) X(EVP_DigestUpdate)        \
    X(EVP_DigestFinal_ex) X(EVP_sha1) X(EVP_sha256)
CDB_DYNLIB_LAZY(crypto_lib, ev, CRYPTO_FNS, "libcrypto", "CLIPDB_LIBCRYPTO", "libcrypto.so.3",
                "libcrypto.so");

/* The hex digest of path's bytes: sha256, or (git) the sha1 of "blob SIZE\0" + bytes. */
static cdb_status file_digest(const char *path, int git_sha1, char *hex, size_t cap) {
    unsigned char md[EVP_MAX_MD_SIZE], buf[1 << 16];
    unsigned int mdlen = 0;
    EVP_MD_CTX *x;
    struct stat st;
    int fd;
    cdb_status rc = CDB_OK;
    ssize_t n;
    if ((rc = cdb_dynlib_get(&crypto_lib)) != CDB_OK)
        return cdb_seterr(rc, "cannot check %s: %s", path, crypto_lib.err);
    x = ev.EVP_MD_CTX_new();
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !x ||
        !ev.EVP_DigestInit_ex(x, git_sha1 ? ev.EVP_sha1() : ev.EVP_sha256(), NULL)) {
        rc = cdb_seterr(CDB_IO, "cannot check %s: %s", path, strerror(errno));
        goto done;
    }
    if (git_sha1) {
        char head[64];
        int hl = snprintf(head, sizeof head, "blob %lld", (long long)st.st_size);
        ev.EVP_DigestUpdate(x, head, (size_t)hl + 1); /* with its NUL */
    }
    while ((n = read(fd, buf, sizeof buf)) > 0) ev.EVP_DigestUpdate(x, buf, (size_t)n);
    if (n < 0 || !ev.EVP_DigestFinal_ex(x, md, &mdlen) || cap < 2 * mdlen + 1) {
        rc = cdb_seterr(CDB_IO, "cannot check %s: %s", path, strerror(errno));
        goto done;
    }
    for (unsigned i = 0; i < mdlen; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
done:
    if (fd >= 0) close(fd);
    ev.EVP_MD_CTX_free(x);
    return rc;
}

static int all_hex(const char *s, size_t len) {
    if (strlen(s) != len) return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

/* The metadata of FILE at the commit: HEAD, following same-host redirects only (a
** renamed repository), as get_hf_file_metadata. */
static cdb_status file_meta(hub_ctx *c, const char *commit, const char *file, char *etag,
                            size_t etag_cap, int64_t *size, char *dl_url, size_t url_cap) {
    char qfile[3200], url[4096], what[1200];
    hub_resp r;
    http_req q;
    CURLcode cc = CURLE_OK;
    snprintf(what, sizeof what, "%s: %s", c->repo, file);
    if (cdb_hub_quote(file, "/", qfile, sizeof qfile))
        return cdb_seterr(CDB_INVALID, "file name too long");
    snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", c->endpoint, c->repo, commit, qfile);
    memset(&q, 0, sizeof q);
    q.head = 1;
    for (int hops = 0, tries = 0; hops < 10;) {
        q.url = url;
        cc = http_do(c, &q, &r);
        if (cc != CURLE_OK) {
            if (transient(cc) && ++tries < 3) {
                usleep(200000u * (unsigned)tries);
                continue;
            }
            return net_fail(c, cc, what);
        }
        if (r.status >= 300 && r.status < 400 && r.location[0] == '/' && r.location[1] != '/') {
            char next[4096];
            snprintf(next, sizeof next, "%s%s", c->origin, r.location);
            snprintf(url, sizeof url, "%s", next);
            hops++;
            continue;
        }
        break;
    }
    if (r.status >= 400 || r.status < 200) return status_fail(c, &r, what);
    snprintf(etag, etag_cap, "%s", r.linked_etag[0] ? r.linked_etag : r.etag);
    if (!etag[0])
        return cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_NETWORK,
                             "the server sent no ETag: is HF_ENDPOINT a Hugging Face Hub?",
                             "%s: cannot tell which file it is", what);
    *size = r.linked_size >= 0 ? r.linked_size : (r.status < 300 ? r.content_length : -1);
    if (r.status >= 300) {
        if (!r.location[0])
            return cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_NETWORK, "a redirect without a "
                                 "Location", "%s: unexpected answer", what);
        if (r.location[0] == '/') snprintf(dl_url, url_cap, "%s%s", c->origin, r.location);
        else snprintf(dl_url, url_cap, "%s", r.location);
    } else {
        snprintf(dl_url, url_cap, "%s", url);
    }
    return CDB_OK;
}

/* The link snapshots/COMMIT/FILE -> ../../blobs/ETAG (one more ../ per folder in FILE),
** made under a temporary name and renamed over (an existing link is replaced whole). */
static cdb_status make_pointer(const char *pointer, const char *file, const char *etag) {
    char target[PATH_MAX], tmp[PATH_MAX + 32];
    size_t n = 0;
    cdb_status rc;
    if ((rc = mkdirs_parent(pointer)) != CDB_OK) return rc;
    n += (size_t)snprintf(target, sizeof target, "../../");
    for (const char *s = file; *s; s++)
        if (*s == '/' && n + 4 < sizeof target) n += (size_t)snprintf(target + n, 4, "../");
    snprintf(target + n, sizeof target - n, "blobs/%s", etag);
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", pointer, (long)getpid());
    unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, pointer) != 0) {
        int e = errno;
        unlink(tmp);
        return cdb_seterr(cdb_errno_status(e), "cannot link %s: %s", pointer, strerror(e));
    }
    return CDB_OK;
}

/* Downloads dl_url into blob (its .incomplete first), checked against etag. Holds the
** lock while it runs. */
static cdb_status download_blob(hub_ctx *c, const char *file, const char *etag, int64_t size,
                                const char *dl_url, const char *blob, int index, int count) {
    char inc[PATH_MAX + 32], what[1200];
    dl_state s;
    http_req q;
    hub_resp r;
    struct stat st;
    struct statvfs vfs;
    cdb_status rc = CDB_OK;
    int tries = 0;
    snprintf(what, sizeof what, "%s: %s", c->repo, file);
    snprintf(inc, sizeof inc, "%s.incomplete", blob);
    memset(&s, 0, sizeof s);
    s.c = c;
    s.total = size;
    s.limit = size >= 0 ? size : HUB_UNSIZED_MAX;
    s.pr.file = file;
    s.pr.index = index;
    s.pr.count = count;
    s.pr.total = size;
    /* the part received so far: never through a link, never a FIFO planted at the name */
    if ((s.fd = open(inc, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666)) < 0 ||
        fstat(s.fd, &st) != 0) {
        rc = cdb_seterr(cdb_errno_status(errno), "cannot write %s: %s", inc, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = cdb_seterr(CDB_IO, "cannot write %s: not a regular file", inc);
        goto done;
    }
    s.offset = st.st_size;
    if (s.offset > s.limit) { /* not a prefix of this file: start over */
        if (ftruncate(s.fd, 0) != 0) {
            rc = cdb_seterr(cdb_errno_status(errno), "cannot write %s: %s", inc, strerror(errno));
            goto done;
        }
        s.offset = 0;
    }
    if (lseek(s.fd, s.offset, SEEK_SET) < 0) {
        rc = cdb_seterr(CDB_IO, "cannot write %s: %s", inc, strerror(errno));
        goto done;
    }
    if (size >= 0 && fstatvfs(s.fd, &vfs) == 0 &&
        (uint64_t)(size - s.offset) > (uint64_t)vfs.f_bavail * vfs.f_frsize) {
        char need[32], have[32];
        snprintf(need, sizeof need, "%.1f MB", (double)(size - s.offset) / 1e6);
        snprintf(have, sizeof have, "%.1f MB", (double)vfs.f_bavail * (double)vfs.f_frsize / 1e6);
        rc = cdb_eng_failw(CDB_NOSPACE, CDB_ENGINE_E_DISK_FULL, NULL,
                           "%s: no space left on device for %s (it needs %s more, %s free in %s)",
                           what, file, need, have, c->cache);
        goto done;
    }
    s.pr.phase = CDB_ENGINE_PROGRESS_START;
    s.pr.done = s.offset;
    if (c->p->progress) c->p->progress(c->p->ud, &s.pr);
    memset(&q, 0, sizeof q);
    q.url = dl_url;
    q.follow = 1;
    q.sink = file_sink;
    q.xfer = file_xfer;
    q.ud = &s;
    for (;;) {
        CURLcode cc;
        int64_t before = s.offset;
        if (size >= 0 && s.offset == size && size > 0) break; /* all there (a resumed file) */
        s.start = s.offset;
        s.began = 0;
        q.range_from = s.offset;
        cc = http_do(c, &q, &r);
        if (s.stopped) {
            rc = cdb_eng_failw(CDB_INTERRUPTED, CDB_ENGINE_E_NONE, "the bytes so far are kept "
                               "for the next run", "%s: download interrupted", what);
            goto done;
        }
        if (s.write_errno) {
            int e = s.write_errno;
            if (cdb_errno_status(e) == CDB_NOSPACE)
                rc = cdb_eng_failw(CDB_NOSPACE, CDB_ENGINE_E_DISK_FULL, strerror(e),
                                   "%s: no space left on device in %s (free space and run it "
                                   "again: the download resumes)", what, c->cache);
            else
                rc = cdb_eng_failw(cdb_errno_status(e), CDB_ENGINE_E_NONE, strerror(e),
                                   "cannot write %s", inc);
            goto done;
        }
        if (s.over) { /* more than the file has (or than a file of no size may have) */
            unlink(inc);
            if (size >= 0)
                rc = cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_CHECKSUM, "the server sent more "
                                   "bytes than the file has; the part received was deleted",
                                   "%s: wrong size", what);
            else
                rc = cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_NETWORK, "the server named no "
                                   "size (no X-Linked-Size or Content-Length) and sent more than "
                                   "the 64 MiB clipdb takes then; the part received was deleted",
                                   "%s: no size and too large", what);
            goto done;
        }
        if (s.bad_range) {
            rc = cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_NETWORK, "the server sent other "
                               "bytes than the range asked for", "%s: cannot resume", what);
            goto done;
        }
        if (cc == CURLE_OK && r.status == 416 && size >= 0 && s.offset == size) break;
        if (cc == CURLE_OK && (r.status < 200 || r.status >= 300)) {
            rc = status_fail(c, &r, what);
            goto done;
        }
        if (cc == CURLE_OK && (size < 0 || s.offset == size)) break;
        /* dropped (or ended short): resume from what arrived */
        if (cc != CURLE_OK && !transient(cc)) {
            rc = net_fail(c, cc, what);
            goto done;
        }
        if (s.offset > before) tries = 0;
        if (++tries >= HUB_MAX_TRIES) {
            rc = cc != CURLE_OK ? net_fail(c, cc, what)
                                : cdb_eng_failw(CDB_IO, CDB_ENGINE_E_HUB_NETWORK,
                                                "the connection keeps ending early",
                                                "%s: download failed", what);
            goto done;
        }
        CDB_LOG_INFO("%s: connection dropped at %lld bytes; resuming", what, (long long)s.offset);
        usleep(100000u * (unsigned)tries);
    }
    if (fsync(s.fd) != 0) {
        int e = errno;
        rc = cdb_eng_failw(cdb_errno_status(e), cdb_errno_status(e) == CDB_NOSPACE
                                                    ? CDB_ENGINE_E_DISK_FULL : CDB_ENGINE_E_NONE,
                           strerror(e), "cannot write %s", inc);
        goto done;
    }
    if (all_hex(etag, 64) || all_hex(etag, 40)) {
        char hex[2 * EVP_MAX_MD_SIZE + 1];
        int git = all_hex(etag, 40);
        if ((rc = file_digest(inc, git, hex, sizeof hex)) != CDB_OK) goto done;
        if (strcmp(hex, etag)) {
            unlink(inc);
            rc = cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_CHECKSUM, NULL,
                               "%s: the download is corrupt (its %s is %s, the Hub says %s); it "
                               "was deleted", what, git ? "git sha1" : "sha256", hex, etag);
            goto done;
        }
    } else {
        CDB_LOG_DEBUG("%s: ETag %s is no hash: not checked", what, etag);
    }
    if (rename(inc, blob) != 0) {
        rc = cdb_seterr(cdb_errno_status(errno), "cannot rename %s: %s", inc, strerror(errno));
        goto done;
    }
    s.pr.phase = CDB_ENGINE_PROGRESS_END;
    s.pr.done = s.offset;
    if (c->p->progress) c->p->progress(c->p->ud, &s.pr);
done:
    if (s.fd >= 0) close(s.fd);
    return rc;
}

/* A blob is named by its ETag, shared by every file with that ETag. That is sound only
** when the ETag is the content's hash (checked after the download): a server whose ETags
** are no hashes could give every file the same one, and every file would then be the
** first one's bytes. Such an ETag is made the file's own: "<etag>-<FNV-1a 64 of file>". */
static void weak_etag_key(const char *file, char *etag, size_t cap) {
    if (all_hex(etag, 64) || all_hex(etag, 40)) return;
    uint64_t h = cdb_fnv1a64(file, strlen(file));
    size_t n = strlen(etag);
    if (n + 18 < cap) snprintf(etag + n, cap - n, "-%016llx", (unsigned long long)h);
}

/* FILE at the commit into the snapshot: nothing when its pointer is there already. */
static cdb_status fetch_file(hub_ctx *c, const char *commit, const char *file, int index,
                             int count) {
    char pointer[PATH_MAX], blob[PATH_MAX], lock[PATH_MAX], etag[160], dl_url[4096];
    int64_t size = -1;
    int lfd = -1;
    cdb_status rc;
    if (pathf(pointer, sizeof pointer, "%s/snapshots/%s/%s", c->storage, commit, file))
        return PATH_TOO_LONG();
    if (is_regular(pointer)) return CDB_OK;
    if ((rc = file_meta(c, commit, file, etag, sizeof etag, &size, dl_url, sizeof dl_url)) !=
        CDB_OK)
        return rc;
    weak_etag_key(file, etag, sizeof etag);
    if (pathf(blob, sizeof blob, "%s/blobs/%s", c->storage, etag)) return PATH_TOO_LONG();
    if (!is_regular(blob)) {
        const char *slash = strrchr(c->storage, '/');
        if (pathf(lock, sizeof lock, "%s/.locks/%s/%s.lock", c->cache, slash + 1, etag))
            return PATH_TOO_LONG();
        if ((rc = mkdirs_parent(blob)) != CDB_OK || (rc = mkdirs_parent(lock)) != CDB_OK)
            return rc;
        if ((lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666)) < 0)
            return cdb_seterr(cdb_errno_status(errno), "cannot lock %s: %s", lock, strerror(errno));
        while (flock(lfd, LOCK_EX) != 0 && errno == EINTR) {}
        if (!is_regular(blob)) { /* another process may have fetched it meanwhile */
            rc = download_blob(c, file, etag, size, dl_url, blob, index, count);
            if (rc == CDB_OK) c->p->n_fetched++;
        }
    }
    if (rc == CDB_OK) rc = make_pointer(pointer, file, etag);
    if (lfd >= 0) close(lfd); /* releases the lock */
    return rc;
}

/* ---- a model ----------------------------------------------------------------------------- */

static cdb_status found_in_cache(hub_ctx *c, char **folder) {
    char commit[41], dir[PATH_MAX + 64];
    if (cdb_hub_is_commit(c->rev)) memcpy(commit, c->rev, 41);
    else read_ref(c, commit);
    if (!commit[0]) return CDB_NOTFOUND;
    snprintf(dir, sizeof dir, "%s/snapshots/%s", c->storage, commit);
    if (!snapshot_usable(dir)) return CDB_NOTFOUND;
    if (!(*folder = cdb_strdup(dir))) return cdb_seterr(CDB_NOMEM, "out of memory");
    return CDB_OK;
}

static int index_of(char *const *files, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(files[i], name)) return i;
    return -1;
}

/* Fetches the selected files: configs and tokenizers, the index's shards once the index
** is in, the weights last. */
static cdb_status fetch_all(hub_ctx *c, const char *commit, char **files, int n, char **folder) {
    int *want = calloc((size_t)(n ? n : 1), sizeof *want), pending = 0, count = 0, k = 0;
    char dir[PATH_MAX + 64], path[PATH_MAX + 1200];
    char *json = NULL, **shards = NULL;
    int n_shards = 0, any_weights = 0;
    size_t len;
    cdb_status rc = CDB_OK;
    if (!want) return cdb_seterr(CDB_NOMEM, "out of memory");
    snprintf(dir, sizeof dir, "%s/snapshots/%s", c->storage, commit);
    cdb_hub_select(files, n, want, &pending);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (want[i] && !is_regular(path)) count++;
    }
    for (int pass = 0; pass < 2 && rc == CDB_OK; pass++) {
        /* pass 0: everything but weights; pass 1: the weights */
        for (int i = 0; i < n && rc == CDB_OK; i++) {
            int weights = ends_with(files[i], ".safetensors");
            if (!want[i] || weights != pass) continue;
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            if (!is_regular(path)) k++;
            rc = fetch_file(c, commit, files[i], k, count);
            any_weights |= weights;
        }
        if (rc != CDB_OK || pass || !pending) continue;
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if ((rc = read_small_file(path, &json, &len)) != CDB_OK) break;
        if (cdb_hub_parse_index(json, len, &shards, &n_shards) != 0) {
            rc = cdb_eng_fail(CDB_CORRUPT, CDB_ENGINE_E_NONE, "%s: bad sharded checkpoint",
                              c->repo);
            break;
        }
        for (int s = 0; s < n_shards && rc == CDB_OK; s++) {
            int i = index_of(files, n, shards[s]);
            if (i < 0) {
                rc = cdb_eng_failw(CDB_CORRUPT, CDB_ENGINE_E_HUB_NOT_FOUND,
                                   "model.safetensors.index.json names it", "%s: no file %s",
                                   c->repo, shards[s]);
                break;
            }
            snprintf(path, sizeof path, "%s/%s", dir, files[i]);
            if (!want[i] && !is_regular(path)) count++;
            want[i] = 1;
        }
    }
    if (rc == CDB_OK && !any_weights)
        rc = cdb_eng_failw(CDB_UNSUPPORTED, CDB_ENGINE_E_NONE,
                           "clipdb reads safetensors weights only (not pytorch_model.bin, "
                           "flax, tf or onnx)", "%s has no .safetensors weights", c->repo);
    if (rc == CDB_OK && !(*folder = cdb_strdup(dir))) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    free(json);
    cdb_free(shards);
    free(want);
    return rc;
}

cdb_status cdb_engine_hub_get(const char *model, cdb_engine_hub_params *p, char **folder) {
    cdb_engine_hub_params defaults = cdb_engine_hub_params_default();
    const cdb_engine_hub_model *k;
    const char *repo = model;
    char commit[41], **files = NULL;
    int n_files = 0, unreachable = 0;
    hub_ctx *c = NULL;
    cdb_status rc;
    cdb_eng_clear();
    *folder = NULL;
    if (!p) p = &defaults;
    p->n_fetched = 0;
    if (!model || !*model)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, NULL, "no model named");
    if ((k = known_by_name(model))) {
        repo = k->repo;
    } else if (!strchr(model, '/')) {
        return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_HUB_NOT_FOUND,
                             "not a short name clipdb knows; a repository is ORG/NAME",
                             "unknown model '%s'", model);
    }
    if (cdb_hub_repo_valid(repo) != 0)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE,
                             "a repository is ORG/NAME, of letters, digits, '-', '_' and '.'",
                             "'%s' is not a Hugging Face repository name", repo);
    if (cdb_hub_revision_valid(p->revision ? p->revision : "main") != 0)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, NULL, "'%s' is not a revision",
                             p->revision);
    if (!(c = calloc(1, sizeof *c))) return cdb_seterr(CDB_NOMEM, "out of memory");
    if ((rc = ctx_init(c, repo, p->revision ? p->revision : "main", p)) != CDB_OK) {
        rc = cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot get %s", repo);
        goto done;
    }
    if ((p->cache_first || c->offline) && found_in_cache(c, folder) == CDB_OK) goto done;
    if (c->offline) {
        rc = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_HUB_OFFLINE, NULL,
                           "%s (revision %s) is not in the cache %s, and HF_HUB_OFFLINE is set",
                           repo, c->rev, c->cache);
        goto done;
    }
    if (cdb_dynlib_get(&curl_lib) != CDB_OK) {
        rc = cdb_seterr(curl_lib.rc, "cannot download %s: %s", repo, curl_lib.err);
        goto done;
    }
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init != CURLE_OK || !(c->curl = cu.curl_easy_init())) {
        rc = cdb_seterr(CDB_ERROR, "cannot start libcurl");
        goto done;
    }
    if ((rc = revision_info(c, commit, &files, &n_files, &unreachable)) != CDB_OK) {
        /* as huggingface_hub: no server, but a snapshot of the revision in the cache */
        if (unreachable && found_in_cache(c, folder) == CDB_OK) {
            CDB_LOG_WARN("%s: the Hub cannot be reached (%s); using the cached snapshot",
                         repo, cdb_errmsg());
            rc = CDB_OK;
        }
        goto done;
    }
    if (strcmp(c->rev, commit)) {
        char ref[PATH_MAX + 300];
        snprintf(ref, sizeof ref, "%s/refs/%s", c->storage, c->rev);
        if ((rc = write_atomic(ref, commit)) != CDB_OK) {
            rc = cdb_eng_fail(rc, cdb_eng_disk_full(rc) ? CDB_ENGINE_E_DISK_FULL
                                                        : CDB_ENGINE_E_NONE,
                              "cannot write to the cache %s", c->cache);
            goto done;
        }
    }
    rc = fetch_all(c, commit, files, n_files, folder);
    if (rc != CDB_OK && cdb_engine_errcode() == CDB_ENGINE_E_NONE)
        rc = cdb_eng_fail(rc, cdb_eng_disk_full(rc) ? CDB_ENGINE_E_DISK_FULL : CDB_ENGINE_E_NONE,
                          "cannot get %s", repo);
done:
    if (c && c->curl) cu.curl_easy_cleanup(c->curl);
    free(c);
    cdb_free(files);
    if (rc != CDB_OK) {
        cdb_free(*folder);
        *folder = NULL;
    }
    return rc;
}

cdb_status cdb_engine_model_path(const char *given, cdb_engine_hub_params *p, char **path) {
    cdb_engine_hub_params defaults = cdb_engine_hub_params_default();
    char spec[512], *at;
    const char *rev0;
    int cf0;
    cdb_status rc;
    *path = NULL;
    if (!given || strncmp(given, "hf:", 3)) {
        cdb_eng_clear();
        if (given && !(*path = cdb_strdup(given))) return cdb_seterr(CDB_NOMEM, "out of memory");
        return CDB_OK;
    }
    if (!p) p = &defaults;
    rev0 = p->revision;
    cf0 = p->cache_first;
    snprintf(spec, sizeof spec, "%s", given + 3);
    if ((at = strchr(spec, '@'))) { /* hf:ORG/NAME@REVISION */
        *at = '\0';
        p->revision = at + 1;
    }
    p->cache_first = 1;
    rc = cdb_engine_hub_get(spec, p, path);
    p->revision = rev0; /* it pointed into spec */
    p->cache_first = cf0;
    return rc;
}
