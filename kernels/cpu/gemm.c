/*
** gemm.c: the driver of clipdb's fp32 GEMM (contract and invariance rules:
** gemm_int.h): W packing, X block packing, the loop nest and the OpenMP split.
** ISA-independent; the micro-tile and the epilogue are the kernel table's.
**
** Loop nest of one work item (a block of up to MC rows x a range of whole
** panels): for each K chunk, pack the X block (L2), then for each quad of panels,
** each panel's KC slice (L1) is swept by the block's micro-panels, the rows of a
** partial last one by row4 (work_item; few rows: X packed once, K chunks inside
** the quad loop). Work items are (row block, panel range) pairs handed out
** dynamically: equal row blocks, a multiple of the threads, cut into panel ranges
** until there are 8 items a thread, or a range is one quad (a text query on 2
** threads: one row block, 16 panel ranges).
** None of these choices changes any element's arithmetic.
*/
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_int.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/gemm_int.h"

const cdb_gemm_kern *cdb_gemm_kern_get(void) {
    switch (cdb_k_cpu_isa()) {
#if CDB_HAVE_AVX512
    case CDB_K_ISA_AVX512: return &cdb_gemm_kern_avx512;
#endif
#if CDB_HAVE_AVX2
    case CDB_K_ISA_AVX2: return &cdb_gemm_kern_avx2;
#endif
    default: return &cdb_gemm_kern_generic;
    }
}

const cdb_gemm_kern *cdb_gemm_kern_for(cdb_k_isa isa) {
    if (isa > cdb_k_cpu_isa()) return NULL; /* the CPU (or CLIPDB_ISA) rules it out */
    switch (isa) {
    case CDB_K_ISA_SCALAR: return &cdb_gemm_kern_generic;
#if CDB_HAVE_AVX2
    case CDB_K_ISA_AVX2: return &cdb_gemm_kern_avx2;
#endif
#if CDB_HAVE_AVX512
    case CDB_K_ISA_AVX512: return &cdb_gemm_kern_avx512;
#endif
    default: return NULL;
    }
}

double cdb_k_cpu_fma_peak_gflops(int n_threads, double seconds) {
    const cdb_gemm_kern *K = cdb_gemm_kern_get();
    const long chunk = 1L << 20; /* iterations between clock reads */
    int64_t t0 = 0, t1 = 0;
    long iters = 0;
    float sink = 0;
    if (n_threads < 1) n_threads = 1;
    /* One interval common to all threads (barriers at both ends): a thread started
    ** late or descheduled lowers the rate instead of adding a private one to it. */
#pragma omp parallel num_threads(n_threads) reduction(+ : iters) reduction(+ : sink)
    {
#pragma omp single
        t0 = cdb_now_ns();
        do {
            sink += K->fma_loop(chunk);
            iters += chunk;
        } while ((double)(cdb_now_ns() - t0) * 1e-9 < seconds);
#pragma omp barrier
#pragma omp single
        t1 = cdb_now_ns();
    }
    if (t1 <= t0) return 0;
    /* sink (> 0) is read so that no loop can be optimized away */
    return (double)iters * 12 * K->vl * 2 / ((double)(t1 - t0) * 1e-9) * 1e-9 + (sink < 0);
}

size_t cdb_gemm_packed_floats(int n, int k, int nr) {
    return (size_t)((n + nr - 1) / nr) * (size_t)nr * (size_t)k;
}

void cdb_gemm_pack_b(const void *w, cdb_k_dtype dt, int n, int k, int nr, float *row,
                     float *dst) {
    size_t esz = dt == CDB_K_F32 ? 4 : 2;
    int n_pan = (n + nr - 1) / nr;
    for (int p = 0; p < n_pan; p++) {
        float *pan = dst + (size_t)p * k * nr;
        for (int c = 0; c < nr; c++) {
            int j = p * nr + c;
            if (j >= n) {
                for (int kk = 0; kk < k; kk++) pan[(size_t)kk * nr + c] = 0.0f;
                continue;
            }
            cdb_k_cpu_convert_to_f32((const unsigned char *)w + (size_t)j * k * esz, dt, row,
                                     (size_t)k);
            for (int kk = 0; kk < k; kk++) pan[(size_t)kk * nr + c] = row[kk];
        }
    }
}

