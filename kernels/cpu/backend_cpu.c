/*
** backend_cpu.c: the optimized CPU backend of the BACKEND interface (kernels.h):
** fp32 storage, clipdb's own GEMM (gemm.c over the micro-kernels of gemm_kern.h,
** chosen by cdb_k_cpu_isa(); no BLAS on this path) and vector kernels, OpenMP
** loops for the row-wise ops. Matrices uploaded with their shape (matrix_upload)
** are widened (F16/BF16) and packed into the GEMM's column panels once, at load;
** other F32 weights that are borrowable (mmapped, 4-byte aligned) are used in
** place, F16/BF16 widened once at upload, except token tables (CDB_K_W_TABLE):
** those stay F16/BF16 (in place when borrowable) and lookup_add widens the rows it reads.
**
** Batch and thread invariance (kernels.h): every op computes each output row with
** arithmetic that depends on that row's data and the op's row-independent sizes
** only. GEMM: gemm_int.h. Attention: per query row (attn_row, or attn_rows3 for
** three rows with each one's arithmetic the same), its sums in an order fixed by
** head_dim and its own key count; attention_q runs the same per-row kernel.
** LayerNorm: per row, fixed order. Threads split rows, heads and columns, never a
** reduction.
**
** The ModifiedResNet ops (im2col, avgpool, prepend_mean_add, attention_q) are OpenMP
** loops over output rows; their convolutions are the gemm above.
*/
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/cpu/backend_int.h"
#include "kernels/cpu/cpu_int.h"
#include "kernels/cpu/gemm_int.h"

typedef struct cpu_backend {
    cdb_k_backend base;
    int n_threads;
    const cdb_gemm_kern *K; /* fixed at creation: packed matrices are laid out for it */
    char layout[48];        /* "cpu-panels-nr<nr>-<isa>": cdb_k_matrix_layout */
} cpu_backend;

static atomic_size_t g_packed_bytes;

size_t cdb_k_cpu_packed_bytes(void) { return atomic_load(&g_packed_bytes); }
const char *cdb_k_cpu_gemm_path(void) { return cdb_gemm_kern_get()->isa; }

static const cdb_gemm_kern *kern(const cdb_k_backend *be) { return ((const cpu_backend *)be)->K; }

static int nthreads(const cdb_k_backend *be) { return ((const cpu_backend *)be)->n_threads; }

/* 64-byte aligned; a buffer of 4 MiB or more (packed weights, a batch's activations)
** is 2 MiB aligned and its whole 2 MiB pages are offered to transparent huge pages
** (MADV_HUGEPAGE: used where the system's THP mode is "madvise" or "always"). A GEMM
** streams its packed W through far fewer TLB entries, and a batch's fresh scratch
** costs ~40 page faults instead of ~20,000 (ViT-B/32, batch 32): the tower ran 1.5%
** faster (median of 20 paired passes). The size is not rounded up, so no memory is
** added: the tail past the last whole 2 MiB page keeps small pages. */
float *cdb_k_cpu_alloc_f32(size_t n) {
    void *p = NULL;
    size_t bytes = (n ? n : 1) * sizeof(float);
    const size_t huge = (size_t)2 << 20;
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes >= 2 * huge) {
        if (posix_memalign(&p, huge, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, bytes & ~(huge - 1), MADV_HUGEPAGE); /* advice only */
#endif
        return (float *)p;
    }
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return (float *)p;
}

/* ---- buffers --------------------------------------------------------------- */

cdb_status cdb_k_cpu_buf_own(float *data, size_t n, cdb_k_buf **out) {
    cdb_k_buf *b = data ? calloc(1, sizeof *b) : NULL;
    *out = NULL;
    if (!b) {
        free(data);
        return cdb_seterr(CDB_NOMEM, "backend buffer of %zu floats", n);
    }
    b->data = data;
    b->n = n;
    b->owned = 1;
    *out = b;
    return CDB_OK;
}

static cdb_status cpu_buf_alloc(cdb_k_backend *be, size_t n, cdb_k_buf **out) {
    return cdb_k_cpu_buf_own(cdb_k_cpu_alloc_f32(n), n, out);
}

static void cpu_buf_free(cdb_k_backend *be, cdb_k_buf *b) {
    if (!b) return;
    if (b->owned) free(b->data);
    if (b->owned && b->half) free((void *)(uintptr_t)b->half);
    if (b->packed && !b->packed_borrowed) {
        atomic_fetch_sub(&g_packed_bytes,
                         cdb_gemm_packed_floats(b->rows, b->cols, b->nr) * sizeof(float));
        free(b->packed);
    }
    free(b);
}

