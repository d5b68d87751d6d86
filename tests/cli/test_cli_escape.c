/*
** test_cli_escape.c: file names that would steer a terminal or forge a line (escape
** sequences, a newline, a tab, C1 controls as UTF-8 and as a raw byte, a bidirectional
** override, DEL) through the human output of search, duplicates, folders and errors,
** and the machine output beside it. The oracle is the names the test made:
**   - human output (stdout and stderr) holds no control character but the newline that
**     ends a line and the tabs of search's columns, no DEL, no C1 control, no
**     bidirectional control, and is valid UTF-8 (checked by this file's own decoder);
**   - each name shown, unescaped (\n, \r, \t, \xHH), is the name made: no name lost,
**     none forged (a name with a real backslash, which is shown as it is, apart);
**   - search --paths -0, duplicates --paths0, errors -0 and --json (path, or path_b64
**     for bytes that are not UTF-8) give the exact bytes.
** Before the fix, the names reached the terminal raw. Skipped (77) without a model.
** escape_random_bytes: cdb_cli_esc itself, in process, on random byte strings weighted
** to the troublesome ranges: the same two properties (safe; unescaped, the input).
*/
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdb_test.h"
#include "cli/cli.h"
#include "cli_run.h"

/* The photos' names (all copies of one picture, so duplicates groups them all). */
static const char *const k_names[] = {
    "\x1b]2;TITLE\x07\x1b[2J\x1b[31mred.ppm",
    "b.ppm\n  keep   FORGED.ppm",
    "tab\there.ppm",
    "c1\xc2\x9b" "31m.ppm",       /* U+009B, CSI as a C1 control */
    "raw\x9b" "31m.ppm",          /* the same byte alone: not UTF-8 */
    "bidi\xe2\x80\xae" "gnp.ppm", /* U+202E, right-to-left override */
    "del\x7f.ppm",
    "plain \xc3\xa9t\xc3\xa9.ppm", /* UTF-8 text: shown as it is */
    NULL};
#define N_NAMES 8
/* a real backslash: shown as it is (so its text reads like an escape) */
static const char k_backslash[] = "back\\x1b.ppm";
/* the library's own folder has a hostile name too */
static const char k_lib[] = "lib\x1b[31m", k_lib_shown[] = "lib\\x1b[31m";
static const char k_bad[] = "bad\x1b[2J.ppm"; /* not a picture: an error to list */

/* ---- this file's own UTF-8 reading (independent of clipdb's) ---------------------- */

/* Length of the valid UTF-8 character at s (n bytes left) and its code point, 0 when
** the bytes are not one (overlong forms, surrogates and values past U+10FFFF too). */
static int utf8_char(const unsigned char *s, size_t n, uint32_t *cp) {
    int len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
            : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (!len || (size_t)len > n) return 0;
    *cp = len == 1 ? s[0] : (uint32_t)(s[0] & (0x7f >> len));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        *cp = (*cp << 6) | (s[i] & 0x3f);
    }
    if (*cp < min[len] || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff)) return 0;
    return len;
}

/* 0 when the n bytes at s are safe for a terminal: valid UTF-8 with no control character
** but newlines (and tabs when tabs), no DEL, no C1 control, no line or paragraph
** separator and no bidirectional control. Else the offset of the first bad byte + 1. */
static size_t unsafe_at(const char *s, size_t n, int tabs) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        int k = utf8_char(p + i, n - i, &cp);
        int bad = !k || (cp < 0x20 && cp != '\n' && !(tabs && cp == '\t')) || cp == 0x7f ||
                  (cp >= 0x80 && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
                  (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
        if (bad) return i + 1;
        i += (size_t)k;
    }
    return 0;
}

/* Undoes the escaping a name's text shows (\n, \r, \t, \xHH) into out (size bytes). */
static void unescape(const char *s, size_t n, char *out, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        if (s[i] == '\\' && i + 1 < n && strchr("nrt", s[i + 1])) {
            out[o++] = s[i + 1] == 'n' ? '\n' : s[i + 1] == 'r' ? '\r' : '\t';
            i++;
        } else if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x') {
            char hex[3] = {s[i + 2], s[i + 3], 0};
            out[o++] = (char)strtol(hex, NULL, 16);
            i += 3;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
}

