/*
** gemm_kern.h: the vector kernels of the CPU backend, written once over a small
** set of vector macros and instantiated per ISA: gemm_avx512.c (16 lanes),
** gemm_avx2.c (8 lanes, AVX2 + FMA) and gemm_generic.c (8 lanes of GCC/clang
** vector extensions, portable C: the CLIPDB_ISA=scalar path). The same blocking,
** the same operation order and the same formulas in every instantiation; only the
** vector width differs (so the AVX2 tests exercise the algorithm the AVX-512 path
** runs). Contracts: gemm_int.h (cdb_gemm_kern).
**
** The including file defines, before including this one:
**   V, VL                     vector type and its fp32 lanes
**   KFN(name)                 a per-ISA name
**   VLOAD(p) VSTORE(p, v)     unaligned load / store of VL floats
**   VSET1(x) VZERO()          broadcast / zero
**   VADD VSUB VMUL VDIV       IEEE fp32 lane-wise, one rounding each
**   VFMA(a, b, c)             a*b + c with ONE rounding where the ISA has FMA
**                             (generic: two roundings; fixed either way)
**   VMAX(a, b) VMIN(a, b)     lane-wise; when a lane of either is NaN, b's lane
**                             (x86 maxps/minps semantics)
**   VFLOOR(x)                 floor, |x| < 2^31
**   VPOW2I(n)                 2^n for integral n in [-126, 127]
**   VABS(x) VCOPYSIGN(m, s)   |x|; |m| with the sign of s
**   VHSUM(v)                  the lanes' sum in a fixed order (float)
*/

#include <math.h>
#include <string.h>

#include "kernels/cpu/gemm_int.h"

/* ---- vector math ------------------------------------------------------------
** exp: Cephes' expf (range reduction by ln 2 in two parts, degree-6 polynomial,
** ~1 ulp), argument clamped to [-87.34, 88] (exp(88) = 1.65e38 is finite; below,
** ~1.2e-38 stands for 0: every use adds 1 or divides by a sum that holds 1). NaN
** stays NaN. erf: Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7, as PyTorch's own
** vectorized erf). */

static inline V KFN(vexp)(V x) {
    V fx, y;
    x = VMIN(VSET1(88.0f), VMAX(VSET1(-87.33654f), x));
    fx = VFLOOR(VFMA(x, VSET1(1.44269504088896341f), VSET1(0.5f)));
    x = VFMA(fx, VSET1(-0.693359375f), x);
    x = VFMA(fx, VSET1(2.12194440e-4f), x);
    y = VSET1(1.9875691500e-4f);
    y = VFMA(y, x, VSET1(1.3981999507e-3f));
    y = VFMA(y, x, VSET1(8.3334519073e-3f));
    y = VFMA(y, x, VSET1(4.1665795894e-2f));
    y = VFMA(y, x, VSET1(1.6666665459e-1f));
    y = VFMA(y, x, VSET1(5.0000001201e-1f));
    y = VFMA(y, VMUL(x, x), VADD(x, VSET1(1.0f)));
    return VMUL(y, VPOW2I(fx));
}

static inline V KFN(verf)(V x) {
    V a = VABS(x), t, y;
    t = VDIV(VSET1(1.0f), VFMA(VSET1(0.3275911f), a, VSET1(1.0f)));
    y = VSET1(1.061405429f);
    y = VFMA(y, t, VSET1(-1.453152027f));
    y = VFMA(y, t, VSET1(1.421413741f));
    y = VFMA(y, t, VSET1(-0.284496736f));
    y = VFMA(y, t, VSET1(0.254829592f));
    y = VMUL(y, t);
    y = VSUB(VSET1(1.0f), VMUL(y, KFN(vexp)(VMUL(VSUB(VZERO(), a), a))));
    return VCOPYSIGN(y, x);
}

