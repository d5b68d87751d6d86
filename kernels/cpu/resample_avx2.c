/*
** resample_avx2.c: AVX2 versions of PIL's 8-bit resampling passes
** (resample_scalar.c is the reference). Exact: the same 32-bit integer products
** and sums as the scalar code (integer addition is associative, so summing taps
** in vector lanes gives the same total), the same arithmetic shift, and a clamp to
** 0..255 by saturating packs. Built with -mavx2 -mfma -mf16c (this file only);
** called after dispatch.
*/
#include <immintrin.h>

#include "kernels/cpu/resample_int.h"

static inline __m256i load8_u8_epi32(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

static inline int32_t hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* One output: the taps along the contiguous plane, 16 then 8 at a time. */
static inline int32_t dot_taps(const uint8_t *p, const int32_t *k, int n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    int32_t ss = 1 << (CDB_K_RESAMPLE_PRECISION - 1);
    int x = 0;
    for (; x + 16 <= n; x += 16) {
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(load8_u8_epi32(p + x),
                                                     _mm256_loadu_si256((const __m256i *)(k + x))));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(load8_u8_epi32(p + x + 8),
                                                     _mm256_loadu_si256((const __m256i *)(k + x + 8))));
    }
    for (; x + 8 <= n; x += 8)
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(load8_u8_epi32(p + x),
                                                     _mm256_loadu_si256((const __m256i *)(k + x))));
    ss += hsum_epi32(_mm256_add_epi32(a0, a1));
    for (; x < n; x++) ss += p[x] * k[x];
    return ss;
}

CDB_K_RESAMPLE_H_DEFINE(avx2, dot_taps)

/* 32 output bytes at a time: four 8-lane accumulators, one broadcast tap per row. */
void cdb_k_resample_v_u8_avx2(const uint8_t *src, size_t stride, const int32_t *k, int n,
                              size_t len, uint8_t *out) {
    const __m256i bias = _mm256_set1_epi32(1 << (CDB_K_RESAMPLE_PRECISION - 1));
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t j = 0;
    for (; j + 32 <= len; j += 32) {
        __m256i a0 = bias, a1 = bias, a2 = bias, a3 = bias;
        const uint8_t *p = src + j;
        for (int y = 0; y < n; y++, p += stride) {
            __m256i ky = _mm256_set1_epi32(k[y]);
            a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(load8_u8_epi32(p), ky));
            a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(load8_u8_epi32(p + 8), ky));
            a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(load8_u8_epi32(p + 16), ky));
            a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(load8_u8_epi32(p + 24), ky));
        }
        a0 = _mm256_srai_epi32(a0, CDB_K_RESAMPLE_PRECISION);
        a1 = _mm256_srai_epi32(a1, CDB_K_RESAMPLE_PRECISION);
        a2 = _mm256_srai_epi32(a2, CDB_K_RESAMPLE_PRECISION);
        a3 = _mm256_srai_epi32(a3, CDB_K_RESAMPLE_PRECISION);
        /* packs work per 128-bit lane: [a0lo a1lo a0hi a1hi] -> fix the order after */
        __m256i w01 = _mm256_packs_epi32(a0, a1), w23 = _mm256_packs_epi32(a2, a3);
        __m256i b = _mm256_packus_epi16(w01, w23);
        b = _mm256_permutevar8x32_epi32(b, perm);
        _mm256_storeu_si256((__m256i *)(out + j), b);
    }
    if (j < len) cdb_k_resample_v_u8_scalar(src + j, stride, k, n, len - j, out + j); /* tail */
}