void cdb_k_cpu_convert_to_f32(const void *src, cdb_k_dtype dt, float *dst, size_t n) {
    size_t i;
    switch (dt) {
    case CDB_K_F32: memcpy(dst, src, n * sizeof(float)); break;
    case CDB_K_F16: {
        /* src may be unaligned (2-byte offsets in a file are legal). */
        if (((uintptr_t)src & 1) == 0) {
            cdb_k_f16_to_f32((const uint16_t *)src, dst, n);
        } else {
            const unsigned char *s = src;
            for (i = 0; i < n; i++)
                dst[i] = cdb_k_f16_to_f32_1((uint16_t)(s[2 * i] | (s[2 * i + 1] << 8)));
        }
        break;
    }
    case CDB_K_BF16: {
        const unsigned char *s = src;
        for (i = 0; i < n; i++) {
            uint32_t u = ((uint32_t)s[2 * i] | ((uint32_t)s[2 * i + 1] << 8)) << 16;
            memcpy(&dst[i], &u, 4);
        }
        break;
    }
    }
}

static cdb_status cpu_weight_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, size_t n,
                                    cdb_k_wrole role, int flags, cdb_k_buf **out) {
    cdb_k_buf *b;
    cdb_status rc;
    *out = NULL;
    if (dt != CDB_K_F32 && dt != CDB_K_F16 && dt != CDB_K_BF16)
        return cdb_seterr(CDB_INVALID, "weight_upload: unknown dtype %d", (int)dt);
    if (dt == CDB_K_F32 && (flags & CDB_K_UPLOAD_BORROW) && ((uintptr_t)src & 3) == 0) {
        b = calloc(1, sizeof *b);
        if (!b) return cdb_seterr(CDB_NOMEM, "backend buffer");
        b->data = (float *)(uintptr_t)src; /* read-only by contract */
        b->n = n;
        b->owned = 0;
        *out = b;
        return CDB_OK;
    }
    if (role == CDB_K_W_TABLE && dt != CDB_K_F32) { /* stays 2 bytes an element */
        b = calloc(1, sizeof *b);
        if (!b) return cdb_seterr(CDB_NOMEM, "backend buffer");
        b->n = n;
        b->half_dt = dt;
        if (flags & CDB_K_UPLOAD_BORROW) {
            b->half = src; /* read-only by contract */
        } else {
            void *copy = malloc(n ? 2 * n : 1);
            if (!copy) {
                free(b);
                return cdb_seterr(CDB_NOMEM, "table of %zu elements", n);
            }
            memcpy(copy, src, 2 * n);
            b->half = copy;
            b->owned = 1;
        }
        *out = b;
        return CDB_OK;
    }
    if ((rc = cpu_buf_alloc(be, n, &b)) != CDB_OK) return rc;
    cdb_k_cpu_convert_to_f32(src, dt, b->data, n);
    *out = b;
    return CDB_OK;
}

static cdb_status cpu_matrix_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, int rows,
                                    int cols, int flags, cdb_k_buf **out) {
    const cdb_gemm_kern *K = kern(be);
    size_t nf;
    float *row;
    cdb_k_buf *b;
    *out = NULL;
    if (dt != CDB_K_F32 && dt != CDB_K_F16 && dt != CDB_K_BF16)
        return cdb_seterr(CDB_INVALID, "matrix_upload: unknown dtype %d", (int)dt);
    if (rows <= 0 || cols <= 0)
        return cdb_seterr(CDB_INVALID, "matrix_upload: bad shape %dx%d", rows, cols);
    nf = cdb_gemm_packed_floats(rows, cols, K->nr);
    b = calloc(1, sizeof *b);
    row = malloc((size_t)cols * sizeof(float));
    if (b) b->packed = cdb_k_cpu_alloc_f32(nf);
    if (!b || !row || !b->packed) {
        if (b) free(b->packed);
        free(b);
        free(row);
        return cdb_seterr(CDB_NOMEM, "packed matrix %dx%d (%zu MiB)", rows, cols, nf >> 18);
    }
    cdb_gemm_pack_b(src, dt, rows, cols, K->nr, row, b->packed);
    free(row);
    b->n = (size_t)rows * cols;
    b->rows = rows, b->cols = cols, b->nr = K->nr;
    atomic_fetch_add(&g_packed_bytes, nf * sizeof(float));
    *out = b;
    return CDB_OK;
}