/* The activations of cdb_k_act, as kernels.h defines them. ReLU: max(0, x) with
** x second, so a NaN lane stays NaN. The tanh GELU through the identity
** 0.5 (1 + tanh(u)) = 1 / (1 + exp(-2u)): exp's clamp gives x / 1.65e38 (not 0) below
** x ~ -9.5, where PyTorch's value is -0 or a denormal. */
static inline V KFN(vact)(V x, cdb_k_act act) {
    switch (act) {
    case CDB_K_ACT_RELU: return VMAX(VZERO(), x);
    case CDB_K_ACT_QUICK_GELU:
        return VDIV(x, VADD(VSET1(1.0f), KFN(vexp)(VMUL(VSET1(-1.702f), x))));
    case CDB_K_ACT_GELU:
        return VMUL(VMUL(VSET1(0.5f), x),
                    VADD(VSET1(1.0f), KFN(verf)(VMUL(x, VSET1(0.70710678118654752f)))));
    case CDB_K_ACT_GELU_TANH: /* x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) */
        return VDIV(x, VADD(VSET1(1.0f),
                            KFN(vexp)(VMUL(VSET1(-1.5957691216057308f),
                                           VFMA(VMUL(VSET1(0.044715f), VMUL(x, x)), x, x)))));
    default: return x;
    }
}

/* ---- the GEMM micro-tile (MR = 6 rows x 2 vectors) ---------------------------- */

/* One row of the tile's epilogue: see cdb_gemm_kern.tile. */
static inline void KFN(tile_row)(float *cr, V p0, V p1, const float *bias, int flags,
                                 cdb_k_act act) {
    V t0, t1;
    if (flags & CDB_GEMM_FIRST) {
        V i0 = bias ? VLOAD(bias) : VZERO(), i1 = bias ? VLOAD(bias + VL) : VZERO();
        if (flags & CDB_GEMM_LOADC) {
            i0 = VADD(VLOAD(cr), i0);
            i1 = VADD(VLOAD(cr + VL), i1);
        }
        t0 = VADD(i0, p0);
        t1 = VADD(i1, p1);
    } else {
        t0 = VADD(VLOAD(cr), p0);
        t1 = VADD(VLOAD(cr + VL), p1);
    }
    if (flags & CDB_GEMM_LAST) {
        t0 = KFN(vact)(t0, act);
        t1 = KFN(vact)(t1, act);
    }
    VSTORE(cr, t0);
    VSTORE(cr + VL, t1);
}

/* Step u of the unrolled K loop: row r's two accumulators += a[u][r] * b[u][0..2VL). */
#define CDB_GK_ROW(u, r)                                 \
    do {                                                 \
        V ar = VSET1(a[(u)*CDB_GEMM_MR + r]);            \
        c##r##0 = VFMA(ar, b0, c##r##0);                 \
        c##r##1 = VFMA(ar, b1, c##r##1);                 \
    } while (0)
#define CDB_GK_STEP(u)                                   \
    do {                                                 \
        V b0 = VLOAD(b + (u)*2 * VL), b1 = VLOAD(b + (u)*2 * VL + VL); \
        CDB_GK_ROW(u, 0);                                \
        CDB_GK_ROW(u, 1);                                \
        CDB_GK_ROW(u, 2);                                \
        CDB_GK_ROW(u, 3);                                \
        CDB_GK_ROW(u, 4);                                \
        CDB_GK_ROW(u, 5);                                \
    } while (0)

static void KFN(tile)(int kc, const float *a, const float *b, float *c, size_t ldc,
                      const float *bias, int flags, cdb_k_act act) {
    V c00 = VZERO(), c01 = VZERO(), c10 = VZERO(), c11 = VZERO(), c20 = VZERO(),
      c21 = VZERO(), c30 = VZERO(), c31 = VZERO(), c40 = VZERO(), c41 = VZERO(),
      c50 = VZERO(), c51 = VZERO();
    int kk = 0;
    /* C's rows are read only after the loop: start fetching them now (they may be in
    ** L3 since the previous K chunk) */
    for (int r = 0; r < CDB_GEMM_MR; r++) {
        __builtin_prefetch(c + r * ldc, 1);
        __builtin_prefetch(c + r * ldc + 2 * VL - 1, 1);
    }
#ifdef KFN_TILE_KLOOP4
    /* the ISA's own loop over kk < kc & ~3 (the same chains, the same order), with
    ** software prefetch of B when it streams from memory */
    if (kc >= 4) {
#ifdef KFN_TILE_KLOOP4_STREAM
        if (flags & CDB_GEMM_STREAM)
            KFN_TILE_KLOOP4_STREAM(kc >> 2, a, b);
        else
#endif
            KFN_TILE_KLOOP4(kc >> 2, a, b);
        kk = kc & ~3;
    }
#else
    for (; kk + 4 <= kc; kk += 4) { /* unrolled by 4: the same chains in the same order */
        CDB_GK_STEP(0);
        CDB_GK_STEP(1);
        CDB_GK_STEP(2);
        CDB_GK_STEP(3);
        a += 4 * CDB_GEMM_MR;
        b += 8 * VL;
    }
#endif
    for (; kk < kc; kk++) {
        CDB_GK_STEP(0);
        a += CDB_GEMM_MR;
        b += 2 * VL;
    }
    KFN(tile_row)(c, c00, c01, bias, flags, act);
    KFN(tile_row)(c + ldc, c10, c11, bias, flags, act);
    KFN(tile_row)(c + 2 * ldc, c20, c21, bias, flags, act);
    KFN(tile_row)(c + 3 * ldc, c30, c31, bias, flags, act);
    KFN(tile_row)(c + 4 * ldc, c40, c41, bias, flags, act);
    KFN(tile_row)(c + 5 * ldc, c50, c51, bias, flags, act);
}
#undef CDB_GK_ROW
#undef CDB_GK_STEP

