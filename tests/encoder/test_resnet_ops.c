/*
** test_resnet_ops.c: the backend ops the ModifiedResNet graph (encoder/resnet.c)
** added to kernels.h — im2col, avgpool, prepend_mean_add, attention_q and the ReLU
** activation — the optimized CPU backend against the scalar reference backend on
** odd shapes (channels 1/3/5/17, odd image sides, stride 2 on odd sides, padding
** 0/1/2, one key, one head, head_dim 1/7/64) with an NMSE threshold as in
** tests/kernels/test_backend_cpu.c; the reference itself against hand-computed
** values (the definition, not the other backend); the error paths (bad shapes give
** CDB_INVALID, never a crash). It lives with the encoder's tests because the graph
** that needs these ops does.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#define KTU_SEED 0x243F6A8885A308D3ull
#include "kernel_test_util.h"
#include "kernels/kernels.h"

static cdb_k_buf *zeros(cdb_k_backend *be, size_t n) {
    float *z = calloc(n ? n : 1, sizeof *z);
    cdb_k_buf *b = up(be, z, n);
    free(z);
    return b;
}

CDB_TEST(im2col_odd_shapes) {
    /* n, h, w, c, k, stride, pad */
    static const int shapes[][7] = {{1, 1, 1, 1, 1, 1, 0}, {2, 5, 7, 3, 3, 2, 1},
                                    {1, 9, 9, 17, 3, 1, 1}, {3, 6, 4, 5, 3, 1, 1},
                                    {1, 7, 5, 3, 3, 2, 1},  {2, 8, 8, 4, 1, 2, 0},
                                    {1, 4, 6, 2, 5, 1, 2},  {1, 3, 3, 1, 3, 3, 0}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int n = shapes[s][0], h = shapes[s][1], w = shapes[s][2], c = shapes[s][3];
        int k = shapes[s][4], st = shapes[s][5], pad = shapes[s][6];
        int ho = (h + 2 * pad - k) / st + 1, wo = (w + 2 * pad - k) / st + 1;
        size_t nin = (size_t)n * h * w * c, nout = (size_t)n * ho * wo * k * k * c;
        float *x = rand_vec(nin, 1), *r[2];
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, nin), *bc = zeros(be, nout);
            CHECK_OK(cdb_k_im2col(be, bx, n, h, w, c, k, st, pad, bc));
            r[i] = down(be, bc, nout);
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bc);
        }
        /* a pure copy: both backends must agree exactly */
        CHECK_MSG(!memcmp(r[0], r[1], nout * sizeof(float)), "im2col shape %zu differs", s);
        /* the definition: last image, last output pixel, tap (k-1, 0), last channel */
        {
            int b = n - 1, oy = ho - 1, ox = wo - 1, ky = k - 1, kx = 0, ch = c - 1;
            int iy = oy * st - pad + ky, ix = ox * st - pad + kx;
            float want = iy < 0 || iy >= h || ix < 0 || ix >= w
                             ? 0.0f
                             : x[(((size_t)b * h + iy) * w + ix) * c + ch];
            size_t o = ((((size_t)b * ho + oy) * wo + ox) * k * k + (size_t)ky * k + kx) * c + ch;
            CHECK_NEAR(r[1][o], want, 0);
        }
        free(x), free(r[0]), free(r[1]);
    }
    /* stem of a 3x3 image: row 0 (output pixel 0,0) has its top row and left column
    ** padded, and its centre tap is pixel (0,0) */
    {
        float x9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, row[9];
        cdb_k_backend *be = p.be[1];
        cdb_k_buf *bx = up(be, x9, 9), *bc = zeros(be, 4 * 9);
        CHECK_OK(cdb_k_im2col(be, bx, 1, 3, 3, 1, 3, 2, 1, bc));
        CHECK_OK(cdb_k_buf_download(be, bc, 0, row, 9));
        const float want[9] = {0, 0, 0, 0, 1, 2, 0, 4, 5};
        for (int i = 0; i < 9; i++) CHECK_NEAR(row[i], want[i], 0);
        for (int i = 0; i < 2; i++) { /* k larger than the padded image, pad >= k */
            CHECK_RC(cdb_k_im2col(p.be[i], bx, 1, 3, 3, 1, 7, 1, 1, bc), CDB_INVALID);
            CHECK_RC(cdb_k_im2col(p.be[i], bx, 1, 3, 3, 1, 3, 1, 3, bc), CDB_INVALID);
            CHECK_RC(cdb_k_im2col(p.be[i], bx, 2, 3, 3, 1, 3, 1, 1, bc), CDB_INVALID);
        }
        cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bc);
    }
    pair_free(&p);
}

