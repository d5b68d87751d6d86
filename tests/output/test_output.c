/*
** test_output.c: output/output.h against Python's json, base64 and UTF-8 codec. The
** expected bytes are in tests/output/golden/ (made by make_golden.py, see its README):
** 405 byte strings (valid and invalid UTF-8, C0 controls, DEL, quotes, surrogates,
** overlongs, sequences cut short; no NUL) as JSON string literals, repaired text,
** base64 and the path rule; counts as "{:,}" writes them; base64 texts to decode; and
** one document holding them all, compact and indented, as json.dumps writes it.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "output/output.h"

#define GOLDEN CDB_SOURCE_DIR "/tests/output/golden/"
#define MAX_CASES 1024

typedef struct text_case {
    char *in;       /* the input bytes, NUL-terminated (the inputs hold no NUL) */
    size_t n;
    char *literal;  /* the expected JSON literal */
    char *repaired; /* the expected U+FFFD repair */
    char *b64;
    int needs_b64;
} text_case;

static text_case g_cases[MAX_CASES];
static int g_n_cases;

/* "-" is empty; else hex pairs. Heap, NUL-terminated; *n the byte count. */
static char *unhex(const char *h, size_t *n) {
    size_t len = strcmp(h, "-") ? strlen(h) / 2 : 0;
    char *out = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[len] = '\0';
    if (n) *n = len;
    return out;
}

/* The whole file at path into b; 0, or -1 when it cannot be read. */
static int read_into(const char *path, cdb_buf *b) {
    FILE *f = fopen(path, "rb");
    char chunk[4096];
    size_t k;
    if (!f) return -1;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) cdb_buf_put(b, chunk, k);
    fclose(f);
    return b->oom ? -1 : 0;
}

/* The golden lines of one kind ("s", "count", "b64dec"), each split into up to 6
** fields, passed to fn. Returns the number of lines seen. */
static int each_line(const char *kind, void (*fn)(char **f, void *ud), void *ud) {
    FILE *fp = fopen(GOLDEN "encodings.txt", "r");
    char line[8192];
    int seen = 0;
    if (!fp) return -1;
    while (fgets(line, sizeof line, fp)) {
        char *f[6] = {0}, *save = NULL;
        int nf = 0;
        line[strcspn(line, "\n")] = '\0';
        for (char *t = strtok_r(line, " ", &save); t && nf < 6; t = strtok_r(NULL, " ", &save))
            f[nf++] = t;
        if (!nf || strcmp(f[0], kind)) continue;
        fn(f, ud);
        seen++;
    }
    fclose(fp);
    return seen;
}

static void load_case(char **f, void *ud) {
    text_case *c = &g_cases[g_n_cases];
    (void)ud;
    if (g_n_cases == MAX_CASES) return;
    c->in = unhex(f[1], &c->n);
    c->literal = unhex(f[2], NULL);
    c->repaired = unhex(f[3], NULL);
    c->b64 = strcmp(f[4], "-") ? strdup(f[4]) : strdup("");
    c->needs_b64 = atoi(f[5]);
    g_n_cases++;
}

static void free_cases(void) {
    for (int i = 0; i < g_n_cases; i++) {
        free(g_cases[i].in);
        free(g_cases[i].literal);
        free(g_cases[i].repaired);
        free(g_cases[i].b64);
    }
    g_n_cases = 0;
}

static int load_cases(void) {
    if (g_n_cases) return g_n_cases;
    each_line("s", load_case, NULL);
    atexit(free_cases);
    return g_n_cases;
}

