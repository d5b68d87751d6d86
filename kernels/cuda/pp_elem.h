/*
** pp_elem.h: the arithmetic of one output byte of the device preprocessing kernels
** (kernels/cuda/preprocess.cu), written once for the device and for its CPU emulation
** (tests/encoder/test_pp_device.c runs these very functions over every output and
** compares the bytes and floats with cdb_image_preprocess). PIL 9.4's 8-bit
** ImagingResample passes with PIL's coefficients (22-bit fixed point, computed by
** cdb_k_pil_coeffs from encoder/preprocess.c's plan): every sum starts at the rounding
** bias 1 << 21, accumulates src * tap in int32 and gives clip(sum >> 22, 0, 255);
** integer arithmetic only, so the device's bytes are the CPU's bit for bit (the
** bound is 0). Normalization is a lookup in the plan's per-channel table of 256
** floats (the CPU's own values), so it is exact too. Compiles as C and as CUDA.
*/
#ifndef CDB_KERNELS_CUDA_PP_ELEM_H
#define CDB_KERNELS_CUDA_PP_ELEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define CDB_PP_FN static __host__ __device__ __forceinline__
#else
#define CDB_PP_FN static inline
#endif

#define CDB_PP_PRECISION 22 /* = CDB_K_RESAMPLE_PRECISION */

CDB_PP_FN uint8_t cdb_pp_clip8(int32_t ss) {
    int32_t v = ss >> CDB_PP_PRECISION; /* arithmetic shift, as PIL's lookup */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Horizontal pass, output column x, channel c of source row `row` (interleaved
** pixels, nch channels, stride bytes per row): taps bounds[2x] .. + bounds[2x+1]. */
CDB_PP_FN uint8_t cdb_pp_h(const uint8_t *src, size_t stride, int nch, int row, int x, int c,
                           const int *bounds, const int32_t *kk, int ksize) {
    const uint8_t *p = src + (size_t)row * stride + (size_t)bounds[2 * x] * nch + c;
    const int32_t *k = kk + (size_t)x * ksize;
    int32_t ss = 1 << (CDB_PP_PRECISION - 1);
    for (int t = 0; t < bounds[2 * x + 1]; t++) ss += p[(size_t)t * nch] * k[t];
    return cdb_pp_clip8(ss);
}

/* Vertical pass, output row y, byte j of that row (src rows of stride bytes; bounds
** relative to src's first row). */
CDB_PP_FN uint8_t cdb_pp_v(const uint8_t *src, size_t stride, int y, size_t j,
                           const int *bounds, const int32_t *kk, int ksize) {
    const uint8_t *p = src + (size_t)bounds[2 * y] * stride + j;
    const int32_t *k = kk + (size_t)y * ksize;
    int32_t ss = 1 << (CDB_PP_PRECISION - 1);
    for (int t = 0; t < bounds[2 * y + 1]; t++) ss += p[(size_t)t * stride] * k[t];
    return cdb_pp_clip8(ss);
}

/* Output float of channel c (0..2) from the crop's pixel px (nch 1: gray replicated,
** 3: RGB): lut is 3 x 256 floats. */
CDB_PP_FN float cdb_pp_norm(const uint8_t *px, int nch, int c, const float *lut) {
    return lut[c * 256 + px[nch == 1 ? 0 : c]];
}

/* One image's geometry and tables (host pointers for the CPU emulation, device
** pointers in a kernel's parameters): src w x h, nch (1 or 3) interleaved bytes,
** stride bytes per row; the crop is size x size at (left, top) of the resized image.
** Horizontal pass (kh > 0): source rows [y0, y0 + rows), output columns [0, size)
** into tmp (rows x size x nch). Vertical pass (kv > 0): bv relative to tmp's first row
** when the horizontal pass ran, else to the source's. lut: 3 x 256 floats. */
typedef struct cdb_pp_geom {
    int w, h, nch;
    size_t stride;
    int size, left, top;
    int y0, rows;
    const int *bh;
    const int32_t *kkh;
    int kh;
    const int *bv;
    const int32_t *kkv;
    int kv;
    const float *lut;
} cdb_pp_geom;

/* tmp's byte (r, x, c): the horizontal pass. */
CDB_PP_FN uint8_t cdb_pp_tmp(const cdb_pp_geom *g, const uint8_t *src, int r, int x, int c) {
    return cdb_pp_h(src, g->stride, g->nch, g->y0 + r, x, c, g->bh, g->kkh, g->kh);
}

/* The crop's byte (y, x, c) after both passes (tmp: the horizontal pass's output when
** kh > 0); a skipped pass reads its axis at the crop offset, as PIL's copy does. */
CDB_PP_FN uint8_t cdb_pp_crop(const cdb_pp_geom *g, const uint8_t *src, const uint8_t *tmp,
                              int y, int x, int c) {
    size_t tstride = (size_t)g->size * g->nch;
    if (g->kv && g->kh)
        return cdb_pp_v(tmp, tstride, y, (size_t)x * g->nch + c, g->bv, g->kkv, g->kv);
    if (g->kv)
        return cdb_pp_v(src, g->stride, y, (size_t)(g->left + x) * g->nch + c, g->bv, g->kkv,
                        g->kv);
    if (g->kh) return tmp[(size_t)y * tstride + (size_t)x * g->nch + c];
    return src[(size_t)(g->top + y) * g->stride + (size_t)(g->left + x) * g->nch + c];
}

#endif
