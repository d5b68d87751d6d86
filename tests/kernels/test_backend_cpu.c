/*
** test_backend_cpu.c: differential tests of the optimized CPU backend (own GEMM +
** OpenMP) against the scalar reference backend, op by op, on odd shapes (sizes
** that are not multiples of 8/16, one row, one head), with an NMSE threshold as
** ggml's test-backend-ops; plus weight upload from F16/BF16/F32 (borrowed and
** unaligned) and the error paths (bad sizes give CDB_INVALID, never a crash).
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "kernel_test_util.h"
#include "kernels/kernels.h"


CDB_TEST(gemm_odd_shapes) {
    static const int shapes[][3] = {{1, 1, 1}, {1, 7, 13}, {5, 3, 17}, {33, 65, 31},
                                    {50, 97, 129}, {7, 768, 64}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int act = 0; act < 3; act++)
            for (int acc = 0; acc < 2; acc++)
                for (int hasb = 0; hasb < 2; hasb++) {
                    int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                    float *x = rand_vec((size_t)m * k, 2), *w = rand_vec((size_t)n * k, 0.5f);
                    float *bias = rand_vec(n, 1), *y0 = rand_vec((size_t)m * n, 1), *r[2];
                    if (acc && act) {
                        free(x), free(w), free(bias), free(y0);
                        continue;
                    }
                    for (int i = 0; i < 2; i++) {
                        cdb_k_backend *be = p.be[i];
                        cdb_k_buf *bx = up(be, x, (size_t)m * k), *bw = NULL, *bb = NULL,
                                  *by = up(be, y0, (size_t)m * n);
                        CHECK_OK(cdb_k_weight_upload(be, w, CDB_K_F32, (size_t)n * k,
                                                     CDB_K_W_MATRIX, 0, &bw));
                        CHECK_OK(cdb_k_weight_upload(be, bias, CDB_K_F32, n, CDB_K_W_PARAM, 0,
                                                     &bb));
                        CHECK_OK(cdb_k_gemm(be, bx, bw, hasb ? bb : NULL, by, m, n, k,
                                            (cdb_k_act)act, acc));
                        r[i] = down(be, by, (size_t)m * n);
                        cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bw);
                        cdb_k_buf_free(be, bb), cdb_k_buf_free(be, by);
                    }
                    double e = nmse(r[0], r[1], (size_t)m * n);
                    free(x), free(w), free(bias), free(y0), free(r[0]), free(r[1]);
                    CHECK_MSG(e < 1e-10, "gemm %dx%dx%d act=%d acc=%d bias=%d nmse %.3g", m, n,
                              k, act, acc, hasb, e);
                }
    pair_free(&p);
}

CDB_TEST(layernorm_act_add) {
    static const int shapes[][2] = {{1, 1}, {1, 5}, {3, 17}, {40, 768}, {9, 1025}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1];
        size_t mn = (size_t)m * n;
        float *x = rand_vec(mn, 4), *g = rand_vec(n, 1), *b = rand_vec(n, 1), *x2 = rand_vec(mn, 1);
        float *r[2][5];
        for (size_t i = 0; i < mn; i++) x[i] += 10.0f; /* a large mean tests the two-pass variance */
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, mn), *bg = up(be, g, n), *bb = up(be, b, n),
                      *by = up(be, x2, mn), *bz = up(be, x, mn);
            CHECK_OK(cdb_k_layernorm(be, bx, bg, bb, by, m, n, 1e-5f));
            r[i][0] = down(be, by, mn);
            CHECK_OK(cdb_k_layernorm(be, bz, bg, bb, bz, m, n, 1e-5f)); /* in place */
            r[i][1] = down(be, bz, mn);
            CHECK_OK(cdb_k_activate(be, bz, mn, CDB_K_ACT_GELU));
            r[i][2] = down(be, bz, mn);
            CHECK_OK(cdb_k_add(be, bz, by, mn));
            CHECK_OK(cdb_k_activate(be, bz, mn, CDB_K_ACT_QUICK_GELU));
            r[i][3] = down(be, bz, mn);
            CHECK_OK(cdb_k_activate(be, bz, mn, CDB_K_ACT_GELU_TANH));
            r[i][4] = down(be, bz, mn);
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bg), cdb_k_buf_free(be, bb);
            cdb_k_buf_free(be, by), cdb_k_buf_free(be, bz);
        }
        double e[5];
        for (int t = 0; t < 5; t++) e[t] = nmse(r[0][t], r[1][t], mn);
        for (int t = 0; t < 5; t++) free(r[0][t]), free(r[1][t]);
        free(x), free(g), free(b), free(x2);
        for (int t = 0; t < 5; t++)
            CHECK_MSG(e[t] < 1e-11, "m=%d n=%d step %d nmse %.3g", m, n, t, e[t]);
    }
    pair_free(&p);
}

