/*
** backend.cu: the CUDA implementation of cdb_k_backend_ops (kernels.h, section
** BACKEND), so encoder/clip.c runs its graph on the GPU unchanged.
**
** Storage: weight matrices fp16; biases, LayerNorm parameters and embeddings
** fp32; activations carry their current type (see cuda_backend.cuh): GEMM outputs
** fp16 unless accumulated into the fp32 residual stream; LayerNorm reads fp32 and
** writes fp16 GEMM operands; attention reads and writes fp16. This is what
** PyTorch's fp16 autocast does to CLIP (the residual stream stays fp32), with fp32
** accumulation in every GEMM and fp32 LayerNorm/softmax statistics.
**
** Threads: one mutex per backend serializes every op (they share the scratch
** buffer, the index buffer and the compute stream); each op first makes the
** backend's device current on the calling thread.
*/
#include <limits.h>
#include <string.h>

#include "kernels/cuda/cuda_backend.cuh"

extern "C" cdb_status cdb_kc_backend_ws(cdb_kc_backend *b, size_t bytes) {
    cdb_status rc = CDB_OK;
    void *p = NULL;
    if (bytes <= b->ws_bytes) return CDB_OK;
    bytes += bytes / 4;
    if ((rc = cdb_kc_sync(b->c)) != CDB_OK) return rc;
    cdb_kc_free(b->c, b->ws);
    b->ws = NULL;
    b->ws_bytes = 0;
    rc = cdb_kc_malloc(b->c, bytes, &p);
    if (rc == CDB_NOMEM && b->n_cache > 0) { /* give cached blocks back, try again */
        for (int i = 0; i < b->n_cache; i++) cdb_kc_free(b->c, b->cache_ptr[i]);
        b->n_cache = 0;
        rc = cdb_kc_malloc(b->c, bytes, &p);
    }
    if (rc != CDB_OK) return cdb_errctx(rc, "cuda backend scratch (%zu bytes)", bytes);
    b->ws = p;
    b->ws_bytes = bytes;
    return CDB_OK;
}

/* Enter/leave an op: lock, bind the device. */
#define OP_ENTER(be)                                                           \
    cdb_kc_backend *b = (cdb_kc_backend *)(be);                                \
    cdb_status rc = CDB_OK;                                                    \
    pthread_mutex_lock(&b->mu);                                                \
    if ((rc = cdb_kc_ctx_bind(b->c)) != CDB_OK) goto done

#define OP_LEAVE()                                                             \
    pthread_mutex_unlock(&b->mu);                                              \
    return rc

#define NEED CDB_CUDA_CHECK_ARG /* (cond, message...): CDB_INVALID unless cond */

#define TRY(call)                                                              \
    do {                                                                       \
        if ((rc = (call)) != CDB_OK) goto done;                                \
    } while (0)

/* ---- buffers ------------------------------------------------------------------ */

static void cache_flush(cdb_kc_backend *b) {
    for (int i = 0; i < b->n_cache; i++) cdb_kc_free(b->c, b->cache_ptr[i]);
    b->n_cache = 0;
}

/* A cached block of at least bytes (and at most twice that), or a new one; on
** out-of-memory the cache is released and the allocation retried once. */
static cdb_status dev_alloc(cdb_kc_backend *b, size_t bytes, void **out, size_t *cap) {
    cdb_status rc;
    int best = -1;
    for (int i = 0; i < b->n_cache; i++)
        if (b->cache_bytes[i] >= bytes && b->cache_bytes[i] <= 2 * bytes &&
            (best < 0 || b->cache_bytes[i] < b->cache_bytes[best]))
            best = i;
    if (best >= 0) {
        *out = b->cache_ptr[best];
        *cap = b->cache_bytes[best];
        b->n_cache--;
        b->cache_ptr[best] = b->cache_ptr[b->n_cache];
        b->cache_bytes[best] = b->cache_bytes[b->n_cache];
        return CDB_OK;
    }
    *cap = bytes;
    rc = cdb_kc_malloc(b->c, bytes, out);
    if (rc == CDB_NOMEM && b->n_cache > 0) {
        cache_flush(b);
        rc = cdb_kc_malloc(b->c, bytes, out);
    }
    return rc;
}

