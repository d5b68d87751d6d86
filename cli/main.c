/*
** main.c: the clipdb program's entry point: global options (--db, --quiet,
** --help, --version before the command), the command table and dispatch, and the
** prologue every command shares (cli_begin: parse, --help, --quiet). Each command
** lives in a cmd_*.c file; see cli.h for the map.
*/
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "kernels/kernels.h"

static const struct {
    const char *name;
    cli_cmd_fn fn;
} g_cmds[] = {
    {"init", cli_cmd_init},         {"ingest", cli_cmd_ingest},
    {"search", cli_cmd_search},     {"reindex", cli_cmd_reindex},
    {"index", cli_cmd_index},       {"stats", cli_cmd_stats},
    {"verify", cli_cmd_verify},     {"errors", cli_cmd_errors},
    {"export", cli_cmd_export},     {"models", cli_cmd_models},
    {"folders", cli_cmd_folders},   {"forget", cli_cmd_forget},
    {"move", cli_cmd_move},
    {"tokenize", cli_cmd_tokenize}, {"embed", cli_cmd_embed},
    {"preprocess", cli_cmd_preprocess}, {"demo", cli_cmd_demo},
    {"serve", cli_cmd_serve},
    {"version", cli_cmd_version},
};

int cli_begin(const char *cmd, cli_args *a, const cli_optspec *spec, int argc, char **argv,
              int *exit_code) {
    if (cli_args_parse(a, spec, argc, argv) != 0) {
        /* --help anywhere still wins over a bad option, as in git */
        for (int i = 0; i < argc; i++)
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                fputs(cli_help_text(cmd), stdout);
                *exit_code = CLI_EXIT_OK;
                return 0;
            }
        *exit_code = cli_usage_error(cmd, "%s", a->err);
        return 0;
    }
    for (int i = 0; i < a->n_spec; i++) {
        if (!a->count[i]) continue;
        if (!strcmp(spec[i].name, "help")) {
            fputs(cli_help_text(cmd), stdout);
            *exit_code = CLI_EXIT_OK;
            return 0;
        }
        if (!strcmp(spec[i].name, "quiet")) cli_output_init(1);
    }
    return 1;
}

int cli_cmd_version(int argc, char **argv) {
    static const cli_optspec spec[] = {{"help", 'h', CLI_FLAG}, {0}};
    cli_args a;
    int rc, n_dev;
    if (!cli_begin("version", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("version", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    n_dev = cdb_k_cuda_device_count();
    printf("clipdb %s (cpu: %s, cuda: %s, %d device%s)\n", cdb_libversion(),
           cdb_k_isa_name(cdb_k_cpu_isa()), cdb_k_cuda_built() ? "built" : "not built", n_dev,
           n_dev == 1 ? "" : "s");
    rc = CLI_EXIT_OK;
done:
    cli_args_free(&a);
    return rc;
}

static int run_command(const char *name, int argc, char **argv) {
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(g_cmds[i].name, name)) return g_cmds[i].fn(argc, argv);
    return cli_usage_error(NULL, "unknown command '%s'", name);
}

int main(int argc, char **argv) {
    int k = 1, quiet = 0;
    cli_output_init(0);
    /* global options, before the command */
    while (k < argc && argv[k][0] == '-') {
        const char *s = argv[k];
        if (!strcmp(s, "--version")) return cli_cmd_version(0, NULL);
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            fputs(cli_help_text(NULL), stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(s, "--quiet") || !strcmp(s, "-q")) {
            quiet = 1;
        } else if (!strncmp(s, "--db=", 5)) {
            cli_set_global_db(s + 5);
        } else if (!strcmp(s, "--db")) {
            if (k + 1 >= argc) return cli_usage_error(NULL, "option --db needs a value");
            cli_set_global_db(argv[++k]);
        } else {
            return cli_usage_error(NULL, "unknown option %s", s);
        }
        k++;
    }
    cli_output_init(quiet);
    if (k >= argc) return cli_usage_error(NULL, "no command given");
    if (!strcmp(argv[k], "help")) {
        const char *t;
        if (k + 1 >= argc) {
            fputs(cli_help_text(NULL), stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[k + 1], "--help") || !strcmp(argv[k + 1], "-h")) argv[k + 1] = "help";
        t = cli_help_text(argv[k + 1]);
        if (!t) return cli_usage_error(NULL, "unknown command '%s'", argv[k + 1]);
        fputs(t, stdout);
        return CLI_EXIT_OK;
    }
    cli_signals_install();
    return run_command(argv[k], argc - k - 1, argv + k + 1);
}
