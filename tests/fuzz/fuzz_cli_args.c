/*
** fuzz_cli_args.c: libFuzzer target for the clipdb command line (cli/, through the
** cdb_cli library): the option parser (cdb_cli_args_parse and the strict value getters
** cdb_cli_get_int / cdb_cli_get_double / cdb_cli_get_choice / cdb_cli_get_all), the search query
** language (cdb_engine_query_parse), help lookup, the JSON string writer and the image
** signature / extension checks the walker uses on names and bytes.
**
** The input is argv: arguments separated by NUL bytes (at most 64). The option table
** is the union of the kinds the real commands use (flags, repeated flags, values,
** repeated values, short options that take values). The commands themselves are not
** run: they open databases, write files and print to stdout.
*/
#include <stdint.h>
#include <string.h>

#include "cli/cli.h"
#include "encoder/encoder.h" /* the walker's image checks */
#include "fuzz_util.h"

static const cli_optspec k_spec[] = {
    {"help", 'h', CLI_FLAG},    {"quiet", 'q', CLI_FLAG},     {"verbose", 'v', CLI_FLAG},
    {"json", 0, CLI_FLAG},      {"db", 0, CLI_VALUE},         {"model", 'm', CLI_VALUE},
    {"k", 'k', CLI_VALUE},      {"min-score", 0, CLI_VALUE},  {"batch", 'b', CLI_VALUE},
    {"device", 0, CLI_VALUE},   {"not", 0, CLI_MULTI},        {"text", 't', CLI_MULTI},
    {"image", 'i', CLI_MULTI},  {"format", 'f', CLI_VALUE},   {"wait", 0, CLI_FLAG},
    {0},
};

static FILE *g_null;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    g_null = fopen("/dev/null", "w");
    if (!g_null) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *buf = malloc(n + 1), *argv[65];
    int argc = 0;
    cli_args a;
    static const char *const k_devices[] = {"auto", "cpu", "cuda", NULL};
    static const char *const k_formats[] = {"text", "json", "paths", NULL};

    if (!buf) return 0;
    memcpy(buf, data, n);
    buf[n] = 0;
    for (char *p = buf; p <= buf + n && argc < 64;) {
        argv[argc++] = p;
        p += strlen(p) + 1;
    }
    if (n == 0) argc = 0;
    argv[argc] = NULL;

    if (cdb_cli_args_parse(&a, k_spec, argc, argv) == 0) {
        long k = 0, batch = 0;
        double ms = 0;
        const char **vals = NULL;
        int nv;
        FUZZ_CHECK(a.n_pos >= 0 && a.n_pos <= argc, "n_pos %d", a.n_pos);
        for (int i = 0; i < a.n_spec; i++) {
            FUZZ_CHECK(a.count[i] >= 0 && (size_t)a.count[i] <= n, "count %d",
                       a.count[i]); /* -qqqq: one per letter */
            if (k_spec[i].kind != CLI_FLAG)
                for (int j = 0; j < a.count[i]; j++)
                    FUZZ_CHECK(a.vals[i][j] != NULL && a.argi[i][j] >= 0 && a.argi[i][j] < argc,
                               "value %d of --%s", j, k_spec[i].name);
        }
        (void)cdb_cli_get_int(&a, "k", 10, 1, 10000, &k);
        (void)cdb_cli_get_int(&a, "batch", 32, 1, 4096, &batch);
        (void)cdb_cli_get_double(&a, "min-score", -1.0, -1.0, 1.0, &ms);
        (void)cdb_cli_get_choice(&a, "device", k_devices, 0);
        (void)cdb_cli_get_choice(&a, "format", k_formats, 0);
        nv = cdb_cli_get_all(&a, "not", &vals);
        for (int i = 0; i < nv; i++) FUZZ_CHECK(vals[i] != NULL, "--not value %d", i);
        (void)cdb_cli_get(&a, "db");
        (void)cdb_cli_has(&a, "help");
        {
            /* the search command joins the positionals into one query */
            size_t total = 1;
            char *q;
            cdb_engine_term *terms = NULL;
            int n_terms = 0;
            for (int i = 0; i < a.n_pos; i++) total += strlen(a.pos[i]) + 1;
            q = malloc(total);
            if (q) {
                q[0] = 0;
                for (int i = 0; i < a.n_pos; i++) {
                    if (i) strcat(q, " ");
                    strcat(q, a.pos[i]);
                }
                if (cdb_engine_query_parse(q, &terms, &n_terms) == CDB_OK) {
                    for (int i = 0; i < n_terms; i++)
                        FUZZ_CHECK(terms[i].text != NULL, "term %d has no text", i);
                    cdb_engine_terms_free(terms, n_terms);
                } else {
                    FUZZ_CHECK(cdb_errmsg()[0] != 0 && terms == NULL, "an error without a message");
                }
                free(q);
            }
        }
        for (int i = 0; i < a.n_pos; i++) {
            (void)cdb_cli_help_text(a.pos[i]);
            (void)cdb_image_name_is_image(a.pos[i]);
        }
    } else {
        FUZZ_CHECK(a.err[0] != 0 && memchr(a.err, 0, sizeof a.err),
                   "parse failed without a message");
    }
    cdb_cli_args_free(&a);

    /* the same bytes as a path or a file's first bytes */
    (void)cdb_image_sniff(data, n, 1);
    (void)cdb_image_mime(data, n);
    (void)cdb_utf8_valid((const char *)data, n);
    cdb_cli_json_write_string(g_null, (const char *)data, n);
    {
        cli_json j;
        cdb_cli_json_init(&j, g_null, 1);
        cdb_cli_json_begin_object(&j);
        cdb_cli_json_path(&j, "path", buf);
        cdb_cli_json_key(&j, "s");
        cdb_cli_json_strn(&j, (const char *)data, n);
        cdb_cli_json_end_object(&j);
        cdb_cli_json_done(&j);
    }
    free(buf);
    return 0;
}