static void dev_release(cdb_kc_backend *b, void *d, size_t cap) {
    if (!d) return;
    if (b->n_cache < CDB_KC_CACHE_SLOTS) {
        b->cache_ptr[b->n_cache] = d;
        b->cache_bytes[b->n_cache] = cap;
        b->n_cache++;
        return;
    }
    cdb_kc_free(b->c, d);
}

static cdb_status be_buf_new(cdb_kc_backend *b, size_t n, size_t bytes, int f32, int is_weight,
                             cdb_k_buf **out) {
    cdb_status rc;
    cdb_k_buf *x = (cdb_k_buf *)cdb_calloc(1, sizeof *x);
    *out = NULL;
    if (!x) return cdb_seterr(CDB_NOMEM, "cuda buffer header: out of memory");
    if (is_weight)
        rc = cdb_kc_malloc(b->c, bytes, &x->d);
    else
        rc = dev_alloc(b, bytes, &x->d, &bytes);
    if (rc != CDB_OK) {
        cdb_free(x);
        return cdb_errctx(rc, "cuda buffer of %zu elements", n);
    }
    x->n = n;
    x->cap_bytes = bytes;
    x->f32 = f32;
    x->is_weight = is_weight;
    *out = x;
    return CDB_OK;
}

static cdb_status cuda_buf_alloc(cdb_k_backend *be, size_t n, cdb_k_buf **out) {
    OP_ENTER(be);
    rc = be_buf_new(b, n, (n ? n : 1) * 4, 1, 0, out);
done:
    OP_LEAVE();
}

static void cuda_buf_free(cdb_k_backend *be, cdb_k_buf *x) {
    cdb_kc_backend *b = (cdb_kc_backend *)be;
    if (!x) return;
    pthread_mutex_lock(&b->mu);
    (void)cdb_kc_ctx_bind(b->c);
    if (x->is_weight)
        cdb_kc_free(b->c, x->d); /* cudaFree waits for queued ops reading x */
    else
        dev_release(b, x->d, x->cap_bytes); /* later users queue after earlier readers */
    pthread_mutex_unlock(&b->mu);
    cdb_free(x);
}

/* Host src of dtype dt -> fp32 (into f32) or f16 (into h16), n elements. */
static void host_convert(const void *src, cdb_k_dtype dt, size_t n, float *f32, uint16_t *h16) {
    if (dt == CDB_K_F16 && h16) {
        memcpy(h16, src, n * 2);
        return;
    }
    if (dt == CDB_K_F32) {
        if (f32) memcpy(f32, src, n * 4);
        if (h16) cdb_k_f32_to_f16((const float *)src, h16, n);
        return;
    }
    if (dt == CDB_K_F16) { /* to f32 */
        cdb_k_f16_to_f32((const uint16_t *)src, f32, n);
        return;
    }
    /* BF16: the high half of a binary32 */
    for (size_t i = 0; i < n; i++) {
        uint16_t v;
        uint32_t u;
        float f;
        memcpy(&v, (const char *)src + 2 * i, 2);
        u = (uint32_t)v << 16;
        memcpy(&f, &u, 4);
        if (f32)
            f32[i] = f;
        else
            h16[i] = cdb_k_f32_to_f16_1(f);
    }
}