CDB_TEST(attention_odd_shapes) {
    static const int shapes[][4] = {/* batch, seq, heads, head_dim */
                                    {1, 1, 1, 1}, {2, 5, 3, 7}, {3, 50, 2, 64}, {1, 77, 8, 16},
                                    {4, 13, 1, 33}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int causal = 0; causal < 2; causal++) {
            int B = shapes[s][0], S = shapes[s][1], H = shapes[s][2], hd = shapes[s][3];
            size_t nin = (size_t)B * S * 3 * H * hd, nout = (size_t)B * S * H * hd;
            float *qkv = rand_vec(nin, 3), *r[2];
            for (int i = 0; i < 2; i++) {
                cdb_k_backend *be = p.be[i];
                cdb_k_buf *bq = up(be, qkv, nin), *bo = NULL;
                CHECK_OK(cdb_k_buf_alloc(be, nout, &bo));
                CHECK_OK(cdb_k_attention(be, bq, bo, B, S, H, hd, causal));
                r[i] = down(be, bo, nout);
                cdb_k_buf_free(be, bq), cdb_k_buf_free(be, bo);
            }
            double e = nmse(r[0], r[1], nout);
            /* causal: query 0 sees only key 0, so its output is exactly v_0 */
            int v0_ok = 1;
            if (causal)
                for (int l = 0; l < H * hd; l++)
                    if (fabsf(r[1][l] - qkv[2 * H * hd + l]) > 1e-6f) v0_ok = 0;
            free(qkv), free(r[0]), free(r[1]);
            CHECK_MSG(e < 1e-10, "attention b=%d s=%d h=%d hd=%d causal=%d nmse %.3g", B, S, H,
                      hd, causal, e);
            CHECK(v0_ok);
        }
    pair_free(&p);
}

/* One query per item: each backend's rows are exactly its own full attention's rows
** at those positions (the CPU backend through its own op, the reference through the
** gather fallback), causal or not; a position outside the item is CDB_INVALID. */
CDB_TEST(attention_rows_are_the_full_rows) {
    static const int shapes[][4] = {{1, 1, 1, 1}, {2, 5, 3, 7}, {3, 50, 2, 64}, {5, 13, 1, 33}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int causal = 0; causal < 2; causal++)
            for (int i = 0; i < 2; i++) {
                int B = shapes[s][0], S = shapes[s][1], H = shapes[s][2], hd = shapes[s][3];
                int d = H * hd, mismatched = 0;
                size_t nin = (size_t)B * S * 3 * d, nout = (size_t)B * S * d;
                float *qkv = rand_vec(nin, 3), *full, *rows;
                int32_t qpos[8], bad[8];
                cdb_k_backend *be = p.be[i];
                cdb_k_buf *bq = up(be, qkv, nin), *bo = NULL, *br = NULL;
                for (int b = 0; b < B; b++) {
                    qpos[b] = (int32_t)((b * 7 + (int)s * 3 + causal) % S);
                    bad[b] = b == B - 1 ? S : qpos[b];
                }
                CHECK_OK(cdb_k_buf_alloc(be, nout, &bo));
                CHECK_OK(cdb_k_buf_alloc(be, (size_t)B * d, &br));
                CHECK_OK(cdb_k_attention(be, bq, bo, B, S, H, hd, causal));
                CHECK_OK(cdb_k_attention_rows(be, bq, br, B, S, H, hd, causal, qpos));
                CHECK_EQ_INT(cdb_k_attention_rows(be, bq, br, B, S, H, hd, causal, bad),
                             CDB_INVALID);
                full = down(be, bo, nout);
                rows = down(be, br, (size_t)B * d);
                for (int b = 0; b < B; b++)
                    if (memcmp(rows + (size_t)b * d, full + ((size_t)b * S + qpos[b]) * d,
                               (size_t)d * sizeof(float)))
                        mismatched++;
                CHECK_MSG(!mismatched, "%s backend: %d of %d rows differ (b=%d s=%d h=%d hd=%d "
                          "causal=%d)", i ? "reference" : "cpu", mismatched, B, B, S, H, hd, causal);
                cdb_k_buf_free(be, bq), cdb_k_buf_free(be, bo), cdb_k_buf_free(be, br);
                free(qkv), free(full), free(rows);
            }
    pair_free(&p);
}