/* One row of X against 4 panels (cdb_gemm_kern.row4): 8 chains, each element's the
** same as in KFN(tile) (one FMA chain from 0, kk ascending; the same epilogue). */
static void KFN(row4)(int kc, const float *a, const float *b, size_t bs, float *c,
                      const float *bias, int flags, cdb_k_act act) {
    V c00 = VZERO(), c01 = VZERO(), c10 = VZERO(), c11 = VZERO(), c20 = VZERO(),
      c21 = VZERO(), c30 = VZERO(), c31 = VZERO();
    const float *b1 = b + bs, *b2 = b + 2 * bs, *b3 = b + 3 * bs;
    for (int kk = 0; kk < kc; kk++) {
        V ar = VSET1(a[(size_t)kk * CDB_GEMM_MR]);
        size_t o = (size_t)kk * 2 * VL;
        c00 = VFMA(ar, VLOAD(b + o), c00);
        c01 = VFMA(ar, VLOAD(b + o + VL), c01);
        c10 = VFMA(ar, VLOAD(b1 + o), c10);
        c11 = VFMA(ar, VLOAD(b1 + o + VL), c11);
        c20 = VFMA(ar, VLOAD(b2 + o), c20);
        c21 = VFMA(ar, VLOAD(b2 + o + VL), c21);
        c30 = VFMA(ar, VLOAD(b3 + o), c30);
        c31 = VFMA(ar, VLOAD(b3 + o + VL), c31);
    }
    KFN(tile_row)(c, c00, c01, bias, flags, act);
    KFN(tile_row)(c + 2 * VL, c10, c11, bias ? bias + 2 * VL : NULL, flags, act);
    KFN(tile_row)(c + 4 * VL, c20, c21, bias ? bias + 4 * VL : NULL, flags, act);
    KFN(tile_row)(c + 6 * VL, c30, c31, bias ? bias + 6 * VL : NULL, flags, act);
}

/* ---- X packing (cdb_gemm_kern.pack_a) ------------------------------------------ */

/* Rows r < mb of one micro-panel: d[kk*MR + r] = x[r*ldx + kk], zero rows past mb. */
static inline void KFN(pack_a_rows)(const float *x, size_t ldx, int mb, int kc, float *d) {
    for (int r = 0; r < CDB_GEMM_MR; r++) {
        if (r < mb) {
            const float *xr = x + (size_t)r * ldx;
            for (int kk = 0; kk < kc; kk++) d[(size_t)kk * CDB_GEMM_MR + r] = xr[kk];
        } else {
            for (int kk = 0; kk < kc; kk++) d[(size_t)kk * CDB_GEMM_MR + r] = 0.0f;
        }
    }
}

static void KFN(pack_a)(const float *x, size_t ldx, int mb, int kc, float *dst) {
    for (int ip = 0; ip * CDB_GEMM_MR < mb; ip++) {
        const float *xp = x + (size_t)ip * CDB_GEMM_MR * ldx;
        float *d = dst + (size_t)ip * kc * CDB_GEMM_MR;
        int rows = mb - ip * CDB_GEMM_MR;
#ifdef KFN_PACK_A_FULL
        if (rows >= CDB_GEMM_MR) { /* the ISA's copy of a full micro-panel */
            KFN_PACK_A_FULL(xp, ldx, kc, d);
            continue;
        }
#endif
        KFN(pack_a_rows)(xp, ldx, rows, kc, d);
    }
}