static cdb_status cuda_weight_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, size_t n,
                                     cdb_k_wrole role, int flags, cdb_k_buf **out) {
    void *tmp = NULL;
    /* fp16 storage: matrices, and F16 token tables (exact; lookup_add reads either) */
    int f32 = role != CDB_K_W_MATRIX && !(role == CDB_K_W_TABLE && dt == CDB_K_F16);
    size_t bytes = (n ? n : 1) * (f32 ? 4 : 2);
    OP_ENTER(be);
    (void)flags; /* device memory never aliases the host's: always copied */
    *out = NULL;
    NEED(src || n == 0, "weight_upload: NULL source");
    NEED(dt == CDB_K_F32 || dt == CDB_K_F16 || dt == CDB_K_BF16, "weight_upload: dtype %d",
         (int)dt);
    tmp = cdb_malloc(bytes);
    if (!tmp) {
        rc = cdb_seterr(CDB_NOMEM, "weight_upload: %zu bytes of host memory", bytes);
        goto done;
    }
    host_convert(src, dt, n, f32 ? (float *)tmp : NULL, f32 ? NULL : (uint16_t *)tmp);
    TRY(be_buf_new(b, n, bytes, f32, 1, out));
    if ((rc = cdb_kc_upload(b->c, (*out)->d, tmp, n * (f32 ? 4 : 2))) != CDB_OK) {
        cdb_kc_free(b->c, (*out)->d);
        cdb_free(*out);
        *out = NULL;
    }
done:
    cdb_free(tmp);
    OP_LEAVE();
}

/* The shape changes nothing here: fp16 row-major as every MATRIX weight. */
static cdb_status cuda_matrix_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt,
                                     int rows, int cols, int flags, cdb_k_buf **out) {
    if (rows <= 0 || cols <= 0) {
        *out = NULL;
        return cdb_seterr(CDB_INVALID, "matrix_upload: bad shape %dx%d", rows, cols);
    }
    return cuda_weight_upload(be, src, dt, (size_t)rows * cols, CDB_K_W_MATRIX, flags, out);
}

static cdb_status cuda_buf_upload(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                                  size_t n) {
    uint16_t *tmp = NULL;
    OP_ENTER(be);
    NEED(dst && off <= dst->n && n <= dst->n - off, "buf_upload: [%zu, +%zu) outside %zu elements",
         off, n, dst ? dst->n : 0);
    if (off == 0 && n == dst->n && dst->cap_bytes >= n * 4) dst->f32 = 1; /* whole rewrite */
    if (dst->f32) {
        TRY(cdb_kc_upload(b->c, (char *)dst->d + off * 4, src, n * 4));
    } else {
        tmp = (uint16_t *)cdb_malloc((n ? n : 1) * 2);
        if (!tmp) {
            rc = cdb_seterr(CDB_NOMEM, "buf_upload: host memory");
            goto done;
        }
        cdb_k_f32_to_f16(src, tmp, n);
        TRY(cdb_kc_upload(b->c, (char *)dst->d + off * 2, tmp, n * 2));
    }
done:
    cdb_free(tmp);
    OP_LEAVE();
}

static cdb_status cuda_buf_download(cdb_k_backend *be, const cdb_k_buf *src, size_t off,
                                    float *dst, size_t n) {
    uint16_t *tmp = NULL;
    OP_ENTER(be);
    NEED(src && off <= src->n && n <= src->n - off,
         "buf_download: [%zu, +%zu) outside %zu elements", off, n, src ? src->n : 0);
    if (src->f32) {
        TRY(cdb_kc_download(b->c, dst, (const char *)src->d + off * 4, n * 4));
    } else {
        tmp = (uint16_t *)cdb_malloc((n ? n : 1) * 2);
        if (!tmp) {
            rc = cdb_seterr(CDB_NOMEM, "buf_download: host memory");
            goto done;
        }
        TRY(cdb_kc_download(b->c, tmp, (const char *)src->d + off * 2, n * 2));
        cdb_k_f16_to_f32(tmp, dst, n);
    }
done:
    cdb_free(tmp);
    OP_LEAVE();
}

/* ---- operand helpers (caller holds mu) ---------------------------------------- */

