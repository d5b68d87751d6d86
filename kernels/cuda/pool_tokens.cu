/*
** pool_tokens.cu: the ModifiedResNet attention pool's input tokens: per item, the
** fp32 mean of its grid rows as token 0, then the grid rows, each plus its
** positional embedding (fp32 out: the attention's k/v/q GEMMs read it).
*/
#include "kernels/cuda/cuda_common.cuh"

/* One thread per (item, channel): the mean and the hw + 1 output rows of it. */
static __global__ void k_pool_tokens(const void *__restrict__ x, int x_f32,
                                     const float *__restrict__ pos, int batch, int hw, int width,
                                     float *__restrict__ out) {
    size_t n = (size_t)batch * width, s = (size_t)hw + 1;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t b = i / width;
        int j = (int)(i % width);
        float sum = 0.f;
        for (int p = 0; p < hw; p++) {
            float v = cdb_kc_ld(x, x_f32, (b * hw + p) * width + j);
            sum += v;
            out[(b * s + 1 + p) * width + j] = v + pos[(1 + (size_t)p) * width + j];
        }
        out[b * s * width + j] = sum / (float)hw + pos[j];
    }
}

extern "C" cdb_status cdb_kc_pool_tokens(cdb_kc_ctx *c, const void *x, int x_f32, const float *pos,
                                         int batch, int hw, int width, float *out) {
    cdb_status rc = CDB_OK;
    size_t n;
    unsigned grid;
    CDB_CUDA_CHECK_ARG(batch >= 0 && hw > 0 && width > 0, "pool_tokens: bad shape");
    n = (size_t)batch * width;
    if (!n) return CDB_OK;
    grid = cdb_kc_blocks(n, 128);
    if (grid > 65536) grid = 65536;
    k_pool_tokens<<<grid, 128, 0, c->compute>>>(x, x_f32, pos, batch, hw, width, out);
    CDB_CUDA_CHECK_LAUNCH("k_pool_tokens");
done:
    return rc;
}