void cdb_gemm_unpack_b(const float *packed, int n, int k, int nr, float *w) {
    for (int j = 0; j < n; j++) {
        const float *pan = packed + (size_t)(j / nr) * k * nr + j % nr;
        for (int kk = 0; kk < k; kk++) w[(size_t)j * k + kk] = pan[(size_t)kk * nr];
    }
}

/* One tile of mr <= MR valid rows and nv <= nr valid columns at c. A partial tile
** runs the same full tile on a zero-padded copy (and a padded bias), so each of
** its elements gets exactly the arithmetic it would get inside a full tile. */
static void run_tile(const cdb_gemm_kern *K, int kc, const float *a, const float *b, float *c,
                     size_t ldc, int mr, int nv, const float *bias, int flags, cdb_k_act act) {
    float tmp[CDB_GEMM_MR * CDB_GEMM_NR_MAX], bpad[CDB_GEMM_NR_MAX];
    int nr = K->nr, loadc = !(flags & CDB_GEMM_FIRST) || (flags & CDB_GEMM_LOADC);
    if (mr == CDB_GEMM_MR && nv == nr) {
        K->tile(kc, a, b, c, ldc, bias, flags, act);
        return;
    }
    memset(tmp, 0, sizeof tmp);
    if (loadc)
        for (int r = 0; r < mr; r++) memcpy(tmp + r * nr, c + r * ldc, (size_t)nv * sizeof(float));
    if (bias && nv < nr) {
        memset(bpad, 0, sizeof bpad);
        memcpy(bpad, bias, (size_t)nv * sizeof(float));
        bias = bpad;
    }
    K->tile(kc, a, b, tmp, (size_t)nr, bias, flags, act);
    for (int r = 0; r < mr; r++) memcpy(c + r * ldc, tmp + r * nr, (size_t)nv * sizeof(float));
}

typedef struct gemm_job {
    const cdb_gemm_kern *K;
    const float *x, *w, *bias;
    float *y;
    int m, n, k;
    cdb_k_act act;
    int accumulate;
    int stream; /* one row block (few rows: a text query): W streams from memory once */
} gemm_job;

