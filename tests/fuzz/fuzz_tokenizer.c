/*
** fuzz_tokenizer.c: libFuzzer target for the CLIP BPE tokenizer on arbitrary bytes
** (invalid UTF-8, NULs, HTML entities, special tokens, mojibake): cdb_tok_clean,
** cdb_tok_encode and cdb_tok_tokenize with the standard vocabulary
** (data/bpe_simple_vocab_16e6.txt.gz, or CLIPDB_VOCAB).
**
** Invariants checked beyond "no crash / no sanitizer report / no leak":
** - clean gives a NUL-terminated string without invalid UTF-8 bytes 0xC0/0xC1/0xF5+;
** - encode's full count does not depend on max_ids, and every id is in the vocabulary;
** - tokenize gives [sot, ..., eot, 0...] with eot_index pointing at an eot, the
**   truncation flag consistent with the count, and the same prefix as encode.
*/
#include <stdint.h>
#include <string.h>

#include "encoder/encoder.h"
#include "fuzz_util.h"

static cdb_tok *g_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char path[4096];
    const char *env = getenv("CLIPDB_VOCAB");
    (void)argc, (void)argv;
    fuzz_quiet();
    if (env && *env) snprintf(path, sizeof path, "%s", env);
    else snprintf(path, sizeof path, "%s/data/bpe_simple_vocab_16e6.txt.gz", fuzz_source_dir());
    if (cdb_tok_open(path, &g_tok) != CDB_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot open vocabulary %s: %s\n", path, cdb_errmsg());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *text = (const char *)data;
    const int vocab = cdb_tok_vocab_size(g_tok), sot = cdb_tok_sot_id(g_tok),
              eot = cdb_tok_eot_id(g_tok);
    char *clean = NULL;
    int32_t ids[80], ctx_ids[77], tiny[2];
    int n_ids = -1, n_ids0 = -1, eot_index = -1, truncated = -1;
    cdb_status rc;

    /* 1. cleaning */
    rc = cdb_tok_clean(n ? text : NULL, n, &clean);
    if (rc == CDB_OK) {
        size_t len;
        FUZZ_CHECK(clean != NULL, "clean returned OK and NULL");
        len = strlen(clean);
        for (size_t i = 0; i < len; i++) {
            uint8_t c = (uint8_t)clean[i];
            FUZZ_CHECK(c != 0xC0 && c != 0xC1 && c < 0xF5, "invalid UTF-8 byte %#x at %zu", c, i);
        }
        cdb_free(clean);
    } else {
        FUZZ_CHECK(rc == CDB_NOMEM, "clean failed with %s: %s", cdb_status_str(rc), cdb_errmsg());
    }

    /* 2. encoding: the full count does not depend on the room given */
    rc = cdb_tok_encode(g_tok, text, n, ids, 80, &n_ids);
    FUZZ_CHECK(rc == CDB_OK || rc == CDB_NOMEM, "encode: %s: %s", cdb_status_str(rc), cdb_errmsg());
    if (rc != CDB_OK) return 0;
    FUZZ_CHECK(n_ids >= 0, "n_ids %d", n_ids);
    for (int i = 0; i < n_ids && i < 80; i++)
        FUZZ_CHECK(ids[i] >= 0 && ids[i] < vocab, "id %d = %d out of [0, %d)", i, ids[i], vocab);
    rc = cdb_tok_encode(g_tok, text, n, NULL, 0, &n_ids0);
    FUZZ_CHECK(rc == CDB_OK && n_ids0 == n_ids, "count with max_ids 0: %d vs %d", n_ids0, n_ids);

    /* 3. what the model sees */
    rc = cdb_tok_tokenize(g_tok, text, n, 77, ctx_ids, &eot_index, &truncated);
    FUZZ_CHECK(rc == CDB_OK, "tokenize: %s: %s", cdb_status_str(rc), cdb_errmsg());
    FUZZ_CHECK(ctx_ids[0] == sot, "first id %d is not sot", ctx_ids[0]);
    FUZZ_CHECK(eot_index >= 1 && eot_index <= 76, "eot_index %d", eot_index);
    FUZZ_CHECK(ctx_ids[eot_index] == eot, "ids[eot_index] = %d", ctx_ids[eot_index]);
    FUZZ_CHECK(truncated == (n_ids > 75), "truncated %d with %d ids", truncated, n_ids);
    for (int i = 1; i <= 75 && i <= n_ids; i++)
        FUZZ_CHECK(ctx_ids[i] == ids[i - 1], "tokenize/encode differ at %d: %d vs %d", i,
                   ctx_ids[i], ids[i - 1]);
    if (n_ids <= 75) {
        FUZZ_CHECK(ctx_ids[n_ids + 1] == eot, "no eot after %d ids", n_ids);
        for (int i = n_ids + 2; i < 77; i++)
            FUZZ_CHECK(ctx_ids[i] == 0, "padding %d = %d", i, ctx_ids[i]);
    } else {
        FUZZ_CHECK(ctx_ids[76] == eot, "truncated without eot at 76");
    }

    /* 4. the smallest context */
    rc = cdb_tok_tokenize(g_tok, text, n, 2, tiny, &eot_index, NULL);
    FUZZ_CHECK(rc == CDB_OK && tiny[0] == sot && tiny[1] == eot && eot_index == 1,
               "context 2: rc %d [%d %d] eot_index %d", rc, tiny[0], tiny[1], eot_index);
    return 0;
}
