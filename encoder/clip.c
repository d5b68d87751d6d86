/*
** clip.c: the CLIP forward graph, written once against the BACKEND interface of
** kernels/kernels.h (the CPU, the scalar reference and the CUDA backends run it unchanged).
** A ModifiedResNet image tower is resnet.c's; cdb_clip_image_forward dispatches.
**
** Image tower (ViT): the stride-p convolution is a GEMM over non-overlapping
** patches, unfolded by the backend from the uploaded pixels (cdb_k_patchify: on the
** device for a GPU backend), then class token + positional embedding, ln_pre, pre-LN
** residual blocks (x += attn(ln_1(x)); x += mlp(ln_2(x))), ln_post on the class
** token only, projection. The last block runs its attention, output projection and
** MLP on the pooled rows only (the class token, the end token): nothing else
** reaches the output, and each of those ops computes a row the same way whatever
** other rows it is given.
** SigLIP's image tower (siglip_image_forward): patches with the convolution's bias plus
** the positional embedding, no class token and no ln_pre, every block on every row,
** then ln_post on every row and the MAP head (run_map_head): its output is the
** embedding. Each tower carries its own activation and LayerNorm eps.
** Text tower: token + positional embedding, the same blocks with causal attention,
** ln_final and projection on the pooled token only. Pooling is at the first end
** token (the model's eot id; argmax when absent, as OpenAI CLIP). Because attention
** is causal, positions after the end token never influence it: a batch is
** computed only up to its longest end token (exact, not an approximation). SigLIP's
** text tower (pool_last) is bidirectional and pooled at the last position, its
** projection has a bias.
**
** Batches are processed in chunks whose scratch stays under the backend's
** cdb_k_scratch_bytes (128 MiB on the CPU, most of the free memory on a GPU). All
** scratch belongs to the call, so calls on one model may run concurrently.
*/
#include <stdlib.h>
#include <string.h>

#include "encoder/encoder_int.h"

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

/* Scratch bytes per row of a tower's activations (scratch_alloc's five buffers). */
static size_t row_bytes(const cdb_clip_tower *t) {
    return (6 * (size_t)t->width + (size_t)t->mlp_width) * sizeof(float);
}

/* Items of one chunk so that scratch stays under the backend's budget (at least one). */
static int items_per_chunk(cdb_k_backend *be, const cdb_clip_tower *t, int seq, int n) {
    size_t per_row = row_bytes(t);
    size_t rows = cdb_k_scratch_bytes(be) / per_row, items = rows / (size_t)seq;
    if (items < 1) items = 1;
    return items < (size_t)n ? (int)items : n;
}

