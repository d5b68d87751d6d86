/*
** backend_cpu_ref.c: the scalar reference implementation of the BACKEND interface
** (kernels.h): plain loops, one thread, double accumulators for every reduction.
** Slow by design; the optimized CPU backend and any GPU backend are tested against
** it (tests/kernels/test_backend_cpu.c). Weights are always copied.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/backend_int.h"

static cdb_status ref_buf_alloc(cdb_k_backend *be, size_t n, cdb_k_buf **out) {
    return cdb_k_cpu_buf_own(calloc(n ? n : 1, sizeof(float)), n, out); /* zeroed */
}

static void ref_buf_free(cdb_k_backend *be, cdb_k_buf *b) {
    if (!b) return;
    free(b->data);
    free(b);
}

static cdb_status ref_weight_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, size_t n,
                                    cdb_k_wrole role, int flags, cdb_k_buf **out) {
    cdb_status rc;
    if (dt != CDB_K_F32 && dt != CDB_K_F16 && dt != CDB_K_BF16) {
        *out = NULL;
        return cdb_seterr(CDB_INVALID, "weight_upload: unknown dtype %d", (int)dt);
    }
    if ((rc = ref_buf_alloc(be, n, out)) != CDB_OK) return rc;
    cdb_k_cpu_convert_to_f32(src, dt, (*out)->data, n);
    return CDB_OK;
}

static cdb_status ref_matrix_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, int rows,
                                    int cols, int flags, cdb_k_buf **out) {
    if (rows <= 0 || cols <= 0) {
        *out = NULL;
        return cdb_seterr(CDB_INVALID, "matrix_upload: bad shape %dx%d", rows, cols);
    }
    return ref_weight_upload(be, src, dt, (size_t)rows * cols, CDB_K_W_MATRIX, flags, out);
}

static cdb_status ref_buf_upload(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                                 size_t n) {
    if (off > dst->n || n > dst->n - off)
        return cdb_seterr(CDB_INVALID, "buf_upload: [%zu,+%zu) outside %zu", off, n, dst->n);
    for (size_t i = 0; i < n; i++) dst->data[off + i] = src[i];
    return CDB_OK;
}

static cdb_status ref_buf_download(cdb_k_backend *be, const cdb_k_buf *src, size_t off,
                                   float *dst, size_t n) {
    if (off > src->n || n > src->n - off)
        return cdb_seterr(CDB_INVALID, "buf_download: [%zu,+%zu) outside %zu", off, n, src->n);
    for (size_t i = 0; i < n; i++) dst[i] = src->data[off + i];
    return CDB_OK;
}

static double ref_act1(double x, cdb_k_act a) {
    switch (a) {
    case CDB_K_ACT_QUICK_GELU: return x / (1.0 + exp(-1.702 * x));
    case CDB_K_ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case CDB_K_ACT_RELU: return x < 0 ? 0.0 : x; /* NaN compares false: kept */
    case CDB_K_ACT_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    default: return x;
    }
}

static int fits(const cdb_k_buf *b, size_t need) { return b && b->n >= need; }

static cdb_status ref_gemm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                           const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k,
                           cdb_k_act act, int accumulate) {
    if (m < 0 || n <= 0 || k <= 0 || !fits(x, (size_t)m * k) || !fits(w, (size_t)n * k) ||
        !fits(y, (size_t)m * n) || (bias && !fits(bias, (size_t)n)))
        return cdb_seterr(CDB_INVALID, "gemm: bad shape %dx%dx%d", m, n, k);
    if (accumulate && act != CDB_K_ACT_NONE)
        return cdb_seterr(CDB_INVALID, "gemm: accumulate with an activation");
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = bias ? bias->data[j] : 0.0;
            for (int l = 0; l < k; l++)
                s += (double)x->data[(size_t)i * k + l] * w->data[(size_t)j * k + l];
            if (accumulate) s += y->data[(size_t)i * n + j];
            y->data[(size_t)i * n + j] = (float)ref_act1(s, act);
        }
    return CDB_OK;
}

