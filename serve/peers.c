/*
** peers.c: `clipdb serve --peer URL`: a search fanned out to other clipdb servers, and
** the proxy of their photos' thumbnails, previews and originals.
**
** A search POSTs the same request (the best hits by score, unpaged: the front pages the
** merge) to every peer's /api/search at once (one libcurl multi handle per search), each
** exchange within the peer timeout. What a peer answers is untrusted: at most
** SRV_PEER_MAX_ANSWER bytes are read (then it is cut off), and cdb_srv_peer_parse keeps
** only well-formed hits (a positive id, a finite score in [-1, 1], a path string) that
** pass the filters the front can check again (min_score, under, has_gps) and name a
** photo no earlier hit of the answer named, at most as many as were asked for; the
** rest is counted as dropped. A peer that does not answer in time, answers no 200,
** or answers something else is missing; the search still answers with the rest.
**
** Time: a peer that trickles is cut (SRV_PEER_MIN_BPS), every exchange has a deadline,
** a search waits on a peer SRV_PEER_SEARCH_TIMEOUTS timeouts in all (its fan-out, the
** collapse's asks for more and the copies' rounds added up), and at most the gate's share
** of the request threads waits on peers at once (cdb_srv_peers_enter): a slow or hostile
** peer cannot take the server's threads, nor hold one search for many exchanges.
**
** Copies across peers: a front that collapses asks with "copy_facts": true, and each
** hit then carries what the collapse decides by (copies.c); facts that are not well
** formed are dropped, never the hit: at worst it is not joined to its copies elsewhere.
**
** Peers' hits point at the front (/api/peer/P/thumb/ID?db=D ...), never at the peer:
** a browser may not reach the peer (a private address, a loopback server behind the
** front), and the peer's token stays on the server. The proxy builds every URL it asks
** for from a configured peer, a fixed route and integers: no URL from a request or an
** answer is ever fetched.
*/
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* calls go through the table below (CURL_DISABLE_TYPECHECK: no type-checking macros) */
#define CURL_DISABLE_TYPECHECK
#include <curl/curl.h>

#include "serve/serve_int.h"

/* libcurl is opened when a server with peers starts (core.h, cdb_dynlib_get), not by
** every clipdb process; the calls keep their names through the macros below. */
#define PEER_CURL_FNS(X) \
    X(curl_easy_cleanup) \
    X(curl_easy_getinfo) \
    X(curl_easy_init) \
    X(curl_easy_perform) \
    X(curl_easy_setopt) \
    X(curl_global_init) \
    X(curl_multi_add_handle) \
    X(curl_multi_cleanup) \
    X(curl_multi_init) \
    X(curl_multi_perform) \
    X(curl_multi_poll) \
    X(curl_multi_remove_handle) \
    X(curl_slist_append) \
    X(curl_slist_free_all)
static struct {
    PEER_CURL_FNS(CDB_DYNLIB_PTR)
} pc;
#define curl_easy_cleanup pc.curl_easy_cleanup
#undef curl_easy_getinfo /* curl.h's argument-count macros */
#undef curl_easy_setopt
#define curl_easy_getinfo pc.curl_easy_getinfo
#define curl_easy_init pc.curl_easy_init
#define curl_easy_perform pc.curl_easy_perform
#define curl_easy_setopt pc.curl_easy_setopt
#define curl_global_init pc.curl_global_init
#define curl_multi_add_handle pc.curl_multi_add_handle
#define curl_multi_cleanup pc.curl_multi_cleanup
#define curl_multi_init pc.curl_multi_init
#define curl_multi_perform pc.curl_multi_perform
#define curl_multi_poll pc.curl_multi_poll
#define curl_multi_remove_handle pc.curl_multi_remove_handle
#define curl_slist_append pc.curl_slist_append
#define curl_slist_free_all pc.curl_slist_free_all
static const char *const pc_names[] = {"libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"};
static const char *const pc_syms[] = {PEER_CURL_FNS(CDB_DYNLIB_NAME)};
static cdb_dynlib_lazy pc_lib = {
    .spec = {"libcurl", "CLIPDB_LIBCURL", pc_names, 3, pc_syms, sizeof pc_syms / sizeof *pc_syms},
    .table = &pc};