/* base64 (standard alphabet, padded) of text into out: the byte count, -1 if bad. */
static int unbase64(const char *text, unsigned char *out, size_t size) {
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t acc = 0;
    int bits = 0, n = 0;
    for (const char *c = text; *c && *c != '='; c++) {
        const char *at = strchr(abc, *c);
        if (!at) return -1;
        acc = (acc << 6) | (uint32_t)(at - abc);
        if ((bits += 6) >= 8 && (size_t)n < size) out[n++] = (unsigned char)(acc >> (bits -= 8));
    }
    return n;
}

/* ---- the library ------------------------------------------------------------------- */

static char g_tmp[512], g_lib[700], g_db[700], g_paths[N_NAMES + 1][800];

/* The library: one picture (a binary PPM, 64x48) under every name (and k_backslash),
** a file that is no picture; a database holding it. 0, or -1. */
static int make_library(const char *model) {
    static const char hdr[] = "P6\n64 48\n255\n";
    unsigned char ppm[sizeof hdr - 1 + 64 * 48 * 3];
    char p[900];
    cli_run_result r;
    if (!cli_tmpdir(g_tmp, sizeof g_tmp)) return -1;
    snprintf(g_lib, sizeof g_lib, "%s/%s", g_tmp, k_lib);
    snprintf(g_db, sizeof g_db, "%s/db", g_tmp);
    if (mkdir(g_lib, 0755) != 0) return -1;
    memcpy(ppm, hdr, sizeof hdr - 1);
    for (size_t i = sizeof hdr - 1; i < sizeof ppm; i++)
        ppm[i] = (unsigned char)(i * 7 + (i / 192) * 13);
    for (int i = 0; i <= N_NAMES; i++) {
        snprintf(g_paths[i], sizeof g_paths[i], "%s/%s", g_lib, i < N_NAMES ? k_names[i]
                                                                             : k_backslash);
        if (cli_write_file(g_paths[i], ppm, sizeof ppm) != 0) return -1;
    }
    snprintf(p, sizeof p, "%s/%s", g_lib, k_bad);
    if (cli_write_file(p, "not a picture at all", 20) != 0) return -1;
    if (cli_run((const char *[]){"init", "--db", g_db, "--model", model, NULL}, &r) != 0)
        return -1;
    cli_run_free(&r);
    int rc = cli_run((const char *[]){"ingest", "--db", g_db, g_lib, NULL}, &r);
    size_t bad = unsafe_at(r.err, r.err_len, 0) + unsafe_at(r.out, r.out_len, 0);
    if (rc != 3 || bad) fprintf(stderr, "    ingest: exit %d, unsafe at %zu\n%s%s", rc, bad,
                                r.out, r.err);
    cli_run_free(&r);
    return rc == 3 && !bad ? 0 : -1;
}

/* Index in g_paths of the name `shown` (its text as human output shows it: unescaped
** first, except for the backslash name, shown as it is); -1 when none. */
static int which(const char *shown, size_t n) {
    char raw[900];
    snprintf(raw, sizeof raw, "%s/%s/%s", g_tmp, k_lib_shown, k_backslash);
    if (n == strlen(raw) && !memcmp(shown, raw, n)) return N_NAMES;
    unescape(shown, n, raw, sizeof raw);
    for (int i = 0; i < N_NAMES; i++)
        if (!strcmp(raw, g_paths[i])) return i;
    return -1;
}

#define NEED_LIBRARY()                                                                  \
    const char *model = cli_find_model();                                               \
    if (!model) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/");      \
    if (!g_db[0] && make_library(model) != 0) CDB_TEST_FAIL_("cannot make the library")

/* ---- the tests --------------------------------------------------------------------- */

