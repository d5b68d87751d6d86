/*
** test_gemm.c: clipdb's own GEMM (kernels/cpu/gemm_int.h, a white-box test of the
** private kernel tables) on every path this machine runs (portable C always, AVX2
** and AVX-512 when the CPU has them):
**   - against a double-precision reference on odd shapes (m, n, k of 1, primes,
**     one off the tile/panel/chunk/block sizes, several K chunks), with bias,
**     accumulate and each activation: |y - ref| <= 1e-6 * (sum_k |x w| + |bias| +
**     |y0|), plus the activation's own approximation bound;
**   - batch and thread invariance: every row alone, inside shifted sub-batches and
**     permuted batches, with 1..4 threads, gives the bits of the full product;
** and through the optimized CPU backend: packed (matrix_upload) and plain weights
** give identical bits and read back exactly; attention rows are the same alone
** or in a batch, with any thread count, and causal rows do not depend on the
** sequence length; the three-row attention kernel gives each row the one-row
** kernel's bits; act() gives the same bits whatever range it is handed.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#define KTU_SEED 0x243F6A8885A308D3ull
#include "kernel_test_util.h"
#include "kernels/cpu/gemm_int.h"
#include "kernels/kernels.h"


static double act_d(double x, cdb_k_act a) {
    switch (a) {
    case CDB_K_ACT_QUICK_GELU: return x / (1.0 + exp(-1.702 * x));
    case CDB_K_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case CDB_K_ACT_RELU: return x < 0 ? 0.0 : x;
    case CDB_K_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

static float *pack(const cdb_gemm_kern *K, const float *w, int n, int k) {
    float *p = malloc(cdb_gemm_packed_floats(n, k, K->nr) * sizeof(float));
    float *row = malloc((size_t)k * sizeof(float));
    cdb_gemm_pack_b(w, CDB_K_F32, n, k, K->nr, row, p);
    free(row);
    return p;
}

static const cdb_gemm_kern *path(int isa) { return cdb_gemm_kern_for((cdb_k_isa)isa); }

CDB_TEST(gemm_vs_reference_every_path) {
    static const int shapes[][3] = {/* m, n, k */
                                    {1, 1, 1},     {1, 7, 13},    {5, 3, 17},     {6, 16, 256},
                                    {7, 17, 257},  {13, 33, 255}, {31, 97, 600},  {145, 31, 97},
                                    {150, 65, 513}, {2, 1536, 64}, {37, 5, 1031}};
    int n_paths = 0;
    for (int isa = 0; isa <= CDB_K_ISA_AVX512; isa++) {
        const cdb_gemm_kern *K = path(isa);
        double worst = 0;
        if (!K) continue;
        n_paths++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int act = 0; act < 4; act++)
                for (int acc = 0; acc < 2; acc++)
                    for (int hasb = 0; hasb < 2; hasb++) {
                        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                        float *x, *w, *b, *y0, *y, *wp;
                        if (acc && act) continue;
                        x = rand_vec((size_t)m * k, 2), w = rand_vec((size_t)n * k, 0.5f);
                        b = rand_vec(n, 1), y0 = rand_vec((size_t)m * n, 1);
                        y = malloc((size_t)m * n * sizeof(float));
                        memcpy(y, y0, (size_t)m * n * sizeof(float));
                        wp = pack(K, w, n, k);
                        CHECK_OK(cdb_gemm_run(K, x, wp, hasb ? b : NULL, y, m, n, k,
                                              (cdb_k_act)act, acc, 2));
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < n; j++) {
                                double sd = 0, mag = 0, ref, err, tol;
                                for (int l = 0; l < k; l++) {
                                    double pr = (double)x[(size_t)i * k + l] * w[(size_t)j * k + l];
                                    sd += pr, mag += fabs(pr);
                                }
                                if (hasb) sd += b[j], mag += fabs(b[j]);
                                if (acc) sd += y0[(size_t)i * n + j], mag += fabs(y0[(size_t)i * n + j]);
                                ref = act_d(sd, (cdb_k_act)act);
                                err = fabs(y[(size_t)i * n + j] - ref);
                                /* the sum's bound, through the activation (slope < 1.13),
                                ** plus exp/erf's approximation (~2e-7 of |pre-activation|) */
                                tol = 1e-6 * mag * (act ? 1.13 : 1.0) + (act ? 2e-7 * fabs(sd) : 0) +
                                      1e-37;
                                if (err / tol > worst) worst = err / tol;
                                if (err > tol) {
                                    CHECK_MSG(0, "%s %dx%dx%d act=%d acc=%d bias=%d [%d,%d]: %.9g vs "
                                              "%.9g (tol %.3g)", K->isa, m, n, k, act, acc, hasb, i,
                                              j, y[(size_t)i * n + j], ref, tol);
                                    i = m, j = n;
                                }
                            }
                        free(x), free(w), free(b), free(y0), free(y), free(wp);
                    }
        printf("     %s path: worst error / bound = %.3f\n", K->isa, worst);
    }
    CHECK(n_paths >= 1);
}