struct srv_peers {
    int n;
    char **urls, **auth; /* auth[i]: "Authorization: Bearer T" or NULL */
    int timeout_ms;
    int max_waiting;     /* the gate: requests that may wait on peers at once */
    atomic_int waiting;
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static int g_curl_ok;
static void curl_init_once(void) { g_curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == 0; }

srv_peers *cdb_srv_peers_new(const char *const *urls, const char *const *tokens, int n,
                             int timeout_ms, int max_waiting) {
    srv_peers *ps;
    if (n > 0 && cdb_dynlib_get(&pc_lib) != CDB_OK) return NULL; /* the message says why */
    if (n > 0) pthread_once(&g_curl_once, curl_init_once);
    if ((n > 0 && !g_curl_ok) || n < 0 || !(ps = calloc(1, sizeof *ps))) return NULL;
    ps->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    ps->max_waiting = max_waiting > 0 ? max_waiting : 1;
    atomic_init(&ps->waiting, 0);
    ps->urls = calloc((size_t)n + 1, sizeof *ps->urls);
    ps->auth = calloc((size_t)n + 1, sizeof *ps->auth);
    if (!ps->urls || !ps->auth) goto fail;
    for (int i = 0; i < n; i++, ps->n++) {
        size_t len = strlen(urls[i]);
        while (len && urls[i][len - 1] == '/') len--; /* "http://h:p/" and "http://h:p" */
        if (!(ps->urls[i] = strndup(urls[i], len))) goto fail;
        if (tokens && tokens[i]) {
            size_t m = strlen(tokens[i]) + 32;
            if (!(ps->auth[i] = malloc(m))) goto fail;
            snprintf(ps->auth[i], m, "Authorization: Bearer %s", tokens[i]);
        }
    }
    return ps;
fail:
    cdb_srv_peers_free(ps);
    return NULL;
}

void cdb_srv_peers_free(srv_peers *ps) {
    if (!ps) return;
    for (int i = 0; i < ps->n + 1 && ps->urls; i++) free(ps->urls[i]);
    for (int i = 0; i < ps->n + 1 && ps->auth; i++) free(ps->auth[i]);
    free(ps->urls);
    free(ps->auth);
    free(ps);
}

int cdb_srv_peers_count(const srv_peers *ps) { return ps ? ps->n : 0; }
const char *cdb_srv_peer_name(const srv_peers *ps, int i) { return ps->urls[i]; }

int cdb_srv_peers_enter(srv_peers *ps) {
    int w = atomic_load(&ps->waiting);
    while (w < ps->max_waiting)
        if (atomic_compare_exchange_weak(&ps->waiting, &w, w + 1)) return 1;
    return 0;
}

void cdb_srv_peers_leave(srv_peers *ps) { atomic_fetch_sub(&ps->waiting, 1); }

/* ---- an answer, bounded -------------------------------------------------------------- */

typedef struct peer_buf {
    char *b;
    size_t n, cap, max;
    int over; /* more than max came: cut off */
} peer_buf;

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud) {
    peer_buf *pb = ud;
    size_t k = size * nmemb;
    if (pb->n + k > pb->max) {
        pb->over = 1;
        return 0; /* libcurl stops the transfer */
    }
    return cdb_srv_buf_append(&pb->b, &pb->n, &pb->cap, p, k) == 0 ? k : 0;
}

/* A transfer of url for peer i into pb (POST body when body is not NULL); headers:
** its token and, for a POST, the JSON type. NULL when libcurl has no memory. */
static CURL *transfer(const srv_peers *ps, int i, const char *url, const char *body,
                      long timeout_ms, peer_buf *pb, struct curl_slist **hdrs) {
    CURL *h = curl_easy_init();
    *hdrs = NULL;
    if (!h) return NULL;
    if (ps->auth[i]) *hdrs = curl_slist_append(*hdrs, ps->auth[i]);
    if (body) *hdrs = curl_slist_append(*hdrs, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)ps->timeout_ms);
    /* a trickle is cut: under SRV_PEER_MIN_BPS for the peer timeout (whole seconds) */
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, SRV_PEER_MIN_BPS);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(ps->timeout_ms + 999) / 1000);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L); /* never elsewhere */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, pb);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* what libcurl can decode */
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    return h;
}

