/*
** test_cli_unit.c: unit tests of the CLI's building blocks, in-process: the
** option parser (cli/args.c), the query language (cli/query.c), the JSON writer
** (cli/output.c; its output is read back with jansson, a real parser), the .npy
** writer (cli/npy.c) and number formatting.
*/
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdb_test.h"
#include "cli/cli.h"

static const cli_optspec spec[] = {
    {"db", 0, CLI_VALUE},   {"k", 'k', CLI_VALUE},    {"not", 0, CLI_MULTI},
    {"json", 0, CLI_FLAG},  {"quiet", 'q', CLI_FLAG}, {"verbose", 'v', CLI_FLAG},
    {"min-score", 0, CLI_VALUE}, {"sort", 0, CLI_VALUE}, {0}};

#define ARGV(...) ((char *[]){__VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, ...) cdb_cli_args_parse(a, spec, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

/* The arguments parse, and option name's (last) value is then want. */
#define CHECK_VALUE(name, want, ...)                                                        \
    do {                                                                                    \
        cli_args v_;                                                                        \
        CHECK_EQ_INT(PARSE(&v_, __VA_ARGS__), 0);                                           \
        CHECK_EQ_STR(cdb_cli_get(&v_, name), want);                                         \
        cdb_cli_args_free(&v_);                                                             \
    } while (0)

/* The arguments are refused with an error that says why (contains why). */
#define CHECK_REFUSED(why, ...)                                                             \
    do {                                                                                    \
        cli_args r_;                                                                        \
        CHECK_EQ_INT(PARSE(&r_, __VA_ARGS__), -1);                                          \
        CHECK(strstr(r_.err, why) != NULL);                                                 \
        cdb_cli_args_free(&r_);                                                             \
    } while (0)

CDB_TEST(args_long_forms) {
    cli_args a;
    CHECK_EQ_INT(PARSE(&a, "--db=/x", "--k", "5", "cat", "--json", "dog"), 0);
    CHECK_EQ_STR(cdb_cli_get(&a, "db"), "/x");
    CHECK_EQ_STR(cdb_cli_get(&a, "k"), "5");
    CHECK_EQ_INT(cdb_cli_has(&a, "json"), 1);
    CHECK_EQ_INT(cdb_cli_has(&a, "quiet"), 0);
    CHECK_EQ_INT(a.n_pos, 2);
    CHECK_EQ_STR(a.pos[0], "cat");
    CHECK_EQ_STR(a.pos[1], "dog");
    cdb_cli_args_free(&a);
}

CDB_TEST(args_short_forms) {
    cli_args a;
    long k = 0;
    CHECK_EQ_INT(PARSE(&a, "-k", "7", "x"), 0);
    CHECK_EQ_INT(cdb_cli_get_int(&a, "k", 10, 1, 100, &k), 0);
    CHECK_EQ_INT((int)k, 7);
    cdb_cli_args_free(&a);
    CHECK_VALUE("k", "12", "-k12");
    /* bundled flags, then a value-taking short option at the end of the bundle */
    CHECK_EQ_INT(PARSE(&a, "-qvk", "3"), 0);
    CHECK_EQ_INT(cdb_cli_has(&a, "quiet"), 1);
    CHECK_EQ_INT(cdb_cli_has(&a, "verbose"), 1);
    CHECK_EQ_STR(cdb_cli_get(&a, "k"), "3");
    cdb_cli_args_free(&a);
    CHECK_VALUE("k", "9", "-qk9");
}

CDB_TEST(args_repeated_and_last_wins) {
    cli_args a;
    const char **v = NULL;
    CHECK_EQ_INT(PARSE(&a, "--not", "people", "q", "--not=cars", "-k", "1", "-k", "2"), 0);
    CHECK_EQ_INT(cdb_cli_get_all(&a, "not", &v), 2);
    CHECK_EQ_STR(v[0], "people");
    CHECK_EQ_STR(v[1], "cars");
    CHECK_EQ_STR(cdb_cli_get(&a, "k"), "2");
    CHECK_EQ_INT(a.count[1], 2);
    /* argv positions keep the interleaving order */
    CHECK(a.argi[2][0] < a.argi[2][1]);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "-v", "-v", "--verbose"), 0);
    CHECK_EQ_INT(cdb_cli_has(&a, "verbose"), 3);
    cdb_cli_args_free(&a);
}

