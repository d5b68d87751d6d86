/*
** backend_cpu.c: the optimized CPU backend of the BACKEND interface (kernels.h):
** fp32 storage, OpenBLAS sgemm (OpenMP build) for every matrix product including
** the per-head attention products, OpenMP loops for the row-wise ops. Weights in
** F32 that are borrowable (mmapped, 4-byte aligned) are used in place; F16/BF16 are
** widened to fp32 once at upload. Also holds cdb_k_backend_new(), the factory the
** encoder calls (a CUDA backend plugs in there).
**
** Inside an OpenMP parallel region OpenBLAS (OpenMP build) runs single-threaded,
** so the attention loop parallelizes over (batch, head) and calls sgemm per pair.
** The ModifiedResNet ops (im2col, avgpool, pool_tokens, attention_q) are OpenMP
** loops over output rows; their convolutions are the gemm above.
*/
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_int.h"
#include "kernels/cpu/cpu_int.h"

#if CDB_HAVE_AVX2
#include <immintrin.h>
#endif

typedef struct cpu_backend {
    cdb_k_backend base;
    int n_threads;
} cpu_backend;

/* OpenBLAS entry point (declared in its cblas.h too, but not in every variant). */
void openblas_set_num_threads(int num_threads);

static int nthreads(const cdb_k_backend *be) { return ((const cpu_backend *)be)->n_threads; }

float *cdb_k_cpu_alloc_f32(size_t n) {
    void *p = NULL;
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, bytes) != 0) return NULL;
    return (float *)p;
}

/* ---- buffers --------------------------------------------------------------- */

static cdb_status cpu_buf_alloc(cdb_k_backend *be, size_t n, cdb_k_buf **out) {
    cdb_k_buf *b = calloc(1, sizeof *b);
    *out = NULL;
    if (!b) return cdb_seterr(CDB_NOMEM, "backend buffer");
    b->data = cdb_k_cpu_alloc_f32(n);
    if (!b->data) {
        free(b);
        return cdb_seterr(CDB_NOMEM, "backend buffer of %zu floats", n);
    }
    b->n = n;
    b->owned = 1;
    *out = b;
    return CDB_OK;
}

static void cpu_buf_free(cdb_k_backend *be, cdb_k_buf *b) {
    if (!b) return;
    if (b->owned) free(b->data);
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
    if ((rc = cpu_buf_alloc(be, n, &b)) != CDB_OK) return rc;
    cdb_k_cpu_convert_to_f32(src, dt, b->data, n);
    *out = b;
    return CDB_OK;
}

static cdb_status cpu_buf_upload(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                                 size_t n) {
    if (off > dst->n || n > dst->n - off)
        return cdb_seterr(CDB_INVALID, "buf_upload: [%zu,+%zu) outside %zu", off, n, dst->n);
    if (!dst->owned) return cdb_seterr(CDB_INVALID, "buf_upload into a borrowed weight");
    memcpy(dst->data + off, src, n * sizeof(float));
    return CDB_OK;
}

static cdb_status cpu_buf_download(cdb_k_backend *be, const cdb_k_buf *src, size_t off,
                                   float *dst, size_t n) {
    if (off > src->n || n > src->n - off)
        return cdb_seterr(CDB_INVALID, "buf_download: [%zu,+%zu) outside %zu", off, n, src->n);
    memcpy(dst, src->data + off, n * sizeof(float));
    return CDB_OK;
}

/* ---- elementwise ------------------------------------------------------------ */

static inline float act1(float x, cdb_k_act a) {
    switch (a) {
    case CDB_K_ACT_QUICK_GELU: return x / (1.0f + expf(-1.702f * x));
    case CDB_K_ACT_GELU: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case CDB_K_ACT_RELU: return x < 0.0f ? 0.0f : x; /* NaN compares false: kept */
    default: return x;
    }
}

