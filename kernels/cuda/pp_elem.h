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

#include "kernels/kernels.h"

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

/* One image's geometry and tables: kernels.h's cdb_k_pp_geom (host pointers for the
** CPU, device pointers in a kernel's parameters). */
typedef cdb_k_pp_geom cdb_pp_geom;

/* 1 when every read g's passes make stays inside the source, tmp and the tables (the
** caller then runs the transform); 0 otherwise. O(size). */
CDB_PP_FN int cdb_pp_geom_ok(const cdb_pp_geom *g) {
    int src_rows;
    if (g->size <= 0 || (g->nch != 1 && g->nch != 3) || g->w <= 0 || g->h <= 0 || !g->lut ||
        g->stride < (size_t)g->w * g->nch || g->kh < 0 || g->kv < 0)
        return 0;
    if (g->kh) {
        if (!g->bh || !g->kkh || g->y0 < 0 || g->rows <= 0 || g->y0 + g->rows > g->h) return 0;
        for (int x = 0; x < g->size; x++)
            if (g->bh[2 * x] < 0 || g->bh[2 * x + 1] < 0 || g->bh[2 * x + 1] > g->kh ||
                g->bh[2 * x] + g->bh[2 * x + 1] > g->w)
                return 0;
    } else if (g->left < 0 || g->left + g->size > g->w) {
        return 0;
    }
    src_rows = g->kh ? g->rows : g->h; /* the rows the vertical pass (or the copy) reads */
    if (g->kv) {
        if (!g->bv || !g->kkv) return 0;
        for (int y = 0; y < g->size; y++)
            if (g->bv[2 * y] < 0 || g->bv[2 * y + 1] < 0 || g->bv[2 * y + 1] > g->kv ||
                g->bv[2 * y] + g->bv[2 * y + 1] > src_rows)
                return 0;
    } else if (g->kh ? g->rows < g->size : (g->top < 0 || g->top + g->size > g->h)) {
        return 0;
    }
    return 1;
}

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
