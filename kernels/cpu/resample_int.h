/*
** resample_int.h: private declarations of the AVX2 PIL-resample kernels
** (resample_avx2.c, compiled with -mavx2 -mfma -mf16c). Only resample_scalar.c
** calls them, and only after cdb_k_cpu_isa() >= CDB_K_ISA_AVX2.
*/
#ifndef CDB_KERNELS_RESAMPLE_INT_H
#define CDB_KERNELS_RESAMPLE_INT_H

#include "kernels/cpu/cpu_int.h"

/* A fixed-point sum back to a byte: PIL's arithmetic shift, then a clamp to 0..255. */
static inline uint8_t cdb_k_clip8(int32_t ss) {
    int32_t v = ss >> CDB_K_RESAMPLE_PRECISION;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

void cdb_k_resample_h_u8_avx2(const uint8_t *planes, size_t plane_stride, int nch,
                              const int *bounds, const int32_t *kk, int ksize, int n_out,
                              uint8_t *out);
void cdb_k_resample_v_u8_avx2(const uint8_t *src, size_t stride, const int32_t *k, int n,
                              size_t len, uint8_t *out);
void cdb_k_deinterleave_u8_avx2(const uint8_t *src, size_t n_px, int nch, uint8_t *planes,
                                size_t plane_stride);

void cdb_k_premul_deinterleave_u8_avx2(const uint8_t *src, size_t n_px, int nch,
                                       uint8_t *planes, size_t plane_stride);

#endif
