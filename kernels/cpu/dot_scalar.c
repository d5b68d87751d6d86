/*
** dot_scalar.c: fp16-stored x fp32 (and fp32 x fp32) dot products and norms (normalization is
** normalize.c). The
** scalar versions are the reference: each fp16 element is widened exactly to fp32,
** products are formed in double and summed in double, so they are at least as
** accurate as any fp32-accumulating backend. The public entry points dispatch to
** dot_avx2.c when the CPU has AVX2+FMA+F16C (cdb_k_cpu_isa()).
*/
#include <math.h>

#include "kernels/cpu/dot_int.h"

float cdb_k_dot_f16_f32_scalar(const uint16_t *a, const float *q, size_t dim) {
    double s = 0.0;
    for (size_t i = 0; i < dim; i++) s += (double)cdb_k_f16_to_f32_1(a[i]) * (double)q[i];
    return (float)s;
}

float cdb_k_dot_f16_f16_scalar(const uint16_t *a, const uint16_t *b, size_t dim) {
    double s = 0.0;
    for (size_t i = 0; i < dim; i++)
        s += (double)cdb_k_f16_to_f32_1(a[i]) * (double)cdb_k_f16_to_f32_1(b[i]);
    return (float)s;
}

float cdb_k_dot_f32_scalar(const float *a, const float *b, size_t dim) {
    double s = 0.0;
    for (size_t i = 0; i < dim; i++) s += (double)a[i] * (double)b[i];
    return (float)s;
}

void cdb_k_dot_f16_f32_multi_scalar(const uint16_t *vecs, size_t n_vecs, const float *qs,
                                    size_t n_q, size_t dim, float *out) {
    for (size_t i = 0; i < n_vecs; i++)
        for (size_t j = 0; j < n_q; j++)
            out[i * n_q + j] = cdb_k_dot_f16_f32_scalar(vecs + i * dim, qs + j * dim, dim);
}

float cdb_k_dot_f16_f32(const uint16_t *a, const float *q, size_t dim) {
    return CDB_K_AVX2_OR_SCALAR(cdb_k_dot_f16_f32, a, q, dim);
}

float cdb_k_dot_f16_f16(const uint16_t *a, const uint16_t *b, size_t dim) {
    return CDB_K_AVX2_OR_SCALAR(cdb_k_dot_f16_f16, a, b, dim);
}

float cdb_k_dot_f32(const float *a, const float *b, size_t dim) {
    return CDB_K_AVX2_OR_SCALAR(cdb_k_dot_f32, a, b, dim);
}

void cdb_k_dot_f16_f32_batch(const uint16_t *vecs, size_t n_vecs, const float *q, size_t dim,
                             float *out) {
#if CDB_HAVE_AVX2
    if (CDB_K_AVX2) {
        cdb_k_dot_f16_f32_batch_avx2(vecs, n_vecs, q, dim, out);
        return;
    }
#endif
    for (size_t i = 0; i < n_vecs; i++) out[i] = cdb_k_dot_f16_f32_scalar(vecs + i * dim, q, dim);
}

void cdb_k_dot_f16_f32_multi(const uint16_t *vecs, size_t n_vecs, const float *qs, size_t n_q,
                             size_t dim, float *out) {
    CDB_K_AVX2_OR_SCALAR(cdb_k_dot_f16_f32_multi, vecs, n_vecs, qs, n_q, dim, out);
}

size_t cdb_k_nearest_l2_t_f32_scalar(const float *x, const float *yt, size_t ny, size_t dim) {
    size_t best_i = 0;
    float best = 1e20f;
    cdb_k_nearest_l2_t_from(x, yt, ny, dim, 0, &best, &best_i);
    return best_i;
}

size_t cdb_k_nearest_l2_t_f32(const float *x, const float *yt, size_t ny, size_t dim) {
    return CDB_K_AVX2_OR_SCALAR(cdb_k_nearest_l2_t_f32, x, yt, ny, dim);
}

/* Norms are not on the hot path (queries, ingest): double everywhere keeps them
** overflow-free for every finite fp32 input. */
static double norm_f32_d(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return sqrt(s);
}

float cdb_k_l2norm_f32(const float *x, size_t n) { return (float)norm_f32_d(x, n); }

float cdb_k_l2norm_f16(const uint16_t *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = (double)cdb_k_f16_to_f32_1(x[i]);
        s += v * v;
    }
    return (float)sqrt(s);
}

float cdb_k_cosine_f16(const uint16_t *a, const uint16_t *b, size_t dim) {
    float na = cdb_k_l2norm_f16(a, dim), nb = cdb_k_l2norm_f16(b, dim);
    float d = cdb_k_dot_f16_f16(a, b, dim);
    if (isnan(na) || isnan(nb) || isinf(na) || isinf(nb) || isnan(d)) return NAN;
    if (na == 0.0f || nb == 0.0f) return 0.0f;
    return (float)((double)d / ((double)na * (double)nb));
}