/* Residual block l on every row of s->x: [batch*seq, width]. */
static cdb_status run_block(cdb_k_backend *be, const cdb_clip_tower *t, int l, scratch *s,
                            int batch, int seq, int causal) {
    cdb_status rc = CDB_OK;
    const cdb_clip_block *b = &t->blocks[l];
    const cdb_k_act act = t->act;
    const float eps = t->ln_eps;
    int rows = batch * seq, w = t->width, hd = t->width / t->heads;
    CK(cdb_k_layernorm(be, s->x, b->ln1_g, b->ln1_b, s->h, rows, w, eps));
    CK(cdb_k_gemm(be, s->h, b->qkv_w, b->qkv_b, s->qkv, rows, 3 * w, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_attention(be, s->qkv, s->attn, batch, seq, t->heads, hd, causal));
    CK(cdb_k_gemm(be, s->attn, b->out_w, b->out_b, s->x, rows, w, w, CDB_K_ACT_NONE, 1));
    CK(cdb_k_layernorm(be, s->x, b->ln2_g, b->ln2_b, s->h, rows, w, eps));
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
** with its in-projection split (q_w, kv_w: a CLIP vision tower's, SigLIP's text
** tower's) also computes the query of the pooled rows only (on the CPU, attention_q of
** one query is attention_rows' row: test_backend_cpu); a causal (CLIP text) block keeps
** the one q|k|v product. */
static cdb_status run_last_block_pooled(cdb_k_backend *be, const cdb_clip_tower *t, scratch *s,
                                        int batch, int seq, int causal, const int32_t *pos,
                                        int32_t *rows) {
    cdb_status rc = CDB_OK;
    const cdb_clip_block *b = &t->blocks[t->layers - 1];
    const cdb_k_act act = t->act;
    const float eps = t->ln_eps;
    int w = t->width, hd = t->width / t->heads;
    for (int i = 0; i < batch; i++) rows[i] = i * seq + pos[i];
    CK(cdb_k_layernorm(be, s->x, b->ln1_g, b->ln1_b, s->h, batch * seq, w, eps));
    if (b->q_w) {
        if (causal) { /* the loader splits no causal block: attention_q is not causal */
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
    CK(cdb_k_layernorm(be, s->h, b->ln2_g, b->ln2_b, s->attn, batch, w, eps));
    CK(cdb_k_gemm(be, s->attn, b->fc_w, b->fc_b, s->mlp, batch, t->mlp_width, w, act, 0));
    CK(cdb_k_gemm(be, s->mlp, b->proj_w, b->proj_b, s->h, batch, w, t->mlp_width,
                  CDB_K_ACT_NONE, 1));
cleanup:
    return rc;
}

/* The tower's blocks on s->x [batch*seq, width] and its head (ln + projection, with
** its bias if any) on the pooled row of each item (pos[i]: its position in item i; a
** tower has >= 1 layer): downloads batch * embed_dim floats. rows: scratch of batch
** ints. */
static cdb_status run_tower(cdb_k_backend *be, const cdb_clip_tower *t, scratch *s, int batch,
                            int seq, int causal, const int32_t *pos, int32_t *rows,
                            int embed_dim, float *out) {
    cdb_status rc = CDB_OK;
    int w = t->width;
    cdb_k_buf *e = NULL;
    for (int l = 0; l + 1 < t->layers; l++) CK(run_block(be, t, l, s, batch, seq, causal));
    CK(run_last_block_pooled(be, t, s, batch, seq, causal, pos, rows));
    CK(cdb_k_layernorm(be, s->h, t->ln_post_g, t->ln_post_b, s->h, batch, w, t->ln_eps));
    /* embed_dim <= rows * width is not guaranteed: the projection gets its own buffer */
    CK(cdb_k_buf_alloc(be, (size_t)batch * embed_dim, &e));
    CK(cdb_k_gemm(be, s->h, t->proj, t->proj_b, e, batch, embed_dim, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_buf_download(be, e, 0, out, (size_t)batch * embed_dim));
cleanup:
    cdb_k_buf_free(be, e);
    return rc;
}

/* The patch matrix of images i0 .. i0+nb of src into pin: the pixels (CHW, isz square)
** are uploaded as they are, or written by src's fill, into px (nb images) and unfolded
** by the backend (cdb_k_patchify: on the device for a GPU backend), rows b*N + gy*G +
** gx, columns in the conv weight's (channel, ky, kx) order. */
static cdb_status upload_patches(cdb_k_backend *be, const cdb_pixsrc *src, int i0, int nb,
                                 int isz, int P, cdb_k_buf *px, cdb_k_buf *pin) {
    cdb_status rc = src->pixels ? cdb_k_buf_upload(be, px, 0, src->pixels + (size_t)i0 * 3 *
                                                   isz * isz, (size_t)nb * 3 * isz * isz)
                                : src->fill(src->ud, be, i0, nb, px);
    return rc != CDB_OK ? rc : cdb_k_patchify(be, px, nb, 3, isz, isz, P, pin);
}

static cdb_status vit_image_forward(cdb_model *m, const cdb_pixsrc *src, int n, float *out) {
    cdb_k_backend *be = m->be;
    const cdb_clip_tower *t = &m->vision;
    cdb_status rc = CDB_OK;
    const int P = m->info.patch_size, isz = m->info.image_size, G = isz / P, N = G * G, S = N + 1;
    const int K = 3 * P * P, W = t->width, E = m->info.embed_dim;
    const int chunk = items_per_chunk(be, t, S, n);
    scratch s;
    cdb_k_buf *pin = NULL, *px = NULL;
    int32_t *rows = NULL, *cls = NULL;

    memset(&s, 0, sizeof s);
    CK(scratch_alloc(be, t, (size_t)chunk * S, &s));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * N * K, &pin));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * 3 * isz * isz, &px));
    rows = malloc((size_t)chunk * sizeof *rows);
    cls = calloc((size_t)chunk, sizeof *cls); /* each item's pooled row: its class token */
    if (!rows || !cls) {
        rc = cdb_seterr(CDB_NOMEM, "image batch scratch");
        goto cleanup;
    }
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        CK(upload_patches(be, src, i0, nb, isz, P, px, pin));
        CK(cdb_k_gemm(be, pin, t->patch_w, NULL, s.h, nb * N, W, K, CDB_K_ACT_NONE, 0));
        CK(cdb_k_prepend_add(be, s.h, t->cls, t->pos, nb, N, W, s.x));
        CK(cdb_k_layernorm(be, s.x, t->ln_pre_g, t->ln_pre_b, s.x, nb * S, W, t->ln_eps));
        CK(run_tower(be, t, &s, nb, S, 0, cls, rows, E, out + (size_t)i0 * E));
    }
cleanup:
    scratch_free(be, &s);
    cdb_k_buf_free(be, pin);
    cdb_k_buf_free(be, px);
    free(rows);
    free(cls);
    return rc;
}

/* SigLIP's MAP head on s->x [batch*seq, width], the last block's output: ln_post on
** every row, the probe's query over every row's keys and values, the output
** projection, then r + mlp(ln(r)) (HF's SiglipMultiheadAttentionPoolingHead, timm's
** AttentionPoolLatent): the embedding, batch rows of width, into s->x. The probe's
** query is one GEMM row, computed the same way for every call and copied to each item. */
static cdb_status run_map_head(cdb_k_backend *be, const cdb_clip_tower *t, scratch *s, int batch,
                               int seq, int32_t *zeros, cdb_k_buf *q1) {
    cdb_status rc = CDB_OK;
    const cdb_clip_block *h = &t->head;
    const int w = t->width, hd = t->width / t->heads;
    CK(cdb_k_layernorm(be, s->x, t->ln_post_g, t->ln_post_b, s->h, batch * seq, w, t->ln_eps));
    CK(cdb_k_gemm(be, s->h, h->kv_w, h->kv_b, s->qkv, batch * seq, 2 * w, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_gemm(be, t->probe, h->q_w, h->q_b, q1, 1, w, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_gather_rows(be, q1, zeros, batch, w, s->x));
    CK(cdb_k_attention_q(be, s->x, s->qkv, s->attn, batch, 1, seq, t->heads, hd));
    CK(cdb_k_gemm(be, s->attn, h->out_w, h->out_b, s->x, batch, w, w, CDB_K_ACT_NONE, 0));
    CK(cdb_k_layernorm(be, s->x, h->ln2_g, h->ln2_b, s->h, batch, w, t->ln_eps));
    CK(cdb_k_gemm(be, s->h, h->fc_w, h->fc_b, s->mlp, batch, t->mlp_width, w, t->act, 0));
    CK(cdb_k_gemm(be, s->mlp, h->proj_w, h->proj_b, s->x, batch, w, t->mlp_width,
                  CDB_K_ACT_NONE, 1));
cleanup:
    return rc;
}

/* SigLIP's image tower: patches (with the convolution's bias) + positional embedding,
** no class token, no ln_pre, every block on every row (the head attends over all of
** them), then the MAP head; its output is the embedding (width == embed_dim). */
static cdb_status siglip_image_forward(cdb_model *m, const cdb_pixsrc *src, int n,
                                       float *out) {
    cdb_k_backend *be = m->be;
    const cdb_clip_tower *t = &m->vision;
    cdb_status rc = CDB_OK;
    const int P = m->info.patch_size, isz = m->info.image_size, G = isz / P, N = G * G;
    const int K = 3 * P * P, W = t->width;
    const int chunk = items_per_chunk(be, t, N, n);
    scratch s;
    cdb_k_buf *pin = NULL, *px = NULL, *q1 = NULL;
    int32_t *ids = NULL, *zeros = NULL;

    memset(&s, 0, sizeof s);
    CK(scratch_alloc(be, t, (size_t)chunk * N, &s));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * N * K, &pin));
    CK(cdb_k_buf_alloc(be, (size_t)chunk * 3 * isz * isz, &px));
    CK(cdb_k_buf_alloc(be, (size_t)W, &q1));
    ids = malloc((size_t)chunk * N * sizeof *ids);
    zeros = calloc((size_t)chunk, sizeof *zeros);
    if (!ids || !zeros) {
        rc = cdb_seterr(CDB_NOMEM, "image batch scratch");
        goto cleanup;
    }
    for (int r = 0; r < chunk * N; r++) ids[r] = r % N; /* row r's positional embedding */
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int nb = n - i0 < chunk ? n - i0 : chunk;
        CK(upload_patches(be, src, i0, nb, isz, P, px, pin));
        CK(cdb_k_gemm(be, pin, t->patch_w, t->patch_b, s.h, nb * N, W, K, CDB_K_ACT_NONE, 0));
        /* x = pos[r % N] + patches[r]: lookup_add's periodic addend is the whole batch
        ** (one period), its table the positional embedding (fp32 addition commutes: the
        ** bits of patches + pos) */
        CK(cdb_k_lookup_add(be, t->pos, s.h, ids, nb * N, nb * N, W, s.x));
        for (int l = 0; l < t->layers; l++) CK(run_block(be, t, l, &s, nb, N, 0));
        CK(run_map_head(be, t, &s, nb, N, zeros, q1));
        CK(cdb_k_buf_download(be, s.x, 0, out + (size_t)i0 * W, (size_t)nb * W));
    }
cleanup:
    scratch_free(be, &s);
    cdb_k_buf_free(be, pin);
    cdb_k_buf_free(be, px);
    cdb_k_buf_free(be, q1);
    free(ids);
    free(zeros);
    return rc;
}