/* Rows of y (m x n) against the same rows of the full product, bit for bit. */
static int rows_equal(const float *full, const int *rows, int nr, const float *y, int n) {
    for (int r = 0; r < nr; r++)
        if (memcmp(full + (size_t)rows[r] * n, y + (size_t)r * n, (size_t)n * sizeof(float)))
            return 0;
    return 1;
}

CDB_TEST(gemm_rows_invariant_to_batch_and_threads) {
    /* 5 row blocks (6 or 8 with the threads: each also cut into panel ranges), 13 AVX2
    ** panels (a partial last quad), a panel edge, 3 K chunks */
    const int M = 700, N = 201, K_ = 700;
    float *x = rand_vec((size_t)M * K_, 1), *w = rand_vec((size_t)N * K_, 0.2f);
    float *b = rand_vec(N, 1), *y0 = rand_vec((size_t)M * N, 1);
    float *full = malloc((size_t)M * N * sizeof(float)), *y = malloc((size_t)M * N * sizeof(float));
    float *xs = malloc((size_t)M * K_ * sizeof(float));
    int *rows = malloc((size_t)M * sizeof(int));
    for (int isa = 0; isa <= CDB_K_ISA_AVX512; isa++) {
        const cdb_gemm_kern *K = path(isa);
        float *wp;
        if (!K) continue;
        wp = pack(K, w, N, K_);
        for (int mode = 0; mode < 2; mode++) { /* GELU + bias; accumulate + bias */
            cdb_k_act act = mode ? CDB_K_ACT_NONE : CDB_K_ACT_GELU;
            int ok = 1;
            memcpy(full, y0, (size_t)M * N * sizeof(float));
            CHECK_OK(cdb_gemm_run(K, x, wp, b, full, M, N, K_, act, mode, 1));
            for (int t = 1; t <= 4 && ok; t++)
                for (int trial = 0; trial < 12 && ok; trial++) {
                    /* sub-batches of 1, 2, 5, 6, 7, 143..147, 33 rows at shifted offsets,
                    ** and a permutation of every row */
                    static const int lens[12] = {1, 2, 5, 6, 7, 143, 144, 145, 146, 147, 33, 700};
                    int nrow = lens[trial];
                    for (int r = 0; r < nrow; r++)
                        rows[r] = trial == 11 ? (r * 37 + 11) % M : (r + trial * 13 + t) % M;
                    for (int r = 0; r < nrow; r++) {
                        memcpy(xs + (size_t)r * K_, x + (size_t)rows[r] * K_, (size_t)K_ * sizeof(float));
                        memcpy(y + (size_t)r * N, y0 + (size_t)rows[r] * N, (size_t)N * sizeof(float));
                    }
                    CHECK_OK(cdb_gemm_run(K, xs, wp, b, y, nrow, N, K_, act, mode, t));
                    ok = rows_equal(full, rows, nrow, y, N);
                    CHECK_MSG(ok, "%s mode %d threads %d batch of %d: rows differ", K->isa, mode, t,
                              nrow);
                }
        }
        free(wp);
    }
    free(x), free(w), free(b), free(y0), free(full), free(y), free(xs), free(rows);
}

