/*
** attention.cu: multi-head scaled dot-product attention after the input
** projection (torch.nn.MultiheadAttention's core), as batched per-head GEMMs:
**   split   qkv [B*T, 3*H*D] -> q, k, v [B, H, T, D] (f16)
**   scores  S = (q . k^T) / sqrt(D)   one strided-batched GEMM over B*H, fp32 out
**   softmax P = softmax(S) (fp32 statistics, f16 out; causal for the text tower)
**   values  O = P . v                  one strided-batched GEMM over B*H
**   merge   O [B, H, T, D] -> out [B*T, H*D]
** Every GEMM accumulates in fp32 (cuBLAS compute type 32F).
*/
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

static __global__ void k_split_heads(const void *__restrict__ qkv, int qkv_f32, uint16_t *q,
                                     uint16_t *k, uint16_t *v, int batch, int seq, int heads,
                                     int hd) {
    size_t w = (size_t)heads * hd, n = (size_t)batch * seq * 3 * w;
    CDB_KC_GRID_STRIDE(i, n) {
        size_t row = i / (3 * w), col = i % (3 * w);
        int which = (int)(col / w), h = (int)((col % w) / hd), d = (int)(col % hd);
        int b = (int)(row / seq), t = (int)(row % seq);
        size_t dst = (((size_t)b * heads + h) * seq + t) * hd + d;
        uint16_t val = qkv_f32 ? cdb_kc_f2h(((const float *)qkv)[i]) : ((const uint16_t *)qkv)[i];
        (which == 0 ? q : which == 1 ? k : v)[dst] = val;
    }
}

static __global__ void k_merge_heads(const uint16_t *__restrict__ o, uint16_t *__restrict__ out,
                                     int batch, int seq, int heads, int hd) {
    size_t w = (size_t)heads * hd, n = (size_t)batch * seq * w;
    CDB_KC_GRID_STRIDE(i, n) {
        size_t row = i / w, col = i % w;
        int h = (int)(col / hd), d = (int)(col % hd), b = (int)(row / seq), t = (int)(row % seq);
        out[i] = o[(((size_t)b * heads + h) * seq + t) * hd + d];
    }
}

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

extern "C" size_t cdb_kc_attention_ws_bytes(int batch, int seq, int heads, int head_dim) {
    size_t bht = (size_t)batch * heads * seq;
    return 4 * align256(bht * head_dim * 2)  /* q, k, v, o */
           + align256(bht * seq * 4)         /* scores */
           + align256(bht * seq * 2);        /* probabilities */
}

extern "C" cdb_status cdb_kc_attention(cdb_kc_ctx *c, const void *qkv, int qkv_f32, uint16_t *out,
                                       int batch, int seq, int heads, int head_dim, int causal,
                                       void *ws) {
    cdb_status rc = CDB_OK;
    size_t bht = (size_t)batch * heads * seq, hsz = align256(bht * head_dim * 2);
    char *p = (char *)ws;
    uint16_t *q = (uint16_t *)p, *k = (uint16_t *)(p + hsz), *v = (uint16_t *)(p + 2 * hsz),
             *o = (uint16_t *)(p + 3 * hsz);
    float *s = (float *)(p + 4 * hsz);
    uint16_t *pr = (uint16_t *)(p + 4 * hsz + align256(bht * seq * 4));
    size_t n = (size_t)batch * seq * 3 * heads * head_dim;
    unsigned grid;
    long long st_qkv = (long long)seq * head_dim, st_s = (long long)seq * seq;
    CDB_CUDA_CHECK_ARG(batch >= 0 && seq > 0 && heads > 0 && head_dim > 0 && ws,
                       "attention: batch %d seq %d heads %d head_dim %d", batch, seq, heads,
                       head_dim);
    if (!batch) return CDB_OK;
    grid = cdb_kc_grid(n, 256);
    k_split_heads<<<grid, 256, 0, c->compute>>>(qkv, qkv_f32, q, k, v, batch, seq, heads, head_dim);
    CDB_CUDA_CHECK_LAUNCH("k_split_heads");
    /* S_i [T,T] = q_i [T,D] . k_i [T,D]^T / sqrt(D) */
    if ((rc = cdb_kc_gemm_batched(c, seq, seq, head_dim, q, st_qkv, k, 1, st_qkv, s, 1, st_s,
                                  batch * heads, 1.0f / sqrtf((float)head_dim), 0.f)) != CDB_OK)
        goto done;
    if ((rc = cdb_kc_softmax(c, s, pr, (int)bht, seq, causal)) != CDB_OK) goto done;
    /* O_i [T,D] = P_i [T,T] . v_i [T,D] */
    if ((rc = cdb_kc_gemm_batched(c, seq, head_dim, seq, pr, st_s, v, 0, st_qkv, o, 0, st_qkv,
                                  batch * heads, 1.f, 0.f)) != CDB_OK)
        goto done;
    grid = cdb_kc_grid(n / 3, 256);
    k_merge_heads<<<grid, 256, 0, c->compute>>>(o, out, batch, seq, heads, head_dim);
    CDB_CUDA_CHECK_LAUNCH("k_merge_heads");
done:
    return rc;
}
