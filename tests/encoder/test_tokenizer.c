/*
** test_tokenizer.c: the CLIP BPE tokenizer (encoder/tokenizer.c, text_clean.c).
**
** - tok_golden: every case of tests/golden/tokenizer/tokenizer_golden.json
**   (computed by OpenAI CLIP's own tokenizer with ftfy 6.3.1; see
**   tests/golden/README.md) must match: cleaned text, BPE pieces, raw ids, the 77
**   ids, eot index, truncation. The file is committed: a missing copy fails.
** - Edge cases: empty text, invalid UTF-8, 1 MB inputs (time and memory bounded),
**   special tokens inside text and their case-insensitivity, short contexts,
**   the Hugging Face vocab.json + merges.txt layout (a tiny vocabulary written
**   here), and errors for missing or corrupt vocabulary files.
** Expected ids not in the golden file are taken from it (e.g. "a</w>" = 320) or
** from CLIP's published layout (49406/49407, 49408 tokens), never from the code.
** The standard vocabulary is committed (data/), as is the golden (tests/golden/).
**
** Every test runs three times (test_tokenizer.cmake): with $CDB_TEST_TOK_CACHE unset,
** every tokenizer is built from its files (cdb_tok_open); "cold": through the tokenizer
** cache (cdb_tok_open_cached), each open in a new empty folder, so the tables are built
** and the cache file written; "warm": through the cache after an open that wrote the
** file, so the tables the tests use are the ones mapped from the file. The same golden
** ids must come out of all three.
*/
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cdb_test.h"
#include "encoder/encoder.h"

#define CTX 77

/* The standard vocabulary, committed in the repository (data/; see data/README.md). */
static const char *std_vocab_path(void) {
    static char buf[8192];
    FILE *f;
    snprintf(buf, sizeof buf, "%s/data/bpe_simple_vocab_16e6.txt.gz", CDB_SOURCE_DIR);
    if (!(f = fopen(buf, "rb"))) return NULL;
    fclose(f);
    return buf;
}

static const char *tmpdir(void);

/* A tokenizer per $CDB_TEST_TOK_CACHE (see the top); in the cached modes a successful
** open must say what the cache did ("written" cold, a hit warm), else CDB_ERROR. */
static cdb_status open_tok(const char *path, cdb_tok **out) {
    static int n_dirs;
    const char *mode = getenv("CDB_TEST_TOK_CACHE"), *want, *got;
    char dir[256];
    cdb_status rc;
    if (!mode || !*mode) return cdb_tok_open(path, out);
    if (!tmpdir()) return CDB_IO;
    want = !strcmp(mode, "warm") ? "hit" : "written";
    if (!strcmp(mode, "warm")) {
        snprintf(dir, sizeof dir, "%s/tokcache-warm", tmpdir());
        if ((rc = cdb_tok_open_cached(path, CDB_TOK_PIPE_AUTO, dir, out)) != CDB_OK) return rc;
        cdb_tok_free(*out);
        *out = NULL;
    } else {
        snprintf(dir, sizeof dir, "%s/tokcache-%d", tmpdir(), ++n_dirs);
    }
    if ((rc = cdb_tok_open_cached(path, CDB_TOK_PIPE_AUTO, dir, out)) != CDB_OK) return rc;
    got = cdb_tok_cache_status(*out);
    if (strncmp(got, want, strlen(want))) {
        fprintf(stderr, "    %s: tokenizer cache \"%s\", want \"%s\"\n", path, got, want);
        cdb_tok_free(*out);
        *out = NULL;
        return CDB_ERROR;
    }
    return CDB_OK;
}

static cdb_tok *g_tok;
static double g_load_ms, g_load_cpu_ms;

/* This thread's CPU time: the machine may be shared, wall time alone misleads. */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static cdb_tok *std_tok(void) {
    if (!g_tok) {
        const char *p = std_vocab_path();
        if (!p) return NULL;
        int64_t t0 = cdb_now_ns();
        double c0 = cpu_ms();
        if (open_tok(p, &g_tok) != CDB_OK) {
            fprintf(stderr, "    cdb_tok_open(%s): %s\n", p, cdb_errmsg());
            return NULL;
        }
        g_load_ms = (double)(cdb_now_ns() - t0) / 1e6;
        g_load_cpu_ms = cpu_ms() - c0;
    }
    return g_tok;
}