static cdb_status ref_layernorm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *gamma,
                                const cdb_k_buf *beta, cdb_k_buf *y, int m, int n, float eps) {
    if (m < 0 || n <= 0 || !fits(x, (size_t)m * n) || !fits(y, (size_t)m * n) ||
        !fits(gamma, (size_t)n) || !fits(beta, (size_t)n))
        return cdb_seterr(CDB_INVALID, "layernorm: bad shape %dx%d", m, n);
    for (int r = 0; r < m; r++) {
        const float *xr = x->data + (size_t)r * n;
        float *yr = y->data + (size_t)r * n;
        double mean = 0, var = 0, inv;
        for (int j = 0; j < n; j++) mean += xr[j];
        mean /= n;
        for (int j = 0; j < n; j++) var += (xr[j] - mean) * (xr[j] - mean);
        var /= n;
        inv = 1.0 / sqrt(var + eps);
        for (int j = 0; j < n; j++)
            yr[j] = (float)((xr[j] - mean) * inv * gamma->data[j] + beta->data[j]);
    }
    return CDB_OK;
}

static cdb_status ref_act(cdb_k_backend *be, cdb_k_buf *x, size_t n, cdb_k_act act) {
    if (!fits(x, n)) return cdb_seterr(CDB_INVALID, "act: buffer too small");
    for (size_t i = 0; i < n; i++) x->data[i] = (float)ref_act1(x->data[i], act);
    return CDB_OK;
}

static cdb_status ref_add(cdb_k_backend *be, cdb_k_buf *y, const cdb_k_buf *x, size_t n) {
    if (!fits(x, n) || !fits(y, n)) return cdb_seterr(CDB_INVALID, "add: buffer too small");
    for (size_t i = 0; i < n; i++) y->data[i] += x->data[i];
    return CDB_OK;
}

/* One head of attention for one query row q, in double: the softmax over keys j < n of
** q . k_j / sqrt(head_dim), applied to the values: out[l] = sum_j p_j v_j[l] / sum_j p_j.
** Key j is k + j * stride, value j is v + j * stride; p: n doubles of scratch. */
static void attend_row(const float *q, const float *k, const float *v, size_t stride, int n,
                       int head_dim, double *p, float *out) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        const float *kj = k + (size_t)j * stride;
        double s = 0;
        for (int l = 0; l < head_dim; l++) s += (double)q[l] * kj[l];
        p[j] = s / sqrt((double)head_dim);
        if (p[j] > mx) mx = p[j];
    }
    for (int j = 0; j < n; j++) {
        p[j] = exp(p[j] - mx);
        sum += p[j];
    }
    for (int l = 0; l < head_dim; l++) {
        double o = 0;
        for (int j = 0; j < n; j++) o += p[j] * v[(size_t)j * stride + l];
        out[l] = (float)(o / sum);
    }
}

static cdb_status ref_attention(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                int batch, int seq, int heads, int head_dim, int causal) {
    int d = heads * head_dim;
    double *p;
    if (batch < 0 || seq <= 0 || heads <= 0 || head_dim <= 0 ||
        !fits(qkv, (size_t)batch * seq * 3 * d) || !fits(out, (size_t)batch * seq * d))
        return cdb_seterr(CDB_INVALID, "attention: bad shape");
    p = malloc((size_t)seq * sizeof(double));
    if (!p) return cdb_seterr(CDB_NOMEM, "attention scratch");
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < seq; i++) {
                const float *row = qkv->data + (size_t)b * seq * 3 * d + (size_t)h * head_dim;
                attend_row(row + (size_t)i * 3 * d, row + d, row + 2 * d, (size_t)3 * d,
                           causal ? i + 1 : seq, head_dim, p,
                           out->data + ((size_t)b * seq + i) * d + (size_t)h * head_dim);
            }
    free(p);
    return CDB_OK;
}

static cdb_status ref_lookup_add(cdb_k_backend *be, const cdb_k_buf *table, const cdb_k_buf *pos,
                                 const int32_t *ids, int n_rows, int period, int width,
                                 cdb_k_buf *out) {
    if (n_rows < 0 || period <= 0 || width <= 0 || !fits(out, (size_t)n_rows * width) ||
        !fits(pos, (size_t)period * width))
        return cdb_seterr(CDB_INVALID, "lookup_add: bad shape");
    for (int r = 0; r < n_rows; r++) {
        if (ids[r] < 0 || (size_t)ids[r] >= table->n / (size_t)width)
            return cdb_seterr(CDB_INVALID, "lookup_add: id %d out of range", ids[r]);
        for (int j = 0; j < width; j++)
            out->data[(size_t)r * width + j] = table->data[(size_t)ids[r] * width + j] +
                                               pos->data[(size_t)(r % period) * width + j];
    }
    return CDB_OK;
}

