/*
** gemm_avx2.c: gemm_kern.h instantiated for AVX2 + FMA (8 lanes). Built with
** -mavx2 -mfma -mf16c (this file only); called only when cdb_k_cpu_isa() >=
** CDB_K_ISA_AVX2 (gemm.c).
*/
#include <immintrin.h>

#define V __m256
#define VL 8
#define KFN(name) name##_avx2
#define KFN_ISA_NAME "avx2"
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSTORE(p, v) _mm256_storeu_ps((p), (v))
#define VSET1(x) _mm256_set1_ps(x)
#define VZERO() _mm256_setzero_ps()
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VMAX _mm256_max_ps
#define VMIN _mm256_min_ps
#define VFLOOR(x) _mm256_floor_ps(x)
#define VPOW2I(n)                                                                      \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                             \
        _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23))
#define VABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (x))
#define VCOPYSIGN(m, s)                                                                \
    _mm256_or_ps(VABS(m), _mm256_and_ps(_mm256_set1_ps(-0.0f), (s)))

/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
static inline float hsum_avx2(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
#define VHSUM(v) hsum_avx2(v)

#include "kernels/cpu/gemm_kern.h"