static void act_range(float *x, size_t n, cdb_k_act a, int nt) {
    long i, nn = (long)n;
    if (a == CDB_K_ACT_NONE) return;
    if (a == CDB_K_ACT_RELU) { /* its own loop: vectorized (the switch in act1 is not) */
#pragma omp parallel for num_threads(nt) schedule(static) if (nn > 65536)
        for (i = 0; i < nn; i++) x[i] = x[i] < 0.0f ? 0.0f : x[i];
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static) if (nn > 16384)
    for (i = 0; i < nn; i++) x[i] = act1(x[i], a);
}

/* y[r, :] = act(y[r, :] + bias) for r < m, in one pass (bias may be NULL). */
static void bias_act_rows(float *y, const float *bias, long m, int n, cdb_k_act a, int nt) {
    long r;
#pragma omp parallel for num_threads(nt) schedule(static) if (m * n > 65536)
    for (r = 0; r < m; r++) {
        float *row = y + (size_t)r * n;
        if (a == CDB_K_ACT_RELU) {
            for (int j = 0; j < n; j++) {
                float v = row[j] + bias[j];
                row[j] = v < 0.0f ? 0.0f : v; /* NaN compares false: kept */
            }
        } else if (a == CDB_K_ACT_NONE) {
            for (int j = 0; j < n; j++) row[j] += bias[j];
        } else {
            for (int j = 0; j < n; j++) row[j] = act1(row[j] + bias[j], a);
        }
    }
}

static int sizes_ok(const cdb_k_buf *b, size_t need) { return b && b->n >= need; }

/* At most this many rows: gemm splits the output columns over threads itself. */
#define SMALL_M 32

#if CDB_HAVE_AVX2
/* At most this many rows (a short text query: its tokens up to the end token), y =
** x W^T is a few dot products per row of W: each W row is read once, from memory,
** against x's rows kept in L1, with no packing of W (OpenBLAS packs all of W first,
** which doubled a ViT-B/32 text encode's time). Columns [n0, n1) of y only. */
#define TINY_M 8

static inline __attribute__((always_inline, target("avx2,fma"))) void
tiny_gemm_r(const float *x, const float *w, const float *bias, float *y, int R, int n0, int n1,
            int k, int ldy, int accumulate) {
    for (int j = n0; j < n1; j++) {
        const float *wr = w + (size_t)j * k;
        __m256 acc[TINY_M];
        float s[TINY_M];
        int kk = 0;
        for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
        for (; kk + 8 <= k; kk += 8) {
            __m256 wv = _mm256_loadu_ps(wr + kk);
            for (int r = 0; r < R; r++)
                acc[r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)r * k + kk), acc[r]);
        }
        for (int r = 0; r < R; r++) {
            __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
            h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            h = _mm_add_ss(h, _mm_movehdup_ps(h));
            s[r] = _mm_cvtss_f32(h);
        }
        for (; kk < k; kk++)
            for (int r = 0; r < R; r++) s[r] += wr[kk] * x[(size_t)r * k + kk];
        for (int r = 0; r < R; r++) {
            float *o = y + (size_t)r * ldy + j;
            *o = (accumulate ? *o : 0.0f) + (bias ? bias[j] : 0.0f) + s[r];
        }
    }
}

__attribute__((target("avx2,fma"))) static void tiny_gemm(const float *x, const float *w,
                                                          const float *bias, float *y, int m,
                                                          int n0, int n1, int k, int ldy,
                                                          int accumulate) {
    switch (m) { /* a constant R: the accumulators stay in registers */
    case 1: tiny_gemm_r(x, w, bias, y, 1, n0, n1, k, ldy, accumulate); break;
    case 2: tiny_gemm_r(x, w, bias, y, 2, n0, n1, k, ldy, accumulate); break;
    case 3: tiny_gemm_r(x, w, bias, y, 3, n0, n1, k, ldy, accumulate); break;
    case 4: tiny_gemm_r(x, w, bias, y, 4, n0, n1, k, ldy, accumulate); break;
    case 5: tiny_gemm_r(x, w, bias, y, 5, n0, n1, k, ldy, accumulate); break;
    case 6: tiny_gemm_r(x, w, bias, y, 6, n0, n1, k, ldy, accumulate); break;
    case 7: tiny_gemm_r(x, w, bias, y, 7, n0, n1, k, ldy, accumulate); break;
    default: tiny_gemm_r(x, w, bias, y, 8, n0, n1, k, ldy, accumulate); break;
    }
}
#endif

