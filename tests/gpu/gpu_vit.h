/*
** gpu_vit.h: a ViT image tower (OpenAI CLIP layout) with seeded random weights,
** run through kernels.h's public BACKEND functions only, for
** tests/gpu/test_cuda_kernels.c and bench/bench_gpu.c. The graph of
** encoder/clip.c's image forward (pre-LN blocks, fused residual GEMMs, class-token
** pooling, projection), except that its last block runs on every row (clip.c runs
** it on the class token only), so a CPU backend and the CUDA backend can be
** compared on ViT-B/32-shaped weights without a checkpoint. Header-only (static
** functions); test code, not library.
*/
#ifndef CDB_TESTS_GPU_VIT_H
#define CDB_TESTS_GPU_VIT_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

typedef struct gv_shape {
    int size, patch, width, layers, heads, mlp, embed;
} gv_shape;

static const gv_shape GV_B32 = {224, 32, 768, 12, 12, 3072, 512};

typedef struct gv_block_h {
    float *ln1_g, *ln1_b, *qkv_w, *qkv_b, *out_w, *out_b, *ln2_g, *ln2_b, *fc_w, *fc_b, *pr_w,
        *pr_b;
} gv_block_h;

/* Host weights (fp32). proj is stored [embed, width] (the nn.Linear layout). */
typedef struct gv_host {
    gv_shape s;
    float *patch_w, *cls, *pos, *ln_pre_g, *ln_pre_b, *ln_post_g, *ln_post_b, *proj;
    gv_block_h *blk;
} gv_host;

typedef struct gv_block_d {
    cdb_k_buf *ln1_g, *ln1_b, *qkv_w, *qkv_b, *out_w, *out_b, *ln2_g, *ln2_b, *fc_w, *fc_b, *pr_w,
        *pr_b;
} gv_block_d;

typedef struct gv_dev {
    gv_shape s;
    cdb_k_backend *be;
    cdb_k_buf *patch_w, *cls, *pos, *ln_pre_g, *ln_pre_b, *ln_post_g, *ln_post_b, *proj;
    gv_block_d *blk;
} gv_dev;