CDB_TEST(embed_and_gather) {
    pair p;
    int W = 19, V = 11, S = 7, N = 9, B = 3;
    int32_t ids[14] = {0, 10, 3, 4, 5, 6, 7, 1, 2, 3, 9, 9, 9, 9};
    int32_t rows[4] = {0, 13, 5, 5};
    float *table = rand_vec((size_t)V * W, 1), *pos = rand_vec((size_t)(N + 1) * W, 1);
    float *cls = rand_vec(W, 1), *patches = rand_vec((size_t)B * N * W, 1);
    float *r[2][3];
    CHECK(pair_new(&p));
    for (int i = 0; i < 2; i++) {
        cdb_k_backend *be = p.be[i];
        cdb_k_buf *bt = NULL, *bp = NULL, *bc = NULL, *bpa = up(be, patches, (size_t)B * N * W);
        cdb_k_buf *o1 = NULL, *o2 = NULL, *o3 = NULL;
        CHECK_OK(cdb_k_weight_upload(be, table, CDB_K_F32, (size_t)V * W, CDB_K_W_EMBED,
                                     CDB_K_UPLOAD_BORROW, &bt));
        CHECK_OK(cdb_k_weight_upload(be, pos, CDB_K_F32, (size_t)(N + 1) * W, CDB_K_W_EMBED,
                                     0, &bp));
        CHECK_OK(cdb_k_weight_upload(be, cls, CDB_K_F32, W, CDB_K_W_EMBED, 0, &bc));
        CHECK_OK(cdb_k_buf_alloc(be, (size_t)14 * W, &o1));
        CHECK_OK(cdb_k_buf_alloc(be, (size_t)B * (N + 1) * W, &o2));
        CHECK_OK(cdb_k_buf_alloc(be, (size_t)4 * W, &o3));
        CHECK_OK(cdb_k_lookup_add(be, bt, bp, ids, 14, S, W, o1));
        CHECK_OK(cdb_k_prepend_add(be, bpa, bc, bp, B, N, W, o2));
        CHECK_OK(cdb_k_gather_rows(be, o1, rows, 4, W, o3));
        /* errors: out-of-range ids and rows are refused */
        int32_t bad = V;
        CHECK_RC(cdb_k_lookup_add(be, bt, bp, &bad, 1, S, W, o1), CDB_INVALID);
        bad = 14;
        CHECK_RC(cdb_k_gather_rows(be, o1, &bad, 1, W, o3), CDB_INVALID);
        CHECK_RC(cdb_k_gemm(be, o1, bt, NULL, o3, 14, V, W, CDB_K_ACT_NONE, 0), CDB_INVALID);
        r[i][0] = down(be, o1, (size_t)14 * W);
        r[i][1] = down(be, o2, (size_t)B * (N + 1) * W);
        r[i][2] = down(be, o3, (size_t)4 * W);
        cdb_k_buf_free(be, bt), cdb_k_buf_free(be, bp), cdb_k_buf_free(be, bc);
        cdb_k_buf_free(be, bpa), cdb_k_buf_free(be, o1), cdb_k_buf_free(be, o2);
        cdb_k_buf_free(be, o3);
    }
    CHECK(memcmp(r[0][0], r[1][0], (size_t)14 * W * 4) == 0);
    CHECK(memcmp(r[0][1], r[1][1], (size_t)B * (N + 1) * W * 4) == 0);
    CHECK(memcmp(r[0][2], r[1][2], (size_t)4 * W * 4) == 0);
    /* spot checks against the definition */
    CHECK_NEAR(r[1][0][1 * W + 2], table[10 * W + 2] + pos[1 * W + 2], 1e-6);
    CHECK_NEAR(r[1][0][8 * W + 0], table[2 * W + 0] + pos[1 * W + 0], 1e-6); /* r % seq */
    CHECK_NEAR(r[1][1][(N + 1) * W + 3], cls[3] + pos[3], 1e-6);
    CHECK_NEAR(r[1][1][(N + 2) * W + 3], patches[N * W + 3] + pos[W + 3], 1e-6);
    CHECK_NEAR(r[1][2][1 * W + 4], r[1][0][13 * W + 4], 0);
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < 3; t++) free(r[i][t]);
    free(table), free(pos), free(cls), free(patches);
    pair_free(&p);
}

