/*
** test_cuda_kernels.c: the GPU path against the CPU references.
**
**  - each CUDA kernel vs its CPU counterpart on random inputs of odd sizes
**    (fp16 conversion bit-exact; GEMM, LayerNorm, activations, softmax, attention,
**    embeddings, L2 norm within fp16-operand tolerances);
**  - every op of the CUDA backend vs the scalar reference backend (NMSE);
**  - cdb_k_patchify (the ViT's patch unfolding on the device) vs the reference;
**  - the device's image transform (cdb_kc_pp_image) vs cdb_image_preprocess, bit for bit;
**  - a ViT-B/32-shaped model with random weights (gpu_model.h) through the encoder
**    (encoder/clip.c, the product's one graph), cpu vs cuda: cosine >= 0.9995 for
**    every item;
**  - SigLIP2 B/16-shaped random weights (made by bench/siglip_baseline.py into
**    $CLIPDB_GPU_SIGLIP_DIR; skipped without it), cpu vs cuda, images and a text;
**  - the encoder on the fixture models (tests/golden/models), device cpu vs cuda,
**    images and texts: cosine >= 0.9995 per item; the stored form (fp32
**    normalized, then fp16) has the same format and no NaN/Inf; the same for the
**    ModifiedResNet fixtures (rn_*), after its ops (im2col, avgpool, ReLU,
**    prepend_mean_add, attention_q) against the scalar reference backend.
**
** Exits 77 (skip) when no usable GPU is present.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "encoder/encoder_int.h"
#include "gpu_model.h"
#include "kernel_test_util.h"
#include "kernels/cuda/cuda_int.h"
#include "kernels/cuda/pp_elem.h"
#include "kernels/kernels.h"

#define COS_MIN 0.9995

/* fp16 rounding of a host vector (what the GPU's operands are). */
static void round_f16(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = cdb_k_f16_to_f32_1(cdb_k_f32_to_f16_1(v[i]));
}

/* ---- raw kernels through a device context ---------------------------------------- */

static cdb_kc_ctx *g_ctx;
static cdb_kc_ctx *ctx(void) {
    if (!g_ctx && cdb_kc_ctx_open(0, &g_ctx) != CDB_OK) {
        fprintf(stderr, "    cdb_kc_ctx_open: %s\n", cdb_errmsg());
        return NULL;
    }
    return g_ctx;
}
static void *dup_to_dev(const void *h, size_t bytes) {
    void *d = NULL;
    if (cdb_kc_malloc(ctx(), bytes, &d) != CDB_OK) return NULL;
    if (cdb_kc_upload(ctx(), d, h, bytes) != CDB_OK) return NULL;
    return d;
}
static void *dev_alloc(size_t bytes) {
    void *d = NULL;
    return cdb_kc_malloc(ctx(), bytes, &d) == CDB_OK ? d : NULL;
}

CDB_TEST(k_fp16_conversion_bit_exact) {
    size_t n = 65536 + 777;
    float *f = malloc(n * 4), *back = malloc(n * 4), *ref32 = malloc(n * 4);
    uint16_t *h = malloc(n * 2), *ref16 = malloc(n * 2), *allh = malloc(65536 * 2);
    void *df, *dh;
    NEED_GPU();
    CHECK(ctx() != NULL);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)(frand() * 2147483647.0f) * 2654435761u;
        memcpy(&f[i], &u, 4); /* arbitrary bit patterns: NaN, Inf, subnormals, huge */
    }
    f[0] = 65520.f;
    f[1] = -65519.99f;
    f[2] = 5.96e-8f;
    f[3] = 2.98e-8f;
    cdb_k_f32_to_f16_scalar(f, ref16, n);
    df = dup_to_dev(f, n * 4);
    dh = dev_alloc(n * 2);
    CHECK(df && dh);
    CHECK_OK(cdb_kc_f32_to_f16(ctx(), df, dh, n));
    CHECK_OK(cdb_kc_download(ctx(), h, dh, n * 2));
    for (size_t i = 0; i < n; i++)
        CHECK_MSG(h[i] == ref16[i], "f32->f16 %zu (%08x): gpu %04x ref %04x", i,
                  ((uint32_t *)f)[i], h[i], ref16[i]);
    for (int i = 0; i < 65536; i++) allh[i] = (uint16_t)i;
    cdb_k_f16_to_f32_scalar(allh, ref32, 65536);
    CHECK_OK(cdb_kc_upload(ctx(), dh, allh, 65536 * 2));
    CHECK_OK(cdb_kc_f16_to_f32(ctx(), dh, df, 65536));
    CHECK_OK(cdb_kc_download(ctx(), back, df, 65536 * 4));
    CHECK(memcmp(back, ref32, 65536 * 4) == 0);
    cdb_kc_free(ctx(), df);
    cdb_kc_free(ctx(), dh);
    free(f), free(back), free(ref32), free(h), free(ref16), free(allh);
}

