/*
** gemm_int.h: private to kernels/cpu/: clipdb's own fp32 GEMM and the vector
** kernels the optimized CPU backend (backend_cpu.c) builds its ops from.
**
** Why its own GEMM (not OpenBLAS): a stored vector must not depend on what else
** was in its batch or on the thread count. OpenBLAS picks its kernels, blocking
** and K splits from m, n, k and the threads (and from its CPU detection, which
** older builds get wrong on new processors), so the same row's sums ran in
** different orders in different batches. Here every output element is computed
** by the same arithmetic whatever m, its row's position, the thread count and
** the chunking:
**   - K is cut into fixed chunks of CDB_GEMM_KC (a constant, never derived from
**     m, n or the threads). Chunk c's partial sum P_c is one fp32 FMA chain,
**     k ascending, starting from 0, held in a register of one micro-tile.
**   - y = act((((init + P_0) + P_1) + ...) with init = (accumulate ? y : 0) +
**     (bias ? bias[j] : 0), added in that order, then the activation (one vector
**     formula for every element: edge tiles run the full tile on zero-padded
**     copies and store only their valid part).
**   - Threads split rows (blocks of CDB_GEMM_MC) and columns (whole panels) only.
** Blocked summation also bounds the rounding error by ~(KC + K/KC) ulps of
** sum |x w| instead of K.
**
** Layouts: W [n, k] (nn.Linear) is packed once, at load, into column panels of
** nr = 2 vectors: panel p holds W[p*nr + c, kk] at (p*k + kk)*nr + c, zero rows
** padding the last panel (cdb_gemm_pack_b). X is packed per call, per block, into
** micro-panels of CDB_GEMM_MR rows (zero-padded). nr depends on the ISA chosen
** at run time (dispatch.c: fixed for the process), so a packed matrix is only
** valid for the kernel table it was packed for (it records nr).
*/
#ifndef CDB_KERNELS_CPU_GEMM_INT_H
#define CDB_KERNELS_CPU_GEMM_INT_H

#include <stddef.h>

#include "kernels/kernels.h"

#define CDB_GEMM_MR 6     /* rows of a micro-tile */
#define CDB_GEMM_KC 256   /* the fixed K chunk (precision and invariance contract) */
#define CDB_GEMM_MC 144   /* rows of a packed X block (a multiple of MR): L2-sized */
#define CDB_GEMM_NR_MAX 32

/* tile() flags */
#define CDB_GEMM_FIRST 1 /* chunk 0: C = init + P (init from bias and LOADC) */
#define CDB_GEMM_LOADC 2 /* with FIRST: init includes C's current value (accumulate) */
#define CDB_GEMM_LAST 4  /* the last chunk: apply the activation before storing */
#define CDB_GEMM_STREAM 8 /* W is read once from memory (few rows): prefetch it ahead */

