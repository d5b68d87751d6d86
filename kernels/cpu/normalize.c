/*
** normalize.c: the one L2 normalization of clipdb. The encoder's outputs
** (cdb_encode_* with normalize), the vectors the store rounds to fp16 (db/), and
** the queries all go through here, so a stored vector is exactly fp16 of what
** `clipdb embed` prints for the same photo.
**
** Any finite magnitude works: x is first scaled by 2^-e, where max|x| = f * 2^e,
** f in [0.5, 1) (exact: a power of two), so every element is <= 1 and the sum of
** squares is <= n: no overflow for 1e30, no underflow to zero for subnormals. The
** squares are summed in double in 8 fixed lanes folded pairwise (never less than
** fp32, and accurate enough that each element x/|x| rounds to the fp32 a correctly
** rounded quotient gives), then each element is divided by the norm in double and
** rounded once to fp32. The lanes let the compiler vectorize while the additions
** into each lane keep one order: the bits do not depend on the ISA it picked.
*/
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

#define CHUNK 256

/* acc[k] += x[j]^2 for the elements j = k (mod 8) of x[0..n); x starts at a multiple
** of 8 of the vector (chunks are multiples of 8). */
static void sumsq_lanes(const float *x, size_t n, double acc[8]) {
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += (double)x[j + k] * (double)x[j + k];
    for (; j < n; j++) acc[j & 7] += (double)x[j] * (double)x[j];
}

static double fold_lanes(const double acc[8]) {
    return sqrt(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
}

/* out[j] = x[j] * 2^-e, exactly: a multiply by a power of two when 2^-e is a normal
** float (the usual case, vectorizable), ldexpf otherwise. */
static void scale_pow2(const float *x, size_t n, int e, float *out) {
    if (e > -126 && e < 127) {
        const float s = ldexpf(1.0f, -e);
        for (size_t j = 0; j < n; j++) out[j] = x[j] * s;
    } else {
        for (size_t j = 0; j < n; j++) out[j] = ldexpf(x[j], -e);
    }
}

/* Refuses NaN/Inf and the zero vector; else *e and *norm (of x * 2^-e). */
static cdb_status scaled_norm(const float *x, size_t n, int *e, double *norm) {
    uint32_t maxbits = 0;
    float maxabs, tmp[CHUNK];
    double acc[8] = {0};
    if (n == 0) return cdb_seterr(CDB_INVALID, "empty vector");
    /* max |x| on the bit patterns (for non-negative floats the integer order is the
    ** numeric order, and NaN/Inf are the patterns >= 0x7f800000) */
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        u &= 0x7fffffffu;
        maxbits = u > maxbits ? u : maxbits;
    }
    if (maxbits >= 0x7f800000u)
        for (size_t i = 0; i < n; i++)
            if (!isfinite(x[i]))
                return cdb_seterr(CDB_INVALID, "vector element %zu is %s", i,
                                  isnan(x[i]) ? "NaN" : "infinite");
    memcpy(&maxabs, &maxbits, sizeof maxabs);
    if (maxabs == 0.0f) return cdb_seterr(CDB_INVALID, "vector is all zeros (no direction)");
    (void)frexpf(maxabs, e);
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        scale_pow2(x + i, k, *e, tmp);
        sumsq_lanes(tmp, k, acc);
    }
    *norm = fold_lanes(acc);
    return CDB_OK;
}

cdb_status cdb_k_normalize_f32(float *x, size_t n, float *norm_out) {
    int e = 0;
    double norm = 0;
    cdb_status rc = scaled_norm(x, n, &e, &norm);
    if (rc != CDB_OK) return rc;
    if (norm_out) *norm_out = (float)ldexp(norm, e);
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        scale_pow2(x + i, k, e, x + i);
        for (size_t j = 0; j < k; j++) x[i + j] = (float)((double)x[i + j] / norm);
    }
    return CDB_OK;
}

cdb_status cdb_k_normalize_to_f16(const float *src, size_t n, uint16_t *out) {
    int e = 0;
    double norm = 0;
    float tmp[CHUNK];
    cdb_status rc = scaled_norm(src, n, &e, &norm);
    if (rc != CDB_OK) return rc;
    for (size_t i = 0; i < n; i += CHUNK) { /* the same fp32 values as normalize_f32 */
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        scale_pow2(src + i, k, e, tmp);
        for (size_t j = 0; j < k; j++) tmp[j] = (float)((double)tmp[j] / norm);
        cdb_k_f32_to_f16(tmp, out + i, k);
    }
    return CDB_OK;
}
