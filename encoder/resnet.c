/*
** resnet.c: the ModifiedResNet image tower (OpenAI CLIP's RN50, RN101, RN50x4,
** RN50x16, RN50x64), written once against the BACKEND interface of
** kernels/kernels.h, as clip.c is for the ViT. model.c loads the weights (every
** BatchNorm already folded into its convolution, see encoder_int.h).
**
** Activations are NHWC (rows of channels), so a 1x1 convolution is one gemm and a
** 3x3 one is im2col + gemm; ReLU is the gemm's activation. The graph:
**   stem    3x3/2 conv -> ReLU -> 3x3 conv -> ReLU -> 3x3 conv -> ReLU -> avg pool 2
**   blocks  x' = ReLU(c3(pool_s(ReLU(c2(ReLU(c1(x)))))) + shortcut(x)), where pool_s
**           is the anti-aliasing avg pool of a stride-2 block (identity otherwise) and
**           shortcut = down(pool_s(x)) when the block changes shape, else x (then c3
**           accumulates into x in place)
**   pool    tokens = [mean of the grid; grid] + positional embedding; k, v for every
**           token, q for the mean token only; attention (heads of 64); c_proj
** The output of the mean token's attention is the embedding (raw; model.c
** normalizes). Batches run in chunks whose scratch stays under CHUNK_BYTES (at
** least one image per chunk); all scratch belongs to the call, so calls on one
** model may run concurrently.
*/
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder_int.h"

#define CHUNK_BYTES ((size_t)128 << 20)

#define CK(call)                                   \
    do {                                           \
        if ((rc = (call)) != CDB_OK) goto cleanup; \
    } while (0)

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

static int conv_out(int in, const cdb_rn_conv *c) {
    return (in + 2 * c->pad - c->k) / c->stride + 1;
}

/* Per image: the largest activation any of the five rotating buffers holds and the
** largest im2col matrix, in elements; *side_out: the grid side after layer4. */
static void plan_sizes(const cdb_rn_tower *t, int isz, size_t *act, size_t *cols, int *side_out) {
    size_t a = (size_t)isz * isz * 3, cl = 0;
    int r = isz;
    for (int i = 0; i < 3; i++) {
        const cdb_rn_conv *c = &t->stem[i];
        int o = conv_out(r, c);
        if (c->k > 1) cl = zmax(cl, (size_t)o * o * c->k * c->k * c->cin);
        a = zmax(a, (size_t)o * o * c->cout);
        r = o;
    }
    r /= 2;
    a = zmax(a, (size_t)r * r * t->width);
    for (int i = 0; i < t->n_blocks; i++) {
        const cdb_rn_block *b = &t->blocks[i];
        int ro = r / b->stride;
        a = zmax(a, (size_t)r * r * b->c1.cout);
        cl = zmax(cl, (size_t)r * r * 9 * b->c2.cin);
        a = zmax(a, (size_t)r * r * b->c2.cout);
        a = zmax(a, (size_t)ro * ro * zmax((size_t)b->c1.cin, (size_t)b->c3.cout));
        r = ro;
    }
    /* attention pool: tokens, k|v, gathered/projected query rows */
    a = zmax(a, ((size_t)r * r + 1) * 2 * t->pool_width);
    *act = a;
    *cols = cl;
    *side_out = r;
}

/* y = act(conv(x)) (+ y when accumulate) for nb images of r x r; *r_out: output side. */
static cdb_status conv(cdb_k_backend *be, const cdb_rn_conv *c, const cdb_k_buf *x, int nb, int r,
                       cdb_k_buf *cols, cdb_k_buf *y, cdb_k_act act, int accumulate, int *r_out) {
    cdb_status rc = CDB_OK;
    int o = conv_out(r, c);
    const cdb_k_buf *in = x;
    if (c->k > 1 || c->stride > 1) { /* a 1x1 stride-1 convolution reads x as it is */
        CK(cdb_k_im2col(be, x, nb, r, r, c->cin, c->k, c->stride, c->pad, cols));
        in = cols;
    }
    CK(cdb_k_gemm(be, in, c->w, c->b, y, nb * o * o, c->cout, c->k * c->k * c->cin, act,
                  accumulate));
    *r_out = o;
cleanup:
    return rc;
}

