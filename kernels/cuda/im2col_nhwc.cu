/*
** im2col_nhwc.cu: the patch matrix of a k x k convolution over NHWC activations
** (the ModifiedResNet's 3x3 convolutions and its stride-2 stem), written as f16
** because its only consumer is a GEMM operand. One thread per output element;
** consecutive threads write consecutive channels, so reads and writes coalesce.
*/
#include "kernels/cuda/cuda_common.cuh"

static __global__ void k_im2col_nhwc(const void *__restrict__ x, int x_f32, int h, int w, int c,
                                     int k, int stride, int pad, int ho, int wo, size_t n,
                                     uint16_t *__restrict__ cols) {
    size_t kkc = (size_t)k * k * c;
    CDB_KC_GRID_STRIDE(i, n) {
        size_t row = i / kkc, col = i % kkc;
        int ch = (int)(col % c), kx = (int)((col / c) % k), ky = (int)(col / ((size_t)c * k));
        int ox = (int)(row % wo), oy = (int)((row / wo) % ho);
        size_t b = row / ((size_t)wo * ho);
        int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
        float v = 0.f;
        if (iy >= 0 && iy < h && ix >= 0 && ix < w)
            v = cdb_kc_ld(x, x_f32, ((b * h + iy) * w + ix) * c + ch);
        cols[i] = cdb_kc_f2h(v);
    }
}

extern "C" cdb_status cdb_kc_im2col_nhwc(cdb_kc_ctx *c, const void *x, int x_f32, int n, int h,
                                         int w, int ch, int k, int stride, int pad,
                                         uint16_t *cols) {
    cdb_status rc = CDB_OK;
    int ho, wo;
    size_t total;
    unsigned grid;
    CDB_CUDA_CHECK_ARG(n >= 0 && h > 0 && w > 0 && ch > 0 && k > 0 && stride > 0 && pad >= 0 &&
                           pad < k && h + 2 * pad >= k && w + 2 * pad >= k,
                       "im2col_nhwc: bad shape");
    ho = (h + 2 * pad - k) / stride + 1;
    wo = (w + 2 * pad - k) / stride + 1;
    total = (size_t)n * ho * wo * k * k * ch;
    if (!total) return CDB_OK;
    grid = cdb_kc_grid(total, 256);
    k_im2col_nhwc<<<grid, 256, 0, c->compute>>>(x, x_f32, h, w, ch, k, stride, pad, ho, wo, total,
                                                cols);
    CDB_CUDA_CHECK_LAUNCH("k_im2col_nhwc");
done:
    return rc;
}
