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

#endif