#define NEED_TOK(t)                                                                        \
    cdb_tok *t = std_tok();                                                                \
    CHECK_MSG(t, "the standard vocabulary is committed as data/bpe_simple_vocab_16e6.txt.gz")

static size_t unhex(const char *hex, char *out) {
    size_t n = strlen(hex) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    return n;
}

/* ---- golden ------------------------------------------------------------------ */

CDB_TEST(tok_golden) {
    char path[8192];
    snprintf(path, sizeof path, "%s/tests/golden/tokenizer/tokenizer_golden.json",
             CDB_SOURCE_DIR);
    NEED_TOK(tok);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    CHECK_MSG(root, "%s: %s", path, jerr.text);
    CHECK_EQ_INT(json_integer_value(json_object_get(root, "sot_id")), cdb_tok_sot_id(tok));
    CHECK_EQ_INT(json_integer_value(json_object_get(root, "eot_id")), cdb_tok_eot_id(tok));
    CHECK_EQ_INT(json_integer_value(json_object_get(root, "vocab_size")), cdb_tok_vocab_size(tok));
    json_t *cases = json_object_get(root, "cases");
    CHECK(json_is_array(cases) && json_array_size(cases) > 0);
    size_t i;
    json_t *c;
    int n_fail = 0;
    json_array_foreach(cases, i, c) {
        const char *id = json_string_value(json_object_get(c, "id"));
        const char *hex = json_string_value(json_object_get(c, "text_utf8_hex"));
        const char *want_clean = json_string_value(json_object_get(c, "cleaned"));
        json_t *pieces = json_object_get(c, "pieces"), *raw = json_object_get(c, "ids_raw");
        json_t *ids77 = json_object_get(c, "ids_77");
        char *text = malloc(strlen(hex) / 2 + 1), *clean = NULL;
        size_t len = unhex(hex, text);
        int fail = 0;

        CHECK_OK(cdb_tok_clean(text, len, &clean));
        if (strcmp(clean, want_clean)) {
            fprintf(stderr, "    %s: cleaned \"%s\", want \"%s\"\n", id, clean, want_clean);
            fail = 1;
        }
        cdb_free(clean);

        int32_t got[4096];
        int n = 0;
        CHECK_OK(cdb_tok_encode(tok, text, len, got, 4096, &n));
        if (n != (int)json_array_size(raw)) {
            fprintf(stderr, "    %s: %d ids, want %zu\n", id, n, json_array_size(raw));
            fail = 1;
        }
        for (int k = 0; !fail && k < n; k++) {
            int want = (int)json_integer_value(json_array_get(raw, (size_t)k));
            const char *ws = json_string_value(json_array_get(pieces, (size_t)k));
            const char *gs = cdb_tok_token_str(tok, got[k]);
            if (got[k] != want || !gs || strcmp(gs, ws)) {
                fprintf(stderr, "    %s: piece %d: got %d \"%s\", want %d \"%s\"\n", id, k, got[k],
                        gs ? gs : "(null)", want, ws);
                fail = 1;
            }
        }

        int32_t t77[CTX];
        int eot = -1, trunc = -1;
        CHECK_OK(cdb_tok_tokenize(tok, text, len, CTX, t77, &eot, &trunc));
        for (int k = 0; !fail && k < CTX; k++)
            if (t77[k] != (int)json_integer_value(json_array_get(ids77, (size_t)k))) {
                fprintf(stderr, "    %s: ids_77[%d] = %d, want %d\n", id, k, t77[k],
                        (int)json_integer_value(json_array_get(ids77, (size_t)k)));
                fail = 1;
            }
        if (eot != (int)json_integer_value(json_object_get(c, "eot_index")) ||
            trunc != json_is_true(json_object_get(c, "truncated"))) {
            fprintf(stderr, "    %s: eot_index %d truncated %d\n", id, eot, trunc);
            fail = 1;
        }
        free(text);
        n_fail += fail;
    }
    printf("    golden: %zu cases, %d failed\n", json_array_size(cases), n_fail);
    json_decref(root);
    CHECK_EQ_INT(n_fail, 0);
}