CDB_TEST(weight_dtypes) {
    /* F16 and BF16 widen exactly; an unaligned F32 source is copied, not borrowed. */
    cdb_k_backend *be = NULL;
    uint16_t h[5] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x0000};      /* 1, -2, 2^-24, 65504, 0 */
    uint16_t bf[4] = {0x3F80, 0xC040, 0x0000, 0x4049};             /* 1, -3, 0, 3.140625 */
    float want_h[5] = {1.0f, -2.0f, 5.9604644775390625e-08f, 65504.0f, 0.0f};
    float want_bf[4] = {1.0f, -3.0f, 0.0f, 3.140625f};
    unsigned char raw[4 * 3 + 1];
    float f3[3] = {1.5f, -2.25f, 1e-30f}, got[5];
    cdb_k_buf *b = NULL;
    CHECK_OK(cdb_k_backend_cpu_new(1, &be));
    CHECK_OK(cdb_k_weight_upload(be, h, CDB_K_F16, 5, CDB_K_W_MATRIX, 0, &b));
    CHECK_OK(cdb_k_buf_download(be, b, 0, got, 5));
    for (int i = 0; i < 5; i++) CHECK_NEAR(got[i], want_h[i], 0);
    cdb_k_buf_free(be, b);
    CHECK_OK(cdb_k_weight_upload(be, bf, CDB_K_BF16, 4, CDB_K_W_MATRIX, 0, &b));
    CHECK_OK(cdb_k_buf_download(be, b, 0, got, 4));
    for (int i = 0; i < 4; i++) CHECK_NEAR(got[i], want_bf[i], 0);
    cdb_k_buf_free(be, b);
    memcpy(raw + 1, f3, sizeof f3);
    CHECK_OK(cdb_k_weight_upload(be, raw + 1, CDB_K_F32, 3, CDB_K_W_MATRIX,
                                 CDB_K_UPLOAD_BORROW, &b));
    CHECK_OK(cdb_k_buf_download(be, b, 0, got, 3));
    for (int i = 0; i < 3; i++) CHECK_NEAR(got[i], f3[i], 0);
    CHECK_RC(cdb_k_buf_download(be, b, 2, got, 2), CDB_INVALID);
    cdb_k_buf_free(be, b);
    CHECK_RC(cdb_k_weight_upload(be, f3, (cdb_k_dtype)9, 3, CDB_K_W_MATRIX, 0, &b), CDB_INVALID);
    cdb_k_backend_free(be);
    cdb_k_backend_free(NULL);
}

