/*
** cmd_search.c: `clipdb search`, over cdb_engine_search (engine/search.c: the query
** language, example images, the index plus an exact pass over what it does not cover,
** the exact re-rank, --min-score, --under, --sort). This file parses the options,
** reads a query from stdin, and prints: one line per hit (rank, score to 4 decimals,
** path), --paths (bare paths; -0 for NUL), or --json (one document). Nothing but
** results goes to stdout.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* The most text a query may hold (all words plus --not texts), documented in
** 'clipdb search --help': the engine's limit. */
#define CLI_QUERY_MAX_BYTES CDB_ENGINE_QUERY_MAX_BYTES

/* Joins the positionals with spaces (the query text); NULL when there are none. */
static char *join_words(const char **w, int n) {
    size_t len = 0, o = 0;
    char *s;
    if (n == 0) return NULL;
    for (int i = 0; i < n; i++) len += strlen(w[i]) + 1;
    if (!(s = malloc(len))) return NULL;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(w[i]);
        if (i) s[o++] = ' ';
        memcpy(s + o, w[i], k);
        o += k;
    }
    s[o] = '\0';
    return s;
}

/* Why a search found nothing, when an option is the likely reason (stderr: the
** empty result itself stays the output). */
static void note_no_hits(const char *under, int under_exists, double min_score) {
    if (cli_quiet()) return;
    if (under && !under_exists)
        cli_hint("--under %s does not exist, and no stored path starts with it", under);
    else if (under)
        cli_hint("no photo under %s matched", under);
    if (min_score > -1.0) cli_hint("no hit scored --min-score %.4g or more", min_score);
}

/* Reads the query text from stdin into *text (heap, NUL-terminated): at most
** CLI_QUERY_MAX_BYTES + 1 bytes are read; *too_long is set when there were more. */
static int read_query_stdin(char **text, size_t *len, int *too_long) {
    char *buf = malloc(CLI_QUERY_MAX_BYTES + 2);
    size_t got = 0;
    *text = NULL;
    *len = 0;
    *too_long = 0;
    if (!buf) return cli_error("out of memory", "cannot search");
    while (got < CLI_QUERY_MAX_BYTES + 1) {
        ssize_t k = read(0, buf + got, CLI_QUERY_MAX_BYTES + 1 - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(buf);
            return cli_error(strerror(errno), "cannot read the query from standard input");
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    buf[got] = '\0';
    *too_long = got > CLI_QUERY_MAX_BYTES;
    *text = buf;
    *len = got;
    return CLI_EXIT_OK;
}

/* "key": [strings] (the query's example images and --not texts, as given). */
static void json_strings(cli_json *j, const char *key, const char *const *s, int n) {
    if (!n) return;
    cli_json_key(j, key);
    cli_json_begin_array(j);
    for (int i = 0; i < n; i++) cli_json_str(j, s[i]);
    cli_json_end_array(j);
}

static void print_hits(const cdb_engine_hit *h, int n, int json, int paths, int nul,
                       const cdb_engine_query *q, const char *model_name) {
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "query");
        cli_json_str(&j, q->text ? q->text : "");
        json_strings(&j, "images", q->image_paths, q->n_image_paths);
        json_strings(&j, "not", q->nots, q->n_nots);
        cli_json_key(&j, "model");
        cli_json_str(&j, model_name);
        cli_json_key(&j, "count");
        cli_json_int(&j, n);
        cli_json_key(&j, "hits");
        cli_json_begin_array(&j);
        for (int i = 0; i < n; i++) {
            cli_json_begin_object(&j);
            cli_json_key(&j, "rank");
            cli_json_int(&j, i + 1);
            cli_json_key(&j, "score");
            cli_json_float(&j, h[i].score);
            cli_json_key(&j, "id");
            cli_json_int(&j, h[i].id);
            cli_json_path(&j, "path", h[i].path);
            cli_json_key(&j, "mtime_ns");
            cli_json_int(&j, h[i].mtime_ns);
            cli_json_end_object(&j);
        }
        cli_json_end_array(&j);
        cli_json_end_object(&j);
        cli_json_done(&j);
    } else if (paths) {
        for (int i = 0; i < n; i++) {
            fputs(h[i].path, stdout);
            fputc(nul ? '\0' : '\n', stdout);
        }
    } else {
        for (int i = 0; i < n; i++) printf("%d\t%.4f\t%s\n", i + 1, (double)h[i].score, h[i].path);
    }
    cli_flush_stdout();
}