/* x's first n elements as fp16: x itself, or a converted copy at *scratch
** (advanced past it). */
static cdb_status as_f16(cdb_kc_backend *b, const cdb_k_buf *x, size_t n, char **scratch,
                         const uint16_t **out) {
    cdb_status rc;
    if (!x->f32) {
        *out = (const uint16_t *)x->d;
        return CDB_OK;
    }
    if ((rc = cdb_kc_f32_to_f16(b->c, (const float *)x->d, (uint16_t *)*scratch, n)) != CDB_OK)
        return rc;
    *out = (const uint16_t *)*scratch;
    *scratch += (n * 2 + 255) & ~(size_t)255;
    return CDB_OK;
}

static size_t f16_copy_bytes(const cdb_k_buf *x, size_t n) {
    return x->f32 ? ((n * 2 + 255) & ~(size_t)255) : 0;
}

/* fp32 view of a parameter vector (copy into scratch when stored fp16). */
static cdb_status as_f32(cdb_kc_backend *b, const cdb_k_buf *x, size_t n, char **scratch,
                         const float **out) {
    cdb_status rc;
    if (!x) {
        *out = NULL;
        return CDB_OK;
    }
    if (x->f32) {
        *out = (const float *)x->d;
        return CDB_OK;
    }
    if ((rc = cdb_kc_f16_to_f32(b->c, (const uint16_t *)x->d, (float *)*scratch, n)) != CDB_OK)
        return rc;
    *out = (const float *)*scratch;
    *scratch += (n * 4 + 255) & ~(size_t)255;
    return CDB_OK;
}

static size_t f32_copy_bytes(const cdb_k_buf *x, size_t n) {
    return (x && !x->f32) ? ((n * 4 + 255) & ~(size_t)255) : 0;
}

/* Turns an activation holding fp16 into fp32 in place (through the scratch). */
static cdb_status promote_f32(cdb_kc_backend *b, cdb_k_buf *x) {
    cdb_status rc = CDB_OK;
    if (x->f32) return CDB_OK;
    if (x->cap_bytes < x->n * 4)
        return cdb_seterr(CDB_INVALID, "cuda backend: an fp16 weight cannot be written");
    if ((rc = cdb_kc_backend_ws(b, x->n * 2)) != CDB_OK) return rc;
    CDB_CUDA_CHECK(cudaMemcpyAsync(b->ws, x->d, x->n * 2, cudaMemcpyDeviceToDevice, b->c->compute));
    if ((rc = cdb_kc_f16_to_f32(b->c, (const uint16_t *)b->ws, (float *)x->d, x->n)) != CDB_OK)
        return rc;
    x->f32 = 1;
done:
    return rc;
}

/* ---- ops ------------------------------------------------------------------------ */

static cdb_status cuda_gemm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                            const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k,
                            cdb_k_act act, int accumulate) {
    char *sc;
    const uint16_t *xa, *wb;
    const float *bf;
    size_t need;
    OP_ENTER(be);
    NEED(x && w && y && m >= 0 && n >= 0 && k >= 0, "gemm: bad arguments");
    NEED(x->n >= (size_t)m * k && w->n >= (size_t)n * k && y->n >= (size_t)m * n &&
             (!bias || bias->n >= (size_t)n),
         "gemm: %dx%dx%d does not fit its buffers", m, n, k);
    NEED(!accumulate || act == CDB_K_ACT_NONE, "gemm: accumulate needs act none");
    NEED(x != y && !y->is_weight, "gemm: y must be a distinct activation buffer");
    if (accumulate) TRY(promote_f32(b, y));
    need = f16_copy_bytes(x, (size_t)m * k) + f16_copy_bytes(w, (size_t)n * k) +
           f32_copy_bytes(bias, (size_t)n);
    TRY(cdb_kc_backend_ws(b, need));
    sc = (char *)b->ws;
    TRY(as_f16(b, x, (size_t)m * k, &sc, &xa));
    TRY(as_f16(b, w, (size_t)n * k, &sc, &wb));
    TRY(as_f32(b, bias, (size_t)n, &sc, &bf));
    if (accumulate) {
        TRY(cdb_kc_gemm(b->c, m, n, k, xa, wb, 1, y->d, 1, 1.f, 1.f));
        TRY(cdb_kc_add_bias_f32(b->c, (float *)y->d, bf, m, n));
    } else {
        TRY(cdb_kc_gemm(b->c, m, n, k, xa, wb, 1, y->d, 0, 1.f, 0.f));
        y->f32 = 0;
        TRY(cdb_kc_bias_act(b->c, y->d, 0, bf, m, n, act));
    }
done:
    OP_LEAVE();
}

