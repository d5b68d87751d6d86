/*
** softmax.cu: row softmax of fp32 attention scores into fp16 probabilities.
** fp32 throughout: max subtraction, exp, sum; one warp per row. Causal rows
** (the text tower) give probability 0 to keys after the query.
*/
#include "kernels/cuda/cuda_common.cuh"

#define SM_WARPS 8

static __global__ void k_softmax(const float *__restrict__ s, uint16_t *__restrict__ p,
                                 int rows, int cols, int causal) {
    int r = blockIdx.x * SM_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    const float *in;
    uint16_t *out;
    int lim;
    float mx = -INFINITY, sum = 0.f, inv;
    if (r >= rows) return;
    in = s + (size_t)r * cols;
    out = p + (size_t)r * cols;
    lim = causal ? (r % cols) + 1 : cols; /* keys [0, lim) are visible */
    for (int j = lane; j < lim; j += 32) mx = fmaxf(mx, in[j]);
    mx = cdb_kc_warp_max(mx);
    for (int j = lane; j < lim; j += 32) sum += expf(in[j] - mx);
    sum = cdb_kc_warp_sum(sum);
    inv = 1.f / sum;
    for (int j = lane; j < cols; j += 32)
        out[j] = j < lim ? cdb_kc_f2h(expf(in[j] - mx) * inv) : (uint16_t)0;
}

extern "C" cdb_status cdb_kc_softmax(cdb_kc_ctx *c, const float *s, uint16_t *p, int rows,
                                     int cols, int causal) {
    cdb_status rc = CDB_OK;
    CDB_CUDA_CHECK_ARG(rows >= 0 && cols > 0, "softmax: %d rows of %d", rows, cols);
    if (!rows) return CDB_OK;
    k_softmax<<<(rows + SM_WARPS - 1) / SM_WARPS, SM_WARPS * 32, 0, c->compute>>>(s, p, rows, cols,
                                                                                 causal);
    CDB_CUDA_CHECK_LAUNCH("k_softmax");
done:
    return rc;
}