int cli_cmd_search(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},        {"k", 'k', CLI_VALUE},     {"image", 0, CLI_MULTI},
        {"not", 0, CLI_MULTI},       {"min-score", 0, CLI_VALUE}, {"under", 0, CLI_VALUE},
        {"sort", 0, CLI_VALUE},      {"model", 0, CLI_VALUE},   {"json", 0, CLI_FLAG},
        {"paths", 0, CLI_FLAG},      {"null", '0', CLI_FLAG},   {"device", 0, CLI_VALUE},
        {"no-exif", 0, CLI_FLAG},    {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},
        {0}};
    static const char *const sorts[] = {"score", "time", NULL};
    cli_args a;
    int rc, n_terms = 0, n_img, n_not, sort;
    long k;
    double min_score;
    const char **images, **nots;
    char *text = NULL;
    int i_stdin = -1;
    cdb_engine_term *terms = NULL;
    if (!cli_begin("search", &a, spec, argc, argv, &rc)) goto done;
    n_img = cli_get_all(&a, "image", &images);
    n_not = cli_get_all(&a, "not", &nots);
    if (cli_get_int(&a, "k", 10, 1, 100000, &k) ||
        cli_get_double(&a, "min-score", -1.0, -1.0, 1.0, &min_score)) {
        rc = cli_usage_error("search", "%s", a.err);
        goto done;
    }
    if ((sort = cli_get_choice(&a, "sort", sorts, 0)) < 0) {
        rc = cli_usage_error("search", "%s", a.err);
        goto done;
    }
    if (cli_has(&a, "json") && cli_has(&a, "paths")) {
        rc = cli_usage_error("search", "--json and --paths cannot be combined");
        goto done;
    }
    if (cli_has(&a, "null") && !cli_has(&a, "paths")) {
        rc = cli_usage_error("search", "-0/--null goes with --paths");
        goto done;
    }
    if (a.n_pos == 0 && n_img == 0) {
        rc = cli_usage_error("search", "no QUERY given (give text, or --image PATH)");
        goto done;
    }
    { /* bounded work and memory whatever the caller passes: checked before any copy */
        size_t total = 0;
        for (int i = 0; i < a.n_pos; i++) total += strlen(a.pos[i]) + 1;
        for (int i = 0; i < n_not; i++) total += strlen(nots[i]) + 1;
        if (total > CLI_QUERY_MAX_BYTES) {
            rc = cli_usage_error("search",
                                 "query too long: %zu bytes of text (the limit is %d bytes, 64 KiB)",
                                 total, CLI_QUERY_MAX_BYTES);
            goto done;
        }
    }
    for (int i = 0; i < a.n_pos; i++)
        if (!strcmp(a.pos[i], "-")) {
            if (i_stdin >= 0) {
                rc = cli_usage_error("search", "'-' (the query from standard input) given twice");
                goto done;
            }
            i_stdin = i;
        }
    if (i_stdin >= 0) {
        /* the query text from standard input, in the place of its '-' among the words:
        ** at most the limit is ever read */
        size_t got = 0;
        int too_long = 0;
        if ((rc = read_query_stdin(&text, &got, &too_long)) != CLI_EXIT_OK) goto done;
        if (too_long) {
            rc = cli_usage_error("search",
                                 "query too long: more than %d bytes on standard input (the limit "
                                 "is %d bytes, 64 KiB)",
                                 CLI_QUERY_MAX_BYTES, CLI_QUERY_MAX_BYTES);
            goto done;
        }
        while (got && (text[got - 1] == '\n' || text[got - 1] == '\r')) text[--got] = '\0';
        if (!got || memchr(text, '\0', got)) {
            rc = cli_usage_error("search", "%s query on standard input",
                                 got ? "a NUL byte in the" : "an empty");
            goto done;
        }
        if (a.n_pos > 1) { /* echo red | clipdb search - + blue */
            char *joined;
            a.pos[i_stdin] = text;
            joined = join_words(a.pos, a.n_pos);
            a.pos[i_stdin] = "-";
            free(text);
            if (!(text = joined)) {
                rc = cli_error("out of memory", "cannot search");
                goto done;
            }
            if (strlen(text) > CLI_QUERY_MAX_BYTES) {
                rc = cli_usage_error("search", "query too long: more than %d bytes of text (the "
                                     "limit is %d bytes, 64 KiB)",
                                     CLI_QUERY_MAX_BYTES, CLI_QUERY_MAX_BYTES);
                goto done;
            }
        }
    }
    if (a.n_pos) {
        if (!text && !(text = join_words(a.pos, a.n_pos))) {
            rc = cli_error("out of memory", "cannot search");
            goto done;
        }
        if (cdb_engine_query_parse(text, &terms, &n_terms) != CDB_OK) {
            rc = cli_usage_error("search", "bad query: %s", cdb_errmsg());
            goto done;
        }
    }
    {
        cdb_engine *e = NULL;
        cdb_engine_query q;
        cdb_engine_search_params sp = cdb_engine_search_params_default();
        cdb_engine_result res;
        cdb_k_device device;
        const char *under = cli_get(&a, "under");
        char under_abs[PATH_MAX];
        int under_found = 0;
        memset(&res, 0, sizeof res);
        if ((rc = cli_device("search", cli_get(&a, "device"), &device)) != CLI_EXIT_OK)
            goto s_done;
        if (under) { /* compare against absolute paths, as stored */
            struct stat sb;
            if ((under_found = realpath(under, under_abs) != NULL)) {
                /* an existing folder: match whole path components */
                sp.under_folder = stat(under_abs, &sb) == 0 && S_ISDIR(sb.st_mode);
            } else { /* not an existing path: a plain prefix of absolute paths */
                char cwd[PATH_MAX];
                if (under[0] != '/' && getcwd(cwd, sizeof cwd))
                    snprintf(under_abs, sizeof under_abs, "%.*s/%s", (int)(sizeof under_abs / 2), cwd, under);
                else
                    snprintf(under_abs, sizeof under_abs, "%s", under);
            }
            sp.under = under_abs;
        }
        /* the threads a query is encoded with are the engine's rule (one for the bundled
        ** model's few tokens, every core for a real CLIP): the server's scores are these */
        if ((rc = cli_engine_open(cli_get(&a, "db"), 0, 0, device, 0, &e)) != CLI_EXIT_OK)
            goto s_done;
        memset(&q, 0, sizeof q);
        q.text = a.n_pos ? text : NULL;
        q.nots = nots;
        q.n_nots = n_not;
        q.image_paths = images;
        q.n_image_paths = n_img;
        q.no_exif = cli_has(&a, "no-exif") > 0;
        sp.k = (int)k;
        sp.min_score = (float)min_score;
        sp.sort = sort == 1 ? CDB_ENGINE_SORT_TIME : CDB_ENGINE_SORT_SCORE;
        sp.model = cli_get(&a, "model");
        if (cdb_engine_search(e, &q, &sp, &res) != CDB_OK) {
            rc = cli_engine_fail(cli_get(&a, "model"));
            goto s_done;
        }
        print_hits(res.hits, res.n, cli_has(&a, "json") > 0, cli_has(&a, "paths") > 0,
                   cli_has(&a, "null") > 0, &q, res.model);
        if (res.n == 0) note_no_hits(under, under_found, min_score);
        rc = CLI_EXIT_OK;
    s_done:
        cdb_engine_result_free(&res);
        cdb_engine_close(e);
    }
done:
    cdb_engine_terms_free(terms, n_terms);
    free(text);
    cli_args_free(&a);
    return rc;
}
