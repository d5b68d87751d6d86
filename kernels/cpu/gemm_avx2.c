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

/* The tile's K loop, n4 steps of 4 kk (gemm_kern.h, KFN(tile)): written in asm so
** that the 12 accumulators, the two B vectors and the broadcast A value stay in the
** 16 ymm registers (GCC spilled an accumulator inside its own schedule of the loop).
** Per kk, row r: c_r0 += a[r] * b[0..8), c_r1 += a[r] * b[8..16), the order and the
** single rounding of _mm256_fmadd_ps. a and b are advanced past the steps run. */
#define KFN_TILE_KLOOP4(n4, a, b)                                                      \
    do {                                                                               \
        int n4_ = (n4);                                                                \
        __asm__ volatile("1:\n\t" \
    "vmovups 0(%[b]), %%ymm13\n\t" \
    "vmovups 32(%[b]), %%ymm14\n\t" \
    "vbroadcastss 0(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c00]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c01]\n\t" \
    "vbroadcastss 4(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c10]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c11]\n\t" \
    "vbroadcastss 8(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c20]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c21]\n\t" \
    "vbroadcastss 12(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c30]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c31]\n\t" \
    "vbroadcastss 16(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c40]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c41]\n\t" \
    "vbroadcastss 20(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c50]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c51]\n\t" \
    "vmovups 64(%[b]), %%ymm13\n\t" \
    "vmovups 96(%[b]), %%ymm14\n\t" \
    "vbroadcastss 24(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c00]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c01]\n\t" \
    "vbroadcastss 28(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c10]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c11]\n\t" \
    "vbroadcastss 32(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c20]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c21]\n\t" \
    "vbroadcastss 36(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c30]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c31]\n\t" \
    "vbroadcastss 40(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c40]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c41]\n\t" \
    "vbroadcastss 44(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c50]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c51]\n\t" \
    "vmovups 128(%[b]), %%ymm13\n\t" \
    "vmovups 160(%[b]), %%ymm14\n\t" \
    "vbroadcastss 48(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c00]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c01]\n\t" \
    "vbroadcastss 52(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c10]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c11]\n\t" \
    "vbroadcastss 56(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c20]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c21]\n\t" \
    "vbroadcastss 60(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c30]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c31]\n\t" \
    "vbroadcastss 64(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c40]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c41]\n\t" \
    "vbroadcastss 68(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c50]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c51]\n\t" \
    "vmovups 192(%[b]), %%ymm13\n\t" \
    "vmovups 224(%[b]), %%ymm14\n\t" \
    "vbroadcastss 72(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c00]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c01]\n\t" \
    "vbroadcastss 76(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c10]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c11]\n\t" \
    "vbroadcastss 80(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c20]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c21]\n\t" \
    "vbroadcastss 84(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c30]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c31]\n\t" \
    "vbroadcastss 88(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c40]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c41]\n\t" \
    "vbroadcastss 92(%[a]), %%ymm15\n\t" \
    "vfmadd231ps %%ymm13, %%ymm15, %[c50]\n\t" \
    "vfmadd231ps %%ymm14, %%ymm15, %[c51]\n\t" \
    "addq $96, %[a]\n\t" \
    "addq $256, %[b]\n\t" \
    "decl %[n]\n\t" \
    "jnz 1b\n\t" \
                         : [a] "+r"(a), [b] "+r"(b), [n] "+r"(n4_), [c00] "+x"(c00),          \
                           [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11), [c20] "+x"(c20), \
                           [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31), [c40] "+x"(c40), \
                           [c41] "+x"(c41), [c50] "+x"(c50), [c51] "+x"(c51)                   \
                         :                                                                      \
                         : "xmm13", "xmm14", "xmm15", "cc", "memory");                         \
    } while (0)

#include "kernels/cpu/gemm_kern.h"