/* ---- the standard vocabulary's layout ------------------------------------------- */

CDB_TEST(tok_vocab_layout) {
    NEED_TOK(tok);
    CHECK_EQ_INT(cdb_tok_vocab_size(tok), 49408);
    CHECK_EQ_INT(cdb_tok_sot_id(tok), 49406);
    CHECK_EQ_INT(cdb_tok_eot_id(tok), 49407);
    CHECK_EQ_STR(cdb_tok_token_str(tok, 0), "!");       // bytes_to_unicode order
    CHECK_EQ_STR(cdb_tok_token_str(tok, 188), "\xc4\x80"); // byte 0x00 -> U+0100
    CHECK_EQ_STR(cdb_tok_token_str(tok, 256), "!</w>");
    CHECK_EQ_STR(cdb_tok_token_str(tok, 49406), "<|startoftext|>");
    CHECK_EQ_STR(cdb_tok_token_str(tok, 49407), "<|endoftext|>");
    CHECK(cdb_tok_token_str(tok, -1) == NULL);
    CHECK(cdb_tok_token_str(tok, 49408) == NULL);
    printf("    vocab load: %.1f ms wall, %.1f ms CPU\n", g_load_ms, g_load_cpu_ms);
}

/* ---- edge cases --------------------------------------------------------------- */

CDB_TEST(tok_empty) {
    NEED_TOK(tok);
    int32_t ids[CTX];
    int eot = -1, trunc = -1, n = -1;
    CHECK_OK(cdb_tok_tokenize(tok, "", 0, CTX, ids, &eot, &trunc));
    CHECK_EQ_INT(ids[0], 49406);
    CHECK_EQ_INT(ids[1], 49407);
    for (int k = 2; k < CTX; k++) CHECK_EQ_INT(ids[k], 0);
    CHECK_EQ_INT(eot, 1);
    CHECK_EQ_INT(trunc, 0);
    CHECK_OK(cdb_tok_tokenize(tok, NULL, 0, CTX, ids, NULL, NULL)); // NULL with len 0 is ""
    CHECK_EQ_INT(ids[1], 49407);
    CHECK_OK(cdb_tok_encode(tok, " \t\r\n ", 5, NULL, 0, &n));
    CHECK_EQ_INT(n, 0);
    char *clean = NULL;
    CHECK_OK(cdb_tok_clean("", 0, &clean));
    CHECK_EQ_STR(clean, "");
    cdb_free(clean);
}

static int valid_utf8(const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3
              : (*p & 0xF8) == 0xF0 ? 4 : 0;
        if (!n) return 0;
        for (int k = 1; k < n; k++)
            if ((p[k] & 0xC0) != 0x80) return 0;
        p += n;
    }
    return 1;
}