static cdb_status cpu_gemm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                           const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k,
                           cdb_k_act act, int accumulate) {
    int nt = nthreads(be);
    long r;
    float beta = accumulate ? 1.0f : 0.0f;
    if (m < 0 || n <= 0 || k <= 0) return cdb_seterr(CDB_INVALID, "gemm: bad shape %dx%dx%d", m, n, k);
    if (!sizes_ok(x, (size_t)m * k) || !sizes_ok(w, (size_t)n * k) ||
        !sizes_ok(y, (size_t)m * n) || (bias && !sizes_ok(bias, (size_t)n)))
        return cdb_seterr(CDB_INVALID, "gemm: buffer too small for %dx%dx%d", m, n, k);
    if (accumulate && act != CDB_K_ACT_NONE)
        return cdb_seterr(CDB_INVALID, "gemm: accumulate with an activation");
    if (m == 0) return CDB_OK;
#if CDB_HAVE_AVX2
    if (m <= TINY_M && cdb_k_cpu_isa() >= CDB_K_ISA_AVX2) {
        const float *xd = x->data, *wd = w->data, *bd = bias ? bias->data : NULL;
        float *yd = y->data;
        if (nt > 1 && n < 64 * nt) nt = 1;
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int n0 = (int)((long)n * t / T), n1 = (int)((long)n * (t + 1) / T);
            tiny_gemm(xd, wd, bd, yd, m, n0, n1, k, n, accumulate);
            if (act != CDB_K_ACT_NONE)
                for (int r2 = 0; r2 < m; r2++)
                    for (int j = n0; j < n1; j++)
                        yd[(size_t)r2 * n + j] = act1(yd[(size_t)r2 * n + j], act);
        }
        return CDB_OK;
    }