/* ---- the parser --------------------------------------------------------------------- */

static int64_t int_of(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t def) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return def;
    json_int_t x = json_integer_value(v);
    return x < lo || x > hi ? def : (int64_t)x;
}

static void text_of(json_t *o, const char *key, char *buf, size_t cap) {
    json_t *v = json_object_get(o, key);
    buf[0] = '\0';
    if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
        snprintf(buf, cap, "%s", json_string_value(v));
}

/* A peer's taken_source as the static string a hit carries ("" when unknown). */
static const char *taken_source(json_t *o) {
    static const char *const known[] = {"original", "created", "xmp", "raw", "file"};
    json_t *v = json_object_get(o, "taken_source");
    for (size_t i = 0; json_is_string(v) && i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(json_string_value(v), known[i])) return known[i];
    return "";
}

/* hit h (its db: db) and its remote from result r of peer: 0, or -1 when r lacks
** what every hit has. */
static int parse_hit(json_t *r, int db, int peer, cdb_engine_hit *h, srv_remote *rem) {
    json_t *id = json_object_get(r, "id"), *sc = json_object_get(r, "score"),
           *path = json_object_get(r, "path"), *lat, *lon, *alt;
    double score;
    memset(h, 0, sizeof *h);
    memset(rem, 0, sizeof *rem);
    /* a hit its peer had from a peer of its own: an id that peer cannot serve */
    if (json_object_get(r, "peer")) return -1;
    if (!json_is_integer(id) || json_integer_value(id) <= 0 || !json_is_number(sc) ||
        !json_is_string(path) || json_string_length(path) >= 4096 ||
        strlen(json_string_value(path)) != json_string_length(path))
        return -1;
    score = json_number_value(sc);
    if (!isfinite(score) || score < -1.0 || score > 1.0) return -1;
    if (!(h->path = cdb_malloc(json_string_length(path) + 1))) return -1;
    memcpy(h->path, json_string_value(path), json_string_length(path) + 1);
    h->id = (int64_t)json_integer_value(id);
    h->score = (float)score; /* the %.9g the peer printed names this float exactly */
    h->db = db;
    h->width = (int32_t)int_of(r, "width", 0, INT32_MAX, 0);
    h->height = (int32_t)int_of(r, "height", 0, INT32_MAX, 0);
    h->size = int_of(r, "size", 0, INT64_MAX, 0);
    h->mtime_ns = int_of(r, "mtime_ns", INT64_MIN, INT64_MAX,
                         int_of(r, "mtime", -9000000000LL, 9000000000LL, 0) * 1000000000LL);
    text_of(r, "taken", h->photo.taken, sizeof h->photo.taken);
    h->photo.taken_source = taken_source(r);
    h->photo.taken_key_ms = int_of(r, "taken_ms", INT64_MIN, INT64_MAX, h->mtime_ns / 1000000);
    text_of(r, "make", h->photo.make, sizeof h->photo.make);
    text_of(r, "model", h->photo.model, sizeof h->photo.model);
    text_of(r, "lens", h->photo.lens, sizeof h->photo.lens);
    lat = json_object_get(r, "lat");
    lon = json_object_get(r, "lon");
    alt = json_object_get(r, "alt");
    if (json_is_number(lat) && json_is_number(lon) && fabs(json_number_value(lat)) <= 90 &&
        fabs(json_number_value(lon)) <= 180) {
        h->photo.has_gps = 1;
        h->photo.lat = json_number_value(lat);
        h->photo.lon = json_number_value(lon);
    }
    if (json_is_number(alt) && isfinite(json_number_value(alt))) {
        h->photo.has_alt = 1;
        h->photo.alt = json_number_value(alt);
    }
    rem->peer = peer;
    rem->id = h->id;
    rem->db = (int)int_of(r, "db", 0, CDB_SERVE_MAX_DBS - 1, 0);
    cdb_srv_copy_facts_parse(json_object_get(r, "copy_facts"), &rem->facts, &rem->vec,
                             &rem->vec_n);
    rem->facts.id = h->id;
    return 0;
}