CDB_TEST(k_gemm_odd_shapes) {
    static const int shapes[][3] = {{1, 1, 1}, {37, 45, 29}, {50, 2304, 768}, {7, 13, 3072},
                                    {129, 65, 33}};
    NEED_GPU();
    CHECK(ctx() != NULL);
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int m = shapes[t][0], n = shapes[t][1], k = shapes[t][2];
        float *a = rand_vec((size_t)m * k, 1), *b = rand_vec((size_t)n * k, 1);
        float *c = malloc((size_t)m * n * 4), *ref = malloc((size_t)m * n * 4);
        uint16_t *ah = malloc((size_t)m * k * 2), *bh = malloc((size_t)n * k * 2);
        void *da, *db, *dc;
        round_f16(a, (size_t)m * k);
        round_f16(b, (size_t)n * k);
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                double s = 0;
                for (int q = 0; q < k; q++) s += (double)a[(size_t)i * k + q] * b[(size_t)j * k + q];
                ref[(size_t)i * n + j] = (float)s;
            }
        cdb_k_f32_to_f16(a, ah, (size_t)m * k);
        cdb_k_f32_to_f16(b, bh, (size_t)n * k);
        da = dup_to_dev(ah, (size_t)m * k * 2);
        db = dup_to_dev(bh, (size_t)n * k * 2);
        dc = dev_alloc((size_t)m * n * 4);
        CHECK(da && db && dc);
        /* fp32 output: only accumulation-order differences */
        CHECK_OK(cdb_kc_gemm(ctx(), m, n, k, da, db, 1, dc, 1, 1.f, 0.f));
        CHECK_OK(cdb_kc_download(ctx(), c, dc, (size_t)m * n * 4));
        CHECK_MSG(nmse(c, ref, (size_t)m * n) < 1e-10, "gemm %dx%dx%d f32 nmse %g", m, n, k,
                  nmse(c, ref, (size_t)m * n));
        /* fp16 output: plus one rounding */
        CHECK_OK(cdb_kc_gemm(ctx(), m, n, k, da, db, 1, dc, 0, 1.f, 0.f));
        {
            uint16_t *ch = malloc((size_t)m * n * 2);
            CHECK_OK(cdb_kc_download(ctx(), ch, dc, (size_t)m * n * 2));
            cdb_k_f16_to_f32(ch, c, (size_t)m * n);
            free(ch);
        }
        CHECK_MSG(nmse(c, ref, (size_t)m * n) < 1e-6, "gemm %dx%dx%d f16 nmse %g", m, n, k,
                  nmse(c, ref, (size_t)m * n));
        cdb_kc_free(ctx(), da), cdb_kc_free(ctx(), db), cdb_kc_free(ctx(), dc);
        free(a), free(b), free(c), free(ref), free(ah), free(bh);
    }
}

CDB_TEST(k_l2norm_rows) {
    int rows = 33, dim = 513;
    float *x = rand_vec((size_t)rows * dim, 3), *y = malloc((size_t)rows * dim * 4);
    int bad = -1;
    void *dx, *dbad;
    NEED_GPU();
    CHECK(ctx() != NULL);
    for (int j = 0; j < dim; j++) x[5 * dim + j] = 0;      /* zero row: left alone, counted */
    x[7 * dim + 3] = NAN;                                  /* NaN row: counted */
    for (int j = 0; j < dim; j++) x[9 * dim + j] = 1e30f;  /* huge: no overflow */
    dx = dup_to_dev(x, (size_t)rows * dim * 4);
    dbad = dev_alloc(4);
    CHECK(dx && dbad);
    bad = 0;
    CHECK_OK(cdb_kc_upload(ctx(), dbad, &bad, 4));
    CHECK_OK(cdb_kc_l2norm(ctx(), dx, rows, dim, dbad));
    CHECK_OK(cdb_kc_download(ctx(), y, dx, (size_t)rows * dim * 4));
    CHECK_OK(cdb_kc_download(ctx(), &bad, dbad, 4));
    CHECK_EQ_INT(bad, 2);
    for (int r = 0; r < rows; r++) {
        float ref[513];
        if (r == 5 || r == 7) continue;
        memcpy(ref, x + (size_t)r * dim, sizeof ref);
        CHECK_OK(cdb_k_normalize_f32(ref, dim, NULL));
        for (int j = 0; j < dim; j++)
            CHECK_NEAR(y[(size_t)r * dim + j], ref[j], 2e-7 + 2e-6 * fabsf(ref[j]));
    }
    cdb_kc_free(ctx(), dx), cdb_kc_free(ctx(), dbad);
    free(x), free(y);
}

/* ---- backend ops vs the scalar reference backend ------------------------------- */

typedef struct bpair {
    cdb_k_backend *gpu, *ref;
} bpair;

static int bpair_new(bpair *p) {
    memset(p, 0, sizeof *p);
    if (cdb_k_backend_cuda_new(0, &p->gpu) != CDB_OK) {
        fprintf(stderr, "    cuda backend: %s\n", cdb_errmsg());
        return 0;
    }
    return cdb_k_backend_cpu_ref_new(&p->ref) == CDB_OK;
}
static void bpair_free(bpair *p) {
    cdb_k_backend_free(p->gpu);
    cdb_k_backend_free(p->ref);
}
static cdb_k_buf *wup(cdb_k_backend *be, const float *v, size_t n, cdb_k_wrole role) {
    cdb_k_buf *b = NULL;
    return cdb_k_weight_upload(be, v, CDB_K_F32, n, role, 0, &b) == CDB_OK ? b : NULL;
}

CDB_TEST(be_gemm_act_accumulate) {
    static const int shapes[][3] = {{3, 5, 7}, {37, 45, 29}, {101, 96, 64}, {1, 768, 512}};
    static const cdb_k_act acts[] = {CDB_K_ACT_NONE, CDB_K_ACT_QUICK_GELU, CDB_K_ACT_GELU,
                                     CDB_K_ACT_GELU_TANH};
    bpair p;
    NEED_GPU();
    CHECK(bpair_new(&p));
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++)
        for (size_t a = 0; a < 5; a++) {
            int m = shapes[t][0], n = shapes[t][1], k = shapes[t][2], acc = a == 4;
            cdb_k_act act = acc ? CDB_K_ACT_NONE : acts[a];
            float *x = rand_vec((size_t)m * k, 1), *w = rand_vec((size_t)n * k, 0.3f),
                  *bias = rand_vec(n, 0.5f), *y0 = rand_vec((size_t)m * n, 2);
            float *out[2];
            cdb_k_backend *be[2] = {p.gpu, p.ref};
            for (int i = 0; i < 2; i++) {
                cdb_k_buf *bx = up(be[i], x, (size_t)m * k), *bw = wup(be[i], w, (size_t)n * k, CDB_K_W_MATRIX),
                          *bb = wup(be[i], bias, n, CDB_K_W_PARAM), *by = up(be[i], y0, (size_t)m * n);
                CHECK(bx && bw && bb && by);
                CHECK_OK(cdb_k_gemm(be[i], bx, bw, bb, by, m, n, k, act, acc));
                out[i] = down(be[i], by, (size_t)m * n);
                cdb_k_buf_free(be[i], bx), cdb_k_buf_free(be[i], bw);
                cdb_k_buf_free(be[i], bb), cdb_k_buf_free(be[i], by);
            }
            CHECK_MSG(nmse(out[0], out[1], (size_t)m * n) < 1e-5, "gemm %dx%dx%d act %d acc %d: nmse %g",
                      m, n, k, (int)act, acc, nmse(out[0], out[1], (size_t)m * n));
            free(out[0]), free(out[1]), free(x), free(w), free(bias), free(y0);
        }
    bpair_free(&p);
}