/* ---- packed matrix images (kernels.h) ---- */

/* The panels depend on the path only through nr (cdb_gemm_pack_b is plain C), but the
** name carries the path too: an image packed for one kernel table is never handed to
** another (cpu_backend.layout, set at creation). */
static const char *cpu_matrix_layout(const cdb_k_backend *be) {
    return ((const cpu_backend *)be)->layout;
}

static size_t cpu_matrix_packed_bytes(const cdb_k_backend *be, int rows, int cols) {
    if (rows <= 0 || cols <= 0) return 0;
    return cdb_gemm_packed_floats(rows, cols, kern(be)->nr) * sizeof(float);
}

static const void *cpu_matrix_packed_data(const cdb_k_backend *be, const cdb_k_buf *b) {
    return b->packed && b->nr == kern(be)->nr ? b->packed : NULL;
}

static cdb_status cpu_matrix_borrow_packed(cdb_k_backend *be, const void *packed, int rows,
                                           int cols, cdb_k_buf **out) {
    cdb_k_buf *b;
    *out = NULL;
    if (rows <= 0 || cols <= 0 || !packed || ((uintptr_t)packed & 63))
        return cdb_seterr(CDB_INVALID, "matrix_borrow_packed: bad shape %dx%d or alignment",
                          rows, cols);
    if (!(b = calloc(1, sizeof *b))) return cdb_seterr(CDB_NOMEM, "backend buffer");
    b->packed = (float *)(uintptr_t)packed; /* read-only by contract */
    b->packed_borrowed = 1;
    b->n = (size_t)rows * cols;
    b->rows = rows, b->cols = cols, b->nr = kern(be)->nr;
    *out = b;
    return CDB_OK;
}

static cdb_status cpu_buf_upload(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                                 size_t n) {
    if (off > dst->n || n > dst->n - off)
        return cdb_seterr(CDB_INVALID, "buf_upload: [%zu,+%zu) outside %zu", off, n, dst->n);
    if (!dst->owned || !dst->data)
        return cdb_seterr(CDB_INVALID, "buf_upload into a borrowed or packed weight");
    memcpy(dst->data + off, src, n * sizeof(float));
    return CDB_OK;
}

static cdb_status cpu_buf_download(cdb_k_backend *be, const cdb_k_buf *src, size_t off,
                                   float *dst, size_t n) {
    if (off > src->n || n > src->n - off)
        return cdb_seterr(CDB_INVALID, "buf_download: [%zu,+%zu) outside %zu", off, n, src->n);
    if (src->packed) { /* row-major values back out of the panels */
        for (size_t i = 0; i < n; i++) {
            size_t e = off + i, j = e / (size_t)src->cols, kk = e % (size_t)src->cols;
            dst[i] = src->packed[((j / src->nr) * src->cols + kk) * src->nr + j % src->nr];
        }
        return CDB_OK;
    }
    if (src->half) {
        cdb_k_cpu_convert_to_f32((const char *)src->half + 2 * off, src->half_dt, dst, n);
        return CDB_OK;
    }
    memcpy(dst, src->data + off, n * sizeof(float));
    return CDB_OK;
}

/* ---- gemm ------------------------------------------------------------------- */

/* Plain fp32 buffers only: a packed matrix (data NULL) is gemm's w and nothing else. */
static int sizes_ok(const cdb_k_buf *b, size_t need) { return b && b->data && b->n >= need; }