/* The CPU backend's attention_q of one query per item, its q and k|v taken out of a
** qkv buffer, gives exactly attention_rows' rows (the vision tower's last block is
** computed either way, encoder/clip.c); the reference backend agrees to 1e-10 NMSE. */
CDB_TEST(attention_q_is_attention_rows) {
    static const int shapes[][4] = {{1, 1, 1, 1}, {2, 5, 3, 7}, {3, 50, 2, 64}, {4, 13, 3, 33}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int i = 0; i < 2; i++) {
            int B = shapes[s][0], S = shapes[s][1], H = shapes[s][2], hd = shapes[s][3];
            int d = H * hd;
            size_t nin = (size_t)B * S * 3 * d;
            float *qkv = rand_vec(nin, 3), *q = malloc((size_t)B * d * sizeof(float));
            float *kv = malloc((size_t)B * S * 2 * d * sizeof(float)), *a, *r;
            int32_t qpos[8];
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bqkv, *bq, *bkv, *ba = NULL, *br = NULL;
            for (int b = 0; b < B; b++) {
                qpos[b] = (int32_t)((b * 5 + (int)s) % S);
                memcpy(q + (size_t)b * d, qkv + ((size_t)b * S + qpos[b]) * 3 * d,
                       (size_t)d * sizeof(float));
                for (int j = 0; j < S; j++)
                    memcpy(kv + ((size_t)b * S + j) * 2 * d,
                           qkv + ((size_t)b * S + j) * 3 * d + d, 2 * (size_t)d * sizeof(float));
            }
            bqkv = up(be, qkv, nin), bq = up(be, q, (size_t)B * d);
            bkv = up(be, kv, (size_t)B * S * 2 * d);
            CHECK_OK(cdb_k_buf_alloc(be, (size_t)B * d, &ba));
            CHECK_OK(cdb_k_buf_alloc(be, (size_t)B * d, &br));
            CHECK_OK(cdb_k_attention_q(be, bq, bkv, ba, B, 1, S, H, hd));
            CHECK_OK(cdb_k_attention_rows(be, bqkv, br, B, S, H, hd, 0, qpos));
            a = down(be, ba, (size_t)B * d);
            r = down(be, br, (size_t)B * d);
            if (i == 0)
                CHECK_MSG(!memcmp(a, r, (size_t)B * d * sizeof(float)),
                          "cpu backend: attention_q differs from attention_rows (b=%d s=%d h=%d "
                          "hd=%d)", B, S, H, hd);
            else
                CHECK_MSG(nmse(a, r, (size_t)B * d) < 1e-10, "reference: nmse %.3g (b=%d s=%d)",
                          nmse(a, r, (size_t)B * d), B, S);
            free(qkv), free(q), free(kv), free(a), free(r);
            cdb_k_buf_free(be, bqkv), cdb_k_buf_free(be, bq), cdb_k_buf_free(be, bkv);
            cdb_k_buf_free(be, ba), cdb_k_buf_free(be, br);
        }
    pair_free(&p);
}

