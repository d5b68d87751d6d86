/*
** api.c: the JSON API and the routes. Every search goes through cdb_engine_search,
** the one search code path, so a request returns the hits and scores `clipdb search
** --json` prints for the same query.
**
**   GET  /api/search?q=QUERY&k=&offset=&min_score=&under=&sort=   (also text=, image_id=,
**                      taken_after=, taken_before=, camera=, near=, has_gps=,
**                      collapse=1|0: copies as one hit, the default, or every hit)
**   POST /api/search  {"query" | "text" | "image_id" | "image" (base64), "k", "offset",
**                      "min_score", "under", "sort", "taken_after", "taken_before",
**                      "camera", "near", "has_gps", "collapse", "image_db", "peers"
**                      (false: this server's databases only, as a front asks its peers),
**                      "copy_facts" (true: each hit's "copy_facts", copies.c)}
**     -> {"model", "took_ms", "count", "offset", "generation",
**         "results": [{"id", "path", "score", ["probability",] "width", "height", "mtime", "size",
**                      "thumb": "/api/thumb/ID", "file": "/api/file/ID",
**                      "preview": "/api/preview/ID", "browser_shows", "taken",
**                      "taken_source", ["make", "model", "lens", "lat", "lon", "alt"],
**                      with collapse: "duplicates": N, "copies": [ids], with several
**                      databases "copies_db": [each copy's db]}]}
**   GET  /api/thumb/ID   the JPEG thumbnail (ETag; 304 when unchanged)
**   GET  /api/preview/ID a JPEG of the photo, long side <= 2048, for the viewer of
**                        what browsers do not show (HEIC, TIFF, RAW; browser_shows
**                        false: by the name's extension); made on demand and cached
**                        by the engine (ETag; 304; 404/409 as /api/file)
**   GET  /api/file/ID    the original, by catalog id only, with its type; only the
**                        file the catalog recorded (404 when it is gone, 409 when
**                        something else is at its path: run reindex); one byte range
**                        (srv_req.range: bytes=A-B, A-, -N) gives a 206, one past the
**                        end 416 (http.c does not pass the header on yet: whole file)
**   GET  /api/stats, /api/folders (the roots), /healthz. /api/stats also says
**                        "bundled_model" (the model served is clipdb's bundled one)
**                        and "real_photos" (ingests met photos not from the generated
**                        world): the page's banner when both are true
**   GET  /api/folders?under=FOLDER  the folders directly inside FOLDER (a root or a
**                        folder in one) that hold photos, from the catalog: {"under",
**                        "folders": [{"path", "kind", "files", "subfolders"}]}; 404 when
**                        no root holds it
**   GET  /api/duplicates?kind=K  the library's duplicate groups (engine.h), as
**                        `clipdb duplicates --json` prints them, each file with its
**                        "thumb" URL: {"groups": [{"kind", "keep", "files": [{"id",
**                        "path", "width", "height", "bytes", "taken", "thumb"}]}],
**                        "files", "unreadable"}; reads every photo (slow on big libraries)
**   POST /api/copies_of {"items": [copy facts]}  this server's files the copy groups join
**                        to them, and the near counts of their phashes (copies.c; what a
**                        front asks its peers)
**   POST /api/login {"token"}   sets the page's session cookie when a token is required
**   POST /api/logout, GET /api/session   signs it out; says whether one is needed / held
**   /knn-service, /metadata, /indices-list: clip_retrieval.c. GET /, /app.js, ...: the page.
**
** Several databases (serve.h params.more): a search answers from all of them, merged
** exactly (cdb_engine_search_many); each hit has "db" (its database's index) and URLs
** with ?db=N, which /api/thumb, /api/file and /api/preview then require (an id names a
** photo of one database only); image_id with image_db=N (0 by default) for "more like
** this". Stats, folders, duplicates and clip-retrieval answer for the first database.
** Peers (params.peers): a search is fanned out to their /api/search too (peers.c), the
** local part unpaged, all merged and paged as one database; the response says
** "partial" (a peer missing), "missing" (their URLs), "peers_busy" (the peers' gate was
** full: none asked, cdb_srv_peers_enter) and "dropped" (peers' hits that failed the
** front's checks, peers.c); a peer's hit has "peer" (its URL), "peer_db" and the proxy
** URLs GET /api/peer/P/{thumb,file,preview}/ID?db=D (503 with Retry-After when the gate
** is full).
** With peers k + offset is at most 1000; an image_id query is answered here alone
** (every peer missing). Every hit also has "mtime_ns" and "taken_ms" (what the time
** sorts order by, so that a front server merges peers' hits exactly). Collapsed, copies
** across servers are one hit (collapse_across, copies.c), each copy with "copies_db" and
** "copies_peer" (its peer's URL, null for this server's); a group that holds a file of
** this server's is shown as its best hit here, never a peer's (a peer's facts are claims).
** A search waits on each peer at most SRV_PEER_SEARCH_TIMEOUTS peer timeouts in all.
** "copies_truncated" says that the search for copies stopped at a bound, "copies_bound"
** which ("rounds" or "files"; null when not): a group may then miss files on other
** servers.
**
** "query" (and q=) is the CLI's language ("beach + sunset - people", "2*cat");
** "text" is one term as it is. Limits: k <= 1000, offset <= 100000, query text as in
** the CLI (64 KiB). Bad input (a query argument that is not UTF-8 or holds a NUL: see
** http.c; an image_id that is not an integer; a body that is not JSON) is a 400 with
** {"error": {"code", "message"}}; unknown ids and routes 404; other methods 405.
** sort=time (file time), taken and taken-asc (capture time, newest or oldest first)
** order the best SRV_TIME_WINDOW hits and page through them; the metadata filters are
** `clipdb search`'s (taken_after/taken_before ISO 8601, near "LAT,LON,KM"); under
** is read as `clipdb search --under` reads it (cdb_engine_under_resolve).
*/
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dupes/dupes.h"
#include "serve/serve_int.h"

#define SRV_MAX_K 1000
#define SRV_MAX_OFFSET 100000
#define SRV_MAX_LIKE 16
/* sort=time orders the best this many hits of a query, and its pages cut from them */
#define SRV_TIME_WINDOW 1000

const char *cdb_srv_arg(const srv_req *r, const char *key) {
    const char *v = NULL;
    for (int i = 0; i < r->n_args; i++)
        if (r->keys[i] && !strcmp(r->keys[i], key)) v = r->vals[i] ? r->vals[i] : "";
    return v;
}

static int is(const srv_req *r, const char *m) { return !strcmp(r->method, m); }

/* The databases served (a context that sets only e, as the fuzz target's: one). */
static int n_dbs(const srv_ctx *c) { return c->n_es > 1 ? c->n_es : 1; }
static int is_get(const srv_req *r) { return is(r, "GET") || is(r, "HEAD"); }

/* The decimal id after prefix in path (strict: digits only, > 0); 0 when not one. */
static int64_t path_id(const char *path, const char *prefix) {
    size_t n = strlen(prefix);
    long long v = 0;
    const char *p;
    if (strncmp(path, prefix, n)) return 0;
    p = path + n;
    if (!*p || strlen(p) > 18) return 0;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return 0;
    v = strtoll(p, NULL, 10);
    return v > 0 ? (int64_t)v : 0;
}

/* ---- search ---------------------------------------------------------------------------- */

typedef struct search_req {
    cdb_engine_query q;
    cdb_engine_search_params p;
    int64_t like[SRV_MAX_LIKE];
    unsigned char *image;       /* decoded upload (heap) */
    const char *image_b64;      /* the upload as it came (peers get it as it is) */
    const char *under_given;    /* `under` as it came (peers resolve it themselves) */
    const char *sort_given;
    int local_only;             /* "peers": false: this server's databases only (what a
                                   front asks its peers: no fan-out of a fan-out) */
    int copy_facts;             /* "copy_facts": true: each hit with what a front collapses
                                   copies across its peers by (copies.c) */
    int peers_busy;             /* the peers' gate was full: answered without them */
    char under[PATH_MAX];
    int k, offset;
} search_req;

