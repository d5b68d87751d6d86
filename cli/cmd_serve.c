/*
** cmd_serve.c: `clipdb serve`, the HTTP server of serve/serve.h over a reader engine:
** options, the access token (read from a file, never from the command line, where
** every user of the machine could read it), the model loaded once, and the wait for
** SIGINT/SIGTERM, after which the requests in flight finish and the server stops.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
#include "serve/serve.h"

#define STOP_GRACE_MS 10000

/* The first line of path, whitespace trimmed, into buf. Prints why on failure. */
static int read_token(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "r");
    struct stat st;
    size_t n;
    if (!f) return cdb_cli_error(strerror(errno), "cannot read the token file %s", path);
    if (fstat(fileno(f), &st) == 0 && (st.st_mode & 077))
        cdb_cli_warn("the token file %s can be read by other users (chmod 600 it)", path);
    if (!fgets(buf, (int)size, f)) buf[0] = '\0';
    fclose(f);
    n = strlen(buf);
    while (n &&
           (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = '\0';
    if (n == 0) return cdb_cli_error("it is empty", "no token in %s", path);
    return CLI_EXIT_OK;
}

/* As many file descriptors as the hard limit allows (the soft limit is often 1024):
** the server sizes its connection capacity to what it gets. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 1 << 20 : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            CDB_LOG_DEBUG("serve: cannot raise the file-descriptor limit: %s", strerror(errno));
    }
}

/* The tokens of the peers (--peer-token-file: the Nth with the Nth --peer; one alone
** for every peer) into toks[n_peers] (heap strings or NULL). CLI_EXIT_OK or the error
** printed. */
static int peer_tokens(cli_args *a, int n_peers, char **toks) {
    const char **files;
    int n = cdb_cli_get_all(a, "peer-token-file", &files);
    char buf[600];
    int rc;
    if (n && n != 1 && n != n_peers)
        return cdb_cli_usage_error("serve", "give one --peer-token-file for every peer, in "
                                            "the order of the --peer options, or one for all");
    if (n && !n_peers) return cdb_cli_usage_error("serve", "--peer-token-file without --peer");
    for (int i = 0; i < n_peers && n; i++) {
        if ((rc = read_token(files[n == 1 ? 0 : i], buf, sizeof buf)) != CLI_EXIT_OK) return rc;
        toks[i] = strdup(buf);
        memset(buf, 0, sizeof buf);
        if (!toks[i]) return cdb_cli_error("out of memory", "cannot serve");
    }
    return CLI_EXIT_OK;
}

/* The databases after the first (--db given more than once) opened into more[]. On
** failure the ones opened are closed, the error printed. */
static int open_more(const char *const *dirs, int n, cdb_k_device device, cdb_engine **more) {
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < n && rc == CLI_EXIT_OK; i++)
        if ((rc = cdb_cli_engine_open(dirs[i], 0, 0, device, 0, &more[i])) != CLI_EXIT_OK)
            for (int j = 0; j < i; j++) cdb_engine_close(more[j]), more[j] = NULL;
    return rc;
}