CDB_TEST(be_layernorm_act_add) {
    static const int shapes[][2] = {{1, 1}, {3, 7}, {51, 768}, {5, 1023}};
    bpair p;
    NEED_GPU();
    CHECK(bpair_new(&p));
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int m = shapes[t][0], n = shapes[t][1];
        size_t mn = (size_t)m * n;
        float *x = rand_vec(mn, 4), *g = rand_vec(n, 1), *b = rand_vec(n, 1), *o[2][4];
        cdb_k_backend *be[2] = {p.gpu, p.ref};
        for (size_t i = 0; i < mn; i++) x[i] += 3.0f; /* a large mean: two-pass statistics */
        for (int i = 0; i < 2; i++) {
            cdb_k_buf *bx = up(be[i], x, mn), *by = NULL, *bg = wup(be[i], g, n, CDB_K_W_PARAM),
                      *bb = wup(be[i], b, n, CDB_K_W_PARAM), *bz = up(be[i], x, mn);
            CHECK(cdb_k_buf_alloc(be[i], mn, &by) == CDB_OK && bx && bg && bb && bz);
            CHECK_OK(cdb_k_layernorm(be[i], bx, bg, bb, by, m, n, 1e-5f));
            o[i][0] = down(be[i], by, mn);
            CHECK_OK(cdb_k_layernorm(be[i], bz, bg, bb, bz, m, n, 1e-5f)); /* in place */
            o[i][1] = down(be[i], bz, mn);
            CHECK_OK(cdb_k_activate(be[i], by, mn, CDB_K_ACT_GELU));
            o[i][2] = down(be[i], by, mn);
            CHECK_OK(cdb_k_add(be[i], bz, by, mn));
            CHECK_OK(cdb_k_activate(be[i], bz, mn, CDB_K_ACT_QUICK_GELU));
            o[i][3] = down(be[i], bz, mn);
            cdb_k_buf_free(be[i], bx), cdb_k_buf_free(be[i], by);
            cdb_k_buf_free(be[i], bg), cdb_k_buf_free(be[i], bb);
            cdb_k_buf_free(be[i], bz);
        }
        for (int q = 0; q < 4; q++) {
            /* q 0 and 2 went through fp16 storage; q 1 stayed fp32 (in place) */
            double tol = (q == 1) ? 1e-10 : 1e-6;
            CHECK_MSG(nmse(o[0][q], o[1][q], mn) < tol, "%dx%d step %d: nmse %g", m, n, q,
                      nmse(o[0][q], o[1][q], mn));
            free(o[0][q]), free(o[1][q]);
        }
        free(x), free(g), free(b);
    }
    bpair_free(&p);
}

CDB_TEST(be_attention_odd) {
    static const int shapes[][5] = {/* batch seq heads head_dim causal */
                                    {1, 1, 1, 1, 0}, {2, 5, 3, 7, 0}, {3, 50, 12, 64, 0},
                                    {2, 77, 8, 64, 1}, {1, 13, 2, 24, 1}, {4, 257, 4, 16, 0}};
    bpair p;
    NEED_GPU();
    CHECK(bpair_new(&p));
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int B = shapes[t][0], T = shapes[t][1], H = shapes[t][2], D = shapes[t][3], causal = shapes[t][4];
        size_t nq = (size_t)B * T * 3 * H * D, no = (size_t)B * T * H * D;
        float *qkv = rand_vec(nq, 2), *o[2];
        cdb_k_backend *be[2] = {p.gpu, p.ref};
        for (int i = 0; i < 2; i++) {
            cdb_k_buf *bq = up(be[i], qkv, nq), *bo = NULL;
            CHECK(cdb_k_buf_alloc(be[i], no, &bo) == CDB_OK && bq);
            CHECK_OK(cdb_k_attention(be[i], bq, bo, B, T, H, D, causal));
            o[i] = down(be[i], bo, no);
            cdb_k_buf_free(be[i], bq), cdb_k_buf_free(be[i], bo);
        }
        CHECK_MSG(nmse(o[0], o[1], no) < 2e-5, "attention B%d T%d H%d D%d causal %d: nmse %g", B, T,
                  H, D, causal, nmse(o[0], o[1], no));
        free(o[0]), free(o[1]), free(qkv);
    }
    bpair_free(&p);
}