CDB_TEST(packed_and_plain_weights_agree) {
    const int m = 19, n = 45, k = 300;
    cdb_k_backend *be = NULL;
    float *x = rand_vec((size_t)m * k, 1), *w = rand_vec((size_t)n * k, 1), *bias = rand_vec(n, 1);
    float *r1 = malloc((size_t)m * n * 4), *r2 = malloc((size_t)m * n * 4);
    float *back = malloc((size_t)n * k * 4), *wf16 = malloc((size_t)n * k * 4);
    uint16_t *h = malloc((size_t)n * k * 2);
    cdb_k_buf *bx, *bp = NULL, *bw = NULL, *bb = NULL, *by1 = NULL, *by2 = NULL, *bh = NULL;
    CHECK_OK(cdb_k_backend_cpu_new(3, &be));
    printf("     gemm path: %s\n", cdb_k_cpu_gemm_path());
    bx = up(be, x, (size_t)m * k);
    size_t before = cdb_k_cpu_packed_bytes();
    CHECK_OK(cdb_k_matrix_upload(be, w, CDB_K_F32, n, k, CDB_K_UPLOAD_BORROW, &bp));
    CHECK(cdb_k_cpu_packed_bytes() - before >= (size_t)n * k * 4);
    CHECK_OK(cdb_k_weight_upload(be, w, CDB_K_F32, (size_t)n * k, CDB_K_W_MATRIX, 0, &bw));
    CHECK_OK(cdb_k_weight_upload(be, bias, CDB_K_F32, n, CDB_K_W_PARAM, 0, &bb));
    CHECK_OK(cdb_k_buf_alloc(be, (size_t)m * n, &by1));
    CHECK_OK(cdb_k_buf_alloc(be, (size_t)m * n, &by2));
    CHECK_OK(cdb_k_gemm(be, bx, bp, bb, by1, m, n, k, CDB_K_ACT_QUICK_GELU, 0));
    CHECK_OK(cdb_k_gemm(be, bx, bw, bb, by2, m, n, k, CDB_K_ACT_QUICK_GELU, 0));
    CHECK_OK(cdb_k_buf_download(be, by1, 0, r1, (size_t)m * n));
    CHECK_OK(cdb_k_buf_download(be, by2, 0, r2, (size_t)m * n));
    CHECK(memcmp(r1, r2, (size_t)m * n * 4) == 0);
    /* a packed matrix reads back row-major, exactly, from any offset */
    CHECK_OK(cdb_k_buf_download(be, bp, 0, back, (size_t)n * k));
    CHECK(memcmp(back, w, (size_t)n * k * 4) == 0);
    CHECK_OK(cdb_k_buf_download(be, bp, 7 * k + 3, back, 5));
    CHECK(memcmp(back, w + 7 * k + 3, 5 * 4) == 0);
    /* F16 widened at pack time == F16 widened by hand */
    cdb_k_f32_to_f16(w, h, (size_t)n * k);
    cdb_k_f16_to_f32(h, wf16, (size_t)n * k);
    CHECK_OK(cdb_k_matrix_upload(be, h, CDB_K_F16, n, k, 0, &bh));
    CHECK_OK(cdb_k_buf_download(be, bh, 0, back, (size_t)n * k));
    CHECK(memcmp(back, wf16, (size_t)n * k * 4) == 0);
    /* shape and misuse errors */
    CHECK_RC(cdb_k_gemm(be, bx, bp, NULL, by1, m, n, k - 1, CDB_K_ACT_NONE, 0), CDB_INVALID);
    CHECK_RC(cdb_k_gemm(be, bx, bp, NULL, by1, m, n + 1, k, CDB_K_ACT_NONE, 0), CDB_INVALID);
    CHECK_RC(cdb_k_layernorm(be, bp, bb, bb, by1, 1, n, 1e-5f), CDB_INVALID);
    CHECK_RC(cdb_k_buf_upload(be, bp, 0, x, 4), CDB_INVALID);
    {
        cdb_k_buf *bad = NULL;
        CHECK_RC(cdb_k_matrix_upload(be, w, CDB_K_F32, 0, k, 0, &bad), CDB_INVALID);
        CHECK(bad == NULL);
    }
    cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bp), cdb_k_buf_free(be, bw);
    cdb_k_buf_free(be, bb), cdb_k_buf_free(be, by1), cdb_k_buf_free(be, by2);
    CHECK(cdb_k_cpu_packed_bytes() >= before); /* bh is still held */
    cdb_k_buf_free(be, bh);
    free(x), free(w), free(bias), free(r1), free(r2), free(back), free(wf16), free(h);
    cdb_k_backend_free(be);
}

