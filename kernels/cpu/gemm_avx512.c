/*
** gemm_avx512.c: gemm_kern.h instantiated for AVX-512F (16 lanes). Built with
** -mavx512f -mavx2 -mfma -mf16c (this file only); called only when
** cdb_k_cpu_isa() == CDB_K_ISA_AVX512 (gemm.c).
*/
#include <immintrin.h>

#define V __m512
#define VL 16
#define KFN(name) name##_avx512
#define KFN_ISA_NAME "avx512"
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSTORE(p, v) _mm512_storeu_ps((p), (v))
#define VSET1(x) _mm512_set1_ps(x)
#define VZERO() _mm512_setzero_ps()
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VMAX _mm512_max_ps
#define VMIN _mm512_min_ps
#define VFLOOR(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)
#define VPOW2I(n)                                                                      \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                             \
        _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23))
/* and/or on the integer view: AVX-512F has no _ps logic ops (those are DQ) */
#define VABS(x)                                                                        \
    _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)))
#define VCOPYSIGN(m, s)                                                                \
    _mm512_castsi512_ps(_mm512_or_si512(                                               \
        _mm512_castps_si512(VABS(m)),                                                  \
        _mm512_and_si512(_mm512_castps_si512(s), _mm512_set1_epi32((int)0x80000000u))))

/* the two 256-bit halves added, then the AVX2 tree */
static inline float hsum_avx512(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v),
                             _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
#define VHSUM(v) hsum_avx512(v)

#include "kernels/cpu/gemm_kern.h"
