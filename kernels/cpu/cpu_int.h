/*
** cpu_int.h: private declarations shared by kernels/cpu/ files. The *_avx2
** functions are defined in files compiled with -mavx2 -mfma -mf16c and must only
** be called after cdb_k_cpu_isa() >= CDB_K_ISA_AVX2; the *_avx512 ones (built with
** -mavx512f as well) after cdb_k_cpu_isa() == CDB_K_ISA_AVX512. CDB_HAVE_AVX2 and
** CDB_HAVE_AVX512 are set by CMake when those files are part of the build (x86-64).
*/
#ifndef CDB_KERNELS_CPU_INT_H
#define CDB_KERNELS_CPU_INT_H

#include "kernels/kernels.h"

#ifndef CDB_HAVE_AVX2
#define CDB_HAVE_AVX2 0
#endif
#ifndef CDB_HAVE_AVX512
#define CDB_HAVE_AVX512 0
#endif

/* CDB_K_AVX2: the *_avx2 functions may be called (built, and the CPU has AVX2).
** CDB_K_AVX2_OR_SCALAR(fn, args...): fn_avx2(args) when they may, else fn_scalar(args);
** an expression of fn's type (void included): the dispatch of a kernel that has both. */
#if CDB_HAVE_AVX2
#define CDB_K_AVX2 (cdb_k_cpu_isa() >= CDB_K_ISA_AVX2)
#define CDB_K_AVX2_OR_SCALAR(fn, ...) \
    (CDB_K_AVX2 ? fn##_avx2(__VA_ARGS__) : fn##_scalar(__VA_ARGS__))
#else
#define CDB_K_AVX2 0
#define CDB_K_AVX2_OR_SCALAR(fn, ...) fn##_scalar(__VA_ARGS__)
#endif

void cdb_k_f16_to_f32_avx2(const uint16_t *src, float *dst, size_t n);
void cdb_k_f32_to_f16_avx2(const float *src, uint16_t *dst, size_t n);

#endif