/* attention(qkv of `batch` items) with t threads; returns the output. */
static float *attn(int t, const float *qkv, int batch, int seq, int H, int hd, int causal) {
    cdb_k_backend *be = NULL;
    size_t nin = (size_t)batch * seq * 3 * H * hd, nout = (size_t)batch * seq * H * hd;
    float *o = malloc(nout * sizeof(float));
    cdb_k_buf *bq, *bo = NULL;
    if (cdb_k_backend_cpu_new(t, &be) != CDB_OK) return NULL;
    bq = up(be, qkv, nin);
    cdb_k_buf_alloc(be, nout, &bo);
    if (cdb_k_attention(be, bq, bo, batch, seq, H, hd, causal) != CDB_OK) {
        free(o);
        o = NULL;
    } else {
        cdb_k_buf_download(be, bo, 0, o, nout);
    }
    cdb_k_buf_free(be, bq), cdb_k_buf_free(be, bo);
    cdb_k_backend_free(be);
    return o;
}

CDB_TEST(attention_rows_invariant) {
    const int B = 5, S = 50, H = 3, hd = 37; /* hd: vectors + a tail */
    size_t item_in = (size_t)S * 3 * H * hd, item_out = (size_t)S * H * hd;
    float *qkv = rand_vec(B * item_in, 3), *all = attn(1, qkv, B, S, H, hd, 0);
    CHECK(all != NULL);
    for (int t = 1; t <= 4; t++) {
        float *b2 = attn(t, qkv, B, S, H, hd, 0), *one = attn(t, qkv + 3 * item_in, 1, S, H, hd, 0);
        CHECK(b2 && one);
        CHECK_MSG(memcmp(b2, all, B * item_out * 4) == 0, "threads %d: batch differs", t);
        CHECK_MSG(memcmp(one, all + 3 * item_out, item_out * 4) == 0, "threads %d: alone differs", t);
        free(b2), free(one);
    }
    /* causal (text): a row depends on its own prefix only, not on the padded length */
    {
        const int S1 = 7, S2 = 31, HD = 64;
        float *q2 = rand_vec((size_t)S2 * 3 * H * HD, 2), *q1 = malloc((size_t)S1 * 3 * H * HD * 4);
        float *o1, *o2;
        memcpy(q1, q2, (size_t)S1 * 3 * H * HD * 4);
        o1 = attn(2, q1, 1, S1, H, HD, 1);
        o2 = attn(3, q2, 1, S2, H, HD, 1);
        CHECK(o1 && o2 && memcmp(o1, o2, (size_t)S1 * H * HD * 4) == 0);
        free(q1), free(q2), free(o1), free(o2);
    }
    free(qkv), free(all);
}

