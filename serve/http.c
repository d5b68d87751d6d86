/*
** http.c: the HTTP side of `clipdb serve`, on libmicrohttpd (HTTP/1.1, keep-alive,
** a pool of threads each with its own epoll loop, request bodies streamed in).
**
** Per request: the first call checks the limits before anything is read (too many
** connections: 503 and close; the access token: 401; a Host that is not loopback when
** there is no token: 403; a declared body over the cap: 413), then the body is
** collected (a chunked one over the cap is discarded and answered 413), then
** cdb_srv_handle answers and one line is logged at info level when the request completes
** (client, method, path, status, bytes, milliseconds; never the query string, which
** may hold what someone searched for).
**
** Limits: params.max_connections (beyond: 503; the socket layer refuses 64 more), by
** default sized to the file-descriptor limit: in epoll mode a waiting connection costs
** a socket and a few pages, so thousands of slow clients leave room for real ones.
** params.timeout_s of inactivity closes a connection. Deadlines, which a client that
** trickles a byte now and then cannot stretch: each connection's state (conn_state)
** carries the time by which its request's headers (header_timeout_s), then its body
** (body_timeout_s), must be in; a sweeper thread answers the late ones 408 and shuts
** their sockets down (MHD then closes them). Query arguments that are not UTF-8 or hold
** a NUL: 400; more than SRV_URL_MAX bytes of URL: a JSON 414 (up to the 2 MiB a
** connection may hold for its head; beyond that MHD's own 414/431).
**
** Stop: MHD_quiesce_daemon stops accepting, the requests in flight finish (up to
** the grace period), then the daemon stops and closes idle keep-alive connections.
*/
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "serve/serve_int.h"

/* libmicrohttpd is opened when a server starts (core.h, cdb_dynlib_open): it and GnuTLS
** under it cost every clipdb process milliseconds at start-up, and only `clipdb serve`
** uses them. The calls below keep their names: each is a macro for the table's entry. */
#define MHD_FNS(X) \
    X(MHD_add_response_header) \
    X(MHD_create_response_from_buffer) \
    X(MHD_create_response_from_fd_at_offset64) \
    X(MHD_destroy_response) \
    X(MHD_get_connection_info) \
    X(MHD_get_connection_values_n) \
    X(MHD_get_daemon_info) \
    X(MHD_lookup_connection_value) \
    X(MHD_queue_response) \
    X(MHD_quiesce_daemon) \
    X(MHD_start_daemon) \
    X(MHD_stop_daemon)
CDB_DYNLIB_LAZY(mhd_lib, mhd, MHD_FNS, "libmicrohttpd", "CLIPDB_LIBMICROHTTPD",
                "libmicrohttpd.so.12", "libmicrohttpd.so");
#define MHD_add_response_header mhd.MHD_add_response_header
#define MHD_create_response_from_buffer mhd.MHD_create_response_from_buffer
#define MHD_create_response_from_fd_at_offset64 mhd.MHD_create_response_from_fd_at_offset64
#define MHD_destroy_response mhd.MHD_destroy_response
#define MHD_get_connection_info mhd.MHD_get_connection_info
#define MHD_get_connection_values_n mhd.MHD_get_connection_values_n
#define MHD_get_daemon_info mhd.MHD_get_daemon_info
#define MHD_lookup_connection_value mhd.MHD_lookup_connection_value
#define MHD_queue_response mhd.MHD_queue_response
#define MHD_quiesce_daemon mhd.MHD_quiesce_daemon
#define MHD_start_daemon mhd.MHD_start_daemon
#define MHD_stop_daemon mhd.MHD_stop_daemon

#define SRV_HEADER_LIMIT (2 * 1024 * 1024) /* memory a connection may hold (MHD's pool) */
#define SRV_URL_MAX (96 * 1024)            /* a path and its query arguments, decoded */
#define SRV_SWEEP_MS 200

/* A connection's deadline, seen by the sweeper (the list holds every open one). */
typedef struct conn_state {
    struct conn_state *prev, *next;
    int fd;
    atomic_llong deadline_ns; /* 0: none (a request being answered) */
    int cut;                  /* the sweeper shut it down */
} conn_state;