static cdb_status cpu_gemm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                           const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k,
                           cdb_k_act act, int accumulate) {
    const cdb_gemm_kern *K = kern(be);
    float *tmp = NULL, *row = NULL;
    const float *wp;
    cdb_status rc;
    if (m < 0 || n <= 0 || k <= 0) return cdb_seterr(CDB_INVALID, "gemm: bad shape %dx%dx%d", m, n, k);
    if (!sizes_ok(x, (size_t)m * k) || !sizes_ok(y, (size_t)m * n) ||
        (bias && !sizes_ok(bias, (size_t)n)) ||
        (w && w->packed ? w->cols != k || w->rows < n : !sizes_ok(w, (size_t)n * k)))
        return cdb_seterr(CDB_INVALID, "gemm: buffer too small for %dx%dx%d", m, n, k);
    if (accumulate && act != CDB_K_ACT_NONE)
        return cdb_seterr(CDB_INVALID, "gemm: accumulate with an activation");
    if (m == 0) return CDB_OK;
    if (w->packed) {
        wp = w->packed;
    } else { /* a plain buffer: packed for this call, the same panels, the same bits */
        tmp = cdb_k_cpu_alloc_f32(cdb_gemm_packed_floats(n, k, K->nr));
        row = malloc((size_t)k * sizeof(float));
        if (!tmp || !row) {
            free(tmp);
            free(row);
            return cdb_seterr(CDB_NOMEM, "gemm: packing a %dx%d operand", n, k);
        }
        cdb_gemm_pack_b(w->data, CDB_K_F32, n, k, K->nr, row, tmp);
        free(row);
        wp = tmp;
    }
    rc = cdb_gemm_run(K, x->data, wp, bias ? bias->data : NULL, y->data, m, n, k, act,
                      accumulate, nthreads(be));
    free(tmp);
    return rc;
}

static cdb_status cpu_layernorm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *gamma,
                                const cdb_k_buf *beta, cdb_k_buf *y, int m, int n, float eps) {
    long r;
    int nt = nthreads(be);
    if (m < 0 || n <= 0 || !sizes_ok(x, (size_t)m * n) || !sizes_ok(y, (size_t)m * n) ||
        !sizes_ok(gamma, (size_t)n) || !sizes_ok(beta, (size_t)n))
        return cdb_seterr(CDB_INVALID, "layernorm: bad shape %dx%d", m, n);
#pragma omp parallel for num_threads(nt) schedule(static) if ((long)m * n > 16384)
    for (r = 0; r < m; r++) {
        const float *xr = x->data + (size_t)r * n;
        float *yr = y->data + (size_t)r * n;
        const float *g = gamma->data, *b = beta->data;
        /* Two passes, 8 fp32 partial sums each (vectorizable, close to exact). */
        float s8[8] = {0}, v8[8] = {0}, mean, var, inv;
        int j = 0;
        for (; j + 8 <= n; j += 8)
            for (int l = 0; l < 8; l++) s8[l] += xr[j + l];
        for (; j < n; j++) s8[0] += xr[j];
        mean = (((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]))) / n;
        for (j = 0; j + 8 <= n; j += 8)
            for (int l = 0; l < 8; l++) {
                float d = xr[j + l] - mean;
                v8[l] += d * d;
            }
        for (; j < n; j++) {
            float d = xr[j] - mean;
            v8[0] += d * d;
        }
        var = (((v8[0] + v8[1]) + (v8[2] + v8[3])) + ((v8[4] + v8[5]) + (v8[6] + v8[7]))) / n;
        inv = 1.0f / sqrtf(var + eps);
        for (j = 0; j < n; j++) yr[j] = (xr[j] - mean) * inv * g[j] + b[j];
    }
    return CDB_OK;
}

static cdb_status cpu_act(cdb_k_backend *be, cdb_k_buf *x, size_t n, cdb_k_act act) {
    const cdb_gemm_kern *K = kern(be);
    long c, n_chunks;
    const size_t CH = 16384; /* elementwise: any split gives the same bits */
    if (!sizes_ok(x, n)) return cdb_seterr(CDB_INVALID, "act: buffer too small");
    n_chunks = (long)((n + CH - 1) / CH);
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) if (n_chunks > 4)
    for (c = 0; c < n_chunks; c++) {
        size_t i0 = (size_t)c * CH;
        K->act(x->data + i0, n - i0 < CH ? n - i0 : CH, act);
    }
    return CDB_OK;
}

static cdb_status cpu_add(cdb_k_backend *be, cdb_k_buf *y, const cdb_k_buf *x, size_t n) {
    long i, nn = (long)n;
    float *yd;
    const float *xd;
    if (!sizes_ok(x, n) || !sizes_ok(y, n)) return cdb_seterr(CDB_INVALID, "add: buffer too small");
    yd = y->data;
    xd = x->data;
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) if (nn > 16384)
    for (i = 0; i < nn; i++) yd[i] += xd[i];
    return CDB_OK;
}

