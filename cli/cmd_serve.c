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

int cdb_cli_cmd_serve(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},         {"host", 0, CLI_VALUE},        {"port", 0, CLI_VALUE},
        {"threads", 0, CLI_VALUE},    {"token-file", 0, CLI_VALUE},  {"cors-origin", 0, CLI_VALUE},
        {"max-connections", 0, CLI_VALUE}, {"timeout", 0, CLI_VALUE}, {"model", 0, CLI_VALUE},
        {"device", 0, CLI_VALUE},     {"quiet", 'q', CLI_FLAG},      {"help", 'h', CLI_FLAG},
        {"header-timeout", 0, CLI_VALUE}, {"body-timeout", 0, CLI_VALUE},
        {"session-ttl", 0, CLI_VALUE}, {0}};
    cli_args a;
    int rc;
    cdb_k_device device;
    long port, threads, maxc, timeout, htimeout, btimeout, ttl;
    char token[600] = "";
    cdb_engine *e = NULL;
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
        cdb_cli_get_int(&a, "session-ttl", 12 * 3600, 1, 365 * 86400, &ttl)) {
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
    if (cdb_cli_get(&a, "token-file") &&
        (rc = read_token(cdb_cli_get(&a, "token-file"), token, sizeof token)) != CLI_EXIT_OK)
        goto done;
    /* the access log is what a server says: info unless CLIPDB_LOG or --quiet decide */
    if (!getenv("CLIPDB_LOG") && !cdb_cli_quiet()) cdb_log_set_level(CDB_LOG_LEVEL_INFO);
    /* the engine encodes texts on one thread (requests in parallel keep the cores busy)
    ** and images on every core, as `clipdb search` does, so the scores are its scores */
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, device, 0, &e)) != CLI_EXIT_OK)
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
    printf("clipdb serve: http://%s%s%s:%d/ (%s, %lld photo%s%s)\n",
           strchr(sp.host, ':') ? "[" : "", sp.host, strchr(sp.host, ':') ? "]" : "",
           cdb_serve_port(s), m.name, (long long)st.files[2], st.files[2] == 1 ? "" : "s",
           sp.token ? ", token required" : "");
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
    memset(token, 0, sizeof token);
    cdb_cli_args_free(&a);
    return rc;
}
