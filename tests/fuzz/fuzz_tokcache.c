/*
** fuzz_tokcache.c: libFuzzer target for the tokenizer cache file (encoder/tokcache.c),
** read by cdb_tok_open_cached, for both kinds of tokenizer it keeps. At start-up two
** vocabularies are opened without the cache for the reference ids of fixed texts, then
** with it, which writes a valid cache file for each: a small CLIP BPE vocabulary (OpenAI
** layout, written here: a header line and a few dozen merges) and a tokenizer.json (the
** BPE fixture with byte fallback, added tokens and a normalizer, tests/golden/
** hf_tokenizer/bytefallback.json). Bit 2 of the first byte picks the kind; each input
** damages that kind's file, then its vocabulary is opened through the cache:
**   first byte % 4 == 0: the file is replaced by the rest of the input;
**   == 1: the rest is patches of 5 bytes (u32 offset modulo the size, then the byte);
**   == 2: the file is cut at a u32 offset (modulo its size + 1), then patched as 1;
**   == 3: patched as 1, then resealed (its checksums recomputed, tok_int.h), so that
**         the damage reaches the bounds checks behind the checksums.
** The open must succeed whatever the file holds (a refused file is rebuilt, never an
** error). In modes 0-2 the ids must equal the references bit for bit (a damaged file
** is never used); in mode 3 a file that passes every check may hold other tables, so
** only the bounds are checked: every id in [0, vocab), no crash, no endless loop (a
** tokenizer.json's may also refuse a text whose token it no longer finds, CDB_CORRUPT,
** as a file without an unknown token does). The valid file is put back after each
** input.
*/
#include <dirent.h>
#include <stdint.h>
#include <string.h>

#include "encoder/encoder.h"
#include "encoder/tok_int.h"
#include "fuzz_util.h"

static const char *const k_texts[] = {"hello there", "the other thing", "a b c d e f",
                                      "Théâtre 東京 <|endoftext|> x", ""};
#define N_TEXTS (int)(sizeof k_texts / sizeof *k_texts)
#define CTX 16

#define N_KINDS 2 /* CLIP BPE, tokenizer.json */
static char g_vocab[N_KINDS][700], g_dir[N_KINDS][700], g_cache[N_KINDS][4096];
static unsigned char *g_valid[N_KINDS];
static size_t g_valid_n[N_KINDS];
static int32_t g_ref[N_KINDS][N_TEXTS][CTX];

static cdb_status ids_of(const cdb_tok *t, int32_t ids[N_TEXTS][CTX]) {
    cdb_status rc;
    for (int i = 0; i < N_TEXTS; i++)
        if ((rc = cdb_tok_tokenize(t, k_texts[i], strlen(k_texts[i]), CTX, ids[i], NULL, NULL)))
            return rc;
    return CDB_OK;
}

/* The reference ids of kind k's vocabulary, and its valid cache file. */
static void setup(int k) {
    cdb_tok *t = NULL;
    if (cdb_tok_open(g_vocab[k], &t) != CDB_OK || ids_of(t, g_ref[k]) != 0) abort();
    cdb_tok_free(t);
    if (cdb_tok_open_cached(g_vocab[k], CDB_TOK_PIPE_AUTO, g_dir[k], &t) != CDB_OK) abort();
    if (strcmp(cdb_tok_cache_status(t), "written")) abort();
    cdb_tok_free(t);
    DIR *d = opendir(g_dir[k]); /* the one file the open wrote there */
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".tok"))
            snprintf(g_cache[k], sizeof g_cache[k], "%s/%s", g_dir[k], e->d_name);
    if (d) closedir(d);
    if (!g_cache[k][0] || !(g_valid[k] = fuzz_read_file(g_cache[k], &g_valid_n[k]))) abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const char merges[] =
        "#version: 0.2 (a small vocabulary for fuzz_tokcache)\n"
        "h e\nl l\nhe ll\nhell o</w>\nt h\nth e</w>\nth e\nthe r\nther e</w>\no th\n"
        "oth er</w>\ne r\ner </w>\ni n\nin g</w>\na </w>\nÃ ©\n";
    const char *dir = fuzz_tmpdir("tokcache");
    char src[1024];
    size_t n = 0;
    void *json;
    (void)argc, (void)argv;
    fuzz_quiet();
    snprintf(g_vocab[0], sizeof g_vocab[0], "%s/merges.txt", dir);
    snprintf(g_vocab[1], sizeof g_vocab[1], "%s/tokenizer.json", dir);
    for (int k = 0; k < N_KINDS; k++) snprintf(g_dir[k], sizeof g_dir[k], "%s/cache%d", dir, k);
    snprintf(src, sizeof src, "%s/tests/golden/hf_tokenizer/bytefallback.json", CDB_SOURCE_DIR);
    if (fuzz_write_file(g_vocab[0], merges, sizeof merges - 1) != 0 ||
        !(json = fuzz_read_file(src, &n)) || fuzz_write_file(g_vocab[1], json, n) != 0)
        abort();
    free(json);
    for (int k = 0; k < N_KINDS; k++) setup(k);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    unsigned char *f = NULL;
    int32_t ids[N_TEXTS][CTX];
    cdb_tok *t = NULL;
    int mode, k;
    cdb_status rc;
    if (n == 0) return 0;
    mode = data[0] % 4;
    k = (data[0] >> 2) & 1;
    size_t fn = g_valid_n[k];
    if (!(f = fuzz_damage(g_valid[k], g_valid_n[k], data + 1, n - 1, mode == 3 ? 1 : mode, &fn)))
        return 0;
    if (mode == 3) cdb_tok_cache_reseal(f, fn);
    if (fuzz_write_file(g_cache[k], f, fn) != 0) abort();
    free(f);
    FUZZ_CHECK(cdb_tok_open_cached(g_vocab[k], CDB_TOK_PIPE_AUTO, g_dir[k], &t) == CDB_OK,
               "open with a damaged cache failed: %s", cdb_errmsg());
    rc = ids_of(t, ids);
    if (mode != 3 || strncmp(cdb_tok_cache_status(t), "hit", 3)) {
        FUZZ_CHECK(rc == 0, "tokenize failed: %s", cdb_errmsg());
        FUZZ_CHECK(!memcmp(ids, g_ref[k], sizeof ids), "ids differ from the built tokenizer's "
                   "(tokenizer cache: %s)", cdb_tok_cache_status(t));
    } else if (rc == 0) {
        for (int i = 0; i < N_TEXTS; i++)
            for (int j = 0; j < CTX; j++)
                FUZZ_CHECK(ids[i][j] >= 0 && ids[i][j] < cdb_tok_vocab_size(t), "id %d", ids[i][j]);
    } else {
        FUZZ_CHECK(k == 1 && rc == CDB_CORRUPT, "tokenize failed: %s",
                   cdb_errmsg());
    }
    cdb_tok_free(t);
    if (fuzz_write_file(g_cache[k], g_valid[k], g_valid_n[k]) != 0) abort();
    return 0;
}