/* Where attend() finds one item's query rows, keys, values and output rows (floats;
** head h adds h * head_dim to each): query row i of item b at q + b*q_item + i*q_row,
** key and value j at k / v + b*kv_item + j*kv_row, output row r at out + b*out_item +
** r*heads*head_dim. */
typedef struct attn_layout {
    const float *q, *k, *v;
    float *out;
    size_t q_item, q_row, kv_item, kv_row, out_item;
    int n_q;             /* output rows per item */
    const int32_t *qpos; /* NULL: output row r is query r; else query qpos[b] (n_q == 1) */
    int causal;          /* query i sees keys j <= i */
} attn_layout;

/* Per (item, head) pair, its output rows three at a time through K->attn_rows3
** (each key and value vector loaded once for the three; not for causal rows, whose
** key counts differ), the rest one at a time through K->attn_row: the scores of
** three rows are the only thing materialized (3 * (seq + lanes) floats per thread),
** and a row's arithmetic is the same in either kernel, whichever other rows are
** computed. Problems under min_work multiply-adds run on this thread (a fork/join
** costs more). */
static cdb_status attend(cdb_k_backend *be, const attn_layout *L, int batch, int seq, int heads,
                         int head_dim, double min_work) {
    const cdb_gemm_kern *K = kern(be);
    int d = heads * head_dim, nt = nthreads(be), fail = 0;
    long bh, n_bh = (long)batch * heads;
    float scale = 1.0f / sqrtf((float)head_dim);
    if (n_bh < 2 || (double)n_bh * L->n_q * seq * head_dim < min_work) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        float *p = malloc(3 * ((size_t)seq + CDB_GEMM_NR_MAX) * sizeof(float));
        if (!p) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (bh = 0; bh < n_bh; bh++) {
            int b = (int)(bh / heads), h = (int)(bh % heads);
            size_t hoff = (size_t)h * head_dim, kv0 = (size_t)b * L->kv_item + hoff;
            const float *qb = L->q + (size_t)b * L->q_item + hoff;
            float *ob = L->out + (size_t)b * L->out_item + hoff;
            int r = 0;
            if (!p) continue;
            if (!L->qpos && !L->causal)
                for (; r + 3 <= L->n_q; r += 3)
                    K->attn_rows3(qb + (size_t)r * L->q_row, L->q_row, L->k + kv0, L->kv_row,
                                  L->v + kv0, L->kv_row, seq, head_dim, scale, p,
                                  ob + (size_t)r * d, (size_t)d);
            for (; r < L->n_q; r++) {
                int i = L->qpos ? L->qpos[b] : r;
                K->attn_row(qb + (size_t)i * L->q_row, L->k + kv0, L->kv_row, L->v + kv0,
                            L->kv_row, L->causal ? i + 1 : seq, head_dim, scale, p,
                            ob + (size_t)r * d);
            }
        }
        free(p);
    }
    if (fail) return cdb_seterr(CDB_NOMEM, "attention scratch (%d keys)", seq);
    return CDB_OK;
}

/* Self-attention over qkv rows (q | k | v): every query row of an item, or only row
** qpos[b] of item b (into out row b). */
static cdb_status self_attend(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out, int batch,
                              int seq, int heads, int head_dim, int causal, const int32_t *qpos) {
    int d = heads * head_dim, n_q = qpos ? 1 : seq;
    if (batch < 0 || seq <= 0 || heads <= 0 || head_dim <= 0 ||
        !sizes_ok(qkv, (size_t)batch * seq * 3 * d) || !sizes_ok(out, (size_t)batch * n_q * d))
        return cdb_seterr(CDB_INVALID, "attention: bad shape b=%d s=%d h=%d hd=%d", batch, seq,
                          heads, head_dim);
    for (int b = 0; qpos && b < batch; b++)
        if (qpos[b] < 0 || qpos[b] >= seq)
            return cdb_seterr(CDB_INVALID, "attention: item %d's query %d outside [0, %d)", b,
                              qpos[b], seq);
    attn_layout L = {qkv->data, qkv->data + d, qkv->data + 2 * d, out->data,
                     (size_t)seq * 3 * d, (size_t)3 * d, (size_t)seq * 3 * d, (size_t)3 * d,
                     (size_t)n_q * d, n_q, qpos, causal};
    return attend(be, &L, batch, seq, heads, head_dim, 262144.0);
}

static cdb_status cpu_attention(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                int batch, int seq, int heads, int head_dim, int causal) {
    return self_attend(be, qkv, out, batch, seq, heads, head_dim, causal, NULL);
}