/* ---- elementwise ----------------------------------------------------------------- */

static void KFN(act)(float *y, size_t n, cdb_k_act act) {
    size_t i = 0;
    if (act == CDB_K_ACT_NONE) return;
    for (; i + VL <= n; i += VL) VSTORE(y + i, KFN(vact)(VLOAD(y + i), act));
    if (i < n) { /* the tail through the same vector formula, zero-padded */
        float t[VL];
        memset(t, 0, sizeof t);
        memcpy(t, y + i, (n - i) * sizeof(float));
        VSTORE(t, KFN(vact)(VLOAD(t), act));
        memcpy(y + i, t, (n - i) * sizeof(float));
    }
}

/* ---- attention ------------------------------------------------------------------ */

/* q . k over hd: one vector FMA chain over the whole vectors, its lanes summed
** (VHSUM), then the remaining hd % VL products added in order. */
/* s + q[l]*k[l] + ... for l up to hd, in order: the tail of a dot past whole vectors. */
static inline float KFN(dot_tail)(const float *q, const float *k, int l, int hd, float s) {
    for (; l < hd; l++) s += q[l] * k[l];
    return s;
}

static inline float KFN(dot)(const float *q, const float *k, int hd) {
    V acc = VZERO();
    int l = 0;
    for (; l + VL <= hd; l += VL) acc = VFMA(VLOAD(q + l), VLOAD(k + l), acc);
    return KFN(dot_tail)(q, k, l, hd, VHSUM(acc));
}

/* Four keys at once (four independent chains), each summed as KFN(dot) does. */
static inline void KFN(dot4)(const float *q, const float *k, size_t ks, int hd,
                             float *out) {
    V a0 = VZERO(), a1 = VZERO(), a2 = VZERO(), a3 = VZERO();
    const float *k0 = k, *k1 = k + ks, *k2 = k + 2 * ks, *k3 = k + 3 * ks;
    int l = 0;
    for (; l + VL <= hd; l += VL) {
        V qv = VLOAD(q + l);
        a0 = VFMA(qv, VLOAD(k0 + l), a0);
        a1 = VFMA(qv, VLOAD(k1 + l), a1);
        a2 = VFMA(qv, VLOAD(k2 + l), a2);
        a3 = VFMA(qv, VLOAD(k3 + l), a3);
    }
    out[0] = KFN(dot_tail)(q, k0, l, hd, VHSUM(a0));
    out[1] = KFN(dot_tail)(q, k1, l, hd, VHSUM(a1));
    out[2] = KFN(dot_tail)(q, k2, l, hd, VHSUM(a2));
    out[3] = KFN(dot_tail)(q, k3, l, hd, VHSUM(a3));
}

/* out[u*VL ..] = inv * sum_j p_j v_j[u*VL ..] for u < nvec (8, 4 or 1 vectors). */
static inline void KFN(pv)(const float *p, const float *v, size_t vs, int n_keys, int nvec,
                           float inv, float *out) {
    V o0 = VZERO(), o1 = VZERO(), o2 = VZERO(), o3 = VZERO(), o4 = VZERO(), o5 = VZERO(),
      o6 = VZERO(), o7 = VZERO();
    for (int j = 0; j < n_keys; j++) {
        const float *vr = v + (size_t)j * vs;
        V pj = VSET1(p[j]);
        o0 = VFMA(pj, VLOAD(vr), o0);
        if (nvec >= 4) {
            o1 = VFMA(pj, VLOAD(vr + VL), o1);
            o2 = VFMA(pj, VLOAD(vr + 2 * VL), o2);
            o3 = VFMA(pj, VLOAD(vr + 3 * VL), o3);
        }
        if (nvec == 8) {
            o4 = VFMA(pj, VLOAD(vr + 4 * VL), o4);
            o5 = VFMA(pj, VLOAD(vr + 5 * VL), o5);
            o6 = VFMA(pj, VLOAD(vr + 6 * VL), o6);
            o7 = VFMA(pj, VLOAD(vr + 7 * VL), o7);
        }
    }
    VSTORE(out, VMUL(o0, VSET1(inv)));
    if (nvec >= 4) {
        VSTORE(out + VL, VMUL(o1, VSET1(inv)));
        VSTORE(out + 2 * VL, VMUL(o2, VSET1(inv)));
        VSTORE(out + 3 * VL, VMUL(o3, VSET1(inv)));
    }
    if (nvec == 8) {
        VSTORE(out + 4 * VL, VMUL(o4, VSET1(inv)));
        VSTORE(out + 5 * VL, VMUL(o5, VSET1(inv)));
        VSTORE(out + 6 * VL, VMUL(o6, VSET1(inv)));
        VSTORE(out + 7 * VL, VMUL(o7, VSET1(inv)));
    }
}