static cdb_status cuda_layernorm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *gamma,
                                 const cdb_k_buf *beta, cdb_k_buf *y, int m, int n, float eps) {
    char *sc;
    const float *g, *bt;
    int y_f32;
    OP_ENTER(be);
    NEED(x && y && m >= 0 && n > 0 && x->n >= (size_t)m * n && y->n >= (size_t)m * n,
         "layernorm: %d x %d does not fit its buffers", m, n);
    NEED(!y->is_weight, "layernorm: y is a weight");
    TRY(cdb_kc_backend_ws(b, f32_copy_bytes(gamma, n) + f32_copy_bytes(beta, n)));
    sc = (char *)b->ws;
    TRY(as_f32(b, gamma, (size_t)n, &sc, &g));
    TRY(as_f32(b, beta, (size_t)n, &sc, &bt));
    /* In place keeps the type; otherwise write fp16 (the next op is a GEMM). */
    y_f32 = (x == y) ? x->f32 : 0;
    TRY(cdb_kc_layernorm(b->c, x->d, x->f32, (size_t)n, y->d, y_f32, g, bt, m, n, eps));
    y->f32 = y_f32;
done:
    OP_LEAVE();
}

static cdb_status cuda_act(cdb_k_backend *be, cdb_k_buf *x, size_t n, cdb_k_act act) {
    OP_ENTER(be);
    NEED(x && n <= x->n && n <= (size_t)INT_MAX && !x->is_weight, "act: bad arguments");
    TRY(cdb_kc_bias_act(b->c, x->d, x->f32, NULL, 1, (int)n, act));
done:
    OP_LEAVE();
}

static cdb_status cuda_add(cdb_k_backend *be, cdb_k_buf *y, const cdb_k_buf *x, size_t n) {
    OP_ENTER(be);
    NEED(x && y && n <= x->n && n <= y->n && !y->is_weight, "add: bad arguments");
    TRY(promote_f32(b, y)); /* sums (residuals) are kept in fp32 */
    TRY(cdb_kc_add(b->c, y->d, y->f32, x->d, x->f32, n));
done:
    OP_LEAVE();
}

static cdb_status cuda_attention(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                 int batch, int seq, int heads, int head_dim, int causal) {
    size_t rows = (size_t)batch * seq, w = (size_t)heads * head_dim;
    OP_ENTER(be);
    NEED(qkv && out && qkv != out && batch >= 0 && seq > 0 && heads > 0 && head_dim > 0,
         "attention: bad arguments");
    NEED(qkv->n >= rows * 3 * w && out->n >= rows * w && !out->is_weight,
         "attention: %d x %d x %d x %d does not fit its buffers", batch, seq, heads, head_dim);
    TRY(cdb_kc_backend_ws(b, cdb_kc_attention_ws_bytes(batch, seq, heads, head_dim)));
    TRY(cdb_kc_attention(b->c, qkv->d, qkv->f32, (uint16_t *)out->d, batch, seq, heads, head_dim,
                         causal, b->ws));
    out->f32 = 0;
done:
    OP_LEAVE();
}

/* Uploads n host indices to b->d_idx (growing it). Caller holds mu. */
static cdb_status upload_idx(cdb_kc_backend *b, const int32_t *idx, int n) {
    cdb_status rc;
    if ((size_t)n > b->idx_cap) {
        void *p = NULL;
        size_t cap = (size_t)n + 1024;
        if ((rc = cdb_kc_sync(b->c)) != CDB_OK) return rc;
        cdb_kc_free(b->c, b->d_idx);
        b->d_idx = NULL;
        b->idx_cap = 0;
        if ((rc = cdb_kc_malloc(b->c, cap * 4, &p)) != CDB_OK) return rc;
        b->d_idx = (int32_t *)p;
        b->idx_cap = cap;
    }
    /* Synchronous: the previous op reading d_idx has finished when it returns. */
    return cdb_kc_upload(b->c, b->d_idx, idx, (size_t)n * 4);
}

