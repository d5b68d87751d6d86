/*
** gemm_generic.c: gemm_kern.h instantiated in portable C (GCC/clang vector
** extensions, 8 lanes; no ISA flags, so the compiler lowers them to what the
** target has). The CLIPDB_ISA=scalar path and the kernels of non-x86 builds.
** VFMA is a*b + c with two roundings (ISO C mode: no contraction), fixed for a
** given build like every other path.
*/
#include <stdint.h>
#include <string.h>

/* Every function taking or returning a vector here is static, so the note GCC gives
** about the 32-byte vector ABI on targets without AVX does not apply
** (kernels/CMakeLists.txt builds this file with -Wno-psabi). */

typedef float cdb_v8f __attribute__((vector_size(32)));
typedef int32_t cdb_v8i __attribute__((vector_size(32)));

#define V cdb_v8f
#define VL 8
#define KFN(name) name##_generic
#define KFN_ISA_NAME "scalar"

static inline cdb_v8f g_load(const float *p) {
    cdb_v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void g_store(float *p, cdb_v8f v) { memcpy(p, &v, sizeof v); }
static inline cdb_v8f g_set1(float x) { return (cdb_v8f){x, x, x, x, x, x, x, x}; }
/* lane-wise a > b ? a : b (NaN in either: b), by masks (C has no vector ?:) */
static inline cdb_v8f g_sel(cdb_v8i m, cdb_v8f a, cdb_v8f b) {
    return (cdb_v8f)(((cdb_v8i)a & m) | ((cdb_v8i)b & ~m));
}
static inline cdb_v8f g_max(cdb_v8f a, cdb_v8f b) { return g_sel(a > b, a, b); }
static inline cdb_v8f g_min(cdb_v8f a, cdb_v8f b) { return g_sel(a < b, a, b); }
static inline cdb_v8f g_floor(cdb_v8f x) {
    cdb_v8f f = __builtin_convertvector(__builtin_convertvector(x, cdb_v8i), cdb_v8f);
    return f + __builtin_convertvector(f > x, cdb_v8f); /* true lanes are -1 */
}
static inline cdb_v8f g_pow2i(cdb_v8f n) {
    return (cdb_v8f)((__builtin_convertvector(n, cdb_v8i) + 127) << 23);
}
static inline cdb_v8f g_abs(cdb_v8f x) { return (cdb_v8f)((cdb_v8i)x & 0x7fffffff); }
static inline cdb_v8f g_copysign(cdb_v8f m, cdb_v8f s) {
    return (cdb_v8f)(((cdb_v8i)m & 0x7fffffff) | ((cdb_v8i)s & (int32_t)0x80000000u));
}
/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as the AVX2 tree */
static inline float g_hsum(cdb_v8f v) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

#define VLOAD(p) g_load(p)
#define VSTORE(p, v) g_store((p), (v))
#define VSET1(x) g_set1(x)
#define VZERO() g_set1(0.0f)
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VMUL(a, b) ((a) * (b))
#define VDIV(a, b) ((a) / (b))
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VMAX g_max
#define VMIN g_min
#define VFLOOR g_floor
#define VPOW2I g_pow2i
#define VABS g_abs
#define VCOPYSIGN g_copysign
#define VHSUM g_hsum

#include "kernels/cpu/gemm_kern.h"
