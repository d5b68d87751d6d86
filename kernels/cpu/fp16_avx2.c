/*
** fp16_avx2.c: F16C conversions, 8 lanes at a time; the tail goes through the
** scalar reference. Built with -mavx2 -mfma -mf16c (this file only).
*/
#include <immintrin.h>

#include "kernels/cpu/cpu_int.h"

void cdb_k_f16_to_f32_avx2(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) dst[i] = cdb_k_f16_to_f32_1(src[i]);
}

void cdb_k_f32_to_f16_avx2(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 f = _mm256_loadu_ps(src + i);
        __m128i h = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm_storeu_si128((__m128i *)(dst + i), h);
    }
    for (; i < n; i++) dst[i] = cdb_k_f32_to_f16_1(src[i]);
}
