/*
** attention_q.cu: attention with separate queries, for the ModifiedResNet
** attention pool (one query per image over its grid + 1 tokens, 32..64 heads of
** 64): too small for the batched-GEMM path of attention.cu. One thread block per
** (item, head, query): scores q.k / sqrt(head_dim) for every key into shared
** memory, fp32 max and sum by block reduction, then out[l] = sum_j p_j v_j[l].
*/
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

#define AQ_THREADS 128
#define AQ_MAX_SEQ 8192

/* Block-wide reduction (max when is_max, else sum) of v; every thread gets it. */
static __device__ float block_reduce(float v, int is_max, float *red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = is_max ? cdb_kc_warp_max(v) : cdb_kc_warp_sum(v);
    __syncthreads(); /* red may still be read from the previous call */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : (is_max ? -INFINITY : 0.f);
    return is_max ? cdb_kc_warp_max(v) : cdb_kc_warp_sum(v);
}

static __global__ void k_attention_q(const void *__restrict__ q, int q_f32,
                                     const void *__restrict__ kv, int kv_f32,
                                     uint16_t *__restrict__ out, int n_q, int seq, int heads,
                                     int hd, float scale) {
    extern __shared__ float sh[]; /* seq scores, then 32 reduction slots */
    float *p = sh, *red = sh + seq;
    int idx = blockIdx.x, i = idx % n_q, h = (idx / n_q) % heads, b = idx / (n_q * heads);
    size_t d = (size_t)heads * hd;
    size_t qoff = ((size_t)b * n_q + i) * d + (size_t)h * hd;
    size_t kbase = (size_t)b * seq * 2 * d + (size_t)h * hd;
    float mx = -INFINITY, sum = 0.f, inv;
    for (int j = threadIdx.x; j < seq; j += blockDim.x) {
        float s = 0.f;
        size_t krow = kbase + (size_t)j * 2 * d;
        for (int l = 0; l < hd; l++)
            s += cdb_kc_ld(q, q_f32, qoff + l) * cdb_kc_ld(kv, kv_f32, krow + l);
        p[j] = s * scale;
        mx = fmaxf(mx, p[j]);
    }
    mx = block_reduce(mx, 1, red);
    for (int j = threadIdx.x; j < seq; j += blockDim.x) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    sum = block_reduce(sum, 0, red); /* its first barrier also publishes p[] */
    inv = 1.f / sum;
    for (int l = threadIdx.x; l < hd; l += blockDim.x) {
        float o = 0.f;
        for (int j = 0; j < seq; j++)
            o += p[j] * cdb_kc_ld(kv, kv_f32, kbase + (size_t)j * 2 * d + d + l);
        out[qoff + l] = cdb_kc_f2h(o * inv);
    }
}

extern "C" cdb_status cdb_kc_attention_q(cdb_kc_ctx *c, const void *q, int q_f32, const void *kv,
                                         int kv_f32, uint16_t *out, int batch, int n_q, int seq,
                                         int heads, int head_dim) {
    cdb_status rc = CDB_OK;
    size_t blocks, smem;
    CDB_CUDA_CHECK_ARG(batch >= 0 && n_q > 0 && seq > 0 && seq <= AQ_MAX_SEQ && heads > 0 &&
                           head_dim > 0,
                       "attention_q: batch %d n_q %d seq %d heads %d head_dim %d", batch, n_q,
                       seq, heads, head_dim);
    blocks = (size_t)batch * heads * n_q;
    CDB_CUDA_CHECK_ARG(blocks <= 0x7fffffffu, "attention_q: %zu blocks", blocks);
    if (!blocks) return CDB_OK;
    smem = ((size_t)seq + 32) * sizeof(float);
    k_attention_q<<<(unsigned)blocks, AQ_THREADS, smem, c->compute>>>(
        q, q_f32, kv, kv_f32, out, n_q, seq, heads, head_dim, 1.0f / sqrtf((float)head_dim));
    CDB_CUDA_CHECK_LAUNCH("k_attention_q");
done:
    return rc;
}
