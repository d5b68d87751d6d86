/*
** gemm_avx2.c: gemm_kern.h instantiated for AVX2 + FMA (8 lanes). Built with
** -mavx2 -mfma -mf16c (this file only); called only when cdb_k_cpu_isa() >=
** CDB_K_ISA_AVX2 (gemm.c).
*/
#include <immintrin.h>

#include "kernels/cpu/gemm_int.h"

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
#define KFN_TILE_KLOOP4_(n4, a, b, PF)                                                 \
    do {                                                                               \
        int n4_ = (n4);                                                                \
        __asm__ volatile("1:\n\t" \
    "vmovups 0(%[b]), %%ymm13\n\t" \
    PF(0) \
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
    PF(64) \
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
    PF(128) \
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
    PF(192) \
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
/* A K step's B line fetched 16 steps ahead: for a streamed W (CDB_GEMM_STREAM, a text
** query's few rows read each weight once, from memory; no effect on any result). */
#define KFN_PF_AHEAD(off) "prefetcht0 1024+" #off "(%[b])\n\t"
#define KFN_PF_NONE(off) ""
#define KFN_TILE_KLOOP4(n4, a, b) KFN_TILE_KLOOP4_(n4, a, b, KFN_PF_NONE)
#define KFN_TILE_KLOOP4_STREAM(n4, a, b) KFN_TILE_KLOOP4_(n4, a, b, KFN_PF_AHEAD)

/* A full micro-panel of X packed (gemm_kern.h, KFN(pack_a)): per 8 columns, the six
** rows loaded, transposed 8x8 (two zero rows) and stored as 8 groups of MR = 6 (each
** store's 2 zero lanes are overwritten by the next one; the last one is masked). */
static void pack_a6_avx2(const float *x, size_t ldx, int kc, float *d) {
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx,
                *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
    const __m256i m6 = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
    const __m256 z = _mm256_setzero_ps();
    int kk = 0;
    for (; kk + 8 <= kc; kk += 8) {
        __m256 r0 = _mm256_loadu_ps(x0 + kk), r1 = _mm256_loadu_ps(x1 + kk),
               r2 = _mm256_loadu_ps(x2 + kk), r3 = _mm256_loadu_ps(x3 + kk),
               r4 = _mm256_loadu_ps(x4 + kk), r5 = _mm256_loadu_ps(x5 + kk);
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
        __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               s4 = _mm256_shuffle_ps(t4, z, 0x44), s5 = _mm256_shuffle_ps(t4, z, 0xEE),
               s6 = _mm256_shuffle_ps(t5, z, 0x44), s7 = _mm256_shuffle_ps(t5, z, 0xEE);
        float *o = d + (size_t)kk * 6;
        _mm256_storeu_ps(o, _mm256_permute2f128_ps(s0, s4, 0x20));
        _mm256_storeu_ps(o + 6, _mm256_permute2f128_ps(s1, s5, 0x20));
        _mm256_storeu_ps(o + 12, _mm256_permute2f128_ps(s2, s6, 0x20));
        _mm256_storeu_ps(o + 18, _mm256_permute2f128_ps(s3, s7, 0x20));
        _mm256_storeu_ps(o + 24, _mm256_permute2f128_ps(s0, s4, 0x31));
        _mm256_storeu_ps(o + 30, _mm256_permute2f128_ps(s1, s5, 0x31));
        _mm256_storeu_ps(o + 36, _mm256_permute2f128_ps(s2, s6, 0x31));
        _mm256_maskstore_ps(o + 42, m6, _mm256_permute2f128_ps(s3, s7, 0x31));
    }
    for (; kk < kc; kk++) {
        float *o = d + (size_t)kk * 6;
        o[0] = x0[kk], o[1] = x1[kk], o[2] = x2[kk], o[3] = x3[kk], o[4] = x4[kk], o[5] = x5[kk];
    }
}
#define KFN_PACK_A_FULL(x, ldx, kc, d) pack_a6_avx2((x), (ldx), (kc), (d))

#include "kernels/cpu/gemm_kern.h"