static uint64_t gv_rng_state = 0x2545F4914F6CDD1Dull;
static inline double gv_unif(void) {
    gv_rng_state ^= gv_rng_state << 13;
    gv_rng_state ^= gv_rng_state >> 7;
    gv_rng_state ^= gv_rng_state << 17;
    return ((gv_rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static inline float gv_normal(void) {
    return (float)(sqrt(-2.0 * log(gv_unif())) * cos(6.283185307179586 * gv_unif()));
}
static inline float *gv_randn(size_t n, float std, float mean) {
    float *v = (float *)malloc(n * sizeof(float));
    if (v)
        for (size_t i = 0; i < n; i++) v[i] = mean + std * gv_normal();
    return v;
}

/* OpenAI CLIP's initialization scales, so activations stay in a realistic range. */
static inline int gv_host_new(gv_shape s, uint64_t seed, gv_host *h) {
    size_t w = (size_t)s.width, g = (size_t)(s.size / s.patch), K = 3 * (size_t)s.patch * s.patch;
    float attn_std = 1.f / sqrtf((float)w), proj_std = attn_std / sqrtf(2.f * s.layers),
          fc_std = 1.f / sqrtf(2.f * w);
    memset(h, 0, sizeof *h);
    gv_rng_state = seed ? seed : 1;
    h->s = s;
    h->patch_w = gv_randn(w * K, 1.f / sqrtf((float)K), 0);
    h->cls = gv_randn(w, attn_std, 0);
    h->pos = gv_randn((g * g + 1) * w, attn_std, 0);
    h->ln_pre_g = gv_randn(w, 0.05f, 1);
    h->ln_pre_b = gv_randn(w, 0.02f, 0);
    h->ln_post_g = gv_randn(w, 0.05f, 1);
    h->ln_post_b = gv_randn(w, 0.02f, 0);
    h->proj = gv_randn((size_t)s.embed * w, attn_std, 0);
    h->blk = (gv_block_h *)calloc((size_t)s.layers, sizeof *h->blk);
    if (!h->blk) return 0;
    for (int l = 0; l < s.layers; l++) {
        gv_block_h *b = &h->blk[l];
        b->ln1_g = gv_randn(w, 0.05f, 1);
        b->ln1_b = gv_randn(w, 0.02f, 0);
        b->qkv_w = gv_randn(3 * w * w, attn_std, 0);
        b->qkv_b = gv_randn(3 * w, 0.02f, 0);
        b->out_w = gv_randn(w * w, proj_std, 0);
        b->out_b = gv_randn(w, 0.02f, 0);
        b->ln2_g = gv_randn(w, 0.05f, 1);
        b->ln2_b = gv_randn(w, 0.02f, 0);
        b->fc_w = gv_randn((size_t)s.mlp * w, fc_std, 0);
        b->fc_b = gv_randn((size_t)s.mlp, 0.02f, 0);
        b->pr_w = gv_randn(w * s.mlp, proj_std, 0);
        b->pr_b = gv_randn(w, 0.02f, 0);
        if (!b->pr_b) return 0;
    }
    return h->proj != NULL;
}

static inline void gv_host_free(gv_host *h) {
    float *f[] = {h->patch_w, h->cls, h->pos, h->ln_pre_g, h->ln_pre_b, h->ln_post_g,
                  h->ln_post_b, h->proj};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(f[i]);
    if (h->blk)
        for (int l = 0; l < h->s.layers; l++) {
            gv_block_h *b = &h->blk[l];
            float *g[] = {b->ln1_g, b->ln1_b, b->qkv_w, b->qkv_b, b->out_w, b->out_b,
                          b->ln2_g, b->ln2_b, b->fc_w, b->fc_b, b->pr_w, b->pr_b};
            for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) free(g[i]);
        }
    free(h->blk);
    memset(h, 0, sizeof *h);
}

static inline cdb_status gv_up(cdb_k_backend *be, const float *src, size_t n, cdb_k_wrole role,
                        cdb_k_buf **out) {
    return cdb_k_weight_upload(be, src, CDB_K_F32, n, role, 0, out);
}

#define GV_CK(call)                                   \
    do {                                              \
        if ((rc = (call)) != CDB_OK) goto gv_done;    \
    } while (0)

static inline void gv_dev_free(gv_dev *d) {
    if (!d->be) return;
    {
        cdb_k_buf *f[] = {d->patch_w, d->cls, d->pos, d->ln_pre_g, d->ln_pre_b, d->ln_post_g,
                          d->ln_post_b, d->proj};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cdb_k_buf_free(d->be, f[i]);
    }
    if (d->blk)
        for (int l = 0; l < d->s.layers; l++) {
            gv_block_d *b = &d->blk[l];
            cdb_k_buf *g[] = {b->ln1_g, b->ln1_b, b->qkv_w, b->qkv_b, b->out_w, b->out_b,
                              b->ln2_g, b->ln2_b, b->fc_w, b->fc_b, b->pr_w, b->pr_b};
            for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) cdb_k_buf_free(d->be, g[i]);
        }
    free(d->blk);
    memset(d, 0, sizeof *d);
}

static inline cdb_status gv_dev_new(cdb_k_backend *be, const gv_host *h, gv_dev *d) {
    cdb_status rc = CDB_OK;
    gv_shape s = h->s;
    size_t w = (size_t)s.width, g = (size_t)(s.size / s.patch), K = 3 * (size_t)s.patch * s.patch;
    memset(d, 0, sizeof *d);
    d->s = s;
    d->be = be;
    d->blk = (gv_block_d *)calloc((size_t)s.layers, sizeof *d->blk);
    if (!d->blk) return CDB_NOMEM;
    GV_CK(gv_up(be, h->patch_w, w * K, CDB_K_W_MATRIX, &d->patch_w));
    GV_CK(gv_up(be, h->cls, w, CDB_K_W_EMBED, &d->cls));
    GV_CK(gv_up(be, h->pos, (g * g + 1) * w, CDB_K_W_EMBED, &d->pos));
    GV_CK(gv_up(be, h->ln_pre_g, w, CDB_K_W_PARAM, &d->ln_pre_g));
    GV_CK(gv_up(be, h->ln_pre_b, w, CDB_K_W_PARAM, &d->ln_pre_b));
    GV_CK(gv_up(be, h->ln_post_g, w, CDB_K_W_PARAM, &d->ln_post_g));
    GV_CK(gv_up(be, h->ln_post_b, w, CDB_K_W_PARAM, &d->ln_post_b));
    GV_CK(gv_up(be, h->proj, (size_t)s.embed * w, CDB_K_W_MATRIX, &d->proj));
    for (int l = 0; l < s.layers; l++) {
        const gv_block_h *a = &h->blk[l];
        gv_block_d *b = &d->blk[l];
        GV_CK(gv_up(be, a->ln1_g, w, CDB_K_W_PARAM, &b->ln1_g));
        GV_CK(gv_up(be, a->ln1_b, w, CDB_K_W_PARAM, &b->ln1_b));
        GV_CK(gv_up(be, a->qkv_w, 3 * w * w, CDB_K_W_MATRIX, &b->qkv_w));
        GV_CK(gv_up(be, a->qkv_b, 3 * w, CDB_K_W_PARAM, &b->qkv_b));
        GV_CK(gv_up(be, a->out_w, w * w, CDB_K_W_MATRIX, &b->out_w));
        GV_CK(gv_up(be, a->out_b, w, CDB_K_W_PARAM, &b->out_b));
        GV_CK(gv_up(be, a->ln2_g, w, CDB_K_W_PARAM, &b->ln2_g));
        GV_CK(gv_up(be, a->ln2_b, w, CDB_K_W_PARAM, &b->ln2_b));
        GV_CK(gv_up(be, a->fc_w, (size_t)s.mlp * w, CDB_K_W_MATRIX, &b->fc_w));
        GV_CK(gv_up(be, a->fc_b, (size_t)s.mlp, CDB_K_W_PARAM, &b->fc_b));
        GV_CK(gv_up(be, a->pr_w, w * s.mlp, CDB_K_W_MATRIX, &b->pr_w));
        GV_CK(gv_up(be, a->pr_b, w, CDB_K_W_PARAM, &b->pr_b));
    }
gv_done:
    if (rc != CDB_OK) gv_dev_free(d);
    return rc;
}

/* Activations for batches of up to n images. */
typedef struct gv_scratch {
    int n;
    cdb_k_buf *cols, *x, *h, *qkv, *attn, *mlp, *pooled, *emb;
} gv_scratch;

static inline void gv_scratch_free(cdb_k_backend *be, gv_scratch *s) {
    cdb_k_buf *b[] = {s->cols, s->x, s->h, s->qkv, s->attn, s->mlp, s->pooled, s->emb};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) cdb_k_buf_free(be, b[i]);
    memset(s, 0, sizeof *s);
}

