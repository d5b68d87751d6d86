/*
** prepend_mean_add.cu: per group of n rows, the fp32 mean of its rows as row 0, then
** the rows, each plus its positional row (fp32 out). ModifiedResNet's attention pool
** builds its tokens with it; the attention's k/v/q GEMMs read them.
*/
#include "kernels/cuda/cuda_common.cuh"

/* One thread per (group, channel): the mean and the n + 1 output rows of it. */
static __global__ void k_prepend_mean_add(const void *__restrict__ x, int x_f32,
                                          const float *__restrict__ pos, int batch, int n,
                                          int width, float *__restrict__ out) {
    size_t total = (size_t)batch * width, s = (size_t)n + 1;
    CDB_KC_GRID_STRIDE(i, total) {
        size_t b = i / width;
        int j = (int)(i % width);
        float sum = 0.f;
        for (int p = 0; p < n; p++) {
            float v = cdb_kc_ld(x, x_f32, (b * n + p) * width + j);
            sum += v;
            out[(b * s + 1 + p) * width + j] = v + pos[(1 + (size_t)p) * width + j];
        }
        out[b * s * width + j] = sum / (float)n + pos[j];
    }
}

extern "C" cdb_status cdb_kc_prepend_mean_add(cdb_kc_ctx *c, const void *x, int x_f32,
                                              const float *pos, int batch, int n, int width,
                                              float *out) {
    cdb_status rc = CDB_OK;
    size_t total;
    unsigned grid;
    CDB_CUDA_CHECK_ARG(batch >= 0 && n > 0 && width > 0, "prepend_mean_add: bad shape");
    total = (size_t)batch * width;
    if (!total) return CDB_OK;
    grid = cdb_kc_grid(total, 128);
    k_prepend_mean_add<<<grid, 128, 0, c->compute>>>(x, x_f32, pos, batch, n, width, out);
    CDB_CUDA_CHECK_LAUNCH("k_prepend_mean_add");
done:
    return rc;
}