CDB_TEST(be_embed_gather) {
    int V = 301, C = 13, W = 37, n_rows = 2 * C, B = 3, N = 9;
    bpair p;
    int32_t ids[26], rows[5] = {0, 25, 7, 7, 13};
    float *table = rand_vec((size_t)V * W, 1), *pos = rand_vec((size_t)C * W, 1);
    float *patches = rand_vec((size_t)B * N * W, 1), *cls = rand_vec(W, 1),
          *ppos = rand_vec((size_t)(N + 1) * W, 1);
    float *o[2][3];
    cdb_k_backend *be[2];
    NEED_GPU();
    CHECK(bpair_new(&p));
    be[0] = p.gpu;
    be[1] = p.ref;
    for (int i = 0; i < n_rows; i++) ids[i] = (i * 7919) % V;
    for (int i = 0; i < 2; i++) {
        cdb_k_buf *bt = wup(be[i], table, (size_t)V * W, CDB_K_W_EMBED),
                  *bp = wup(be[i], pos, (size_t)C * W, CDB_K_W_EMBED), *bo = NULL, *bg = NULL,
                  *bpa = up(be[i], patches, (size_t)B * N * W), *bc = wup(be[i], cls, W, CDB_K_W_EMBED),
                  *bpp = wup(be[i], ppos, (size_t)(N + 1) * W, CDB_K_W_EMBED), *bv = NULL;
        CHECK(cdb_k_buf_alloc(be[i], (size_t)n_rows * W, &bo) == CDB_OK);
        CHECK(cdb_k_buf_alloc(be[i], (size_t)5 * W, &bg) == CDB_OK);
        CHECK(cdb_k_buf_alloc(be[i], (size_t)B * (N + 1) * W, &bv) == CDB_OK);
        CHECK_OK(cdb_k_lookup_add(be[i], bt, bp, ids, n_rows, C, W, bo));
        o[i][0] = down(be[i], bo, (size_t)n_rows * W);
        CHECK_OK(cdb_k_gather_rows(be[i], bo, rows, 5, W, bg));
        o[i][1] = down(be[i], bg, (size_t)5 * W);
        CHECK_OK(cdb_k_prepend_add(be[i], bpa, bc, bpp, B, N, W, bv));
        o[i][2] = down(be[i], bv, (size_t)B * (N + 1) * W);
        cdb_k_buf_free(be[i], bt), cdb_k_buf_free(be[i], bp);
        cdb_k_buf_free(be[i], bo), cdb_k_buf_free(be[i], bg);
        cdb_k_buf_free(be[i], bpa), cdb_k_buf_free(be[i], bc);
        cdb_k_buf_free(be[i], bpp), cdb_k_buf_free(be[i], bv);
    }
    /* fp32 embeddings: exact */
    CHECK(memcmp(o[0][0], o[1][0], (size_t)n_rows * W * 4) == 0);
    CHECK(memcmp(o[0][1], o[1][1], (size_t)5 * W * 4) == 0);
    CHECK(memcmp(o[0][2], o[1][2], (size_t)B * (N + 1) * W * 4) == 0);
    for (int i = 0; i < 2; i++)
        for (int q = 0; q < 3; q++) free(o[i][q]);
    /* bad input: errors, not crashes */
    {
        cdb_k_buf *bt = wup(p.gpu, table, (size_t)V * W, CDB_K_W_EMBED), *bo = NULL;
        int32_t bad_id = V;
        CHECK(cdb_k_buf_alloc(p.gpu, (size_t)W, &bo) == CDB_OK);
        CHECK_RC(cdb_k_lookup_add(p.gpu, bt, NULL, &bad_id, 1, 1, W, bo), CDB_INVALID);
        CHECK_RC(cdb_k_gemm(p.gpu, bo, bt, NULL, bo, 1, 1, W, CDB_K_ACT_NONE, 0), CDB_INVALID);
        CHECK_RC(cdb_k_gemm(p.gpu, bt, bt, NULL, bo, 100000, 1, W, CDB_K_ACT_NONE, 0),
                 CDB_INVALID);
        cdb_k_buf_free(p.gpu, bt), cdb_k_buf_free(p.gpu, bo);
    }
    free(table), free(pos), free(patches), free(cls), free(ppos);
    bpair_free(&p);
}

CDB_TEST(be_oom_is_nomem_not_abort) {
    cdb_k_backend *be = NULL;
    cdb_k_buf *b = NULL;
    size_t fr = 0, tot = 0;
    NEED_GPU();
    CHECK_OK(cdb_k_backend_cuda_new(0, &be));
    CHECK_OK(cdb_kc_mem_info(ctx(), &fr, &tot)); /* ctx(): the same device 0 */
    CHECK(fr > 0 && tot >= fr);
    /* the graph's chunk budget: most of half the free memory, within its clamps */
    CHECK(cdb_k_scratch_bytes(be) >= ((size_t)128 << 20) &&
          cdb_k_scratch_bytes(be) <= ((size_t)8 << 30) &&
          (cdb_k_scratch_bytes(be) <= fr / 2 || cdb_k_scratch_bytes(be) == ((size_t)128 << 20)));
    /* 4x the card: cudaMalloc fails, the backend says CDB_NOMEM and stays usable */
    CHECK_RC(cdb_k_buf_alloc(be, tot, &b), CDB_NOMEM);
    CHECK(b == NULL);
    CHECK_OK(cdb_k_buf_alloc(be, 1000, &b));
    cdb_k_buf_free(be, b);
    {
        cdb_k_backend *none = (cdb_k_backend *)1;
        CHECK_RC(cdb_k_backend_cuda_new(1 << 20, &none), CDB_UNSUPPORTED);
        CHECK(none == NULL);
    }
    cdb_k_backend_free(be);
}

/* ---- whole towers -------------------------------------------------------------------- */

