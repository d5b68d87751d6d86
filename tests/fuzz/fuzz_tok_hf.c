/*
** fuzz_tok_hf.c: libFuzzer target for the tokenizer.json backend (encoder/tok_hf_int.h):
** hostile tokenizer.json files and hostile texts.
**
** Input: either a tokenizer.json document, a NUL byte, and a text to encode with it
** (when the input starts with '{'), or a byte that picks one of the committed files of
** tests/golden/hf_tokenizer/ followed by the text (fixed files, fuzzed text: the
** normalizers, regexes and models on arbitrary bytes).
**
** Invariants beyond "no crash / no sanitizer report / no leak / no hang":
** - open fails only with CDB_CORRUPT, CDB_UNSUPPORTED or CDB_NOMEM (never a crash on a
**   malformed component);
** - encode fails only with CDB_NOMEM or, for a token no id stands for, CDB_CORRUPT;
** - every id is in [0, vocab_size) and has a token string;
** - encoding the same text twice gives the same ids.
*/
#include <stdint.h>
#include <string.h>

#include "encoder/tok_hf_int.h"
#include "fuzz_util.h"

static const char *k_files[] = {"clip.json",   "gpt2.json",     "llama3.json", "bytefallback.json",
                                "siglip.json", "unigram2.json", "bert.json",   "bert2.json",
                                "regex.json",  "misc.json"};
#define N_FILES (sizeof k_files / sizeof *k_files)
static cdb_tok_hf *g_fixed[N_FILES];
static char g_path[512];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    for (size_t i = 0; i < N_FILES; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tests/golden/hf_tokenizer/%s", fuzz_source_dir(),
                 k_files[i]);
        if (cdb_tok_hf_open(path, &g_fixed[i]) != CDB_OK) {
            fprintf(stderr, "fuzz_tok_hf: cannot open %s: %s\n", path, cdb_errmsg());
            abort();
        }
    }
    snprintf(g_path, sizeof g_path, "%s/tokenizer.json", fuzz_tmpdir("tokhf"));
    return 0;
}

/* The truncated encode (cdb_tok_hf_encode_max) against the full one: the specials
** before the text, the text's first ids, the specials after it. */
static void check_truncated(const cdb_tok_hf *h, const char *text, size_t n, const int32_t *a,
                            size_t na) {
    size_t before = 0, after = 0, nt = 0, max = 1 + n % 70;
    int32_t *t = NULL;
    int cut = -1;
    cdb_tok_hf_n_specials(h, &before, &after);
    cdb_status rc = cdb_tok_hf_encode_max(h, text, n, max, &t, &nt, &cut);
    if (max < before + after) {
        FUZZ_CHECK(rc == CDB_INVALID, "max %zu < %zu specials: %s", max, before + after,
                   cdb_status_str(rc));
        return;
    }
    FUZZ_CHECK(rc == CDB_OK || rc == CDB_NOMEM, "encode_max: %s", cdb_errmsg());
    if (rc != CDB_OK) return;
    size_t keep = na - before - after < max - before - after ? na - before - after
                                                              : max - before - after;
    FUZZ_CHECK(nt == before + keep + after && cut == (na > max), "%zu ids of %zu, max %zu", nt,
               na, max);
    FUZZ_CHECK(!memcmp(t, a, (before + keep) * sizeof *t) &&
                   !memcmp(t + before + keep, a + na - after, after * sizeof *t),
               "the truncated ids are not the full ones cut");
    cdb_free(t);
}

static void check_encode(const cdb_tok_hf *h, const char *text, size_t n) {
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    cdb_status rc = cdb_tok_hf_encode(h, text, n, &a, &na);
    FUZZ_CHECK(rc == CDB_OK || rc == CDB_NOMEM || rc == CDB_CORRUPT, "encode: %s: %s",
               cdb_status_str(rc), cdb_errmsg());
    if (rc != CDB_OK) return;
    int vocab = cdb_tok_hf_vocab_size(h);
    for (size_t i = 0; i < na; i++) {
        FUZZ_CHECK(a[i] >= 0 && a[i] < vocab, "id %zu = %d out of [0, %d)", i, a[i], vocab);
        FUZZ_CHECK(cdb_tok_hf_token_str(h, a[i]) != NULL, "id %d has no token string", a[i]);
    }
    rc = cdb_tok_hf_encode(h, text, n, &b, &nb);
    FUZZ_CHECK(rc == CDB_OK && nb == na && (na == 0 || !memcmp(a, b, na * sizeof *a)),
               "a second encode differs (%zu vs %zu ids)", na, nb);
    cdb_free(b);
    check_truncated(h, text, n, a, na);
    cdb_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n == 0) return 0;
    if (data[0] != '{') {
        check_encode(g_fixed[data[0] % N_FILES], (const char *)data + 1, n - 1);
        return 0;
    }
    const uint8_t *z = memchr(data, 0, n);
    size_t jn = z ? (size_t)(z - data) : n;
    if (fuzz_write_file(g_path, data, jn) != 0) abort();
    cdb_tok_hf *h = NULL;
    cdb_status rc = cdb_tok_hf_open(g_path, &h);
    FUZZ_CHECK(rc == CDB_OK || rc == CDB_CORRUPT || rc == CDB_UNSUPPORTED || rc == CDB_NOMEM,
               "open: %s: %s", cdb_status_str(rc), cdb_errmsg());
    if (rc != CDB_OK) return 0;
    const char *text = z ? (const char *)z + 1 : "Hello world, caf\xC3\xA9 \xE6\x97\xA5";
    check_encode(h, text, z ? n - jn - 1 : strlen(text));
    cdb_tok_hf_free(h);
    return 0;
}