/* Common fields from either form; returns 0, or fills o with the 400. */
static int set_paging(srv_ctx *c, search_req *s, const char *k, const char *offset,
                      const char *min_score, const char *under, const char *sort, srv_resp *o) {
    long v;
    double d;
    s->p = cdb_engine_search_params_default();
    s->p.k = c->default_k;
    if (k) {
        if (cdb_srv_parse_int(k, 1, SRV_MAX_K, &v)) {
            cdb_srv_error(o, 400, "bad_request", "k must be an integer from 1 to %d", SRV_MAX_K);
            return -1;
        }
        s->p.k = (int)v;
    }
    if (offset) {
        if (cdb_srv_parse_int(offset, 0, SRV_MAX_OFFSET, &v)) {
            cdb_srv_error(o, 400, "bad_request", "offset must be an integer from 0 to %d",
                      SRV_MAX_OFFSET);
            return -1;
        }
        s->p.offset = (int)v;
    }
    if (min_score) {
        if (cdb_srv_parse_float(min_score, -1.0, 1.0, &d)) {
            cdb_srv_error(o, 400, "bad_request", "min_score must be a number from -1 to 1");
            return -1;
        }
        s->p.min_score = (float)d;
    }
    if (under && *under) { /* as `clipdb search --under` reads it: the same hits */
        if (under[0] != '/' || strlen(under) >= PATH_MAX / 2) {
            cdb_srv_error(o, 400, "bad_request", "under must be an absolute path");
            return -1;
        }
        cdb_engine_under_resolve(under, s->under, sizeof s->under, &s->p.under_folder);
        s->p.under = s->under;
        s->under_given = under;
    }
    if (sort && *sort) {
        static const struct {
            const char *name;
            cdb_engine_sort sort;
        } sorts[] = {{"time", CDB_ENGINE_SORT_TIME},
                     {"taken", CDB_ENGINE_SORT_TAKEN},
                     {"taken-asc", CDB_ENGINE_SORT_TAKEN_ASC}};
        size_t i = 0;
        while (i < sizeof sorts / sizeof sorts[0] && strcmp(sort, sorts[i].name)) i++;
        s->sort_given = sort;
        if (!strcmp(sort, "score")) {
            s->p.sort = CDB_ENGINE_SORT_SCORE;
        } else if (i < sizeof sorts / sizeof sorts[0]) {
            s->p.sort = sorts[i].sort;
            s->p.sort_window = SRV_TIME_WINDOW; /* one ordering that every page cuts from */
        } else {
            cdb_srv_error(o, 400, "bad_request", "sort must be score, time, taken or taken-asc");
            return -1;
        }
    }
    return 0;
}

/* The metadata filters (texts the engine parses: a bad one is a 400 bad_query from
** it); has_gps "1"/"true" or "0"/"false". Returns 0, or fills o with the 400. */
static int set_filters(search_req *s, const char *after, const char *before, const char *camera,
                       const char *near, const char *has_gps, srv_resp *o) {
    s->p.taken_after = after;
    s->p.taken_before = before;
    s->p.camera = camera;
    s->p.near = near;
    if (has_gps && *has_gps) {
        if (!strcmp(has_gps, "1") || !strcmp(has_gps, "true")) {
            s->p.has_gps = 1;
        } else if (strcmp(has_gps, "0") && strcmp(has_gps, "false")) {
            cdb_srv_error(o, 400, "bad_request", "has_gps must be true or false");
            return -1;
        }
    }
    return 0;
}

/* The database image_id names (image_db, "0" .. n_es - 1; absent: 0). 0, or the 400. */
static int like_db(srv_ctx *c, const char *db, search_req *s, srv_resp *o) {
    long v = 0;
    if (db && cdb_srv_parse_int(db, 0, n_dbs(c) - 1, &v)) {
        cdb_srv_error(o, 400, "bad_request", "image_db must be a database's index (0 to %d)",
                      n_dbs(c) - 1);
        return -1;
    }
    s->q.like_db = (int)v;
    return 0;
}

/* collapse: "1"/"true" (the default: copies are one hit) or "0"/"false". Returns 0, or
** fills o with the 400. */
static int set_collapse(search_req *s, const char *v, srv_resp *o) {
    s->p.collapse = 1;
    if (!v || !*v || !strcmp(v, "1") || !strcmp(v, "true")) return 0;
    if (!strcmp(v, "0") || !strcmp(v, "false")) {
        s->p.collapse = 0;
        return 0;
    }
    cdb_srv_error(o, 400, "bad_request", "collapse must be 1 or 0 (true or false)");
    return -1;
}

static int search_from_args(srv_ctx *c, const srv_req *r, search_req *s, srv_resp *o) {
    const char *q = cdb_srv_arg(r, "q"), *text = cdb_srv_arg(r, "text"),
               *like = cdb_srv_arg(r, "image_id");
    if (!q) q = cdb_srv_arg(r, "query");
    if (set_paging(c, s, cdb_srv_arg(r, "k"), cdb_srv_arg(r, "offset"), cdb_srv_arg(r, "min_score"),
                   cdb_srv_arg(r, "under"), cdb_srv_arg(r, "sort"), o) ||
        set_filters(s, cdb_srv_arg(r, "taken_after"), cdb_srv_arg(r, "taken_before"),
                    cdb_srv_arg(r, "camera"), cdb_srv_arg(r, "near"), cdb_srv_arg(r, "has_gps"),
                    o) ||
        set_collapse(s, cdb_srv_arg(r, "collapse"), o))
        return -1;
    if (q && text) {
        cdb_srv_error(o, 400, "bad_request", "give q (the query language) or text, not both");
        return -1;
    }
    if (q || text) {
        s->q.text = q ? q : text;
        s->q.text_literal = text != NULL;
    }
    if (like) {
        long v;
        if (cdb_srv_parse_int(like, 1, 0x7fffffffffffffffL, &v)) {
            cdb_srv_error(o, 400, "bad_request", "image_id must be a photo's id (an integer)");
            return -1;
        }
        s->like[0] = v;
        s->q.like_ids = s->like;
        s->q.n_like_ids = 1;
    }
    return like_db(c, cdb_srv_arg(r, "image_db"), s, o);
}

/* A JSON scalar as text for the strict parsers ("12", "0.3"); NULL when absent or null. */
static const char *scalar(json_t *v, char *buf, size_t size, int *bad) {
    if (!v || json_is_null(v)) return NULL;
    if (json_is_integer(v)) snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, size, "%.17g", json_real_value(v));
    else if (json_is_string(v)) snprintf(buf, size, "%s", json_string_value(v));
    else *bad = 1;
    return *bad ? NULL : buf;
}