CDB_TEST(args_double_dash_and_lone_dash) {
    cli_args a;
    CHECK_EQ_INT(PARSE(&a, "a", "--", "--json", "-k", "-"), 0);
    CHECK_EQ_INT(cdb_cli_has(&a, "json"), 0);
    CHECK_EQ_INT(a.n_pos, 4);
    CHECK_EQ_STR(a.pos[1], "--json");
    CHECK_EQ_STR(a.pos[2], "-k");
    CHECK_EQ_STR(a.pos[3], "-");
    cdb_cli_args_free(&a);
    /* a value that starts with a dash is still a value */
    CHECK_VALUE("min-score", "-0.5", "--min-score", "-0.5");
    /* an empty value is a value */
    CHECK_VALUE("db", "", "--db=");
}

CDB_TEST(args_errors) {
    cli_args a;
    CHECK_EQ_INT(PARSE(&a, "--bogus"), -1);
    CHECK(strstr(a.err, "unknown option --bogus") != NULL);
    CHECK_EQ_INT(a.unknown_argi, 0);
    cdb_cli_args_free(&a);
    /* the unknown option's place (cdb_cli_begin says where a global option goes) */
    CHECK_EQ_INT(PARSE(&a, "red", "--json", "--log-time"), -1);
    CHECK_EQ_INT(a.unknown_argi, 2);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "-x"), -1);
    CHECK(strstr(a.err, "unknown option -x") != NULL);
    CHECK_EQ_INT(a.unknown_argi, 0);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "cat", "-k"), -1);
    CHECK(strstr(a.err, "-k needs a value") != NULL);
    CHECK_EQ_INT(a.unknown_argi, -1); /* not an unknown option */
    cdb_cli_args_free(&a);
    CHECK_REFUSED("--db needs a value", "--db");
    CHECK_REFUSED("--json takes no value", "--json=yes");
    /* a prefix of a long option is not accepted (no abbreviations) */
    CHECK_EQ_INT(PARSE(&a, "--jso"), -1);
    cdb_cli_args_free(&a);
}

CDB_TEST(args_numbers_and_choices) {
    static const char *const sorts[] = {"score", "time", NULL};
    cli_args a;
    long k;
    double s;
    CHECK_EQ_INT(PARSE(&a, "-k", "0"), 0);
    CHECK_EQ_INT(cdb_cli_get_int(&a, "k", 10, 1, 100, &k), -1);
    CHECK(strstr(a.err, "-k: expected an integer in [1, 100], got '0'") != NULL);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "-k", "5x"), 0);
    CHECK_EQ_INT(cdb_cli_get_int(&a, "k", 10, 1, 100, &k), -1);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "-k", ""), 0);
    CHECK_EQ_INT(cdb_cli_get_int(&a, "k", 10, 1, 100, &k), -1);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "x"), 0);
    CHECK_EQ_INT(cdb_cli_get_int(&a, "k", 10, 1, 100, &k), 0);
    CHECK_EQ_INT((int)k, 10);
    CHECK_EQ_INT(cdb_cli_get_double(&a, "min-score", -2, -1, 1, &s), 0);
    CHECK_NEAR(s, -2.0, 0);
    CHECK_EQ_INT(cdb_cli_get_choice(&a, "sort", sorts, 0), 0);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "--min-score", "0.25", "--sort", "time"), 0);
    CHECK_EQ_INT(cdb_cli_get_double(&a, "min-score", -2, -1, 1, &s), 0);
    CHECK_NEAR(s, 0.25, 0);
    CHECK_EQ_INT(cdb_cli_get_choice(&a, "sort", sorts, 0), 1);
    cdb_cli_args_free(&a);
    CHECK_EQ_INT(PARSE(&a, "--min-score", "nan", "--sort", "size"), 0);
    CHECK_EQ_INT(cdb_cli_get_double(&a, "min-score", -2, -1, 1, &s), -1);
    CHECK_EQ_INT(cdb_cli_get_choice(&a, "sort", sorts, 0), -1);
    CHECK(strstr(a.err, "expected one of score|time, got 'size'") != NULL);
    cdb_cli_args_free(&a);
}