/* The three-row attention kernel gives each row the bits the one-row kernel gives it,
** on every path, for key counts around its groups of 4 and head sizes with and
** without a tail past whole vectors (strided rows, as attend() hands them). */
CDB_TEST(attention_three_rows_are_single_rows) {
    static const int keys[] = {1, 3, 4, 5, 8, 50, 77}, hds[] = {64, 37, 8, 5, 128};
    const size_t qs = 301, ks = 263, os = 157; /* row strides, each >= 128 */
    float *q = rand_vec(3 * qs, 2), *k = rand_vec(77 * ks, 2), *v = rand_vec(77 * ks, 2);
    float *p = malloc(3 * (77 + CDB_GEMM_NR_MAX) * sizeof(float));
    float *o3 = malloc(3 * os * sizeof(float)), *o1 = malloc(128 * sizeof(float));
    for (int isa = 0; isa <= CDB_K_ISA_AVX512; isa++) {
        const cdb_gemm_kern *K = path(isa);
        if (!K) continue;
        for (size_t a = 0; a < sizeof keys / sizeof keys[0]; a++)
            for (size_t b = 0; b < sizeof hds / sizeof hds[0]; b++) {
                int nk = keys[a], hd = hds[b];
                float scale = 1.0f / sqrtf((float)hd);
                memset(o3, 0, 3 * os * sizeof(float));
                K->attn_rows3(q, qs, k, ks, v + 7, ks, nk, hd, scale, p, o3, os);
                for (int i = 0; i < 3; i++) {
                    K->attn_row(q + i * qs, k, ks, v + 7, ks, nk, hd, scale, p, o1);
                    CHECK_MSG(memcmp(o1, o3 + i * os, (size_t)hd * sizeof(float)) == 0,
                              "%s keys %d hd %d: row %d differs", K->isa, nk, hd, i);
                }
            }
    }
    free(q), free(k), free(v), free(p), free(o3), free(o1);
}

CDB_TEST(act_any_range_same_bits) {
    const size_t n = 1000;
    float *x = rand_vec(n, 6), *a = malloc(n * 4), *b = malloc(n * 4);
    for (int isa = 0; isa <= CDB_K_ISA_AVX512; isa++) {
        const cdb_gemm_kern *K = path(isa);
        if (!K) continue;
        for (int act = 1; act <= CDB_K_ACT_GELU_TANH; act++) {
            memcpy(a, x, n * 4), memcpy(b, x, n * 4);
            K->act(a, n, (cdb_k_act)act);
            K->act(b, 3, (cdb_k_act)act); /* ranges that cut vectors anywhere */
            K->act(b + 3, 500, (cdb_k_act)act);
            K->act(b + 503, n - 503, (cdb_k_act)act);
            CHECK_MSG(memcmp(a, b, n * 4) == 0, "%s act %d", K->isa, act);
            for (size_t i = 0; i < n; i++) {
                double r = act_d(x[i], (cdb_k_act)act);
                CHECK_MSG(fabs(a[i] - r) <= 3e-7 * fabs(x[i]) + 1e-30, "%s act %d x=%.9g: %.9g vs %.9g",
                          K->isa, act, x[i], a[i], r);
                if (fabs(a[i] - r) > 3e-7 * fabs(x[i]) + 1e-30) break;
            }
        }
        /* ReLU keeps NaN; QuickGELU/GELU give NaN for NaN */
        a[0] = NAN;
        K->act(a, 1, CDB_K_ACT_RELU);
        CHECK(isnan(a[0]));
        K->act(a, 1, CDB_K_ACT_GELU);
        CHECK(isnan(a[0]));
        K->act(a, 1, CDB_K_ACT_GELU_TANH);
        CHECK(isnan(a[0]));
    }
    free(x), free(a), free(b);
}

CDB_TEST_MAIN(gemm_vs_reference_every_path, gemm_rows_invariant_to_batch_and_threads,
              packed_and_plain_weights_agree, attention_rows_invariant,
              attention_three_rows_are_single_rows, act_any_range_same_bits)