/* RGB: 16 pixels (48 bytes) per step with byte shuffles; other counts scalar. */
void cdb_k_deinterleave_u8_avx2(const uint8_t *src, size_t n_px, int nch, uint8_t *planes,
                                size_t plane_stride) {
    uint8_t *d0 = planes, *d1 = planes + plane_stride, *d2 = planes + 2 * plane_stride;
    size_t x = 0;
    if (nch == 3) {
        /* for each 16-byte block b (0..2), where each source byte goes in the plane */
        const __m128i m0[3] = {
            _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
            _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14, -1, -1, -1, -1, -1),
            _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 4, 7, 10, 13)};
        const __m128i m1[3] = {
            _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
            _mm_setr_epi8(-1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1),
            _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 2, 5, 8, 11, 14)};
        const __m128i m2[3] = {
            _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1),
            _mm_setr_epi8(-1, -1, -1, -1, -1, 1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1),
            _mm_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 3, 6, 9, 12, 15)};
        for (; x + 16 <= n_px; x += 16) {
            const uint8_t *s = src + 3 * x;
            __m128i b0 = _mm_loadu_si128((const __m128i *)s);
            __m128i b1 = _mm_loadu_si128((const __m128i *)(s + 16));
            __m128i b2 = _mm_loadu_si128((const __m128i *)(s + 32));
            __m128i r = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(b0, m0[0]), _mm_shuffle_epi8(b1, m0[1])),
                                     _mm_shuffle_epi8(b2, m0[2]));
            __m128i g = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(b0, m1[0]), _mm_shuffle_epi8(b1, m1[1])),
                                     _mm_shuffle_epi8(b2, m1[2]));
            __m128i bl = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(b0, m2[0]), _mm_shuffle_epi8(b1, m2[1])),
                                      _mm_shuffle_epi8(b2, m2[2]));
            _mm_storeu_si128((__m128i *)(d0 + x), r);
            _mm_storeu_si128((__m128i *)(d1 + x), g);
            _mm_storeu_si128((__m128i *)(d2 + x), bl);
        }
    }
    for (int c = 0; c < nch; c++) {
        uint8_t *d = planes + (size_t)c * plane_stride;
        for (size_t i = x; i < n_px; i++) d[i] = src[i * (size_t)nch + (size_t)c];
    }
}

/* RGBA: 8 pixels per step. Each byte widened to 16 bits is multiplied by its pixel's
** alpha (the alpha word by 255: MULDIV255(a, 255) == a), MULDIV255 done in 16-bit
** lanes (c * a + 128 <= 65153 and ((t >> 8) + t) <= 65407 fit), packed back and
** split into planes. The tail goes through the scalar reference. */
void cdb_k_premul_deinterleave_u8_avx2(const uint8_t *src, size_t n_px, int nch,
                                       uint8_t *planes, size_t plane_stride) {
    size_t x = 0;
    if (nch == 4) {
        const __m256i c128 = _mm256_set1_epi16(128), c255 = _mm256_set1_epi16(255);
        const __m256i group = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                               0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        uint8_t *d[4] = {planes, planes + plane_stride, planes + 2 * plane_stride,
                         planes + 3 * plane_stride};
        for (; x + 8 <= n_px; x += 8) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(src + 4 * x)), r[2];
            for (int h = 0; h < 2; h++) {
                __m256i w = _mm256_cvtepu8_epi16(h ? _mm256_extracti128_si256(v, 1)
                                                   : _mm256_castsi256_si128(v));
                __m256i a = _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(w, 0xFF), 0xFF);
                a = _mm256_blend_epi16(a, c255, 0x88);
                __m256i t = _mm256_add_epi16(_mm256_mullo_epi16(w, a), c128);
                r[h] = _mm256_srli_epi16(_mm256_add_epi16(_mm256_srli_epi16(t, 8), t), 8);
            }
            /* back to bytes in pixel order, then R0-7 G0-7 B0-7 A0-7 */
            __m256i b = _mm256_permute4x64_epi64(_mm256_packus_epi16(r[0], r[1]), 0xD8);
            b = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(b, group), perm);
            for (int c = 0; c < 4; c++) {
                __m128i q = c < 2 ? _mm256_castsi256_si128(b) : _mm256_extracti128_si256(b, 1);
                if (c & 1) q = _mm_unpackhi_epi64(q, q);
                _mm_storel_epi64((__m128i *)(d[c] + x), q);
            }
        }
    }
    if (x < n_px) {
        for (size_t i = x; i < n_px; i++) {
            const uint8_t *px = src + i * (size_t)nch;
            unsigned al = px[nch - 1];
            for (int c = 0; c < nch - 1; c++) {
                unsigned t = px[c] * al + 128;
                planes[(size_t)c * plane_stride + i] = (uint8_t)(((t >> 8) + t) >> 8);
            }
            planes[(size_t)(nch - 1) * plane_stride + i] = (uint8_t)al;
        }
    }
}