static cdb_status cpu_attention_rows(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                     int batch, int seq, int heads, int head_dim, int causal,
                                     const int32_t *qpos) {
    return self_attend(be, qkv, out, batch, seq, heads, head_dim, causal, qpos);
}

static cdb_status cpu_lookup_add(cdb_k_backend *be, const cdb_k_buf *table, const cdb_k_buf *pos,
                                 const int32_t *ids, int n_rows, int period, int width,
                                 cdb_k_buf *out) {
    size_t vocab = table->n / (size_t)(width > 0 ? width : 1);
    if (n_rows < 0 || period <= 0 || width <= 0 || !sizes_ok(out, (size_t)n_rows * width) ||
        !sizes_ok(pos, (size_t)period * width) || (!table->data && !table->half) ||
        table->n < (size_t)width)
        return cdb_seterr(CDB_INVALID, "lookup_add: bad shape");
    for (int r = 0; r < n_rows; r++) {
        if (ids[r] < 0 || (size_t)ids[r] >= vocab)
            return cdb_seterr(CDB_INVALID, "lookup_add: id %d outside [0,%zu)", ids[r], vocab);
        const float *p = pos->data + (size_t)(r % period) * width;
        float *o = out->data + (size_t)r * width;
        if (table->half) { /* the row widened into o (exact), then the same sums */
            cdb_k_cpu_convert_to_f32((const char *)table->half + 2 * (size_t)ids[r] * width,
                                     table->half_dt, o, (size_t)width);
            for (int j = 0; j < width; j++) o[j] = o[j] + p[j];
        } else {
            const float *t = table->data + (size_t)ids[r] * width;
            for (int j = 0; j < width; j++) o[j] = t[j] + p[j];
        }
    }
    return CDB_OK;
}

static cdb_status cpu_prepend_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *head,
                                  const cdb_k_buf *pos, int batch, int n, int width,
                                  cdb_k_buf *out) {
    int s = n + 1;
    long r, n_rows = (long)batch * s;
    if (batch < 0 || n <= 0 || width <= 0 ||
        !sizes_ok(x, (size_t)batch * n * width) || !sizes_ok(head, (size_t)width) ||
        !sizes_ok(pos, (size_t)s * width) || !sizes_ok(out, (size_t)n_rows * width))
        return cdb_seterr(CDB_INVALID, "prepend_add: bad shape");
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) if (n_rows * width > 16384)
    for (r = 0; r < n_rows; r++) {
        int b = (int)(r / s), t = (int)(r % s);
        const float *src = t == 0 ? head->data
                                  : x->data + ((size_t)b * n + t - 1) * width;
        const float *p = pos->data + (size_t)t * width;
        float *o = out->data + (size_t)r * width;
        for (int j = 0; j < width; j++) o[j] = src[j] + p[j];
    }
    return CDB_OK;
}

static cdb_status cpu_gather_rows(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows,
                                  int n, int width, cdb_k_buf *out) {
    size_t nx = x->n / (size_t)(width > 0 ? width : 1);
    if (n < 0 || width <= 0 || !sizes_ok(out, (size_t)n * width) || !sizes_ok(x, 0))
        return cdb_seterr(CDB_INVALID, "gather_rows: bad shape");
    for (int i = 0; i < n; i++) {
        if (rows[i] < 0 || (size_t)rows[i] >= nx)
            return cdb_seterr(CDB_INVALID, "gather_rows: row %d outside [0,%zu)", rows[i], nx);
        memcpy(out->data + (size_t)i * width, x->data + (size_t)rows[i] * width,
               (size_t)width * sizeof(float));
    }
    return CDB_OK;
}

/* ---- ModifiedResNet ops (NHWC) ------------------------------------------------- */

