/*
** dot_avx2.c: AVX2+FMA+F16C dot products of fp16-stored vectors with fp32 queries.
** Each 8-lane block of halves is widened exactly with vcvtph2ps; products are fused
** into fp32 accumulators (4 x 8 = 32 independent partial sums for the single dot).
** Every CDB_DOT_BLOCK elements the fp32 partial sums are flushed into a double: each
** fp32 partial then holds at most 8 terms, which keeps the result within ~1e-7
** relative of the exact sum even at 59,136 dims with outlier channels that all land
** in one SIMD lane (a hidden state flattened with stride 768 does exactly that; a
** plain 32-way fp32 accumulation measured 3.3e-6 off there). The batch and
** multi-query kernels return results bit-identical to the single dot. Built with
** -mavx2 -mfma -mf16c (this file only); called after dispatch.
*/
#include <immintrin.h>

#include "kernels/cpu/dot_int.h"

static inline float hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256 load_h8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

#define CDB_DOT_BLOCK 256 /* elements per fp32 block, a multiple of 32 */

/* One dot product of 8-lane loads LOAD_A / LOAD_B and scalar tails ONE_A / ONE_B: the
** summation order every kernel of this file keeps (4 accumulators, 32-element steps,
** a double flush per CDB_DOT_BLOCK). A macro, not a function taking loaders: each
** expansion is the straight-line loop the compiler vectorizes best. */
#define CDB_DOT_BODY(dim, LOAD_A, LOAD_B, ONE_A, ONE_B)                                       \
    double acc = 0.0;                                                                       \
    size_t i = 0;                                                                           \
    while (i + 8 <= (dim)) {                                                                \
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();                          \
        __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();                          \
        size_t end = i + CDB_DOT_BLOCK <= (dim) ? i + CDB_DOT_BLOCK : (dim);                \
        for (; i + 32 <= end; i += 32) {                                                    \
            s0 = _mm256_fmadd_ps(LOAD_A(i), LOAD_B(i), s0);                                 \
            s1 = _mm256_fmadd_ps(LOAD_A(i + 8), LOAD_B(i + 8), s1);                         \
            s2 = _mm256_fmadd_ps(LOAD_A(i + 16), LOAD_B(i + 16), s2);                       \
            s3 = _mm256_fmadd_ps(LOAD_A(i + 24), LOAD_B(i + 24), s3);                       \
        }                                                                                   \
        for (; i + 8 <= end; i += 8) s0 = _mm256_fmadd_ps(LOAD_A(i), LOAD_B(i), s0);        \
        acc += hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));          \
    }                                                                                       \
    for (; i < (dim); i++) acc += (double)(ONE_A(i) * ONE_B(i));                            \
    return (float)acc

#define A_H8(i) load_h8(a + (i))
#define A_H1(i) cdb_k_f16_to_f32_1(a[i])

float cdb_k_dot_f16_f32_avx2(const uint16_t *a, const float *q, size_t dim) {
#define Q_F8(i) _mm256_loadu_ps(q + (i))
#define Q_F1(i) q[i]
    CDB_DOT_BODY(dim, A_H8, Q_F8, A_H1, Q_F1);
}

float cdb_k_dot_f16_f16_avx2(const uint16_t *a, const uint16_t *b, size_t dim) {
#define B_H8(i) load_h8(b + (i))
#define B_H1(i) cdb_k_f16_to_f32_1(b[i])
    CDB_DOT_BODY(dim, A_H8, B_H8, A_H1, B_H1);
}

float cdb_k_dot_f32_avx2(const float *a, const float *b, size_t dim) {
#define A_F8(i) _mm256_loadu_ps(a + (i))
#define A_F1(i) a[i]
#define B_F8(i) _mm256_loadu_ps(b + (i))
#define B_F1(i) b[i]
    CDB_DOT_BODY(dim, A_F8, B_F8, A_F1, B_F1);
}

void cdb_k_dot_f16_f32_batch_avx2(const uint16_t *vecs, size_t n_vecs, const float *q,
                                  size_t dim, float *out) {
    for (size_t i = 0; i < n_vecs; i++) {
        if (i + 4 < n_vecs) _mm_prefetch((const char *)(vecs + (i + 4) * dim), _MM_HINT_T0);
        out[i] = cdb_k_dot_f16_f32_avx2(vecs + i * dim, q, dim);
    }
}