struct cdb_serve {
    srv_ctx ctx;
    cdb_serve_params p;
    cdb_engine **es;   /* e, then params.more */
    srv_peers *peers;
    char *host, *token, *cors;
    struct MHD_Daemon *d;
    int port;
    atomic_llong requests, e4xx, e5xx, busy, in_flight, connections, cut;
    pthread_mutex_t conn_mu; /* conns; sweeper's wait */
    pthread_cond_t conn_cv;
    conn_state *conns;
    pthread_t sweeper;
    int sweeping, stopping;
};

/* One HTTP request's state across the access handler's calls. */
typedef struct req_state {
    char *body;
    size_t len, cap;
    int too_large;
    int answered;      /* a response was queued at the first call */
    int status;
    size_t bytes;
    int64_t t0;
    char method[16];
    char path[256];
} req_state;

cdb_serve_params cdb_serve_params_default(void) {
    cdb_serve_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8765;
    p.max_connections = 0;
    p.timeout_s = 15;
    p.max_body_bytes = (size_t)32 << 20;
    p.default_k = 40;
    p.header_timeout_s = 10;
    p.body_timeout_s = 60;
    p.session_ttl_s = 12 * 3600;
    return p;
}

/* ---- addresses -------------------------------------------------------------------------- */

static int loopback_addr(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) ||
               (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

/* A Host header naming this machine's loopback ("localhost", 127.x, [::1], with an
** optional port), or the address we bound. */
static int loopback_host(const char *host, const char *bound) {
    char h[300];
    size_t n;
    if (!host || !*host) return 1; /* HTTP/1.0 without Host: nothing to rebind */
    snprintf(h, sizeof h, "%s", host);
    if (h[0] == '[') { /* [v6]:port */
        char *e = strchr(h, ']');
        if (!e) return 0;
        *e = '\0';
        memmove(h, h + 1, strlen(h + 1) + 1);
    } else if (strchr(h, ':') == strrchr(h, ':') && strchr(h, ':')) {
        *strchr(h, ':') = '\0'; /* host:port */
    }
    n = strlen(h);
    while (n && h[n - 1] == '.') h[--n] = '\0';
    if (!strcasecmp(h, "localhost") || !strcasecmp(h, bound)) return 1;
    {
        struct in_addr a4;
        struct in6_addr a6;
        if (inet_pton(AF_INET, h, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
        if (inet_pton(AF_INET6, h, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    }
    return 0;
}

/* ---- responses --------------------------------------------------------------------------- */

static const char k_csp[] =
    "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

static enum MHD_Result send_resp(cdb_serve *s, struct MHD_Connection *conn, req_state *st,
                                 srv_resp *o) {
    struct MHD_Response *resp;
    enum MHD_Result rc;
    size_t len = 0;
    if (o->fd >= 0) { /* fd_size bytes from fd_offset (a range); MHD closes the fd */
        resp = MHD_create_response_from_fd_at_offset64((uint64_t)o->fd_size, o->fd,
                                                       (uint64_t)o->fd_offset);
        o->fd = -1;
        len = (size_t)o->fd_size;
    } else if (o->status == 304 || o->status == 204) {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else if (o->static_body) {
        resp =
            MHD_create_response_from_buffer(o->len, (void *)o->static_body, MHD_RESPMEM_PERSISTENT);
        len = o->len;
    } else {
        resp = MHD_create_response_from_buffer(o->len, o->body ? o->body : (void *)"",
                                               o->body ? MHD_RESPMEM_MUST_FREE
                                                       : MHD_RESPMEM_PERSISTENT);
        if (resp) o->body = NULL; /* MHD frees it */
        len = o->len;
    }
    if (!resp) {
        cdb_srv_resp_clear(o);
        if (o->fd >= 0) close(o->fd);
        return MHD_NO;
    }
    if (o->content_type) MHD_add_response_header(resp, "Content-Type", o->content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    if (o->content_type && !strncmp(o->content_type, "text/html", 9)) {
        MHD_add_response_header(resp, "Content-Security-Policy", k_csp);
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    }
    if (o->etag[0]) MHD_add_response_header(resp, "ETag", o->etag);
    if (o->cache) MHD_add_response_header(resp, "Cache-Control", o->cache);
    if (o->disposition[0]) MHD_add_response_header(resp, "Content-Disposition", o->disposition);
    if (o->content_range[0]) MHD_add_response_header(resp, "Content-Range", o->content_range);
    if (o->accept_ranges) MHD_add_response_header(resp, "Accept-Ranges", "bytes");
    if (o->status == 503 || o->status == 413) MHD_add_response_header(resp, "Connection", "close");
    if (o->retry_after_s > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", o->retry_after_s);
        MHD_add_response_header(resp, "Retry-After", v);
    }
    if (o->status == 401)
        MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"clipdb\"");
    if (o->set_cookie[0] && s->token) MHD_add_response_header(resp, "Set-Cookie", o->set_cookie);
    if (o->cors && s->cors) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", s->cors);
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                                "Authorization, Content-Type");
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    rc = MHD_queue_response(conn, (unsigned)o->status, resp);
    MHD_destroy_response(resp);
    st->status = o->status;
    st->bytes = len;
    if (o->status >= 500) atomic_fetch_add(&s->e5xx, 1);
    else if (o->status >= 400) atomic_fetch_add(&s->e4xx, 1);
    return rc;
}

static enum MHD_Result send_error(cdb_serve *s, struct MHD_Connection *conn, req_state *st,
                                  int status, const char *code, const char *msg) {
    srv_resp o;
    enum MHD_Result rc;
    cdb_srv_resp_init(&o);
    cdb_srv_error(&o, status, code, "%s", msg);
    rc = send_resp(s, conn, st, &o);
    cdb_srv_resp_clear(&o);
    st->answered = 1;
    return rc;
}

/* ---- requests --------------------------------------------------------------------------- */

typedef struct args_ud {
    srv_req *r;
    size_t url_bytes;  /* the path and every key and value, decoded */
    const char *bad;   /* why the arguments are refused, or NULL */
} args_ud;

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                              size_t key_size, const char *value, size_t value_size) {
    args_ud *ud = cls;
    srv_req *r = ud->r;
    (void)kind;
    ud->url_bytes += key_size + value_size + 2;
    if (ud->bad) return MHD_YES; /* the first problem is the one reported */
    if (!value) value = "";
    if (strlen(key) != key_size || strlen(value) != value_size)
        ud->bad = "a NUL character in the query string";
    else if (!cdb_utf8_valid(key, key_size) || !cdb_utf8_valid(value, value_size))
        ud->bad = "the query string is not UTF-8 (percent-encode UTF-8 bytes)";
    else if (r->n_args >= SRV_MAX_ARGS)
        ud->bad = "too many query arguments";
    else {
        r->keys[r->n_args] = key;
        r->vals[r->n_args] = value;
        r->n_args++;
    }
    return MHD_YES;
}

/* Requests that need no token: the page's own files (so that it can ask for the token),
** signing in and out, the health check, and CORS preflights (answered with headers only). */
static int public_path(const char *method, const char *path) {
    if (!strcmp(method, "OPTIONS")) return 1; /* a CORS preflight never carries credentials */
    if (!strcmp(path, "/healthz") || !strcmp(path, "/api/session")) return 1;
    if (!strcmp(path, "/api/login") || !strcmp(path, "/api/logout"))
        return !strcmp(method, "POST");
    return cdb_srv_asset_find(path) != NULL;
}

/* The bearer token (constant time in its length), or the page's session cookie. */
static int authorized(cdb_serve *s, struct MHD_Connection *conn) {
    const char *auth =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *cookie = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, SRV_SESSION_COOKIE);
    size_t want = strlen(s->token), n;
    unsigned char d;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) {
        const char *got = auth + 7;
        n = strlen(got);
        d = (unsigned char)(n != want);
        for (size_t i = 0; i < n; i++) d |= (unsigned char)(got[i] ^ s->token[i % want]);
        return d == 0;
    }
    return cookie && cdb_srv_session_check(s->ctx.sessions, cookie);
}

/* ---- deadlines -------------------------------------------------------------------------- */

static conn_state *conn_of(struct MHD_Connection *conn) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The connection's next deadline: seconds from now, or none (0). */
static void set_deadline(struct MHD_Connection *conn, int seconds) {
    conn_state *cs = conn_of(conn);
    if (cs)
        atomic_store(&cs->deadline_ns,
                     seconds > 0 ? cdb_now_ns() + (int64_t)seconds * 1000000000 : 0);
}

/* Every SRV_SWEEP_MS: a connection past its deadline gets a 408 (best effort: nothing of
** a response was sent yet in these phases) and its socket shut down, which MHD sees as
** the client leaving. The list lock keeps MHD from closing the fd meanwhile: its
** NOTIFY_CLOSED (on_connection) comes before the close and takes the same lock. */
static void *sweeper(void *arg) {
    static const char body[] =
        "{\"error\":{\"code\":\"timeout\",\"message\":\"the request did not arrive in time\"}}";
    char k408[300];
    int n408 = snprintf(k408, sizeof k408,
                        "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: "
                        "application/json; charset=utf-8\r\nContent-Length: %zu\r\n\r\n%s",
                        sizeof body - 1, body);
    cdb_serve *s = arg;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->stopping) {
        struct timespec ts;
        int64_t now = cdb_now_ns();
        for (conn_state *c = s->conns; c; c = c->next) {
            int64_t dl = atomic_load(&c->deadline_ns);
            if (c->cut || !dl || now < dl) continue;
            c->cut = 1;
            atomic_fetch_add(&s->cut, 1);
            (void)!send(c->fd, k408, (size_t)n408, MSG_DONTWAIT | MSG_NOSIGNAL);
            shutdown(c->fd, SHUT_RDWR);
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += SRV_SWEEP_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->conn_cv, &s->conn_mu, &ts);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    cdb_serve *s = cls;
    req_state *st = *con_cls;
    (void)version;
    if (!st) { /* the first call: headers are in, nothing of the body yet */
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        *con_cls = st;
        st->t0 = cdb_now_ns();
        snprintf(st->method, sizeof st->method, "%s", method);
        snprintf(st->path, sizeof st->path, "%s", url);
        atomic_fetch_add(&s->requests, 1);
        atomic_fetch_add(&s->in_flight, 1);
        set_deadline(conn, s->p.body_timeout_s); /* the headers are in: now the body */
        if (atomic_load(&s->connections) > s->p.max_connections) {
            atomic_fetch_add(&s->busy, 1);
            return send_error(s, conn, st, 503, "busy", "too many connections; try again");
        }
        if (!s->token && !loopback_host(host, s->host))
            return send_error(s, conn, st, 403, "forbidden_host",
                              "this server answers only to a loopback Host");
        if (s->token && !public_path(method, url) && !authorized(s, conn))
            return send_error(s, conn, st, 401, "unauthorized",
                              "an access token is needed (Authorization: Bearer TOKEN)");
        if (cl) {
            char *end;
            unsigned long long n = strtoull(cl, &end, 10);
            if (*end || n > s->p.max_body_bytes)
                return send_error(s, conn, st, 413, "too_large", "the request body is too large");
        }
        return MHD_YES;
    }
    if (st->answered) { /* refused at the first call: drop whatever body comes */
        *upload_data_size = 0;
        set_deadline(conn, 0);
        return MHD_YES;
    }
    if (*upload_data_size) { /* a piece of the body */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (st->too_large || st->len + n > s->p.max_body_bytes) {
            st->too_large = 1;
            return MHD_YES;
        }
        if (cdb_srv_buf_append(&st->body, &st->len, &st->cap, upload_data, n) != 0) return MHD_NO;
        return MHD_YES;
    }
    set_deadline(conn, 0); /* the whole request is in: answering it has no deadline */
    if (st->too_large)
        return send_error(s, conn, st, 413, "too_large", "the request body is too large");
    {
        srv_req r;
        srv_resp o;
        args_ud ud = {&r, 0, NULL};
        enum MHD_Result rc;
        memset(&r, 0, sizeof r);
        r.method = method;
        r.path = url;
        MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, on_arg, &ud);
        if (ud.url_bytes + strlen(url) > SRV_URL_MAX)
            return send_error(s, conn, st, 414, "uri_too_long",
                              "the URL is too long: send a long query as POST /api/search");
        if (ud.bad) return send_error(s, conn, st, 400, "bad_query", ud.bad);
        r.session = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND, SRV_SESSION_COOKIE);
        r.host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        r.content_type =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        r.if_none_match =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
        r.range = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
        r.body = st->body ? st->body : "";
        r.body_len = st->len;
        cdb_srv_handle(&s->ctx, &r, &o);
        rc = send_resp(s, conn, st, &o);
        cdb_srv_resp_clear(&o);
        if (o.fd >= 0) close(o.fd);
        return rc;
    }
}