static cdb_status ref_prepend_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *head,
                                  const cdb_k_buf *pos, int batch, int n, int width,
                                  cdb_k_buf *out) {
    int s = n + 1;
    if (batch < 0 || n <= 0 || width <= 0 ||
        !fits(x, (size_t)batch * n * width) || !fits(head, (size_t)width) ||
        !fits(pos, (size_t)s * width) || !fits(out, (size_t)batch * s * width))
        return cdb_seterr(CDB_INVALID, "prepend_add: bad shape");
    for (int b = 0; b < batch; b++)
        for (int t = 0; t < s; t++)
            for (int j = 0; j < width; j++) {
                float v = t == 0 ? head->data[j]
                                 : x->data[((size_t)b * n + t - 1) * width + j];
                out->data[((size_t)b * s + t) * width + j] = v + pos->data[(size_t)t * width + j];
            }
    return CDB_OK;
}

static cdb_status ref_gather_rows(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows,
                                  int n, int width, cdb_k_buf *out) {
    if (n < 0 || width <= 0 || !fits(out, (size_t)n * width))
        return cdb_seterr(CDB_INVALID, "gather_rows: bad shape");
    for (int i = 0; i < n; i++) {
        if (rows[i] < 0 || (size_t)rows[i] >= x->n / (size_t)width)
            return cdb_seterr(CDB_INVALID, "gather_rows: row %d out of range", rows[i]);
        for (int j = 0; j < width; j++)
            out->data[(size_t)i * width + j] = x->data[(size_t)rows[i] * width + j];
    }
    return CDB_OK;
}

/* ---- ModifiedResNet ops --------------------------------------------------------- */

static int conv_out(int in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }

static cdb_status ref_im2col(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                             int k, int stride, int pad, cdb_k_buf *cols) {
    int ho, wo;
    if (n < 0 || h <= 0 || w <= 0 || c <= 0 || k <= 0 || stride <= 0 || pad < 0 || pad >= k ||
        h + 2 * pad < k || w + 2 * pad < k)
        return cdb_seterr(CDB_INVALID, "im2col: bad shape");
    ho = conv_out(h, k, stride, pad);
    wo = conv_out(w, k, stride, pad);
    if (!fits(x, (size_t)n * h * w * c) || !fits(cols, (size_t)n * ho * wo * k * k * c))
        return cdb_seterr(CDB_INVALID, "im2col: buffer too small");
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++)
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++)
                        for (int ch = 0; ch < c; ch++) {
                            int iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                            size_t o = ((((size_t)b * ho + oy) * wo + ox) * k * k +
                                        (size_t)ky * k + kx) * c + ch;
                            cols->data[o] = iy < 0 || iy >= h || ix < 0 || ix >= w
                                                ? 0.0f
                                                : x->data[(((size_t)b * h + iy) * w + ix) * c + ch];
                        }
    return CDB_OK;
}

static cdb_status ref_patchify(cdb_k_backend *be, const cdb_k_buf *x, int n, int c, int h, int w,
                               int p, cdb_k_buf *cols) {
    int gh, gw;
    (void)be;
    if (n < 0 || c <= 0 || p <= 0 || h < p || w < p || x == cols)
        return cdb_seterr(CDB_INVALID, "patchify: bad shape");
    gh = h / p, gw = w / p;
    if (!fits(x, (size_t)n * c * h * w) || !fits(cols, (size_t)n * gh * gw * c * p * p))
        return cdb_seterr(CDB_INVALID, "patchify: buffer too small");
    for (int b = 0; b < n; b++)
        for (int gy = 0; gy < gh; gy++)
            for (int gx = 0; gx < gw; gx++)
                for (int ch = 0; ch < c; ch++)
                    for (int ky = 0; ky < p; ky++)
                        for (int kx = 0; kx < p; kx++) {
                            size_t o = ((((size_t)b * gh + gy) * gw + gx) * c + ch) * p * p +
                                       (size_t)ky * p + kx;
                            cols->data[o] = x->data[(((size_t)b * c + ch) * h + gy * p + ky) *
                                                        w + (size_t)gx * p + kx];
                        }
    return CDB_OK;
}