/* ---- query language ---- */

static void check_terms(cdb_test_ctx *cdb_t_, const char *q, int n_want, const char **texts,
                        const double *weights) {
    cdb_engine_term *t = NULL;
    int n = 0;
    if (cdb_engine_query_parse(q, &t, &n) != CDB_OK) {
        CDB_TEST_FAIL_("parse '%s' failed: %s", q, cdb_errmsg());
        return;
    }
    CHECK_EQ_INT(n, n_want);
    for (int i = 0; i < n && i < n_want; i++) {
        CHECK_EQ_STR(t[i].text, texts[i]);
        CHECK_NEAR(t[i].weight, weights[i], 1e-12);
    }
    cdb_engine_terms_free(t, n);
}

CDB_TEST(query_terms) {
    check_terms(cdb_t_, "a red circle", 1, (const char *[]){"a red circle"}, (double[]){1});
    check_terms(cdb_t_, "beach + sunset - people", 3,
                (const char *[]){"beach", "sunset", "people"}, (double[]){1, 1, -1});
    check_terms(cdb_t_, "  a  dog   on a beach ", 1, (const char *[]){"a dog on a beach"},
                (double[]){1});
    check_terms(cdb_t_, "2*beach + 0.5*red sunset", 2,
                (const char *[]){"beach", "red sunset"}, (double[]){2, 0.5});
    check_terms(cdb_t_, "- people", 1, (const char *[]){"people"}, (double[]){-1});
    check_terms(cdb_t_, "red t-shirt - 3*cars", 2, (const char *[]){"red t-shirt", "cars"},
                (double[]){1, -3});
    check_terms(cdb_t_, "+ sunset", 1, (const char *[]){"sunset"}, (double[]){1});
    /* '*' that is not a number prefix stays text */
    check_terms(cdb_t_, "a*b", 1, (const char *[]){"a*b"}, (double[]){1});
    check_terms(cdb_t_, "5 * stars x", 1, (const char *[]){"stars x"}, (double[]){5});
    /* the spaced and suffix weight forms */
    check_terms(cdb_t_, "2 * beach + red sunset*0.5 - people * 3", 3,
                (const char *[]){"beach", "red sunset", "people"}, (double[]){2, 0.5, -3});
    check_terms(cdb_t_, "2*beach*3", 1, (const char *[]){"beach"}, (double[]){6});
    check_terms(cdb_t_, "top 10*", 1, (const char *[]){"top 10*"}, (double[]){1});
    check_terms(cdb_t_, "x * y", 1, (const char *[]){"x * y"}, (double[]){1});
}

CDB_TEST(query_errors) {
    const char *bad[] = {"",        "   ",      "beach +",   "beach + - sunset", "- - y",
                         "2* + x",  "+",        "0*red",     "nan*red",          "inf*red",
                         "red * 0", "red*nan", "1e999*red", "red + 0 * blue"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cdb_engine_term *t = NULL;
        int n = 0;
        cdb_status rc = cdb_engine_query_parse(bad[i], &t, &n);
        if (rc == CDB_OK) CDB_TEST_FAIL_("query '%s' should fail", bad[i]);
        CHECK_EQ_INT(rc, CDB_INVALID);
        CHECK_EQ_INT(cdb_engine_errcode(), CDB_ENGINE_E_QUERY);
        CHECK(cdb_errmsg()[0] != '\0');
        CHECK(t == NULL && n == 0);
        cdb_engine_terms_free(t, n);
    }
}

/* ---- JSON ---- */

static char *json_to_string(void (*fill)(cdb_json *j, void *ud), void *ud, int pretty) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cdb_json j;
    cdb_cli_json_init(&j, f, pretty);
    fill(&j, ud);
    cdb_json_done(&j);
    fclose(f);
    return buf;
}