/* Control characters out of a logged path. */
static void clean(char *p) {
    for (; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    cdb_serve *s = cls;
    req_state *st = *con_cls;
    char who[64] = "?";
    const union MHD_ConnectionInfo *ci;
    if (!st) return;
    ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, who, sizeof who);
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, who, sizeof who);
    }
    clean(st->path);
    clean(st->method);
    CDB_LOG_INFO("%s %s %s %d %zu %.1fms%s", who, st->method, st->path, st->status, st->bytes,
                 (double)(cdb_now_ns() - st->t0) / 1e6,
                 toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (cut short)");
    atomic_fetch_sub(&s->in_flight, 1);
    free(st->body);
    free(st);
    *con_cls = NULL;
    /* kept alive: the next request's headers are due after the idle time it may take */
    set_deadline(conn, s->p.timeout_s + s->p.header_timeout_s);
}

/* Opened: counted, and put on the sweeper's list with its header deadline. Closed (MHD
** calls this before it closes the socket): off the list. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    cdb_serve *s = cls;
    conn_state *cs;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        atomic_fetch_add(&s->connections, 1);
        if (!ci || !(cs = calloc(1, sizeof *cs))) return; /* no deadline: idle timeout only */
        cs->fd = ci->connect_fd;
        atomic_init(&cs->deadline_ns,
                    cdb_now_ns() + (int64_t)s->p.header_timeout_s * 1000000000);
        pthread_mutex_lock(&s->conn_mu);
        cs->next = s->conns;
        if (s->conns) s->conns->prev = cs;
        s->conns = cs;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = cs;
        return;
    }
    atomic_fetch_sub(&s->connections, 1);
    if (!(cs = *socket_context)) return;
    pthread_mutex_lock(&s->conn_mu);
    if (cs->prev) cs->prev->next = cs->next;
    else s->conns = cs->next;
    if (cs->next) cs->next->prev = cs->prev;
    pthread_mutex_unlock(&s->conn_mu);
    free(cs);
    *socket_context = NULL;
}