/* One K chunk [k0, k0 + kc) of rows [i0, i0 + mb) x panels [pq, pe) (a quad or the
** last panels), ap: the chunk's packed X block. */
static void chunk_quad(const gemm_job *g, int i0, int mb, int k0, int kc, int pq, int pe,
                       const float *ap, int stream) {
    const int nr = g->K->nr, MR = CDB_GEMM_MR, n_full = mb / MR, rem = mb % MR;
    const size_t ldc = (size_t)g->n;
    int flags = (k0 == 0 ? CDB_GEMM_FIRST : 0) | (g->accumulate ? CDB_GEMM_LOADC : 0) |
                (k0 + kc == g->k ? CDB_GEMM_LAST : 0) | (stream ? CDB_GEMM_STREAM : 0);
    /* The next panel's slice at this K chunk is fetched into L2 while this one is
    ** swept, a part of it before each tile: the sweep's first tile otherwise waits on
    ** every line of its B from L3 or memory (3% of a ViT-B/32 GEMM at batch 32). At
    ** the end of a quad range it may be a slice another item sweeps, or none soon
    ** (the cost of a few wasted lines). A streamed W (few rows) is left to
    ** CDB_GEMM_STREAM, which the AVX2 tile implements. */
    const int n_pan = (g->n + nr - 1) / nr;
    const int lines = (int)((size_t)kc * nr * sizeof(float) / 64);
    const int per_tile = n_full ? (lines + n_full - 1) / n_full : 0;
    for (int p = pq; p < pe; p++) {
        int j0 = p * nr, nv = g->n - j0 < nr ? g->n - j0 : nr;
        const float *bp = g->w + ((size_t)p * g->k + k0) * nr;
        const char *bnext = p + 1 < n_pan && !stream ? (const char *)(bp + (size_t)g->k * nr)
                                                     : NULL;
        for (int ip = 0; ip < n_full; ip++) {
            if (bnext)
                for (int l = ip * per_tile; l < (ip + 1) * per_tile && l < lines; l++)
                    __builtin_prefetch(bnext + (size_t)l * 64, 0, 2);
            run_tile(g->K, kc, ap + (size_t)ip * kc * MR, bp,
                     g->y + (size_t)(i0 + ip * MR) * ldc + j0, ldc, MR, nv,
                     g->bias ? g->bias + j0 : NULL, flags, g->act);
        }
    }
    if (!rem) return;
    ap += (size_t)n_full * kc * MR;
    if (pe - pq == 4 && pe * nr <= g->n) { /* a whole quad: row by row */
        int j0 = pq * nr;
        for (int r = 0; r < rem; r++)
            g->K->row4(kc, ap + r, g->w + ((size_t)pq * g->k + k0) * nr, (size_t)g->k * nr,
                       g->y + (size_t)(i0 + n_full * MR + r) * ldc + j0,
                       g->bias ? g->bias + j0 : NULL, flags, g->act);
        return;
    }
    for (int p = pq; p < pe; p++) { /* the last panels: the padded tile */
        int j0 = p * nr, nv = g->n - j0 < nr ? g->n - j0 : nr;
        run_tile(g->K, kc, ap, g->w + ((size_t)p * g->k + k0) * nr,
                 g->y + (size_t)(i0 + n_full * MR) * ldc + j0, ldc, rem, nv,
                 g->bias ? g->bias + j0 : NULL, flags, g->act);
    }
}

/* Rows [i0, i0 + mb) x panels [p0, p1). abuf: MC * KC floats. Panels go by quads;
** each panel's KC slice (L1) is swept by the block's full micro-panels (L2), then
** the rows of a partial last micro-panel go one by one against the quad (row4: no
** work on padding rows; a text query's 7 rows are one micro-panel and one row).
** When the X block's every K chunk fits abuf (few rows: a text query), X is packed
** once and each quad runs all its chunks in turn (its panels read as 4 sequential
** streams from memory); otherwise per chunk, the X block packed for it, all quads. */
/* X rows [i0, i0 + mb) packed whole, chunk after chunk, into abuf (rows * k floats). */
static void pack_x_whole(const gemm_job *g, int i0, int mb, float *abuf) {
    const int MR = CDB_GEMM_MR, KC = CDB_GEMM_KC;
    const size_t rows = (size_t)(mb + MR - 1) / MR * MR;
    for (int k0 = 0; k0 < g->k; k0 += KC) {
        int kc = g->k - k0 < KC ? g->k - k0 : KC;
        g->K->pack_a(g->x + (size_t)i0 * g->k + k0, (size_t)g->k, mb, kc, abuf + rows * k0);
    }
}

/* xpacked: every row of X packed whole already (pack_x_whole of rows [0, m), shared by
** the items of a GEMM with one row block), else NULL. */
static void work_item(const gemm_job *g, int i0, int mb, int p0, int p1, float *abuf,
                      const float *xpacked) {
    const int MR = CDB_GEMM_MR, KC = CDB_GEMM_KC;
    const size_t rows = (size_t)(mb + MR - 1) / MR * MR;
    if (rows * (size_t)g->k <= (size_t)CDB_GEMM_MC * KC) {
        if (xpacked) abuf = (float *)xpacked;
        else pack_x_whole(g, i0, mb, abuf);
        for (int pq = p0; pq < p1; pq += 4)
            for (int k0 = 0; k0 < g->k; k0 += KC)
                chunk_quad(g, i0, mb, k0, g->k - k0 < KC ? g->k - k0 : KC, pq,
                           pq + 4 < p1 ? pq + 4 : p1, abuf + rows * k0, g->stream);
        return;
    }
    for (int k0 = 0; k0 < g->k; k0 += KC) {
        int kc = g->k - k0 < KC ? g->k - k0 : KC;
        g->K->pack_a(g->x + (size_t)i0 * g->k + k0, (size_t)g->k, mb, kc, abuf);
        for (int pq = p0; pq < p1; pq += 4)
            chunk_quad(g, i0, mb, k0, kc, pq, pq + 4 < p1 ? pq + 4 : p1, abuf, 0);
    }
}