static cdb_status cuda_lookup_add(cdb_k_backend *be, const cdb_k_buf *table,
                                  const cdb_k_buf *pos, const int32_t *ids, int n_rows, int period,
                                  int width, cdb_k_buf *out) {
    char *sc;
    const float *pf;
    OP_ENTER(be);
    NEED(table && out && ids && n_rows >= 0 && period > 0 && width > 0 &&
             out->n >= (size_t)n_rows * width && (!pos || pos->n >= (size_t)period * width),
         "lookup_add: bad arguments");
    for (int i = 0; i < n_rows; i++)
        NEED(ids[i] >= 0 && (size_t)ids[i] * width < table->n, "lookup_add: id %d out of range",
             ids[i]);
    TRY(cdb_kc_backend_ws(b, f32_copy_bytes(pos, (size_t)period * width)));
    sc = (char *)b->ws;
    TRY(as_f32(b, pos, (size_t)period * width, &sc, &pf));
    TRY(upload_idx(b, ids, n_rows));
    TRY(cdb_kc_lookup_add(b->c, table->d, table->f32, pf, b->d_idx, n_rows, period, width,
                          (float *)out->d));
    out->f32 = 1;
done:
    OP_LEAVE();
}

static cdb_status cuda_prepend_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *head,
                                   const cdb_k_buf *pos, int batch, int n, int width,
                                   cdb_k_buf *out) {
    char *sc;
    const float *hf, *pf;
    size_t tok = (size_t)n + 1;
    OP_ENTER(be);
    NEED(x && head && pos && out && batch >= 0 && n >= 0 && width > 0,
         "prepend_add: bad arguments");
    NEED(x->n >= (size_t)batch * n * width && head->n >= (size_t)width &&
             pos->n >= tok * width && out->n >= (size_t)batch * tok * width,
         "prepend_add: sizes do not fit the buffers");
    TRY(cdb_kc_backend_ws(b, f32_copy_bytes(head, width) + f32_copy_bytes(pos, tok * width)));
    sc = (char *)b->ws;
    TRY(as_f32(b, head, (size_t)width, &sc, &hf));
    TRY(as_f32(b, pos, tok * width, &sc, &pf));
    TRY(cdb_kc_prepend_add(b->c, x->d, x->f32, hf, pf, batch, n, width, (float *)out->d));
    out->f32 = 1;
done:
    OP_LEAVE();
}

static cdb_status cuda_gather_rows(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows,
                                   int n, int width, cdb_k_buf *out) {
    OP_ENTER(be);
    NEED(x && out && rows && n >= 0 && width > 0 && out->n >= (size_t)n * width && x != out,
         "gather_rows: bad arguments");
    for (int i = 0; i < n; i++)
        NEED(rows[i] >= 0 && ((size_t)rows[i] + 1) * width <= x->n,
             "gather_rows: row %d out of range", rows[i]);
    TRY(upload_idx(b, rows, n));
    TRY(cdb_kc_gather_rows(b->c, x->d, b->d_idx, n, width, x->f32 ? 4 : 2, out->d));
    out->f32 = x->f32;
done:
    OP_LEAVE();
}

/* ---- ModifiedResNet ops (NHWC) ------------------------------------------------- */

