/*
** layernorm.cu: LayerNorm over rows (torch.nn.LayerNorm: biased variance), fp32
** or fp16 storage in and out, fp32 statistics. One block per row; the row is read
** once into shared memory, then mean and variance are computed in two passes
** (sum, then sum of squared deviations: no catastrophic cancellation).
*/
#include "kernels/cuda/cuda_common.cuh"

#define LN_THREADS 256

static __device__ float block_sum(float v, float *red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = cdb_kc_warp_sum(v);
    __syncthreads(); /* red may still be read from the previous reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? red[lane] : 0.f;
        v = cdb_kc_warp_sum(v);
        if (lane == 0) red[0] = v;
    }
    __syncthreads();
    return red[0];
}

static __global__ void k_layernorm(const void *__restrict__ x, int x_f32, size_t x_stride,
                                   void *y, int y_f32, const float *__restrict__ gamma,
                                   const float *__restrict__ beta, int cols, float eps) {
    extern __shared__ float row[];
    __shared__ float red[32];
    size_t r = blockIdx.x;
    size_t xo = r * x_stride, yo = r * (size_t)cols;
    float s = 0.f, mean, var, inv;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v = cdb_kc_ld(x, x_f32, xo + i);
        row[i] = v;
        s += v;
    }
    mean = block_sum(s, red) / cols;
    s = 0.f;
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float d = row[i] - mean;
        s += d * d;
    }
    var = block_sum(s, red) / cols;
    inv = rsqrtf(var + eps);
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        float v = (row[i] - mean) * inv;
        v = v * (gamma ? gamma[i] : 1.f) + (beta ? beta[i] : 0.f);
        cdb_kc_st(y, y_f32, yo + i, v);
    }
}

extern "C" cdb_status cdb_kc_layernorm(cdb_kc_ctx *c, const void *x, int x_f32, size_t x_stride,
                                       void *y, int y_f32, const float *gamma, const float *beta,
                                       int rows, int cols, float eps) {
    cdb_status rc = CDB_OK;
    size_t smem = (size_t)cols * sizeof(float);
    CDB_CUDA_CHECK_ARG(rows >= 0 && cols > 0 && smem <= 48 * 1024,
                       "layernorm: %d rows of %d columns (at most 12288)", rows, cols);
    if (!rows) return CDB_OK;
    k_layernorm<<<rows, LN_THREADS, smem, c->compute>>>(x, x_f32, x_stride, y, y_f32, gamma, beta,
                                                        cols, eps);
    CDB_CUDA_CHECK_LAUNCH("k_layernorm");
done:
    return rc;
}