/* 1 when path begins with prefix (NULL or "": no place asked). */
static int begins(const char *path, const char *prefix) {
    return prefix && *prefix && !strncmp(path, prefix, strlen(prefix));
}

/* 1 when hit h (its remote r) passes what the front checks again (f: NULL, none) and no
** hit of keep[0..n) names the same photo of the peer. */
static int passes(const cdb_engine_hit *h, const srv_remote *r, const srv_peer_filter *f,
                  const srv_remote *keep, int n) {
    if (f && h->score < f->min_score) return 0;
    if (f && (f->under_given || f->under) && !begins(h->path, f->under_given) &&
        !begins(h->path, f->under))
        return 0;
    if (f && f->has_gps && !h->photo.has_gps) return 0;
    for (int i = 0; i < n; i++) /* k <= 1000: the quadratic scan costs under a millisecond */
        if (keep[i].id == r->id && keep[i].db == r->db) return 0;
    return 1;
}

static int parse(const char *body, size_t n, int max_hits, int first_db, int peer,
                 const srv_peer_filter *f, cdb_engine_hit **hits, srv_remote **remote,
                 int *n_hits, int *n_dropped) {
    json_error_t err;
    json_t *doc = json_loadb(body, n, JSON_REJECT_DUPLICATES, &err), *res;
    size_t m;
    int rc = -1;
    *hits = NULL;
    *remote = NULL;
    *n_hits = 0;
    *n_dropped = 0;
    if (!json_is_object(doc) || !json_is_array(res = json_object_get(doc, "results")) ||
        max_hits < 0)
        goto done;
    m = json_array_size(res);
    if (m > (size_t)max_hits) m = (size_t)max_hits; /* more than asked for: not kept */
    if (m && (!(*hits = calloc(m, sizeof **hits)) || !(*remote = calloc(m, sizeof **remote))))
        goto done;
    for (size_t i = 0; i < m; i++) {
        cdb_engine_hit *h = &(*hits)[*n_hits];
        srv_remote *r = &(*remote)[*n_hits];
        if (parse_hit(json_array_get(res, i), first_db + *n_hits, peer, h, r) == 0 &&
            passes(h, r, f, *remote, *n_hits))
            ++*n_hits;
        else
            cdb_srv_peer_hit_free(h, r);
    }
    *n_dropped = (int)(json_array_size(res) - (size_t)*n_hits);
    rc = 0;
done:
    if (rc != 0) {
        free(*hits);
        free(*remote);
        *hits = NULL;
        *remote = NULL;
    }
    json_decref(doc);
    return rc;
}

int cdb_srv_peer_parse(const char *body, size_t n, int max_hits, int first_db,
                       const srv_peer_filter *f, cdb_engine_hit **hits, srv_remote **remote,
                       int *n_hits, int *n_dropped) {
    return parse(body, n, max_hits, first_db, 0, f, hits, remote, n_hits, n_dropped);
}

/* ---- the fan-out ---------------------------------------------------------------------- */

/* Appends a peer's parsed answer (n hits) to out. 0, or -1 without memory. */
static int append(srv_peer_answers *out, cdb_engine_hit *h, srv_remote *r, int n) {
    cdb_engine_hit *nh;
    srv_remote *nr;
    if (n == 0) return 0; /* an answer without hits: nothing to copy (h may be NULL) */
    nh = realloc(out->hits, sizeof *nh * (size_t)(out->n + n + 1));
    if (nh) out->hits = nh;
    nr = nh ? realloc(out->remote, sizeof *nr * (size_t)(out->n + n + 1)) : NULL;
    if (nr) out->remote = nr;
    if (!nh || !nr) return -1;
    memcpy(out->hits + out->n, h, sizeof *h * (size_t)n);
    memcpy(out->remote + out->n, r, sizeof *r * (size_t)n);
    out->n += n;
    out->n_remote = out->n;
    return 0;
}