cdb_status cdb_rn_image_forward(cdb_model *m, const float *pixels, int n, float *out) {
    cdb_k_backend *be = m->be;
    const cdb_rn_tower *t = &m->rn;
    const int isz = m->info.image_size, E = m->info.embed_dim, PW = t->pool_width;
    cdb_status rc = CDB_OK;
    size_t act_n, cols_n, per_image;
    int side, chunk, S;
    cdb_k_buf *X = NULL, *Y = NULL, *A = NULL, *B = NULL, *C = NULL, *cols = NULL, *emb = NULL;
    float *nhwc = NULL;
    int32_t *rows = NULL;

    plan_sizes(t, isz, &act_n, &cols_n, &side);
    S = side * side + 1;
    if (side != t->grid) /* model.c derived the grid from the same shapes */
        return cdb_seterr(CDB_CORRUPT, "ResNet tower: a %d-pixel image gives a %dx%d grid, the "
                          "positional embedding %dx%d", isz, side, side, t->grid, t->grid);
    per_image = (5 * act_n + cols_n) * sizeof(float);
    chunk = per_image >= CHUNK_BYTES ? 1 : (int)(CHUNK_BYTES / per_image);
    if (chunk > n) chunk = n;
    CK(cdb_k_buf_alloc(be, (size_t)chunk * act_n, &X));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * act_n, &Y));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * act_n, &A));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * act_n, &B));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * act_n, &C));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * (cols_n ? cols_n : 1), &cols));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * E, &emb));
    nhwc = malloc((size_t)chunk * isz * isz * 3 * sizeof(float));
    rows = malloc((size_t)chunk * sizeof *rows);
    if (!nhwc || !rows) {
        rc = cdb_seterr(CDB_NOMEM, "ResNet image batch scratch");
        goto cleanup;
    }
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk, r = isz;
        /* NCHW (the preprocessing's layout) -> NHWC, on the host: a permutation */
        for (int b = 0; b < nb; b++) {
            const float *img = pixels + (size_t)(i0 + b) * 3 * isz * isz;
            float *dst = nhwc + (size_t)b * isz * isz * 3;
            for (size_t p = 0; p < (size_t)isz * isz; p++)
                for (int ch = 0; ch < 3; ch++)
                    dst[p * 3 + ch] = img[(size_t)ch * isz * isz + p];
            rows[b] = b * S;
        }
        CK(cdb_k_buf_upload(be, A, 0, nhwc, (size_t)nb * isz * isz * 3));
        /* stem: A -> B -> A -> B, avg pool -> X */
        CK(conv(be, &t->stem[0], A, nb, r, cols, B, CDB_K_ACT_RELU, 0, &r));
        CK(conv(be, &t->stem[1], B, nb, r, cols, A, CDB_K_ACT_RELU, 0, &r));
        CK(conv(be, &t->stem[2], A, nb, r, cols, B, CDB_K_ACT_RELU, 0, &r));
        CK(cdb_k_avgpool(be, B, nb, r, r, t->width, 2, X));
        r /= 2;
        for (int i = 0; i < t->n_blocks; i++) {
            const cdb_rn_block *bl = &t->blocks[i];
            const int s = bl->stride, P = bl->c1.cout, Cin = bl->c1.cin;
            int r1, ro = r / s;
            const cdb_k_buf *c3_in = B;
            CK(conv(be, &bl->c1, X, nb, r, cols, A, CDB_K_ACT_RELU, 0, &r1));
            CK(conv(be, &bl->c2, A, nb, r, cols, B, CDB_K_ACT_RELU, 0, &r1));
            if (s > 1) {
                CK(cdb_k_avgpool(be, B, nb, r, r, P, s, C));
                c3_in = C;
            }
            if (bl->down.w) {
                const cdb_k_buf *xin = X;
                cdb_k_buf *tmp;
                if (s > 1) { /* A (c1's output) is free again */
                    CK(cdb_k_avgpool(be, X, nb, r, r, Cin, s, A));
                    xin = A;
                }
                CK(cdb_k_gemm(be, xin, bl->down.w, bl->down.b, Y, nb * ro * ro, bl->down.cout,
                              Cin, CDB_K_ACT_NONE, 0));
                CK(cdb_k_gemm(be, c3_in, bl->c3.w, bl->c3.b, Y, nb * ro * ro, bl->c3.cout, P,
                              CDB_K_ACT_NONE, 1));
                tmp = X, X = Y, Y = tmp;
            } else { /* identity shortcut: accumulate into the residual in place */
                CK(cdb_k_gemm(be, c3_in, bl->c3.w, bl->c3.b, X, nb * ro * ro, bl->c3.cout, P,
                              CDB_K_ACT_NONE, 1));
            }
            CK(cdb_k_activate(be, X, (size_t)nb * ro * ro * bl->c3.cout, CDB_K_ACT_RELU));
            r = ro;
        }
        /* attention pool: tokens A, k|v B, mean-token rows C, q Y, attention C, c_proj */
        CK(cdb_k_prepend_mean_add(be, X, t->pos, nb, r * r, PW, A));
        CK(cdb_k_gemm(be, A, t->kv_w, t->kv_b, B, nb * S, 2 * PW, PW, CDB_K_ACT_NONE, 0));
        CK(cdb_k_gather_rows(be, A, rows, nb, PW, C));
        CK(cdb_k_gemm(be, C, t->q_w, t->q_b, Y, nb, PW, PW, CDB_K_ACT_NONE, 0));
        CK(cdb_k_attention_q(be, Y, B, C, nb, 1, S, t->heads, PW / t->heads));
        CK(cdb_k_gemm(be, C, t->c_w, t->c_b, emb, nb, E, PW, CDB_K_ACT_NONE, 0));
        CK(cdb_k_buf_download(be, emb, 0, out + (size_t)i0 * E, (size_t)nb * E));
    }
