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

CDB_K_RESAMPLE_DECLARE(avx2);

#endif
