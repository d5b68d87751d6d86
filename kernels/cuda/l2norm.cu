/*
** l2norm.cu: row-wise L2 normalization in fp32 (DESIGN.md precision contract 1:
** normalize in fp32 before any rounding to fp16). One warp per row; the sum of
** squares is accumulated in fp32 after scaling by the row's max |x| so large
** values cannot overflow. Rows that are zero or hold NaN/Inf are left as they are
** and counted, so the caller can refuse them (NaN/Inf never reach disk).
*/
#include "kernels/cuda/cuda_common.cuh"

#define L2_WARPS 8

static __global__ void k_l2norm(float *x, int rows, int dim, int *bad) {
    int r = blockIdx.x * L2_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    float *v;
    float mx = 0.f, s = 0.f, scale;
    if (r >= rows) return;
    v = x + (size_t)r * dim;
    for (int j = lane; j < dim; j += 32) mx = fmaxf(mx, fabsf(v[j]) != fabsf(v[j]) ? INFINITY : fabsf(v[j]));
    mx = cdb_kc_warp_max(mx);
    if (!(mx > 0.f) || isinf(mx)) {
        if (lane == 0 && bad) atomicAdd(bad, 1);
        return;
    }
    scale = 1.f / mx;
    for (int j = lane; j < dim; j += 32) {
        float t = v[j] * scale;
        s += t * t;
    }
    s = cdb_kc_warp_sum(s);
    scale = scale / sqrtf(s); /* 1/|x| = (1/mx) / sqrt(sum (x/mx)^2) */
    for (int j = lane; j < dim; j += 32) v[j] *= scale;
}

extern "C" cdb_status cdb_kc_l2norm(cdb_kc_ctx *c, float *x, int rows, int dim, int *d_bad) {
    cdb_status rc = CDB_OK;
    CDB_CUDA_CHECK_ARG(rows >= 0 && dim > 0, "l2norm: %d rows of %d", rows, dim);
    if (!rows) return CDB_OK;
    k_l2norm<<<(rows + L2_WARPS - 1) / L2_WARPS, L2_WARPS * 32, 0, c->compute>>>(x, rows, dim,
                                                                                d_bad);
    CDB_CUDA_CHECK_LAUNCH("k_l2norm");
done:
    return rc;
}
