/*
** kernels.h: clipdb's compute primitives behind one C interface. The only kernels
** header other modules include.
**
** Implementations live in kernels/cpu/ (a scalar reference that is always built,
** plus ISA-specific files compiled with their own flags and chosen at run time)
** and kernels/cuda/ (when built with CUDA). The scalar C version is the reference
** every other backend is tested against (tests/kernels/).
**
** Precision contract (DESIGN.md): fp16 is a storage format only; every reduction
** (dot, norm, sum) accumulates in fp32 or wider.
**
** Thread-safety: all functions are reentrant; the dispatch choice is made once
** (pthread_once) on first use.
*/
#ifndef CDB_KERNELS_H
#define CDB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dispatch ---------------------------------------------------------------- */

typedef enum cdb_k_isa {
    CDB_K_ISA_SCALAR = 0, /* portable C reference */
    CDB_K_ISA_AVX2 = 1    /* AVX2 + FMA + F16C */
} cdb_k_isa;

/* The CPU ISA level in use: the best the CPU supports, capped by the
** CLIPDB_ISA environment variable ("scalar" forces the reference paths). */
cdb_k_isa cdb_k_cpu_isa(void);
const char *cdb_k_isa_name(cdb_k_isa isa);

/* ---- CUDA presence -----------------------------------------------------------
** Number of usable CUDA devices: 0 when clipdb was built without CUDA, when no
** driver is installed, or when no GPU is present. Never fails, never aborts. */
int cdb_k_cuda_device_count(void);
/* 1 when this build contains the CUDA backend. */
int cdb_k_cuda_built(void);

/* ---- fp16 <-> fp32 --------------------------------------------------------------
** IEEE binary16 stored as uint16_t (little-endian on disk). f32 -> f16 rounds to
** nearest, ties to even; overflow gives +-Inf; NaN stays NaN (quiet, sign kept);
** subnormals are produced and consumed exactly. f16 -> f32 is exact. */

float cdb_k_f16_to_f32_1(uint16_t h);
uint16_t cdb_k_f32_to_f16_1(float f);
void cdb_k_f16_to_f32(const uint16_t *src, float *dst, size_t n);
void cdb_k_f32_to_f16(const float *src, uint16_t *dst, size_t n);

/* Scalar references, exposed for differential tests. */
void cdb_k_f16_to_f32_scalar(const uint16_t *src, float *dst, size_t n);
void cdb_k_f32_to_f16_scalar(const float *src, uint16_t *dst, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* CDB_KERNELS_H */