/* Each input as a JSON literal and as repaired text. */
CDB_TEST(literals_and_repairs_match_python) {
    int bad_literal = 0, bad_repair = 0;
    CHECK(load_cases() > 400);
    for (int i = 0; i < g_n_cases; i++) {
        cdb_buf lit = {0}, fixed = {0};
        CHECK_EQ_INT(cdb_json_quote(&lit, g_cases[i].in, g_cases[i].n), 0);
        CHECK_EQ_INT(cdb_out_utf8_repair(&fixed, g_cases[i].in, g_cases[i].n), 0);
        if (strcmp(lit.data, g_cases[i].literal) && bad_literal++ < 5)
            fprintf(stderr, "    case %d: got %s want %s\n", i, lit.data, g_cases[i].literal);
        bad_repair += strcmp(fixed.data ? fixed.data : "", g_cases[i].repaired) != 0;
        cdb_buf_free(&lit);
        cdb_buf_free(&fixed);
    }
    CHECK_EQ_INT(bad_literal, 0);
    CHECK_EQ_INT(bad_repair, 0);
}

CDB_TEST(base64_and_path_rule_match_python) {
    int bad_b64 = 0, bad_rule = 0, n_invalid = 0;
    CHECK(load_cases() > 400);
    for (int i = 0; i < g_n_cases; i++) {
        const text_case *c = &g_cases[i];
        char *b = malloc(cdb_out_base64_len(c->n) + 1);
        size_t back_n = 0;
        unsigned char *back;
        cdb_out_base64(c->in, c->n, b);
        bad_b64 += strcmp(b, c->b64) != 0 || strlen(b) != cdb_out_base64_len(c->n);
        back = cdb_out_base64_decode(b, strlen(b), &back_n); /* and back */
        bad_b64 += !back || back_n != c->n || memcmp(back, c->in, c->n);
        free(back);
        free(b);
        bad_rule += cdb_out_path_needs_b64(c->in) != c->needs_b64;
        n_invalid += c->needs_b64;
    }
    CHECK_EQ_INT(bad_b64, 0);
    CHECK_EQ_INT(bad_rule, 0);
    CHECK(n_invalid > 100 && n_invalid < g_n_cases - 50); /* both sides of the rule */
    CHECK(cdb_out_path_needs_b64(NULL) == 0);
}

static void check_count(char **f, void *ud) {
    int *bad = ud;
    char buf[32];
    cdb_out_fmt_count(strtoll(f[1], NULL, 10), buf, sizeof buf);
    if (strcmp(buf, f[2])) {
        fprintf(stderr, "    count %s: got %s want %s\n", f[1], buf, f[2]);
        ++*bad;
    }
}

CDB_TEST(counts_match_python) {
    int bad = 0;
    char small[6];
    CHECK(each_line("count", check_count, &bad) > 50);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_STR(cdb_out_fmt_count(1234567, small, sizeof small), "1,234"); /* truncates */
}

static void check_decode(char **f, void *ud) {
    int *bad = ud;
    size_t want_n, n = 0;
    char *want = unhex(f[2], &want_n);
    unsigned char *got = cdb_out_base64_decode(f[1], strlen(f[1]), &n);
    *bad += !got || n != want_n || memcmp(got, want, n);
    free(got);
    free(want);
}

CDB_TEST(base64_decode_matches_python) {
    int bad = 0;
    size_t n;
    unsigned char *p;
    CHECK(each_line("b64dec", check_decode, &bad) > 100);
    CHECK_EQ_INT(bad, 0);
    CHECK((p = cdb_out_base64_decode("QU*J", 4, &n)) == NULL);  /* a foreign character */
    CHECK((p = cdb_out_base64_decode("QUJDR", 5, &n)) == NULL); /* a lone 6-bit tail */
    CHECK((p = cdb_out_base64_decode("QQ===", 5, &n)) == NULL); /* three "=" */
    p = cdb_out_base64_decode(" QU\nJD ", 7, &n);                /* blanks are skipped */
    CHECK(p && n == 3 && !memcmp(p, "ABC", 3));
    free(p);
}

