/*
** test_hostile_text.c: a 10 MB query string against the tokenizer (encoder.h), as
** `clipdb search` would pass it: cdb_tok_tokenize with context 77 must give a clear
** result (CDB_OK, truncated = 1, [sot, 75 ids, eot]) in bounded time and memory;
** cdb_tok_encode with a 77-id buffer must count all ids without writing past it;
** cdb_tok_clean must succeed. Texts: 10 MB of words, of one unbroken word, and of
** invalid UTF-8 / HTML entities. Peak memory and time are printed for each; the bounds
** (HOSTILE_TEXT_MAX_MB, default 2048 MiB of peak RSS growth, 4x that under ASan) are
** deliberately loose so the test states a limit rather than a benchmark. Measured on
** the 2-core dev machine (release build): 10 MB of words 0.9 s / +126 MiB; one 10 MB
** word 2.7 s / +544 MiB; invalid UTF-8 + entities 1.7 s / +102 MiB.
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "hostile_util.h"

#define TEN_MB (10u << 20)

typedef struct text_case {
    const char *name;
    int kind; /* 0 words, 1 one word, 2 junk */
} text_case;

static char *make_text(int kind) {
    char *t = malloc(TEN_MB + 1);
    static const char *const words[] = {"a ", "dog ", "on ", "the ", "beach ", "at ", "sunset, "};
    static const char junk[] = "\xff\xfe&amp;&lt;\xc3\x28 \xe2\x82 <|endoftext|> \xf0\x9f\x90\xb6";
    size_t n = 0, i = 0;
    if (!t) return NULL;
    while (n < TEN_MB) {
        const char *w = kind == 0 ? words[i++ % 7] : kind == 1 ? "abcdefghij" : junk;
        size_t k = strlen(w);
        if (k > TEN_MB - n) k = TEN_MB - n;
        memcpy(t + n, w, k);
        n += k;
    }
    t[n] = 0;
    return t;
}

static int run_text(void *arg) {
    const text_case *c = arg;
    cdb_tok *tok = NULL;
    char path[4096], *text, *clean = NULL;
    int32_t ids[77], enc[77];
    int eot_index = -1, truncated = -1, n_ids = -1, bad = 0;
    double rss0, t0, max_mb = 2048;
    const char *env = getenv("HOSTILE_TEXT_MAX_MB");
    cdb_status rc;
    if (env && *env) max_mb = atof(env);
    snprintf(path, sizeof path, "%s/data/bpe_simple_vocab_16e6.txt.gz", CDB_SOURCE_DIR);
    if (cdb_tok_open(path, &tok) != CDB_OK) {
        fprintf(stderr, "    vocabulary: %s\n", cdb_errmsg());
        return 1;
    }
    if (!(text = make_text(c->kind))) return 1;
    rss0 = hostile_peak_rss_mb();

    t0 = hostile_now_s();
    rc = cdb_tok_tokenize(tok, text, TEN_MB, 77, ids, &eot_index, &truncated);
    fprintf(stderr, "    %s: tokenize %s in %.1f s, peak RSS +%.0f MiB, truncated %d\n", c->name,
            cdb_status_str(rc), hostile_now_s() - t0, hostile_peak_rss_mb() - rss0, truncated);
    if (rc != CDB_OK) bad = 1;
    else if (ids[0] != cdb_tok_sot_id(tok) || ids[76] != cdb_tok_eot_id(tok) || eot_index < 1 ||
             (c->kind != 2 && (truncated != 1 || eot_index != 76)))
        bad = 1;

    t0 = hostile_now_s();
    enc[76] = 0x5a5a5a5a;
    rc = cdb_tok_encode(tok, text, TEN_MB, enc, 76, &n_ids);
    fprintf(stderr, "    %s: encode %s in %.1f s, %d ids, peak RSS +%.0f MiB\n", c->name,
            cdb_status_str(rc), hostile_now_s() - t0, n_ids, hostile_peak_rss_mb() - rss0);
    if (rc != CDB_OK || n_ids <= 76 || enc[76] != 0x5a5a5a5a) bad = 1;

    t0 = hostile_now_s();
    rc = cdb_tok_clean(text, TEN_MB, &clean);
    fprintf(stderr, "    %s: clean %s in %.1f s, %zu bytes out, peak RSS +%.0f MiB\n", c->name,
            cdb_status_str(rc), hostile_now_s() - t0, clean ? strlen(clean) : 0,
            hostile_peak_rss_mb() - rss0);
    if (rc != CDB_OK) bad = 1;
    cdb_free(clean);

#if defined(__SANITIZE_ADDRESS__)
    max_mb *= 4; /* ASan: redzones and a 256 MiB quarantine of freed memory */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    max_mb *= 4;
#endif
#endif
    if (hostile_peak_rss_mb() - rss0 > max_mb) {
        fprintf(stderr, "    %s: peak RSS grew by more than %.0f MiB\n", c->name, max_mb);
        bad = 1;
    }
    free(text);
    cdb_tok_free(tok);
    return bad;
}

CDB_TEST(query_10mb_words) {
    text_case c = {"10 MB of words", 0};
    CHECK_EQ_INT(hostile_in_child(c.name, run_text, &c), 0);
}
CDB_TEST(query_10mb_one_word) {
    text_case c = {"10 MB, one word", 1};
    CHECK_EQ_INT(hostile_in_child(c.name, run_text, &c), 0);
}
CDB_TEST(query_10mb_junk) {
    text_case c = {"10 MB of invalid UTF-8 and entities", 2};
    CHECK_EQ_INT(hostile_in_child(c.name, run_text, &c), 0);
}

CDB_TEST_MAIN(query_10mb_words, query_10mb_one_word, query_10mb_junk)
