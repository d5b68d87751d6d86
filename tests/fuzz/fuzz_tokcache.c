/*
** fuzz_tokcache.c: libFuzzer target for the tokenizer cache file (encoder/tokcache.c),
** read by cdb_tok_open_cached. At start-up a small CLIP BPE vocabulary (OpenAI layout,
** written here: a header line and a few dozen merges) is opened without the cache for
** the reference ids of fixed texts, then with it, which writes a valid cache file. Each
** input damages that file, then the vocabulary is opened through the cache:
**   first byte % 4 == 0: the file is replaced by the rest of the input;
**   == 1: the rest is patches of 5 bytes (u32 offset modulo the size, then the byte);
**   == 2: the file is cut at a u32 offset (modulo its size + 1), then patched as 1;
**   == 3: patched as 1, then resealed (its checksums recomputed, tok_int.h), so that
**         the damage reaches the bounds checks behind the checksums.
** The open must succeed whatever the file holds (a refused file is rebuilt, never an
** error). In modes 0-2 the ids must equal the references bit for bit (a damaged file
** is never used); in mode 3 a file that passes every check may hold other tables, so
** only the bounds are checked: every id in [0, vocab), no crash, no endless loop. The
** valid file is put back after each input.
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

static char g_vocab[700], g_dir[700], g_cache[4096];
static unsigned char *g_valid;
static size_t g_valid_n;
static int32_t g_ref[N_TEXTS][CTX];

static int ids_of(const cdb_tok *t, int32_t ids[N_TEXTS][CTX]) {
    for (int i = 0; i < N_TEXTS; i++)
        if (cdb_tok_tokenize(t, k_texts[i], strlen(k_texts[i]), CTX, ids[i], NULL, NULL))
            return -1;
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    static const char merges[] =
        "#version: 0.2 (a small vocabulary for fuzz_tokcache)\n"
        "h e\nl l\nhe ll\nhell o</w>\nt h\nth e</w>\nth e\nthe r\nther e</w>\no th\n"
        "oth er</w>\ne r\ner </w>\ni n\nin g</w>\na </w>\nÃ ©\n";
    const char *dir = fuzz_tmpdir("tokcache");
    cdb_tok *t = NULL;
    (void)argc, (void)argv;
    fuzz_quiet();
    snprintf(g_vocab, sizeof g_vocab, "%s/merges.txt", dir);
    snprintf(g_dir, sizeof g_dir, "%s/cache", dir);
    if (fuzz_write_file(g_vocab, merges, sizeof merges - 1) != 0) abort();
    if (cdb_tok_open(g_vocab, &t) != CDB_OK || ids_of(t, g_ref) != 0) abort();
    cdb_tok_free(t);
    if (cdb_tok_open_cached(g_vocab, CDB_TOK_PIPE_AUTO, g_dir, &t) != CDB_OK) abort();
    if (strcmp(cdb_tok_cache_status(t), "written")) abort();
    cdb_tok_free(t);
    {
        DIR *d = opendir(g_dir); /* the one file the open wrote there */
        struct dirent *e;
        while (d && (e = readdir(d)))
            if (strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".tok"))
                snprintf(g_cache, sizeof g_cache, "%s/%s", g_dir, e->d_name);
        if (d) closedir(d);
    }
    if (!g_cache[0] || !(g_valid = fuzz_read_file(g_cache, &g_valid_n))) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    unsigned char *f = NULL;
    size_t fn = g_valid_n;
    int32_t ids[N_TEXTS][CTX];
    cdb_tok *t = NULL;
    int mode;
    if (n == 0) return 0;
    mode = data[0] % 4;
    if (!(f = fuzz_damage(g_valid, g_valid_n, data + 1, n - 1, mode == 3 ? 1 : mode, &fn)))
        return 0;
    if (mode == 3) cdb_tok_cache_reseal(f, fn);
    if (fuzz_write_file(g_cache, f, fn) != 0) abort();
    free(f);
    FUZZ_CHECK(cdb_tok_open_cached(g_vocab, CDB_TOK_PIPE_AUTO, g_dir, &t) == CDB_OK,
               "open with a damaged cache failed: %s", cdb_errmsg());
    FUZZ_CHECK(ids_of(t, ids) == 0, "tokenize failed: %s", cdb_errmsg());
    if (mode != 3 || strncmp(cdb_tok_cache_status(t), "hit", 3)) {
        FUZZ_CHECK(!memcmp(ids, g_ref, sizeof ids), "ids differ from the built tokenizer's "
                   "(tokenizer cache: %s)", cdb_tok_cache_status(t));
    } else {
        for (int i = 0; i < N_TEXTS; i++)
            for (int k = 0; k < CTX; k++)
                FUZZ_CHECK(ids[i][k] >= 0 && ids[i][k] < cdb_tok_vocab_size(t), "id %d", ids[i][k]);
    }
    cdb_tok_free(t);
    if (fuzz_write_file(g_cache, g_valid, g_valid_n) != 0) abort();
    return 0;
}
