/*
** fp16_scalar.c: portable IEEE binary16 <-> binary32 conversion, the reference
** for every other implementation. Bit manipulation only (no FPU rounding mode
** dependence): round to nearest, ties to even.
*/
#include <string.h>

#include "kernels/cpu/cpu_int.h"

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float cdb_k_f16_to_f32_1(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* Inf / NaN: keep payload, NaN stays NaN */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return bits_f32(sign);
        /* subnormal: value = man * 2^-24, exact in fp32 */
        exp = 127 - 15 + 1;
        while (!(man & 0x400u)) {
            man <<= 1;
            exp--;
        }
        man &= 0x3ffu;
        return bits_f32(sign | (exp << 23) | (man << 13));
    }
    return bits_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

uint16_t cdb_k_f32_to_f16_1(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) { /* Inf or NaN */
        if (abs == 0x7f800000u) return sign | 0x7c00u;
        return sign | 0x7e00u | (uint16_t)((abs >> 13) & 0x3ffu); /* quiet NaN */
    }
    if (abs >= 0x477ff000u) /* >= 65520: rounds to Inf */
        return sign | 0x7c00u;
    if (abs < 0x38800000u) { /* below the smallest normal half (2^-14) */
        /* result = round(|f| / 2^-24) as a subnormal (or 0 / the smallest normal) */
        uint32_t e = abs >> 23;
        uint32_t m, shift, q, rem, half;
        if (e < 102) return sign; /* < 2^-25: rounds to zero (ties included) */
        m = (abs & 0x7fffffu) | 0x800000u;
        shift = 126 - e; /* 24-bit m * 2^(e-150) / 2^-24 = m >> (126 - e) */
        q = m >> shift;
        rem = m & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    {
        uint32_t r = abs - ((127u - 15u) << 23); /* rebias exponent */
        uint32_t q = r >> 13;
        uint32_t rem = r & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
}

void cdb_k_f16_to_f32_scalar(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = cdb_k_f16_to_f32_1(src[i]);
}

void cdb_k_f32_to_f16_scalar(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = cdb_k_f32_to_f16_1(src[i]);
}

void cdb_k_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    CDB_K_AVX2_OR_SCALAR(cdb_k_f16_to_f32, src, dst, n);
}

void cdb_k_f32_to_f16(const float *src, uint16_t *dst, size_t n) {
    CDB_K_AVX2_OR_SCALAR(cdb_k_f32_to_f16, src, dst, n);
}