/* A token table uploaded as CDB_K_W_TABLE in F16 or BF16 (an odd address, as a 2-byte
** offset in a file may be): lookup_add gives the rows widened exactly plus pos, the
** oracle being each element widened by hand here (F16: the kernels' scalar widening
** checked in test_fp16; BF16: the bits shifted up); buf_download widens too; a
** borrowed table is read in place (a row changed after the upload shows), so it is
** never widened whole; the reference backend gives the same bits from its fp32 copy. */
CDB_TEST(table_stays_half) {
    pair p;
    int W = 21, V = 13, S = 5;
    int32_t ids[10] = {0, 12, 3, 3, 7, 1, 2, 11, 6, 5};
    float *pos = rand_vec((size_t)S * W, 1);
    unsigned char *raw = malloc((size_t)V * W * 2 + 1), *tab = raw + 1;
    float *want = malloc((size_t)10 * W * sizeof(float)), *got = malloc((size_t)10 * W * 4);
    float *row = malloc((size_t)W * sizeof(float)), *wide = malloc((size_t)V * W * 4);
    CHECK(pair_new(&p));
    for (int dt = 0; dt < 2; dt++) {
        cdb_k_dtype kdt = dt ? CDB_K_BF16 : CDB_K_F16;
        for (int i = 0; i < V * W; i++) {
            float f = frand() * 3;
            uint16_t h;
            if (dt) {
                uint32_t u;
                memcpy(&u, &f, 4);
                h = (uint16_t)(u >> 16);
            } else {
                h = cdb_k_f32_to_f16_1(f);
            }
            tab[2 * i] = (unsigned char)(h & 0xff), tab[2 * i + 1] = (unsigned char)(h >> 8);
        }
        for (int e = 0; e < V * W; e++) {
            uint16_t h = (uint16_t)(tab[2 * e] | tab[2 * e + 1] << 8);
            if (dt) {
                uint32_t u = (uint32_t)h << 16;
                memcpy(&wide[e], &u, 4);
            } else {
                wide[e] = cdb_k_f16_to_f32_1(h);
            }
        }
        for (int r = 0; r < 10; r++)
            for (int j = 0; j < W; j++)
                want[r * W + j] = wide[ids[r] * W + j] + pos[(r % S) * W + j];
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bt = NULL, *bp = NULL, *o = NULL;
            CHECK_OK(cdb_k_weight_upload(be, tab, kdt, (size_t)V * W, CDB_K_W_TABLE,
                                         CDB_K_UPLOAD_BORROW, &bt));
            CHECK_OK(cdb_k_weight_upload(be, pos, CDB_K_F32, (size_t)S * W, CDB_K_W_EMBED, 0,
                                         &bp));
            CHECK_OK(cdb_k_buf_alloc(be, (size_t)10 * W, &o));
            CHECK_OK(cdb_k_lookup_add(be, bt, bp, ids, 10, S, W, o));
            CHECK_OK(cdb_k_buf_download(be, o, 0, got, (size_t)10 * W));
            CHECK_MSG(memcmp(got, want, (size_t)10 * W * 4) == 0, "%s, %s: lookup_add",
                      i ? "reference" : "optimized", dt ? "BF16" : "F16");
            CHECK_OK(cdb_k_buf_download(be, bt, (size_t)12 * W, row, (size_t)W));
            CHECK_MSG(memcmp(row, wide + 12 * W, (size_t)W * 4) == 0, "download of a row");
            if (i == 0) { /* a half table is lookup_add's operand only */
                CHECK_RC(cdb_k_gemm(be, o, bt, NULL, o, 1, 1, W, CDB_K_ACT_NONE, 0),
                         CDB_INVALID);
            }
            if (i == 0) { /* borrowed: a later change of the source shows (row 12, elt 0) */
                unsigned char save[2] = {tab[2 * 12 * W], tab[2 * 12 * W + 1]};
                tab[2 * 12 * W] ^= 0x40;
                CHECK_OK(cdb_k_lookup_add(be, bt, bp, ids, 10, S, W, o));
                CHECK_OK(cdb_k_buf_download(be, o, (size_t)W, row, 1));
                CHECK_MSG(memcmp(row, want + W, 4) != 0, "the table was copied, not borrowed");
                tab[2 * 12 * W] = save[0], tab[2 * 12 * W + 1] = save[1];
            }
            cdb_k_buf_free(be, bt), cdb_k_buf_free(be, bp), cdb_k_buf_free(be, o);
        }
    }
    free(raw), free(want), free(got), free(row), free(pos), free(wide);
    pair_free(&p);
}

