/*
** args.c: the small option parser every clipdb command uses (see cli.h for the
** accepted syntax). The parser never prints: a failure leaves one line in a->err.
** cdb_cli_begin, the prologue every command shares, turns it into a usage error
** (exit 2) and answers --help.
*/
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int find_long(const cli_args *a, const char *name, size_t len) {
    for (int i = 0; i < a->n_spec; i++)
        if (strlen(a->spec[i].name) == len && !strncmp(a->spec[i].name, name, len)) return i;
    return -1;
}

static int find_short(const cli_args *a, char c) {
    for (int i = 0; i < a->n_spec; i++)
        if (a->spec[i].short_name && a->spec[i].short_name == c) return i;
    return -1;
}

static int push(const char ***arr, int *n, const char *v) {
    const char **p = realloc(*arr, sizeof **arr * (size_t)(*n + 1));
    if (!p) return -1;
    p[(*n)++] = v;
    *arr = p;
    return 0;
}

static int add_value(cli_args *a, int i, const char *v, int argi) {
    int n = a->count[i];
    int *pi;
    if (a->spec[i].kind == CLI_FLAG) {
        a->count[i]++;
        return 0;
    }
    pi = realloc(a->argi[i], sizeof *pi * (size_t)(n + 1));
    if (pi) a->argi[i] = pi;
    if (!pi || push(&a->vals[i], &n, v)) {
        snprintf(a->err, sizeof a->err, "out of memory");
        return -1;
    }
    pi[n - 1] = argi;
    a->count[i] = n;
    return 0;
}

int cdb_cli_args_parse(cli_args *a, const cli_optspec *spec, int argc, char **argv) {
    int only_pos = 0;
    memset(a, 0, sizeof *a);
    a->unknown_argi = -1;
    a->spec = spec;
    while (spec[a->n_spec].name) a->n_spec++;
    assert(a->n_spec <= CLI_MAX_OPTS);

    for (int k = 0; k < argc; k++) {
        const char *s = argv[k];
        if (only_pos || s[0] != '-' || s[1] == '\0') { /* positional, or a lone "-" */
            if (push(&a->pos, &a->n_pos, s)) goto nomem;
            continue;
        }
        if (!strcmp(s, "--")) {
            only_pos = 1;
            continue;
        }
        if (s[1] == '-') { /* --name, --name=value, --name value */
            const char *name = s + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            int i = find_long(a, name, len);
            if (i < 0) {
                snprintf(a->err, sizeof a->err, "unknown option --%.*s", (int)len, name);
                a->unknown_argi = k;
                return -1;
            }
            if (spec[i].kind == CLI_FLAG) {
                if (eq) {
                    snprintf(a->err, sizeof a->err, "option --%s takes no value", spec[i].name);
                    return -1;
                }
                if (add_value(a, i, NULL, k)) return -1;
            } else if (eq) {
                if (add_value(a, i, eq + 1, k)) return -1;
            } else {
                if (k + 1 >= argc) {
                    snprintf(a->err, sizeof a->err, "option --%s needs a value", spec[i].name);
                    return -1;
                }
                if (add_value(a, i, argv[k + 1], k)) return -1;
                k++;
            }
            continue;
        }
        /* short options: -k 5, -k5, -qv (bundled flags), -qk5 */
        for (const char *c = s + 1; *c; c++) {
            int i = find_short(a, *c);
            if (i < 0) {
                a->unknown_argi = k;
                if (strlen(s) > 2) /* "-red": likely a query term, not options */
                    snprintf(a->err, sizeof a->err,
                             "unknown option -%c (in '%.60s'; an argument that starts with '-' "
                             "goes after '--', as in: -- '%.60s')",
                             *c, s, s);
                else
                    snprintf(a->err, sizeof a->err, "unknown option -%c", *c);
                return -1;
            }
            if (spec[i].kind == CLI_FLAG) {
                if (add_value(a, i, NULL, k)) return -1;
                continue;
            }
            if (c[1]) {
                if (add_value(a, i, c + 1, k)) return -1;
            } else {
                if (k + 1 >= argc) {
                    snprintf(a->err, sizeof a->err, "option -%c needs a value", *c);
                    return -1;
                }
                if (add_value(a, i, argv[k + 1], k)) return -1;
                k++;
            }
            break;
        }
    }
    return 0;
nomem:
    snprintf(a->err, sizeof a->err, "out of memory");
    return -1;
}

void cdb_cli_args_free(cli_args *a) {
    if (!a) return;
    for (int i = 0; i < a->n_spec; i++) {
        free(a->vals[i]);
        free(a->argi[i]);
    }
    free(a->pos);
    memset(a->vals, 0, sizeof a->vals);
    memset(a->argi, 0, sizeof a->argi);
    a->pos = NULL;
    a->n_pos = 0;
}

/* "-k" for one-letter long names, else "--name": how the user typed it. */
static const char *dashed(const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s%s", name[1] ? "--" : "-", name);
    return buf;
}

static int index_of(const cli_args *a, const char *name) {
    int i = find_long(a, name, strlen(name));
    assert(i >= 0 && "option not in the command's table");
    return i;
}

int cdb_cli_has(const cli_args *a, const char *name) {
    int i = index_of(a, name);
    return i < 0 ? 0 : a->count[i];
}