static cdb_status cpu_im2col(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                             int k, int stride, int pad, cdb_k_buf *cols) {
    int ho, wo;
    long r, n_rows;
    if (n < 0 || h <= 0 || w <= 0 || c <= 0 || k <= 0 || stride <= 0 || pad < 0 || pad >= k ||
        h + 2 * pad < k || w + 2 * pad < k)
        return cdb_seterr(CDB_INVALID, "im2col: bad shape n=%d h=%d w=%d c=%d k=%d s=%d p=%d", n,
                          h, w, c, k, stride, pad);
    ho = (h + 2 * pad - k) / stride + 1;
    wo = (w + 2 * pad - k) / stride + 1;
    if (!sizes_ok(x, (size_t)n * h * w * c) || !sizes_ok(cols, (size_t)n * ho * wo * k * k * c))
        return cdb_seterr(CDB_INVALID, "im2col: buffer too small");
    n_rows = (long)n * ho; /* one output image row per iteration */
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) \
    if ((double)n_rows * wo * k * k * c > 65536.0)
    for (r = 0; r < n_rows; r++) {
        int b = (int)(r / ho), oy = (int)(r % ho);
        const float *img = x->data + (size_t)b * h * w * c;
        float *dst = cols->data + (size_t)r * wo * k * k * c;
        for (int ox = 0; ox < wo; ox++)
            for (int ky = 0; ky < k; ky++) {
                int iy = oy * stride - pad + ky;
                for (int kx = 0; kx < k; kx++, dst += c) {
                    int ix = ox * stride - pad + kx;
                    if (iy < 0 || iy >= h || ix < 0 || ix >= w)
                        memset(dst, 0, (size_t)c * sizeof(float));
                    else
                        memcpy(dst, img + ((size_t)iy * w + ix) * c, (size_t)c * sizeof(float));
                }
            }
    }
    return CDB_OK;
}

/* One patch row per iteration: p memcpy's of p floats per channel. */
static cdb_status cpu_patchify(cdb_k_backend *be, const cdb_k_buf *x, int n, int c, int h, int w,
                               int p, cdb_k_buf *cols) {
    int gh, gw;
    long r, n_rows;
    if (n < 0 || c <= 0 || p <= 0 || h < p || w < p || x == cols)
        return cdb_seterr(CDB_INVALID, "patchify: bad shape n=%d c=%d h=%d w=%d p=%d", n, c, h,
                          w, p);
    gh = h / p, gw = w / p;
    if (!sizes_ok(x, (size_t)n * c * h * w) ||
        !sizes_ok(cols, (size_t)n * gh * gw * c * p * p))
        return cdb_seterr(CDB_INVALID, "patchify: buffer too small");
    n_rows = (long)n * gh * gw;
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) \
    if ((double)n_rows * c * p * p > 65536.0)
    for (r = 0; r < n_rows; r++) {
        int b = (int)(r / ((long)gh * gw)), gy = (int)(r / gw % gh), gx = (int)(r % gw);
        float *dst = cols->data + (size_t)r * c * p * p;
        for (int ch = 0; ch < c; ch++)
            for (int ky = 0; ky < p; ky++, dst += p)
                memcpy(dst,
                       x->data + (((size_t)b * c + ch) * h + (size_t)gy * p + ky) * w +
                           (size_t)gx * p,
                       (size_t)p * sizeof(float));
    }
    return CDB_OK;
}

static cdb_status cpu_avgpool(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                              int s, cdb_k_buf *out) {
    int ho, wo;
    long r, n_rows;
    if (n < 0 || h <= 0 || w <= 0 || c <= 0 || s <= 0 || s > h || s > w)
        return cdb_seterr(CDB_INVALID, "avgpool: bad shape n=%d h=%d w=%d c=%d s=%d", n, h, w, c,
                          s);
    ho = h / s;
    wo = w / s;
    if (!sizes_ok(x, (size_t)n * h * w * c) || !sizes_ok(out, (size_t)n * ho * wo * c))
        return cdb_seterr(CDB_INVALID, "avgpool: buffer too small");
    n_rows = (long)n * ho;
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) \
    if ((double)n_rows * wo * c * s * s > 65536.0)
    for (r = 0; r < n_rows; r++) {
        int b = (int)(r / ho), oy = (int)(r % ho);
        const float *row0 = x->data + ((size_t)b * h + (size_t)oy * s) * w * c;
        float *o = out->data + (size_t)r * wo * c;
        const float div = (float)(s * s);
        for (int ox = 0; ox < wo; ox++, o += c) {
            const float *p0 = row0 + (size_t)ox * s * c;
            /* the window's sum in row-major order, then one division (as torch) */
            for (int j = 0; j < c; j++) o[j] = 0.0f;
            for (int dy = 0; dy < s; dy++)
                for (int dx = 0; dx < s; dx++) {
                    const float *p = p0 + ((size_t)dy * w + dx) * c;
                    for (int j = 0; j < c; j++) o[j] += p[j];
                }
            for (int j = 0; j < c; j++) o[j] /= div;
        }
    }
    return CDB_OK;
}

