/*
** dot_int.h: private declarations of the AVX2+F16C dot kernels (dot_avx2.c,
** compiled with -mavx2 -mfma -mf16c). Only dot_scalar.c calls them, and only after
** cdb_k_cpu_isa() >= CDB_K_ISA_AVX2.
*/
#ifndef CDB_KERNELS_DOT_INT_H
#define CDB_KERNELS_DOT_INT_H

#include "kernels/cpu/cpu_int.h"

float cdb_k_dot_f16_f32_avx2(const uint16_t *a, const float *q, size_t dim);
float cdb_k_dot_f16_f16_avx2(const uint16_t *a, const uint16_t *b, size_t dim);
float cdb_k_dot_f32_avx2(const float *a, const float *b, size_t dim);
void cdb_k_dot_f16_f32_batch_avx2(const uint16_t *vecs, size_t n_vecs, const float *q,
                                  size_t dim, float *out);
void cdb_k_dot_f16_f32_multi_avx2(const uint16_t *vecs, size_t n_vecs, const float *qs,
                                  size_t n_q, size_t dim, float *out);
size_t cdb_k_nearest_l2_t_f32_avx2(const float *x, const float *yt, size_t ny, size_t dim);

/* cdb_k_nearest_l2_t_f32's scalar loop over the ys from `from` on (best, best_i: the
** nearest so far): each distance summed in dimension order, rounded at each step (C11
** forbids contracting into a fused multiply-add), a tie keeping the earlier index. */
static inline void cdb_k_nearest_l2_t_from(const float *x, const float *yt, size_t ny,
                                           size_t dim, size_t from, float *best,
                                           size_t *best_i) {
    for (size_t i = from; i < ny; i++) {
        float s = 0.0f;
        for (size_t d = 0; d < dim; d++) {
            float t = x[d] - yt[d * ny + i];
            s += t * t;
        }
        if (s < *best) *best = s, *best_i = i;
    }
}

#endif
