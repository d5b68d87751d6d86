/*
** avgpool.cu: torch.nn.AvgPool2d(s) over NHWC activations (the ModifiedResNet's
** stem pool and its anti-aliased strides): each output the fp32 sum of its s x s
** window (row-major order) divided by s*s, as the CPU backends compute it.
*/
#include "kernels/cuda/cuda_common.cuh"

static __global__ void k_avgpool_nhwc(const void *__restrict__ x, int x_f32, int h, int w, int c,
                                      int s, int ho, int wo, size_t n, void *out, int out_f32) {
    CDB_KC_GRID_STRIDE(i, n) {
        int ch = (int)(i % c), ox = (int)((i / c) % wo), oy = (int)((i / ((size_t)c * wo)) % ho);
        size_t b = i / ((size_t)c * wo * ho);
        float sum = 0.f;
        for (int dy = 0; dy < s; dy++)
            for (int dx = 0; dx < s; dx++) {
                size_t iy = (size_t)oy * s + dy, ix = (size_t)ox * s + dx;
                sum += cdb_kc_ld(x, x_f32, ((b * h + iy) * w + ix) * c + ch);
            }
        cdb_kc_st(out, out_f32, i, sum / (float)(s * s));
    }
}

extern "C" cdb_status cdb_kc_avgpool_nhwc(cdb_kc_ctx *c, const void *x, int x_f32, int n, int h,
                                          int w, int ch, int s, void *out, int out_f32) {
    cdb_status rc = CDB_OK;
    size_t total;
    unsigned grid;
    CDB_CUDA_CHECK_ARG(n >= 0 && h > 0 && w > 0 && ch > 0 && s > 0 && s <= h && s <= w,
                       "avgpool_nhwc: bad shape");
    total = (size_t)n * (h / s) * (w / s) * ch;
    if (!total) return CDB_OK;
    grid = cdb_kc_grid(total, 256);
    k_avgpool_nhwc<<<grid, 256, 0, c->compute>>>(x, x_f32, h, w, ch, s, h / s, w / s, total, out,
                                                 out_f32);
    CDB_CUDA_CHECK_LAUNCH("k_avgpool_nhwc");
done:
    return rc;
}