/* One lane past the whole vectors: inv * (p_0 v_0 + p_1 v_1 + ...), j ascending (v_j
** at v + j*vs). */
static inline float KFN(pv_lane)(const float *p, const float *v, size_t vs, int n_keys,
                                 float inv) {
    float o = 0.0f;
    for (int j = 0; j < n_keys; j++) o += p[j] * v[(size_t)j * vs];
    return o * inv;
}

/* In place over p[0, n_keys): p = exp(scale * p - max), one formula for every key
** (the last vector padded: p needs n_keys + VL floats); returns 1 / sum p, the sum
** one vector chain over whole vectors + the rest in order. */
static inline float KFN(softmax_row)(float *p, int n_keys, float scale) {
    float mx = -INFINITY, sum;
    int j;
    V vsum = VZERO(), vmx;
    for (j = 0; j < n_keys; j++) {
        p[j] *= scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    vmx = VSET1(mx);
    memset(p + n_keys, 0, VL * sizeof(float)); /* the padding lanes: defined values */
    for (j = 0; j < n_keys; j += VL) VSTORE(p + j, KFN(vexp)(VSUB(VLOAD(p + j), vmx)));
    for (j = 0; j + VL <= n_keys; j += VL) vsum = VADD(vsum, VLOAD(p + j));
    sum = VHSUM(vsum);
    for (; j < n_keys; j++) sum += p[j];
    return 1.0f / sum;
}

static void KFN(attn_row)(const float *q, const float *k, size_t ks, const float *v,
                          size_t vs, int n_keys, int hd, float scale, float *p, float *out) {
    float inv;
    int j = 0, l;
    for (; j + 4 <= n_keys; j += 4) KFN(dot4)(q, k + (size_t)j * ks, ks, hd, p + j);
    for (; j < n_keys; j++) p[j] = KFN(dot)(q, k + (size_t)j * ks, hd);
    inv = KFN(softmax_row)(p, n_keys, scale);
    /* out = (sum_j p_j v_j) * inv: per lane one chain, j ascending; vectors over l
    ** in groups of 8, 4 and 1 (independent chains), then the tail of hd */
    l = 0;
    for (; l + 8 * VL <= hd; l += 8 * VL) KFN(pv)(p, v + l, vs, n_keys, 8, inv, out + l);
    for (; l + 4 * VL <= hd; l += 4 * VL) KFN(pv)(p, v + l, vs, n_keys, 4, inv, out + l);
    for (; l + VL <= hd; l += VL) KFN(pv)(p, v + l, vs, n_keys, 1, inv, out + l);
    for (; l < hd; l++) out[l] = KFN(pv_lane)(p, v + l, vs, n_keys, inv);
}

/* Three query rows (q + i*qs) against four keys: p[i][j] as KFN(dot4) gives it, each
** key's vector loaded once for the three rows (12 chains). */
static inline void KFN(dot3x4)(const float *q, size_t qs, const float *k, size_t ks, int hd,
                               float *p, size_t ps) {
    V a00 = VZERO(), a01 = VZERO(), a02 = VZERO(), a03 = VZERO(), a10 = VZERO(),
      a11 = VZERO(), a12 = VZERO(), a13 = VZERO(), a20 = VZERO(), a21 = VZERO(),
      a22 = VZERO(), a23 = VZERO();
    const float *q0 = q, *q1 = q + qs, *q2 = q + 2 * qs;
    const float *k0 = k, *k1 = k + ks, *k2 = k + 2 * ks, *k3 = k + 3 * ks;
    int l = 0;
    for (; l + VL <= hd; l += VL) {
        V x0 = VLOAD(q0 + l), x1 = VLOAD(q1 + l), x2 = VLOAD(q2 + l), kv;
        kv = VLOAD(k0 + l);
        a00 = VFMA(x0, kv, a00), a10 = VFMA(x1, kv, a10), a20 = VFMA(x2, kv, a20);
        kv = VLOAD(k1 + l);
        a01 = VFMA(x0, kv, a01), a11 = VFMA(x1, kv, a11), a21 = VFMA(x2, kv, a21);
        kv = VLOAD(k2 + l);
        a02 = VFMA(x0, kv, a02), a12 = VFMA(x1, kv, a12), a22 = VFMA(x2, kv, a22);
        kv = VLOAD(k3 + l);
        a03 = VFMA(x0, kv, a03), a13 = VFMA(x1, kv, a13), a23 = VFMA(x2, kv, a23);
    }
    p[0] = KFN(dot_tail)(q0, k0, l, hd, VHSUM(a00));
    p[1] = KFN(dot_tail)(q0, k1, l, hd, VHSUM(a01));
    p[2] = KFN(dot_tail)(q0, k2, l, hd, VHSUM(a02));
    p[3] = KFN(dot_tail)(q0, k3, l, hd, VHSUM(a03));
    p[ps] = KFN(dot_tail)(q1, k0, l, hd, VHSUM(a10));
    p[ps + 1] = KFN(dot_tail)(q1, k1, l, hd, VHSUM(a11));
    p[ps + 2] = KFN(dot_tail)(q1, k2, l, hd, VHSUM(a12));
    p[ps + 3] = KFN(dot_tail)(q1, k3, l, hd, VHSUM(a13));
    p[2 * ps] = KFN(dot_tail)(q2, k0, l, hd, VHSUM(a20));
    p[2 * ps + 1] = KFN(dot_tail)(q2, k1, l, hd, VHSUM(a21));
    p[2 * ps + 2] = KFN(dot_tail)(q2, k2, l, hd, VHSUM(a22));
    p[2 * ps + 3] = KFN(dot_tail)(q2, k3, l, hd, VHSUM(a23));
}

/* out_i[u*VL ..] = inv_i * sum_j p_i[j] v_j[u*VL ..] for three rows (p_i at p + i*ps,
** out_i at out + i*os), u < nvec (4 or 1): each lane's chain as in KFN(pv), each
** value vector loaded once for the three rows. */
static inline void KFN(pv3)(const float *p, size_t ps, const float *v, size_t vs, int n_keys,
                            int nvec, const float inv[3], float *out, size_t os) {
    V o00 = VZERO(), o01 = VZERO(), o02 = VZERO(), o03 = VZERO(), o10 = VZERO(),
      o11 = VZERO(), o12 = VZERO(), o13 = VZERO(), o20 = VZERO(), o21 = VZERO(),
      o22 = VZERO(), o23 = VZERO();
    for (int j = 0; j < n_keys; j++) {
        const float *vr = v + (size_t)j * vs;
        V p0 = VSET1(p[j]), p1 = VSET1(p[ps + j]), p2 = VSET1(p[2 * ps + j]), x;
        x = VLOAD(vr);
        o00 = VFMA(p0, x, o00), o10 = VFMA(p1, x, o10), o20 = VFMA(p2, x, o20);
        if (nvec == 4) {
            x = VLOAD(vr + VL);
            o01 = VFMA(p0, x, o01), o11 = VFMA(p1, x, o11), o21 = VFMA(p2, x, o21);
            x = VLOAD(vr + 2 * VL);
            o02 = VFMA(p0, x, o02), o12 = VFMA(p1, x, o12), o22 = VFMA(p2, x, o22);
            x = VLOAD(vr + 3 * VL);
            o03 = VFMA(p0, x, o03), o13 = VFMA(p1, x, o13), o23 = VFMA(p2, x, o23);
        }
    }
    VSTORE(out, VMUL(o00, VSET1(inv[0])));
    VSTORE(out + os, VMUL(o10, VSET1(inv[1])));
    VSTORE(out + 2 * os, VMUL(o20, VSET1(inv[2])));
    if (nvec == 4) {
        VSTORE(out + VL, VMUL(o01, VSET1(inv[0])));
        VSTORE(out + 2 * VL, VMUL(o02, VSET1(inv[0])));
        VSTORE(out + 3 * VL, VMUL(o03, VSET1(inv[0])));
        VSTORE(out + os + VL, VMUL(o11, VSET1(inv[1])));
        VSTORE(out + os + 2 * VL, VMUL(o12, VSET1(inv[1])));
        VSTORE(out + os + 3 * VL, VMUL(o13, VSET1(inv[1])));
        VSTORE(out + 2 * os + VL, VMUL(o21, VSET1(inv[2])));
        VSTORE(out + 2 * os + 2 * VL, VMUL(o22, VSET1(inv[2])));
        VSTORE(out + 2 * os + 3 * VL, VMUL(o23, VSET1(inv[2])));
    }
}

static void KFN(attn_rows3)(const float *q, size_t qs, const float *k, size_t ks, const float *v,
                            size_t vs, int n_keys, int hd, float scale, float *p, float *out,
                            size_t os) {
    const size_t ps = (size_t)n_keys + VL;
    float inv[3];
    int j = 0, l = 0;
    for (; j + 4 <= n_keys; j += 4) KFN(dot3x4)(q, qs, k + (size_t)j * ks, ks, hd, p + j, ps);
    for (; j < n_keys; j++)
        for (int i = 0; i < 3; i++) p[i * ps + j] = KFN(dot)(q + i * qs, k + (size_t)j * ks, hd);
    for (int i = 0; i < 3; i++) inv[i] = KFN(softmax_row)(p + i * ps, n_keys, scale);
    for (; l + 4 * VL <= hd; l += 4 * VL) KFN(pv3)(p, ps, v + l, vs, n_keys, 4, inv, out + l, os);
    for (; l + VL <= hd; l += VL) KFN(pv3)(p, ps, v + l, vs, n_keys, 1, inv, out + l, os);
    for (; l < hd; l++)
        for (int i = 0; i < 3; i++)
            out[i * os + l] = KFN(pv_lane)(p + i * ps, v + l, vs, n_keys, inv[i]);
}

/* ---- peak FMA rate ------------------------------------------------------------- */

/* iters x 12 independent vector FMA chains (more than latency x FMA ports on every
** x86 core this targets); returns a value of the chains so none is optimized away.
** The chains start from different values: from equal ones GCC proved them equal and
** kept one chain (latency-bound, counted as 12: a peak 1.5x too high on Zen 3). d
** depends on iters: with constants, every start value being a fixed point of
** a*m + d in fp32, GCC folded the portable path's loop away entirely. */
static float KFN(fma_loop)(long iters) {
    V a0 = VSET1(1.0f), a1 = VSET1(1.01f), a2 = VSET1(1.02f), a3 = VSET1(1.03f),
      a4 = VSET1(1.04f), a5 = VSET1(1.05f), a6 = VSET1(1.06f), a7 = VSET1(1.07f),
      a8 = VSET1(1.08f), a9 = VSET1(1.09f), a10 = VSET1(1.10f), a11 = VSET1(1.11f);
    const V m = VSET1(0.9999999f), d = VSET1(1e-7f * (float)(1 + (iters & 1)));
    float out[VL];
    for (long i = 0; i < iters; i++) {
        a0 = VFMA(a0, m, d), a1 = VFMA(a1, m, d), a2 = VFMA(a2, m, d), a3 = VFMA(a3, m, d);
        a4 = VFMA(a4, m, d), a5 = VFMA(a5, m, d), a6 = VFMA(a6, m, d), a7 = VFMA(a7, m, d);
        a8 = VFMA(a8, m, d), a9 = VFMA(a9, m, d), a10 = VFMA(a10, m, d), a11 = VFMA(a11, m, d);
    }
    a0 = VADD(VADD(VADD(a0, a1), VADD(a2, a3)), VADD(VADD(a4, a5), VADD(a6, a7)));
    VSTORE(out, VADD(a0, VADD(VADD(a8, a9), VADD(a10, a11))));
    return out[0];
}

const cdb_gemm_kern KFN(cdb_gemm_kern) = {
    KFN_ISA_NAME, VL, 2 * VL, KFN(tile), KFN(row4), KFN(pack_a), KFN(act), KFN(attn_row),
    KFN(attn_rows3), KFN(fma_loop),
};