static int search_from_json(srv_ctx *c, const srv_req *r, search_req *s, srv_resp *o,
                            json_t **doc_out) {
    json_t *doc, *v;
    char kb[64], ob[64], mb[64];
    int bad = 0;
    const char *k, *off, *ms, *under = NULL, *sort = NULL;
    *doc_out = NULL;
    if (!(doc = cdb_srv_body_object(r, JSON_REJECT_DUPLICATES, o))) return -1;
    *doc_out = doc;
    k = scalar(json_object_get(doc, "k"), kb, sizeof kb, &bad);
    off = scalar(json_object_get(doc, "offset"), ob, sizeof ob, &bad);
    ms = scalar(json_object_get(doc, "min_score"), mb, sizeof mb, &bad);
    if ((v = json_object_get(doc, "under")) && !json_is_null(v)) {
        if (!json_is_string(v)) bad = 1;
        else under = json_string_value(v);
    }
    if ((v = json_object_get(doc, "sort")) && !json_is_null(v)) {
        if (!json_is_string(v)) bad = 1;
        else sort = json_string_value(v);
    }
    static const char *const texts[] = {"taken_after", "taken_before", "camera", "near"};
    const char *text[4] = {NULL, NULL, NULL, NULL}, *gps = NULL;
    for (int i = 0; i < 4; i++)
        if ((v = json_object_get(doc, texts[i])) && !json_is_null(v)) {
            if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                bad = 1;
            else text[i] = json_string_value(v);
        }
    if ((v = json_object_get(doc, "has_gps")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) bad = 1;
        else gps = json_is_true(v) ? "true" : "false";
    }
    const char *collapse = NULL;
    if ((v = json_object_get(doc, "collapse")) && !json_is_null(v)) {
        if (json_is_boolean(v)) collapse = json_is_true(v) ? "1" : "0";
        else if (json_is_integer(v) && (json_integer_value(v) & ~1) == 0)
            collapse = json_integer_value(v) ? "1" : "0";
        else bad = 1;
    }
    if (bad) {
        cdb_srv_error(o, 400, "bad_request",
                      "k, offset and min_score are numbers; under, sort, taken_after, "
                      "taken_before, camera and near strings; has_gps and collapse true or "
                      "false");
        return -1;
    }
    if (set_paging(c, s, k, off, ms, under, sort, o) ||
        set_filters(s, text[0], text[1], text[2], text[3], gps, o) ||
        set_collapse(s, collapse, o))
        return -1;
    {
        json_t *q = json_object_get(doc, "query"), *t = json_object_get(doc, "text");
        if (q && json_is_null(q)) q = NULL;
        if (t && json_is_null(t)) t = NULL;
        if ((q && !json_is_string(q)) || (t && !json_is_string(t))) {
            cdb_srv_error(o, 400, "bad_request", "query and text are strings");
            return -1;
        }
        if (q && t) {
            cdb_srv_error(o, 400, "bad_request",
                          "give query (the query language) or text, not both");
            return -1;
        }
        if (q || t) {
            /* a NUL inside the JSON string would cut the text short: refuse it */
            json_t *x = q ? q : t;
            if (strlen(json_string_value(x)) != json_string_length(x)) {
                cdb_srv_error(o, 400, "bad_query", "a NUL character in the query");
                return -1;
            }
            s->q.text = json_string_value(x);
            s->q.text_literal = t != NULL;
        }
    }
    if ((v = json_object_get(doc, "image_id")) && !json_is_null(v)) {
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (n == 0 || n > SRV_MAX_LIKE) {
            cdb_srv_error(o, 400, "bad_request", "image_id: one id, or a list of 1 to %d",
                          SRV_MAX_LIKE);
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_is_array(v) ? json_array_get(v, i) : v;
            if (!json_is_integer(x) || json_integer_value(x) <= 0) {
                cdb_srv_error(o, 400, "bad_request", "image_id must be photo ids (integers)");
                return -1;
            }
            s->like[i] = (int64_t)json_integer_value(x);
        }
        s->q.like_ids = s->like;
        s->q.n_like_ids = (int)n;
    }
    if ((v = json_object_get(doc, "peers")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            cdb_srv_error(o, 400, "bad_request", "peers is true or false");
            return -1;
        }
        s->local_only = json_is_false(v);
    }
    if ((v = json_object_get(doc, "copy_facts")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) {
            cdb_srv_error(o, 400, "bad_request", "copy_facts is true or false");
            return -1;
        }
        s->copy_facts = json_is_true(v);
    }
    if ((v = json_object_get(doc, "image_db")) && !json_is_null(v)) {
        char db[32];
        if (!json_is_integer(v)) {
            cdb_srv_error(o, 400, "bad_request", "image_db is an integer");
            return -1;
        }
        snprintf(db, sizeof db, "%lld", (long long)json_integer_value(v));
        if (like_db(c, db, s, o)) return -1;
    }
    if ((v = json_object_get(doc, "image")) && !json_is_null(v)) {
        size_t n = 0;
        const char *b64;
        if (!json_is_string(v)) {
            cdb_srv_error(o, 400, "bad_request", "image is a base64 string");
            return -1;
        }
        b64 = s->image_b64 = json_string_value(v);
        if (!strncmp(b64, "data:", 5) && strchr(b64, ','))
            b64 = strchr(b64, ',') + 1; /* a data: URL */
        if (!(s->image = cdb_out_base64_decode(b64, strlen(b64), &n)) || n == 0) {
            cdb_srv_error(o, 400, "bad_image", "image is not base64 data");
            return -1;
        }
        s->q.image = s->image;
        s->q.image_bytes = n;
    }
    return 0;
}

/* 1 when a browser shows the photo at path itself (JPEG, PNG, WebP, GIF, by its
** name: a hit's type is not looked up on disk); else the viewer shows its preview. */
static int browser_shows(const char *path) {
    static const char *const ext[] = {".jpg", ".jpeg", ".jpe", ".jfif", ".png", ".webp", ".gif"};
    const char *dot = strrchr(path, '.');
    if (!dot || strchr(dot, '/')) return 0;
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (!strcasecmp(dot, ext[i])) return 1;
    return 0;
}

/* A hit's metadata, as `clipdb search --json` shows it: "taken", "taken_source" ("file"
** when it is the file time), and what the photo records of "make", "model", "lens",
** "lat", "lon", "alt". */
static void photo_json(json_t *x, const cdb_engine_photo *p) {
    json_object_set_new(x, "taken", json_string(p->taken));
    json_object_set_new(x, "taken_source", json_string(p->taken_source ? p->taken_source : ""));
    if (p->make[0]) json_object_set_new(x, "make", json_string(p->make));
    if (p->model[0]) json_object_set_new(x, "model", json_string(p->model));
    if (p->lens[0]) json_object_set_new(x, "lens", json_string(p->lens));
    if (p->has_gps) {
        json_object_set_new(x, "lat", json_real(p->lat));
        json_object_set_new(x, "lon", json_real(p->lon));
    }
    if (p->has_alt) json_object_set_new(x, "alt", json_real(p->alt));
}

/* A hit as the API shows it. Its thumb, file and preview URLs: the routes of its own
** database (?db=N when the server has several), or for a peer's hit (h->db >= n_es,
** remote[h->db - n_es]) the proxy routes of that peer, never the peer's own address.
** collapsed: with its copies ("duplicates", "copies"); fanned (a search fanned out to
** peers): each copy's server too ("copies_peer": a peer's URL, null for this one's). */
static json_t *hit_json(const srv_ctx *c, const cdb_engine_hit *h, int has_probability,
                        const srv_remote *remote, int collapsed, int fanned) {
    static const char *const kinds[] = {"thumb", "file", "preview"};
    json_t *x = json_object();
    const srv_remote *rem = h->db >= n_dbs(c) ? &remote[h->db - n_dbs(c)] : NULL;
    char url[128], q[32] = "";
    json_object_set_new(x, "id", json_integer(h->id));
    if (rem) {
        json_object_set_new(x, "peer", json_string(cdb_srv_peer_name(c->peers, rem->peer)));
        json_object_set_new(x, "peer_db", json_integer(rem->db));
    } else if (c->n_es > 1) {
        json_object_set_new(x, "db", json_integer(h->db));
        snprintf(q, sizeof q, "?db=%d", h->db);
    }
    cdb_srv_json_path(x, "path", h->path);
    json_object_set_new(x, "score", cdb_srv_json_float(h->score));
    if (has_probability) json_object_set_new(x, "probability", cdb_srv_json_float(h->probability));
    json_object_set_new(x, "width", json_integer(h->width));
    json_object_set_new(x, "height", json_integer(h->height));
    json_object_set_new(x, "mtime", json_integer(h->mtime_ns / 1000000000LL));
    json_object_set_new(x, "mtime_ns", json_integer(h->mtime_ns));
    json_object_set_new(x, "taken_ms", json_integer(h->photo.taken_key_ms));
    json_object_set_new(x, "size", json_integer(h->size));
    for (int i = 0; i < 3; i++) {
        if (rem)
            snprintf(url, sizeof url, "/api/peer/%d/%s/%lld?db=%d", rem->peer, kinds[i],
                     (long long)h->id, rem->db);
        else
            snprintf(url, sizeof url, "/api/%s/%lld%s", kinds[i], (long long)h->id, q);
        json_object_set_new(x, kinds[i], json_string(url));
    }
    json_object_set_new(x, "browser_shows", json_boolean(browser_shows(h->path)));
    photo_json(x, &h->photo);
    if (collapsed) { /* the hit's copies, collapsed into it */
        json_t *ids = json_array();
        for (int i = 0; i < h->n_copies; i++)
            json_array_append_new(ids, json_integer(h->copies[i]));
        json_object_set_new(x, "duplicates", json_integer(h->n_copies));
        json_object_set_new(x, "copies", ids);
        if (c->n_es > 1 || fanned) { /* ids are per database: each copy's */
            json_t *dbs = json_array(), *peers = json_array();
            for (int i = 0; i < h->n_copies; i++) {
                int v = h->copies_db ? h->copies_db[i] : h->db, local = v < n_dbs(c);
                int peer = (v - n_dbs(c)) / CDB_SERVE_MAX_DBS; /* collapse_across's names */
                int db = local ? v : (v - n_dbs(c)) % CDB_SERVE_MAX_DBS;
                json_array_append_new(dbs, json_integer(db));
                json_array_append_new(peers, local || peer >= cdb_srv_peers_count(c->peers)
                                                 ? json_null()
                                                 : json_string(cdb_srv_peer_name(c->peers, peer)));
            }
            json_object_set_new(x, "copies_db", dbs);
            if (fanned) json_object_set_new(x, "copies_peer", peers);
            else json_decref(peers);
        }
    }
    return x;
}