/* search: one line per photo, each name found once; --paths0 and --json exact. */
CDB_TEST(search_names_escaped) {
    cli_run_result r;
    int seen[N_NAMES + 1] = {0}, lines = 0;
    NEED_LIBRARY();
    CHECK_EQ_INT(cli_run((const char *[]){"search", "--db", g_db, "-k", "100", "--no-collapse",
                                          "a picture", NULL}, &r), 0);
    CHECK_EQ_INT((int)unsafe_at(r.out, r.out_len, 1), 0);
    CHECK_EQ_INT((int)unsafe_at(r.err, r.err_len, 0), 0);
    for (char *line = r.out, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        char *tab = strchr(line, '\t'), *tab2 = tab ? strchr(tab + 1, '\t') : NULL;
        CHECK(tab2 && tab2 < nl);
        if (!tab2 || tab2 > nl) break;
        int i = which(tab2 + 1, (size_t)(nl - tab2 - 1));
        CHECK_MSG(i >= 0, "an unknown name: %.*s", (int)(nl - tab2 - 1), tab2 + 1);
        if (i >= 0) seen[i]++;
        lines++;
    }
    CHECK_EQ_INT(lines, N_NAMES + 1);
    for (int i = 0; i <= N_NAMES; i++) CHECK_MSG(seen[i] == 1, "name %d seen %d times", i, seen[i]);
    cli_run_free(&r);

    /* --paths -0: the exact bytes */
    CHECK_EQ_INT(cli_run((const char *[]){"search", "--db", g_db, "-k", "100", "--no-collapse",
                                          "--paths", "-0", "a picture", NULL}, &r), 0);
    memset(seen, 0, sizeof seen);
    for (size_t at = 0; at < r.out_len; at += strlen(r.out + at) + 1)
        for (int i = 0; i <= N_NAMES; i++) seen[i] += !strcmp(r.out + at, g_paths[i]);
    for (int i = 0; i <= N_NAMES; i++) CHECK_EQ_INT(seen[i], 1);
    cli_run_free(&r);

    /* --json: path, or path_b64 when the bytes are not UTF-8 */
    CHECK_EQ_INT(cli_run((const char *[]){"search", "--db", g_db, "-k", "100", "--no-collapse",
                                          "--json", "a picture", NULL}, &r), 0);
    json_error_t e;
    json_t *doc = json_loads(r.out, 0, &e), *h;
    size_t k;
    memset(seen, 0, sizeof seen);
    json_array_foreach(json_object_get(doc, "hits"), k, h) {
        const char *b64 = json_string_value(json_object_get(h, "path_b64"));
        char raw[900] = {0};
        if (b64) unbase64(b64, (unsigned char *)raw, sizeof raw - 1);
        else snprintf(raw, sizeof raw, "%s", json_string_value(json_object_get(h, "path")));
        for (int i = 0; i <= N_NAMES; i++) seen[i] += !strcmp(raw, g_paths[i]);
    }
    for (int i = 0; i <= N_NAMES; i++) CHECK_EQ_INT(seen[i], 1);
    json_decref(doc);
    cli_run_free(&r);
}

/* duplicates: the table names each copy once, safely; --paths0 exact. */
CDB_TEST(duplicates_names_escaped) {
    cli_run_result r;
    int seen[N_NAMES + 1] = {0};
    NEED_LIBRARY();
    CHECK_EQ_INT(cli_run((const char *[]){"duplicates", "--db", g_db, NULL}, &r), 0);
    CHECK_EQ_INT((int)unsafe_at(r.out, r.out_len, 0), 0);
    CHECK_EQ_INT((int)unsafe_at(r.err, r.err_len, 0), 0);
    for (char *line = r.out, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        char *path = strstr(line, k_lib_shown);
        if (!path || path > nl) continue;
        path -= strlen(g_tmp) + 1; /* the table's last column: the path, escaped */
        int i = which(path, (size_t)(nl - path));
        CHECK_MSG(i >= 0, "an unknown name: %.*s", (int)(nl - path), path);
        if (i >= 0) seen[i]++;
    }
    for (int i = 0; i <= N_NAMES; i++) CHECK_MSG(seen[i] == 1, "name %d seen %d times", i, seen[i]);
    cli_run_free(&r);
    CHECK_EQ_INT(cli_run((const char *[]){"duplicates", "--db", g_db, "--paths0", NULL}, &r), 0);
    memset(seen, 0, sizeof seen);
    int n0 = 0;
    for (size_t at = 0; at < r.out_len; at += strlen(r.out + at) + 1, n0++)
        for (int i = 0; i <= N_NAMES; i++) seen[i] += !strcmp(r.out + at, g_paths[i]);
    CHECK_EQ_INT(n0, N_NAMES); /* all but the one kept, each exactly */
    for (int i = 0, n = 0; i <= N_NAMES; i++) {
        CHECK(seen[i] <= 1);
        n += seen[i];
        if (i == N_NAMES) CHECK_EQ_INT(n, N_NAMES);
    }
    cli_run_free(&r);
}