/* cdb_k_patchify: the device writes the reference's values rounded to fp16 (a GEMM
** operand), bit for bit. */
CDB_TEST(be_patchify) {
    static const int shapes[][5] = {{2, 3, 224, 224, 32}, {1, 3, 10, 7, 3}, {3, 3, 42, 42, 14}};
    bpair p;
    NEED_GPU();
    CHECK(bpair_new(&p));
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int n = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3];
        int ps = shapes[t][4];
        size_t nx = (size_t)n * c * h * w, ncol = (size_t)n * (h / ps) * (w / ps) * c * ps * ps;
        float *x = rand_vec(nx, 3), *o[2];
        cdb_k_backend *be[2] = {p.gpu, p.ref};
        for (int i = 0; i < 2; i++) {
            cdb_k_buf *bx = up(be[i], x, nx), *bc = NULL;
            CHECK(bx && cdb_k_buf_alloc(be[i], ncol, &bc) == CDB_OK);
            CHECK_OK(cdb_k_patchify(be[i], bx, n, c, h, w, ps, bc));
            CHECK_RC(cdb_k_patchify(be[i], bx, n, c, h, w, h + 1, bc), CDB_INVALID);
            o[i] = down(be[i], bc, ncol);
            cdb_k_buf_free(be[i], bx), cdb_k_buf_free(be[i], bc);
        }
        round_f16(o[1], ncol);
        CHECK_MSG(!memcmp(o[0], o[1], ncol * sizeof(float)), "patchify case %zu differs", t);
        free(o[0]), free(o[1]), free(x);
    }
    bpair_free(&p);
}

/* The device's image transform (cdb_kc_pp_image) against cdb_image_preprocess: the
** same floats, bit for bit (pp_elem.h's integer arithmetic; test_pp_device emulates it). */
CDB_TEST(k_preprocess_equals_cpu) {
    static const int shapes[][4] = {{640, 480, 224, 3}, {500, 224, 224, 3}, {224, 301, 224, 1},
                                    {224, 224, 224, 3}, {37, 53, 64, 3},    {4000, 3000, 224, 3}};
    NEED_GPU();
    CHECK(ctx() != NULL);
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int w = shapes[t][0], h = shapes[t][1], size = shapes[t][2], nch = shapes[t][3];
        size_t nsrc = (size_t)w * h * nch, nout = (size_t)3 * size * size;
        cdb_image img;
        cdb_preprocess_params p = cdb_preprocess_params_default();
        cdb_pp_plan pl;
        cdb_pp_geom g;
        uint8_t *px = malloc(nsrc);
        float *want = malloc(nout * 4), *got = malloc(nout * 4);
        void *d_src, *d_tmp = NULL, *d_out, *d_bh = NULL, *d_kkh = NULL, *d_bv = NULL;
        void *d_kkv = NULL, *d_lut;
        for (size_t i = 0; i < nsrc; i++) px[i] = (uint8_t)(frand() * 127.5f + 127.5f);
        memset(&img, 0, sizeof img);
        img.width = w, img.height = h, img.channels = nch, img.bits = 8, img.pixels = px;
        p.size = size;
        CHECK_OK(cdb_image_preprocess(&img, &p, want, NULL));
        CHECK_OK(cdb_pp_plan_make(w, h, &p, 1, &pl));
        memset(&g, 0, sizeof g);
        g.w = w, g.h = h, g.nch = nch, g.stride = (size_t)w * nch;
        g.size = size, g.left = pl.left, g.top = pl.top, g.y0 = pl.y0, g.rows = pl.y1 - pl.y0;
        g.kh = pl.need_h ? pl.kh : 0, g.kv = pl.need_v ? pl.kv : 0;
        d_src = dup_to_dev(px, nsrc);
        d_out = dev_alloc(nout * 4);
        d_lut = dup_to_dev(pl.lut, sizeof pl.lut);
        if (g.kh) {
            d_bh = dup_to_dev(pl.bh, (size_t)2 * size * sizeof(int));
            d_kkh = dup_to_dev(pl.kkh, (size_t)size * g.kh * 4);
            d_tmp = dev_alloc((size_t)g.rows * size * nch);
        }
        if (g.kv) {
            d_bv = dup_to_dev(pl.bv, (size_t)2 * size * sizeof(int));
            d_kkv = dup_to_dev(pl.kkv, (size_t)size * g.kv * 4);
        }
        g.bh = d_bh, g.kkh = d_kkh, g.bv = d_bv, g.kkv = d_kkv, g.lut = d_lut;
        CHECK(d_src && d_out && d_lut);
        CHECK_OK(cdb_kc_pp_image(ctx(), &g, d_src, d_tmp, d_out));
        CHECK_OK(cdb_kc_download(ctx(), got, d_out, nout * 4));
        CHECK_MSG(!memcmp(want, got, nout * 4), "%dx%d nch %d: device pixels differ", w, h, nch);
        cdb_kc_free(ctx(), d_src), cdb_kc_free(ctx(), d_tmp), cdb_kc_free(ctx(), d_out);
        cdb_kc_free(ctx(), d_bh), cdb_kc_free(ctx(), d_kkh), cdb_kc_free(ctx(), d_bv);
        cdb_kc_free(ctx(), d_kkv), cdb_kc_free(ctx(), d_lut);
        cdb_pp_plan_free(&pl);
        free(px), free(want), free(got);
    }
}

/* The product's graph (encoder/clip.c through cdb_model_open) on a ViT-B/32-shaped
** model with random weights (gpu_model.h), cuda vs cpu. */
CDB_TEST(vit_b32_random_weights_cpu_vs_gpu) {
    char path[700];
    cdb_model *m[2] = {NULL, NULL};
    int n = 6;
    size_t npix = (size_t)n * 3 * GM_SIZE * GM_SIZE;
    float *pix = rand_vec(npix, 2), *out[2];
    NEED_GPU();
    CHECK(tmpdir()[0] && gm_write_vitb32(tmpdir(), 1234, path));
    for (int i = 0; i < 2; i++) {
        cdb_model_params mp = cdb_model_params_default();
        mp.device.kind = i == 0 ? CDB_K_DEVICE_CUDA : CDB_K_DEVICE_CPU;
        mp.load_text = 0;
        CHECK_OK(cdb_model_open(path, &mp, &m[i]));
        out[i] = malloc((size_t)n * GM_EMBED * 4);
        CHECK_OK(cdb_encode_pixels(m[i], pix, n, 0, out[i]));
    }
    for (int j = 0; j < n; j++) {
        double c = cosine(out[0] + (size_t)j * GM_EMBED, out[1] + (size_t)j * GM_EMBED, GM_EMBED);
        printf("    ViT-B/32 random weights, image %d: cosine(cpu, gpu) = %.7f\n", j, c);
        CHECK_MSG(c >= COS_MIN, "image %d: cosine %.7f < %.4f", j, c, COS_MIN);
    }
    for (int i = 0; i < 2; i++) {
        cdb_model_close(m[i]);
        free(out[i]);
    }
    remove(path);
    free(pix);
}

