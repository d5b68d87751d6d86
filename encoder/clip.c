/*
** clip.c: the CLIP forward graph, written once against the BACKEND interface of
** kernels/kernels.h (the CPU, the scalar reference and the CUDA backends run it unchanged).
** A ModifiedResNet image tower is resnet.c's; cdb_clip_image_forward dispatches.
**
** Image tower (ViT): the stride-p convolution is a GEMM over non-overlapping
** patches unfolded on the host (a pure permutation, so the upload is the same
** size as the pixels), then class token + positional embedding, ln_pre, pre-LN
** residual blocks (x += attn(ln_1(x)); x += mlp(ln_2(x))), ln_post on the class
** token only, projection. The last block runs its attention, output projection and
** MLP on the pooled rows only (the class token, the end token): nothing else
** reaches the output, and each of those ops computes a row the same way whatever
** other rows it is given.
** Text tower: token + positional embedding, the same blocks with causal attention,
** ln_final and projection on the pooled token only. Pooling is at the first end
** token (the model's eot id; argmax when absent, as OpenAI CLIP). Because attention
** is causal, positions after the end token never influence it: a batch is
** computed only up to its longest end token (exact, not an approximation).
**
** Batches are processed in chunks whose scratch stays under CHUNK_BYTES. All
** scratch belongs to the call, so calls on one model may run concurrently.
*/
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder_int.h"

#define CHUNK_BYTES ((size_t)128 << 20)
#define LN_EPS 1e-5f

#define CK(call)                                   \
    do {                                           \
        if ((rc = (call)) != CDB_OK) goto cleanup; \
    } while (0)

typedef struct scratch {
    cdb_k_buf *x, *h, *qkv, *attn, *mlp;
} scratch;

static void scratch_free(cdb_k_backend *be, scratch *s) {
    cdb_k_buf_free(be, s->x);
    cdb_k_buf_free(be, s->h);
    cdb_k_buf_free(be, s->qkv);
    cdb_k_buf_free(be, s->attn);
    cdb_k_buf_free(be, s->mlp);
    memset(s, 0, sizeof *s);
}

static cdb_status scratch_alloc(cdb_k_backend *be, const cdb_clip_tower *t, size_t rows,
                                scratch *s) {
    cdb_status rc;
    size_t w = (size_t)t->width;
    memset(s, 0, sizeof *s);
    CK(cdb_k_buf_alloc(be, rows * w, &s->x));
    CK(cdb_k_buf_alloc(be, rows * w, &s->h));
    CK(cdb_k_buf_alloc(be, rows * 3 * w, &s->qkv));
    CK(cdb_k_buf_alloc(be, rows * w, &s->attn));
    CK(cdb_k_buf_alloc(be, rows * (size_t)t->mlp_width, &s->mlp));
    return CDB_OK;
cleanup:
    scratch_free(be, s);
    return rc;
}

/* Rows of one chunk so that scratch stays under CHUNK_BYTES (at least one item). */
static int items_per_chunk(const cdb_clip_tower *t, int seq, int n) {
    size_t per_row = (6 * (size_t)t->width + (size_t)t->mlp_width) * sizeof(float);
    size_t rows = CHUNK_BYTES / per_row, items = rows / (size_t)seq;
    if (items < 1) items = 1;
    return items < (size_t)n ? (int)items : n;
}

