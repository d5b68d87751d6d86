/*
** main.c: the clipdb program's entry point: global options (--db, --quiet,
** --help, --version before the command), the command table and dispatch, and the
** version command. Each command lives in a cmd_*.c file; see cli.h for the map.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kernels/kernels.h"

static int cmd_version(int argc, char **argv);

static const struct {
    const char *name;
    cli_cmd_fn fn;
} g_cmds[] = {
    {"init", cdb_cli_cmd_init},         {"ingest", cdb_cli_cmd_ingest},
    {"search", cdb_cli_cmd_search},     {"reindex", cdb_cli_cmd_reindex},
    {"index", cdb_cli_cmd_index},       {"stats", cdb_cli_cmd_stats},
    {"verify", cdb_cli_cmd_verify},     {"errors", cdb_cli_cmd_errors},
    {"export", cdb_cli_cmd_export},     {"models", cdb_cli_cmd_models},
    {"folders", cdb_cli_cmd_folders},   {"forget", cdb_cli_cmd_forget},
    {"move", cdb_cli_cmd_move},         {"duplicates", cdb_cli_cmd_duplicates},
    {"tokenize", cdb_cli_cmd_tokenize}, {"embed", cdb_cli_cmd_embed},
    {"preprocess", cdb_cli_cmd_preprocess}, {"demo", cdb_cli_cmd_demo},
    {"serve", cdb_cli_cmd_serve},       {"merge", cdb_cli_cmd_merge},
    {"slurm", cdb_cli_cmd_slurm},
    {"version", cmd_version},
};

/* clipdb version: the version and what this build can run on. */
static int cmd_version(int argc, char **argv) {
    static const cli_optspec spec[] = {{"help", 'h', CLI_FLAG}, {0}};
    cli_args a;
    int rc, n_dev;
    if (!cdb_cli_begin("version", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("version", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    n_dev = cdb_k_cuda_device_count();
    printf("clipdb %s (cpu: %s, cuda: %s, %d device%s)\n", cdb_libversion(),
           cdb_k_isa_name(cdb_k_cpu_isa()), cdb_k_cuda_built() ? "built" : "not built", n_dev,
           n_dev == 1 ? "" : "s");
    rc = CLI_EXIT_OK;
done:
    cdb_cli_args_free(&a);
    return rc;
}

#define N_CMDS (sizeof g_cmds / sizeof g_cmds[0])

/* Optimal string alignment distance (an adjacent swap costs 1), capped at 9. */
static int edit_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b), d[24][24];
    if (la > 22 || lb > 22) return 9;
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* The command a mistyped name most likely meant (within 2 edits, or a unique
** prefix), or NULL. */
static const char *closest_command(const char *name) {
    const char *best = NULL, *prefix = NULL;
    int best_d = 3, n_prefix = 0;
    for (size_t i = 0; i < N_CMDS; i++) {
        int d = edit_distance(name, g_cmds[i].name);
        if (d < best_d) best_d = d, best = g_cmds[i].name;
        if (*name && !strncmp(g_cmds[i].name, name, strlen(name)))
            prefix = g_cmds[i].name, n_prefix++;
    }
    return best ? best : n_prefix == 1 ? prefix : NULL;
}

/* The usage error of a command name that is none, with the likely one. */
static int unknown_command(const char *name) {
    const char *guess = closest_command(name);
    if (guess)
        return cdb_cli_usage_error(NULL, "unknown command '%s' (did you mean '%s'?)", name, guess);
    return cdb_cli_usage_error(NULL, "unknown command '%s'", name);
}

static int run_command(const char *name, int argc, char **argv) {
    for (size_t i = 0; i < N_CMDS; i++)
        if (!strcmp(g_cmds[i].name, name)) return g_cmds[i].fn(argc, argv);
    return unknown_command(name);
}

/* Results go to stdout: a write that failed there (a full disk, a closed pipe
** reader, /dev/full) must not end in exit 0 with a truncated or empty file. */
static int finish_stdout(int rc) {
    int e;
    if (cdb_cli_flush_stdout() == 0 && !ferror(stdout) && !cdb_cli_stdout_errno()) return rc;
    if ((e = cdb_cli_stdout_errno()) == EPIPE) return rc; /* the reader went away (| head) */
    cdb_cli_error(e ? strerror(e) : "a write failed", "cannot write to standard output");
    return rc == CLI_EXIT_OK || rc == CLI_EXIT_PARTIAL ? CLI_EXIT_FAIL : rc;
}

static int run_main(int argc, char **argv) {
    int k = 1, quiet = 0, log_time = 0;
    const char *lt = getenv("CLIPDB_LOG_TIME");
    cdb_cli_output_init(0);
    /* global options, before the command */
    while (k < argc && argv[k][0] == '-') {
        const char *s = argv[k];
        if (!strcmp(s, "--version")) return cmd_version(0, NULL);
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            fputs(cdb_cli_help_text(NULL), stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(s, "--quiet") || !strcmp(s, "-q")) {
            quiet = 1;
        } else if (!strcmp(s, "--log-time")) {
            log_time = 1;
        } else if (!strncmp(s, "--db=", 5)) {
            cdb_cli_set_global_db(s + 5);
        } else if (!strcmp(s, "--db")) {
            if (k + 1 >= argc) return cdb_cli_usage_error(NULL, "option --db needs a value");
            cdb_cli_set_global_db(argv[++k]);
        } else {
            return cdb_cli_usage_error(NULL, "unknown option %s", s);
        }
        k++;
    }
    cdb_cli_output_init(quiet);
    cdb_cli_output_log_time(log_time || (lt && *lt && strcmp(lt, "0")));
    if (k >= argc) return cdb_cli_usage_error(NULL, "no command given");
    if (!strcmp(argv[k], "help")) {
        const char *t;
        if (k + 1 >= argc) {
            fputs(cdb_cli_help_text(NULL), stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[k + 1], "--help") || !strcmp(argv[k + 1], "-h")) argv[k + 1] = "help";
        t = cdb_cli_help_text(argv[k + 1]);
        if (!t) return unknown_command(argv[k + 1]);
        fputs(t, stdout);
        return CLI_EXIT_OK;
    }
    cdb_cli_signals_install();
    return run_command(argv[k], argc - k - 1, argv + k + 1);
}

int main(int argc, char **argv) {
    int rc = run_main(argc, argv);
    cdb_cli_json_failure(rc); /* --json on a failed run: still a JSON document */
    return finish_stdout(rc);
}
