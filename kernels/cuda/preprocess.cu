/*
** preprocess.cu: the CLIP image transform on the device, bit-compatible with PIL:
** bicubic resize of the short side (two separable passes with PIL's 22-bit
** fixed-point coefficients and an 8-bit clipped intermediate, horizontal first,
** as Resample.c), center crop, then (v/255 - mean)/std into fp32 CHW.
** Only the cropped region is computed: the horizontal pass covers the source rows
** the cropped output rows read, and only the cropped columns. Coefficient tables
** come from the host (cdb_kc_resize_plan_new), per image.
**
** Table layout per image (int32, at desc.tab_off):
**   xmin[size] | kh[size * ksize_h] | ymin[size] | kv[size * ksize_v]
*/
#include "kernels/cuda/cuda_common.cuh"

#define PB 22 /* PIL's PRECISION_BITS for 8-bit images */

static __device__ __forceinline__ uint8_t clip8(int in) {
    if (in >= (1 << (PB + 8))) return 255;
    if (in <= 0) return 0;
    return (uint8_t)(in >> PB);
}

/* blockIdx.y: image; threads stride over (row < n_rows) x (x < size). */
static __global__ void k_resize_h(const uint8_t *__restrict__ src,
                                  const cdb_kc_pre_desc *__restrict__ desc,
                                  const int32_t *__restrict__ tables, uint8_t *__restrict__ tmp,
                                  int size) {
    cdb_kc_pre_desc d = desc[blockIdx.y];
    const int32_t *xmin = tables + d.tab_off, *kh = xmin + size;
    const uint8_t *img = src + d.src_off;
    uint8_t *t = tmp + d.tmp_off;
    size_t n = (size_t)d.n_rows * size;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / size), x = (int)(i % size);
        const uint8_t *row = img + (size_t)(d.row0 + r) * d.in_w * 3;
        const int32_t *k = kh + (size_t)x * d.ksize_h;
        int x0 = xmin[x];
        int s0 = 1 << (PB - 1), s1 = s0, s2 = s0;
        for (int j = 0; j < d.ksize_h; j++) {
            int sx = x0 + j < d.in_w ? x0 + j : d.in_w - 1, w = k[j];
            const uint8_t *px = row + (size_t)sx * 3;
            s0 += px[0] * w;
            s1 += px[1] * w;
            s2 += px[2] * w;
        }
        t[i * 3 + 0] = clip8(s0);
        t[i * 3 + 1] = clip8(s1);
        t[i * 3 + 2] = clip8(s2);
    }
}

struct norm3 {
    float mean[3], std[3];
};

static __global__ void k_resize_v(const cdb_kc_pre_desc *__restrict__ desc,
                                  const int32_t *__restrict__ tables,
                                  const uint8_t *__restrict__ tmp, int size, norm3 nm,
                                  float *__restrict__ out, uint8_t *__restrict__ crop) {
    cdb_kc_pre_desc d = desc[blockIdx.y];
    const int32_t *ymin = tables + d.tab_off + size + (size_t)size * d.ksize_h,
                  *kv = ymin + size;
    const uint8_t *t = tmp + d.tmp_off;
    size_t n = (size_t)size * size, plane = n;
    float *o = out + (size_t)blockIdx.y * 3 * plane;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        int y = (int)(i / size), x = (int)(i % size);
        const int32_t *k = kv + (size_t)y * d.ksize_v;
        int y0 = ymin[y];
        int s0 = 1 << (PB - 1), s1 = s0, s2 = s0;
        uint8_t v0, v1, v2;
        for (int j = 0; j < d.ksize_v; j++) {
            int sy = y0 + j < d.n_rows ? y0 + j : d.n_rows - 1, w = k[j];
            const uint8_t *px = t + ((size_t)sy * size + x) * 3;
            s0 += px[0] * w;
            s1 += px[1] * w;
            s2 += px[2] * w;
        }
        v0 = clip8(s0);
        v1 = clip8(s1);
        v2 = clip8(s2);
        /* (v/255 - mean)/std, as torchvision's ToTensor + Normalize in fp32 */
        o[i] = __fdiv_rn(__fsub_rn(__fdiv_rn((float)v0, 255.f), nm.mean[0]), nm.std[0]);
        o[plane + i] = __fdiv_rn(__fsub_rn(__fdiv_rn((float)v1, 255.f), nm.mean[1]), nm.std[1]);
        o[2 * plane + i] = __fdiv_rn(__fsub_rn(__fdiv_rn((float)v2, 255.f), nm.mean[2]), nm.std[2]);
        if (crop) {
            uint8_t *cp = crop + ((size_t)blockIdx.y * n + i) * 3;
            cp[0] = v0;
            cp[1] = v1;
            cp[2] = v2;
        }
    }
}

extern "C" cdb_status cdb_kc_preprocess(cdb_kc_ctx *c, const uint8_t *d_src,
                                        const cdb_kc_pre_desc *d_desc, const int32_t *d_tables,
                                        uint8_t *d_tmp, int n, int size, const float mean[3],
                                        const float std[3], float *out, uint8_t *crop_u8) {
    cdb_status rc = CDB_OK;
    norm3 nm;
    dim3 grid_h, grid_v;
    CDB_CUDA_CHECK_ARG(n >= 0 && n <= 65535 && size > 0, "preprocess: %d images of %d", n, size);
    if (!n) return CDB_OK;
    for (int i = 0; i < 3; i++) {
        nm.mean[i] = mean[i];
        nm.std[i] = std[i];
    }
    grid_h = dim3(cdb_kc_blocks((size_t)size * size, 256), (unsigned)n);
    grid_v = dim3(cdb_kc_blocks((size_t)size * size, 256), (unsigned)n);
    k_resize_h<<<grid_h, 256, 0, c->compute>>>(d_src, d_desc, d_tables, d_tmp, size);
    CDB_CUDA_CHECK_LAUNCH("k_resize_h");
    k_resize_v<<<grid_v, 256, 0, c->compute>>>(d_desc, d_tables, d_tmp, size, nm, out, crop_u8);
    CDB_CUDA_CHECK_LAUNCH("k_resize_v");
done:
    return rc;
}