/* Residual block l on every row of s->x: [batch*seq, width]. */
static cdb_status run_block(cdb_k_backend *be, const cdb_clip_tower *t, int l, cdb_k_act act,
                            scratch *s, int batch, int seq, int causal) {
    cdb_status rc = CDB_OK;
    const cdb_clip_block *b = &t->blocks[l];
    int rows = batch * seq, w = t->width, hd = t->width / t->heads;
    CK(cdb_k_layernorm(be, s->x, b->ln1_g, b->ln1_b, s->h, rows, w, LN_EPS));
    CK(cdb_k_gemm(be, s->h, b->qkv_w, b->qkv_b, s->qkv, rows, 3 * w, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_attention(be, s->qkv, s->attn, batch, seq, t->heads, hd, causal));
    CK(cdb_k_gemm(be, s->attn, b->out_w, b->out_b, s->x, rows, w, w, CDB_K_ACT_NONE, 1));
    CK(cdb_k_layernorm(be, s->x, b->ln2_g, b->ln2_b, s->h, rows, w, LN_EPS));
    CK(cdb_k_gemm(be, s->h, b->fc_w, b->fc_b, s->mlp, rows, t->mlp_width, w, act, 0));
    CK(cdb_k_gemm(be, s->mlp, b->proj_w, b->proj_b, s->x, rows, w, t->mlp_width, CDB_K_ACT_NONE,
                  1));
cleanup:
    return rc;
}

/* The last residual block for the pooled row of each item only (pos[i]: its position
** in item i), into s->h [batch, width]: every row's keys and values, then attention,
** output projection and MLP of the pooled rows alone. Each op's row arithmetic does
** not depend on how many rows it is given, so these are the rows run_block would
** give, bit for bit on the CPU, for 1/seq of its attention and MLP. A block loaded
** with its in-projection split (the vision tower's: q_w, kv_w) also computes the
** query of the pooled rows only (on the CPU, attention_q of one query is
** attention_rows' row: test_backend_cpu); a causal (text) block keeps the one q|k|v
** product. */
static cdb_status run_last_block_pooled(cdb_k_backend *be, const cdb_clip_tower *t,
                                        cdb_k_act act, scratch *s, int batch, int seq,
                                        int causal, const int32_t *pos, int32_t *rows) {
    cdb_status rc = CDB_OK;
    const cdb_clip_block *b = &t->blocks[t->layers - 1];
    int w = t->width, hd = t->width / t->heads;
    for (int i = 0; i < batch; i++) rows[i] = i * seq + pos[i];
    CK(cdb_k_layernorm(be, s->x, b->ln1_g, b->ln1_b, s->h, batch * seq, w, LN_EPS));
    if (b->q_w) {
        if (causal) { /* the loader splits vision blocks only: attention_q is not causal */
            rc = cdb_seterr(CDB_INVALID, "a causal block with a split in-projection");
            goto cleanup;
        }
        /* s->qkv holds k|v [batch*seq, 2w], s->h (its rows used) the pooled rows' q */
        CK(cdb_k_gemm(be, s->h, b->kv_w, b->kv_b, s->qkv, batch * seq, 2 * w, w,
                      CDB_K_ACT_NONE, 0));
        CK(cdb_k_gather_rows(be, s->h, rows, batch, w, s->attn));
        CK(cdb_k_gemm(be, s->attn, b->q_w, b->q_b, s->h, batch, w, w, CDB_K_ACT_NONE, 0));
        CK(cdb_k_attention_q(be, s->h, s->qkv, s->attn, batch, 1, seq, t->heads, hd));
    } else {
        CK(cdb_k_gemm(be, s->h, b->qkv_w, b->qkv_b, s->qkv, batch * seq, 3 * w, w,
                      CDB_K_ACT_NONE, 0));
        CK(cdb_k_attention_rows(be, s->qkv, s->attn, batch, seq, t->heads, hd, causal, pos));
    }
    CK(cdb_k_gather_rows(be, s->x, rows, batch, w, s->h));
    CK(cdb_k_gemm(be, s->attn, b->out_w, b->out_b, s->h, batch, w, w, CDB_K_ACT_NONE, 1));
    CK(cdb_k_layernorm(be, s->h, b->ln2_g, b->ln2_b, s->attn, batch, w, LN_EPS));
    CK(cdb_k_gemm(be, s->attn, b->fc_w, b->fc_b, s->mlp, batch, t->mlp_width, w, act, 0));
    CK(cdb_k_gemm(be, s->mlp, b->proj_w, b->proj_b, s->h, batch, w, t->mlp_width,
                  CDB_K_ACT_NONE, 1));
cleanup:
    return rc;
}

/* The tower's blocks on s->x [batch*seq, width] and its head (ln + projection) on the
** pooled row of each item (pos[i]: its position in item i; a tower has >= 1 layer):
** downloads batch * embed_dim floats. rows: scratch of batch ints. */
static cdb_status run_tower(cdb_k_backend *be, const cdb_clip_tower *t, cdb_k_act act,
                            scratch *s, int batch, int seq, int causal, const int32_t *pos,
                            int32_t *rows, int embed_dim, float *out) {
    cdb_status rc = CDB_OK;
    int w = t->width;
    cdb_k_buf *e = NULL;
    for (int l = 0; l + 1 < t->layers; l++) CK(run_block(be, t, l, act, s, batch, seq, causal));
    CK(run_last_block_pooled(be, t, act, s, batch, seq, causal, pos, rows));
    CK(cdb_k_layernorm(be, s->h, t->ln_post_g, t->ln_post_b, s->h, batch, w, LN_EPS));
    /* embed_dim <= rows * width is not guaranteed: the projection gets its own buffer */
    CK(cdb_k_buf_alloc(be, (size_t)batch * embed_dim, &e));
    CK(cdb_k_gemm(be, s->h, t->proj, NULL, e, batch, embed_dim, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_buf_download(be, e, 0, out, (size_t)batch * embed_dim));
cleanup:
    cdb_k_buf_free(be, e);
    return rc;
}

static cdb_status vit_image_forward(cdb_model *m, const float *pixels, int n, float *out) {
    cdb_k_backend *be = m->be;
    const cdb_clip_tower *t = &m->vision;
    cdb_status rc = CDB_OK;
    const int P = m->info.patch_size, isz = m->info.image_size, G = isz / P, N = G * G, S = N + 1;
    const int K = 3 * P * P, W = t->width, E = m->info.embed_dim;
    const int chunk = items_per_chunk(t, S, n);
    scratch s;
    cdb_k_buf *pin = NULL;
    float *unf = NULL;
    int32_t *rows = NULL, *cls = NULL;

    memset(&s, 0, sizeof s);
    CK(scratch_alloc(be, t, (size_t)chunk * S, &s));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * N * K, &pin));
    unf = malloc((size_t)chunk * N * K * sizeof(float));
    rows = malloc((size_t)chunk * sizeof *rows);
    cls = calloc((size_t)chunk, sizeof *cls); /* each item's pooled row: its class token */
    if (!unf || !rows || !cls) {
        rc = cdb_seterr(CDB_NOMEM, "image batch scratch");
        goto cleanup;
    }
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        /* Unfold: patch (gy, gx) of image b -> row b*N + gy*G + gx, columns in the
        ** conv weight's (channel, ky, kx) order. */
        for (int b = 0; b < nb; b++) {
            const float *img = pixels + (size_t)(i0 + b) * 3 * isz * isz;
            for (int gy = 0; gy < G; gy++)
                for (int gx = 0; gx < G; gx++) {
                    float *dst = unf + ((size_t)b * N + (size_t)gy * G + gx) * K;
                    for (int ch = 0; ch < 3; ch++)
                        for (int ky = 0; ky < P; ky++) {
                            const float *src = img + ((size_t)ch * isz + (size_t)gy * P + ky) * isz +
                                               (size_t)gx * P;
                            memcpy(dst + ((size_t)ch * P + ky) * P, src, (size_t)P * sizeof(float));
                        }
                }
        }
        CK(cdb_k_buf_upload(be, pin, 0, unf, (size_t)nb * N * K));
        CK(cdb_k_gemm(be, pin, t->patch_w, NULL, s.h, nb * N, W, K, CDB_K_ACT_NONE, 0));
        CK(cdb_k_prepend_add(be, s.h, t->cls, t->pos, nb, N, W, s.x));
        CK(cdb_k_layernorm(be, s.x, t->ln_pre_g, t->ln_pre_b, s.x, nb * S, W, LN_EPS));
        CK(run_tower(be, t, m->act, &s, nb, S, 0, cls, rows, E, out + (size_t)i0 * E));
    }