CDB_TEST(avgpool_odd_shapes) {
    /* n, h, w, c, s */
    static const int shapes[][5] = {{1, 1, 1, 1, 1}, {2, 4, 4, 3, 2}, {1, 7, 5, 17, 2},
                                    {3, 9, 9, 5, 3}, {1, 112, 112, 8, 2}, {2, 6, 3, 1, 3}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int n = shapes[s][0], h = shapes[s][1], w = shapes[s][2], c = shapes[s][3],
            k = shapes[s][4];
        size_t nin = (size_t)n * h * w * c, nout = (size_t)n * (h / k) * (w / k) * c;
        float *x = rand_vec(nin, 3), *r[2];
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, nin), *bo = zeros(be, nout);
            CHECK_OK(cdb_k_avgpool(be, bx, n, h, w, c, k, bo));
            r[i] = down(be, bo, nout);
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bo);
        }
        double e = nmse(r[0], r[1], nout);
        CHECK_MSG(e < 1e-13, "avgpool %dx%dx%dx%d /%d nmse %.3g", n, h, w, c, k, e);
        free(x), free(r[0]), free(r[1]);
    }
    /* the definition, with the floor: a 3x5 image pooled by 2 keeps one row, two
    ** columns; output 1 = mean of (0,2), (0,3), (1,2), (1,3) */
    {
        float x[15], o[2];
        for (int i = 0; i < 15; i++) x[i] = (float)i;
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, 15), *bo = zeros(be, 2);
            CHECK_OK(cdb_k_avgpool(be, bx, 1, 3, 5, 1, 2, bo));
            CHECK_OK(cdb_k_buf_download(be, bo, 0, o, 2));
            CHECK_NEAR(o[0], (0 + 1 + 5 + 6) / 4.0, 1e-6);
            CHECK_NEAR(o[1], (2 + 3 + 7 + 8) / 4.0, 1e-6);
            CHECK_RC(cdb_k_avgpool(be, bx, 1, 3, 5, 1, 4, bo), CDB_INVALID); /* s > h */
            CHECK_RC(cdb_k_avgpool(be, bx, 1, 3, 5, 2, 2, bo), CDB_INVALID); /* x too small */
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bo);
        }
    }
    pair_free(&p);
}

CDB_TEST(pool_tokens_and_attention_q) {
    /* batch, hw, width, heads (head_dim = width / heads), n_q */
    static const int shapes[][5] = {{1, 1, 1, 1, 1},  {2, 4, 14, 2, 1}, {3, 9, 64, 1, 1},
                                    {2, 49, 128, 2, 1}, {1, 5, 21, 3, 2}, {4, 16, 7, 7, 3}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int B = shapes[s][0], HW = shapes[s][1], W = shapes[s][2], H = shapes[s][3],
            NQ = shapes[s][4], S = HW + 1;
        size_t ntok = (size_t)B * S * W;
        float *x = rand_vec((size_t)B * HW * W, 2), *pos = rand_vec((size_t)S * W, 1);
        float *q = rand_vec((size_t)B * NQ * W, 2), *kv = rand_vec((size_t)B * S * 2 * W, 2);
        float *rt[2], *ra[2];
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, (size_t)B * HW * W), *bp = NULL, *bt = zeros(be, ntok);
            cdb_k_buf *bq = up(be, q, (size_t)B * NQ * W), *bkv = up(be, kv, (size_t)B * S * 2 * W);
            cdb_k_buf *bo = zeros(be, (size_t)B * NQ * W);
            CHECK_OK(cdb_k_weight_upload(be, pos, CDB_K_F32, (size_t)S * W, CDB_K_W_EMBED, 0,
                                         &bp));
            CHECK_OK(cdb_k_prepend_mean_add(be, bx, bp, B, HW, W, bt));
            CHECK_OK(cdb_k_attention_q(be, bq, bkv, bo, B, NQ, S, H, W / H));
            rt[i] = down(be, bt, ntok);
            ra[i] = down(be, bo, (size_t)B * NQ * W);
            CHECK_RC(cdb_k_prepend_mean_add(be, bx, bp, B, HW + 1, W, bt), CDB_INVALID);
            CHECK_RC(cdb_k_attention_q(be, bq, bkv, bo, B, NQ, S + 1, H, W / H), CDB_INVALID);
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bp), cdb_k_buf_free(be, bt);
            cdb_k_buf_free(be, bq), cdb_k_buf_free(be, bkv), cdb_k_buf_free(be, bo);
        }
        double et = nmse(rt[0], rt[1], ntok), ea = nmse(ra[0], ra[1], (size_t)B * NQ * W);
        CHECK_MSG(et < 1e-13, "prepend_mean_add b=%d hw=%d w=%d nmse %.3g", B, HW, W, et);
        CHECK_MSG(ea < 1e-11, "attention_q b=%d nq=%d s=%d h=%d nmse %.3g", B, NQ, S, H, ea);
        /* the definition: token 0 = mean + pos[0]; token 1 + p = x[p] + pos[1 + p] */
        {
            double mean = 0;
            int b = B - 1, j = W - 1;
            for (int pp = 0; pp < HW; pp++) mean += x[((size_t)b * HW + pp) * W + j];
            mean /= HW;
            CHECK_NEAR(rt[1][(size_t)b * S * W + j], mean + pos[j], 1e-5);
            CHECK_NEAR(rt[1][((size_t)b * S + HW) * W + j],
                       x[((size_t)b * HW + HW - 1) * W + j] + pos[(size_t)HW * W + j], 1e-6);
        }
        free(x), free(pos), free(q), free(kv);
        for (int i = 0; i < 2; i++) free(rt[i]), free(ra[i]);
    }
    /* equal scores: attention_q is the mean of the values */
    {
        float qz[4] = {0, 0, 0, 0}, kv3[3 * 8], o[4];
        cdb_k_backend *be = p.be[1];
        for (int i = 0; i < 24; i++) kv3[i] = (float)i;
        cdb_k_buf *bq = up(be, qz, 4), *bkv = up(be, kv3, 24), *bo = zeros(be, 4);
        CHECK_OK(cdb_k_attention_q(be, bq, bkv, bo, 1, 1, 3, 2, 2));
        CHECK_OK(cdb_k_buf_download(be, bo, 0, o, 4));
        for (int l = 0; l < 4; l++) CHECK_NEAR(o[l], (4 + l + 12 + l + 20 + l) / 3.0, 1e-5);
        /* one key: its value, whatever the query */
        CHECK_OK(cdb_k_attention_q(be, bkv, bkv, bo, 1, 1, 1, 2, 2));
        CHECK_OK(cdb_k_buf_download(be, bo, 0, o, 4));
        for (int l = 0; l < 4; l++) CHECK_NEAR(o[l], 4 + l, 0);
        cdb_k_buf_free(be, bq), cdb_k_buf_free(be, bkv), cdb_k_buf_free(be, bo);
    }
    pair_free(&p);
}