/* The document of make_golden.py: {"strings": [...], "paths": [{"path", "path_b64"?}],
** "counts": [...], "flags": [true, false, null], "empty_array": [], "empty_object": {}} */
static void write_doc(cdb_json *j) {
    cdb_json_begin_object(j);
    cdb_json_key(j, "strings");
    cdb_json_begin_array(j);
    for (int i = 0; i < g_n_cases; i++) cdb_json_strn(j, g_cases[i].in, g_cases[i].n);
    cdb_json_end_array(j);
    cdb_json_key(j, "paths");
    cdb_json_begin_array(j);
    for (int i = 0; i < g_n_cases; i++) {
        cdb_json_begin_object(j);
        cdb_json_path(j, "path", g_cases[i].in);
        cdb_json_end_object(j);
    }
    cdb_json_end_array(j);
    cdb_json_key(j, "counts");
    cdb_json_begin_array(j);
    {
        FILE *fp = fopen(GOLDEN "encodings.txt", "r");
        char line[8192];
        while (fp && fgets(line, sizeof line, fp))
            if (!strncmp(line, "count ", 6)) cdb_json_int(j, strtoll(line + 6, NULL, 10));
        if (fp) fclose(fp);
    }
    cdb_json_end_array(j);
    cdb_json_key(j, "flags");
    cdb_json_begin_array(j);
    cdb_json_bool(j, 1);
    cdb_json_bool(j, 0);
    cdb_json_str(j, NULL);
    cdb_json_end_array(j);
    cdb_json_key(j, "empty_array");
    cdb_json_begin_array(j);
    cdb_json_end_array(j);
    cdb_json_key(j, "empty_object");
    cdb_json_begin_object(j);
    cdb_json_end_object(j);
    cdb_json_end_object(j);
    cdb_json_done(j);
}

static void check_doc(cdb_test_ctx *cdb_t_, const char *golden, int pretty) {
    cdb_buf golden_text = {0};
    size_t want_n, got_n = 0;
    char *want, *got = NULL;
    cdb_json j;
    FILE *mem;
    CHECK_MSG(read_into(golden, &golden_text) == 0, "cannot read %s", golden);
    want = golden_text.data;
    want_n = golden_text.len;
    CHECK(load_cases() > 400);
    cdb_json_init(&j, NULL, pretty); /* into the buffer */
    write_doc(&j);
    CHECK(!j.out.oom);
    CHECK_MSG(j.out.len == want_n && !memcmp(j.out.data, want, want_n),
              "%s differs (%zu bytes, want %zu)", golden, j.out.len, want_n);
    cdb_json_free(&j);
    mem = open_memstream(&got, &got_n); /* and into a FILE: the same bytes */
    cdb_json_init(&j, mem, pretty);
    write_doc(&j);
    CHECK(j.out.data == NULL); /* a writer with a sink holds no memory */
    fclose(mem);
    CHECK(got_n == want_n && !memcmp(got, want, want_n));
    free(got);
    cdb_buf_free(&golden_text);
}

CDB_TEST(compact_document_matches_python) { check_doc(cdb_t_, GOLDEN "doc_compact.json", 0); }
CDB_TEST(pretty_document_matches_python) { check_doc(cdb_t_, GOLDEN "doc_pretty.json", 1); }

CDB_TEST(floats_are_reals_that_read_back) {
    static const float v[] = {1.0f, 0.1f, -0.25f, 1e-5f, 3.4028235e38f, 0.0f};
    static const char *want[] = {"1.0", "0.100000001", "-0.25", "9.99999975e-06",
                                 "3.40282347e+38", "0.0"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        cdb_json j;
        cdb_json_init(&j, NULL, 0);
        cdb_json_float(&j, v[i]);
        CHECK_EQ_STR(j.out.data, want[i]); /* %.9g (C's printf), ".0" added when bare */
        CHECK(strtof(j.out.data, NULL) == v[i]);
        cdb_json_free(&j);
    }
}

CDB_TEST_MAIN(literals_and_repairs_match_python,
              base64_and_path_rule_match_python, counts_match_python,
              base64_decode_matches_python, compact_document_matches_python,
              pretty_document_matches_python, floats_are_reals_that_read_back)