static void fill_doc(cdb_json *j, void *ud) {
    const char *path = ud;
    cdb_json_begin_object(j);
    cdb_json_key(j, "s");
    cdb_json_str(
        j, "quote\" backslash\\ nl\n tab\t cr\r bell\a del\x7f slash/ é 日本 \xF0\x9F\x98\x80");
    cdb_json_key(j, "n");
    cdb_json_int(j, -42);
    cdb_json_key(j, "x");
    cdb_json_num(j, 0.123456, 4);
    cdb_json_key(j, "nan");
    cdb_json_num(j, 0.0 / 0.0, 4);
    cdb_json_key(j, "f");
    cdb_json_float(j, 0.1f);
    cdb_json_key(j, "b");
    cdb_json_bool(j, 1);
    cdb_json_key(j, "z");
    cdb_json_null(j);
    cdb_json_key(j, "one");
    cdb_json_float(j, 1.0f); /* a perfect score must still be a JSON real */
    cdb_json_key(j, "arr");
    cdb_json_begin_array(j);
    cdb_json_int(j, 1);
    cdb_json_begin_object(j);
    cdb_json_end_object(j);
    cdb_json_begin_array(j);
    cdb_json_end_array(j);
    cdb_json_str(j, NULL);
    cdb_json_end_array(j);
    cdb_json_path(j, "path", path);
    cdb_json_end_object(j);
}

static void check_doc(cdb_test_ctx *cdb_t_, const char *text, const char *path) {
    json_error_t e;
    json_t *root = json_loads(text, 0, &e);
    if (!root) {
        CDB_TEST_FAIL_("jansson rejects the output: %s (line %d)\n%s", e.text, e.line, text);
        return;
    }
    CHECK_EQ_STR(
        json_string_value(json_object_get(root, "s")),
        "quote\" backslash\\ nl\n tab\t cr\r bell\a del\x7f slash/ é 日本 \xF0\x9F\x98\x80");
    CHECK_EQ_INT((int)json_integer_value(json_object_get(root, "n")), -42);
    CHECK_NEAR(json_real_value(json_object_get(root, "x")), 0.1235, 1e-12);
    CHECK(json_is_null(json_object_get(root, "nan")));
    CHECK((float)json_real_value(json_object_get(root, "f")) == 0.1f); /* round-trips */
    CHECK(json_is_real(json_object_get(root, "one")));
    CHECK(json_real_value(json_object_get(root, "one")) == 1.0);
    CHECK(json_is_true(json_object_get(root, "b")));
    CHECK(json_is_null(json_object_get(root, "z")));
    CHECK_EQ_INT((int)json_array_size(json_object_get(root, "arr")), 4);
    if (path && cdb_utf8_valid(path, strlen(path))) {
        CHECK_EQ_STR(json_string_value(json_object_get(root, "path")), path);
        CHECK(json_object_get(root, "path_b64") == NULL);
    }
    json_decref(root);
}

CDB_TEST(json_escaping_parses_back) {
    const char *path = "/photos/a b/\"quoted\"/new\nline.jpg";
    for (int pretty = 0; pretty < 2; pretty++) {
        char *s = json_to_string(fill_doc, (void *)path, pretty);
        check_doc(cdb_t_, s, path);
        /* control bytes never appear raw */
        for (const char *p = s; *p; p++)
            if ((unsigned char)*p < 0x20 && *p != '\n') CDB_TEST_FAIL_("raw control byte %d", *p);
        free(s);
    }
}

CDB_TEST(json_non_utf8_path) {
    /* invalid: lone continuation, overlong, truncated sequence, surrogate, latin-1 */
    const char *paths[] = {"/p/caf\xE9.jpg", "/p/\x80x", "/p/\xC0\xAF", "/p/\xE6\x97",
                           "/p/\xED\xA0\x80", "/p/\xF5\x80\x80\x80", "a", "ab", "abc"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char *s = json_to_string(fill_doc, (void *)paths[i], 1);
        json_error_t e;
        json_t *root = json_loads(s, 0, &e);
        int valid = cdb_utf8_valid(paths[i], strlen(paths[i]));
        if (!root) {
            CDB_TEST_FAIL_("jansson rejects output for path %zu: %s", i, e.text);
            free(s);
            continue;
        }
        if (valid) {
            CHECK(json_object_get(root, "path_b64") == NULL);
        } else {
            const char *b64 = json_string_value(json_object_get(root, "path_b64"));
            const char *lossy = json_string_value(json_object_get(root, "path"));
            size_t n = 0;
            unsigned char *raw = b64 ? cdb_out_base64_decode(b64, strlen(b64), &n) : NULL;
            CHECK(raw != NULL);
            CHECK_EQ_INT((int)n, (int)strlen(paths[i]));
            CHECK(memcmp(raw, paths[i], n) == 0);
            free(raw);
            CHECK(lossy && strstr(lossy, "\xEF\xBF\xBD") != NULL); /* U+FFFD */
        }
        json_decref(root);
        free(s);
    }
    CHECK_EQ_INT(cdb_utf8_valid("\xF0\x9F\x98\x80 \xC3\xA9", 7), 1);
    CHECK_EQ_INT(cdb_utf8_valid("\xED\xA0\x80", 3), 0);
    CHECK_EQ_INT(cdb_utf8_valid("\xF4\x90\x80\x80", 4), 0);
}