/* ---- the search over several databases and peers --------------------------------------- */

/* The request peers get: the same query and filters, the best `want` hits by score. */
static char *peer_body(const search_req *s, int want) {
    json_t *b = json_object();
    char *out;
    if (s->q.text)
        json_object_set_new(b, s->q.text_literal ? "text" : "query", json_string(s->q.text));
    if (s->image_b64) json_object_set_new(b, "image", json_string(s->image_b64));
    json_object_set_new(b, "k", json_integer(want));
    json_object_set_new(b, "offset", json_integer(0));
    json_object_set_new(b, "peers", json_false()); /* its own databases: ids it can serve */
    /* the peers' hits uncollapsed: the front groups them (collapse_across); a peer's own
    ** groups would hide files, its crowds being of its files only */
    json_object_set_new(b, "collapse", json_false());
    if (s->p.collapse) json_object_set_new(b, "copy_facts", json_true()); /* to join them */
    if (s->p.min_score > -1.0f) json_object_set_new(b, "min_score", json_real(s->p.min_score));
    if (s->under_given) json_object_set_new(b, "under", json_string(s->under_given));
    if (s->p.taken_after) json_object_set_new(b, "taken_after", json_string(s->p.taken_after));
    if (s->p.taken_before)
        json_object_set_new(b, "taken_before", json_string(s->p.taken_before));
    if (s->p.camera) json_object_set_new(b, "camera", json_string(s->p.camera));
    if (s->p.near) json_object_set_new(b, "near", json_string(s->p.near));
    if (s->p.has_gps) json_object_set_new(b, "has_gps", json_true());
    out = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return out;
}

typedef struct fanout {
    srv_ctx *c;
    const char *body;      /* NULL: the query is not one peers can answer (image_id), or
                              the peers' gate is full */
    int want;
    srv_peer_filter filter;
    long *used_ms;         /* the search's time waited on each peer (search_fanout's) */
    srv_peer_answers ans;
} fanout;

static void *fanout_run(void *ud) {
    fanout *f = ud;
    int n = cdb_srv_peers_count(f->c->peers);
    if (f->body) {
        cdb_srv_peers_search(f->c->peers, f->body, f->want, n_dbs(f->c), &f->filter, f->used_ms,
                             &f->ans);
    } else if ((f->ans.missing = calloc((size_t)n, sizeof *f->ans.missing))) {
        for (int i = 0; i < n; i++) f->ans.missing[i] = 1;
        f->ans.n_missing = n;
    }
    return NULL;
}

/* The copy facts of this server's hits among hits[0..n) (hit.db < n_dbs) into facts[i]
** (src: their database), each database's vectors in vecs[db] (heap, free()), *dim the
** vector set's. CDB_OK, or the engine's failure. */
static cdb_status local_facts(srv_ctx *c, const search_req *s, const cdb_engine_hit *hits, int n,
                              cdb_engine_copy_facts *facts, uint16_t **vecs, int *dim) {
    int64_t *ids = malloc(sizeof *ids * (size_t)(n ? n : 1));
    int *at = malloc(sizeof *at * (size_t)(n ? n : 1));
    cdb_engine_copy_facts *f = malloc(sizeof *f * (size_t)(n ? n : 1));
    cdb_status st = ids && at && f ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    for (int d = 0; st == CDB_OK && d < n_dbs(c); d++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (hits[i].db == d) ids[m] = hits[i].id, at[m++] = i;
        if (m == 0 && d > 0) continue; /* database 0 always: the dim */
        st = cdb_engine_copy_facts_get(c->n_es > 1 ? c->es[d] : c->e, s->p.model, ids, m, f,
                                       &vecs[d], dim);
        for (int j = 0; st == CDB_OK && j < m; j++) {
            facts[at[j]] = f[j];
            facts[at[j]].src = d;
        }
    }
    free(ids);
    free(at);
    free(f);
    return st;
}

/* A peer's answer asked with copy_facts: each of this server's hits (results[i] for
** hits[i]) with its "copy_facts". */
static cdb_status answer_copy_facts(srv_ctx *c, const search_req *s, const cdb_engine_result *r,
                                    json_t *results) {
    cdb_engine_copy_facts *facts = calloc((size_t)(r->n ? r->n : 1), sizeof *facts);
    uint16_t **vecs = calloc((size_t)n_dbs(c), sizeof *vecs);
    int dim = 0;
    cdb_status st = facts && vecs ? local_facts(c, s, r->hits, r->n, facts, vecs, &dim)
                                  : cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; st == CDB_OK && i < r->n; i++)
        if (r->hits[i].db < n_dbs(c))
            json_object_set_new(json_array_get(results, (size_t)i), "copy_facts",
                                cdb_srv_copy_facts_json(&facts[i], dim));
    for (int d = 0; vecs && d < n_dbs(c); d++) free(vecs[d]);
    free(vecs);
    free(facts);
    return st;
}

/* One round of the fan-out: the local databases' best pp->k hits (collapsed as they
** are asked) and the peers' at the same time, all in *out (out->hits heap); fo->ans keeps
** what the peers said (the hits' remotes, who is missing). CDB_OK, or the local failure. */
static cdb_status fanout_round(srv_ctx *c, search_req *s, const cdb_engine_search_params *pp,
                               long *used_ms, cdb_engine_result *out, fanout *fo) {
    pthread_t t;
    int started = 0;
    char *body = NULL;
    cdb_status st;
    memset(fo, 0, sizeof *fo);
    memset(out, 0, sizeof *out);
    fo->c = c;
    fo->want = pp->k;
    fo->filter.min_score = s->p.min_score;
    fo->filter.under_given = s->under_given;
    fo->filter.under = s->p.under;
    fo->filter.has_gps = s->p.has_gps;
    fo->used_ms = used_ms;
    if (c->peers && !s->local_only) {
        /* a photo id names a photo here: peers cannot look it up (missing, said so) */
        fo->body = body = s->q.n_like_ids || s->peers_busy ? NULL : peer_body(s, pp->k);
        started = pthread_create(&t, NULL, fanout_run, fo) == 0;
        if (!started) fanout_run(fo);
    }
    st = c->n_es > 1 ? cdb_engine_search_many(c->es, c->n_es, &s->q, pp, out)
                     : cdb_engine_search(c->e, &s->q, pp, out);
    if (started) pthread_join(t, NULL);
    free(body);
    if (st != CDB_OK) return st;
    if (fo->ans.n) {
        cdb_engine_hit *all = realloc(out->hits, sizeof *all * (size_t)(out->n + fo->ans.n));
        if (!all) return cdb_seterr(CDB_NOMEM, "out of memory");
        memcpy(all + out->n, fo->ans.hits, sizeof *all * (size_t)fo->ans.n);
        out->hits = all;
        out->n += fo->ans.n;
        free(fo->ans.hits); /* the paths are out's now */
        fo->ans.hits = NULL;
        fo->ans.n = 0;
    }
    return CDB_OK;
}

/* Puts this server's hits (and their facts) before the peers', each part in rank order,
** so that the collapse, which keeps the first hit of a group, keeps this server's best
** hit of a group that has one (the merge ranks them again). 0, or -1 without memory. */
static int own_hits_first(cdb_engine_hit *hits, cdb_engine_copy_facts *facts, int n, int nd) {
    cdb_engine_hit *h = malloc(sizeof *h * (size_t)(n ? n : 1));
    cdb_engine_copy_facts *f = malloc(sizeof *f * (size_t)(n ? n : 1));
    int k = 0;
    if (!h || !f) {
        free(h);
        free(f);
        return -1;
    }
    for (int own = 1; own >= 0; own--)
        for (int i = 0; i < n; i++)
            if ((hits[i].db < nd) == own) h[k] = hits[i], f[k++] = facts[i];
    memcpy(hits, h, sizeof *h * (size_t)n);
    memcpy(facts, f, sizeof *f * (size_t)n);
    free(h);
    free(f);
    return 0;
}