/* One ISA's kernels (gemm_kern.h instantiated by gemm_avx512.c, gemm_avx2.c and
** gemm_generic.c). All are reentrant and allocation-free. */
typedef struct cdb_gemm_kern {
    const char *isa; /* "avx512", "avx2", "scalar" */
    int vl;          /* fp32 lanes of a vector */
    int nr;          /* panel width of packed W: 2 * vl */
    /* The MR x nr tile c (rows ldc floats apart, every element valid):
    ** P[r][j] = sum_{kk < kc} a[kk*MR + r] * b[kk*nr + j] (one FMA chain, kk
    ** ascending, from 0); FIRST: c = ((LOADC ? c : 0) + (bias ? bias[j] : 0)) + P,
    ** else c = c + P; LAST: c = act(c). bias: nr values (or NULL). */
    void (*tile)(int kc, const float *a, const float *b, float *c, size_t ldc,
                 const float *bias, int flags, cdb_k_act act);
    /* One row of X (a[kk*MR], kk < kc: a row of a packed micro-panel) against 4
    ** whole panels (b, b + bs, b + 2bs, b + 3bs: their kc slices): c[0, 4*nr) gets
    ** exactly what tile() gives that row (the rows of a partial micro-panel, without
    ** the padding rows' work). bias: 4*nr values (or NULL). */
    void (*row4)(int kc, const float *a, const float *b, size_t bs, float *c,
                 const float *bias, int flags, cdb_k_act act);
    /* X rows [0, mb) (ldx apart) x columns [0, kc) into micro-panels of MR rows:
    ** element (r, kk) of panel ip at (ip*kc + kk)*MR + r; rows past mb are zero
    ** (a plain copy: no arithmetic). */
    void (*pack_a)(const float *x, size_t ldx, int mb, int kc, float *dst);
    /* In place: y[i] = act(y[i]) for i < n, the tile's formula for every element. */
    void (*act)(float *y, size_t n, cdb_k_act act);
    /* One attention query row: p[j] = scale * q.k_j for j < n_keys (k_j at
    ** k + j*kstride), softmax over j (fp32, max subtracted), out[l] = sum_j p_j
    ** v_j[l] (v_j at v + j*vstride), l < hd. Every sum in a fixed order that
    ** depends on hd and n_keys only. p: scratch of >= n_keys + vl floats. */
    void (*attn_row)(const float *q, const float *k, size_t kstride, const float *v,
                     size_t vstride, int n_keys, int hd, float scale, float *p, float *out);
    /* Three query rows at once (q + i*qstride against the same keys and values, into
    ** out + i*ostride, i < 3): each row's output bit for bit what attn_row gives it,
    ** the key and value vectors loaded once for the three. p: scratch of
    ** 3 * (n_keys + vl) floats. */
    void (*attn_rows3)(const float *q, size_t qstride, const float *k, size_t kstride,
                       const float *v, size_t vstride, int n_keys, int hd, float scale, float *p,
                       float *out, size_t ostride);
    /* iters x 12 independent vector FMAs (the peak-rate probe of benchmarks). */
    float (*fma_loop)(long iters);
} cdb_gemm_kern;

extern const cdb_gemm_kern cdb_gemm_kern_generic;
#if CDB_HAVE_AVX2
extern const cdb_gemm_kern cdb_gemm_kern_avx2;
#endif
#if CDB_HAVE_AVX512
extern const cdb_gemm_kern cdb_gemm_kern_avx512;
#endif

/* The kernels for cdb_k_cpu_isa() (fixed for the process). */
const cdb_gemm_kern *cdb_gemm_kern_get(void);
/* The kernels of one path, or NULL when it is not built or above cdb_k_cpu_isa()
** (tests run every path the machine can). */
const cdb_gemm_kern *cdb_gemm_kern_for(cdb_k_isa isa);

/* Floats of W [n, k] packed in panels of nr. */
size_t cdb_gemm_packed_floats(int n, int k, int nr);
/* Packs W [n, k] (n rows of k elements of dt, any alignment) into dst
** (cdb_gemm_packed_floats(n, k, nr) floats). row: scratch of k floats. */
void cdb_gemm_pack_b(const void *w, cdb_k_dtype dt, int n, int k, int nr, float *row,
                     float *dst /* OUT */);
/* The inverse for rows [0, n): W [n, k] row-major fp32 (buf_download of a packed
** matrix). */
void cdb_gemm_unpack_b(const float *packed, int n, int k, int nr, float *w /* OUT */);

/* y [m, n] = act(x [m, k] . W^T + bias) (+ y when accumulate), W packed for K (nr
** == K->nr). bias: n floats or NULL. n_threads >= 1 (OpenMP). CDB_NOMEM when the
** per-thread X block cannot be allocated (y is then partly written). */
cdb_status cdb_gemm_run(const cdb_gemm_kern *K, const float *x, const float *wpacked,
                        const float *bias, float *y, int m, int n, int k, cdb_k_act act,
                        int accumulate, int n_threads);

#endif
