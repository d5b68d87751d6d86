/*
** patchify.cu: the patch matrix of a ViT's patch embedding over NCHW pixels (a p x p
** convolution with stride p, cdb_k_patchify), written as f16 because its only
** consumer is a GEMM operand (the value the GEMM would have rounded the fp32 pixel
** to: round to nearest even, as cdb_k_f32_to_f16). One thread per output element;
** consecutive threads write consecutive columns, whose kx runs read consecutive pixels.
*/
#include "kernels/cuda/cuda_common.cuh"

static __global__ void k_patchify(const void *__restrict__ x, int x_f32, int c, int h, int w,
                                  int p, int gh, int gw, size_t n,
                                  uint16_t *__restrict__ cols) {
    size_t cpp = (size_t)c * p * p;
    CDB_KC_GRID_STRIDE(i, n) {
        size_t row = i / cpp, col = i % cpp;
        int kx = (int)(col % p), ky = (int)((col / p) % p), ch = (int)(col / ((size_t)p * p));
        int gx = (int)(row % gw), gy = (int)((row / gw) % gh);
        size_t b = row / ((size_t)gw * gh);
        size_t src = ((b * c + ch) * h + (size_t)gy * p + ky) * w + (size_t)gx * p + kx;
        cols[i] = cdb_kc_f2h(cdb_kc_ld(x, x_f32, src));
    }
}

extern "C" cdb_status cdb_kc_patchify(cdb_kc_ctx *c, const void *x, int x_f32, int n, int ch,
                                      int h, int w, int p, uint16_t *cols) {
    cdb_status rc = CDB_OK;
    int gh, gw;
    size_t total;
    unsigned grid;
    CDB_CUDA_CHECK_ARG(n >= 0 && ch > 0 && p > 0 && h >= p && w >= p, "patchify: bad shape");
    gh = h / p;
    gw = w / p;
    total = (size_t)n * gh * gw * ch * p * p;
    if (!total) return CDB_OK;
    grid = cdb_kc_grid(total, 256);
    k_patchify<<<grid, 256, 0, c->compute>>>(x, x_f32, ch, h, w, p, gh, gw, total, cols);
    CDB_CUDA_CHECK_LAUNCH("k_patchify");
done:
    return rc;
}
