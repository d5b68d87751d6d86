/*
** test_default_model.c: the bundled default model (models/shapes-vit-tiny) through
** clipdb's C encoder matches the PyTorch model it was trained as.
**
** The fixture (tests/world/golden/default_model_*, written by
** `scripts/train_default_model.py --golden tests/world/golden`) holds PyTorch's
** fp32 embeddings, from the exported fp16 weights, of 100 generated images (world
** seed in the fixture, default sizes, JPEG and PNG) and of their 100 captions. This
** test regenerates the same library with cdb_world_generate, encodes the files and
** the captions with encoder.h, and requires cosine >= 0.9999 for every pair (the
** issue's bar). Skipped when the model or the fixture is absent.
** CLIPDB_TEST_MODEL / CLIPDB_TEST_GOLDEN_DIR point it at another model and fixture.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdb_test.h"
#include "cosine.h"
#include "core/core.h"
#include "encoder/encoder.h"
#include "world/world.h"

static char g_model[1024], g_golden[1024], g_golden_texts[1024];

static void paths_init(void) {
    const char *m = getenv("CLIPDB_TEST_MODEL"), *gd = getenv("CLIPDB_TEST_GOLDEN_DIR");
    snprintf(g_model, sizeof g_model, "%s", m && *m ? m : CDB_SOURCE_DIR "/models/shapes-vit-tiny");
    if (!gd || !*gd) gd = CDB_SOURCE_DIR "/tests/world/golden";
    snprintf(g_golden, sizeof g_golden, "%s/default_model_embeddings.bin", gd);
    snprintf(g_golden_texts, sizeof g_golden_texts, "%s/default_model_texts.txt", gd);
}
#define MODEL_DIR g_model
#define GOLDEN g_golden
#define GOLDEN_TEXTS g_golden_texts

typedef struct golden {
    int n_img, n_txt, dim;
    uint64_t seed;
    float *img, *txt;
    char **texts;
} golden;

static void golden_free(golden *g) {
    free(g->img);
    free(g->txt);
    if (g->texts)
        for (int i = 0; i < g->n_txt; i++) free(g->texts[i]);
    free(g->texts);
}

static int golden_load(golden *g) {
    FILE *f = fopen(GOLDEN, "rb");
    char magic[8];
    int32_t hdr[3];
    memset(g, 0, sizeof *g);
    if (!f) return 0;
    int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, "CDBWG1\0\0", 8) &&
             fread(hdr, 4, 3, f) == 3 && fread(&g->seed, 8, 1, f) == 1;
    if (ok) {
        g->n_img = hdr[0], g->n_txt = hdr[1], g->dim = hdr[2];
        ok = g->n_img > 0 && g->n_txt > 0 && g->dim > 0 && g->n_img <= 10000 && g->n_txt <= 10000;
    }
    if (ok) {
        g->img = malloc((size_t)g->n_img * g->dim * sizeof(float));
        g->txt = malloc((size_t)g->n_txt * g->dim * sizeof(float));
        ok = g->img && g->txt &&
             fread(g->img, sizeof(float), (size_t)g->n_img * g->dim, f) == (size_t)g->n_img * g->dim &&
             fread(g->txt, sizeof(float), (size_t)g->n_txt * g->dim, f) == (size_t)g->n_txt * g->dim;
    }
    fclose(f);
    if (!ok) return -1;
    FILE *t = fopen(GOLDEN_TEXTS, "rb");
    char line[1024];
    if (!t || !(g->texts = calloc((size_t)g->n_txt, sizeof *g->texts))) {
        if (t) fclose(t);
        return -1;
    }
    for (int i = 0; i < g->n_txt && fgets(line, sizeof line, t); i++) {
        line[strcspn(line, "\n")] = '\0';
        g->texts[i] = strdup(line);
    }
    fclose(t);
    for (int i = 0; i < g->n_txt; i++)
        if (!g->texts[i]) return -1;
    return 1;
}

CDB_TEST(default_model_matches_pytorch) {
    golden g;
    cdb_model *m = NULL;
    char dir[] = "/tmp/cdb_test_default_model_XXXXXX", path[1200], cap[1024];
    paths_init();
    snprintf(path, sizeof path, "%s/model.safetensors", MODEL_DIR);
    if (access(path, R_OK) != 0) CDB_SKIP("no model in %s", MODEL_DIR);
    int gl = golden_load(&g);
    if (gl == 0) CDB_SKIP("no fixture %s", GOLDEN);
    CHECK_MSG(gl == 1, "fixture %s is corrupt", GOLDEN);
    cdb_model_params mp = cdb_model_params_default();
    mp.device.kind = CDB_K_DEVICE_CPU;
    CHECK_OK(cdb_model_open(MODEL_DIR, &mp, &m));
    const cdb_model_info *info = cdb_model_get_info(m);
    CHECK_EQ_INT(info->embed_dim, g.dim);
    CHECK(mkdtemp(dir));
    CHECK_OK(cdb_world_generate(dir, g.seed, 0, g.n_img, NULL));

    float *e = malloc((size_t)g.dim * sizeof(float));
    double worst_img = 1, worst_txt = 1;
    CHECK(e);
    for (int i = 0; i < g.n_img; i++) {
        cdb_world_scene s;
        CHECK_OK(cdb_world_scene_make(g.seed, i, NULL, &s));
        snprintf(path, sizeof path, "%s/img_%07d.%s", dir, i, s.format == CDB_WORLD_PNG ? "png" : "jpg");
        CHECK_OK(cdb_encode_image_file(m, path, NULL, 1, e));
        double c = cosine(e, g.img + (size_t)i * g.dim, g.dim);
        if (c < worst_img) worst_img = c;
        if (i < g.n_txt) { /* the fixture's captions are this library's */
            CHECK_OK(cdb_world_caption(&s, cap, sizeof cap));
            CHECK_EQ_STR(cap, g.texts[i]);
        }
    }
    for (int i = 0; i < g.n_txt; i++) {
        const char *t = g.texts[i];
        CHECK_OK(cdb_encode_texts(m, &t, 1, 1, e));
        double c = cosine(e, g.txt + (size_t)i * g.dim, g.dim);
        if (c < worst_txt) worst_txt = c;
    }
    fprintf(stderr, "    worst cosine: images %.7f, texts %.7f\n", worst_img, worst_txt);
    CHECK_MSG(worst_img >= 0.9999, "image embedding cosine %.7f < 0.9999", worst_img);
    CHECK_MSG(worst_txt >= 0.9999, "text embedding cosine %.7f < 0.9999", worst_txt);
    free(e);
    snprintf(path, sizeof path, "rm -rf '%s'", dir);
    if (system(path) != 0) fprintf(stderr, "    (could not remove %s)\n", dir);
    cdb_model_close(m);
    golden_free(&g);
}

CDB_TEST_MAIN(default_model_matches_pytorch)