CDB_TEST(tok_invalid_utf8) {
    NEED_TOK(tok);
    static const char *bad[] = {"\xff\xfe", "a\xc3(b", "\xe2\x82", "\xed\xa0\x80 surrogate",
                                "\xf4\x90\x80\x80 too big", "\xc0\x80 overlong", "tail \xf0\x9f\x90",
                                "\x80\x80\x80\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *clean = NULL;
        int32_t ids[CTX];
        int eot = -1;
        CHECK_OK(cdb_tok_clean(bad[i], strlen(bad[i]), &clean));
        CHECK_MSG(valid_utf8(clean), "case %zu: cleaned text is not UTF-8", i);
        cdb_free(clean);
        CHECK_OK(cdb_tok_tokenize(tok, bad[i], strlen(bad[i]), CTX, ids, &eot, NULL));
        CHECK_EQ_INT(ids[0], 49406);
        CHECK_EQ_INT(ids[eot], 49407);
        for (int k = 1; k < eot; k++) CHECK(ids[k] >= 0 && ids[k] < 49406);
    }
    // Embedded NUL bytes count (len is authoritative) and are dropped like ftfy does.
    char *clean = NULL;
    CHECK_OK(cdb_tok_clean("a\0b", 3, &clean));
    CHECK_EQ_STR(clean, "ab");
    cdb_free(clean);
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

CDB_TEST(tok_1mb) {
    NEED_TOK(tok);
    const size_t n = 1 << 20;
    char *big = malloc(n + 1);
    static const char *words[] = {"a photo of ", "Straße ", "don’t ", "&amp; ", "schÃ¶n ",
                                  "\xe4\xb8\x80\xe5\x8f\xaa ", "1234 ", "\n"};
    size_t pos = 0, w = 0;
    while (pos < n) {
        const char *s = words[w++ % (sizeof words / sizeof *words)];
        size_t l = strlen(s);
        if (pos + l > n) l = n - pos;
        memcpy(big + pos, s, l);
        pos += l;
    }
    big[n] = 0;
    long rss0 = peak_rss_kb();
    int64_t t0 = cdb_now_ns();
    int32_t ids[CTX];
    int eot = -1, trunc = -1, count = 0;
    CHECK_OK(cdb_tok_tokenize(tok, big, n, CTX, ids, &eot, &trunc));
    double ms_mixed = (double)(cdb_now_ns() - t0) / 1e6;
    CHECK_EQ_INT(trunc, 1);
    CHECK_EQ_INT(eot, CTX - 1);
    CHECK_EQ_INT(ids[CTX - 1], 49407);
    CHECK_EQ_INT(ids[1], 320);   // "a</w>"
    CHECK_EQ_INT(ids[2], 1125);  // "photo</w>"
    t0 = cdb_now_ns();
    CHECK_OK(cdb_tok_encode(tok, big, n, NULL, 0, &count));
    double ms_full = (double)(cdb_now_ns() - t0) / 1e6;
    CHECK(count > 100000);

    // One 1 MB word: BPE must not be quadratic.
    memset(big, 'a', n);
    t0 = cdb_now_ns();
    CHECK_OK(cdb_tok_tokenize(tok, big, n, CTX, ids, &eot, &trunc));
    double ms_word = (double)(cdb_now_ns() - t0) / 1e6;
    CHECK_EQ_INT(trunc, 1);
    // 1 MB of mojibake-looking Latin-1 ("Ã" + "©" pairs) through ftfy's repair loop.
    for (size_t i = 0; i + 4 <= n; i += 4) memcpy(big + i, "\xc3\x83\xc2\xa9", 4);
    t0 = cdb_now_ns();
    CHECK_OK(cdb_tok_tokenize(tok, big, n, CTX, ids, &eot, &trunc));
    double ms_moji = (double)(cdb_now_ns() - t0) / 1e6;
    long rss1 = peak_rss_kb();
    printf("    1 MB: mixed text %.0f ms (%d ids in full: %.0f ms), one word %.0f ms, "
           "mojibake %.0f ms; peak RSS +%ld MB\n",
           ms_mixed, count, ms_full, ms_word, ms_moji, (rss1 - rss0) / 1024);
    free(big);
    CHECK(ms_mixed < 20000 && ms_word < 20000 && ms_moji < 20000);
#if defined(__SANITIZE_ADDRESS__)
    (void)rss0; // ASan's shadow memory and quarantine make RSS meaningless
#else
    CHECK((rss1 - rss0) / 1024 < 512);
#endif
}

CDB_TEST(tok_special_tokens) {
    NEED_TOK(tok);
    int32_t ids[16];
    int n = 0;
    // "a</w>" = 320 and "dog</w>" = 1929 come from the golden file's plain cases.
    static const char *spell[] = {"<|endoftext|>a dog", "<|ENDOFTEXT|>a dog", "<|EndOfText|>a dog"};
    for (int k = 0; k < 3; k++) {
        CHECK_OK(cdb_tok_encode(tok, spell[k], strlen(spell[k]), ids, 16, &n));
        CHECK_EQ_INT(n, 3);
        CHECK_EQ_INT(ids[0], 49407);
        CHECK_EQ_INT(ids[1], 320);
        CHECK_EQ_INT(ids[2], 1929);
    }
    const char *mid = "a dog<|startoftext|>a dog";
    CHECK_OK(cdb_tok_encode(tok, mid, strlen(mid), ids, 16, &n));
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(ids[2], 49406);
    // A literal end token inside the text: CLIP pools at argmax(ids), the first 49407.
    int32_t t77[CTX];
    int eot = -1;
    const char *lit = "a dog <|endoftext|> a dog";
    CHECK_OK(cdb_tok_tokenize(tok, lit, strlen(lit), CTX, t77, &eot, NULL));
    CHECK_EQ_INT(eot, 3);
    CHECK_EQ_INT(t77[6], 49407);
    CHECK_EQ_INT(t77[7], 0);
}

CDB_TEST(tok_short_context) {
    NEED_TOK(tok);
    int32_t ids[8];
    int eot = -1, trunc = -1, n = 0;
    // plain_cat in the golden file: 320 1125 539 320 2368
    CHECK_OK(cdb_tok_tokenize(tok, "a photo of a cat", 16, 5, ids, &eot, &trunc));
    CHECK_EQ_INT(ids[0], 49406);
    CHECK_EQ_INT(ids[1], 320);
    CHECK_EQ_INT(ids[2], 1125);
    CHECK_EQ_INT(ids[3], 539);
    CHECK_EQ_INT(ids[4], 49407);
    CHECK_EQ_INT(eot, 4);
    CHECK_EQ_INT(trunc, 1);
    CHECK_OK(cdb_tok_tokenize(tok, "a photo of a cat", 16, 7, ids, &eot, &trunc));
    CHECK_EQ_INT(trunc, 0);
    CHECK_EQ_INT(ids[6], 49407);
    CHECK_RC(cdb_tok_tokenize(tok, "x", 1, 1, ids, NULL, NULL), CDB_INVALID);
    // cdb_tok_encode: *n_ids is the full count even when fewer ids fit.
    CHECK_OK(cdb_tok_encode(tok, "a photo of a cat", 16, ids, 2, &n));
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(ids[1], 1125);
}

CDB_TEST(tok_lower) {
    // Python: "ΟΔΟΣ ΟΔΟΣ. Σ AΣ'B".lower() == "οδος οδος. σ aσ'b" (final sigma rules).
    char *clean = NULL;
    const char *in = "\xce\x9f\xce\x94\xce\x9f\xce\xa3 \xce\x9f\xce\x94\xce\x9f\xce\xa3. "
                     "\xce\xa3 A\xce\xa3'B";
    CHECK_OK(cdb_tok_clean(in, strlen(in), &clean));
    CHECK_EQ_STR(clean, "\xce\xbf\xce\xb4\xce\xbf\xcf\x82 \xce\xbf\xce\xb4\xce\xbf\xcf\x82. "
                        "\xcf\x83 a\xcf\x83'b");
    cdb_free(clean);
}

/* ---- Hugging Face layout --------------------------------------------------------- */

static char g_tmp[64];

static const char *tmpdir(void) {
    if (!g_tmp[0]) {
        strcpy(g_tmp, "/tmp/cdb_tok_test_XXXXXX");
        if (!mkdtemp(g_tmp)) return NULL;
    }
    return g_tmp;
}

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* The test's own bytes_to_unicode (GPT-2's table, as published). */
static void byte_sym(int b, char *out) {
    int cp = b, extra = 0;
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (int x = 0; x < b; x++)
            if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) extra++;
        cp = 256 + extra;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* A tiny vocabulary with the special tokens first, so their ids (0, 1) can only
