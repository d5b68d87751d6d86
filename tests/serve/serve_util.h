/*
** serve_util.h: what the tests of `clipdb serve` share: starting the real clipdb binary
** as a server on an ephemeral loopback port (its port read from the line it prints),
** stopping it with a signal, and a small blocking HTTP/1.1 client over a socket
** (requests on one connection or many, Content-Length and chunked responses, raw
** bytes for the hostile cases). No HTTP library: the tests see the bytes on the wire.
*/
#ifndef CDB_TEST_SERVE_UTIL_H
#define CDB_TEST_SERVE_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>

#include "library/lib_util.h"

typedef struct su_server {
    pid_t pid;
    int port;
    char out[700], err[700];
} su_server;

/* Starts `clipdb serve --port 0 ARGS...` (user nobody when as_nobody and root: the
** copies of lu_reader_kit, so a checkout nobody cannot enter works), waits for its
** "http://...:PORT/" line (up to 60 s). 0, or -1 with its stderr printed. */
static inline int su_start_as(su_server *s, const char *const *args, int as_nobody) {
    const char *argv[64];
    int n = 0;
    static int seq;
    memset(s, 0, sizeof *s);
    snprintf(s->out, sizeof s->out, "%s/serve-%d-%d.out", lu_tmp, (int)getpid(), seq);
    snprintf(s->err, sizeof s->err, "%s/serve-%d-%d.err", lu_tmp, (int)getpid(), seq++);
    as_nobody = as_nobody && getuid() == 0;
    if (as_nobody) {
        if (lu_reader_kit() != 0) return -1;
        argv[n++] = "/usr/bin/setpriv";
        argv[n++] = "--reuid=65534";
        argv[n++] = "--regid=65534";
        argv[n++] = "--clear-groups";
    }
    argv[n++] = as_nobody ? lu_reader_bin : CLIPDB_BIN;
    argv[n++] = "serve";
    argv[n++] = "--port";
    argv[n++] = "0";
    for (int i = 0; args[i] && n < 62; i++) argv[n++] = args[i];
    argv[n] = NULL;
    if ((s->pid = fork()) == 0) {
        int fo = open(s->out, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            fe = open(s->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        unsetenv("CLIPDB_DB");
        unsetenv("CLIPDB_MODEL");
        if (as_nobody) lu_reader_env();
        setenv("NO_COLOR", "1", 1);
        /* a test that fails (returns early) or dies must not leave its server running */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (s->pid < 0) return -1;
    for (int i = 0; i < 600; i++) {
        char *o = cli_read_file(s->out, NULL), *p;
        int status;
        if (o && (p = strstr(o, "http://")) && (p = strchr(p + 7, ']') ? strchr(p + 7, ']') : p + 7) &&
            (p = strchr(p, ':'))) {
            s->port = atoi(p + 1);
            free(o);
            if (s->port > 0) return 0;
        }
        free(o);
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            char *e = cli_read_file(s->err, NULL);
            fprintf(stderr, "    clipdb serve exited early:\n%s\n", e ? e : "");
            free(e);
            s->pid = 0;
            return -1;
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return -1;
}
static inline int su_start(su_server *s, const char *const *args) { return su_start_as(s, args, 0); }

/* The scratch folders photos/ (n world photos of seed) and db/ (a new database) into
** lib and db (700 bytes each). 0, or -1. */
static inline int su_library(char lib[700], char db[700], uint64_t seed, int n) {
    lu_path(lib, 700, "photos");
    lu_path(db, 700, "db");
    return lu_generate(lib, seed, 0, n) == 0 && lu_init(db) == 0 ? 0 : -1;
}

/* `clipdb ingest --db db lib`, then a server over db with `--threads threads`: the
** setup of most of these tests. 0, or -1. */
static inline int su_ingest_and_start(su_server *s, const char *db, const char *lib,
                                      const char *threads) {
    if (lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL) != 0)
        return -1;
    return su_start(s, (const char *[]){"--db", db, "--threads", threads, NULL});
}

/* In a test: skip without a model, else run setup() once (0 ok) and stop the test
** when it failed; ready > 0 once it succeeded. */
#define SU_NEED_SETUP(setup, ready)                                                \
    do {                                                                           \
        if (lu_setup() == 77) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/"); \
        CHECK(setup() == 0);                                                       \
        if ((ready) <= 0) return;                                                  \
    } while (0)

/* SIGTERM and wait; its exit code. */
static inline int su_stop(su_server *s) {
    int rc;
    if (s->pid <= 0) return -1000;
    kill(s->pid, SIGTERM);
    rc = cli_wait(s->pid);
    s->pid = 0;
    return rc;
}

/* ---- the client -------------------------------------------------------------------- */

static inline int su_connect(int port) {
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static inline int su_send_all(int fd, const void *b, size_t n) {
    const char *p = b;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A whole answer on fd, as a server playing a peer sends it: 200, type, body, and the
** connection closed after it. 0, or -1 when the client went away. */
static inline int su_send_answer(int fd, const char *type, const char *body) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     type, strlen(body));
    return su_send_all(fd, head, (size_t)n) || su_send_all(fd, body, strlen(body)) ? -1 : 0;
}

typedef struct su_resp {
    int status;       /* 0: no response (closed, timed out) */
    char *headers;    /* raw header block, NUL-terminated */
    char *body;       /* NUL-terminated; len bytes */
    size_t len;
} su_resp;

static inline void su_resp_free(su_resp *r) {
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* The value of header name in r (case-insensitive), copied into buf; NULL if absent. */
static inline const char *su_header(const su_resp *r, const char *name, char *buf, size_t size) {
    size_t n = strlen(name);
    for (const char *p = r->headers; p && *p;) {
        const char *e = strstr(p, "\r\n");
        if (!e) break;
        if (!strncasecmp(p, name, n) && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ') v++;
            snprintf(buf, size, "%.*s", (int)(e - v), v);
            return buf;
        }
        p = e + 2;
    }
    return NULL;
}

/* Reads one response from fd (within timeout_ms); keeps what follows for the next. */
static inline int su_read_resp(int fd, su_resp *r, int timeout_ms) {
    char *buf = NULL, *hdr_end;
    size_t len = 0, cap = 0, need = 0;
    int have_hdr = 0, chunked = 0;
    int64_t until = cdb_now_ns() + (int64_t)timeout_ms * 1000000;
    memset(r, 0, sizeof *r);
    for (;;) {
        if (have_hdr && !chunked && len >= need) break;
        if (have_hdr && chunked) { /* complete when the last chunk arrived */
            const char *b = strstr(buf, "\r\n\r\n") + 4;
            size_t off = (size_t)(b - buf), body_len = 0;
            char *out = malloc(len + 1);
            int done = 0;
            while (out && off < len) {
                char *e = strstr(buf + off, "\r\n");
                if (!e) break;
                size_t cs = strtoul(buf + off, NULL, 16);
                if (cs == 0) {
                    done = 1;
                    break;
                }
                if ((size_t)(e + 2 - buf) + cs + 2 > len) break;
                memcpy(out + body_len, e + 2, cs);
                body_len += cs;
                off = (size_t)(e + 2 - buf) + cs + 2;
            }
            if (done) {
                out[body_len] = '\0';
                r->body = out;
                r->len = body_len;
                free(buf);
                return 0;
            }
            free(out);
        }
        int64_t left = (until - cdb_now_ns()) / 1000000;
        struct pollfd pf = {fd, POLLIN, 0};
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) break;
        if (len + 65536 + 1 > cap) {
            cap = cap ? cap * 2 : 131072;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        ssize_t k = recv(fd, buf + len, cap - len - 1, 0);
        if (k <= 0) break;
        len += (size_t)k;
        buf[len] = '\0';
        if (!have_hdr && (hdr_end = strstr(buf, "\r\n\r\n"))) {
            char v[64];
            have_hdr = 1;
            r->status = atoi(buf + 9);
            r->headers = strndup(buf, (size_t)(hdr_end - buf) + 2);
            chunked = su_header(r, "Transfer-Encoding", v, sizeof v) && strstr(v, "chunked");
            need = (size_t)(hdr_end - buf) + 4 +
                   (su_header(r, "Content-Length", v, sizeof v) ? strtoul(v, NULL, 10) : 0);
            if (r->status == 304 || r->status == 204) need = (size_t)(hdr_end - buf) + 4;
        }
    }
    if (!have_hdr || chunked || len < need) { /* closed or timed out */
        int st = have_hdr && !chunked && len >= need ? r->status : (have_hdr ? -r->status : 0);
        free(buf);
        free(r->headers);
        r->headers = NULL;
        r->status = st;
        return -1;
    }
    {
        size_t h = (size_t)(strstr(buf, "\r\n\r\n") - buf) + 4;
        r->len = need - h;
        r->body = malloc(r->len + 1);
        memcpy(r->body, buf + h, r->len);
        r->body[r->len] = '\0';
    }
    free(buf);
    return 0;
}

/* One request on fd: method path, extra header lines ("Name: v\r\n"...), body. */
static inline int su_request_on(int fd, const char *method, const char *path, const char *headers,
                                const void *body, size_t body_len, su_resp *r, int timeout_ms) {
    char head[8192];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s", method, path,
                     headers ? headers : "");
    if (body) n += snprintf(head + n, sizeof head - (size_t)n, "Content-Length: %zu\r\n", body_len);
    n += snprintf(head + n, sizeof head - (size_t)n, "\r\n");
    if (su_send_all(fd, head, (size_t)n) || (body && su_send_all(fd, body, body_len))) {
        memset(r, 0, sizeof *r);
        return -1;
    }
    return su_read_resp(fd, r, timeout_ms);
}

/* One request on a connection of its own. */
static inline int su_request(int port, const char *method, const char *path, const char *headers,
                             const void *body, size_t body_len, su_resp *r) {
    int fd = su_connect(port), rc;
    if (fd < 0) {
        memset(r, 0, sizeof *r);
        return -1;
    }
    rc = su_request_on(fd, method, path, headers, body, body_len, r, 30000);
    close(fd);
    return rc;
}

static inline int su_get(int port, const char *path, su_resp *r) {
    return su_request(port, "GET", path, NULL, NULL, 0, r);
}

/* The HTTP status of GET path (the answer read and freed), or -1 when there was none. */
static inline int su_get_status(int port, const char *path) {
    su_resp r;
    int status;
    if (su_get(port, path, &r)) return -1;
    status = r.status;
    su_resp_free(&r);
    return status;
}

static inline int su_post_json(int port, const char *path, const char *json, su_resp *r) {
    return su_request(port, "POST", path, "Content-Type: application/json\r\n", json, strlen(json), r);
}

/* Percent-encodes s for a query string into buf. */
static inline const char *su_urlenc(const char *s, char *buf, size_t size) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < size; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("-._~", *p))
            buf[o++] = (char)*p;
        else
            o += (size_t)snprintf(buf + o, size - o, "%%%02X", *p);
    }
    buf[o] = '\0';
    return buf;
}

/* The body of r as JSON (NULL when it is not). */
static inline json_t *su_json(const su_resp *r) {
    json_error_t e;
    return r->body ? json_loadb(r->body, r->len, 0, &e) : NULL;
}

/* Runs tests[0..n), stops the shared server, removes the scratch folder when all passed. */
static inline int su_main(const cdb_test_entry *tests, int n, int argc, char **argv,
                          su_server *shared) {
    int rc = cdb_test_run_(tests, n, argc, argv);
    if (shared->pid > 0) su_stop(shared);
    if (lu_tmp[0] && rc == 0) lu_rm_rf(lu_tmp);
    return rc;
}

#endif /* CDB_TEST_SERVE_UTIL_H */