int cdb_cli_cmd_serve(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_MULTI},         {"host", 0, CLI_VALUE},        {"port", 0, CLI_VALUE},
        {"threads", 0, CLI_VALUE},    {"token-file", 0, CLI_VALUE},  {"cors-origin", 0, CLI_VALUE},
        {"max-connections", 0, CLI_VALUE}, {"timeout", 0, CLI_VALUE}, {"model", 0, CLI_VALUE},
        {"device", 0, CLI_VALUE},     {"quiet", 'q', CLI_FLAG},      {"help", 'h', CLI_FLAG},
        {"header-timeout", 0, CLI_VALUE}, {"body-timeout", 0, CLI_VALUE},
        {"session-ttl", 0, CLI_VALUE}, {"peer", 0, CLI_MULTI},    {"peer-token-file", 0, CLI_MULTI},
        {"peer-timeout", 0, CLI_VALUE}, {0}};
    cli_args a;
    int rc;
    cdb_k_device device;
    long port, threads, maxc, timeout, htimeout, btimeout, ttl, peer_ms;
    char token[600] = "", **toks = NULL;
    const char **dbs = NULL, **peers = NULL;
    int n_db = 0, n_peers = 0;
    cdb_engine *e = NULL, **more = NULL;
    cdb_engine_model m;
    cdb_engine_stats st;
    cdb_serve *s = NULL;
    cdb_serve_params sp = cdb_serve_params_default();
    memset(&st, 0, sizeof st);
    if (!cdb_cli_begin("serve", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("serve", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    if (cdb_cli_get_int(&a, "port", 8765, 0, 65535, &port) ||
        cdb_cli_get_int(&a, "threads", 0, 0, 1024, &threads) ||
        cdb_cli_get_int(&a, "max-connections", 0, 1, 100000, &maxc) ||
        cdb_cli_get_int(&a, "timeout", 15, 1, 3600, &timeout) ||
        cdb_cli_get_int(&a, "header-timeout", 10, 1, 3600, &htimeout) ||
        cdb_cli_get_int(&a, "body-timeout", 60, 1, 86400, &btimeout) ||
        cdb_cli_get_int(&a, "session-ttl", 12 * 3600, 1, 365 * 86400, &ttl) ||
        cdb_cli_get_int(&a, "peer-timeout", 2000, 1, 600000, &peer_ms)) {
        rc = cdb_cli_usage_error("serve", "%s", a.err);
        goto done;
    }
    if (cdb_cli_get(&a, "cors-origin") && !strcmp(cdb_cli_get(&a, "cors-origin"), "*") &&
        !cdb_cli_get(&a, "token-file")) {
        rc = cdb_cli_usage_error("serve", "--cors-origin '*' lets any web page read the "
                                          "library: it needs --token-file");
        goto done;
    }
    if ((rc = cdb_cli_device("serve", cdb_cli_get(&a, "device"), &device)) != CLI_EXIT_OK)
        goto done;
    n_db = cdb_cli_get_all(&a, "db", &dbs);
    n_peers = cdb_cli_get_all(&a, "peer", &peers);
    if (n_db > CDB_SERVE_MAX_DBS || n_peers > CDB_SERVE_MAX_PEERS) {
        rc = cdb_cli_usage_error("serve", "at most %d --db and %d --peer", CDB_SERVE_MAX_DBS,
                                 CDB_SERVE_MAX_PEERS);
        goto done;
    }
    if (!(toks = calloc((size_t)n_peers + 1, sizeof *toks)) ||
        !(more = calloc((size_t)n_db + 1, sizeof *more))) {
        rc = cdb_cli_error("out of memory", "cannot serve");
        goto done;
    }
    if ((rc = peer_tokens(&a, n_peers, toks)) != CLI_EXIT_OK ||
        (rc = cdb_cli_dbs_distinct("serve", dbs, n_db)) != CLI_EXIT_OK)
        goto done;
    if (cdb_cli_get(&a, "token-file") &&
        (rc = read_token(cdb_cli_get(&a, "token-file"), token, sizeof token)) != CLI_EXIT_OK)
        goto done;
    /* the access log is what a server says: info unless CLIPDB_LOG or --quiet decide */
    if (!getenv("CLIPDB_LOG") && !cdb_cli_quiet()) cdb_log_set_level(CDB_LOG_LEVEL_INFO);
    /* the engine encodes texts on one thread (requests in parallel keep the cores busy)
    ** and images on every core, as `clipdb search` does, so the scores are its scores */
    if ((rc = cdb_cli_engine_open(n_db ? dbs[0] : NULL, 0, 0, device, 0, &e)) != CLI_EXIT_OK ||
        (n_db > 1 && (rc = open_more(dbs + 1, n_db - 1, device, more)) != CLI_EXIT_OK))
        goto done;
    if (cdb_engine_load_model(e, cdb_cli_get(&a, "model"), 1, 1, &m) != CDB_OK) {
        rc = cdb_cli_engine_fail(cdb_cli_get(&a, "model"));
        goto done;
    }
    sp.host = cdb_cli_get(&a, "host") ? cdb_cli_get(&a, "host") : "127.0.0.1";
    sp.port = (int)port;
    sp.threads = (int)threads;
    sp.token = token[0] ? token : NULL;
    sp.cors_origin = cdb_cli_get(&a, "cors-origin");
    sp.max_connections = (int)maxc;
    sp.timeout_s = (int)timeout;
    sp.header_timeout_s = (int)htimeout;
    sp.body_timeout_s = (int)btimeout;
    sp.session_ttl_s = (int)ttl;
    sp.bundled_model = cdb_cli_model_is_bundled(e, m.id);
    sp.more = more;
    sp.n_more = n_db > 1 ? n_db - 1 : 0;
    sp.peers = peers;
    sp.peer_tokens = (const char *const *)toks;
    sp.n_peers = n_peers;
    sp.peer_timeout_ms = (int)peer_ms;
    raise_fd_limit();
    if (cdb_serve_start(e, &sp, &s) != CDB_OK) {
        rc = cdb_cli_error_status(CDB_ERROR, "cannot serve %s", cdb_engine_dir(e));
        if (strstr(cdb_errmsg(), "token"))
            cdb_cli_hint("write a token to a file (chmod 600) and pass --token-file FILE");
        goto done;
    }
    cdb_engine_stats_get(e, 0, &st);
    cdb_cli_signals_message(
        "\nclipdb serve: stopping after the requests in flight (Ctrl-C again to stop now)\n");
    printf("clipdb serve: http://%s%s%s:%d/ (%s, %lld photo%s%s", strchr(sp.host, ':') ? "[" : "",
           sp.host, strchr(sp.host, ':') ? "]" : "", cdb_serve_port(s), m.name,
           (long long)st.files[2], st.files[2] == 1 ? "" : "s", sp.token ? ", token required" : "");
    if (n_db > 1) printf(" in the first of %d databases", n_db);
    if (n_peers) printf(", %d peer%s", n_peers, n_peers == 1 ? "" : "s");
    printf(")\n");
    cdb_cli_flush_stdout();
    while (!cdb_cli_interrupted()) {
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    cdb_serve_stop(s, STOP_GRACE_MS);
    s = NULL;
    rc = CLI_EXIT_OK;
done:
    cdb_serve_stop(s, 0);
    cdb_engine_stats_free(&st);
    cdb_engine_close(e);
    for (int i = 0; more && i < n_db; i++) cdb_engine_close(more[i]);
    free(more);
    for (int i = 0; toks && i < n_peers; i++)
        if (toks[i]) memset(toks[i], 0, strlen(toks[i])), free(toks[i]);
    free(toks);
    memset(token, 0, sizeof token);
    cdb_cli_args_free(&a);
    return rc;
}
