/*
** bench_scores.c: what a score means, measured: the cosine distributions of matching
** and non-matching text-image pairs, so that `--min-score` (and the model's
** probability) can be read. Figures for docs/models.md ("Scores").
**
**  1. The bundled model on a held-out generated library (N images of world seed S,
**     default 1,000 of 424242, never used in training), with the world's evaluation
**     queries: the 88 single-object queries and 120 compositional ones. A pair matches
**     when cdb_world_scene_matches says so (the ground truth of the scene record).
**     Prints the percentiles of each distribution, and the lowest score at which the
**     pairs above it are 90% / 99% matches (the precision of --min-score at it) with
**     the share of all matches kept (recall).
**  2. The SigLIP fixtures (tests/golden/models/siglip_hf, siglip_oc): random weights,
**     so their cosines say nothing about real SigLIP; printed to show the range the
**     probability formula maps (their texts as token ids, their images as pixels).
**
**   bench_scores [N [S]]      (the library: /tmp/clipdb-bench-world-S-N, as
**                              bench_default_model's)
**
** Real released weights (OpenAI CLIP, SigLIP, SigLIP2) are not reachable here: no
** figure for them is measured by this program. Exit 0, or 2 on error.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "encoder/encoder.h"
#include "read_file.h"
#include "world/world.h"
#include "world_library.h"
#include "bench_util.h"


#define N_SINGLE 88
#define N_COMP 120
#define QUERY_SEED 77 /* as bench_default_model and scripts/train_default_model.py */

typedef struct scores {
    float *v;
    size_t n, cap;
} scores;