/* ---- npy ---- */

CDB_TEST(npy_header_and_data) {
    char dir[256], path[300];
    float data[6] = {1, 2, 3, 4, 5, -6.5f};
    int64_t shape[2] = {2, 3};
    unsigned char buf[512];
    size_t n;
    FILE *f;
    snprintf(dir, sizeof dir, "/tmp/cdb-npy-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/a.npy", dir);
    CHECK_EQ_INT(cdb_cli_npy_write(path, "<f4", shape, 2, data, sizeof data[0]), 0);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f) return;
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CHECK(memcmp(buf, "\x93NUMPY\x01\x00", 8) == 0);
    {
        size_t hl = buf[8] | (size_t)buf[9] << 8, off = 10 + hl;
        char hdr[256];
        float back[6];
        CHECK_EQ_INT((int)(off % 64), 0);
        CHECK_EQ_INT((int)n, (int)(off + sizeof data));
        memcpy(hdr, buf + 10, hl < 255 ? hl : 255);
        hdr[hl < 255 ? hl : 255] = '\0';
        CHECK(strstr(hdr, "'descr': '<f4'") != NULL);
        CHECK(strstr(hdr, "'fortran_order': False") != NULL);
        CHECK(strstr(hdr, "'shape': (2, 3)") != NULL);
        CHECK_EQ_INT(hdr[hl - 1], '\n');
        memcpy(back, buf + off, sizeof back);
        CHECK(memcmp(back, data, sizeof data) == 0);
    }
    /* a 1-d shape keeps its trailing comma: (5,) */
    shape[0] = 5;
    f = fopen(path, "wb");
    CHECK_EQ_INT(cdb_cli_npy_header(f, "<i8", shape, 1), 0);
    fclose(f);
    f = fopen(path, "rb");
    n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    buf[n < sizeof buf ? n : sizeof buf - 1] = 0;
    CHECK(strstr((char *)buf + 10, "'shape': (5,)") != NULL);
    remove(path);
    rmdir(dir);
}

CDB_TEST(format_numbers) {
    char b[64];
    CHECK_EQ_STR(cdb_out_fmt_count(0, b, sizeof b), "0");
    CHECK_EQ_STR(cdb_out_fmt_count(999, b, sizeof b), "999");
    CHECK_EQ_STR(cdb_out_fmt_count(1000, b, sizeof b), "1,000");
    CHECK_EQ_STR(cdb_out_fmt_count(1234567, b, sizeof b), "1,234,567");
    CHECK_EQ_STR(cdb_out_fmt_count(-1234, b, sizeof b), "-1,234");
    CHECK_EQ_STR(cdb_cli_fmt_duration(1.25, b, sizeof b), "1.2 s");
    CHECK_EQ_STR(cdb_cli_fmt_duration(75, b, sizeof b), "1 min 15 s");
    CHECK_EQ_STR(cdb_cli_fmt_bytes(512, b, sizeof b), "512 B");
    CHECK_EQ_STR(cdb_cli_fmt_bytes(2500000, b, sizeof b), "2.5 MB");
}

CDB_TEST_MAIN(args_long_forms, args_short_forms, args_repeated_and_last_wins,
              args_double_dash_and_lone_dash, args_errors, args_numbers_and_choices,
              query_terms, query_errors, json_escaping_parses_back, json_non_utf8_path,
              npy_header_and_data, format_numbers)