static cdb_status cpu_prepend_mean_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *pos,
                                       int batch, int n, int width, cdb_k_buf *out) {
    size_t s = (size_t)n + 1;
    long b;
    int fail = 0;
    if (batch < 0 || n <= 0 || width <= 0 || !sizes_ok(x, (size_t)batch * n * width) ||
        !sizes_ok(pos, s * width) || !sizes_ok(out, (size_t)batch * s * width))
        return cdb_seterr(CDB_INVALID, "prepend_mean_add: bad shape");
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) if (batch > 1)
    for (b = 0; b < batch; b++) {
        const float *xb = x->data + (size_t)b * n * width;
        float *ob = out->data + (size_t)b * s * width;
        double *sum = malloc((size_t)width * sizeof *sum); /* the mean in double */
        if (!sum) {
#pragma omp atomic write
            fail = 1;
            continue;
        }
        for (int j = 0; j < width; j++) sum[j] = 0.0;
        for (int p = 0; p < n; p++) {
            const float *xr = xb + (size_t)p * width, *pr = pos->data + (1 + (size_t)p) * width;
            float *orow = ob + (1 + (size_t)p) * width;
            for (int j = 0; j < width; j++) {
                sum[j] += xr[j];
                orow[j] = xr[j] + pr[j];
            }
        }
        for (int j = 0; j < width; j++) ob[j] = (float)(sum[j] / n + pos->data[j]);
        free(sum);
    }
    if (fail) return cdb_seterr(CDB_NOMEM, "prepend_mean_add scratch");
    return CDB_OK;
}

static cdb_status cpu_attention_q(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                                  cdb_k_buf *out, int batch, int n_q, int seq, int heads,
                                  int head_dim) {
    int d = heads * head_dim;
    if (batch < 0 || n_q <= 0 || seq <= 0 || heads <= 0 || head_dim <= 0 ||
        !sizes_ok(q, (size_t)batch * n_q * d) || !sizes_ok(kv, (size_t)batch * seq * 2 * d) ||
        !sizes_ok(out, (size_t)batch * n_q * d))
        return cdb_seterr(CDB_INVALID, "attention_q: bad shape b=%d nq=%d s=%d h=%d hd=%d", batch,
                          n_q, seq, heads, head_dim);
    attn_layout L = {q->data, kv->data, kv->data + d, out->data, (size_t)n_q * d, (size_t)d,
                     (size_t)seq * 2 * d, (size_t)2 * d, (size_t)n_q * d, n_q, NULL, 0};
    return attend(be, &L, batch, seq, heads, head_dim, 65536.0);
}

static cdb_status cpu_sync(cdb_k_backend *be) { return CDB_OK; }

static void cpu_destroy(cdb_k_backend *be) { free(be); }

static const cdb_k_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .weight_upload = cpu_weight_upload,
    .buf_upload = cpu_buf_upload,
    .buf_download = cpu_buf_download,
    .gemm = cpu_gemm,
    .layernorm = cpu_layernorm,
    .act = cpu_act,
    .add = cpu_add,
    .attention = cpu_attention,
    .attention_rows = cpu_attention_rows,
    .lookup_add = cpu_lookup_add,
    .prepend_add = cpu_prepend_add,
    .gather_rows = cpu_gather_rows,
    .sync = cpu_sync,
    .im2col = cpu_im2col,
    .avgpool = cpu_avgpool,
    .prepend_mean_add = cpu_prepend_mean_add,
    .attention_q = cpu_attention_q,
    .matrix_upload = cpu_matrix_upload,
    .matrix_layout = cpu_matrix_layout,
    .matrix_packed_bytes = cpu_matrix_packed_bytes,
    .matrix_packed_data = cpu_matrix_packed_data,
    .matrix_borrow_packed = cpu_matrix_borrow_packed,
    .patchify = cpu_patchify,
};

cdb_status cdb_k_backend_cpu_new(int n_threads, cdb_k_backend **out) {
    cpu_backend *be;
    *out = NULL;
    be = calloc(1, sizeof *be);
    if (!be) return cdb_seterr(CDB_NOMEM, "cpu backend");
    be->base.ops = &cpu_ops;
    be->n_threads = n_threads > 0 ? n_threads : cdb_default_threads();
    be->K = cdb_gemm_kern_get();
    snprintf(be->layout, sizeof be->layout, "cpu-panels-nr%d-%s", be->K->nr, be->K->isa);
    *out = &be->base;
    return CDB_OK;
}