cdb_status cdb_clip_image_forward_src(cdb_model *m, const cdb_pixsrc *src, int n, float *out) {
    if (m->vision_rn) { /* resnet.c: host pixels only */
        if (!src->pixels)
            return cdb_seterr(CDB_INVALID, "ResNet image tower: pixels must come from the host");
        return cdb_rn_image_forward(m, src->pixels, n, out);
    }
    return m->vision.probe ? siglip_image_forward(m, src, n, out)
                           : vit_image_forward(m, src, n, out);
}

size_t cdb_clip_image_item_bytes(const cdb_model *m) {
    const int P = m->info.patch_size, isz = m->info.image_size;
    const size_t px = (size_t)3 * isz * isz * sizeof(float);
    size_t seq;
    if (m->vision_rn || P <= 0) return 0; /* the ResNet tower sizes its own chunks */
    seq = (size_t)(isz / P) * (isz / P) + (m->vision.probe ? 0 : 1);
    /* activations, the pixels, the patch matrix (as many floats as the pixels) */
    return seq * row_bytes(&m->vision) + 2 * px;
}

cdb_status cdb_clip_image_forward(cdb_model *m, const float *pixels, int n, float *out) {
    cdb_pixsrc src = {pixels, NULL, NULL};
    return cdb_clip_image_forward_src(m, &src, n, out);
}

cdb_status cdb_clip_text_forward(cdb_model *m, const int32_t *ids, int n, float *out) {
    cdb_k_backend *be = m->be;
    const cdb_clip_tower *t = &m->text;
    cdb_status rc = CDB_OK;
    const int C = m->info.context_length, V = m->info.vocab_size, E = m->info.embed_dim;
    const int chunk = items_per_chunk(be, t, C, n);
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
        pool[i] = t->pool_last ? C - 1 : eot >= 0 ? eot : amax;
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
        CK(run_tower(be, t, &s, nb, S, !t->pool_last, pool + i0, rows, E, out + (size_t)i0 * E));
    }
cleanup:
    scratch_free(be, &s);
    free(pool);
    free(sub);
    free(rows);
    return rc;
}