/* Leaves out of the collapsed hits[0..*n) each peer's hit kept for a group that holds a
** file of this server's (one that is no hit here: it ranked lower, or a filter left it
** out): that file stands for the group at its own rank, where it passes; the peer's
** claim never hides it. */
static void drop_claims_on_own(cdb_engine_hit *hits, int *n, int nd) {
    int kept = 0;
    for (int i = 0; i < *n; i++) {
        cdb_engine_hit *h = &hits[i];
        int own = 0;
        for (int j = 0; h->db >= nd && h->copies_db && j < h->n_copies; j++)
            own |= h->copies_db[j] < nd;
        if (!own) {
            hits[kept++] = *h;
            continue;
        }
        cdb_free(h->path);
        free(h->copies);
        free(h->copies_db);
    }
    *n = kept;
}

/* Copies across this server and its peers: out's hits (this server's, then the peers',
** each answer's best `fetch` by score) ranked, cut to the exact prefix when cut (*more:
** some answer may have more), then collapsed as one database of all the servers' files
** would be: the hits' facts (the peers': what they sent) and the files of their groups
** elsewhere (cdb_srv_copies_closure); a peer's file is named n_dbs + peer *
** CDB_SERVE_MAX_DBS + its database there (copies_db too). A peer's facts are claims
** (it may copy those of this server's files that the closure sent it): a group that holds
** a file of this server's is this server's best hit of it, or none (own_hits_first,
** drop_claims_on_own); among peers' files, the best-ranked hit stands for its group. */
static cdb_status collapse_across(srv_ctx *c, const search_req *s, cdb_engine_result *out,
                                  fanout *fo, int fetch, int cut, int *more) {
    int np = cdb_srv_peers_count(c->peers), dim = 0, nd = n_dbs(c), n_others = 0;
    cdb_engine_copy_facts *facts = calloc((size_t)(out->n ? out->n : 1), sizeof *facts), *others;
    uint16_t **vecs = calloc((size_t)nd, sizeof *vecs);
    unsigned char *truncated = calloc((size_t)np + 1, 1);
    int *count = calloc((size_t)np + 1, sizeof *count);
    void *keep = NULL;
    cdb_status st = facts && vecs && truncated && count
                        ? local_facts(c, s, out->hits, out->n, facts, vecs, &dim)
                        : cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; st == CDB_OK && i < out->n; i++) {
        const cdb_engine_hit *h = &out->hits[i];
        if (h->db < nd) {
            count[0]++;
            continue;
        }
        const srv_remote *rem = &fo->ans.remote[h->db - nd];
        facts[i] = rem->facts;
        facts[i].vec = rem->vec_n == dim ? rem->vec : NULL;
        facts[i].src = nd + rem->peer * CDB_SERVE_MAX_DBS + rem->db;
        facts[i].part = 1 + rem->peer;
        count[1 + rem->peer]++;
    }
    for (int p = 0; st == CDB_OK && p <= np; p++) truncated[p] = count[p] >= fetch;
    if (st == CDB_OK)
        st = cdb_engine_hits_rank(out->hits, facts, &out->n, cut ? truncated : NULL, more);
    if (st == CDB_OK)
        st = cdb_srv_copies_closure(c, facts, out->n, dim, &fo->ans, &others, &n_others, &keep);
    if (st == CDB_OK && own_hits_first(out->hits, facts, out->n, nd))
        st = cdb_seterr(CDB_NOMEM, "out of memory");
    if (st == CDB_OK)
        st = cdb_engine_hits_collapse(out->hits, facts, &out->n, others, n_others, dim);
    if (st == CDB_OK) drop_claims_on_own(out->hits, &out->n, nd);
    cdb_srv_copies_free(keep);
    for (int d = 0; vecs && d < nd; d++) free(vecs[d]);
    free(vecs);
    free(facts);
    free(truncated);
    free(count);
    return st;
}

/* The local databases' best hits (unpaged: cdb_engine_part_params) and the peers', merged
** and paged into *out. With collapse, copies across them are one hit (collapse_across,
** over every part's hits as they rank, none collapsed by its part: a part's groups, and
** crowds, are of its own files only): while the exact prefix of the merge holds fewer
** groups than the page needs, every part is asked for 4x more, up to SRV_MAX_K (then the
** page is made of what was fetched), each exchange within the peer timeout and each
** peer's all within the search's time for it (SRV_PEER_SEARCH_TIMEOUTS): a peer that has
** used it up is not asked again (it is missing) and the rest is answered. fo: the last
** round's peers. */
static cdb_status search_fanout(srv_ctx *c, search_req *s, cdb_engine_result *out,
                                fanout *fo) {
    cdb_engine_search_params pp = cdb_engine_part_params(&s->p);
    int need = pp.k, across = s->p.collapse && c->peers && !s->local_only;
    long *used = calloc((size_t)cdb_srv_peers_count(c->peers) + 1, sizeof *used);
    cdb_status st = used ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    if (across) pp.collapse = 0; /* every part's hits as they rank: grouped here alone */
    for (int fetch = need; st == CDB_OK; fetch = fetch > SRV_MAX_K / 4 ? SRV_MAX_K : fetch * 4) {
        int more = 0;
        pp.k = fetch;
        if ((st = fanout_round(c, s, &pp, used, out, fo)) != CDB_OK ||
            (across &&
             (st = collapse_across(c, s, out, fo, fetch, fetch < SRV_MAX_K, &more)) != CDB_OK))
            break;
        if (out->n >= need || !more || fetch >= SRV_MAX_K) break;
        cdb_engine_result_free(out);
        cdb_srv_peer_answers_free(&fo->ans);
    }
    fo->ans.used_ms = NULL; /* freed here */
    free(used);
    if (st == CDB_OK) cdb_engine_hits_merge(out->hits, &out->n, &s->p);
    return st;
}

static void search(srv_ctx *c, const srv_req *r, srv_resp *o) {
    search_req s;
    json_t *doc = NULL, *res, *arr;
    cdb_engine_result out;
    fanout fo;
    int64_t t0;
    int gate = 0;
    memset(&s, 0, sizeof s);
    memset(&out, 0, sizeof out);
    memset(&fo, 0, sizeof fo);
    if (is_get(r) ? search_from_args(c, r, &s, o) : search_from_json(c, r, &s, o, &doc)) goto done;
    if (!s.q.text && !s.q.n_like_ids && !s.q.image_bytes) {
        cdb_srv_error(o, 400, "bad_query", "nothing to search for: give %s",
                  is_get(r) ? "q, text or image_id" : "query, text, image_id or image");
        goto done;
    }
    if (c->peers && !s.local_only && cdb_engine_part_params(&s.p).k > SRV_MAX_K) {
        cdb_srv_error(o, 400, "bad_request", "with peers, k + offset must be at most %d",
                      SRV_MAX_K);
        goto done;
    }
    /* at most the gate's share of the threads waits on peers: past it, this server's part
    ** alone, every peer missing (local work is never refused for the peers' sake) */
    if (c->peers && !s.local_only && !s.q.n_like_ids && !(gate = cdb_srv_peers_enter(c->peers)))
        s.peers_busy = 1;
    t0 = cdb_now_ns();
    if ((c->n_es > 1 || (c->peers && !s.local_only) ? search_fanout(c, &s, &out, &fo)
                                 : cdb_engine_search(c->e, &s.q, &s.p, &out)) != CDB_OK) {
        cdb_srv_engine_error(o);
        goto done;
    }
    atomic_fetch_add(&c->n_search, 1);
    res = json_object();
    json_object_set_new(res, "model", json_string(out.model));
    json_object_set_new(res, "took_ms", json_real((double)(cdb_now_ns() - t0) / 1e6));
    json_object_set_new(res, "count", json_integer(out.n));
    json_object_set_new(res, "offset", json_integer(s.p.offset));
    json_object_set_new(res, "generation", json_integer(out.generation));
    if (c->n_es > 1) json_object_set_new(res, "databases", json_integer(c->n_es));
    if (c->peers && !s.local_only) { /* which peers' parts are missing from the answer */
        json_t *miss = json_array();
        for (int i = 0; fo.ans.missing && i < cdb_srv_peers_count(c->peers); i++)
            if (fo.ans.missing[i])
                json_array_append_new(miss, json_string(cdb_srv_peer_name(c->peers, i)));
        json_object_set_new(res, "partial", json_boolean(json_array_size(miss) > 0));
        json_object_set_new(res, "missing", miss);
        json_object_set_new(res, "peers_busy", json_boolean(s.peers_busy));
        json_object_set_new(res, "dropped", json_integer(fo.ans.n_dropped));
        if (s.p.collapse) { /* the copies closure stopped at a bound (copies.c) */
            int b = fo.ans.copies_bound;
            json_object_set_new(res, "copies_truncated", json_boolean(b != 0));
            json_object_set_new(res, "copies_bound",
                                b == SRV_COPIES_BOUND_ROUNDS  ? json_string("rounds")
                                : b == SRV_COPIES_BOUND_FILES ? json_string("files")
                                                              : json_null());
        }
    }
    arr = json_array();
    for (int i = 0; i < out.n; i++)
        json_array_append_new(arr, hit_json(c, &out.hits[i], out.has_probability, fo.ans.remote,
                                            s.p.collapse, c->peers && !s.local_only));
    json_object_set_new(res, "results", arr);
    if (s.copy_facts && answer_copy_facts(c, &s, &out, arr) != CDB_OK) {
        json_decref(res);
        cdb_srv_engine_error(o);
        goto done;
    }
    cdb_srv_json_fresh(o, res);
done:
    if (gate) cdb_srv_peers_leave(c->peers);
    cdb_engine_result_free(&out);
    cdb_srv_peer_answers_free(&fo.ans);
    json_decref(doc);
    free(s.image);
}