static void on_mhd_log(void *cls, const char *fm, va_list ap) {
    char line[512];
    size_t n;
    (void)cls;
    vsnprintf(line, sizeof line, fm, ap);
    n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    CDB_LOG_DEBUG("http: %s", line);
}

/* ---- start / stop ------------------------------------------------------------------------ */

/* The connections this process can hold: 3/4 of its file descriptors less 256 (the rest
** for the database, the model and the index), 64 to 100,000. */
static int sized_capacity(void) {
    struct rlimit rl;
    long long n = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        n = rl.rlim_cur == RLIM_INFINITY ? 1 << 20 : (long long)rl.rlim_cur;
    n = (n - 256) * 3 / 4;
    return n < 64 ? 64 : n > 100000 ? 100000 : (int)n;
}

cdb_status cdb_serve_start(cdb_engine *e, const cdb_serve_params *p_in, cdb_serve **out) {
    cdb_serve_params p = p_in ? *p_in : cdb_serve_params_default();
    struct addrinfo hints, *ai = NULL;
    char port[16];
    cdb_serve *s;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    int g;
    *out = NULL;
    if (cdb_dynlib_get(&mhd_lib) != CDB_OK)
        return cdb_seterr(mhd_lib.rc, "cannot serve: %s", mhd_lib.err);
    if (!p.host || !*p.host) p.host = "127.0.0.1";
    if (p.threads <= 0) p.threads = cdb_default_threads();
    if (p.max_connections <= 0) p.max_connections = sized_capacity();
    if (p.timeout_s <= 0) p.timeout_s = 15;
    if (p.header_timeout_s <= 0) p.header_timeout_s = 10;
    if (p.body_timeout_s <= 0) p.body_timeout_s = 60;
    if (p.session_ttl_s <= 0) p.session_ttl_s = 12 * 3600;
    if (!p.max_body_bytes) p.max_body_bytes = (size_t)32 << 20;
    if (p.default_k <= 0) p.default_k = 40;
    if (p.port < 0 || p.port > 65535)
        return cdb_seterr(CDB_INVALID, "port %d out of range", p.port);
    if (p.n_more < 0 || p.n_more + 1 > CDB_SERVE_MAX_DBS || (p.n_more && !p.more))
        return cdb_seterr(CDB_INVALID, "at most %d databases", CDB_SERVE_MAX_DBS);
    if (p.n_peers < 0 || p.n_peers > CDB_SERVE_MAX_PEERS || (p.n_peers && !p.peers))
        return cdb_seterr(CDB_INVALID, "at most %d peers", CDB_SERVE_MAX_PEERS);
    for (int i = 0; i < p.n_peers; i++)
        if (strncmp(p.peers[i], "http://", 7) && strncmp(p.peers[i], "https://", 8))
            return cdb_seterr(CDB_INVALID, "a peer is an http:// or https:// URL, not '%s'",
                              p.peers[i]);
    if (p.token && (strlen(p.token) < 16 || strlen(p.token) > 512))
        return cdb_seterr(CDB_INVALID, "the access token must have 16 to 512 characters");
    if (p.cors_origin && !strcmp(p.cors_origin, "*") && !p.token)
        return cdb_seterr(CDB_INVALID, "a CORS origin of '*' lets any web page read the "
                                       "library: it needs an access token (--token-file)");
    for (const char *t = p.token; t && *t; t++)
        if (*t <= ' ' || *t > '~' || *t == ';' || *t == ',' || *t == '"' || *t == '\\')
            return cdb_seterr(CDB_INVALID, "the access token must be printable ASCII without "
                                           "spaces, quotes, commas, semicolons or backslashes");
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof port, "%d", p.port);
    if ((g = getaddrinfo(p.host, port, &hints, &ai)) != 0 || !ai)
        return cdb_seterr(CDB_INVALID, "cannot use the address %s: %s", p.host, gai_strerror(g));
    if (!p.token && !loopback_addr(ai->ai_addr)) {
        freeaddrinfo(ai);
        return cdb_seterr(CDB_INVALID, "%s is not a loopback address: serving it needs an access "
                                       "token (--token-file)", p.host);
    }
    if (!(s = calloc(1, sizeof *s))) {
        freeaddrinfo(ai);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    s->p = p;
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_cond_init(&s->conn_cv, NULL);
    s->host = strdup(p.host);
    s->token = p.token ? strdup(p.token) : NULL;
    s->cors = p.cors_origin ? strdup(p.cors_origin) : NULL;
    if (p.token) s->ctx.sessions = cdb_srv_sessions_new(p.token, p.session_ttl_s);
    if ((s->es = calloc((size_t)p.n_more + 1, sizeof *s->es))) {
        s->es[0] = e;
        for (int i = 0; i < p.n_more; i++) s->es[i + 1] = p.more[i];
    }
    cdb_clearerr();
    if (p.n_peers &&
        !(s->peers = cdb_srv_peers_new(p.peers, p.peer_tokens, p.n_peers, p.peer_timeout_ms,
                                       p.threads / 2))) {
        char why[600]; /* libcurl could not be loaded (its message), else out of memory */
        snprintf(why, sizeof why, "%s", cdb_errmsg()[0] ? cdb_errmsg() : "out of memory");
        freeaddrinfo(ai);
        cdb_serve_stop(s, 0);
        return cdb_seterr(CDB_UNSUPPORTED, "cannot ask peers: %s", why);
    }
    if (!s->host || (p.token && (!s->token || !s->ctx.sessions)) || (p.cors_origin && !s->cors) ||
        !s->es || (p.n_peers && !s->peers)) {
        freeaddrinfo(ai);
        cdb_serve_stop(s, 0);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (pthread_create(&s->sweeper, NULL, sweeper, s) != 0) {
        freeaddrinfo(ai);
        cdb_serve_stop(s, 0);
        return cdb_seterr(CDB_ERROR, "cannot start a thread");
    }
    s->sweeping = 1;
    s->d = MHD_start_daemon(
        flags, (uint16_t)p.port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)p.threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(p.max_connections + 64), MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)p.timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)SRV_HEADER_LIMIT, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        int err = errno;
        cdb_serve_stop(s, 0);
        return cdb_seterr(CDB_IO, "cannot listen on %s port %d (%s)", p.host, p.port,
                          err ? strerror(err) : "in use, or not allowed");
    }
    {
        const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
        s->port = di && di->port ? di->port : p.port;
    }
    s->ctx.e = e;
    s->ctx.es = s->es;
    s->ctx.n_es = 1 + p.n_more;
    s->ctx.peers = s->peers;
    s->ctx.default_k = p.default_k;
    s->ctx.bundled_model = p.bundled_model;
    s->ctx.have_token = s->token != NULL;
    s->ctx.token = s->token;
    s->ctx.bind_host = s->host;
    s->ctx.port = s->port;
    s->ctx.cors_origin = s->cors;
    if (cdb_engine_find_model(e, NULL, &s->ctx.model) != CDB_OK)
        memset(&s->ctx.model, 0, sizeof s->ctx.model);
    *out = s;
    return CDB_OK;
}