static cdb_status ref_avgpool(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                              int s, cdb_k_buf *out) {
    int ho, wo;
    if (n < 0 || h <= 0 || w <= 0 || c <= 0 || s <= 0 || s > h || s > w)
        return cdb_seterr(CDB_INVALID, "avgpool: bad shape");
    ho = h / s;
    wo = w / s;
    if (!fits(x, (size_t)n * h * w * c) || !fits(out, (size_t)n * ho * wo * c))
        return cdb_seterr(CDB_INVALID, "avgpool: buffer too small");
    for (int b = 0; b < n; b++)
        for (int oy = 0; oy < ho; oy++)
            for (int ox = 0; ox < wo; ox++)
                for (int ch = 0; ch < c; ch++) {
                    double sum = 0;
                    for (int dy = 0; dy < s; dy++)
                        for (int dx = 0; dx < s; dx++)
                            sum += x->data[(((size_t)b * h + oy * s + dy) * w + ox * s + dx) * c +
                                           ch];
                    out->data[(((size_t)b * ho + oy) * wo + ox) * c + ch] =
                        (float)(sum / ((double)s * s));
                }
    return CDB_OK;
}

static cdb_status ref_prepend_mean_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *pos,
                                       int batch, int n, int width, cdb_k_buf *out) {
    size_t s = (size_t)n + 1;
    if (batch < 0 || n <= 0 || width <= 0 || !fits(x, (size_t)batch * n * width) ||
        !fits(pos, s * width) || !fits(out, (size_t)batch * s * width))
        return cdb_seterr(CDB_INVALID, "prepend_mean_add: bad shape");
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < width; j++) {
            double sum = 0;
            for (int p = 0; p < n; p++) {
                float v = x->data[((size_t)b * n + p) * width + j];
                sum += v;
                out->data[((size_t)b * s + 1 + p) * width + j] =
                    v + pos->data[(1 + (size_t)p) * width + j];
            }
            out->data[(size_t)b * s * width + j] = (float)(sum / n + pos->data[j]);
        }
    return CDB_OK;
}

static cdb_status ref_attention_q(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                                  cdb_k_buf *out, int batch, int n_q, int seq, int heads,
                                  int head_dim) {
    int d = heads * head_dim;
    double *p;
    if (batch < 0 || n_q <= 0 || seq <= 0 || heads <= 0 || head_dim <= 0 ||
        !fits(q, (size_t)batch * n_q * d) || !fits(kv, (size_t)batch * seq * 2 * d) ||
        !fits(out, (size_t)batch * n_q * d))
        return cdb_seterr(CDB_INVALID, "attention_q: bad shape");
    p = malloc((size_t)seq * sizeof(double));
    if (!p) return cdb_seterr(CDB_NOMEM, "attention_q scratch");
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < n_q; i++) {
                const float *kr = kv->data + (size_t)b * seq * 2 * d + (size_t)h * head_dim;
                attend_row(q->data + ((size_t)b * n_q + i) * d + (size_t)h * head_dim, kr, kr + d,
                           (size_t)2 * d, seq, head_dim, p,
                           out->data + ((size_t)b * n_q + i) * d + (size_t)h * head_dim);
            }
    free(p);
    return CDB_OK;
}

static cdb_status ref_sync(cdb_k_backend *be) { return CDB_OK; }
static void ref_destroy(cdb_k_backend *be) { free(be); }

static const cdb_k_backend_ops ref_ops = {
    .name = "cpu-ref",
    .destroy = ref_destroy,
    .buf_alloc = ref_buf_alloc,
    .buf_free = ref_buf_free,
    .weight_upload = ref_weight_upload,
    .buf_upload = ref_buf_upload,
    .buf_download = ref_buf_download,
    .gemm = ref_gemm,
    .layernorm = ref_layernorm,
    .act = ref_act,
    .add = ref_add,
    .attention = ref_attention,
    .lookup_add = ref_lookup_add,
    .prepend_add = ref_prepend_add,
    .gather_rows = ref_gather_rows,
    .sync = ref_sync,
    .im2col = ref_im2col,
    .avgpool = ref_avgpool,
    .prepend_mean_add = ref_prepend_mean_add,
    .attention_q = ref_attention_q,
    .matrix_upload = ref_matrix_upload,
    .patchify = ref_patchify,
};

cdb_status cdb_k_backend_cpu_ref_new(cdb_k_backend **out) {
    cdb_k_backend *be = calloc(1, sizeof *be);
    *out = NULL;
    if (!be) return cdb_seterr(CDB_NOMEM, "cpu-ref backend");
    be->ops = &ref_ops;
    *out = be;
    return CDB_OK;
}