** come from vocab.json. Returns the id of `name` in it. */
static void write_tiny_vocab(const char *dir, int with_merged_token) {
    json_t *v = json_object();
    char sym[16];
    int id = 0;
    json_object_set_new(v, "<|startoftext|>", json_integer(id++));
    json_object_set_new(v, "<|endoftext|>", json_integer(id++));
    for (int b = 0; b < 256; b++) {
        byte_sym(b, sym);
        json_object_set_new(v, sym, json_integer(id++));
        strcat(sym, "</w>");
        json_object_set_new(v, sym, json_integer(id++));
    }
    json_object_set_new(v, "he", json_integer(id++));     // 514
    json_object_set_new(v, "ll", json_integer(id++));     // 515
    json_object_set_new(v, "hell", json_integer(id++));   // 516
    if (with_merged_token) json_object_set_new(v, "hello</w>", json_integer(id++)); // 517
    char *s = json_dumps(v, 0);
    write_file(dir, "vocab.json", s, strlen(s));
    free(s);
    json_decref(v);
    const char *merges = "#version: 0.2\nh e\nl l\nhe ll\nhell o</w>\n";
    write_file(dir, "merges.txt", merges, strlen(merges));
}

CDB_TEST(tok_hf_layout) {
    const char *dir = tmpdir();
    char p[256];
    cdb_tok *t = NULL;
    CHECK(dir);
    write_tiny_vocab(dir, 1);
    CHECK_OK(open_tok(dir, &t));
    CHECK_EQ_INT(cdb_tok_vocab_size(t), 518);
    CHECK_EQ_INT(cdb_tok_sot_id(t), 0);
    CHECK_EQ_INT(cdb_tok_eot_id(t), 1);
    CHECK_EQ_STR(cdb_tok_token_str(t, 517), "hello</w>");
    int32_t ids[16];
    int n = 0;
    // "hello" -> h e l l o</w> -> he l l o</w> -> he ll o</w> -> hell o</w> -> hello</w>
    // "hell"  -> h e l l</w>   -> he l l</w>   (no "l l</w>" merge)
    CHECK_OK(cdb_tok_encode(t, "Hello hell", 10, ids, 16, &n));
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(ids[0], 517);
    CHECK_EQ_INT(ids[1], 514);
    CHECK_EQ_INT(ids[2], 2 + 2 * 'l');     // "l": byte b is id 2 + 2b here
    CHECK_EQ_INT(ids[3], 2 + 2 * 'l' + 1); // "l</w>"
    int32_t t5[5];
    int eot = -1;
    CHECK_OK(cdb_tok_tokenize(t, "hello", 5, 5, t5, &eot, NULL));
    CHECK_EQ_INT(t5[0], 0);
    CHECK_EQ_INT(t5[1], 517);
    CHECK_EQ_INT(t5[2], 1);
    CHECK_EQ_INT(eot, 2);
    cdb_tok_free(t);
    t = NULL;
    snprintf(p, sizeof p, "%s/vocab.json", dir); // the vocab.json path itself also works
    CHECK_OK(open_tok(p, &t));
    CHECK_EQ_INT(cdb_tok_eot_id(t), 1);
    cdb_tok_free(t);
}

