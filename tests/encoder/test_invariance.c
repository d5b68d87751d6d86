/*
** test_invariance.c: an embedding does not depend on what else is in its batch nor
** on the thread count (the CPU backend's contract, kernels.h). On the fixture models
** (tests/golden/models: ViT with QuickGELU and GELU, the F16 OpenCLIP family one
** whose patch GEMM has K = 588, three K chunks, and both ModifiedResNets): every
** image of a pool of 40 random ones is encoded alone with one thread; then batches
** of 2..33 drawn from the pool at rotating offsets (so each image sits at many
** positions, beside many others) are encoded with 1..4 threads, and every row must
** equal its image's alone embedding bit for bit. The same for texts of lengths
** 1..76 tokens (a batch runs up to its longest end token, so a short text is
** computed beside different amounts of padding). Run it with CLIPDB_ISA=scalar or
** avx2 to check another path (ctest also runs it with CLIPDB_ISA=scalar).
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "kernels/kernels.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define POOL 40
#define MAX_BATCH 33

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33);
}

static cdb_model *open_model(const char *name, int threads) {
    char path[1024];
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    p.n_threads = threads;
    snprintf(path, sizeof path, "%s/%s", GOLD, name);
    return cdb_model_open(path, &p, &m) == CDB_OK ? m : NULL;
}

/* Encodes batches of 2..MAX_BATCH items drawn from the pool (item i of batch b is
** pool[(b * 7 + i * 3 + t) % POOL] with t the thread count) and compares each row
** with alone[]. kind 0: images (isz pixels), 1: texts. Returns mismatching rows. */
static int check_batches(cdb_model *m, int kind, const void *pool, size_t item_elems,
                         const float *alone, int E, int t, int *checked) {
    size_t esz = kind ? sizeof(int32_t) : sizeof(float);
    char *in = malloc((size_t)MAX_BATCH * item_elems * esz);
    float *out = malloc((size_t)MAX_BATCH * E * sizeof(float));
    int bad = 0;
    int idx[MAX_BATCH];
    for (int b = 2; b <= MAX_BATCH; b++) {
        cdb_status rc;
        for (int i = 0; i < b; i++) {
            idx[i] = (b * 7 + i * 3 + t) % POOL;
            memcpy(in + (size_t)i * item_elems * esz,
                   (const char *)pool + (size_t)idx[i] * item_elems * esz, item_elems * esz);
        }
        rc = kind ? cdb_encode_tokens(m, (const int32_t *)in, b, 0, out)
                  : cdb_encode_pixels(m, (const float *)in, b, 0, out);
        if (rc != CDB_OK) {
            bad += b;
            continue;
        }
        for (int i = 0; i < b; i++, (*checked)++)
            if (memcmp(out + (size_t)i * E, alone + (size_t)idx[i] * E, (size_t)E * sizeof(float)))
                bad++;
    }
    free(in);
    free(out);
    return bad;
}

static void run_model(cdb_test_ctx *cdb_t_, const char *name) {
    cdb_model *m1 = open_model(name, 1);
    const cdb_model_info *info;
    int E, S, C, V, checked = 0;
    size_t px;
    float *pixels, *alone_i, *alone_t;
    int32_t *texts;
    CHECK_MSG(m1 != NULL, "%s: %s", name, cdb_errmsg());
    if (!m1) return;
    info = cdb_model_get_info(m1);
    E = info->embed_dim, S = info->image_size, C = info->context_length, V = info->vocab_size;
    px = (size_t)3 * S * S;
    pixels = malloc(POOL * px * sizeof(float));
    texts = calloc((size_t)POOL * C, sizeof(int32_t));
    alone_i = malloc((size_t)POOL * E * sizeof(float));
    alone_t = malloc((size_t)POOL * E * sizeof(float));
    for (size_t i = 0; i < POOL * px; i++) pixels[i] = (float)(rnd() % 4001) / 1000.0f - 2.0f;
    for (int i = 0; i < POOL; i++) { /* lengths 1..76 before the end token (vocab - 1) */
        int len = 1 + (i * 29 + 5) % 76;
        int32_t *r = texts + (size_t)i * C;
        r[0] = V - 2; /* a start-like token */
        for (int j = 1; j < len; j++) r[j] = (int32_t)(1 + rnd() % (uint32_t)(V - 3));
        r[len] = V - 1;
    }
    for (int i = 0; i < POOL; i++) {
        CHECK_OK(cdb_encode_pixels(m1, pixels + i * px, 1, 0, alone_i + (size_t)i * E));
        CHECK_OK(cdb_encode_tokens(m1, texts + (size_t)i * C, 1, 0, alone_t + (size_t)i * E));
    }
    /* different inputs give different embeddings (the comparison below means something) */
    CHECK(memcmp(alone_i, alone_i + E, (size_t)E * sizeof(float)) != 0);
    CHECK(memcmp(alone_t, alone_t + E, (size_t)E * sizeof(float)) != 0);
    for (int t = 1; t <= 4; t++) {
        cdb_model *m = t == 1 ? m1 : open_model(name, t);
        int bi, bt;
        CHECK(m != NULL);
        if (!m) break;
        bi = check_batches(m, 0, pixels, px, alone_i, E, t, &checked);
        bt = check_batches(m, 1, texts, (size_t)C, alone_t, E, t, &checked);
        CHECK_MSG(bi == 0, "%s, %d threads: %d image rows differ from the image alone", name, t,
                  bi);
        CHECK_MSG(bt == 0, "%s, %d threads: %d text rows differ from the text alone", name, t,
                  bt);
        if (m != m1) cdb_model_close(m);
    }
    printf("     %s (%s, gemm path %s): %d rows checked bit for bit\n", name,
           info->vision_family, cdb_k_cpu_gemm_path(), checked);
    free(pixels), free(texts), free(alone_i), free(alone_t);
    cdb_model_close(m1);
}

CDB_TEST(vit_quickgelu) { run_model(cdb_t_, "openai_qgelu"); }
CDB_TEST(vit_gelu_hf) { run_model(cdb_t_, "hf_gelu"); }
CDB_TEST(vit_openclip_f16_k588) { run_model(cdb_t_, "fam_openclip"); }
CDB_TEST(resnet_quickgelu) { run_model(cdb_t_, "rn_qgelu"); }
CDB_TEST(resnet_gelu) { run_model(cdb_t_, "rn_gelu"); }

CDB_TEST_MAIN(vit_quickgelu, vit_gelu_hf, vit_openclip_f16_k588, resnet_quickgelu, resnet_gelu)
