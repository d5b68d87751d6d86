/*
** fuzz_packcache.c: libFuzzer target for the packed matrix cache file
** (encoder/packcache.c), read by cdb_model_open with params.pack_cache. At start-up a
** fixed tiny model (tests/fuzz/data/clip_w64_f16.safetensors, both towers) is opened
** with the cache off for the reference embedding of a fixed text and image, then with
** it on, which writes a valid cache file. Each input damages that file, then the model
** is opened with the cache on:
**   first byte % 3 == 0: the file is replaced by the rest of the input;
**   == 1: the rest is patches of 5 bytes (u32 offset modulo the size, then the byte);
**   == 2: the file is cut at a u32 offset (modulo its size + 1), then patched as 1.
** The open must succeed whatever the file holds (a refused cache is rebuilt, never an
** error) and both embeddings must equal the references bit for bit: a damaged file is
** never used. The valid file is put back after each input.
*/
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_model_common.h"

static char g_model[700], g_cache_dir[700], g_cache[4096];
static unsigned char *g_valid;
static size_t g_valid_n;
static float g_ref_t[1024], g_ref_i[1024], *g_px;
static int g_E, g_ctx;
static int32_t g_ids[128];

/* Opens the model with mode, encodes the text and the image into t and i. */
static cdb_model *open_encode(int mode, float *t, float *i) {
    cdb_model_params mp = fuzz_model_params();
    cdb_model *m = NULL;
    mp.pack_cache = mode;
    mp.pack_cache_dir = g_cache_dir;
    if (cdb_model_open(g_model, &mp, &m) != CDB_OK) return NULL;
    FUZZ_CHECK(cdb_encode_tokens(m, g_ids, 1, 0, t) == CDB_OK, "text: %s", cdb_errmsg());
    FUZZ_CHECK(cdb_encode_pixels(m, g_px, 1, 0, i) == CDB_OK, "image: %s", cdb_errmsg());
    return m;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char src[4096], dst[800];
    size_t n = 0;
    void *w;
    cdb_model *m;
    const cdb_model_info *in;
    float t[1024], i[1024];
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_model_setup("pack");
    snprintf(g_model, sizeof g_model, "%s/model", g_dir);
    snprintf(g_cache_dir, sizeof g_cache_dir, "%s/cache", g_dir);
    if (mkdir(g_model, 0755) != 0) abort();
    snprintf(src, sizeof src, "%s/tests/fuzz/data/clip_w64_f16.safetensors", fuzz_source_dir());
    if (!(w = fuzz_read_file(src, &n))) abort();
    snprintf(dst, sizeof dst, "%s/model.safetensors", g_model);
    if (fuzz_write_file(dst, w, n) != 0) abort();
    free(w);
    {
        cdb_model_params mp = fuzz_model_params();
        if (cdb_model_open(g_model, &mp, &m) != CDB_OK) abort();
        in = cdb_model_get_info(m);
        g_E = in->embed_dim, g_ctx = in->context_length;
        if (g_E > 1024 || g_ctx > 128 || g_ctx < 3 || in->vocab_size < 3) abort();
        for (int k = 0; k < g_ctx; k++) g_ids[k] = k < 2 ? 1 + k : 0;
        g_ids[2] = in->vocab_size - 1; /* the end token */
        g_px = calloc((size_t)3 * in->image_size * in->image_size, sizeof *g_px);
        for (int k = 0; g_px && k < 3 * in->image_size * in->image_size; k++)
            g_px[k] = (float)(k % 17) / 8.0f - 1.0f;
        cdb_model_close(m);
    }
    if (!g_px || !(m = open_encode(CDB_PACK_CACHE_OFF, g_ref_t, g_ref_i))) abort();
    cdb_model_close(m);
    if (!(m = open_encode(CDB_PACK_CACHE_ON, t, i))) abort();
    in = cdb_model_get_info(m);
    if (strcmp(in->pack_cache, "written")) abort();
    snprintf(g_cache, sizeof g_cache, "%s", in->pack_cache_path);
    cdb_model_close(m);
    if (!(g_valid = fuzz_read_file(g_cache, &g_valid_n))) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    unsigned char *f = NULL;
    size_t fn = g_valid_n;
    float t[1024], i[1024];
    cdb_model *m;
    if (n == 0) return 0;
    if (!(f = fuzz_damage(g_valid, g_valid_n, data + 1, n - 1, data[0] % 3, &fn))) return 0;
    if (fuzz_write_file(g_cache, f, fn) != 0) abort();
    free(f);
    m = open_encode(CDB_PACK_CACHE_ON, t, i);
    FUZZ_CHECK(m != NULL, "open with a damaged cache failed: %s", cdb_errmsg());
    FUZZ_CHECK(!memcmp(t, g_ref_t, (size_t)g_E * sizeof *t) &&
                   !memcmp(i, g_ref_i, (size_t)g_E * sizeof *i),
               "embeddings differ from the cache-off open's (pack_cache: %s)",
               cdb_model_get_info(m)->pack_cache);
    cdb_model_close(m);
    if (fuzz_write_file(g_cache, g_valid, g_valid_n) != 0) abort();
    return 0;
}