/* folders and errors: the root's name and the failed file's, escaped; errors -0 exact. */
CDB_TEST(folders_and_errors_escaped) {
    cli_run_result r;
    char line[2000], bad[900];
    NEED_LIBRARY();
    CHECK_EQ_INT(cli_run((const char *[]){"folders", "--db", g_db, NULL}, &r), 0);
    CHECK_EQ_INT((int)unsafe_at(r.out, r.out_len, 0), 0);
    char *at = strstr(r.out, k_lib_shown);
    CHECK(at != NULL);
    if (at) {
        at -= strlen(g_tmp) + 1;
        unescape(at, strcspn(at, "\n"), line, sizeof line);
        CHECK_EQ_STR(line, g_lib);
    }
    cli_run_free(&r);
    snprintf(bad, sizeof bad, "%s/%s", g_lib, k_bad);
    CHECK_EQ_INT(cli_run((const char *[]){"errors", "--db", g_db, NULL}, &r), 0);
    CHECK_EQ_INT((int)unsafe_at(r.out, r.out_len, 1), 0);
    CHECK_EQ_INT((int)(strchr(r.out, '\n') - r.out + 1), (int)strlen(r.out)); /* one line */
    unescape(r.out, strcspn(r.out, "\t"), line, sizeof line);
    CHECK_EQ_STR(line, bad);
    cli_run_free(&r);
    CHECK_EQ_INT(cli_run((const char *[]){"errors", "--db", g_db, "-0", NULL}, &r), 0);
    CHECK(!strncmp(r.out, bad, strlen(bad)) && r.out[strlen(bad)] == '\t');
    cli_run_free(&r);
    /* an error message naming the folder (stderr) */
    snprintf(line, sizeof line, "%s/nowhere\x1b[2J", g_lib);
    CHECK_EQ_INT(cli_run((const char *[]){"forget", "--db", g_db, line, NULL}, &r), 1);
    CHECK_EQ_INT((int)unsafe_at(r.err, r.err_len, 0), 0);
    CHECK(strstr(r.err, "/nowhere\\x1b[2J") != NULL);
    cli_run_free(&r);
}

/* cdb_cli_esc on random bytes: safe for a terminal, no newline or tab, and (inputs
** without a backslash) unescaped back to the input. */
CDB_TEST(escape_random_bytes) {
    static const unsigned char pick[] = {0x00, 0x07, 0x09, 0x0a, 0x0d, 0x1b, 0x7f, 0x80, 0x9b,
                                         0x9f, 0xa0, 0xc2, 0xc3, 0xe2, 0x80, 0xae, 0xa8, 0xef,
                                         0xf0, 0xf4, 0xff, 'a', '[', '/', '.', ' '};
    uint64_t st = 0x853c49e6748fea9bULL;
    for (int it = 0; it < 20000; it++) {
        char in[48], back[256];
        int n = 0;
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        for (int len = (int)(st >> 59); n < len; n++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            unsigned r = (unsigned)(st >> 33);
            in[n] = (char)(r % 3 ? pick[(r >> 8) % sizeof pick] : (r >> 8) & 0xff);
            if (!in[n] || in[n] == '\\') in[n] = 'x';
        }
        in[n] = '\0';
        const char *out = cdb_cli_esc(in);
        size_t len = strlen(out);
        CHECK_MSG(!unsafe_at(out, len, 0) && !strchr(out, '\n'), "case %d", it);
        unescape(out, len, back, sizeof back);
        CHECK_MSG(!strcmp(back, in), "case %d: %s", it, out);
        if (unsafe_at(out, len, 0) || strchr(out, '\n') || strcmp(back, in)) break;
    }
    CHECK_EQ_STR(cdb_cli_esc("a\\x1b\xc3\xa9"), "a\\x1b\xc3\xa9"); /* as it is */
}

static void rm_rf(const char *dir) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

CDB_TEST_MAIN_TMP(g_tmp, rm_rf, escape_random_bytes, search_names_escaped,
                  duplicates_names_escaped, folders_and_errors_escaped)