/* The same on SigLIP2 B/16-shaped random weights (HF layout, F16, both towers: vocabulary
** 256000, width 768, 12 + 12 layers, patch 16, the MAP head), made by
** bench/siglip_baseline.py --make (PyTorch) into $CLIPDB_GPU_SIGLIP_DIR: tests/gpu/run.sh
** makes it; skipped without it. Four images and one text, cuda vs cpu. */
CDB_TEST(siglip_b16_random_weights_cpu_vs_gpu) {
    static const int32_t ids0[] = {2, 651, 5929, 611, 476, 8318, 578, 476, 15982, 235265, 1};
    const char *dir = getenv("CLIPDB_GPU_SIGLIP_DIR");
    cdb_model *m[2] = {NULL, NULL};
    const int n = 4;
    int32_t ids[64];
    float *pix, *out[2], *txt[2];
    int E, isz;
    NEED_GPU();
    if (!dir || !*dir) CDB_SKIP("CLIPDB_GPU_SIGLIP_DIR is not set (tests/gpu/run.sh makes it)");
    for (int i = 0; i < 64; i++) ids[i] = i < 11 ? ids0[i] : 1;
    for (int i = 0; i < 2; i++) {
        cdb_model_params mp = cdb_model_params_default();
        mp.device.kind = i == 0 ? CDB_K_DEVICE_CUDA : CDB_K_DEVICE_CPU;
        CHECK_OK(cdb_model_open(dir, &mp, &m[i]));
    }
    E = cdb_model_get_info(m[0])->embed_dim, isz = cdb_model_get_info(m[0])->image_size;
    CHECK(cdb_model_get_info(m[0])->context_length == 64);
    pix = rand_vec((size_t)n * 3 * isz * isz, 2);
    for (int i = 0; i < 2; i++) {
        out[i] = malloc((size_t)n * E * 4), txt[i] = malloc((size_t)E * 4);
        CHECK_OK(cdb_encode_pixels(m[i], pix, n, 0, out[i]));
        CHECK_OK(cdb_encode_tokens(m[i], ids, 1, 0, txt[i]));
    }
    for (int j = 0; j <= n; j++) {
        const float *a = j < n ? out[0] + (size_t)j * E : txt[0];
        const float *b = j < n ? out[1] + (size_t)j * E : txt[1];
        double c = cosine(a, b, E);
        printf("    SigLIP2 B/16 random weights, %s %d: siglip cosine(cpu, gpu) = %.7f\n",
               j < n ? "image" : "text", j < n ? j : 0, c);
        CHECK_MSG(c >= COS_MIN, "SigLIP %s %d: cosine %.7f < %.4f", j < n ? "image" : "text", j,
                  c, COS_MIN);
    }
    for (int i = 0; i < 2; i++) {
        cdb_model_close(m[i]);
        free(out[i]), free(txt[i]);
    }
    free(pix);
}

/* The checkout: CLIPDB_SOURCE_DIR (set by tests/gpu/run.sh, for prebuilt binaries
** run elsewhere) or the one this was built from. */
static const char *src_dir(void) {
    const char *e = getenv("CLIPDB_SOURCE_DIR");
    return e && *e ? e : CDB_SOURCE_DIR;
}
/* Opens the model at path on CUDA (m[0]) and on the CPU (m[1]). */
static void open_on_both(cdb_test_ctx *cdb_t_, const char *path, cdb_model *m[2]) {
    for (int i = 0; i < 2; i++) {
        cdb_model_params mp = cdb_model_params_default();
        mp.device.kind = i == 0 ? CDB_K_DEVICE_CUDA : CDB_K_DEVICE_CPU;
        CHECK_OK(cdb_model_open(path, &mp, &m[i]));
    }
}

/* e[i] and t[i] (heap, E floats a row): n_img images and n_txt texts through m[i];
** every CUDA row is the CPU row up to cosine COS_MIN (name and verbose: the messages). */
static void embed_on_both(cdb_test_ctx *cdb_t_, cdb_model *m[2], const float *pixels, int n_img,
                          const int32_t *tokens, int n_txt, int E, const char *name, int verbose,
                          float *e[2], float *t[2]) {
    for (int i = 0; i < 2; i++) {
        e[i] = malloc((size_t)n_img * E * 4);
        t[i] = malloc((size_t)n_txt * E * 4);
        CHECK_OK(cdb_encode_pixels(m[i], pixels, n_img, 1, e[i]));
        CHECK_OK(cdb_encode_tokens(m[i], tokens, n_txt, 1, t[i]));
    }
    for (int j = 0; j < n_img; j++) {
        double c = cosine(e[0] + (size_t)j * E, e[1] + (size_t)j * E, E);
        if (verbose) printf("     %s image %d: cuda vs cpu cosine %.7f\n", name, j, c);
        CHECK_MSG(c >= COS_MIN, "%s image %d: cosine %.7f", name, j, c);
    }
    for (int j = 0; j < n_txt; j++) {
        double c = cosine(t[0] + (size_t)j * E, t[1] + (size_t)j * E, E);
        CHECK_MSG(c >= COS_MIN, "%s text %d: cosine %.7f", name, j, c);
    }
}