static inline cdb_status gv_scratch_new(cdb_k_backend *be, gv_shape sh, int n, gv_scratch *s) {
    cdb_status rc = CDB_OK;
    size_t g = (size_t)(sh.size / sh.patch), S = g * g + 1, w = (size_t)sh.width, rows = S * n;
    memset(s, 0, sizeof *s);
    s->n = n;
    GV_CK(cdb_k_buf_alloc(be, (size_t)n * g * g * 3 * sh.patch * sh.patch, &s->cols));
    GV_CK(cdb_k_buf_alloc(be, rows * w, &s->x));
    GV_CK(cdb_k_buf_alloc(be, rows * w, &s->h));
    GV_CK(cdb_k_buf_alloc(be, rows * 3 * w, &s->qkv));
    GV_CK(cdb_k_buf_alloc(be, rows * w, &s->attn));
    GV_CK(cdb_k_buf_alloc(be, rows * (size_t)sh.mlp, &s->mlp));
    GV_CK(cdb_k_buf_alloc(be, (size_t)n * w, &s->pooled));
    GV_CK(cdb_k_buf_alloc(be, (size_t)n * sh.embed, &s->emb));
gv_done:
    if (rc != CDB_OK) gv_scratch_free(be, s);
    return rc;
}

/* Host unfold of pixels [n,3,size,size] into cols [n*g*g, 3*p*p] (as clip.c). */
static inline void gv_unfold(gv_shape sh, const float *pixels, int n, float *cols) {
    int P = sh.patch, isz = sh.size, G = isz / P, K = 3 * P * P;
    for (int b = 0; b < n; b++) {
        const float *img = pixels + (size_t)b * 3 * isz * isz;
        for (int gy = 0; gy < G; gy++)
            for (int gx = 0; gx < G; gx++) {
                float *dst = cols + ((size_t)b * G * G + (size_t)gy * G + gx) * K;
                for (int ch = 0; ch < 3; ch++)
                    for (int ky = 0; ky < P; ky++)
                        memcpy(dst + ((size_t)ch * P + ky) * P,
                               img + ((size_t)ch * isz + (size_t)gy * P + ky) * isz + (size_t)gx * P,
                               (size_t)P * sizeof(float));
            }
    }
}