/* ---- errors --------------------------------------------------------------------- */

CDB_TEST(tok_errors) {
    const char *dir = tmpdir();
    char p[256];
    cdb_tok *t = NULL;
    CHECK(dir);
    CHECK_RC(open_tok("/nonexistent/bpe.txt.gz", &t), CDB_NOTFOUND);
    CHECK(t == NULL);
    CHECK_RC(open_tok("", &t), CDB_INVALID);
    CHECK_RC(open_tok(NULL, &t), CDB_INVALID);
    // gzip magic followed by garbage
    write_file(dir, "bad.gz", "\x1f\x8b\x08\x00garbage-garbage-garbage", 27);
    snprintf(p, sizeof p, "%s/bad.gz", dir);
    CHECK_RC(open_tok(p, &t), CDB_CORRUPT);
    // plain text that is not a merges file
    write_file(dir, "notes.txt", "header\nthis line has three parts\n", 33);
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    CHECK_RC(open_tok(p, &t), CDB_CORRUPT);
    write_file(dir, "empty.txt", "", 0);
    snprintf(p, sizeof p, "%s/empty.txt", dir);
    CHECK_RC(open_tok(p, &t), CDB_CORRUPT);
    // a truncated copy of the real vocabulary
    const char *std = std_vocab_path();
    if (std) {
        FILE *f = fopen(std, "rb");
        char *buf = malloc(100000);
        size_t got = fread(buf, 1, 100000, f); // ~7% of the file: far fewer lines than needed
        fclose(f);
        write_file(dir, "trunc.gz", buf, got);
        free(buf);
        snprintf(p, sizeof p, "%s/trunc.gz", dir);
        CHECK_RC(open_tok(p, &t), CDB_CORRUPT);
    }
    // HF layout: bad JSON, missing merges.txt, merge result absent from the vocab
    char sub[128];
    snprintf(sub, sizeof sub, "%s/hf_bad", dir);
    mkdir(sub, 0700);
    write_file(sub, "vocab.json", "{\"a\": 0,", 8);
    write_file(sub, "merges.txt", "#version: 0.2\n", 14);
    CHECK_RC(open_tok(sub, &t), CDB_CORRUPT);
    snprintf(sub, sizeof sub, "%s/hf_nomerges", dir);
    mkdir(sub, 0700);
    write_tiny_vocab(sub, 1);
    snprintf(p, sizeof p, "%s/merges.txt", sub);
    unlink(p);
    CHECK_RC(open_tok(sub, &t), CDB_NOTFOUND);
    snprintf(sub, sizeof sub, "%s/hf_incomplete", dir);
    mkdir(sub, 0700);
    write_tiny_vocab(sub, 0); // "hell o</w>" merges into a token vocab.json lacks
    CHECK_RC(open_tok(sub, &t), CDB_CORRUPT);
    CHECK(strstr(cdb_errmsg(), "hello</w>") != NULL);
    snprintf(sub, sizeof sub, "%s/empty_dir", dir);
    mkdir(sub, 0700);
    CHECK_RC(open_tok(sub, &t), CDB_NOTFOUND);
    CHECK(t == NULL);
    cdb_tok_free(NULL); // accepted
}