/* What is left of the time a search may wait on peer i (used_ms: its waits so far; NULL:
** not counted), at most one timeout. */
static long time_left_ms(const srv_peers *ps, const long *used_ms, int i) {
    long left = used_ms ? SRV_PEER_SEARCH_TIMEOUTS * (long)ps->timeout_ms - used_ms[i] : 0;
    return !used_ms || left > ps->timeout_ms ? ps->timeout_ms : left;
}

void cdb_srv_peers_post(srv_peers *ps, const char *route, const char *body, const int *skip,
                        long *used_ms, char **answers, size_t *lens) {
    CURLM *m = curl_multi_init();
    CURL **h = calloc((size_t)ps->n, sizeof *h);
    struct curl_slist **hdrs = calloc((size_t)ps->n, sizeof *hdrs);
    peer_buf *pb = calloc((size_t)ps->n, sizeof *pb);
    char url[4200];
    int running = 0;
    for (int i = 0; i < ps->n; i++) answers[i] = NULL, lens[i] = 0;
    if (!m || !h || !hdrs || !pb) goto done;
    for (int i = 0; i < ps->n; i++) {
        long left_ms = time_left_ms(ps, used_ms, i);
        if ((skip && skip[i]) || left_ms <= 0) continue; /* its time in the search used up */
        pb[i].max = SRV_PEER_MAX_ANSWER;
        snprintf(url, sizeof url, "%s%s", ps->urls[i], route);
        if ((h[i] = transfer(ps, i, url, body, left_ms, &pb[i], &hdrs[i])))
            curl_multi_add_handle(m, h[i]);
    }
    do { /* every transfer ends by its timeout at the latest */
        if (curl_multi_perform(m, &running) != CURLM_OK) break;
        if (running && curl_multi_poll(m, NULL, 0, 100, NULL) != CURLM_OK) break;
    } while (running);
    for (int i = 0; i < ps->n; i++) {
        long code = 0;
        curl_off_t us = 0;
        if (h[i] && used_ms && curl_easy_getinfo(h[i], CURLINFO_TOTAL_TIME_T, &us) == CURLE_OK)
            used_ms[i] += (long)((us + 999) / 1000); /* the wait on this peer, cut or not */
        if (h[i]) curl_easy_getinfo(h[i], CURLINFO_RESPONSE_CODE, &code);
        if (h[i] && code == 200 && !pb[i].over && pb[i].b) {
            answers[i] = pb[i].b;
            lens[i] = pb[i].n;
            pb[i].b = NULL;
        }
    }
done:
    for (int i = 0; h && hdrs && i < ps->n; i++) {
        if (h[i]) {
            curl_multi_remove_handle(m, h[i]);
            curl_easy_cleanup(h[i]);
        }
        curl_slist_free_all(hdrs[i]);
        free(pb ? pb[i].b : NULL);
    }
    if (m) curl_multi_cleanup(m);
    free(h);
    free(hdrs);
    free(pb);
}

void cdb_srv_peers_search(srv_peers *ps, const char *body, int max_hits, int first_db,
                          const srv_peer_filter *f, long *used_ms, srv_peer_answers *out) {
    char **answers = calloc((size_t)ps->n + 1, sizeof *answers);
    size_t *lens = calloc((size_t)ps->n + 1, sizeof *lens);
    memset(out, 0, sizeof *out);
    out->missing = calloc((size_t)ps->n + 1, sizeof *out->missing);
    out->used_ms = used_ms;
    if (answers && lens) cdb_srv_peers_post(ps, "/api/search", body, NULL, used_ms, answers, lens);
    for (int i = 0; i < ps->n; i++) {
        cdb_engine_hit *hits = NULL;
        srv_remote *rem = NULL;
        int n = 0, ok = 0, dropped = 0;
        if (answers && answers[i] &&
            parse(answers[i], lens[i], max_hits, first_db + out->n, i, f, &hits, &rem, &n,
                  &dropped) == 0) {
            if (dropped) /* a peer that breaks the filters or repeats itself: said once */
                CDB_LOG_WARN("peer %s: %d of its hits dropped (malformed, outside the "
                             "search's filters, repeated or more than asked for)",
                             ps->urls[i], dropped);
            out->n_dropped += dropped;
            ok = append(out, hits, rem, n) == 0;
            if (!ok)
                for (int j = 0; j < n; j++) cdb_srv_peer_hit_free(&hits[j], &rem[j]);
        }
        free(hits);
        free(rem);
        free(answers ? answers[i] : NULL);
        if (!ok) cdb_srv_peer_missing(out, i);
    }
    free(answers);
    free(lens);
}