#endif
    if (m <= SMALL_M && nt > 1 && n >= 64 * nt) {
        /* Few rows (a text query): the product is bound by reading W. Split W's rows
        ** (the output columns) across threads, each calling sgemm on its slice
        ** (single-threaded inside the region): one fork/join instead of OpenBLAS's
        ** several synchronizations per call, which cost a lot on a busy machine. */
        const float *xd = x->data, *wd = w->data, *bd = bias ? bias->data : NULL;
        float *yd = y->data;
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            int n0 = (int)((long)n * t / T), n1 = (int)((long)n * (t + 1) / T);
            float b = accumulate ? 1.0f : 0.0f;
            if (bd) {
                for (int r2 = 0; r2 < m; r2++) {
                    float *row = yd + (size_t)r2 * n;
                    for (int j = n0; j < n1; j++) row[j] = (accumulate ? row[j] : 0.0f) + bd[j];
                }
                b = 1.0f;
            }
            if (n1 > n0) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n1 - n0, k, 1.0f, xd, k,
                            wd + (size_t)n0 * k, k, b, yd + n0, n);
                if (act != CDB_K_ACT_NONE)
                    for (int r2 = 0; r2 < m; r2++)
                        for (int j = n0; j < n1; j++)
                            yd[(size_t)r2 * n + j] = act1(yd[(size_t)r2 * n + j], act);
            }
        }
        return CDB_OK;
    }
    if (bias && accumulate) { /* y += bias, then y += x . w^T */
        const float *bd = bias->data;
        float *yd = y->data;
#pragma omp parallel for num_threads(nt) schedule(static) if ((long)m * n > 16384)
        for (r = 0; r < m; r++) {
            float *row = yd + (size_t)r * n;
            for (int j = 0; j < n; j++) row[j] += bd[j];
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x->data, k, w->data, k,
                beta, y->data, n);
    /* one pass for the epilogue: (x . w^T) + bias, then the activation, the same
    ** single rounding of the sum as adding the bias inside sgemm (beta = 1) */
    if (bias && !accumulate)
        bias_act_rows(y->data, bias->data, m, n, act, nt);
    else
        act_range(y->data, (size_t)m * n, act, nt);
    return CDB_OK;
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
    if (!sizes_ok(x, n)) return cdb_seterr(CDB_INVALID, "act: buffer too small");
    act_range(x->data, n, act, nthreads(be));
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

static cdb_status cpu_attention(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                int batch, int seq, int heads, int head_dim, int causal) {
    int d = heads * head_dim, nt = nthreads(be);
    long bh, n_bh = (long)batch * heads;
    float scale;
    int fail = 0;
    if (batch < 0 || seq <= 0 || heads <= 0 || head_dim <= 0 ||
        !sizes_ok(qkv, (size_t)batch * seq * 3 * d) || !sizes_ok(out, (size_t)batch * seq * d))
        return cdb_seterr(CDB_INVALID, "attention: bad shape b=%d s=%d h=%d hd=%d", batch, seq,
                          heads, head_dim);
    scale = 1.0f / sqrtf((float)head_dim);
    /* Tiny problems (a short text query) run on this thread: a fork/join costs more. */
    if (n_bh < 2 || (double)n_bh * seq * seq * head_dim < 262144.0) nt = 1;
#pragma omp parallel num_threads(nt)
    {
        float *sc = malloc((size_t)seq * seq * sizeof(float));
        if (!sc) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (bh = 0; bh < n_bh; bh++) {
            if (!sc) continue;
            int b = (int)(bh / heads), h = (int)(bh % heads);
            const float *q = qkv->data + (size_t)b * seq * 3 * d + (size_t)h * head_dim;
            const float *k = q + d, *v = q + 2 * d;
            float *o = out->data + (size_t)b * seq * d + (size_t)h * head_dim;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, head_dim, scale, q,
                        3 * d, k, 3 * d, 0.0f, sc, seq);
            for (int i = 0; i < seq; i++) {
                float *row = sc + (size_t)i * seq, mx = -INFINITY, sum = 0.0f;
                int lim = causal ? i + 1 : seq;
                for (int j = 0; j < lim; j++) mx = row[j] > mx ? row[j] : mx;
                for (int j = 0; j < lim; j++) {
                    row[j] = expf(row[j] - mx);
                    sum += row[j];
                }
                float inv = 1.0f / sum;
                for (int j = 0; j < lim; j++) row[j] *= inv;
                for (int j = lim; j < seq; j++) row[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, head_dim, seq, 1.0f, sc,
                        seq, v, 3 * d, 0.0f, o, d);
        }
        free(sc);
    }
    if (fail) return cdb_seterr(CDB_NOMEM, "attention scratch (%d x %d)", seq, seq);
    return CDB_OK;
}

static cdb_status cpu_embed_tokens(cdb_k_backend *be, const cdb_k_buf *table, const cdb_k_buf *pos,
                                   const int32_t *ids, int n_rows, int seq, int width,
                                   cdb_k_buf *out) {
    size_t vocab = table->n / (size_t)(width > 0 ? width : 1);
    if (n_rows < 0 || seq <= 0 || width <= 0 || !sizes_ok(out, (size_t)n_rows * width) ||
        !sizes_ok(pos, (size_t)seq * width))
        return cdb_seterr(CDB_INVALID, "embed_tokens: bad shape");
    for (int r = 0; r < n_rows; r++) {
        if (ids[r] < 0 || (size_t)ids[r] >= vocab)
            return cdb_seterr(CDB_INVALID, "embed_tokens: id %d outside [0,%zu)", ids[r], vocab);
        const float *t = table->data + (size_t)ids[r] * width;
        const float *p = pos->data + (size_t)(r % seq) * width;
        float *o = out->data + (size_t)r * width;
        for (int j = 0; j < width; j++) o[j] = t[j] + p[j];
    }
    return CDB_OK;
}

static cdb_status cpu_embed_patches(cdb_k_backend *be, const cdb_k_buf *patches,
                                    const cdb_k_buf *cls, const cdb_k_buf *pos, int batch,
                                    int n_patches, int width, cdb_k_buf *out) {
    int s = n_patches + 1;
    long r, n_rows = (long)batch * s;
    if (batch < 0 || n_patches <= 0 || width <= 0 ||
        !sizes_ok(patches, (size_t)batch * n_patches * width) || !sizes_ok(cls, (size_t)width) ||
        !sizes_ok(pos, (size_t)s * width) || !sizes_ok(out, (size_t)n_rows * width))
        return cdb_seterr(CDB_INVALID, "embed_patches: bad shape");
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) if (n_rows * width > 16384)
    for (r = 0; r < n_rows; r++) {
        int b = (int)(r / s), t = (int)(r % s);
        const float *src = t == 0 ? cls->data
                                  : patches->data + ((size_t)b * n_patches + t - 1) * width;
        const float *p = pos->data + (size_t)t * width;
        float *o = out->data + (size_t)r * width;
        for (int j = 0; j < width; j++) o[j] = src[j] + p[j];
    }
    return CDB_OK;
}

