/*
** bench_default_model.c: the bundled default model's retrieval bars, measured
** through clipdb's own encoder (encoder.h) on a held-out generated library.
**
** Generates (or reuses) a library of N images of world seed S (default 2,000 of
** seed 424242, a seed never used in training) at the world's default sizes, encodes
** every image file (decode + CLIP preprocessing + image tower) and every query text
** (BPE + text tower), ranks the library by cosine for each query, and prints
** precision@1 and precision@10 for
**   - single-object queries: the 8 shapes and the 80 color+shape pairs; a hit is an
**     image whose scene record contains such an object (cdb_world_scene_matches);
**     bars: P@1 >= 0.9 and P@10 >= 0.8;
**   - compositional queries (size, position, count, background, two objects): printed,
**     no bar.
**
**   bench_default_model [--model DIR] [--n N] [--seed S] [--dir LIB] [--threads T]
**
** Exit status: 0 when both bars are met, 1 when not, 2 on error.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "encoder/encoder.h"
#include "world/world.h"
#include "world_library.h"
#include "bench_util.h"


#define N_SINGLE 88
#define N_COMP 120
#define QUERY_SEED 77 /* as scripts/train_default_model.py */

typedef struct pk {
    double p1, p10;
    int n;
} pk;

static int cmp_desc(const void *a, const void *b, void *ctx) {
    const float *s = ctx;
    float x = s[*(const int *)a], y = s[*(const int *)b];
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Precision@1/@10 of queries [k0, k1) of kind over the library's scenes. */
static cdb_status eval_queries(cdb_model *m, const float *img, int n_img, int dim,
                               const cdb_world_scene *scenes, int kind, int n_q, pk *out) {
    cdb_status rc = CDB_OK;
    float *txt = cdb_malloc((size_t)dim * sizeof(float)), *score = cdb_malloc((size_t)n_img * sizeof(float));
    int *order = cdb_malloc((size_t)n_img * sizeof(int));
    char text[256];
    memset(out, 0, sizeof *out);
    if (!txt || !score || !order) {
        rc = cdb_seterr(CDB_NOMEM, "bench: scores");
        goto cleanup;
    }
    for (int k = 0; k < n_q; k++) {
        cdb_world_query q;
        const char *tp = text;
        int n_rel = 0;
        if ((rc = cdb_world_query_make(QUERY_SEED, k, kind, &q)) != CDB_OK) goto cleanup;
        for (int i = 0; i < n_img; i++) n_rel += cdb_world_scene_matches(&scenes[i], &q);
        if (n_rel == 0) continue; /* nothing to find: skipped, as in the Python evaluation */
        if ((rc = cdb_world_query_text(&q, text, sizeof text)) != CDB_OK) goto cleanup;
        if ((rc = cdb_encode_texts(m, &tp, 1, 1, txt)) != CDB_OK) goto cleanup;
        for (int i = 0; i < n_img; i++) {
            double acc = 0;
            for (int d = 0; d < dim; d++) acc += (double)txt[d] * img[(size_t)i * dim + d];
            score[i] = (float)acc;
            order[i] = i;
        }
        qsort_r(order, (size_t)n_img, sizeof *order, cmp_desc, score);
        int hits = 0;
        for (int r = 0; r < 10 && r < n_img; r++) {
            int h = cdb_world_scene_matches(&scenes[order[r]], &q);
            if (r == 0) out->p1 += h;
            hits += h;
        }
        out->p10 += hits / 10.0;
        out->n++;
    }
    if (out->n) {
        out->p1 /= out->n;
        out->p10 /= out->n;
    }
cleanup:
    cdb_free(txt);
    cdb_free(score);
    cdb_free(order);
    return rc;
}

int main(int argc, char **argv) {
    const char *model_dir = CDB_SOURCE_DIR "/models/shapes-vit-tiny", *lib_dir = NULL;
    char lib_buf[512];
    uint64_t seed = 424242;
    int n = 2000, threads = 0, ret = 2;
    cdb_model *m = NULL;
    cdb_world_scene *scenes = NULL;
    float *img = NULL;
    cdb_status rc = CDB_OK;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--model") && v) model_dir = argv[++i];
        else if (!strcmp(argv[i], "--n") && v) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && v) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--dir") && v) lib_dir = argv[++i];
        else if (!strcmp(argv[i], "--threads") && v) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_default_model [--model DIR] [--n N] [--seed S] "
                            "[--dir LIB] [--threads T]\n");
            return 2;
        }
    }
    if (n < 10) {
        fprintf(stderr, "bench_default_model: --n must be at least 10\n");
        return 2;
    }
    if (!lib_dir) {
        snprintf(lib_buf, sizeof lib_buf, "/tmp/clipdb-bench-world-%llu-%d", (unsigned long long)seed, n);
        lib_dir = lib_buf;
    }
    cdb_model_params mp = cdb_model_params_default();
    mp.n_threads = threads;
    mp.device.kind = CDB_K_DEVICE_CPU;
    int64_t t0 = cdb_now_ns();
    if ((rc = cdb_model_open(model_dir, &mp, &m)) != CDB_OK) goto fail;
    const cdb_model_info *info = cdb_model_get_info(m);
    const int dim = info->embed_dim;
    printf("model %s: %s, embed %d, image %d/%d, act %s (%s)\n", model_dir, info->weights_dtype, dim,
           info->image_size, info->patch_size, info->act == CDB_ACT_GELU ? "gelu" : "quick_gelu",
           info->act_source);

    scenes = cdb_calloc((size_t)n, sizeof *scenes);
    img = cdb_malloc((size_t)n * dim * sizeof(float));
    if (!scenes || !img) {
        rc = cdb_seterr(CDB_NOMEM, "bench: %d images", n);
        goto fail;
    }
    if ((rc = bench_world_generate(lib_dir, seed, n, threads)) != CDB_OK) goto fail;
    int64_t t1 = cdb_now_ns();
    if ((rc = bench_world_encode(m, lib_dir, seed, n, scenes, img)) != CDB_OK) goto fail;
    double enc_s = (double)(cdb_now_ns() - t1) * 1e-9;
    printf("library %s: %d images (seed %llu), encoded in %.1f s (%.0f images/s)\n", lib_dir, n,
           (unsigned long long)seed, enc_s, n / enc_s);

    pk single, comp;
    if ((rc = eval_queries(m, img, n, dim, scenes, CDB_WORLD_Q_SINGLE, N_SINGLE, &single)) != CDB_OK)
        goto fail;
    if ((rc = eval_queries(m, img, n, dim, scenes, CDB_WORLD_Q_COMPOSITIONAL, N_COMP, &comp)) != CDB_OK)
        goto fail;
    int ok = single.n >= 50 && single.p1 >= 0.9 && single.p10 >= 0.8;
    printf("single-object queries: %d, precision@1 %.3f (bar 0.9), precision@10 %.3f (bar 0.8): %s\n",
           single.n, single.p1, single.p10, ok ? "met" : "NOT met");
    printf("compositional queries: %d, precision@1 %.3f, precision@10 %.3f (no bar)\n", comp.n,
           comp.p1, comp.p10);
    printf("total %.1f s\n", (double)(cdb_now_ns() - t0) * 1e-9);
    ret = ok ? 0 : 1;
    goto done;
fail:
    fprintf(stderr, "bench_default_model: error: %s: %s\n", cdb_status_str(rc), cdb_errmsg());
done:
    cdb_model_close(m);
    cdb_free(scenes);
    cdb_free(img);
    return ret;
}