/* ---- thumbnails and originals --------------------------------------------------------- */

/* The photo id after prefix in the request's path, or 0 with o set to the 404 of a
** path that names none. */
static int64_t photo_id(const srv_req *r, const char *prefix, srv_resp *o) {
    int64_t id = path_id(r->path, prefix);
    if (!id) cdb_srv_error(o, 404, "not_found", "no photo has that id");
    return id;
}

/* The database a photo route names: ?db=N (0 .. n_es - 1), which a server of several
** databases requires (ids are per database: one without it could open another's photo);
** one database takes none or 0. NULL with o set to the 400 otherwise. */
static cdb_engine *photo_db(srv_ctx *c, const srv_req *r, srv_resp *o) {
    const char *db = cdb_srv_arg(r, "db");
    long v = 0;
    if ((!db && c->n_es > 1) || (db && cdb_srv_parse_int(db, 0, n_dbs(c) - 1, &v))) {
        cdb_srv_error(o, 400, "bad_request", "db must name one of the %d databases (0 to %d)",
                      n_dbs(c), n_dbs(c) - 1);
        return NULL;
    }
    return v ? c->es[v] : c->e;
}

static void thumb(srv_ctx *c, const srv_req *r, srv_resp *o) {
    int64_t id = photo_id(r, "/api/thumb/", o);
    cdb_engine *e = id ? photo_db(c, r, o) : NULL;
    void *jpeg = NULL;
    size_t n = 0;
    if (!e) return;
    if (cdb_engine_thumb(e, id, &jpeg, &n) != CDB_OK) {
        cdb_srv_engine_error(o);
        return;
    }
    snprintf(o->etag, sizeof o->etag, "\"t%016llx\"", (unsigned long long)cdb_fnv1a64(jpeg, n));
    o->cache = "private, no-cache"; /* revalidated: a changed photo gets a new one */
    if (r->if_none_match && strstr(r->if_none_match, o->etag)) {
        cdb_free(jpeg);
        o->status = 304;
        return;
    }
    o->status = 200;
    o->content_type = "image/jpeg";
    o->body = jpeg; /* cdb_free is free */
    o->len = n;
}

/* name as a Content-Disposition (RFC 6266): inline, an ASCII fallback (printable
** ASCII but quotes, backslashes and '%'; anything else '_') and filename* (RFC 8187)
** with the UTF-8 name percent-encoded. A name that is not UTF-8 (file names are bytes)
** gets U+FFFD for each byte that is not part of a valid sequence, as the JSON paths do,
** so filename* always decodes to valid UTF-8. Long names are cut at a whole character. */
static void disposition(const char *path, char *out, size_t size) {
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const unsigned char *p = (const unsigned char *)name;
    size_t n = strlen(name), a = 0, e = 0;
    char ascii[160], enc[480];
    for (size_t i = 0; i < n && a + 1 < sizeof ascii; i++)
        ascii[a++] = p[i] >= 0x20 && p[i] < 0x7f && !strchr("\"\\%", p[i]) ? (char)p[i] : '_';
    ascii[a] = '\0';
    for (size_t i = 0; i < n;) {
        static const unsigned char fffd[3] = {0xEF, 0xBF, 0xBD};
        size_t k = cdb_utf8_seq_len(p + i, n - i);
        const unsigned char *seq = k ? p + i : fffd;
        size_t len = k ? k : 3;
        int plain = k == 1 && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= 'a' && p[i] <= 'z') ||
                               (p[i] >= '0' && p[i] <= '9') || strchr("-._~", p[i]));
        if (e + (plain ? 1 : 3 * len) + 1 > sizeof enc) break;
        if (plain) enc[e++] = (char)p[i];
        else
            for (size_t j = 0; j < len; j++)
                e += (size_t)snprintf(enc + e, sizeof enc - e, "%%%02X", seq[j]);
        i += k ? k : 1;
    }
    enc[e] = '\0';
    snprintf(out, size, "inline; filename=\"%s\"; filename*=UTF-8''%s", ascii, enc);
}

/* A Range header against a file of size bytes (RFC 9110, 14.2): 1 and [*start,
** *start + *len) for one satisfiable byte range; 0 to send the whole file (no header,
** another unit, several ranges, or one that does not parse: a server may ignore
** those); -1 when the range starts past the end (416). */
static int byte_range(const char *h, int64_t size, int64_t *start, int64_t *len) {
    const char *p = h;
    int64_t a = -1, b = -1;
    if (!h || strncasecmp(p, "bytes=", 6)) return 0;
    p += 6;
    if (strchr(p, ',')) return 0;
    while (*p == ' ' || *p == '\t') p++;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (a > (INT64_MAX - 9) / 10) return 0;
        a = (a < 0 ? 0 : a * 10) + (*p - '0');
    }
    if (*p++ != '-') return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (b > (INT64_MAX - 9) / 10) return 0;
        b = (b < 0 ? 0 : b * 10) + (*p - '0');
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p || (a < 0 && b < 0) || (a >= 0 && b >= 0 && b < a)) return 0;
    if (a < 0) { /* the last b bytes */
        if (b == 0 || size == 0) return -1;
        *start = b < size ? size - b : 0;
        *len = size - *start;
        return 1;
    }
    if (a >= size) return -1;
    *start = a;
    *len = (b < 0 || b >= size ? size - 1 : b) - a + 1;
    return 1;
}

static void original(srv_ctx *c, const srv_req *r, srv_resp *o) {
    int64_t id = photo_id(r, "/api/file/", o), start = 0, len = 0;
    cdb_engine *e = id ? photo_db(c, r, o) : NULL;
    cdb_engine_file f;
    int fd = -1, range;
    if (!e) return;
    /* the catalog's file for this id, checked on disk (404 gone, 409 changed): nothing
    ** from the request, and never what else is at its path now */
    if (cdb_engine_file_open(e, id, &f, &fd) != CDB_OK) {
        cdb_srv_engine_error(o);
        return;
    }
    o->cache = "private, no-cache";
    o->accept_ranges = 1;
    snprintf(o->etag, sizeof o->etag, "\"f%llx-%llx\"", (unsigned long long)f.size,
             (unsigned long long)f.mtime_ns);
    if (r->if_none_match && strstr(r->if_none_match, o->etag)) {
        close(fd);
        cdb_engine_file_clear(&f);
        o->status = 304;
        return;
    }
    range = byte_range(r->range, f.size, &start, &len);
    if (range < 0) {
        close(fd);
        cdb_srv_error(o, 416, "range_not_satisfiable", "photo %lld has %lld bytes", (long long)id,
                      (long long)f.size);
        snprintf(o->content_range, sizeof o->content_range, "bytes */%lld", (long long)f.size);
        cdb_engine_file_clear(&f);
        return;
    }
    o->status = 200;
    o->content_type = f.mime;
    o->fd = fd;
    o->fd_offset = 0;
    o->fd_size = f.size; /* the recorded size, which the open checked */
    if (range > 0) {
        o->status = 206;
        o->fd_offset = start;
        o->fd_size = len;
        snprintf(o->content_range, sizeof o->content_range, "bytes %lld-%lld/%lld",
                 (long long)start, (long long)(start + len - 1), (long long)f.size);
    }
    disposition(f.path, o->disposition, sizeof o->disposition);
    cdb_engine_file_clear(&f);
}