/* A file of tests/golden/models, as test_read_file gives it (NULL when missing). */
static void *read_gold(const char *name, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/models/%s", src_dir(), name);
    return test_read_file(path, n);
}

CDB_TEST(encoder_fixtures_cpu_vs_gpu) {
    /* the CLIP fixtures share pixels.f32 / tokens.i32, SigLIP's (both layouts) their own */
    static const char *models[] = {"openai_qgelu", "openai_f16.safetensors", "hf_gelu", "hf_bf16",
                                   "siglip_hf", "siglip_oc"};
    char path[4096];
    size_t npx = 0, ntok = 0;
    float *pixels, *e[2], *t[2];
    int32_t *tokens;
    int n_models = 0;
    NEED_GPU();
    pixels = (float *)read_gold("pixels.f32", &npx);
    tokens = (int32_t *)read_gold("tokens.i32", &ntok);
    CHECK_MSG(pixels && tokens, "fixtures missing in %s/tests/golden/models", src_dir());
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        cdb_model *m[2] = {NULL, NULL};
        const cdb_model_info *info;
        int n_img, n_txt, E;
        if (!strncmp(models[mi], "siglip", 6) && pixels && tokens) {
            free(pixels), free(tokens);
            pixels = (float *)read_gold("siglip_pixels.f32", &npx);
            tokens = (int32_t *)read_gold("siglip_tokens.i32", &ntok);
            CHECK(pixels && tokens);
        }
        snprintf(path, sizeof path, "%s/tests/golden/models/%s", src_dir(), models[mi]);
        CHECK_CALL(open_on_both(cdb_t_, path, m));
        info = cdb_model_get_info(m[1]);
        E = info->embed_dim;
        n_img = (int)(npx / 4 / (3 * (size_t)info->image_size * info->image_size));
        n_txt = (int)(ntok / 4 / (size_t)info->context_length);
        CHECK(n_img > 0 && n_txt > 0);
        CHECK_CALL(
            embed_on_both(cdb_t_, m, pixels, n_img, tokens, n_txt, E, models[mi], 0, e, t));
        /* Stored form: the same function stores both; same length, finite, unit norm. */
        for (int j = 0; j < n_img; j++) {
            uint16_t *v[2];
            for (int i = 0; i < 2; i++) {
                v[i] = malloc((size_t)E * 2);
                CHECK_OK(cdb_k_normalize_to_f16(e[i] + (size_t)j * E, (size_t)E, v[i]));
                for (int q = 0; q < E; q++) CHECK(((v[i][q] >> 10) & 0x1f) != 0x1f);
                CHECK_NEAR(cdb_k_l2norm_f16(v[i], (size_t)E), 1.0, 2e-3);
            }
            CHECK(cdb_k_cosine_f16(v[0], v[1], (size_t)E) >= COS_MIN);
            free(v[0]), free(v[1]);
        }
        for (int i = 0; i < 2; i++) {
            free(e[i]), free(t[i]);
            cdb_model_close(m[i]);
        }
        n_models++;
    }
    CHECK(n_models > 0);
    free(pixels), free(tokens);
}

/* ---- the ModifiedResNet ops and towers --------------------------------------------- */