static int push(scores *s, float x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        float *v = realloc(s->v, sizeof *v * cap);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile of sorted v (nearest rank). */
static float quantile(const scores *s, double q) {
    size_t i = (size_t)(q * (double)(s->n - 1) + 0.5);
    return s->v[i < s->n ? i : s->n - 1];
}

static void print_dist(const char *what, scores *s) {
    qsort(s->v, s->n, sizeof *s->v, cmp_float);
    printf("  %-12s %8zu pairs: min %.4f  p1 %.4f  p5 %.4f  p25 %.4f  median %.4f  "
           "p75 %.4f  p95 %.4f  p99 %.4f  max %.4f\n",
           what, s->n, s->v[0], quantile(s, 0.01), quantile(s, 0.05), quantile(s, 0.25),
           quantile(s, 0.5), quantile(s, 0.75), quantile(s, 0.95), quantile(s, 0.99),
           s->v[s->n - 1]);
}

/* The lowest score t such that the pairs scoring >= t are at least `precision`
** matches, walking down from the top; and the share of the matches they hold. */
static void threshold_for(const scores *pos, const scores *neg, double precision) {
    size_t ip = pos->n, in = neg->n; /* both sorted ascending */
    size_t kept_p, kept_n, best_p = 0;
    float t = NAN;
    while (ip > 0 || in > 0) {
        float x = ip > 0 && (in == 0 || pos->v[ip - 1] >= neg->v[in - 1]) ? pos->v[--ip]
                                                                         : neg->v[--in];
        kept_p = pos->n - ip;
        kept_n = neg->n - in;
        if ((double)kept_p >= precision * (double)(kept_p + kept_n) && kept_p > best_p) {
            best_p = kept_p;
            t = x;
        }
    }
    if (isnan(t)) printf("  precision %.2f: never reached\n", precision);
    else
        printf("  --min-score %.4f keeps pairs that are %.0f%%+ matches, and %.1f%% of all "
               "matches\n",
               t, 100 * precision, 100.0 * (double)best_p / (double)pos->n);
}

/* The share of the sorted scores s at or above t. */
static double share_from(const scores *s, float t) {
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->v[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return (double)(s->n - lo) / (double)s->n;
}

/* What --min-score t keeps of the matches and of the rest, for a few t. */
static void min_score_table(const scores *pos, const scores *neg) {
    static const float ts[] = {0.2f, 0.3f, 0.4f, 0.5f, 0.55f, 0.6f};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        printf("  --min-score %.2f keeps %5.1f%% of the matching pairs, %5.1f%% of the others\n",
               ts[i], 100 * share_from(pos, ts[i]), 100 * share_from(neg, ts[i]));
}

/* Every (query, image) pair of n_q queries of kind: its cosine into pos or neg. */
static cdb_status pairs(cdb_model *m, const float *img, int n_img, int dim,
                        const cdb_world_scene *scenes, int kind, int n_q, scores *pos,
                        scores *neg) {
    float *txt = malloc(sizeof *txt * (size_t)dim);
    char text[256];
    cdb_status rc = CDB_OK;
    if (!txt) return cdb_seterr(CDB_NOMEM, "bench: query");
    for (int k = 0; k < n_q && rc == CDB_OK; k++) {
        cdb_world_query q;
        const char *tp = text;
        if ((rc = cdb_world_query_make(QUERY_SEED, k, kind, &q)) != CDB_OK ||
            (rc = cdb_world_query_text(&q, text, sizeof text)) != CDB_OK ||
            (rc = cdb_encode_texts(m, &tp, 1, 1, txt)) != CDB_OK)
            break;
        for (int i = 0; i < n_img; i++) {
            float acc = 0; /* fp32, as the search's exact re-rank */
            for (int d = 0; d < dim; d++) acc += txt[d] * img[(size_t)i * dim + d];
            if (push(cdb_world_scene_matches(&scenes[i], &q) ? pos : neg, acc) != 0)
                rc = cdb_seterr(CDB_NOMEM, "bench: scores");
        }
    }
    free(txt);
    return rc;
}

static cdb_status bundled(const char *model_dir, const char *dir, uint64_t seed, int n) {
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    cdb_world_scene *scenes = calloc((size_t)n, sizeof *scenes);
    float *img = NULL;
    scores pos[2] = {{0}}, neg[2] = {{0}};
    static const char *const kinds[2] = {"single-object", "compositional"};
    cdb_status rc;
    mp.device.kind = CDB_K_DEVICE_CPU;
    if (!scenes) return cdb_seterr(CDB_NOMEM, "bench: scenes");
    if ((rc = cdb_model_open(model_dir, &mp, &m)) != CDB_OK) goto done;
    if (!(img = malloc(sizeof *img * (size_t)n * cdb_model_get_info(m)->embed_dim))) {
        rc = cdb_seterr(CDB_NOMEM, "bench: embeddings");
        goto done;
    }
    if ((rc = bench_world_generate(dir, seed, n, 0)) != CDB_OK ||
        (rc = bench_world_encode(m, dir, seed, n, scenes, img)) != CDB_OK)
        goto done;
    printf("bundled model %s on %d generated images (seed %llu, %s)\n",
           cdb_model_get_info(m)->name, n, (unsigned long long)seed, dir);
    for (int k = 0; k < 2 && rc == CDB_OK; k++) {
        rc = pairs(m, img, n, cdb_model_get_info(m)->embed_dim, scenes,
                   k ? CDB_WORLD_Q_COMPOSITIONAL : CDB_WORLD_Q_SINGLE, k ? N_COMP : N_SINGLE,
                   &pos[k], &neg[k]);
        if (rc != CDB_OK || !pos[k].n || !neg[k].n) break;
        printf(" %s queries:\n", kinds[k]);
        print_dist("matching", &pos[k]);
        print_dist("non-matching", &neg[k]);
        min_score_table(&pos[k], &neg[k]);
        threshold_for(&pos[k], &neg[k], 0.9);
        threshold_for(&pos[k], &neg[k], 0.99);
    }
done:
    for (int k = 0; k < 2; k++) free(pos[k].v), free(neg[k].v);
    cdb_model_close(m);
    free(scenes);
    free(img);
    return rc;
}

/* The SigLIP fixtures: every text x image pair's cosine, and the probability range. */
static cdb_status siglip_fixture(const char *name) {
    char path[1024];
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    size_t n_tok = 0, n_px = 0;
    int32_t *tok = test_read_file(CDB_SOURCE_DIR "/tests/golden/models/siglip_tokens.i32", &n_tok);
    float *px = test_read_file(CDB_SOURCE_DIR "/tests/golden/models/siglip_pixels.f32", &n_px);
    float *te = NULL, *ie = NULL, plo = 1, phi = 0;
    scores all = {0};
    cdb_status rc = CDB_OK;
    int ctx, S, dim, nt, ni;
    mp.device.kind = CDB_K_DEVICE_CPU;
    snprintf(path, sizeof path, "%s/tests/golden/models/%s", CDB_SOURCE_DIR, name);
    if (!tok || !px) {
        rc = cdb_seterr(CDB_IO, "bench: the SigLIP fixtures' inputs are missing");
        goto done;
    }
    if ((rc = cdb_model_open(path, &mp, &m)) != CDB_OK) goto done;
    ctx = cdb_model_get_info(m)->context_length;
    S = cdb_model_get_info(m)->preprocess.size;
    dim = cdb_model_get_info(m)->embed_dim;
    nt = (int)(n_tok / sizeof *tok / (size_t)ctx);
    ni = (int)(n_px / sizeof *px / (size_t)(3 * S * S));
    if (!(te = malloc(sizeof *te * (size_t)nt * dim)) ||
        !(ie = malloc(sizeof *ie * (size_t)ni * dim))) {
        rc = cdb_seterr(CDB_NOMEM, "bench: embeddings");
        goto done;
    }
    if ((rc = cdb_encode_tokens(m, tok, nt, 1, te)) != CDB_OK ||
        (rc = cdb_encode_pixels(m, px, ni, 1, ie)) != CDB_OK)
        goto done;
    for (int t = 0; t < nt; t++)
        for (int i = 0; i < ni; i++) {
            float acc = 0, p = 0;
            for (int d = 0; d < dim; d++) acc += te[(size_t)t * dim + d] * ie[(size_t)i * dim + d];
            if (push(&all, acc) != 0) {
                rc = cdb_seterr(CDB_NOMEM, "bench: scores");
                goto done;
            }
            if (cdb_model_match_probability(cdb_model_get_info(m), acc, &p))
                plo = fminf(plo, p), phi = fmaxf(phi, p);
        }
    printf("%s (random weights; logit_scale %.4f, i.e. x%.2f, bias %.4f): %d texts x %d images\n",
           name, cdb_model_get_info(m)->logit_scale, expf(cdb_model_get_info(m)->logit_scale),
           cdb_model_get_info(m)->logit_bias, nt, ni);
    print_dist("all pairs", &all);
    printf("  probability %.3g .. %.3g\n", plo, phi);
done:
    cdb_model_close(m);
    free(all.v);
    free(tok);
    free(px);
    free(te);
    free(ie);
    return rc;
}

int main(int argc, char **argv) {
    char lib_dir[512];
    uint64_t seed = 424242;
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    cdb_status rc;
    if (argc > 3 || n < 10) {
        fprintf(stderr, "usage: bench_scores [N (>= 10, default 1000) [SEED]]\n");
        return 2;
    }
    if (argc > 2) seed = strtoull(argv[2], NULL, 0);
    /* bench_default_model's library of the same seed and size, when it made one */
    snprintf(lib_dir, sizeof lib_dir, "/tmp/clipdb-bench-world-%llu-%d", (unsigned long long)seed,
             n);
    if ((rc = bundled(CDB_SOURCE_DIR "/models/shapes-vit-tiny", lib_dir, seed, n)) != CDB_OK ||
        (rc = siglip_fixture("siglip_hf")) != CDB_OK ||
        (rc = siglip_fixture("siglip_oc")) != CDB_OK) {
        fprintf(stderr, "bench_scores: error: %s: %s\n", cdb_status_str(rc), cdb_errmsg());
        return 2;
    }
    return 0;
}