/* GET /api/preview/ID: a JPEG of the photo (long side SRV_PREVIEW_PX or less) for the
** viewer, made and cached by the engine; ETag and 304 like the thumbnails, 404/409 as
** /api/file when the photo is gone or changed. */
static void preview(srv_ctx *c, const srv_req *r, srv_resp *o) {
    int64_t id = photo_id(r, "/api/preview/", o);
    cdb_engine *e = id ? photo_db(c, r, o) : NULL;
    cdb_engine_preview p;
    if (!e) return;
    /* the tag first (the photo checked on disk, nothing decoded): a revalidation is cheap */
    if (r->if_none_match &&
        cdb_engine_preview_get(e, id, CDB_ENGINE_PREVIEW_PX, 1, &p) == CDB_OK) {
        snprintf(o->etag, sizeof o->etag, "\"p%s\"", p.tag);
        cdb_engine_preview_clear(&p);
        if (strstr(r->if_none_match, o->etag)) {
            o->cache = "private, no-cache";
            o->status = 304;
            return;
        }
    }
    if (cdb_engine_preview_get(e, id, CDB_ENGINE_PREVIEW_PX, 0, &p) != CDB_OK) {
        o->etag[0] = '\0';
        cdb_srv_engine_error(o);
        return;
    }
    snprintf(o->etag, sizeof o->etag, "\"p%s\"", p.tag);
    o->cache = "private, no-cache"; /* revalidated: a changed photo gets a new one */
    o->status = 200;
    o->content_type = "image/jpeg";
    o->body = p.jpeg; /* cdb_free is free */
    o->len = p.n;
}

/* GET /api/peer/P/KIND/ID?db=D: peer P's thumb, file or preview of its photo ID in its
** database D, through this server (peers.c says why). P, ID and D are integers; KIND one
** of the three: the URL asked for is built from the configured peer alone. */
static void peer_photo(srv_ctx *c, const srv_req *r, srv_resp *o) {
    static const char *const kinds[] = {"thumb", "file", "preview"};
    const char *p = r->path + strlen("/api/peer/"), *db = cdb_srv_arg(r, "db");
    char *end = NULL;
    long peer, v = 0;
    size_t i;
    int64_t id = 0;
    if (!c->peers || *p < '0' || *p > '9' || (peer = strtol(p, &end, 10)) < 0 ||
        peer >= cdb_srv_peers_count(c->peers) || *end != '/') {
        cdb_srv_error(o, 404, "not_found", "no such peer");
        return;
    }
    for (i = 0; i < 3; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "/%s/", kinds[i]);
        if (!strncmp(end, prefix, strlen(prefix))) {
            id = path_id(end, prefix);
            break;
        }
    }
    if (i == 3 || !id || (db && cdb_srv_parse_int(db, 0, CDB_SERVE_MAX_DBS - 1, &v))) {
        cdb_srv_error(o, 404, "not_found", "no photo has that id");
        return;
    }
    if (!cdb_srv_peers_enter(c->peers)) { /* a slow peer holds the threads it may: no more */
        cdb_srv_error(o, 503, "busy", "the peers keep as many requests waiting as they may; "
                                      "try again");
        o->retry_after_s = 1;
        return;
    }
    cdb_srv_peer_proxy(c->peers, (int)peer, kinds[i], id, (int)v, o);
    cdb_srv_peers_leave(c->peers);
}

/* ---- stats, folders, health, login ------------------------------------------------------ */

static void stats(srv_ctx *c, const srv_req *r, srv_resp *o) {
    cdb_engine_stats s;
    (void)r;
    json_t *doc, *files, *models;
    if (cdb_engine_stats_get(c->e, 0, &s) != CDB_OK) {
        cdb_srv_engine_error(o);
        return;
    }
    doc = json_object();
    files = json_object();
    json_object_set_new(files, "pending", json_integer(s.files[1]));
    json_object_set_new(files, "ok", json_integer(s.files[2]));
    json_object_set_new(files, "error", json_integer(s.files[3]));
    json_object_set_new(files, "deleted", json_integer(s.files[4]));
    json_object_set_new(files, "to_retry", json_integer(s.n_retry));
    json_object_set_new(doc, "files", files);
    json_object_set_new(doc, "folders", json_integer(s.n_roots));
    json_object_set_new(doc, "generation", json_integer(s.generation));
    json_object_set_new(doc, "thumb_size", json_integer(s.thumb_size));
    json_object_set_new(doc, "model", json_string(c->model.name));
    json_object_set_new(doc, "searches", json_integer(atomic_load(&c->n_search)));
    /* the page's banner: the bundled model meets real photos, which it does not know */
    json_object_set_new(doc, "bundled_model", json_boolean(c->bundled_model));
    json_object_set_new(doc, "real_photos", json_boolean(s.real_photos));
    models = json_array();
    for (int i = 0; i < s.n_models; i++) {
        json_t *m = json_object();
        json_object_set_new(m, "id", json_integer(s.models[i].model.id));
        json_object_set_new(m, "name", json_string(s.models[i].model.name));
        json_object_set_new(m, "dim", json_integer(s.models[i].model.dim));
        json_object_set_new(m, "default", json_boolean(s.models[i].model.is_default));
        json_object_set_new(m, "vectors", json_integer(s.models[i].n_vectors));
        json_array_append_new(models, m);
    }
    json_object_set_new(doc, "models", models);
    cdb_engine_stats_free(&s);
    cdb_srv_json_fresh(o, doc);
}

/* GET /api/folders?under=FOLDER: the folders directly inside FOLDER (a recorded root
** or a folder in one, read as search's under) that hold photos, from the catalog. */
static void subfolders(srv_ctx *c, const char *under, srv_resp *o) {
    cdb_engine_subfolder *f = NULL;
    int n = 0;
    json_t *arr, *doc;
    if (under[0] != '/' || strlen(under) >= PATH_MAX / 2) {
        cdb_srv_error(o, 400, "bad_request", "under must be an absolute path");
        return;
    }
    if (cdb_engine_subfolders(c->e, under, &f, &n) != CDB_OK) {
        if (cdb_engine_errcode() == CDB_ENGINE_E_NOT_A_ROOT)
            cdb_srv_error(o, 404, "not_found", "%s", cdb_errmsg());
        else
            cdb_srv_engine_error(o);
        return;
    }
    arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *x = json_object();
        cdb_srv_json_path(x, "path", f[i].path);
        json_object_set_new(x, "kind", json_string("folder"));
        json_object_set_new(x, "files", json_integer(f[i].files));
        json_object_set_new(x, "subfolders", json_boolean(f[i].has_subfolders));
        json_array_append_new(arr, x);
    }
    cdb_engine_subfolders_free(f, n);
    doc = json_object();
    cdb_srv_json_path(doc, "under", under);
    json_object_set_new(doc, "folders", arr);
    cdb_srv_json_fresh(o, doc);
}