/* The tower on s->cols (already filled) for n <= s->n images; embeddings (raw,
** not normalized) left in s->emb [n, embed]. */
static inline cdb_status gv_forward_cols(const gv_dev *d, gv_scratch *s, int n) {
    cdb_k_backend *be = d->be;
    cdb_status rc = CDB_OK;
    gv_shape sh = d->s;
    int G = sh.size / sh.patch, N = G * G, S = N + 1, W = sh.width, K = 3 * sh.patch * sh.patch;
    int rows = n * S, hd = W / sh.heads;
    int32_t *pool = (int32_t *)malloc((size_t)n * sizeof *pool);
    if (!pool) return CDB_NOMEM;
    for (int i = 0; i < n; i++) pool[i] = i * S;
    GV_CK(cdb_k_gemm(be, s->cols, d->patch_w, NULL, s->h, n * N, W, K, CDB_K_ACT_NONE, 0));
    GV_CK(cdb_k_prepend_add(be, s->h, d->cls, d->pos, n, N, W, s->x));
    GV_CK(cdb_k_layernorm(be, s->x, d->ln_pre_g, d->ln_pre_b, s->x, rows, W, 1e-5f));
    for (int l = 0; l < sh.layers; l++) {
        const gv_block_d *b = &d->blk[l];
        GV_CK(cdb_k_layernorm(be, s->x, b->ln1_g, b->ln1_b, s->h, rows, W, 1e-5f));
        GV_CK(cdb_k_gemm(be, s->h, b->qkv_w, b->qkv_b, s->qkv, rows, 3 * W, W, CDB_K_ACT_NONE, 0));
        GV_CK(cdb_k_attention(be, s->qkv, s->attn, n, S, sh.heads, hd, 0));
        GV_CK(cdb_k_gemm(be, s->attn, b->out_w, b->out_b, s->x, rows, W, W, CDB_K_ACT_NONE, 1));
        GV_CK(cdb_k_layernorm(be, s->x, b->ln2_g, b->ln2_b, s->h, rows, W, 1e-5f));
        GV_CK(cdb_k_gemm(be, s->h, b->fc_w, b->fc_b, s->mlp, rows, sh.mlp, W,
                         CDB_K_ACT_QUICK_GELU, 0));
        GV_CK(cdb_k_gemm(be, s->mlp, b->pr_w, b->pr_b, s->x, rows, W, sh.mlp, CDB_K_ACT_NONE, 1));
    }
    GV_CK(cdb_k_gather_rows(be, s->x, pool, n, W, s->pooled));
    GV_CK(cdb_k_layernorm(be, s->pooled, d->ln_post_g, d->ln_post_b, s->pooled, n, W, 1e-5f));
    GV_CK(cdb_k_gemm(be, s->pooled, d->proj, NULL, s->emb, n, sh.embed, W, CDB_K_ACT_NONE, 0));
gv_done:
    free(pool);
    return rc;
}

/* Host pixels -> raw embeddings out [n, embed] (host), via host unfold + upload. */
static inline cdb_status gv_forward_host(const gv_dev *d, gv_scratch *s, const float *pixels, int n,
                                  float *out) {
    cdb_k_backend *be = d->be;
    cdb_status rc = CDB_OK;
    gv_shape sh = d->s;
    size_t G = (size_t)(sh.size / sh.patch), nc = (size_t)n * G * G * 3 * sh.patch * sh.patch;
    float *cols = (float *)malloc(nc * sizeof(float));
    if (!cols) return CDB_NOMEM;
    gv_unfold(sh, pixels, n, cols);
    GV_CK(cdb_k_buf_upload(be, s->cols, 0, cols, nc));
    GV_CK(gv_forward_cols(d, s, n));
    GV_CK(cdb_k_buf_download(be, s->emb, 0, out, (size_t)n * sh.embed));
gv_done:
    free(cols);
    return rc;
}

static inline double gv_cosine(const float *a, const float *b, size_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return (aa > 0 && bb > 0) ? ab / sqrt(aa * bb) : 0.0;
}

#endif /* CDB_TESTS_GPU_VIT_H */