static cdb_status cuda_im2col(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                              int k, int stride, int pad, cdb_k_buf *cols) {
    size_t ho, wo;
    OP_ENTER(be);
    NEED(x && cols && x != cols && !cols->is_weight && n >= 0 && h > 0 && w > 0 && c > 0 &&
             k > 0 && stride > 0 && pad >= 0 && pad < k && h + 2 * pad >= k && w + 2 * pad >= k,
         "im2col: bad arguments");
    ho = (size_t)((h + 2 * pad - k) / stride + 1);
    wo = (size_t)((w + 2 * pad - k) / stride + 1);
    NEED(x->n >= (size_t)n * h * w * c && cols->n >= (size_t)n * ho * wo * k * k * c,
         "im2col: sizes do not fit the buffers");
    TRY(cdb_kc_im2col_nhwc(b->c, x->d, x->f32, n, h, w, c, k, stride, pad, (uint16_t *)cols->d));
    cols->f32 = 0; /* a GEMM operand */
done:
    OP_LEAVE();
}

static cdb_status cuda_patchify(cdb_k_backend *be, const cdb_k_buf *x, int n, int c, int h,
                                int w, int p, cdb_k_buf *cols) {
    OP_ENTER(be);
    NEED(x && cols && x != cols && !cols->is_weight && n >= 0 && c > 0 && p > 0 && h >= p &&
             w >= p,
         "patchify: bad arguments");
    NEED(x->n >= (size_t)n * c * h * w && cols->n >= (size_t)n * (h / p) * (w / p) * c * p * p,
         "patchify: sizes do not fit the buffers");
    TRY(cdb_kc_patchify(b->c, x->d, x->f32, n, c, h, w, p, (uint16_t *)cols->d));
    cols->f32 = 0; /* a GEMM operand */
done:
    OP_LEAVE();
}

static cdb_status cuda_avgpool(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                               int s, cdb_k_buf *out) {
    OP_ENTER(be);
    NEED(x && out && x != out && !out->is_weight && n >= 0 && h > 0 && w > 0 && c > 0 && s > 0 &&
             s <= h && s <= w,
         "avgpool: bad arguments");
    NEED(x->n >= (size_t)n * h * w * c && out->n >= (size_t)n * (h / s) * (w / s) * c,
         "avgpool: sizes do not fit the buffers");
    /* the output keeps the input's storage type */
    TRY(cdb_kc_avgpool_nhwc(b->c, x->d, x->f32, n, h, w, c, s, out->d, x->f32));
    out->f32 = x->f32;
done:
    OP_LEAVE();
}

static cdb_status cuda_prepend_mean_add(cdb_k_backend *be, const cdb_k_buf *x,
                                        const cdb_k_buf *pos, int batch, int n, int width,
                                        cdb_k_buf *out) {
    char *sc;
    const float *pf;
    size_t s = (size_t)n + 1;
    OP_ENTER(be);
    NEED(x && pos && out && x != out && !out->is_weight && batch >= 0 && n > 0 && width > 0,
         "prepend_mean_add: bad arguments");
    NEED(x->n >= (size_t)batch * n * width && pos->n >= s * width &&
             out->n >= (size_t)batch * s * width,
         "prepend_mean_add: sizes do not fit the buffers");
    TRY(cdb_kc_backend_ws(b, f32_copy_bytes(pos, s * width)));
    sc = (char *)b->ws;
    TRY(as_f32(b, pos, s * width, &sc, &pf));
    TRY(cdb_kc_prepend_mean_add(b->c, x->d, x->f32, pf, batch, n, width, (float *)out->d));
    out->f32 = 1;
done:
    OP_LEAVE();
}

static cdb_status cuda_attention_q(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                                   cdb_k_buf *out, int batch, int n_q, int seq, int heads,
                                   int head_dim) {
    size_t d = (size_t)heads * head_dim;
    OP_ENTER(be);
    NEED(q && kv && out && out != q && out != kv && !out->is_weight && batch >= 0 && n_q > 0 &&
             seq > 0 && heads > 0 && head_dim > 0,
         "attention_q: bad arguments");
    NEED(q->n >= (size_t)batch * n_q * d && kv->n >= (size_t)batch * seq * 2 * d &&
             out->n >= (size_t)batch * n_q * d,
         "attention_q: sizes do not fit the buffers");
    TRY(cdb_kc_attention_q(b->c, q->d, q->f32, kv->d, kv->f32, (uint16_t *)out->d, batch, n_q,
                           seq, heads, head_dim));
    out->f32 = 0;
done:
    OP_LEAVE();
}