/* ---- robustness ------------------------------------------------------------------ */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { return (uint32_t)(cdb_test_xorshift(&g_rng) >> 16); }

/* Random bytes and random mixes of the pieces the cleaner reacts to (mojibake
** letters, C1 controls, entities, ANSI escapes, combining marks, sigma, special
** tokens): every call must succeed with well-formed output. Run it under
** -DCLIPDB_SANITIZE=ON to catch memory errors. */
CDB_TEST(tok_fuzz) {
    NEED_TOK(tok);
    static const char *pieces[] = {
        "\xc3", "\xc3\x83", "\xc2\xa0", "\xc3\xa2\xe2\x82\xac", "\xe2\x80\x9c", "\xc2\x85",
        "\xc2\x9d", "&amp", "&#x", "&#1234567890123;", "&notit;", "&", ";", "<", "\x1b[3",
        "m", "\xcc\x81", "\xce\xa3", "\xc4\xb0", "<|endoftext|>", "<|startoftext", "'s", "'",
        " ", "\n", "\r", "\xef\xbc\xa1", "\xef\xac\x81", "\xd0\xb2\xd0\x82", "\xef\xbf\xbd",
        "\x1a", "a", "Z", "7", "\xd9\xa3", "\xf0\x9f\x90\xb6", "\xe4\xb8\x80", "\xed\xa0\x80",
        "\xc0\x80", "\xff"};
    char buf[512];
    int32_t ids[CTX];
    for (int it = 0; it < 3000; it++) {
        size_t n = 0, want = rnd() % 200;
        if (it % 3 == 0) {
            for (; n < want; n++) buf[n] = (char)(rnd() & 0xFF);
        } else {
            while (n < want) {
                const char *p = pieces[rnd() % (sizeof pieces / sizeof *pieces)];
                size_t l = strlen(p);
                if (n + l > sizeof buf) break;
                memcpy(buf + n, p, l);
                n += l;
            }
        }
        char *clean = NULL;
        int eot = -1, trunc = -1;
        CHECK_OK(cdb_tok_clean(buf, n, &clean));
        CHECK_MSG(valid_utf8(clean), "iteration %d: cleaned text is not UTF-8", it);
        cdb_free(clean);
        CHECK_OK(cdb_tok_tokenize(tok, buf, n, CTX, ids, &eot, &trunc));
        CHECK(eot >= 1 && eot < CTX && ids[eot] == 49407 && ids[0] == 49406);
        for (int k = 1; k < CTX; k++) CHECK(ids[k] >= 0 && ids[k] < 49408);
    }
}