int cdb_serve_port(const cdb_serve *s) { return s->port; }

void cdb_serve_get_counters(const cdb_serve *s, cdb_serve_counters *out) {
    out->requests = atomic_load(&s->requests);
    out->errors_4xx = atomic_load(&s->e4xx);
    out->errors_5xx = atomic_load(&s->e5xx);
    out->refused_busy = atomic_load(&s->busy);
    out->in_flight = atomic_load(&s->in_flight);
    out->connections = atomic_load(&s->connections);
    out->cut_deadline = atomic_load(&s->cut);
    out->max_connections = s->p.max_connections;
}

void cdb_serve_stop(cdb_serve *s, int grace_ms) {
    if (!s) return;
    if (s->d) {
        MHD_socket lfd = MHD_quiesce_daemon(s->d); /* no new connections */
        int64_t until = cdb_now_ns() + (int64_t)grace_ms * 1000000;
        while (atomic_load(&s->in_flight) > 0 && cdb_now_ns() < until) {
            struct timespec ts = {0, 10 * 1000000L};
            nanosleep(&ts, NULL);
        }
        MHD_stop_daemon(s->d);
        if (lfd != MHD_INVALID_SOCKET) close(lfd);
    }
    if (s->sweeping) {
        pthread_mutex_lock(&s->conn_mu);
        s->stopping = 1;
        pthread_cond_signal(&s->conn_cv);
        pthread_mutex_unlock(&s->conn_mu);
        pthread_join(s->sweeper, NULL);
    }
    pthread_cond_destroy(&s->conn_cv);
    pthread_mutex_destroy(&s->conn_mu);
    cdb_srv_sessions_free(s->ctx.sessions);
    free(s->host);
    free(s->token);
    free(s->cors);
    free(s->es);
    cdb_srv_peers_free(s->peers);
    free(s);
}
