/*
** fuzz_ignore.c: libFuzzer target for the ignore rules (ignore/ignore.h), the parser
** of .clipdbignore files and `--exclude` globs and the wildcard matcher.
**
** Input: rule text, a NUL, then paths separated by NULs. The rules are added at the
** root and, a second time, in folder "a". Invariants, for every path:
** - cdb_ignore_path is 1 whenever cdb_ignore_match says EXCLUDED for the path itself;
** - the same rules with "*" appended (a root rule matching every name, last, so it
**   wins for every path) leave every path out; with "!*" appended instead, every path's
**   own verdict is INCLUDED (but below "a", whose rules are deeper and win);
** - a second rule set built from the same text answers the same (no hidden state).
*/
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "ignore/ignore.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

/* The rules in text[0..n) at the root and in "a", then `extra` (may be NULL) at the
** root, last. NULL on allocation failure. */
static cdb_ignore *build(const char *text, size_t n, const char *extra) {
    cdb_ignore *ig = NULL;
    if (cdb_ignore_new(&ig) != CDB_OK)
        return NULL;
    if (cdb_ignore_add(ig, "", text, n) != CDB_OK || cdb_ignore_add(ig, "a", text, n) != CDB_OK ||
        (extra && cdb_ignore_add(ig, "", extra, strlen(extra)) != CDB_OK)) {
        cdb_ignore_free(ig);
        return NULL;
    }
    return ig;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    const char *nul = memchr(text, 0, size);
    size_t n_text = nul ? (size_t)(nul - text) : size;
    cdb_ignore *ig = build(text, n_text, NULL), *again = build(text, n_text, NULL);
    cdb_ignore *all = build(text, n_text, "*"), *none = build(text, n_text, "!*");
    if (!ig || !again || !all || !none)
        goto done;
    /* the paths: NUL-terminated copies of the rest, split at NULs */
    char *rest = malloc(size - n_text + 1);
    if (!rest)
        goto done;
    memcpy(rest, text + n_text, size - n_text);
    rest[size - n_text] = '\0';
    for (char *p = rest + (nul != NULL); p < rest + (size - n_text); p += strlen(p) + 1) {
        for (int is_dir = 0; is_dir < 2; is_dir++) {
            cdb_ignore_verdict v = cdb_ignore_match(ig, p, is_dir);
            int out = cdb_ignore_path(ig, p, is_dir);
            FUZZ_CHECK(v != CDB_IGNORE_EXCLUDED || out, "'%s' excluded but not left out", p);
            FUZZ_CHECK(cdb_ignore_match(again, p, is_dir) == v, "'%s' answers differ", p);
            FUZZ_CHECK(cdb_ignore_path(again, p, is_dir) == out, "'%s' paths differ", p);
            if (*p && p[0] != '/' && p[strlen(p) - 1] != '/' && !strstr(p, "//")) {
                FUZZ_CHECK(cdb_ignore_path(all, p, is_dir) == 1, "'*' misses '%s'", p);
                FUZZ_CHECK(strncmp(p, "a/", 2) == 0 || /* there "a"'s rules win */
                               cdb_ignore_match(none, p, is_dir) == CDB_IGNORE_INCLUDED,
                           "'!*' misses '%s'", p);
            }
        }
    }
    free(rest);
done:
    cdb_ignore_free(ig);
    cdb_ignore_free(again);
    cdb_ignore_free(all);
    cdb_ignore_free(none);
    return 0;
}