static cdb_status cpu_gather_rows(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows,
                                  int n, int width, cdb_k_buf *out) {
    size_t nx = x->n / (size_t)(width > 0 ? width : 1);
    if (n < 0 || width <= 0 || !sizes_ok(out, (size_t)n * width))
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

static cdb_status cpu_pool_tokens(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *pos,
                                  int batch, int hw, int width, cdb_k_buf *out) {
    size_t s = (size_t)hw + 1;
    long b;
    int fail = 0;
    if (batch < 0 || hw <= 0 || width <= 0 || !sizes_ok(x, (size_t)batch * hw * width) ||
        !sizes_ok(pos, s * width) || !sizes_ok(out, (size_t)batch * s * width))
        return cdb_seterr(CDB_INVALID, "pool_tokens: bad shape");
#pragma omp parallel for num_threads(nthreads(be)) schedule(static) if (batch > 1)
    for (b = 0; b < batch; b++) {
        const float *xb = x->data + (size_t)b * hw * width;
        float *ob = out->data + (size_t)b * s * width;
        double *sum = malloc((size_t)width * sizeof *sum); /* the mean in double */
        if (!sum) {
#pragma omp atomic write
            fail = 1;
            continue;
        }
        for (int j = 0; j < width; j++) sum[j] = 0.0;
        for (int p = 0; p < hw; p++) {
            const float *xr = xb + (size_t)p * width, *pr = pos->data + (1 + (size_t)p) * width;
            float *orow = ob + (1 + (size_t)p) * width;
            for (int j = 0; j < width; j++) {
                sum[j] += xr[j];
                orow[j] = xr[j] + pr[j];
            }
        }
        for (int j = 0; j < width; j++) ob[j] = (float)(sum[j] / hw + pos->data[j]);
        free(sum);
    }
    if (fail) return cdb_seterr(CDB_NOMEM, "pool_tokens scratch");
    return CDB_OK;
}

static cdb_status cpu_attention_q(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                                  cdb_k_buf *out, int batch, int n_q, int seq, int heads,
                                  int head_dim) {
    int d = heads * head_dim, nt = nthreads(be), fail = 0;
    long bh, n_bh = (long)batch * heads;
    float scale;
    if (batch < 0 || n_q <= 0 || seq <= 0 || heads <= 0 || head_dim <= 0 ||
        !sizes_ok(q, (size_t)batch * n_q * d) || !sizes_ok(kv, (size_t)batch * seq * 2 * d) ||
        !sizes_ok(out, (size_t)batch * n_q * d))
        return cdb_seterr(CDB_INVALID, "attention_q: bad shape b=%d nq=%d s=%d h=%d hd=%d", batch,
                          n_q, seq, heads, head_dim);
    scale = 1.0f / sqrtf((float)head_dim);
    if ((double)n_bh * n_q * seq * head_dim < 65536.0) nt = 1;
#pragma omp parallel num_threads(nt)
    {
        float *p = malloc((size_t)seq * sizeof(float));
        if (!p) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(static)
        for (bh = 0; bh < n_bh; bh++) {
            int b = (int)(bh / heads), h = (int)(bh % heads);
            const float *kb = kv->data + (size_t)b * seq * 2 * d + (size_t)h * head_dim;
            if (!p) continue;
            for (int i = 0; i < n_q; i++) {
                const float *qr = q->data + ((size_t)b * n_q + i) * d + (size_t)h * head_dim;
                float *o = out->data + ((size_t)b * n_q + i) * d + (size_t)h * head_dim;
                float mx = -INFINITY, sum = 0.0f, inv;
                for (int j = 0; j < seq; j++) {
                    const float *kr = kb + (size_t)j * 2 * d;
                    float sc = 0.0f;
                    for (int l = 0; l < head_dim; l++) sc += qr[l] * kr[l];
                    p[j] = sc * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < seq; j++) {
                    p[j] = expf(p[j] - mx);
                    sum += p[j];
                }
                inv = 1.0f / sum;
                for (int l = 0; l < head_dim; l++) o[l] = 0.0f;
                for (int j = 0; j < seq; j++) {
                    const float *vr = kb + (size_t)j * 2 * d + d;
                    float pj = p[j] * inv;
                    for (int l = 0; l < head_dim; l++) o[l] += pj * vr[l];
                }
            }
        }
        free(p);
    }
    if (fail) return cdb_seterr(CDB_NOMEM, "attention_q scratch (%d keys)", seq);
    return CDB_OK;
}

static cdb_status cpu_sync(cdb_k_backend *be) { return CDB_OK; }

static void cpu_destroy(cdb_k_backend *be) { free(be); }

static const cdb_k_backend_ops cpu_ops = {
    "cpu",           cpu_destroy,      cpu_buf_alloc,     cpu_buf_free,     cpu_weight_upload,
    cpu_buf_upload,  cpu_buf_download, cpu_gemm,          cpu_layernorm,    cpu_act,
    cpu_add,         cpu_attention,    cpu_embed_tokens,  cpu_embed_patches, cpu_gather_rows,
    cpu_sync,        cpu_im2col,       cpu_avgpool,       cpu_pool_tokens,  cpu_attention_q,
};

cdb_status cdb_k_backend_cpu_new(int n_threads, cdb_k_backend **out) {
    cpu_backend *be;
    *out = NULL;
    be = calloc(1, sizeof *be);
    if (!be) return cdb_seterr(CDB_NOMEM, "cpu backend");
    be->base.ops = &cpu_ops;
    be->n_threads = n_threads > 0 ? n_threads : cdb_default_threads();
    openblas_set_num_threads(be->n_threads);
    *out = &be->base;
    return CDB_OK;
}

/* ---- factory ---------------------------------------------------------------- */

cdb_k_backend_params cdb_k_backend_params_default(void) {
    cdb_k_backend_params p;
    memset(&p, 0, sizeof p);
    p.kind = CDB_K_BACKEND_AUTO;
    return p;
}

cdb_status cdb_k_backend_new(const cdb_k_backend_params *p, cdb_k_backend **out) {
    cdb_k_backend_params d = p ? *p : cdb_k_backend_params_default();
    *out = NULL;
    /* kernels/cuda/ always provides the constructor (a stub that says why without
    ** CUDA), so this file needs no #ifdef. */
    if (d.kind == CDB_K_BACKEND_CUDA) return cdb_k_backend_cuda_new(d.device_index, out);
    if (d.kind == CDB_K_BACKEND_AUTO && cdb_k_cuda_device_count() > 0) {
        if (cdb_k_backend_cuda_new(d.device_index, out) == CDB_OK) return CDB_OK;
        CDB_LOG_WARN("cuda:%d unusable (%s); using the CPU", d.device_index, cdb_errmsg());
        cdb_clearerr();
    }
    return cdb_k_backend_cpu_new(d.n_threads, out);
}

void cdb_k_backend_free(cdb_k_backend *be) {
    if (be) be->ops->destroy(be);
}