/* Half the free device memory now, less cdb_k_batch_from_free's reserve, in MiB,
** clamped to [128 MiB, 8 GiB]; 128 MiB when the driver cannot say. Half: the graph's
** per-row estimate leaves out its input buffers (the pixels and the patch matrix of a
** ViT chunk take about as much again). */
static size_t cuda_scratch_bytes(cdb_k_backend *be) {
    cdb_kc_backend *b = (cdb_kc_backend *)be;
    size_t fr = 0;
    int mib = 128;
    pthread_mutex_lock(&b->mu);
    if (cdb_kc_ctx_bind(b->c) == CDB_OK && cdb_kc_mem_info(b->c, &fr, NULL) == CDB_OK)
        mib = cdb_k_batch_from_free(fr / 2, 0, (size_t)1 << 20, 8192);
    pthread_mutex_unlock(&b->mu);
    return (size_t)(mib > 128 ? mib : 128) << 20;
}

static cdb_status cuda_mem_info(cdb_k_backend *be, size_t *free_b, size_t *total_b) {
    OP_ENTER(be);
    TRY(cdb_kc_mem_info(b->c, free_b, total_b));
done:
    OP_LEAVE();
}

static cdb_status cuda_sync(cdb_k_backend *be) {
    OP_ENTER(be);
    TRY(cdb_kc_sync(b->c));
done:
    OP_LEAVE();
}

static void cuda_destroy(cdb_k_backend *be) {
    cdb_kc_backend *b = (cdb_kc_backend *)be;
    if (!b) return;
    if (b->c) {
        (void)cdb_kc_ctx_bind(b->c);
        cdb_kc_pp_stage_free(b);
        cdb_kc_jpeg_dec_free(b);
        cache_flush(b);
        cdb_kc_free(b->c, b->ws);
        cdb_kc_free(b->c, b->d_idx);
        cdb_kc_ctx_close(b->c);
    }
    pthread_mutex_destroy(&b->mu);
    cdb_free(b);
}

static const cdb_k_backend_ops g_cuda_ops = {
    "cuda",
    cuda_destroy,
    cuda_buf_alloc,
    cuda_buf_free,
    cuda_weight_upload,
    cuda_buf_upload,
    cuda_buf_download,
    cuda_gemm,
    cuda_layernorm,
    cuda_act,
    cuda_add,
    cuda_attention,
    NULL, /* attention_rows: every row, then the asked ones gathered (backend.c) */
    cuda_lookup_add,
    cuda_prepend_add,
    cuda_gather_rows,
    cuda_sync,
    cuda_im2col,
    cuda_avgpool,
    cuda_prepend_mean_add,
    cuda_attention_q,
    cuda_matrix_upload,
    cuda_patchify,
    cuda_scratch_bytes,
    NULL, /* no packed matrix layout: cuBLAS takes row-major fp16 */
    NULL,
    NULL,
    NULL,
    cdb_kc_backend_preprocess_u8,
    cdb_kc_backend_jpeg_preprocess,
    cdb_kc_backend_jpeg_on_device,
    cuda_mem_info,
};

extern "C" cdb_status cdb_k_backend_cuda_new(int device_index, cdb_k_backend **out) {
    cdb_status rc;
    cdb_kc_backend *b;
    *out = NULL;
    b = (cdb_kc_backend *)cdb_calloc(1, sizeof *b);
    if (!b) return cdb_seterr(CDB_NOMEM, "cuda backend: out of memory");
    b->base.ops = &g_cuda_ops;
    pthread_mutex_init(&b->mu, NULL);
    if ((rc = cdb_kc_ctx_open(device_index, &b->c)) != CDB_OK) {
        cuda_destroy(&b->base);
        return rc;
    }
    *out = &b->base;
    return CDB_OK;
}