/* GET /api/duplicates?kind=K: the groups, as the header above says. */
static void duplicates(srv_ctx *c, const srv_req *r, srv_resp *o) {
    const char *k = cdb_srv_arg(r, "kind");
    int kind = -1;
    cdb_engine_dups d;
    char url[64];
    if (k && *k && (kind = cdb_dupes_kind_parse(k)) < 0) {
        cdb_srv_error(o, 400, "bad_request", "kind must be exact, near, pair or burst");
        return;
    }
    if (cdb_engine_duplicates(c->e, kind, &d) != CDB_OK) {
        cdb_srv_engine_error(o);
        return;
    }
    json_t *groups = json_array();
    for (int g = 0; g < d.n_groups; g++) {
        const cdb_engine_dup_group *dg = &d.groups[g];
        json_t *files = json_array(), *x = json_object();
        for (int i = 0; i < dg->n_files; i++) {
            const cdb_engine_dup_file *f = &dg->files[i];
            json_t *y = json_object();
            json_object_set_new(y, "id", json_integer(f->id));
            cdb_srv_json_path(y, "path", f->path);
            json_object_set_new(y, "width", json_integer(f->width));
            json_object_set_new(y, "height", json_integer(f->height));
            json_object_set_new(y, "bytes", json_integer(f->bytes));
            json_object_set_new(y, "taken", f->taken[0] ? json_string(f->taken) : json_null());
            snprintf(url, sizeof url, "/api/thumb/%lld%s", (long long)f->id,
                     c->n_es > 1 ? "?db=0" : ""); /* the groups are the first database's */
            json_object_set_new(y, "thumb", json_string(url));
            json_array_append_new(files, y);
        }
        json_object_set_new(x, "kind", json_string(cdb_dupes_kind_name((cdb_dupes_kind)dg->kind)));
        json_object_set_new(x, "keep", json_integer(dg->keep));
        json_object_set_new(x, "files", files);
        json_array_append_new(groups, x);
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "groups", groups);
    json_object_set_new(doc, "files", json_integer(d.n_files));
    json_object_set_new(doc, "unreadable", json_integer(d.n_unreadable));
    cdb_engine_dups_free(&d);
    cdb_srv_json_fresh(o, doc);
}

static void folders(srv_ctx *c, const srv_req *r, srv_resp *o) {
    cdb_engine_folder *f = NULL;
    int n = 0;
    json_t *arr;
    const char *under = cdb_srv_arg(r, "under");
    if (under && *under) {
        subfolders(c, under, o);
        return;
    }
    if (cdb_engine_folders(c->e, &f, &n) != CDB_OK) {
        cdb_srv_engine_error(o);
        return;
    }
    arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *x = json_object();
        json_object_set_new(x, "id", json_integer(f[i].id));
        cdb_srv_json_path(x, "path", f[i].path);
        json_object_set_new(x, "kind", json_string(f[i].is_file ? "file" : "folder"));
        json_object_set_new(x, "status", json_string(f[i].status));
        json_object_set_new(x, "files", json_integer(f[i].files));
        json_object_set_new(x, "vectors", json_integer(f[i].vectors));
        json_array_append_new(arr, x);
    }
    cdb_engine_folders_free(f, n);
    json_t *doc = json_object();
    json_object_set_new(doc, "folders", arr);
    cdb_srv_json_fresh(o, doc);
}

/* Constant time in the length of the candidate. */
static int token_equal(const char *want, const char *got, size_t n) {
    size_t wn = strlen(want);
    unsigned char d = (unsigned char)(wn != n);
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(got[i] ^ want[i % (wn ? wn : 1)]);
    return d == 0;
}

/* POST /api/login {"token"}: a session cookie (session.c), never the token itself. */
static void login(srv_ctx *c, const srv_req *r, srv_resp *o) {
    json_t *doc = cdb_srv_body_object(r, 0, o), *t = NULL;
    char v[160];
    int ttl;
    if (!doc) return;
    if (!(t = json_object_get(doc, "token")) || !json_is_string(t)) {
        cdb_srv_error(o, 400, "bad_json", "expected {\"token\": \"...\"}");
    } else if (!c->have_token) {
        cdb_srv_json(o, 200, json_pack("{s:b}", "ok", 1)); /* nothing to log in to */
    } else if (!token_equal(c->token, json_string_value(t), json_string_length(t))) {
        cdb_srv_error(o, 401, "unauthorized", "wrong token");
    } else if (!c->sessions || cdb_srv_session_make(c->sessions, v, sizeof v) != 0) {
        cdb_srv_error(o, 500, "internal", "cannot start a session");
    } else {
        ttl = cdb_srv_sessions_ttl(c->sessions);
        cdb_srv_json_fresh(o, json_pack("{s:b,s:i}", "ok", 1, "expires_in", ttl));
        snprintf(o->set_cookie, sizeof o->set_cookie,
                 "%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Strict", SRV_SESSION_COOKIE, v,
                 ttl);
    }
    json_decref(doc);
}

/* POST /api/logout: the session is void from now on, and the cookie is dropped. */
static void logout(srv_ctx *c, const srv_req *r, srv_resp *o) {
    if (c->sessions && r->session) cdb_srv_session_revoke(c->sessions, r->session);
    cdb_srv_json_fresh(o, json_pack("{s:b}", "ok", 1));
    snprintf(o->set_cookie, sizeof o->set_cookie,
             "%s=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict", SRV_SESSION_COOKIE);
}

/* GET /api/session: whether a token is needed and whether this browser is signed in. */
static void session(srv_ctx *c, const srv_req *r, srv_resp *o) {
    int in = c->sessions && r->session && cdb_srv_session_check(c->sessions, r->session);
    cdb_srv_json_fresh(o,
                       json_pack("{s:b,s:b}", "token_required", c->have_token, "signed_in", in));
}

/* ---- routing ------------------------------------------------------------------------------ */

static void method_not_allowed(srv_resp *o, const char *allowed) {
    cdb_srv_error(o, 405, "method_not_allowed", "use %s here", allowed);
}

/* GET /healthz: the server answers. */
static void healthz(srv_ctx *c, const srv_req *r, srv_resp *o) {
    (void)c, (void)r;
    cdb_srv_json_fresh(o, json_pack("{s:s}", "status", "ok"));
}

/* The API: a path (a prefix when it ends in '/'), the methods it takes ("GET" takes
** HEAD too), the handler. */
typedef void (*route_fn)(srv_ctx *c, const srv_req *r, srv_resp *o);
static const struct api_route {
    const char *path, *methods;
    route_fn fn;
} k_routes[] = {
    {"/api/search", "GET or POST", search}, {"/api/thumb/", "GET", thumb},
    {"/api/file/", "GET", original},        {"/api/preview/", "GET", preview},
    {"/api/peer/", "GET", peer_photo},      {"/api/stats", "GET", stats},
    {"/api/duplicates", "GET", duplicates}, {"/api/folders", "GET", folders},
    {"/api/login", "POST", login},          {"/api/logout", "POST", logout},
    {"/api/session", "GET", session},       {"/healthz", "GET", healthz},
    {"/api/copies_of", "POST", cdb_srv_copies_of},
};

/* Answers a request for an API path (1), else 0. */
static int route(srv_ctx *c, const srv_req *r, srv_resp *o, const char *p) {
    for (size_t i = 0; i < sizeof k_routes / sizeof *k_routes; i++) {
        const struct api_route *rt = &k_routes[i];
        size_t n = strlen(rt->path);
        if (rt->path[n - 1] == '/' ? strncmp(p, rt->path, n) : strcmp(p, rt->path)) continue;
        int takes = (strstr(rt->methods, "GET") && is_get(r)) ||
                    (strstr(rt->methods, "POST") && is(r, "POST"));
        if (takes)
            rt->fn(c, r, o);
        else
            method_not_allowed(o, rt->methods);
        return 1;
    }
    return 0;
}

void cdb_srv_handle(srv_ctx *c, const srv_req *r, srv_resp *o) {
    const char *p = r->path ? r->path : "";
    const srv_asset *a;
    cdb_srv_resp_init(o);
    if (!r->method) {
        cdb_srv_error(o, 400, "bad_request", "no method");
        return;
    }
    if (is(r, "OPTIONS")) { /* a CORS preflight (or a probe) */
        o->status = 204;
        o->cors = c->cors_origin != NULL;
        return;
    }
    if (cdb_srv_clip_retrieval(c, r, o)) return;
    if (route(c, r, o, p)) return;
    if ((a = cdb_srv_asset_find(p))) {
        if (!is_get(r)) {
            method_not_allowed(o, "GET");
        } else if (r->if_none_match && strstr(r->if_none_match, a->etag)) {
            o->status = 304;
            snprintf(o->etag, sizeof o->etag, "%s", a->etag);
        } else {
            o->status = 200;
            o->content_type = a->content_type;
            o->static_body = a->data;
            o->len = a->len;
            o->cache = "no-cache";
            snprintf(o->etag, sizeof o->etag, "%s", a->etag);
        }
    } else {
        cdb_srv_error(o, 404, "not_found", "no such page or API: %.200s", p);
    }
}