/* cdb_k_patchify on both backends: the same bits, and gemm(cols, weight) is the
** stride-p convolution computed here from its definition in double (the oracle);
** heights/widths that are no multiple of p drop their trailing pixels. */
CDB_TEST(patchify_is_the_convolution) {
    static const int shapes[][5] = {{1, 1, 4, 4, 4}, {2, 3, 10, 7, 3}, {3, 3, 32, 32, 8},
                                    {1, 2, 5, 9, 1}};
    const int cout = 5;
    pair p;
    CHECK(pair_new(&p));
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int n = shapes[t][0], c = shapes[t][1], h = shapes[t][2], w = shapes[t][3];
        int ps = shapes[t][4], gh = h / ps, gw = w / ps, K = c * ps * ps, rows = n * gh * gw;
        size_t nx = (size_t)n * c * h * w, ncol = (size_t)rows * K;
        float *x = rand_vec(nx, 2), *wt = rand_vec((size_t)cout * K, 1), *cols[2], *y = NULL;
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, nx), *bc = NULL, *bw = NULL, *by = NULL, *small = NULL;
            CHECK(bx && cdb_k_buf_alloc(be, ncol, &bc) == CDB_OK &&
                  cdb_k_buf_alloc(be, (size_t)rows * cout, &by) == CDB_OK &&
                  cdb_k_buf_alloc(be, ncol - 1, &small) == CDB_OK);
            CHECK_OK(cdb_k_weight_upload(be, wt, CDB_K_F32, (size_t)cout * K, CDB_K_W_MATRIX, 0,
                                         &bw));
            CHECK_OK(cdb_k_patchify(be, bx, n, c, h, w, ps, bc));
            CHECK_RC(cdb_k_patchify(be, bx, n, c, h, w, ps, small), CDB_INVALID);
            CHECK_RC(cdb_k_patchify(be, bx, n, c, h, w, h + 1, bc), CDB_INVALID);
            CHECK_RC(cdb_k_patchify(be, bx, n, c, h, w, ps, bx), CDB_INVALID);
            cols[i] = down(be, bc, ncol);
            if (i == 1) {
                CHECK_OK(cdb_k_gemm(be, bc, bw, NULL, by, rows, cout, K, CDB_K_ACT_NONE, 0));
                y = down(be, by, (size_t)rows * cout);
            }
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bc), cdb_k_buf_free(be, bw);
            cdb_k_buf_free(be, by), cdb_k_buf_free(be, small);
        }
        CHECK(memcmp(cols[0], cols[1], ncol * sizeof(float)) == 0);
        for (int b = 0; b < n; b++)
            for (int gy = 0; gy < gh; gy++)
                for (int gx = 0; gx < gw; gx++)
                    for (int o = 0; o < cout; o++) {
                        double conv = 0, mag = 0;
                        for (int ch = 0; ch < c; ch++)
                            for (int ky = 0; ky < ps; ky++)
                                for (int kx = 0; kx < ps; kx++) {
                                    double v = x[(((size_t)b * c + ch) * h + gy * ps + ky) * w +
                                                 gx * ps + kx] *
                                               (double)wt[(((size_t)o * c + ch) * ps + ky) * ps +
                                                          kx];
                                    conv += v, mag += v < 0 ? -v : v;
                                }
                        size_t r = ((size_t)b * gh + gy) * gw + gx;
                        CHECK_NEAR(y[r * cout + o], conv, 1e-6 * mag + 1e-30);
                    }
        free(x), free(wt), free(cols[0]), free(cols[1]), free(y);
    }
    pair_free(&p);
}

/* The CPU backends' chunk budget is the fixed one (encoder/clip.c's chunks, and so
** its bits, do not depend on the machine's memory); no backend, no budget. */
CDB_TEST(scratch_budget) {
    pair p;
    CHECK(pair_new(&p));
    CHECK(cdb_k_scratch_bytes(p.be[0]) == CDB_K_CPU_SCRATCH_BYTES);
    CHECK(cdb_k_scratch_bytes(p.be[1]) == CDB_K_CPU_SCRATCH_BYTES);
    CHECK(cdb_k_scratch_bytes(NULL) == 0);
    pair_free(&p);
}

CDB_TEST_MAIN(gemm_odd_shapes, layernorm_act_add, attention_odd_shapes,
              attention_rows_are_the_full_rows, attention_q_is_attention_rows, embed_and_gather,
              weight_dtypes, table_stays_half, patchify_is_the_convolution, scratch_budget)