cleanup:
    cdb_k_buf_free(be, X);
    cdb_k_buf_free(be, Y);
    cdb_k_buf_free(be, A);
    cdb_k_buf_free(be, B);
    cdb_k_buf_free(be, C);
    cdb_k_buf_free(be, cols);
    cdb_k_buf_free(be, emb);
    free(nhwc);
    free(rows);
    return rc;
}

static void conv_free(cdb_k_backend *be, cdb_rn_conv *c) {
    cdb_k_buf_free(be, c->w);
    cdb_k_buf_free(be, c->b);
}

void cdb_rn_tower_free(cdb_k_backend *be, cdb_rn_tower *t) {
    if (be) { /* no backend (inspect only, or failed early): no buffers */
        for (int i = 0; i < 3; i++) conv_free(be, &t->stem[i]);
        if (t->blocks)
            for (int i = 0; i < t->n_blocks; i++) {
                conv_free(be, &t->blocks[i].c1);
                conv_free(be, &t->blocks[i].c2);
                conv_free(be, &t->blocks[i].c3);
                conv_free(be, &t->blocks[i].down);
            }
        cdb_k_buf_free(be, t->pos);
        cdb_k_buf_free(be, t->q_w);
        cdb_k_buf_free(be, t->q_b);
        cdb_k_buf_free(be, t->kv_w);
        cdb_k_buf_free(be, t->kv_b);
        cdb_k_buf_free(be, t->c_w);
        cdb_k_buf_free(be, t->c_b);
    }
    free(t->blocks);
    memset(t, 0, sizeof *t);
}