const char *cdb_cli_get(const cli_args *a, const char *name) {
    int i = index_of(a, name);
    if (i < 0 || a->count[i] == 0 || a->spec[i].kind == CLI_FLAG) return NULL;
    return a->vals[i][a->count[i] - 1];
}

int cdb_cli_get_all(const cli_args *a, const char *name, const char ***vals) {
    int i = index_of(a, name);
    if (i < 0 || a->spec[i].kind == CLI_FLAG) {
        *vals = NULL;
        return 0;
    }
    *vals = a->vals[i];
    return a->count[i];
}

/* a->err = "<--name>: expected <what>, got '<v>'"; returns -1. */
static int bad_value(cli_args *a, const char *name, const char *what, const char *v) {
    char d[64];
    snprintf(a->err, sizeof a->err, "%s: expected %s, got '%s'", dashed(name, d, sizeof d),
             what, v);
    return -1;
}

int cdb_cli_get_int(cli_args *a, const char *name, long def, long lo, long hi, long *out) {
    const char *v = cdb_cli_get(a, name);
    char *end = NULL, what[96];
    long x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        snprintf(what, sizeof what, "an integer in [%ld, %ld]", lo, hi);
        return bad_value(a, name, what, v);
    }
    *out = x;
    return 0;
}

int cdb_cli_get_double(cli_args *a, const char *name, double def, double lo, double hi,
                       double *out) {
    const char *v = cdb_cli_get(a, name);
    char *end = NULL, what[96];
    double x;
    if (!v) {
        *out = def;
        return 0;
    }
    errno = 0;
    x = strtod(v, &end);
    if (!*v || *end || errno || isnan(x) || x < lo || x > hi) {
        snprintf(what, sizeof what, "a number in [%g, %g]", lo, hi);
        return bad_value(a, name, what, v);
    }
    *out = x;
    return 0;
}

int cdb_cli_get_choice(cli_args *a, const char *name, const char *const *choices, int def) {
    const char *v = cdb_cli_get(a, name);
    char what[128]; /* the choices are a few short words */
    size_t used;
    if (!v) return def;
    for (int i = 0; choices[i]; i++)
        if (!strcmp(v, choices[i])) return i;
    used = (size_t)snprintf(what, sizeof what, "one of");
    for (int i = 0; choices[i] && used < sizeof what; i++)
        used += (size_t)snprintf(what + used, sizeof what - used, "%s%s", i ? "|" : " ",
                                 choices[i]);
    return bad_value(a, name, what, v);
}

/* ---- the prologue every command shares --------------------------------------------- */

/* The usage error of an unknown option s given to cmd: a global option that only
** goes before a command (run_main reads them) says where it goes. */
static int unknown_option(const char *cmd, const char *s, const char *err) {
    if (s && !strcmp(s, "--log-time"))
        return cdb_cli_usage_error(cmd, "%s is a global option: put it before the command "
                                    "(clipdb %s %s ...)", s, s, cmd);
    if (s && !strcmp(s, "--version"))
        return cdb_cli_usage_error(cmd, "%s is a global option: give it without a command "
                                    "(clipdb %s)", s, s);
    return cdb_cli_usage_error(cmd, "%s", err);
}

/* 1 when spec has a --json flag and argv asks for it (before a "--"): a failure,
** a usage error included, then still answers in JSON. */
static int wants_json(const cli_optspec *spec, int argc, char **argv) {
    int has = 0;
    for (int i = 0; spec[i].name; i++) has |= !strcmp(spec[i].name, "json");
    for (int i = 0; has && i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--json") || !strncmp(argv[i], "--json=", 7)) return 1;
    return 0;
}

int cdb_cli_begin(const char *cmd, cli_args *a, const cli_optspec *spec, int argc,
                  char **argv, int *exit_code) {
    if (wants_json(spec, argc, argv)) cdb_cli_json_requested(cmd);
    if (cdb_cli_args_parse(a, spec, argc, argv) != 0) {
        /* --help anywhere still wins over a bad option, as in git */
        for (int i = 0; i < argc; i++)
            if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
                fputs(cdb_cli_help_text(cmd), stdout);
                *exit_code = CLI_EXIT_OK;
                return 0;
            }
        *exit_code = unknown_option(cmd, a->unknown_argi >= 0 ? argv[a->unknown_argi] : NULL,
                                    a->err);
        return 0;
    }
    for (int i = 0; i < a->n_spec; i++) {
        if (!a->count[i]) continue;
        if (!strcmp(spec[i].name, "help")) {
            fputs(cdb_cli_help_text(cmd), stdout);
            *exit_code = CLI_EXIT_OK;
            return 0;
        }
        if (!strcmp(spec[i].name, "quiet")) cdb_cli_output_init(1);
    }
    /* --model hf:ORG/NAME, for every command that takes a model: the snapshot folder in
    ** the Hugging Face cache (fetched when missing) from here on */
    for (int i = 0; i < a->n_spec; i++) {
        const char *v, *path;
        if (strcmp(spec[i].name, "model") || spec[i].kind != CLI_VALUE || !a->count[i]) continue;
        v = a->vals[i][a->count[i] - 1];
        if (!(path = cdb_cli_resolve_model(v, "--model"))) {
            *exit_code = CLI_EXIT_FAIL;
            return 0;
        }
        a->vals[i][a->count[i] - 1] = path;
    }
    return 1;
}
