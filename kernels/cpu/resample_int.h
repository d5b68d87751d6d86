/*
** resample_int.h: private declarations of the AVX2 PIL-resample kernels
** (resample_avx2.c, compiled with -mavx2 -mfma -mf16c), and what they share with the
** scalar ones (resample_scalar.c). Only resample_scalar.c calls the AVX2 kernels, and
** only after cdb_k_cpu_isa() >= CDB_K_ISA_AVX2.
*/
#ifndef CDB_KERNELS_RESAMPLE_INT_H
#define CDB_KERNELS_RESAMPLE_INT_H

#include "kernels/cpu/cpu_int.h"

/* A fixed-point sum back to a byte: PIL's arithmetic shift, then a clamp to 0..255. */
static inline uint8_t cdb_k_clip8(int32_t ss) {
    int32_t v = ss >> CDB_K_RESAMPLE_PRECISION;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Defines cdb_k_resample_h_u8_<isa> (cdb_k_resample_h_u8's contract) around taps, that
** ISA's static inline sum for one output: PIL's rounding bias plus the n taps k over the
** contiguous bytes p, before cdb_k_clip8. Each ISA sums them its own way, exactly. */
#define CDB_K_RESAMPLE_H_DEFINE(isa, taps)                                                    \
    void cdb_k_resample_h_u8_##isa(const uint8_t *planes, size_t plane_stride, int nch,        \
                                   const int *bounds, const int32_t *kk, int ksize, int n_out, \
                                   uint8_t *out) {                                            \
        for (int i = 0; i < n_out; i++) {                                                     \
            const int32_t *k = kk + (size_t)i * ksize;                                        \
            int x0 = bounds[2 * i], n = bounds[2 * i + 1];                                    \
            for (int c = 0; c < nch; c++)                                                     \
                out[(size_t)i * nch + c] =                                                    \
                    cdb_k_clip8(taps(planes + (size_t)c * plane_stride + x0, k, n));          \
        }                                                                                     \
    }

CDB_K_RESAMPLE_DECLARE(avx2);

#endif