cdb_status cdb_gemm_run(const cdb_gemm_kern *K, const float *x, const float *wpacked,
                        const float *bias, float *y, int m, int n, int k, cdb_k_act act,
                        int accumulate, int n_threads) {
    gemm_job g = {K, x, wpacked, bias, y, m, n, k, act, accumulate, 0};
    const int MC = CDB_GEMM_MC;
    int n_pan = (n + K->nr - 1) / K->nr, n_quads = (n_pan + 3) / 4;
    const int MR = CDB_GEMM_MR, nmp = (m + MR - 1) / MR, mp_max = MC / MR;
    int n_mb = (nmp + mp_max - 1) / mp_max, n_split = 1, n_items;
    int nt = n_threads > 0 ? n_threads : 1, fail = 0;
    double flops = 2.0 * m * n * k;
    if (m <= 0) return CDB_OK;
    /* a fork/join costs more than such a product, unless its weights come from
    ** memory (a text query: 7 rows against 1 MB matrices) */
    if (flops < 4e6 && (size_t)n * k < ((size_t)1 << 17)) nt = 1;
    /* Row blocks of equal micro-panel counts (to one), as many as a multiple of the
    ** threads when there are more blocks than threads, each cut into panel ranges
    ** (whole quads, work_item) until there are 8 items a thread: the last items (and
    ** a thread descheduled on a shared machine) then leave the others little to wait
    ** for. At batch 32 of ViT-B/32 on 2 threads (12 row blocks, each cut in two) the
    ** image tower ran 7% faster (median of 20 paired passes) than with whole rows,
    ** although each X block is then packed once per range. */
    if (nt > 1 && n_mb >= 2 * nt) n_mb = (n_mb + nt - 1) / nt * nt;
    while (nt > 1 && n_mb * n_split < 8 * nt && n_split < n_quads) n_split++;
    n_items = n_mb * n_split;
    if (nt > n_items) nt = n_items;
    g.stream = n_mb == 1;
    /* One row block split into panel ranges (a text query): X is packed once here for
    ** all of them, not once per item (the same bytes either way). */
    float *xpacked = NULL;
    if (n_mb == 1 && n_split > 1 && (size_t)nmp * MR * (size_t)k <= (size_t)MC * CDB_GEMM_KC) {
        if (!(xpacked = cdb_k_cpu_alloc_f32((size_t)nmp * MR * (size_t)k)))
            return cdb_seterr(CDB_NOMEM, "gemm: X block scratch");
        pack_x_whole(&g, 0, m, xpacked);
    }
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *abuf = xpacked ? NULL : cdb_k_cpu_alloc_f32((size_t)MC * CDB_GEMM_KC);
        if (!abuf && !xpacked) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int it = 0; it < n_items; it++) {
            int ib = it / n_split, s = it % n_split;
            int i0 = MR * (int)((long)nmp * ib / n_mb), i1 = MR * (int)((long)nmp * (ib + 1) / n_mb);
            int p0 = 4 * (int)((long)n_quads * s / n_split);
            int p1 = 4 * (int)((long)n_quads * (s + 1) / n_split);
            if (p1 > n_pan) p1 = n_pan;
            if (i1 > m) i1 = m;
            if ((abuf || xpacked) && p1 > p0 && i1 > i0)
                work_item(&g, i0, i1 - i0, p0, p1, abuf, xpacked);
        }
        free(abuf);
    }
    free(xpacked);
    if (fail) return cdb_seterr(CDB_NOMEM, "gemm: X block scratch");
    return CDB_OK;
}