/* ---- threads and speed ------------------------------------------------------------ */

static void *thread_fn(void *arg) {
    int32_t *out = arg;
    const char *q = "A PHOTO of a dog on a beach, Ã©tÃ© 2024!";
    for (int r = 0; r < 200; r++)
        if (cdb_tok_tokenize(g_tok, q, strlen(q), CTX, out, NULL, NULL) != CDB_OK) out[0] = -1;
    return NULL;
}

CDB_TEST(tok_threads) {
    NEED_TOK(tok);
    int32_t a[CTX], b[CTX], ref[CTX];
    pthread_t ta, tb;
    thread_fn(ref);
    pthread_create(&ta, NULL, thread_fn, a);
    pthread_create(&tb, NULL, thread_fn, b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(!memcmp(a, ref, sizeof ref));
    CHECK(!memcmp(b, ref, sizeof ref));
}

CDB_TEST(tok_speed) {
    NEED_TOK(tok);
    const char *q = "a photo of a dog on a beach";
    int32_t ids[CTX];
    const int reps = 20000;
    double c0 = cpu_ms();
    int64_t t0 = cdb_now_ns();
    for (int r = 0; r < reps; r++) CHECK_OK(cdb_tok_tokenize(tok, q, strlen(q), CTX, ids, NULL, NULL));
    double us = (double)(cdb_now_ns() - t0) / 1e3 / reps, us_cpu = (cpu_ms() - c0) * 1e3 / reps;
    const char *q2 = "Ein Foto von einem Hund am Strand, schÃ¶n &amp; sonnig — 2024";
    c0 = cpu_ms();
    t0 = cdb_now_ns();
    for (int r = 0; r < reps / 4; r++)
        CHECK_OK(cdb_tok_tokenize(tok, q2, strlen(q2), CTX, ids, NULL, NULL));
    double us2 = (double)(cdb_now_ns() - t0) / 1e3 / (reps / 4);
    double us2_cpu = (cpu_ms() - c0) * 1e3 / (reps / 4);
    // A second load, now that the file is in the page cache.
    cdb_tok *t2 = NULL;
    c0 = cpu_ms();
    t0 = cdb_now_ns();
    CHECK_OK(open_tok(std_vocab_path(), &t2));
    double load_ms = (double)(cdb_now_ns() - t0) / 1e6, load_cpu = cpu_ms() - c0;
    cdb_tok_free(t2);
    printf("    vocab load %.1f ms wall / %.1f ms CPU (first load %.1f / %.1f)\n"
           "    tokenize, short query: %.2f us wall / %.2f us CPU; with mojibake + entity: "
           "%.2f / %.2f us\n", load_ms, load_cpu, g_load_ms, g_load_cpu_ms, us, us_cpu, us2,
           us2_cpu);
    CHECK(us < 1000);     // generous bounds: catch pathologies, not noise
    CHECK(load_ms < 2000);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void rm_tmp(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

CDB_TEST_MAIN_TMP(g_tmp, rm_tmp, tok_golden, tok_vocab_layout, tok_empty, tok_invalid_utf8, tok_1mb,
              tok_special_tokens, tok_short_context, tok_lower, tok_hf_layout, tok_errors,
              tok_fuzz, tok_threads, tok_speed)