cleanup:
    scratch_free(be, &s);
    cdb_k_buf_free(be, pin);
    free(unf);
    free(rows);
    free(cls);
    return rc;
}

cdb_status cdb_clip_image_forward(cdb_model *m, const float *pixels, int n, float *out) {
    return m->vision_rn ? cdb_rn_image_forward(m, pixels, n, out) /* resnet.c */
                        : vit_image_forward(m, pixels, n, out);
}

cdb_status cdb_clip_text_forward(cdb_model *m, const int32_t *ids, int n, float *out) {
    cdb_k_backend *be = m->be;
    const cdb_clip_tower *t = &m->text;
    cdb_status rc = CDB_OK;
    const int C = m->info.context_length, V = m->info.vocab_size, E = m->info.embed_dim;
    const int chunk = items_per_chunk(t, C, n);
    scratch s;
    int32_t *pool = NULL, *sub = NULL, *rows = NULL;

    memset(&s, 0, sizeof s);
    pool = malloc((size_t)n * sizeof *pool);
    sub = malloc((size_t)chunk * C * sizeof *sub);
    rows = malloc((size_t)chunk * sizeof *rows);
    if (!pool || !sub || !rows) {
        rc = cdb_seterr(CDB_NOMEM, "text batch scratch");
        goto cleanup;
    }
    for (int i = 0; i < n; i++) {
        const int32_t *r = ids + (size_t)i * C;
        int eot = -1, amax = 0;
        for (int j = 0; j < C; j++) {
            if (r[j] < 0 || r[j] >= V) {
                rc = cdb_seterr(CDB_INVALID, "text %d: token id %d at position %d outside the "
                                "vocabulary [0, %d)", i, r[j], j, V);
                goto cleanup;
            }
            if (eot < 0 && r[j] == m->eot_id) eot = j;
            if (r[j] > r[amax]) amax = j;
        }
        pool[i] = eot >= 0 ? eot : amax;
    }
    CK(scratch_alloc(be, t, (size_t)chunk * C, &s));
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk, S = 1;
        for (int b = 0; b < nb; b++)
            if (pool[i0 + b] + 1 > S) S = pool[i0 + b] + 1;
        for (int b = 0; b < nb; b++) {
            memcpy(sub + (size_t)b * S, ids + (size_t)(i0 + b) * C, (size_t)S * sizeof *sub);
        }
        CK(cdb_k_lookup_add(be, t->tok_emb, t->pos, sub, nb * S, S, t->width, s.x));
        CK(run_tower(be, t, m->act, &s, nb, S, 1, pool + i0, rows, E, out + (size_t)i0 * E));
    }
cleanup:
    scratch_free(be, &s);
    free(pool);
    free(sub);
    free(rows);
    return rc;
}