/* One stored vector against two queries, with exactly the single dot's summation
** order (4 accumulators per query, 32-element steps, CDB_DOT_BLOCK flushes), so
** every result is bit-identical to cdb_k_dot_f16_f32_avx2: a score must not depend
** on whether it came from a batched exact search or a per-candidate re-rank. */
static void dot_1x2(const uint16_t *a, const float *q0, const float *q1, size_t dim, float *o) {
    double acc0 = 0.0, acc1 = 0.0;
    size_t i = 0;
    while (i + 8 <= dim) {
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        __m256 s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
        __m256 t0 = _mm256_setzero_ps(), t1 = _mm256_setzero_ps();
        __m256 t2 = _mm256_setzero_ps(), t3 = _mm256_setzero_ps();
        size_t end = i + CDB_DOT_BLOCK <= dim ? i + CDB_DOT_BLOCK : dim;
        for (; i + 32 <= end; i += 32) {
            __m256 x = load_h8(a + i);
            s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q0 + i), s0);
            t0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q1 + i), t0);
            x = load_h8(a + i + 8);
            s1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q0 + i + 8), s1);
            t1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q1 + i + 8), t1);
            x = load_h8(a + i + 16);
            s2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q0 + i + 16), s2);
            t2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q1 + i + 16), t2);
            x = load_h8(a + i + 24);
            s3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q0 + i + 24), s3);
            t3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q1 + i + 24), t3);
        }
        for (; i + 8 <= end; i += 8) {
            __m256 x = load_h8(a + i);
            s0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q0 + i), s0);
            t0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(q1 + i), t0);
        }
        acc0 += hsum8(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
        acc1 += hsum8(_mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3)));
    }
    for (; i < dim; i++) {
        float x = cdb_k_f16_to_f32_1(a[i]);
        acc0 += (double)(x * q0[i]);
        acc1 += (double)(x * q1[i]);
    }
    o[0] = (float)acc0, o[1] = (float)acc1;
}

void cdb_k_dot_f16_f32_multi_avx2(const uint16_t *vecs, size_t n_vecs, const float *qs,
                                  size_t n_q, size_t dim, float *out) {
    for (size_t i = 0; i < n_vecs; i++) {
        const uint16_t *v = vecs + i * dim;
        float *o = out + i * n_q;
        size_t j = 0;
        if (i + 2 < n_vecs) _mm_prefetch((const char *)(v + 2 * dim), _MM_HINT_T0);
        for (; j + 2 <= n_q; j += 2) dot_1x2(v, qs + j * dim, qs + (j + 1) * dim, dim, o + j);
        if (j < n_q) o[j] = cdb_k_dot_f16_f32_avx2(v, qs + j * dim, dim);
    }
}

/* 8 ys at a time, one per lane: the lanes' sums run in dimension order with a separate
** multiply and add (the scalar loop's roundings, so the same distances bit for bit);
** each lane keeps its first minimum, and the lanes' minima are reduced to the first. */
size_t cdb_k_nearest_l2_t_f32_avx2(const float *x, const float *yt, size_t ny, size_t dim) {
    __m256 best_v = _mm256_set1_ps(1e20f);
    __m256i best_ix = _mm256_setzero_si256(), ix = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i step = _mm256_set1_epi32(8);
    size_t i = 0, best_i = 0;
    float best = 1e20f;
    for (; i + 8 <= ny && ny <= 0x7fffffff; i += 8, ix = _mm256_add_epi32(ix, step)) {
        __m256 s = _mm256_setzero_ps();
        for (size_t d = 0; d < dim; d++) {
            __m256 t = _mm256_sub_ps(_mm256_set1_ps(x[d]), _mm256_loadu_ps(yt + d * ny + i));
            s = _mm256_add_ps(s, _mm256_mul_ps(t, t));
        }
        __m256 lt = _mm256_cmp_ps(s, best_v, _CMP_LT_OQ);
        best_v = _mm256_blendv_ps(best_v, s, lt);
        best_ix = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(best_ix),
                                                       _mm256_castsi256_ps(ix), lt));
    }
    if (i > 0) {
        float v[8];
        int32_t at[8];
        _mm256_storeu_ps(v, best_v);
        _mm256_storeu_si256((__m256i *)at, best_ix);
        for (int l = 0; l < 8; l++)
            if (v[l] < best || (v[l] == best && best < 1e20f && (size_t)at[l] < best_i))
                best = v[l], best_i = (size_t)at[l];
    }
    cdb_k_nearest_l2_t_from(x, yt, ny, dim, i, &best, &best_i); /* the tail */
    return best_i;
}
