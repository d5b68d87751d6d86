/*
** world_library.h: a held-out generated library encoded by the bundled model, for the
** benchmarks that evaluate it (bench_default_model, bench_scores): the images of world
** seed `seed` in dir (bench_world_generate writes them when dir has no manifest), each
** decoded from its file and preprocessed as ingest does, encoded 32 at a time.
*/
#ifndef CDB_BENCH_WORLD_LIBRARY_H
#define CDB_BENCH_WORLD_LIBRARY_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "encoder/encoder.h"
#include "world/world.h"

/* Writes the library into dir unless its manifest is there (a library made before). */
static inline cdb_status bench_world_generate(const char *dir, uint64_t seed, int n,
                                              int threads) {
    char path[1024];
    struct stat st;
    cdb_world_library_params lp = cdb_world_library_params_default();
    snprintf(path, sizeof path, "%s/manifest.jsonl", dir);
    if (stat(path, &st) == 0) return CDB_OK;
    lp.n_threads = threads;
    return cdb_world_generate(dir, seed, 0, n, &lp);
}

/* scenes[n]: the scene records (the ground truth); img: n * embed_dim floats. */
static inline cdb_status bench_world_encode(cdb_model *m, const char *dir, uint64_t seed, int n,
                                            cdb_world_scene *scenes, float *img) {
    const cdb_model_info *info = cdb_model_get_info(m);
    const int S = info->preprocess.size, B = 32;
    char path[1024];
    float *px = malloc(sizeof *px * (size_t)B * 3 * S * S);
    cdb_status rc = CDB_OK;
    if (!px) return cdb_seterr(CDB_NOMEM, "bench: %d images", B);
    for (int i0 = 0; i0 < n && rc == CDB_OK; i0 += B) {
        int nb = n - i0 < B ? n - i0 : B;
        for (int b = 0; b < nb && rc == CDB_OK; b++) {
            cdb_world_scene *s = &scenes[i0 + b];
            cdb_image *im = NULL;
            if ((rc = cdb_world_scene_make(seed, i0 + b, NULL, s)) != CDB_OK) break;
            snprintf(path, sizeof path, "%s/img_%07d.%s", dir, i0 + b,
                     s->format == CDB_WORLD_PNG ? "png" : "jpg");
            if ((rc = cdb_image_load(path, NULL, &im)) == CDB_OK)
                rc = cdb_image_preprocess(im, &info->preprocess, px + (size_t)b * 3 * S * S, NULL);
            cdb_image_free(im);
        }
        if (rc == CDB_OK) rc = cdb_encode_pixels(m, px, nb, 1, img + (size_t)i0 * info->embed_dim);
    }
    free(px);
    return rc;
}

#endif /* CDB_BENCH_WORLD_LIBRARY_H */