CDB_TEST(relu_gemm_and_act) {
    static const int shapes[][3] = {{1, 1, 1}, {5, 3, 17}, {7, 33, 9}, {64, 96, 27}};
    pair p;
    CHECK(pair_new(&p));
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *x = rand_vec((size_t)m * k, 2), *w = rand_vec((size_t)n * k, 1),
              *bias = rand_vec(n, 1), *r[2][2];
        for (int i = 0; i < 2; i++) {
            cdb_k_backend *be = p.be[i];
            cdb_k_buf *bx = up(be, x, (size_t)m * k), *bw = NULL, *bb = NULL,
                      *by = zeros(be, (size_t)m * n), *bz = up(be, x, (size_t)m * k);
            CHECK_OK(cdb_k_weight_upload(be, w, CDB_K_F32, (size_t)n * k, CDB_K_W_MATRIX, 0,
                                         &bw));
            CHECK_OK(cdb_k_weight_upload(be, bias, CDB_K_F32, n, CDB_K_W_PARAM, 0, &bb));
            CHECK_OK(cdb_k_gemm(be, bx, bw, bb, by, m, n, k, CDB_K_ACT_RELU, 0));
            CHECK_OK(cdb_k_activate(be, bz, (size_t)m * k, CDB_K_ACT_RELU));
            r[i][0] = down(be, by, (size_t)m * n);
            r[i][1] = down(be, bz, (size_t)m * k);
            cdb_k_buf_free(be, bx), cdb_k_buf_free(be, bw), cdb_k_buf_free(be, bb);
            cdb_k_buf_free(be, by), cdb_k_buf_free(be, bz);
        }
        double e = nmse(r[0][0], r[1][0], (size_t)m * n);
        CHECK_MSG(e < 1e-10, "relu gemm %dx%dx%d nmse %.3g", m, n, k, e);
        CHECK(!memcmp(r[0][1], r[1][1], (size_t)m * k * sizeof(float)));
        for (size_t i = 0; i < (size_t)m * n; i++) CHECK(r[1][0][i] >= 0.0f);
        for (size_t i = 0; i < (size_t)m * k; i++) CHECK_NEAR(r[1][1][i], x[i] > 0 ? x[i] : 0, 0);
        free(x), free(w), free(bias);
        for (int i = 0; i < 2; i++) free(r[i][0]), free(r[i][1]);
    }
    pair_free(&p);
}

CDB_TEST_MAIN(im2col_odd_shapes, avgpool_odd_shapes, pool_tokens_and_attention_q,
              relu_gemm_and_act)
