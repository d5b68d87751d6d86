/*
** resample_scalar.c: PIL 9.4's 8-bit fixed-point resampling passes (libImaging/
** Resample.c, ImagingResampleHorizontal_8bpc / ImagingResampleVertical_8bpc): the
** scalar reference, and the public entry points, which dispatch to
** resample_avx2.c when the CPU has AVX2 (cdb_k_cpu_isa()). Integer arithmetic
** throughout, so every ISA gives the same bytes (tests/encoder/test_resample.c
** checks them against each other; tests/encoder/test_image.c against PIL).
*/
#include "kernels/cpu/resample_int.h"

static inline int32_t dot_taps(const uint8_t *p, const int32_t *k, int n) {
    int32_t ss = 1 << (CDB_K_RESAMPLE_PRECISION - 1);
    for (int x = 0; x < n; x++) ss += p[x] * k[x];
    return ss;
}

CDB_K_RESAMPLE_H_DEFINE(scalar, dot_taps)

void cdb_k_resample_v_u8_scalar(const uint8_t *src, size_t stride, const int32_t *k, int n,
                                size_t len, uint8_t *out) {
    for (size_t j = 0; j < len; j++) {
        int32_t ss = 1 << (CDB_K_RESAMPLE_PRECISION - 1);
        const uint8_t *p = src + j;
        for (int y = 0; y < n; y++) ss += p[(size_t)y * stride] * k[y];
        out[j] = cdb_k_clip8(ss);
    }
}

void cdb_k_deinterleave_u8_scalar(const uint8_t *src, size_t n_px, int nch, uint8_t *planes,
                                  size_t plane_stride) {
    for (int c = 0; c < nch; c++) {
        uint8_t *d = planes + (size_t)c * plane_stride;
        for (size_t x = 0; x < n_px; x++) d[x] = src[x * (size_t)nch + (size_t)c];
    }
}

void cdb_k_premul_deinterleave_u8_scalar(const uint8_t *src, size_t n_px, int nch,
                                         uint8_t *planes, size_t plane_stride) {
    uint8_t *a = planes + (size_t)(nch - 1) * plane_stride;
    for (size_t x = 0; x < n_px; x++) {
        const uint8_t *px = src + x * (size_t)nch;
        unsigned al = px[nch - 1];
        for (int c = 0; c < nch - 1; c++) {
            unsigned t = px[c] * al + 128;
            planes[(size_t)c * plane_stride + x] = (uint8_t)(((t >> 8) + t) >> 8);
        }
        a[x] = (uint8_t)al;
    }
}

void cdb_k_resample_h_u8(const uint8_t *planes, size_t plane_stride, int nch, const int *bounds,
                         const int32_t *kk, int ksize, int n_out, uint8_t *out) {
    CDB_K_AVX2_OR_SCALAR(cdb_k_resample_h_u8, planes, plane_stride, nch, bounds, kk, ksize,
                         n_out, out);
}

void cdb_k_resample_v_u8(const uint8_t *src, size_t stride, const int32_t *k, int n, size_t len,
                         uint8_t *out) {
    CDB_K_AVX2_OR_SCALAR(cdb_k_resample_v_u8, src, stride, k, n, len, out);
}

void cdb_k_deinterleave_u8(const uint8_t *src, size_t n_px, int nch, uint8_t *planes,
                           size_t plane_stride) {
    CDB_K_AVX2_OR_SCALAR(cdb_k_deinterleave_u8, src, n_px, nch, planes, plane_stride);
}

void cdb_k_premul_deinterleave_u8(const uint8_t *src, size_t n_px, int nch, uint8_t *planes,
                                  size_t plane_stride) {
#if CDB_HAVE_AVX2
    if (CDB_K_AVX2 && nch == 4) {
        cdb_k_premul_deinterleave_u8_avx2(src, n_px, nch, planes, plane_stride);
        return;
    }
#endif
    cdb_k_premul_deinterleave_u8_scalar(src, n_px, nch, planes, plane_stride);
}
