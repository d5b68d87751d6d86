/*
** serve.h: `clipdb serve`, an HTTP server over one engine handle (engine/engine.h):
** a JSON API (search, thumbnails, originals by id, stats, folders), clip-retrieval's
** /knn-service, /indices-list and /metadata, and the web page at /. The module's
** whole contract; the handlers are serve/api.c and serve/clip_retrieval.c, the HTTP
** side (libmicrohttpd) serve/http.c, the page serve/page/.
**
** Security model: it binds loopback unless told otherwise; any other address needs
** an access token (params.token, which the CLI reads from a file). With a token,
** every request but /healthz must carry it (`Authorization: Bearer T`, or the
** session cookie the page gets from POST /api/login: derived from the token, never
** the token, with an expiry; POST /api/logout ends it). Without one, requests whose Host is
** not a loopback name are refused (DNS rebinding). Files are served by catalog id
** only: no path ever comes from a request.
**
** Threading: cdb_serve_start returns once the server listens; requests are served
** by params.threads threads, concurrently, on the engine's thread-safe calls. Stop it
** from any one thread with cdb_serve_stop.
*/
#ifndef CDB_SERVE_H
#define CDB_SERVE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cdb_engine;
typedef struct cdb_serve cdb_serve;

typedef struct cdb_serve_params {
    const char *host;        /* address to bind (default "127.0.0.1"); "::1" and other
                                IPv6 literals too. Copied */
    int port;                /* 0: an ephemeral port (cdb_serve_port says which) */
    int threads;             /* request threads; 0: cdb_default_threads() */
    const char *token;       /* the access token (copied); NULL: none, then host must be
                                loopback (CDB_INVALID otherwise) */
    int max_connections;     /* beyond it, requests get 503 and the connection closes;
                                0 (the default): sized to the file-descriptor limit
                                (RLIMIT_NOFILE: 3/4 of it less 256, at most 100,000) */
    int timeout_s;           /* an idle connection is closed after (default 15) */
    size_t max_body_bytes;   /* larger request bodies get 413 (default 32 MiB: an image
                                as base64) */
    const char *cors_origin; /* an origin allowed to call the API from a browser
                                (clip-front served elsewhere); NULL: same origin only */
    int default_k;           /* hits per page when a request does not say (default 40) */
    /* Appended. Deadlines, however busy the client keeps the connection: a request's
    ** line and headers must be in within header_timeout_s (default 10) of the connection
    ** opening (on a kept-alive one: of the last response plus timeout_s), its body within
    ** body_timeout_s (default 60) of its headers; past one it gets a 408 and is closed. */
    int header_timeout_s;
    int body_timeout_s;
    int session_ttl_s;       /* the page's sign-in lasts this long (default 12 hours) */
    /* Appended. 1: the model served is clipdb's bundled shapes model (the CLI knows
    ** where that is). /api/stats says so beside the database's real_photos
    ** (cdb_engine_stats), and the page shows a banner when both hold. Default 0. */
    int bundled_model;
    /* Appended. More databases served beside e (`clipdb serve --db A --db B`): a search
    ** answers from e and all of these at once, merged exactly (cdb_engine_search_many:
    ** their vectors must be of e's model); each hit says its database ("db": 0 for e,
    ** i + 1 for more[i]) and its thumb, file and preview URLs carry it (?db=N), so an id
    ** never opens a file of another database. Every other route answers for e alone.
    ** Borrowed: they outlive the server. */
    struct cdb_engine *const *more;
    int n_more;
    /* Appended. Other clipdb servers a search is fanned out to (`--peer URL`): their
    ** /api/search, asked for the same query and merged with the local hits. Base URLs
    ** "http://host:port" (copied); peer_tokens[i] the access token peer i wants (NULL
    ** entries or array: none; copied). A peer that does not answer in peer_timeout_ms
    ** (default 2000), or answers something unusable, is named in the response's
    ** "missing" with "partial": true; the rest is still answered. At most threads / 2
    ** requests (at least 1) wait on peers at once: past that a search is answered from
    ** the local databases alone ("peers_busy": true) and a proxied photo gets a 503 with
    ** Retry-After, so a slow peer never holds every thread. */
    const char *const *peers;
    const char *const *peer_tokens;
    int n_peers;
    int peer_timeout_ms;
} cdb_serve_params;
cdb_serve_params cdb_serve_params_default(void);

#define CDB_SERVE_MAX_PEERS 64
#define CDB_SERVE_MAX_DBS 64 /* e and params.more together */

/* Starts serving e (a reader engine whose model should already be loaded: see
** cdb_engine_load_model). CDB_INVALID for a non-loopback host without a token, a CORS
** origin of "*" without a token (any web page could read the library), or bad params; CDB_IO when the address cannot be bound (in use, no permission). The
** engine must outlive the server. */
cdb_status cdb_serve_start(struct cdb_engine *e, const cdb_serve_params *p,
                           cdb_serve **out /* OUT */);
/* The port it listens on. */
int cdb_serve_port(const cdb_serve *s);
/* Stops accepting connections, lets the requests in flight finish (up to grace_ms;
** then they are cut), closes everything and frees s. NULL is fine. */
void cdb_serve_stop(cdb_serve *s, int grace_ms);

/* Counters since the start (for tests and logs). */
typedef struct cdb_serve_counters {
    int64_t requests, errors_4xx, errors_5xx, refused_busy;
    int64_t in_flight, connections;
    int64_t cut_deadline;    /* connections closed for missing a header or body deadline */
    int max_connections;     /* the capacity in use (params.max_connections or sized) */
} cdb_serve_counters;
void cdb_serve_get_counters(const cdb_serve *s, cdb_serve_counters *out /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CDB_SERVE_H */