CDB_TEST(be_resnet_ops) {
    /* n h w c k stride pad (im2col); avgpool uses n h w c and s = stride + 1 */
    static const int conv[][7] = {{1, 1, 1, 1, 1, 1, 0}, {2, 7, 5, 3, 3, 2, 1},
                                  {1, 9, 9, 17, 3, 1, 1}, {4, 56, 56, 64, 3, 1, 1}};
    /* batch hw width heads n_q (prepend_mean_add + attention_q) */
    static const int pool[][5] = {{1, 1, 64, 1, 1}, {3, 49, 2048, 32, 1}, {2, 9, 21, 3, 2}};
    bpair p;
    cdb_k_backend *be[2];
    NEED_GPU();
    CHECK(bpair_new(&p));
    be[0] = p.gpu, be[1] = p.ref;
    for (size_t t = 0; t < sizeof conv / sizeof conv[0]; t++) {
        int n = conv[t][0], h = conv[t][1], w = conv[t][2], c = conv[t][3], k = conv[t][4];
        int st = conv[t][5], pad = conv[t][6], s = st + 1;
        int ho = (h + 2 * pad - k) / st + 1, wo = (w + 2 * pad - k) / st + 1;
        size_t nin = (size_t)n * h * w * c, ncol = (size_t)n * ho * wo * k * k * c;
        size_t npool = (size_t)n * (h / s) * (w / s) * c;
        float *x = rand_vec(nin, 2), *o[2][3];
        for (int i = 0; i < 2; i++) {
            cdb_k_buf *bx = up(be[i], x, nin), *bc = NULL, *bp = NULL, *by = NULL;
            CHECK(bx && cdb_k_buf_alloc(be[i], ncol, &bc) == CDB_OK &&
                  cdb_k_buf_alloc(be[i], npool ? npool : 1, &bp) == CDB_OK &&
                  cdb_k_buf_alloc(be[i], nin, &by) == CDB_OK);
            CHECK_OK(cdb_k_im2col(be[i], bx, n, h, w, c, k, st, pad, bc));
            o[i][0] = down(be[i], bc, ncol);
            if (npool) CHECK_OK(cdb_k_avgpool(be[i], bx, n, h, w, c, s, bp));
            o[i][1] = down(be[i], bp, npool);
            CHECK_OK(cdb_k_buf_upload(be[i], by, 0, x, nin));
            CHECK_OK(cdb_k_activate(be[i], by, nin, CDB_K_ACT_RELU));
            o[i][2] = down(be[i], by, nin);
            cdb_k_buf_free(be[i], bx), cdb_k_buf_free(be[i], bc);
            cdb_k_buf_free(be[i], bp), cdb_k_buf_free(be[i], by);
        }
        /* im2col writes fp16 (a GEMM operand); avgpool and ReLU keep fp32 here */
        double e_col = nmse(o[0][0], o[1][0], ncol), e_pool = nmse(o[0][1], o[1][1], npool);
        CHECK_MSG(e_col < 1e-6, "im2col case %zu: nmse %g", t, e_col);
        CHECK_MSG(e_pool < 1e-12, "avgpool case %zu: nmse %g", t, e_pool);
        CHECK(!memcmp(o[0][2], o[1][2], nin * sizeof(float)));
        for (int i = 0; i < 2; i++) free(o[i][0]), free(o[i][1]), free(o[i][2]);
        free(x);
    }
    for (size_t t = 0; t < sizeof pool / sizeof pool[0]; t++) {
        int B = pool[t][0], HW = pool[t][1], W = pool[t][2], H = pool[t][3], NQ = pool[t][4];
        int S = HW + 1;
        size_t ntok = (size_t)B * S * W, nq = (size_t)B * NQ * W, nkv = (size_t)B * S * 2 * W;
        float *x = rand_vec((size_t)B * HW * W, 2), *pos = rand_vec((size_t)S * W, 1);
        float *q = rand_vec(nq, 2), *kv = rand_vec(nkv, 2), *o[2][2];
        for (int i = 0; i < 2; i++) {
            cdb_k_buf *bx = up(be[i], x, (size_t)B * HW * W), *bp = wup(be[i], pos, (size_t)S * W,
                                                                          CDB_K_W_EMBED);
            cdb_k_buf *bq = up(be[i], q, nq), *bkv = up(be[i], kv, nkv), *bt = NULL, *bo = NULL;
            CHECK(bx && bp && bq && bkv && cdb_k_buf_alloc(be[i], ntok, &bt) == CDB_OK &&
                  cdb_k_buf_alloc(be[i], nq, &bo) == CDB_OK);
            CHECK_OK(cdb_k_prepend_mean_add(be[i], bx, bp, B, HW, W, bt));
            CHECK_OK(cdb_k_attention_q(be[i], bq, bkv, bo, B, NQ, S, H, W / H));
            o[i][0] = down(be[i], bt, ntok);
            o[i][1] = down(be[i], bo, nq);
            cdb_k_buf_free(be[i], bx), cdb_k_buf_free(be[i], bp);
            cdb_k_buf_free(be[i], bq), cdb_k_buf_free(be[i], bkv);
            cdb_k_buf_free(be[i], bt), cdb_k_buf_free(be[i], bo);
        }
        double e_tok = nmse(o[0][0], o[1][0], ntok), e_q = nmse(o[0][1], o[1][1], nq);
        CHECK_MSG(e_tok < 1e-12, "prepend_mean_add case %zu: nmse %g", t, e_tok);
        CHECK_MSG(e_q < 2e-5, "attention_q case %zu: nmse %g", t, e_q);
        for (int i = 0; i < 2; i++) free(o[i][0]), free(o[i][1]);
        free(x), free(pos), free(q), free(kv);
    }
    bpair_free(&p);
}

/* The ResNet fixtures (tests/golden/models/rn_*) through the encoder, cuda vs cpu. */
CDB_TEST(encoder_resnet_fixtures_cpu_vs_gpu) {
    static const struct { const char *model; int size; } fx[] = {
        {"rn_qgelu", 64}, {"rn_gelu", 96}, {"rn_openai_f16.safetensors", 64}};
    char path[4096];
    size_t ntok = 0;
    int32_t *tokens;
    NEED_GPU();
    tokens = (int32_t *)read_gold("tokens.i32", &ntok);
    CHECK_MSG(tokens != NULL, "fixtures missing in %s/tests/golden/models", src_dir());
    for (size_t mi = 0; mi < sizeof fx / sizeof fx[0]; mi++) {
        cdb_model *m[2] = {NULL, NULL};
        size_t npx = 0;
        float *pixels, *e[2], *t[2];
        int n_img, n_txt, E;
        snprintf(path, sizeof path, "%s/tests/golden/models/rn_pixels%d.f32", src_dir(),
                 fx[mi].size);
        pixels = (float *)test_read_file(path, &npx);
        CHECK(pixels != NULL);
        snprintf(path, sizeof path, "%s/tests/golden/models/%s", src_dir(), fx[mi].model);
        CHECK_CALL(open_on_both(cdb_t_, path, m));
        E = cdb_model_get_info(m[1])->embed_dim;
        CHECK_EQ_STR(cdb_model_get_info(m[0])->vision_family, "ResNet");
        n_img = (int)(npx / 4 / (3 * (size_t)fx[mi].size * fx[mi].size));
        n_txt = (int)(ntok / 4 / 77);
        CHECK_CALL(
            embed_on_both(cdb_t_, m, pixels, n_img, tokens, n_txt, E, fx[mi].model, 1, e, t));
        for (int i = 0; i < 2; i++) {
            free(e[i]), free(t[i]);
            cdb_model_close(m[i]);
        }
        free(pixels);
    }
    free(tokens);
}

CDB_TEST_MAIN(k_fp16_conversion_bit_exact,
              k_gemm_odd_shapes, k_l2norm_rows, be_gemm_act_accumulate, be_layernorm_act_add,
              be_attention_odd, be_embed_gather, be_oom_is_nomem_not_abort,
              be_patchify, k_preprocess_equals_cpu, vit_b32_random_weights_cpu_vs_gpu,
              siglip_b16_random_weights_cpu_vs_gpu,
              encoder_fixtures_cpu_vs_gpu, be_resnet_ops, encoder_resnet_fixtures_cpu_vs_gpu)