void cdb_srv_peer_missing(srv_peer_answers *a, int peer) {
    if (a->missing && !a->missing[peer]) a->missing[peer] = 1, a->n_missing++;
    else if (!a->missing) a->n_missing++;
}

void cdb_srv_peer_hit_free(cdb_engine_hit *h, srv_remote *r) {
    if (h) {
        cdb_free(h->path);
        h->path = NULL;
    }
    if (r) {
        free(r->vec);
        r->vec = NULL;
        r->vec_n = 0;
    }
}

void cdb_srv_peer_answers_free(srv_peer_answers *a) {
    if (!a) return;
    for (int i = 0; i < a->n_remote; i++)
        cdb_srv_peer_hit_free(i < a->n ? &a->hits[i] : NULL, &a->remote[i]);
    free(a->hits);
    free(a->remote);
    free(a->missing);
    memset(a, 0, sizeof *a);
}

/* ---- the proxy ------------------------------------------------------------------------- */

/* The peer's Content-Type as sent on: one of the types a photo is served with; NULL for
** anything else (a peer answering JSON, HTML, ... where a photo was asked for). */
static const char *image_type(const char *type) {
    static const char *const known[] = {"image/jpeg", "image/png",  "image/webp",
                                        "image/gif",  "image/heic", "image/avif",
                                        "image/tiff", "application/octet-stream"};
    for (size_t i = 0; type && i < sizeof known / sizeof known[0]; i++)
        if (!strncmp(type, known[i], strlen(known[i])) &&
            (!type[strlen(known[i])] || type[strlen(known[i])] == ';'))
            return known[i];
    return NULL;
}

void cdb_srv_peer_proxy(srv_peers *ps, int peer, const char *kind, int64_t id, int db,
                        srv_resp *o) {
    char url[4300], *type = NULL;
    peer_buf pb;
    struct curl_slist *hdrs = NULL;
    int file = !strcmp(kind, "file");
    long code = 0;
    CURL *h;
    memset(&pb, 0, sizeof pb);
    pb.max = file ? SRV_PEER_MAX_FILE : SRV_PEER_MAX_IMAGE;
    snprintf(url, sizeof url, "%s/api/%s/%lld%s%d", ps->urls[peer], kind, (long long)id,
             "?db=", db);
    if (!(h = transfer(ps, peer, url, NULL, ps->timeout_ms + (file ? SRV_PEER_FILE_EXTRA_MS : 0),
                       &pb, &hdrs))) {
        cdb_srv_error(o, 503, "busy", "out of memory");
        return;
    }
    if (curl_easy_perform(h) == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &type);
    }
    if (code == 200 && !pb.over && image_type(type)) {
        o->status = 200;
        o->content_type = image_type(type);
        o->body = pb.b ? pb.b : calloc(1, 1);
        o->len = pb.n;
        pb.b = NULL;
        o->cache = "private, no-cache";
    } else if (code == 404 || code == 409) {
        cdb_srv_error(o, (int)code, code == 404 ? "not_found" : "changed",
                      "the peer %s has no such photo now", ps->urls[peer]);
    } else {
        cdb_srv_error(o, 502, "peer_unavailable", "the peer %s did not answer usably",
                      ps->urls[peer]);
    }
    free(pb.b);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
}
